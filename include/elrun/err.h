/* err.h -- elrun's error codes.
 *
 * Every fallible elrun function returns an int: 0 on success, or a negative
 * value: either -errno (-ETIMEDOUT, -ECONNREFUSED, ...) or one of the EL_E*
 * codes below.  el_strerror() describes any of them.  Codes are only ever
 * appended, never renumbered.  Objects that can fail for a specific reason
 * (a store connection, a rendezvous) also keep a human-readable message that
 * names the key or peer; see their headers.
 */
#ifndef ELRUN_ERR_H
#define ELRUN_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#define EL_ERRMAP(X)                                                         \
    X(EBADFRAME, -5001, "malformed or oversized frame")                      \
    X(ECLOSED, -5002, "rendezvous is closed")                                \
    X(EFORMAT, -5003, "bad file format (magic, version or checksum)")        \
    X(EPROTO, -5004, "protocol error from peer")                             \
    X(ELIMIT, -5005, "a configured limit was exceeded")                      \
    X(ENOTFOUND, -5006, "no such key")                                       \
    X(EMISMATCH, -5007, "compare-and-set: value did not match")              \
    X(EPEERLOST, -5008, "a peer died or its connection was lost")            \
    X(EUSAGE, -5009, "invalid argument or configuration")                    \
    X(ENOTELASTIC, -5010, "not running under elrun (no worker environment)") \
    X(ETLS, -5011, "TLS failure (certificate, CA or handshake)")             \
    X(ENOTSTORE, -5012,                                                      \
      "the peer does not speak the store protocol "                          \
      "(another service on that port?)")

enum el_err {
    EL_OK = 0,
#define EL_ERR_ENUM_(name, val, msg) EL_##name = val,
    EL_ERRMAP(EL_ERR_ENUM_)
#undef EL_ERR_ENUM_
};

/* Static description of 'err' (negative errno or EL_E*).  Never NULL. */
const char *el_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
