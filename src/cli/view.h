/* view.h -- what `elrun events` and `elrun status` share (private to
 * src/cli): the flags that name a job's rendezvous, turned into the
 * el_rdzv_config the readers take, and the wait that obeys SIGINT/SIGTERM.
 */
#ifndef ELRUN_CLI_VIEW_H
#define ELRUN_CLI_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "cli/opts.h"
#include "elrun/net.h"
#include "elrun/rdzv.h"
#include "elrun/store.h"

struct cli_view {
    const char *verb;     /* "events", "status"                   */
    const char *endpoint; /* --rdzv-endpoint                      */
    const char *run_id;   /* --rdzv-id                            */
    const char *backend;  /* --rdzv-backend [c10d]                */
    const char *conf;     /* --rdzv-conf                          */
    struct el_opts_conf oc;
    struct el_rdzv_config rc;
    char host[EL_HOST_MAX];
    uint8_t secret[EL_STORE_SECRET_MAX + 1];
    int sigfd; /* SIGINT, SIGTERM (blocked), -1: none */
    /* From a job handle (cli_view_handle): */
    char h_endpoint[300], h_id[200], h_backend[16];
    const char *handle;
};

/* Take argv[*i] (and its value) if it is one of the rendezvous flags
 * (--rdzv-endpoint, --rdzv-id, --rdzv-backend, --rdzv-conf, "=" or a
 * separate value, '-' or '_'): 1 taken (*i moved past it), 0 not one of
 * them, -1 a usage error (printed). */
int cli_view_flag(struct cli_view *v, int argc, char **argv, int *i);

/* argv[*i] as "--name=value" or "--name value" ('-' or '_' inside the
 * name): 1 with *val set (*i on the value when it was separate), 0 not that
 * flag, -1 its value is missing. */
int cli_flag_value(const char *arg, const char *name, int argc, char **argv,
                   int *i, const char **val);

/* Check the flags and fill v->rc (secret_file from --rdzv-conf or
 * ELRUN_SECRET_FILE); block SIGINT and SIGTERM into v->sigfd.  0, or 2 after
 * printing a usage error. */
int cli_view_finish(struct cli_view *v);

/* Take the endpoint, id and backend of a job of `elrun submit -s local`
 * (HANDLE as it printed): its job directory's store.addr (c10d) or spec
 * (etcd), and the id of its newest attempt that has a rendezvous.  Call
 * after cli_view_finish found no --rdzv flags (it does: v->handle).  0, or 2
 * after printing what is missing. */
int cli_view_handle(struct cli_view *v);

struct el_event;
struct el_events_log;

/* Give the job's history in lg to fn, oldest first, in batches: its events
 * from the start (the last last_n when last_n > 0), then, with follow, the
 * new ones as they come (waiting in the store or on an etcd watch) until
 * SIGINT/SIGTERM (v->sigfd, set as lg's cancel fd here).  Blocks.  An error
 * is one line "elrun VERB: error: ..." on stderr.  Returns the exit code: 0
 * (read; or a signal while following), 1 (the history could not be read, or
 * was lost while following). */
int cli_view_follow(struct cli_view *v, struct el_events_log *lg, int last_n,
                    int follow,
                    void (*fn)(void *arg, const struct el_event *evs, int n),
                    void *arg);

/* Wait up to ms for SIGINT/SIGTERM: 1 when one came. */
int cli_view_signaled(struct cli_view *v, int ms);

#endif
