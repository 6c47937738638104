/* rdzv.c -- the rendezvous interface (see include/elrun/rdzv.h): dispatches
 * every call through the backend's ops table, so the agent never knows which
 * backend it runs on.  The backends are picked by name in backends.c; this
 * file knows none of them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "rendezvous/rdzv_impl.h"

int el__rdzv_fail(struct el_rdzv *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    el__verrf(r->errmsg, sizeof r->errmsg, rc, fmt, ap);
    va_end(ap);
    return rc;
}

int el_rdzv_next(struct el_rdzv *r, int lws, int cancel_fd,
                 struct el_rdzv_info *info)
{
    r->errmsg[0] = 0;
    return r->ops->next(r, lws, cancel_fd, info);
}

int el_rdzv_num_nodes_waiting(struct el_rdzv *r, int *n)
{
    return r->ops->num_nodes_waiting(r, n);
}

int el_rdzv_notify_fd(struct el_rdzv *r)
{
    return r->ops->notify_fd ? r->ops->notify_fd(r) : -1;
}

void el_rdzv_ack_notify(struct el_rdzv *r)
{
    if (r->ops->ack_notify)
        r->ops->ack_notify(r);
}

int el_rdzv_exit_barrier(struct el_rdzv *r, int succeeded, int timeout_ms,
                         int cancel_fd)
{
    return r->ops->exit_barrier(r, succeeded, timeout_ms, cancel_fd);
}

int el_rdzv_report_failure(struct el_rdzv *r, const char *why)
{
    r->errmsg[0] = 0;
    return r->ops->report_failure ? r->ops->report_failure(r, why) : -ENOTSUP;
}

int el_rdzv_joiners(struct el_rdzv *r, char *buf, size_t cap)
{
    if (cap)
        buf[0] = '\0';
    return r->ops->joiners ? r->ops->joiners(r, buf, cap) : -1;
}

int el_rdzv_set_closed(struct el_rdzv *r)
{
    return r->ops->set_closed(r);
}

void el_rdzv_close(struct el_rdzv *r)
{
    if (r)
        r->ops->close(r);
}

const char *el_rdzv_errmsg(const struct el_rdzv *r)
{
    return r->errmsg[0] ? r->errmsg : "no error";
}

const char *el_rdzv_backend(const struct el_rdzv *r)
{
    return r->ops->name;
}

int el_rdzv_members(struct el_rdzv *r, int64_t *round,
                    struct el_rdzv_member_info **m, int *n)
{
    *m = NULL;
    *n = 0;
    *round = -1;
    return r->ops->members ? r->ops->members(r, round, m, n) : -ENOTSUP;
}

int el_rdzv_is_dead(struct el_rdzv *r, const char *id)
{
    return r->ops->is_dead ? r->ops->is_dead(r, id) : 0;
}

int el_rdzv_failure(struct el_rdzv *r, int64_t round,
                    struct el_rdzv_member_info *who)
{
    memset(who, 0, sizeof *who);
    if (!r->ops->failure)
        return -ENOTSUP;
    int rc = r->ops->failure(r, round, who->id, sizeof who->id);
    if (rc != 1)
        return rc;
    size_t n = strcspn(who->id, "#");
    snprintf(who->name, sizeof who->name, "%.*s", (int)n, who->id);
    el_rdzv_label(who->id, who->label, sizeof who->label);
    return 1;
}

int el_rdzv_status_read(const struct el_rdzv_config *cfg,
                        struct el_rdzv_status *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    st->round = st->members_round = -1;
    if (errlen)
        err[0] = 0;
    const char *b = cfg->backend ? cfg->backend : "";
    if (!strcmp(b, "c10d"))
        return el__rdzv_store_status(cfg, st, err, errlen);
    if (!strcmp(b, "etcd") || !strcmp(b, "etcd-v2"))
        return el__rdzv_etcd_status(cfg, st, err, errlen);
    return el__errf(err, errlen, EL_EUSAGE,
                    "the status of a job needs the c10d or etcd rendezvous "
                    "(got '%s')",
                    b);
}

void el_rdzv_status_free(struct el_rdzv_status *st)
{
    free(st->members);
    st->members = NULL;
    st->nmembers = 0;
}
