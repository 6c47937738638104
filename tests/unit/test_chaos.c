/* test_chaos.c -- `elrun chaos`'s schedule and fault-list parsers: what a
 * user types for --every, --at and --faults, and the mistakes it refuses
 * (the injector itself runs in tests/e2e/t0900).  chaos_cmd.c is compiled
 * in here. */
#include "cli/chaos_cmd.c"
#include "test.h"

TEST(chaos_durations_take_units)
{
    double v;
    CHECK_EQ(el__chaos_parse_duration("30", &v), 0);
    CHECK(v == 30);
    CHECK_EQ(el__chaos_parse_duration("30s", &v), 0);
    CHECK(v == 30);
    CHECK_EQ(el__chaos_parse_duration("500ms", &v), 0);
    CHECK(v == 0.5);
    CHECK_EQ(el__chaos_parse_duration("2m", &v), 0);
    CHECK(v == 120);
    CHECK_EQ(el__chaos_parse_duration("1.5s", &v), 0);
    CHECK(v == 1.5);
    CHECK_EQ(el__chaos_parse_duration("", &v), -EINVAL);
    CHECK_EQ(el__chaos_parse_duration("-1s", &v), -EINVAL);
    CHECK_EQ(el__chaos_parse_duration("10h", &v), -EINVAL);
    CHECK_EQ(el__chaos_parse_duration("s", &v), -EINVAL);
    CHECK_EQ(el__chaos_parse_duration(" 5", &v), -EINVAL);
    CHECK_EQ(el__chaos_parse_duration("nan", &v), -EINVAL);
}

TEST(chaos_every_is_a_period_or_a_range)
{
    double lo, hi;
    CHECK_EQ(el__chaos_parse_every("30s", &lo, &hi), 0);
    CHECK(lo == 30 && hi == 30);
    CHECK_EQ(el__chaos_parse_every("20s-60s", &lo, &hi), 0);
    CHECK(lo == 20 && hi == 60);
    CHECK_EQ(el__chaos_parse_every("500ms-1", &lo, &hi), 0);
    CHECK(lo == 0.5 && hi == 1);
    CHECK_EQ(el__chaos_parse_every("0s", &lo, &hi), -EINVAL);
    CHECK_EQ(el__chaos_parse_every("60s-20s", &lo, &hi), -EINVAL);
    CHECK_EQ(el__chaos_parse_every("-20s", &lo, &hi), -EINVAL);
    CHECK_EQ(el__chaos_parse_every("20s-", &lo, &hi), -EINVAL);
}

TEST(chaos_at_is_an_increasing_list)
{
    double at[4];
    int n;
    CHECK_EQ(el__chaos_parse_at("10s,45s,1m", at, 4, &n), 0);
    CHECK_EQ(n, 3);
    CHECK(at[0] == 10 && at[1] == 45 && at[2] == 60);
    CHECK_EQ(el__chaos_parse_at("5", at, 4, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(el__chaos_parse_at("45s,10s", at, 4, &n), -EINVAL);
    CHECK_EQ(el__chaos_parse_at("10s,,20s", at, 4, &n), -EINVAL);
    CHECK_EQ(el__chaos_parse_at("10s,", at, 4, &n), -EINVAL);
    CHECK_EQ(el__chaos_parse_at("1,2,3,4,5", at, 4, &n), -EINVAL);
    CHECK_EQ(el__chaos_parse_at("", at, 4, &n), -EINVAL);
}

TEST(chaos_faults_are_known_names)
{
    unsigned m;
    CHECK_EQ(el__chaos_parse_faults("worker-kill", &m), 0);
    CHECK_EQ(m, (unsigned)F_WORKER_KILL);
    CHECK_EQ(el__chaos_parse_faults("agent-stop,agent-term,agent-kill", &m), 0);
    CHECK_EQ(m, (unsigned)(F_AGENT_STOP | F_AGENT_TERM | F_AGENT_KILL));
    CHECK_EQ(el__chaos_parse_faults("link-cut,worker-kill", &m), 0);
    CHECK_EQ(m, (unsigned)(F_LINK_CUT | F_WORKER_KILL));
    CHECK_EQ(el__chaos_parse_faults("link-down", &m), -EINVAL);
    CHECK_EQ(el__chaos_parse_faults("worker-kill,", &m), -EINVAL);
    CHECK_EQ(el__chaos_parse_faults("worker", &m), -EINVAL);
    CHECK_EQ(el__chaos_parse_faults("", &m), -EINVAL);
}

TEST(chaos_agents_are_named_by_their_rdzv_id_only)
{
    static const char a[] = "elrun\0--rdzv-id=gp\0x";
    static const char b[] = "elrun\0--rdzv_id\0gp\0x";
    static const char c[] = "elrun\0--rdzv-id=gp2\0x";
    static const char d[] = "elrun\0chaos\0--rdzv-id=gp";
    CHECK(is_agent_cmdline(a, sizeof a, "gp"));
    CHECK(is_agent_cmdline(b, sizeof b, "gp"));
    CHECK(!is_agent_cmdline(c, sizeof c, "gp"));
    CHECK(!is_agent_cmdline(d, sizeof d, "gp"));
}
