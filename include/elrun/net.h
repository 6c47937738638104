/* net.h -- addresses and TCP connections, shared by the store client, the
 * collectives and the CLI.
 *
 * Addresses are written HOST:PORT, with IPv6 literals in brackets
 * ([::1]:29400).  All sockets elrun creates are close-on-exec.
 */
#ifndef ELRUN_NET_H
#define ELRUN_NET_H

#ifdef __cplusplus
extern "C" {
#endif

#define EL_HOST_MAX 256

/* Split "HOST:PORT", "[V6]:PORT" or, when default_port >= 0, a bare "HOST"
 * into host (NUL-terminated, brackets removed) and port.  Returns 0, or
 * EL_EUSAGE when the text is not an address (empty host, port not a number
 * in 0..65535, host too long or with characters outside [A-Za-z0-9._:-]). */
int el_addr_parse(const char *text, int default_port, char host[EL_HOST_MAX],
                  int *port);

/* Connect a TCP socket to host:port, retrying refused connections until
 * timeout_ms has passed (timeout_ms < 0 waits forever).  Sets TCP_NODELAY.
 * Returns the connected blocking fd, or -ETIMEDOUT, -ECONNREFUSED, or
 * -EHOSTUNREACH etc. when it gives up; EL_EUSAGE when the host does not
 * resolve. */
int el_tcp_connect(const char *host, int port, int timeout_ms);

/* Monotonic clock in milliseconds / nanoseconds. */
long long el_now_ms(void);
long long el_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
