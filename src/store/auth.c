/* auth.c -- what the store's client and server share for job secrets: the
 * HMAC-SHA256 of the challenge (Nettle, a small well-kept library: linking
 * OpenSSL's libcrypto would add about 1.5 MB to every agent's RSS at start
 * and 4 MB once used), random nonces, and reading a secret from its file.
 */
#include <errno.h>
#include <fcntl.h>
#include <nettle/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elrun/err.h"
#include "elrun/store.h"
#include "store/proto.h"

void el__auth_mac(const void *secret, size_t slen, const char *tag,
                  const uint8_t *b, size_t blen, const uint8_t *c, size_t clen,
                  uint8_t mac[EL_AUTH_MAC])
{
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, slen, secret);
    hmac_sha256_update(&ctx, strlen(tag), (const uint8_t *)tag);
    hmac_sha256_update(&ctx, blen, b);
    if (clen)
        hmac_sha256_update(&ctx, clen, c);
    hmac_sha256_digest(&ctx, EL_AUTH_MAC, mac);
}

int el__auth_nonce(uint8_t nonce[EL_AUTH_NONCE])
{
    size_t got = 0;
    while (got < EL_AUTH_NONCE) {
        ssize_t n = getrandom(nonce + got, EL_AUTH_NONCE - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        got += (size_t)n;
    }
    return 0;
}

int el_store_read_secret(const char *path, uint8_t *buf, size_t cap,
                         size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int e = -errno;
        snprintf(err, errlen, "cannot read the secret file %s: %s", path,
                 strerror(errno));
        return e;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "the secret file %s is not a regular file", path);
        close(fd);
        return EL_EUSAGE;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        snprintf(err, errlen,
                 "the secret file %s can be read or written by "
                 "every user; chmod 600 it (or 640 for a group)",
                 path);
        close(fd);
        return EL_EUSAGE;
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            snprintf(err, errlen, "cannot read the secret file %s: %s", path,
                     strerror(errno));
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            snprintf(err, errlen,
                     "the secret file %s is longer than %zu "
                     "bytes",
                     path, cap - 1);
            close(fd);
            return EL_EUSAGE;
        }
    }
    close(fd);
    /* One trailing newline (echo, an editor) is not part of the secret. */
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    if (n < EL_STORE_SECRET_MIN) {
        snprintf(err, errlen,
                 "the secret in %s has %zu bytes; use at least "
                 "%d (for example: head -c 32 /dev/urandom | base64 > %s)",
                 path, n, EL_STORE_SECRET_MIN, path);
        return EL_EUSAGE;
    }
    *len = n;
    return 0;
}
