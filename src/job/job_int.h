/* job_int.h -- what the job layer's files share (private to src/job). */
#ifndef ELRUN_JOB_INT_H
#define ELRUN_JOB_INT_H

#include "elrun/job.h"

/* The value of name in env (a NULL-terminated "K=V" array), or NULL. */
const char *el__job_env_get(char **env, const char *name);

/* Add name=value (taken from 'from') to d unless env already sets name
 * (the user's PET_* or flag wins) or d is full.  extends: the value is
 * built on env's own, so it is added anyway and replaces it. */
void el__job_env_add(struct el_job_env_defaults *d, char **env,
                     const char *name, const char *value, const char *from,
                     int extends);

#endif
