/* ranks.h -- multi-rank unit tests with real processes: a store server in a
 * child process of its own and one forked process per rank, each with a
 * communicator (elrun/coll.h) over that store.  (The test process itself
 * runs no threads, so forking is safe under ASan.)
 */
#ifndef ELRUN_TEST_RANKS_H
#define ELRUN_TEST_RANKS_H

struct el_comm;

/* A rank's body: its exit status (0 = passed; print why before failing). */
typedef int (*ranks_body)(struct el_comm *c, int rank, int world, void *arg);

/* Run body on 'world' (1..16) forked ranks joined by a communicator (or a
 * NULL communicator when nullcomm is set and world is 1) and wait for all.
 * Each rank's exit status goes to status[rank]: its body's return value, or
 * 100 + the signal that killed it, or 99 if it could not join.  Returns how
 * many ranks did not return 0. */
int ranks_run(int world, int nullcomm, ranks_body body, void *arg, int *status);

/* Print "  rank R: ..." on stderr and return 1 from the body. */
#define RANK_FAIL(...)                                            \
    do {                                                          \
        fprintf(stderr, "  rank %d (line %d): ", rank, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                             \
        fputc('\n', stderr);                                      \
        return 1;                                                 \
    } while (0)

#endif
