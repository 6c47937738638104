/* proto.h -- the store's wire protocol: op codes of each dialect and a pure,
 * incremental request parser (private to the store module, its tests and
 * its fuzz target).
 *
 * el__proto_parse() looks at the bytes received so far on one connection and
 * either finds one complete request, says more bytes are needed, or rejects
 * the frame with a message.  It does no I/O and allocates nothing: strings
 * in the result point into the caller's buffer.
 */
#ifndef ELRUN_STORE_PROTO_H
#define ELRUN_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "elrun/store.h"

#define EL_PROTO_MAGIC 0x3C85F7CEu /* TCPStore validationMagicNumber */

/* Which PyTorch client generation a connection speaks.  UNKNOWN until its
 * first request: a 2.3+ client opens with VALIDATE (00 CE F7 85 3C). */
enum el_dialect {
    EL_DIALECT_UNKNOWN = 0,
    EL_DIALECT_V1, /* torch 1.13: SET=0 ... DELETE_KEY=8 */
    EL_DIALECT_V2, /* torch 2.3+: VALIDATE=0, SET=1 ... PING=13 */
};

/* Operations, independent of dialect. */
enum el_op {
    EL_OP_NONE = 0,
    EL_OP_VALIDATE,
    EL_OP_SET,
    EL_OP_COMPARE_SET,
    EL_OP_GET,
    EL_OP_ADD,
    EL_OP_CHECK,
    EL_OP_WAIT,
    EL_OP_NUM_KEYS,
    EL_OP_DELETE,
    EL_OP_APPEND,
    EL_OP_MULTI_GET,
    EL_OP_MULTI_SET,
    EL_OP_CANCEL_WAIT,
    EL_OP_PING,
    /* elrun's own operations (same codes in every dialect). */
    EL_OP_X_GET,             /* get with a server-side timeout            */
    EL_OP_X_WAIT,            /* wait with a server-side timeout           */
    EL_OP_X_MULTI_GET,       /* multi_get with a server-side timeout      */
    EL_OP_X_WATCH,           /* wait until a key's value changes          */
    EL_OP_X_DELETE_PREFIX,   /* delete every key with a prefix            */
    EL_OP_X_ON_CLOSE_SET,    /* set a key when this connection closes     */
    EL_OP_X_TRY_GET,         /* get without waiting                       */
    EL_OP_X_IDLE_TIMEOUT,    /* close this connection when it goes quiet  */
    EL_OP_X_ON_CLOSE_APPEND, /* append to a key when this connection closes */
    EL_OP_X_AUTH_CHALLENGE,  /* the server's nonce for this connection      */
    EL_OP_X_AUTH,            /* prove the job secret (HMAC of the nonce)    */
};

/* Wire codes of elrun's own operations: no PyTorch version uses 64..95. */
enum {
    EL_CODE_X_GET = 64,
    EL_CODE_X_WAIT = 65,
    EL_CODE_X_MULTI_GET = 66,
    EL_CODE_X_WATCH = 67,
    EL_CODE_X_DELETE_PREFIX = 68,
    EL_CODE_X_ON_CLOSE_SET = 69,
    EL_CODE_X_TRY_GET = 70,
    EL_CODE_X_IDLE_TIMEOUT = 71,
    EL_CODE_X_ON_CLOSE_APPEND = 72,
    EL_CODE_X_AUTH_CHALLENGE = 73,
    EL_CODE_X_AUTH = 74,
};

/* Job-secret authentication (docs/PROTOCOL.md, "Authentication"): the
 * client proves HMAC-SHA256(secret, EL_AUTH_CLIENT_TAG || server nonce), the
 * server answers HMAC-SHA256(secret, EL_AUTH_SERVER_TAG || server nonce ||
 * client nonce), so each side knows the other has the secret and the secret
 * never crosses the wire.  Keys under EL_AUTH_PREFIX (every job's rendezvous
 * state) are written only by authenticated connections. */
#define EL_AUTH_NONCE 32
#define EL_AUTH_MAC 32
#define EL_AUTH_CLIENT_TAG "elrun-store-auth-v1 client"
#define EL_AUTH_SERVER_TAG "elrun-store-auth-v1 server"
#define EL_AUTH_PREFIX "/elrun/"

/* HMAC-SHA256(secret, a || b || c) into mac (EL_AUTH_MAC bytes). */
void el__auth_mac(const void *secret, size_t slen, const char *tag,
                  const uint8_t *b, size_t blen, const uint8_t *c, size_t clen,
                  uint8_t mac[EL_AUTH_MAC]);
/* EL_AUTH_NONCE random bytes; 0 or -errno. */
int el__auth_nonce(uint8_t nonce[EL_AUTH_NONCE]);

/* Wire codes of the V2 (2.3+) dialect, used by the C client. */
enum {
    EL_CODE_V2_VALIDATE = 0,
    EL_CODE_V2_SET = 1,
    EL_CODE_V2_COMPARE_SET = 2,
    EL_CODE_V2_GET = 3,
    EL_CODE_V2_ADD = 4,
    EL_CODE_V2_CHECK = 5,
    EL_CODE_V2_WAIT = 6,
    EL_CODE_V2_NUM_KEYS = 7,
    EL_CODE_V2_DELETE = 8,
    EL_CODE_V2_APPEND = 9,
    EL_CODE_V2_MULTI_GET = 10,
    EL_CODE_V2_MULTI_SET = 11,
    EL_CODE_V2_CANCEL_WAIT = 12,
    EL_CODE_V2_PING = 13,
};

/* Reply bytes shared by both dialects. */
enum { EL_CHECK_READY = 0, EL_CHECK_NOT_READY = 1 };
enum { EL_WAIT_STOP = 0, EL_WAIT_CANCELED = 1 };
/* Status byte leading every X_* reply that can wait. */
enum { EL_X_OK = 0, EL_X_TIMEOUT = 1 };

/* A parsed request.  Byte strings point into the parsed buffer. */
struct el_req {
    enum el_op op;
    enum el_dialect dialect; /* the dialect this request established      */
    uint8_t code;            /* the raw op byte                            */
    const uint8_t *frame;    /* where the request starts (the parsed buf)  */
    size_t frame_len;        /* bytes the whole request occupies           */
    /* Up to three leading strings: key, value / expected, desired.        */
    const uint8_t *str[3];
    uint64_t len[3];
    int nstr;
    /* CHECK, WAIT, MULTI_GET, X_WAIT, X_MULTI_GET: 'count' keys, encoded
     * back to back from 'list'.  MULTI_SET: 'count' key/value pairs. */
    uint64_t count;
    const uint8_t *list;
    int64_t num;  /* ADD delta; X_* timeout in ms (<0: none)   */
    uint32_t u32; /* VALIDATE magic, PING nonce                 */
    uint8_t flag; /* X_WATCH: expect_present                    */
};

/* Parse one request from buf[0..len).  'dialect' is the connection's so far.
 * Returns the request's length (> 0) and fills *req; 0 if buf holds only
 * the start of a request (call again with more bytes); or EL_EBADFRAME with
 * a message in err[0..errlen) for an unknown op, a string longer than the
 * limits allow, too many keys, or a bad VALIDATE magic.  A length field is
 * checked against the limits as soon as it is complete, so an oversized
 * request is rejected before its body arrives.  limits must be filled
 * (see el__proto_limits_fill). */
int el__proto_parse(const uint8_t *buf, size_t len, enum el_dialect dialect,
                    const struct el_store_limits *limits, struct el_req *req,
                    char *err, size_t errlen);

/* Replace the zero fields of *l by the defaults. */
void el__proto_limits_fill(struct el_store_limits *l);

/* Read the next length-prefixed string at *cursor (inside a frame that
 * el__proto_parse accepted) and advance the cursor. */
static inline const uint8_t *el__proto_next_str(const uint8_t **cursor,
                                                uint64_t *len)
{
    uint64_t n;
    __builtin_memcpy(&n, *cursor, 8);
    const uint8_t *p = *cursor + 8;
    *cursor = p + n;
    *len = n;
    return p;
}

/* Name of an op, for messages. */
const char *el__proto_op_name(enum el_op op);

#endif
