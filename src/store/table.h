/* table.h -- the store's key table: a chained hash map from byte-string keys
 * to entries.  An entry either holds a value or only parks waiters for a key
 * that does not exist yet.  Entries never move, so waiters may point at them.
 */
#ifndef ELRUN_STORE_TABLE_H
#define ELRUN_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct el_waiter;

struct el_entry {
    struct el_entry *next; /* hash chain                              */
    uint64_t hash;
    uint8_t *val; /* malloc'd; NULL with vlen 0 is ""        */
    size_t vlen;
    int present;               /* holds a value (else: waiters only)     */
    struct el_waiter *waiters; /* connections parked on this key         */
    unsigned pin;              /* > 0: el__table_maybe_drop keeps it       */
    size_t klen;
    uint8_t key[]; /* klen bytes + NUL                        */
};

struct el_table {
    struct el_entry **buckets;
    size_t nbuckets; /* power of two                            */
    size_t nentries; /* including waiter-only entries           */
    size_t npresent; /* entries holding a value                 */
    size_t data;     /* klen + vlen summed over those entries   */
};

int el__table_init(struct el_table *t);
void el__table_free(struct el_table *t);
struct el_entry *el__table_find(const struct el_table *t, const uint8_t *key,
                                size_t klen);
/* Find or create (not present, no value).  NULL when out of memory. */
struct el_entry *el__table_get_or_add(struct el_table *t, const uint8_t *key,
                                      size_t klen);
/* Remove and free e if it holds no value, no waiters and no pin. */
void el__table_maybe_drop(struct el_table *t, struct el_entry *e);
/* Replace e's value (copied); marks it present.  -ENOMEM leaves it as was. */
int el__table_set_value(struct el_table *t, struct el_entry *e,
                        const uint8_t *val, size_t vlen);
/* e's value grew by n bytes in place (APPEND): count them. */
static inline void el__table_grew(struct el_table *t, size_t n)
{
    t->data += n;
}
/* Drop e's value (it stays if waiters remain). */
void el__table_clear_value(struct el_table *t, struct el_entry *e);

/* Call fn on every entry; fn may clear values (not free entries). */
void el__table_foreach(struct el_table *t,
                       void (*fn)(struct el_entry *e, void *arg), void *arg);

#endif
