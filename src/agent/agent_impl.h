/* agent_impl.h -- helpers shared by the agent's files (private to
 * src/agent): failure records and small file utilities.
 */
#ifndef ELRUN_AGENT_IMPL_H
#define ELRUN_AGENT_IMPL_H

#include "elrun/agent.h"

#define EL__MAX_WORKERS_STACK 256

/* Fill f->error_file / error_json / message / timestamp from the worker's
 * error file at path (torch's ProcessFailure rules); without a file, the
 * message says which signal killed the worker or how to get a traceback.
 * f->exitcode, pid and timestamp (= detection time) must be set. */
void el__agent_read_error_file(struct el_agent_failure *f, const char *path);

/* Free res->failures and their strings. */
void el__agent_free_failures(struct el_agent_result *res);

int el__rm_rf(const char *path);
int el__mkdir_p(const char *path);

#endif
