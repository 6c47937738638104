/* test_ftimer.c -- the file timer's request parser (src/agent/filetimer.c)
 * on what torch 1.13's FileTimerClient writes (an acquire, a release) and
 * on what it must refuse with a message that says which field is wrong. */
#include <string.h>

#include "agent/agent_impl.h"
#include "elrun/err.h"
#include "test.h"

static struct el__ftimer_req req;
static char err[256];

static int parse(const char *s)
{
    err[0] = 0;
    return el__ftimer_parse(s, strlen(s), &req, err, sizeof err);
}

TEST(ftimer_parse_torch_requests)
{
    /* FileTimerRequest.to_json() of an acquire and of a release. */
    CHECK_OK(parse("{\"version\": 1, \"pid\": 4242, \"scope_id\": "
                   "\"/x/train.py#31\", \"expiration_time\": "
                   "1764590000.125, \"signal\": 9}"));
    CHECK_EQ(req.pid, 4242);
    CHECK_STR(req.scope, "/x/train.py#31");
    CHECK(req.expires == 1764590000.125);
    CHECK_EQ(req.sig, 9);
    CHECK_OK(parse("{\"version\": 1, \"pid\": 4242, \"scope_id\": \"s\", "
                   "\"expiration_time\": -1, \"signal\": 0}"));
    CHECK(req.expires < 0);
    CHECK_EQ(req.sig, 0);
}

TEST(ftimer_parse_refuses_bad_requests)
{
    CHECK_EQ(parse("not json"), EL_EFORMAT);
    CHECK(strstr(err, "not JSON") != NULL);
    CHECK_EQ(parse("[1]"), EL_EFORMAT);
    CHECK_STR(err, "not a JSON object");
    CHECK_EQ(parse("{\"pid\": 0, \"scope_id\": \"s\", \"expiration_time\": "
                   "1, \"signal\": 9}"),
             EL_EFORMAT);
    CHECK_STR(err, "\"pid\" is not a process id");
    CHECK_EQ(parse("{\"pid\": 3, \"expiration_time\": 1, \"signal\": 9}"),
             EL_EFORMAT);
    CHECK_STR(err, "\"scope_id\" is not a string");
    CHECK_EQ(parse("{\"pid\": 3, \"scope_id\": \"s\", \"expiration_time\": "
                   "\"soon\", \"signal\": 9}"),
             EL_EFORMAT);
    CHECK_STR(err, "\"expiration_time\" is not a number");
    CHECK_EQ(parse("{\"pid\": 3, \"scope_id\": \"s\", \"expiration_time\": "
                   "1, \"signal\": 65}"),
             EL_EFORMAT);
    CHECK_STR(err, "\"signal\" is not a signal number");
}
