/* test_common.c -- src/common: the error-message helper every module's
 * fail() goes through, and the error codes' descriptions. */
#include <errno.h>
#include <string.h>

#include "common/errfmt.h"
#include "elrun/err.h"
#include "test.h"

TEST(errf_formats_and_returns_the_code)
{
    char buf[64];
    CHECK_EQ(el__errf(buf, sizeof buf, -ETIMEDOUT, "get %s: %d ms", "k", 5),
             -ETIMEDOUT);
    CHECK_STR(buf, "get k: 5 ms");
}

TEST(errf_truncates_and_terminates)
{
    char buf[8];
    memset(buf, 'x', sizeof buf);
    CHECK_EQ(el__errf(buf, sizeof buf, EL_ELIMIT, "%s", "0123456789"),
             EL_ELIMIT);
    CHECK_STR(buf, "0123456");
}

TEST(errf_without_a_buffer_writes_nothing)
{
    char buf[4] = "abc";
    CHECK_EQ(el__errf(NULL, 100, -EINVAL, "x"), -EINVAL);
    CHECK_EQ(el__errf(buf, 0, -EINVAL, "x"), -EINVAL);
    CHECK_STR(buf, "abc");
}

TEST(strerror_tls_is_not_a_protocol_error)
{
    CHECK(EL_ETLS != EL_EPROTO && EL_ETLS != -EPROTO);
    CHECK(strstr(el_strerror(EL_ETLS), "TLS") != NULL);
    CHECK(strcmp(el_strerror(EL_ETLS), el_strerror(EL_EPROTO)) != 0);
    CHECK_STR(el_strerror(-5999), "unknown error");
}
