/* rdzv_impl.h -- what a rendezvous backend implements (private to
 * src/rendezvous).  Each backend embeds struct el_rdzv as its first member
 * and fills in an ops table; rdzv.c dispatches the public calls to it and
 * picks the backend by name from the table in rdzv.c.
 */
#ifndef ELRUN_RDZV_IMPL_H
#define ELRUN_RDZV_IMPL_H

#include <stddef.h>

#include "elrun/rdzv.h"

struct el_rdzv_ops {
    const char *name;
    int (*next)(struct el_rdzv *r, int lws, int cancel_fd,
                struct el_rdzv_info *info);
    int (*num_nodes_waiting)(struct el_rdzv *r, int *n);
    int (*notify_fd)(struct el_rdzv *r);
    void (*ack_notify)(struct el_rdzv *r);
    int (*exit_barrier)(struct el_rdzv *r, int succeeded, int timeout_ms,
                        int cancel_fd);
    int (*set_closed)(struct el_rdzv *r);
    int (*report_failure)(struct el_rdzv *r, const char *why); /* optional */
    void (*close)(struct el_rdzv *r);
};

struct el_rdzv {
    const struct el_rdzv_ops *ops;
    char errmsg[256];
};

/* A backend's constructor: the same contract as el_rdzv_open. */
typedef int (*el_rdzv_open_fn)(struct el_rdzv **out,
                               const struct el_rdzv_config *cfg, char *err,
                               size_t errlen);

int el__rdzv_static_open(struct el_rdzv **out,
                         const struct el_rdzv_config *cfg, char *err,
                         size_t errlen);
int el__rdzv_dynamic_open(struct el_rdzv **out,
                          const struct el_rdzv_config *cfg, char *err,
                          size_t errlen);

/* printf into r->errmsg; returns rc. */
int el__rdzv_fail(struct el_rdzv *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
