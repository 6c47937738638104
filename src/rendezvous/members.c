/* members.c -- what the elastic backends share (see elastic.h): this
 * node's identity and round, member lists, expect lists, change summaries.
 * No I/O, no store.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elrun/err.h"
#include "rendezvous/elastic.h"

int el__rdzv_parse_members(const char *text, struct el__rdzv_member **out,
                           int *n)
{
    int cap = 16, count = 0;
    const char *p = strchr(text, '\n');
    if (strncmp(text, "v1 ", 3) != 0 || !p)
        return EL_EFORMAT;
    struct el__rdzv_member *m = malloc((size_t)cap * sizeof *m);
    if (!m)
        return -ENOMEM;
    for (p++; *p;) {
        const char *end = strchr(p, '\n');
        if (!end)
            end = p + strlen(p);
        if (count == cap) {
            cap *= 2;
            struct el__rdzv_member *q = realloc(m, (size_t)cap * sizeof *m);
            if (!q) {
                free(m);
                return -ENOMEM;
            }
            m = q;
        }
        struct el__rdzv_member *x = &m[count];
        char line[EL__RDZV_ID_MAX + EL_HOST_MAX + 64];
        size_t len = (size_t)(end - p) < sizeof line - 1 ? (size_t)(end - p)
                                                         : sizeof line - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        memset(x, 0, sizeof *x);
        x->prev_rank = -1;
        if (sscanf(line, "%191s %d %255s %d %" SCNd64, x->id, &x->lws, x->name,
                   &x->port, &x->lease) < 3) {
            free(m);
            return EL_EFORMAT;
        }
        count++;
        p = *end ? end + 1 : end;
    }
    *out = m;
    *n = count;
    return 0;
}

char *el__rdzv_format_members(int64_t round, const struct el__rdzv_member *m,
                              int n, int with_store, size_t *len)
{
    size_t cap = 64 + (size_t)n * (EL__RDZV_ID_MAX + EL_HOST_MAX + 64);
    char *list = malloc(cap);
    if (!list)
        return NULL;
    size_t l = (size_t)snprintf(list, cap, "v1 %" PRId64 "\n", round);
    for (int i = 0; i < n; i++) {
        if (with_store)
            l += (size_t)snprintf(list + l, cap - l,
                                  "%s %d %s %d %" PRId64 "\n", m[i].id,
                                  m[i].lws, m[i].name, m[i].port, m[i].lease);
        else
            l += (size_t)snprintf(list + l, cap - l, "%s %d %s\n", m[i].id,
                                  m[i].lws, m[i].name);
    }
    *len = l;
    return list;
}

int el__rdzv_seal_list(int64_t round, struct el__rdzv_member *m, int n,
                       int min_nodes, int max_nodes, int with_store,
                       char **list, size_t *len)
{
    *list = NULL;
    if (n < min_nodes)
        return 1;
    qsort(m, (size_t)n, sizeof *m, el__rdzv_member_order);
    if (n > max_nodes)
        n = max_nodes;
    *list = el__rdzv_format_members(round, m, n, with_store, len);
    return *list ? 0 : -ENOMEM;
}

int el__rdzv_member_order(const void *a, const void *b)
{
    const struct el__rdzv_member *x = a, *y = b;
    int xs = x->prev_rank >= 0, ys = y->prev_rank >= 0;
    if (xs != ys)
        return ys - xs;
    if (xs && x->prev_rank != y->prev_rank)
        return x->prev_rank < y->prev_rank ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_id(const void *a, const void *b)
{
    return strcmp((*(const struct el__rdzv_member *const *)a)->id,
                  (*(const struct el__rdzv_member *const *)b)->id);
}

/* The labels of the members of 'a' that are not in 'b' (both sorted by
 * id). */
static void list_missing(const struct el__rdzv_member **a, int na,
                         const struct el__rdzv_member **b, int nb, char *buf,
                         size_t cap)
{
    size_t len = 0;
    int j = 0;
    buf[0] = '\0';
    for (int i = 0; i < na; i++) {
        while (j < nb && strcmp(b[j]->id, a[i]->id) < 0)
            j++;
        if (j < nb && strcmp(b[j]->id, a[i]->id) == 0)
            continue;
        if (len > cap - 80) {
            snprintf(buf + len, cap - len, ", ...");
            return;
        }
        char label[EL__RDZV_LABEL_MAX];
        el__rdzv_label(a[i]->id, label, sizeof label);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
                                label);
        if (len >= cap)
            len = cap - 1; /* truncated: the check above ends the list */
    }
    if (!len)
        snprintf(buf, cap, "-");
}

void el__rdzv_round_change(const struct el__rdzv_member *old, int nold,
                           const struct el__rdzv_member *now, int n,
                           char *joined, size_t jcap, char *left, size_t lcap)
{
    const struct el__rdzv_member **a = malloc((size_t)(n + 1) * sizeof *a);
    const struct el__rdzv_member **b = malloc((size_t)(nold + 1) * sizeof *b);
    snprintf(joined, jcap, "?");
    snprintf(left, lcap, "?");
    if (a && b) {
        for (int i = 0; i < n; i++)
            a[i] = &now[i];
        for (int i = 0; i < nold; i++)
            b[i] = &old[i];
        qsort(a, (size_t)n, sizeof *a, by_id);
        qsort(b, (size_t)nold, sizeof *b, by_id);
        list_missing(a, n, b, nold, joined, jcap);
        list_missing(b, nold, a, n, left, lcap);
    }
    free(a);
    free(b);
}

char *el__rdzv_expect_list(const struct el__rdzv_member *m, int n,
                           const char *extra,
                           int (*alive)(void *arg, const char *id), void *arg)
{
    size_t cap = 32 + (size_t)(n + 1) * (EL__RDZV_ID_MAX + 1), len = 32;
    char *list = malloc(cap);
    int count = 0;
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (alive && !alive(arg, m[i].id))
            continue;
        len += (size_t)snprintf(list + len, cap - len, "%s\n", m[i].id);
        count++;
    }
    if (extra) {
        len += (size_t)snprintf(list + len, cap - len, "%s\n", extra);
        count++;
    }
    /* Put the count in front of the ids. */
    char head[32];
    int hl = snprintf(head, sizeof head, "%d\n", count);
    memmove(list + hl, list + 32, len - 32 + 1);
    memcpy(list, head, (size_t)hl);
    return list;
}

int el__rdzv_parse_failure(const char *val, size_t len, int64_t *round,
                           char *id, size_t cap)
{
    char buf[EL__RDZV_ID_MAX + 32], who[EL__RDZV_ID_MAX];
    if (!val || len >= sizeof buf)
        return 0;
    memcpy(buf, val, len);
    buf[len] = '\0';
    if (sscanf(buf, "%" SCNd64 " %191s", round, who) != 2)
        return 0;
    snprintf(id, cap, "%s", who);
    return 1;
}

int el__rdzv_expected(const char *list, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = strchr(list, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
        if (strncmp(p + 1, id, n) == 0 && p[1 + n] == '\n')
            return 1;
    return 0;
}

void el__rdzv_node_init(struct el__rdzv_node *self,
                        const struct el_rdzv_config *cfg)
{
    memset(self, 0, sizeof *self);
    if (cfg->local_addr && *cfg->local_addr)
        snprintf(self->name, sizeof self->name, "%s", cfg->local_addr);
    else if (gethostname(self->name, sizeof self->name) != 0)
        snprintf(self->name, sizeof self->name, "node");
    for (char *p = self->name; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '/')
            *p = '_';
    el__rdzv_node_new_id(self);
    self->round = -1;
    self->rank = -1;
    self->joined_round = -1;
    self->on_event = cfg->on_event;
    self->event_arg = cfg->event_arg;
}

void el__rdzv_node_new_id(struct el__rdzv_node *self)
{
    static atomic_uint counter; /* two ids of one process never collide */
    unsigned rnd = (unsigned)(el_now_ns() ^ ((long long)getpid() << 16)) +
                   atomic_fetch_add(&counter, 0x9e3779b9u);
    snprintf(self->id, sizeof self->id, "%.150s#%d#%08x", self->name,
             (int)getpid(), rnd);
    el__rdzv_label(self->id, self->label, sizeof self->label);
}

void el__rdzv_label(const char *id, char *buf, size_t cap)
{
    const char *name_end = strchr(id, '#');
    const char *rnd = strrchr(id, '#');
    size_t rl = rnd ? strlen(rnd + 1) : 0;
    if (!name_end || rnd == name_end || rl < 4) {
        snprintf(buf, cap, "%s", id);
        return;
    }
    snprintf(buf, cap, "%.*s/%s", (int)(name_end - id), id, rnd + 1 + rl - 4);
}

void el_rdzv_label(const char *id, char *buf, size_t cap)
{
    el__rdzv_label(id, buf, cap);
}

void el__rdzv_node_free(struct el__rdzv_node *self)
{
    free(self->members);
    self->members = NULL;
    self->nmembers = 0;
}

void el__rdzv_note(const struct el__rdzv_node *self, const char *fmt, ...)
{
    if (!self->on_event)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    self->on_event(self->event_arg, msg);
}

void el__rdzv_take_round(struct el__rdzv_node *self, int64_t round,
                         struct el__rdzv_member *m, int n, int me,
                         struct el_rdzv_info *info)
{
    char joined[512], left[512];
    el__rdzv_round_change(self->members, self->nmembers, m, n, joined,
                          sizeof joined, left, sizeof left);
    el__rdzv_note(self,
                  "round %" PRId64 ": %d nodes (joined: %s; left: %s); "
                  "this node (%s) is rank %d",
                  round, n, joined, left, self->label, me);
    int base_rank = 0, world = 0;
    for (int i = 0; i < n; i++) {
        if (i < me)
            base_rank += m[i].lws;
        world += m[i].lws;
    }
    free(self->members);
    self->members = m;
    self->nmembers = n;
    self->round = round;
    self->rank = me;
    self->joined_round = -1;
    self->spare_logged = 0;
    memset(info, 0, sizeof *info);
    info->round = round;
    info->node_rank = me;
    info->num_nodes = n;
    info->base_rank = base_rank;
    info->world_size = world;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        int k = snprintf(info->members + used, sizeof info->members - used,
                         "%s %d\n", m[i].id, m[i].lws);
        if (k < 0 || (size_t)k >= sizeof info->members - used) {
            info->members[used] = 0;
            break;
        }
        used += (size_t)k;
    }
}

long long el__rdzv_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
