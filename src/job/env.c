/* env.c -- the PET_* defaults a scheduler's environment gives the launcher
 * (el_job_slurm_defaults, el_job_aws_batch_defaults): reading an
 * environment array and adding to the list. */
#include <stdio.h>
#include <string.h>

#include "job/job_int.h"

const char *el__job_env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

void el__job_env_add(struct el_job_env_defaults *d, char **env,
                     const char *name, const char *value, const char *from,
                     int extends)
{
    int cap = (int)(sizeof d->var / sizeof d->var[0]);
    if ((!extends && el__job_env_get(env, name)) || d->n >= cap)
        return;
    int i = d->n++;
    snprintf(d->var[i].name, sizeof d->var[i].name, "%s", name);
    snprintf(d->var[i].value, sizeof d->var[i].value, "%s", value);
    snprintf(d->var[i].from, sizeof d->var[i].from, "%s", from);
    d->var[i].extends = extends;
}
