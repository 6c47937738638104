/* backends.c -- the table of rendezvous backends, the one place their names
 * are listed: el_rdzv_open() picks a constructor here, and the launcher asks
 * el_rdzv_backend_known() / el_rdzv_backend_list() to check --rdzv-backend.
 * A new backend adds one row.  rdzv.c (dispatch) does not know this table;
 * the backends do not know it either.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "elrun/err.h"
#include "rendezvous/rdzv_impl.h"

/* c10d: more than one node is the elastic rendezvous on the elrun store
 * (state_store.c); one node runs as standalone at the endpoint (static.c),
 * unless the store is someone else's: told so (is_host=0), or, as torch
 * does when it only guessed that it hosts, when the port is taken (an
 * `elrun store`, another job's agent) or the address is another host's:
 * then it joins the rendezvous there as a client. */
static int c10d_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                     char *err, size_t errlen)
{
    if (cfg->max_nodes > 1 || cfg->is_host < 0)
        return el__rdzv_store_open(out, cfg, err, errlen);
    int rc = el__rdzv_static_open(out, cfg, err, errlen);
    if ((rc == -EADDRINUSE || rc == -EADDRNOTAVAIL) && cfg->is_host == 0)
        return el__rdzv_store_open(out, cfg, err, errlen);
    return rc;
}

static const struct {
    const char *name;
    el_rdzv_open_fn open;
    int user; /* a --rdzv-backend value (else internal)    */
} backends[] = {
    {"static", el__rdzv_static_open, 1},     {"c10d", c10d_open, 1},
    {"etcd", el__rdzv_etcd_open, 1},         {"etcd-v2", el__rdzv_etcd_open, 1},
    {"standalone", el__rdzv_static_open, 0}, /* --standalone */
};

#define NBACKENDS (sizeof backends / sizeof backends[0])

int el_rdzv_backend_known(const char *name)
{
    for (size_t i = 0; name && i < NBACKENDS; i++)
        if (backends[i].user && strcmp(name, backends[i].name) == 0)
            return 1;
    return 0;
}

void el_rdzv_backend_list(char *buf, size_t cap)
{
    size_t n = 0;
    if (!cap)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < NBACKENDS && n < cap; i++)
        if (backends[i].user)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "",
                                  backends[i].name);
}

int el_rdzv_open(struct el_rdzv **out, const struct el_rdzv_config *cfg,
                 char *err, size_t errlen)
{
    for (size_t i = 0; i < NBACKENDS; i++)
        if (cfg->backend && strcmp(cfg->backend, backends[i].name) == 0)
            return backends[i].open(out, cfg, err, errlen);
    char names[128];
    el_rdzv_backend_list(names, sizeof names);
    snprintf(err, errlen, "unknown rendezvous backend '%s' (known: %s)",
             cfg->backend ? cfg->backend : "(null)", names);
    return EL_EUSAGE;
}
