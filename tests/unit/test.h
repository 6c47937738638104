/* test.h -- the unit-test framework: tests register themselves, the runner
 * forks each one under a time limit and prints TAP plus "N passed, N failed".
 *
 *   TEST(store_set_get) { CHECK_EQ(1 + 1, 2); }
 *
 * A failed CHECK prints file:line and both values, then ends the test.
 * Tests run in their own process, so they may leak, crash or exit freely;
 * each gets ELRUN_TEST_TIMEOUT seconds (default 60).
 */
#ifndef ELRUN_TEST_H
#define ELRUN_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register_(const char *name, test_fn fn);

#define TEST(name)                                                 \
    static void test_##name(void);                                 \
    __attribute__((constructor)) static void test_reg_##name(void) \
    {                                                              \
        test_register_(#name, test_##name);                        \
    }                                                              \
    static void test_##name(void)

#define TEST_FAIL_(...)                                   \
    do {                                                  \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                     \
        fputc('\n', stderr);                              \
        exit(1);                                          \
    } while (0)

#define CHECK(cond)                                \
    do {                                           \
        if (!(cond))                               \
            TEST_FAIL_("CHECK(%s) failed", #cond); \
    } while (0)

#define CHECK_EQ(a, b)                                                   \
    do {                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);              \
        if (a_ != b_)                                                    \
            TEST_FAIL_("%s == %s failed: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

#define CHECK_STR(a, b)                                             \
    do {                                                            \
        const char *a_ = (a), *b_ = (b);                            \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                      \
            TEST_FAIL_("%s == %s failed: \"%s\" != \"%s\"", #a, #b, \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
    } while (0)

#define CHECK_MEM(p, n, q, m)                                               \
    do {                                                                    \
        size_t n_ = (size_t)(n), m_ = (size_t)(m);                          \
        if (n_ != m_ || memcmp((p), (q), n_) != 0)                          \
            TEST_FAIL_("%s (%zu bytes) != %s (%zu bytes)", #p, n_, #q, m_); \
    } while (0)

/* 0 from an elrun call, else print el_strerror and the extra message. */
#define CHECK_OK(expr)                                                       \
    do {                                                                     \
        int rc_ = (expr);                                                    \
        if (rc_ != 0)                                                        \
            TEST_FAIL_("%s returned %d (%s)", #expr, rc_, el_strerror(rc_)); \
    } while (0)

#endif
