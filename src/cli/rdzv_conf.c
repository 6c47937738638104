/* rdzv_conf.c -- --rdzv-conf, the rendezvous' KEY=VALUE options, in one
 * place: the keys elrun knows, what each value must be, and where it goes
 * in struct el_opts_conf (see opts.h).  run_cmd.c only copies the parsed
 * values into the rendezvous config.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/opts.h"
#include "elrun/err.h"
#include "elrun/rdzv.h"

enum conf_kind {
    CONF_SECONDS, /* double >= 0, at most INT_MAX ms                     */
    CONF_COUNT,   /* whole number >= 1                                   */
    CONF_BOOL,    /* 1/true/yes, 0/false/no (the first letter decides)   */
    CONF_STRING
};

/* One row per key: its kind, its field, and what --help says of it (an
 * ignored key says so). */
static const struct conf_key {
    const char *key;
    enum conf_kind kind;
    size_t off;
    const char *help;
} conf_keys[] = {
#define K(name, kind, help)                                    \
    {                                                          \
#name, kind, offsetof(struct el_opts_conf, name), help \
    }
    K(timeout, CONF_SECONDS,
      "wait for the nodes [static 900; else "
      "join_timeout]"),
    K(join_timeout, CONF_SECONDS,
      "c10d, etcd: the whole wait for a round "
      "[600]"),
    K(read_timeout, CONF_SECONDS, "one store or etcd request [60]"),
    K(last_call_timeout, CONF_SECONDS,
      "c10d, etcd: wait once MIN nodes "
      "joined [30]"),
    K(keep_alive_interval, CONF_SECONDS, "c10d, etcd: heartbeat period [5]"),
    K(heartbeat_timeout, CONF_SECONDS,
      "accepted for compatibility, "
      "ignored"),
    K(close_timeout, CONF_SECONDS, "accepted for compatibility, ignored"),
    K(keep_alive_max_attempt, CONF_COUNT,
      "c10d, etcd: missed heartbeats = "
      "dead node [3]"),
    K(is_host, CONF_BOOL,
      "c10d: host the store [when the endpoint "
      "is here]"),
    K(etcd_prefix, CONF_STRING, "etcd: the keys' prefix [/elrun]"),
    K(protocol, CONF_STRING, "etcd: http or https [http]"),
    K(cacert, CONF_STRING, "etcd: the CA certificate (PEM file)"),
    K(cert, CONF_STRING, "etcd: this client's certificate (PEM file)"),
    K(key, CONF_STRING, "etcd: its private key (PEM file)"),
    K(username, CONF_STRING, "etcd: user name"),
    K(password, CONF_STRING, "etcd: password"),
    K(secret_file, CONF_STRING,
      "c10d, static: the job secret (a 0600 "
      "file)"),
    K(secret, CONF_STRING, "refused: ps would show it; use secret_file"),
#undef K
};
#define NKEYS (sizeof conf_keys / sizeof conf_keys[0])

void el__opts_rdzv_conf_help(FILE *out)
{
    static const char *const kinds[] = {"S", "N", "BOOL", "STR"};
    for (size_t i = 0; i < NKEYS; i++) {
        char kv[48];
        snprintf(kv, sizeof kv, "%s=%s", conf_keys[i].key,
                 kinds[conf_keys[i].kind]);
        fprintf(out, "    %-24s %s\n", kv, conf_keys[i].help);
    }
}

const char *el__opts_rdzv_conf_key(size_t i)
{
    return i < NKEYS ? conf_keys[i].key : NULL;
}

/* [b, e) without the spaces around it, NUL-terminated in place. */
static char *trim(char *b, char *e)
{
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    *e = 0;
    return b;
}

static int set_value(struct el_opts_conf *c, const struct conf_key *k,
                     const char *v, char *err, size_t errlen)
{
    void *field = (char *)c + k->off;
    char *end;
    double d;
    switch (k->kind) {
    case CONF_SECONDS:
        d = strtod(v, &end);
        if (end == v || *end || !(d >= 0) || d > 2147483.0)
            return el__opts_fail(err, errlen,
                                 "--rdzv-conf %s=%s: expected "
                                 "seconds",
                                 k->key, v);
        *(double *)field = d;
        return 0;
    case CONF_COUNT: {
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 1 || n > 1000000)
            return el__opts_fail(err, errlen,
                                 "--rdzv-conf %s=%s: expected a "
                                 "whole number >= 1",
                                 k->key, v);
        *(int *)field = (int)n;
        return 0;
    }
    case CONF_BOOL:
        if (strchr("1tTyY", v[0]))
            *(int *)field = 1;
        else if (strchr("0fFnN", v[0]))
            *(int *)field = -1;
        else
            return el__opts_fail(err, errlen,
                                 "--rdzv-conf %s=%s: expected "
                                 "true or false",
                                 k->key, v);
        return 0;
    case CONF_STRING:
        *(const char **)field = v;
        return 0;
    }
    return 0;
}

/* Has key k been given already (the first one wins)? */
static int given(const struct el_opts_conf *c, const struct conf_key *k)
{
    const void *field = (const char *)c + k->off;
    switch (k->kind) {
    case CONF_SECONDS:
        return *(const double *)field >= 0;
    case CONF_COUNT:
    case CONF_BOOL:
        return *(const int *)field != 0;
    case CONF_STRING:
        return *(const char *const *)field != NULL;
    }
    return 0;
}

int el_opts_rdzv_conf(const char *spec, const char *src, struct el_opts_conf *c,
                      char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->timeout = c->join_timeout = c->read_timeout = c->last_call_timeout =
        c->keep_alive_interval = c->heartbeat_timeout = c->close_timeout = -1;
    if (strlen(spec) >= sizeof c->buf)
        return el__opts_fail(err, errlen, "%s is %zu bytes long; at most %zu",
                             src, strlen(spec), sizeof c->buf - 1);
    memcpy(c->buf, spec, strlen(spec) + 1);
    for (char *p = c->buf; *p;) {
        size_t len = strcspn(p, ",");
        char *next = p[len] ? p + len + 1 : p + len;
        char *eq = memchr(p, '=', len);
        char *k = eq ? trim(p, eq) : NULL;
        char *v = eq ? trim(eq + 1, p + len) : NULL;
        if (!eq || !*k || !*v)
            return el__opts_fail(err, errlen,
                                 "%s=%s: expected KEY=VALUE "
                                 "pairs separated by commas, e.g. "
                                 "timeout=900,join_timeout=600",
                                 src, spec);
        for (size_t i = 0; i < NKEYS; i++) {
            if (strcmp(conf_keys[i].key, k) != 0 || given(c, &conf_keys[i]))
                continue;
            int rc = set_value(c, &conf_keys[i], v, err, errlen);
            if (rc)
                return rc;
        }
        p = next;
    }
    if (c->keep_alive_interval >= 0 && c->keep_alive_interval < 0.001)
        return el__opts_fail(err, errlen,
                             "--rdzv-conf keep_alive_interval "
                             "must be more than 0 seconds");
    return 0;
}

void el_opts_etcd_config(const struct el_opts_conf *c,
                         struct el_rdzv_config *rc)
{
    rc->etcd.prefix = c->etcd_prefix;
    rc->etcd.protocol = c->protocol;
    rc->etcd.cacert = c->cacert;
    rc->etcd.cert = c->cert;
    rc->etcd.key = c->key;
    rc->etcd.user = c->username;
    rc->etcd.password = c->password;
}
