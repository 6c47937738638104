/* table.c -- chained hash map of the store's keys (see table.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/table.h"

/* FNV-1a, 64 bit: keys are short paths; good enough and branch-free. */
static uint64_t hash_key(const uint8_t *k, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= k[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

int el__table_init(struct el_table *t)
{
    memset(t, 0, sizeof *t);
    t->nbuckets = 1024;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    return t->buckets ? 0 : -ENOMEM;
}

void el__table_free(struct el_table *t)
{
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct el_entry *e = t->buckets[i], *n;
        for (; e; e = n) {
            n = e->next;
            free(e->val);
            free(e);
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof *t);
}

struct el_entry *el__table_find(const struct el_table *t, const uint8_t *key,
                                size_t klen)
{
    uint64_t h = hash_key(key, klen);
    for (struct el_entry *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    return NULL;
}

static void grow(struct el_table *t)
{
    size_t n = t->nbuckets * 2;
    struct el_entry **b = calloc(n, sizeof *b);
    if (!b)
        return; /* keep going with longer chains */
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct el_entry *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

struct el_entry *el__table_get_or_add(struct el_table *t, const uint8_t *key,
                                      size_t klen)
{
    struct el_entry *e = el__table_find(t, key, klen);
    if (e)
        return e;
    e = calloc(1, sizeof *e + klen + 1);
    if (!e)
        return NULL;
    e->hash = hash_key(key, klen);
    e->klen = klen;
    memcpy(e->key, key, klen);
    if (t->nentries >= t->nbuckets)
        grow(t);
    size_t b = e->hash & (t->nbuckets - 1);
    e->next = t->buckets[b];
    t->buckets[b] = e;
    t->nentries++;
    return e;
}

void el__table_maybe_drop(struct el_table *t, struct el_entry *e)
{
    if (e->present || e->waiters || e->pin)
        return;
    struct el_entry **pp = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->next;
        t->nentries--;
        free(e->val);
        free(e);
    }
}

int el__table_set_value(struct el_table *t, struct el_entry *e,
                        const uint8_t *val, size_t vlen)
{
    uint8_t *copy = NULL;
    if (vlen) {
        copy = malloc(vlen);
        if (!copy)
            return -ENOMEM;
        memcpy(copy, val, vlen);
    }
    free(e->val);
    if (e->present)
        t->data -= e->klen + e->vlen;
    e->val = copy;
    e->vlen = vlen;
    t->data += e->klen + vlen;
    if (!e->present) {
        e->present = 1;
        t->npresent++;
    }
    return 0;
}

void el__table_clear_value(struct el_table *t, struct el_entry *e)
{
    free(e->val);
    e->val = NULL;
    if (e->present) {
        t->data -= e->klen + e->vlen;
        e->present = 0;
        t->npresent--;
    }
    e->vlen = 0;
}

void el__table_foreach(struct el_table *t,
                       void (*fn)(struct el_entry *e, void *arg), void *arg)
{
    for (size_t i = 0; i < t->nbuckets; i++)
        for (struct el_entry *e = t->buckets[i]; e; e = e->next)
            fn(e, arg);
}
