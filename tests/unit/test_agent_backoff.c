/* test_agent_backoff.c -- the restart back-off's schedule: the first
 * restart of a streak of failures at once, then the base doubling up to
 * the cap (the waiting itself, and a signal ending it, are in
 * tests/e2e/t0101).
 */
#include "agent/agent_impl.h"
#include "test.h"

TEST(agent_backoff_first_restart_is_immediate)
{
    CHECK_EQ(el__agent_backoff_ms(1, 1000, 30000), 0);
    CHECK_EQ(el__agent_backoff_ms(0, 1000, 30000), 0);
}

TEST(agent_backoff_doubles_from_the_base_up_to_the_cap)
{
    static const int want[] = {0, 1000, 2000, 4000, 8000, 16000, 30000, 30000};
    for (int k = 1; k <= 8; k++)
        CHECK_EQ(el__agent_backoff_ms(k, 1000, 30000), want[k - 1]);
    CHECK_EQ(el__agent_backoff_ms(1000, 1000, 30000), 30000); /* no overflow */
    CHECK_EQ(el__agent_backoff_ms(3, 250, 400), 400);
    CHECK_EQ(el__agent_backoff_ms(2, 5000, 3000), 3000); /* cap below base */
}

TEST(agent_backoff_zero_base_is_off)
{
    for (int k = 1; k <= 5; k++)
        CHECK_EQ(el__agent_backoff_ms(k, 0, 30000), 0);
}
