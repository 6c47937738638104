/* ckpt.c -- atomic checkpoint files: write (temp, fsync, rename, fsync dir),
 * verify (header and payload CRC-32C), find the newest good one, prune.
 *
 * On-disk header, 64 bytes, little-endian:
 *    0  magic "ELRUNCKP"        8
 *    8  u32 format version      (EL_CKPT_VERSION)
 *   12  u32 header size         (64)
 *   16  i64 step
 *   24  u32 world size
 *   28  u32 kind                (0 whole, 1 shard, 2 completion marker)
 *   32  u32 shard index         (the writing rank; 0 for whole and marker)
 *   36  u32 reserved (0)
 *   40  u64 payload length
 *   48  u32 payload CRC-32C
 *   52  u32 reserved (0) x2
 *   60  u32 CRC-32C of bytes 0..59
 * A marker's payload holds, per shard, u64 length, u32 CRC-32C, u32 0.
 * File names: ckpt-<step>.elck (whole), ckpt-<step>.r<rank>.elck (shard),
 * ckpt-<step>.done (marker), and .<name>.tmp.<pid>.<random> while being
 * written (the random part keeps writers on two machines that share the
 * directory, whose pids may be equal, out of each other's files).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_int.h"
#include "elrun/ckpt.h"
#include "elrun/err.h"

#define MAGIC "ELRUNCKP"
#define KIND_WHOLE 0u
#define KIND_SHARD 1u
#define KIND_MARKER 2u
#define MARKER_ENTRY 16
#define MAX_WORLD (1 << 20)
#define IO_CHUNK (1 << 20)
#define WRITEBACK_CHUNK (8 << 20)

void (*el__ckpt_before_rename)(const char *tmpname);

struct hdr {
    uint32_t version, hsize;
    int64_t step;
    uint32_t world, kind, shard;
    uint64_t len;
    uint32_t crc;
};

/* ------------------------------------------------------------------------
 * Little-endian encoding and the header.
 */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void hdr_encode(const struct hdr *h, unsigned char *b)
{
    memset(b, 0, EL_CKPT_HEADER_SIZE);
    memcpy(b, MAGIC, 8);
    put32(b + 8, EL_CKPT_VERSION);
    put32(b + 12, EL_CKPT_HEADER_SIZE);
    put64(b + 16, (uint64_t)h->step);
    put32(b + 24, h->world);
    put32(b + 28, h->kind);
    put32(b + 32, h->shard);
    put64(b + 40, h->len);
    put32(b + 48, h->crc);
    put32(b + 60, el_crc32c(0, b, 60));
}

/* Returns NULL if b is a valid header, else why not. */
static const char *hdr_decode(const unsigned char *b, struct hdr *h)
{
    if (memcmp(b, MAGIC, 8) != 0)
        return "bad magic";
    if (get32(b + 60) != el_crc32c(0, b, 60))
        return "header checksum mismatch";
    h->version = get32(b + 8);
    h->hsize = get32(b + 12);
    if (h->version != EL_CKPT_VERSION)
        return "unsupported format version";
    if (h->hsize != EL_CKPT_HEADER_SIZE)
        return "bad header size";
    h->step = (int64_t)get64(b + 16);
    h->world = get32(b + 24);
    h->kind = get32(b + 28);
    h->shard = get32(b + 32);
    h->len = get64(b + 40);
    h->crc = get32(b + 48);
    if (h->kind > KIND_MARKER || h->world == 0 || h->world > MAX_WORLD ||
        h->shard >= h->world || h->step < 0)
        return "bad header field";
    return NULL;
}

/* ------------------------------------------------------------------------
 * File names.
 */

static void name_whole(char *b, size_t n, int64_t step)
{
    snprintf(b, n, "ckpt-%010" PRId64 ".elck", step);
}

static void name_shard(char *b, size_t n, int64_t step, int rank)
{
    snprintf(b, n, "ckpt-%010" PRId64 ".r%05d.elck", step, rank);
}

static void name_marker(char *b, size_t n, int64_t step)
{
    snprintf(b, n, "ckpt-%010" PRId64 ".done", step);
}

/* what = "<name>: <why>", cut to fit. */
static void say(char *what, size_t wlen, const char *name, const char *why)
{
    if (snprintf(what, wlen, "%s: %s", name, why) < 0 && wlen)
        what[0] = '\0';
}

enum ftype { F_NONE, F_WHOLE, F_SHARD, F_MARKER, F_TMP };

/* Classify a directory entry and parse its step. */
static enum ftype classify(const char *name, int64_t *step)
{
    const char *p = name;
    int tmp = 0;
    if (*p == '.') {
        tmp = 1;
        p++;
    }
    if (strncmp(p, "ckpt-", 5) != 0)
        return F_NONE;
    p += 5;
    if (*p < '0' || *p > '9')
        return F_NONE;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || v < 0)
        return F_NONE;
    *step = v;
    if (tmp)
        return strstr(end, ".tmp.") ? F_TMP : F_NONE;
    if (strcmp(end, ".elck") == 0)
        return F_WHOLE;
    if (strcmp(end, ".done") == 0)
        return F_MARKER;
    if (end[0] == '.' && end[1] == 'r' && end[2] >= '0' && end[2] <= '9') {
        char *e2;
        strtol(end + 2, &e2, 10);
        if (strcmp(e2, ".elck") == 0)
            return F_SHARD;
    }
    return F_NONE;
}

/* ------------------------------------------------------------------------
 * Low-level I/O.
 */

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Read exactly len bytes; EL_EFORMAT on early end of file. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t r = read(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return EL_EFORMAT;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

int el__ckpt_mkdir_p(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path)
        return EL_EUSAGE;
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char c = path[i];
        path[i] = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return -errno;
        path[i] = c;
    }
    return 0;
}

static int open_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Write header + payload to a temporary file in dirfd, make it durable and
 * rename it to 'name'; then make the rename durable.  The payload is
 * checksummed chunk by chunk just before each chunk is written (one pass
 * over memory), and the header, which holds the checksum, goes in last. */
static int write_atomic(int dirfd, const char *name, struct hdr *h,
                        const struct iovec *iov, int iovcnt)
{
    char tmp[300];
    unsigned char hb[EL_CKPT_HEADER_SIZE] = {0};
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        uint32_t nonce;
        if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
            nonce = (uint32_t)tries * 2654435761u; /* O_EXCL still guards */
        if (snprintf(tmp, sizeof tmp, ".%s.tmp.%ld.%08x", name, (long)getpid(),
                     nonce) >= (int)sizeof tmp)
            return EL_EUSAGE;
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;
    uint32_t crc = 0;
    uint64_t len = 0, flushed = 0;
    int rc = write_all(fd, hb, sizeof hb);
    for (int i = 0; rc == 0 && i < iovcnt; i++) {
        const char *p = iov[i].iov_base;
        for (size_t left = iov[i].iov_len; rc == 0 && left;) {
            size_t n = left > IO_CHUNK ? IO_CHUNK : left;
            crc = el_crc32c(crc, p, n);
            rc = write_all(fd, p, n);
            p += n;
            left -= n;
            len += n;
            /* Start writing back what is in the page cache while we go on
             * copying, so that the final fsync has little left to wait
             * for (a hint: errors show up in fsync). */
            if (len - flushed >= WRITEBACK_CHUNK) {
                sync_file_range(fd, (off_t)flushed, (off_t)(len - flushed),
                                SYNC_FILE_RANGE_WRITE);
                flushed = len;
            }
        }
    }
    if (rc == 0) {
        h->crc = crc;
        h->len = len;
        hdr_encode(h, hb);
        ssize_t w = pwrite(fd, hb, sizeof hb, 0);
        if (w < 0)
            rc = -errno;
        else if (w != (ssize_t)sizeof hb)
            rc = -EIO;
    }
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && el__ckpt_before_rename)
        el__ckpt_before_rename(tmp);
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        rc = -errno;
    if (rc != 0) {
        unlinkat(dirfd, tmp, 0);
        return rc;
    }
    if (fsync(dirfd) < 0)
        return -errno;
    return 0;
}

/* Open 'name' and check its header against what is expected (step, kind,
 * and shard unless shard < 0) and its size.  On success *fd is positioned
 * at the payload.  On a format problem returns EL_EFORMAT with *why set. */
static int open_checked(int dirfd, const char *name, int64_t step,
                        uint32_t kind, int shard, struct hdr *h, int *fdout,
                        const char **why)
{
    *why = NULL;
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *why = errno == ENOENT ? "missing" : "cannot open";
        return -errno;
    }
    struct stat st;
    unsigned char hb[EL_CKPT_HEADER_SIZE];
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0 && (uint64_t)st.st_size < EL_CKPT_HEADER_SIZE) {
        *why = "truncated header";
        rc = EL_EFORMAT;
    }
    if (rc == 0)
        rc = read_all(fd, hb, sizeof hb);
    if (rc == 0) {
        *why = hdr_decode(hb, h);
        if (*why)
            rc = EL_EFORMAT;
    }
    if (rc == 0 && (h->step != step || h->kind != kind ||
                    (shard >= 0 && h->shard != (uint32_t)shard))) {
        *why = "header does not match file name";
        rc = EL_EFORMAT;
    }
    if (rc == 0 && (uint64_t)st.st_size != EL_CKPT_HEADER_SIZE + h->len) {
        *why = (uint64_t)st.st_size < EL_CKPT_HEADER_SIZE + h->len
                   ? "truncated payload"
                   : "trailing bytes after payload";
        rc = EL_EFORMAT;
    }
    if (rc != 0) {
        if (!*why)
            *why = rc == EL_EFORMAT ? "truncated" : "read error";
        close(fd);
        return rc;
    }
    *fdout = fd;
    return 0;
}

/* Read the payload (into dst, or just check it if dst is NULL). */
static int read_payload(int fd, const struct hdr *h, void *dst,
                        const char **why)
{
    uint32_t crc = 0;
    int rc = 0;
    if (dst) {
        rc = read_all(fd, dst, h->len);
        if (rc == 0)
            crc = el_crc32c(0, dst, h->len);
    } else {
        char *buf = malloc(IO_CHUNK);
        if (!buf)
            return -ENOMEM;
        for (uint64_t left = h->len; rc == 0 && left;) {
            size_t n = left > IO_CHUNK ? IO_CHUNK : (size_t)left;
            rc = read_all(fd, buf, n);
            if (rc == 0)
                crc = el_crc32c(crc, buf, n);
            left -= n;
        }
        free(buf);
    }
    if (rc == 0 && crc != h->crc)
        rc = EL_EFORMAT;
    if (rc != 0)
        *why = rc == EL_EFORMAT ? "payload checksum mismatch" : "read error";
    return rc;
}

/* ------------------------------------------------------------------------
 * Verifying one checkpoint.
 */

struct found {
    int64_t step;
    int whole, marker, shards;
};

/* Read and check a marker; on success *ent is a malloc'd array of world
 * entries (len, crc) and *world its size. */
static int read_marker(int dirfd, int64_t step, uint32_t *world,
                       unsigned char **ent, char *what, size_t wlen)
{
    char name[64];
    name_marker(name, sizeof name, step);
    struct hdr h;
    int fd;
    const char *why;
    int rc = open_checked(dirfd, name, step, KIND_MARKER, 0, &h, &fd, &why);
    if (rc == 0 && h.len != (uint64_t)h.world * MARKER_ENTRY) {
        why = "bad marker size";
        rc = EL_EFORMAT;
        close(fd);
    }
    if (rc != 0) {
        say(what, wlen, name, why);
        return rc;
    }
    unsigned char *e = malloc(h.len);
    if (!e) {
        close(fd);
        return -ENOMEM;
    }
    rc = read_payload(fd, &h, e, &why);
    close(fd);
    if (rc != 0) {
        free(e);
        say(what, wlen, name, why);
        return rc;
    }
    *world = h.world;
    *ent = e;
    return 0;
}

/* Open shard 'r' of a sharded checkpoint and check its header against the
 * marker entry.  On success *fd is at its payload. */
static int open_shard(int dirfd, int64_t step, uint32_t world,
                      const unsigned char *ent, uint32_t r, struct hdr *h,
                      int *fd, char *what, size_t wlen)
{
    char name[64];
    name_shard(name, sizeof name, step, (int)r);
    const char *why;
    int rc = open_checked(dirfd, name, step, KIND_SHARD, (int)r, h, fd, &why);
    if (rc == 0 &&
        (h->world != world || h->len != get64(ent + r * MARKER_ENTRY) ||
         h->crc != get32(ent + r * MARKER_ENTRY + 8))) {
        why = "does not match the completion marker";
        rc = EL_EFORMAT;
        close(*fd);
    }
    if (rc != 0)
        say(what, wlen, name, why);
    return rc;
}

/* Check every byte of checkpoint f; fill info.  On failure 'what' says why. */
static int verify(int dirfd, const struct found *f, struct el_ckpt_info *info,
                  char *what, size_t wlen)
{
    char name[64];
    struct hdr h;
    int fd, rc;
    const char *why;
    if (f->whole) {
        name_whole(name, sizeof name, f->step);
        rc = open_checked(dirfd, name, f->step, KIND_WHOLE, 0, &h, &fd, &why);
        if (rc == 0) {
            rc = read_payload(fd, &h, NULL, &why);
            close(fd);
        }
        if (rc != 0) {
            say(what, wlen, name, why);
            return rc;
        }
        info->step = f->step;
        info->world = (int)h.world;
        info->sharded = 0;
        info->bytes = h.len;
        return 0;
    }
    if (!f->marker) {
        name_marker(name, sizeof name, f->step);
        say(what, wlen, name, "missing (incomplete checkpoint)");
        return EL_EFORMAT;
    }
    uint32_t world;
    unsigned char *ent;
    rc = read_marker(dirfd, f->step, &world, &ent, what, wlen);
    if (rc != 0)
        return rc;
    uint64_t total = 0;
    for (uint32_t r = 0; rc == 0 && r < world; r++) {
        rc = open_shard(dirfd, f->step, world, ent, r, &h, &fd, what, wlen);
        if (rc != 0)
            break;
        rc = read_payload(fd, &h, NULL, &why);
        close(fd);
        if (rc != 0) {
            name_shard(name, sizeof name, f->step, (int)r);
            say(what, wlen, name, why);
        }
        total += h.len;
    }
    free(ent);
    if (rc != 0)
        return rc;
    info->step = f->step;
    info->world = (int)world;
    info->sharded = 1;
    info->bytes = total;
    return 0;
}

/* ------------------------------------------------------------------------
 * Listing and pruning.
 */

static int by_step_desc(const void *a, const void *b)
{
    int64_t x = ((const struct found *)a)->step;
    int64_t y = ((const struct found *)b)->step;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Every step that has at least one non-temporary checkpoint file, newest
 * first.  *out is malloc'd (caller frees). */
static int list_steps(int dirfd, struct found **out, size_t *n)
{
    /* A fresh descriptor: a dup() would share (and move) the offset. */
    int fd2 = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd2 < 0)
        return -errno;
    DIR *d = fdopendir(fd2);
    if (!d) {
        close(fd2);
        return -errno;
    }
    struct found *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
        int64_t step;
        enum ftype t = classify(de->d_name, &step);
        if (t == F_NONE || t == F_TMP)
            continue;
        size_t i;
        for (i = 0; i < cnt && v[i].step != step; i++)
            ;
        if (i == cnt) {
            if (cnt == cap) {
                cap = cap ? 2 * cap : 16;
                struct found *nv = realloc(v, cap * sizeof *v);
                if (!nv) {
                    rc = -ENOMEM;
                    break;
                }
                v = nv;
            }
            memset(&v[cnt], 0, sizeof v[cnt]);
            v[cnt++].step = step;
        }
        if (t == F_WHOLE)
            v[i].whole = 1;
        else if (t == F_MARKER)
            v[i].marker = 1;
        else
            v[i].shards++;
    }
    closedir(d);
    if (rc != 0) {
        free(v);
        return rc;
    }
    if (cnt)
        qsort(v, cnt, sizeof *v, by_step_desc);
    *out = v;
    *n = cnt;
    return 0;
}

/* Delete every checkpoint file (temporary ones too) with step < cutoff.
 * Markers go first so that a crash mid-way leaves incomplete checkpoints,
 * not ones that look complete with missing shards. */
static void delete_older(int dirfd, int64_t cutoff)
{
    for (int pass = 0; pass < 2; pass++) {
        int fd2 = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd2 < 0)
            return;
        DIR *d = fdopendir(fd2);
        if (!d) {
            close(fd2);
            return;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            int64_t step;
            enum ftype t = classify(de->d_name, &step);
            if (t == F_NONE || step >= cutoff)
                continue;
            if ((pass == 0) == (t == F_MARKER))
                unlinkat(dirfd, de->d_name, 0);
        }
        closedir(d);
    }
}

static void prune(int dirfd, int keep)
{
    struct found *v;
    size_t n;
    if (keep < 0 || list_steps(dirfd, &v, &n) != 0)
        return;
    int complete = 0;
    int64_t cutoff = -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i].whole || v[i].marker) {
            if (++complete == keep) {
                cutoff = v[i].step;
                break;
            }
        }
    }
    free(v);
    /* No fsync of the directory: a deletion that a crash undoes only
     * leaves an old checkpoint for the next prune. */
    if (cutoff >= 0)
        delete_older(dirfd, cutoff);
}

/* ------------------------------------------------------------------------
 * Public API.
 */

int el_ckpt_savev(const struct el_ckpt_opts *o, int64_t step,
                  const struct iovec *iov, int iovcnt)
{
    if (!o || !o->dir || o->world < 1 || o->world > MAX_WORLD || o->rank < 0 ||
        o->rank >= o->world || step < 0 || iovcnt < 0 || (iovcnt > 0 && !iov) ||
        (o->sharded && !o->barrier))
        return EL_EUSAGE;
    if (!o->sharded && o->rank != 0)
        return 0;
    int keep = o->keep == 0 ? 3 : o->keep;
    int rc = el__ckpt_mkdir_p(o->dir);
    if (rc != 0)
        return rc;
    int dirfd = open_dir(o->dir);
    if (dirfd < 0)
        return dirfd;

    char name[64];
    struct hdr h = {.step = step, .world = (uint32_t)o->world};
    if (!o->sharded) {
        h.kind = KIND_WHOLE;
        name_whole(name, sizeof name, step);
        rc = write_atomic(dirfd, name, &h, iov, iovcnt);
        if (rc == 0)
            prune(dirfd, keep);
        close(dirfd);
        return rc;
    }

    h.kind = KIND_SHARD;
    h.shard = (uint32_t)o->rank;
    name_shard(name, sizeof name, step, o->rank);
    /* A shard left by an earlier save of this step must not pass for this
     * one if the write below fails: rank 0 then finds it missing. */
    if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
        rc = -errno;
    } else {
        rc = write_atomic(dirfd, name, &h, iov, iovcnt);
    }
    /* Every rank must reach the barrier even if its write failed, or the
     * others would wait for it; a failed rank then fails the save on its
     * own and rank 0's check of the headers finds the missing shard. */
    int brc = o->barrier(o->barrier_arg);
    if (rc == 0)
        rc = brc;
    if (rc != 0 || o->rank != 0) {
        close(dirfd);
        return rc;
    }

    unsigned char *ent = calloc((size_t)o->world, MARKER_ENTRY);
    if (!ent) {
        close(dirfd);
        return -ENOMEM;
    }
    for (int r = 0; r < o->world && rc == 0; r++) {
        struct hdr sh;
        int fd;
        const char *why;
        char sname[64];
        name_shard(sname, sizeof sname, step, r);
        rc = open_checked(dirfd, sname, step, KIND_SHARD, r, &sh, &fd, &why);
        if (rc == 0) {
            close(fd);
            if (sh.world != (uint32_t)o->world)
                rc = EL_EFORMAT;
        }
        if (rc == 0) {
            put64(ent + (size_t)r * MARKER_ENTRY, sh.len);
            put32(ent + (size_t)r * MARKER_ENTRY + 8, sh.crc);
        }
    }
    if (rc == 0) {
        struct iovec mv = {ent, (size_t)o->world * MARKER_ENTRY};
        struct hdr mh = {
            .step = step, .world = (uint32_t)o->world, .kind = KIND_MARKER};
        name_marker(name, sizeof name, step);
        rc = write_atomic(dirfd, name, &mh, &mv, 1);
    }
    free(ent);
    if (rc == 0)
        prune(dirfd, keep);
    close(dirfd);
    return rc;
}

int el_ckpt_save(const struct el_ckpt_opts *o, int64_t step, const void *buf,
                 size_t len)
{
    struct iovec v = {(void *)buf, len};
    return el_ckpt_savev(o, step, &v, len ? 1 : 0);
}

int el_ckpt_latest(const char *dir, struct el_ckpt_info *info,
                   struct el_ckpt_scan *scan)
{
    if (scan)
        scan->nskipped = 0;
    if (!dir || !info)
        return EL_EUSAGE;
    int dirfd = open_dir(dir);
    if (dirfd < 0)
        return dirfd;
    struct found *v;
    size_t n;
    int rc = list_steps(dirfd, &v, &n);
    if (rc != 0) {
        close(dirfd);
        return rc;
    }
    rc = -ENOENT;
    for (size_t i = 0; i < n; i++) {
        char what[sizeof scan->skipped[0].what];
        int r = verify(dirfd, &v[i], info, what, sizeof what);
        if (r == 0) {
            rc = 0;
            break;
        }
        if (r == -ENOMEM) {
            rc = r;
            break;
        }
        if (scan) {
            if (scan->nskipped < EL_CKPT_MAX_SKIPPED) {
                int k = scan->nskipped;
                scan->skipped[k].step = v[i].step;
                scan->skipped[k].err = r;
                memcpy(scan->skipped[k].what, what, sizeof what);
            }
            scan->nskipped++;
        }
    }
    free(v);
    close(dirfd);
    return rc;
}

/* Open the payload of checkpoint 'step' for 'shard'; *h describes it. */
static int open_payload(int dirfd, int64_t step, int shard, struct hdr *h,
                        int *fd, struct el_ckpt_info *info)
{
    char name[64], what[96];
    const char *why;
    name_whole(name, sizeof name, step);
    int rc = open_checked(dirfd, name, step, KIND_WHOLE, 0, h, fd, &why);
    if (rc == 0) {
        if (info)
            *info = (struct el_ckpt_info){step, (int)h->world, 0, h->len};
        return 0;
    }
    if (rc != -ENOENT)
        return rc;
    uint32_t world;
    unsigned char *ent;
    rc = read_marker(dirfd, step, &world, &ent, what, sizeof what);
    if (rc != 0)
        return rc;
    if (shard < 0 || (uint32_t)shard >= world) {
        free(ent);
        return EL_EFORMAT;
    }
    rc = open_shard(dirfd, step, world, ent, (uint32_t)shard, h, fd, what,
                    sizeof what);
    if (rc == 0 && info) {
        uint64_t total = 0;
        for (uint32_t r = 0; r < world; r++)
            total += get64(ent + r * MARKER_ENTRY);
        *info = (struct el_ckpt_info){step, (int)world, 1, total};
    }
    free(ent);
    return rc;
}

int el_ckpt_load(const char *dir, int64_t step, int shard, void **buf,
                 size_t *len, struct el_ckpt_info *info)
{
    if (!dir || !buf || !len || step < 0)
        return EL_EUSAGE;
    int dirfd = open_dir(dir);
    if (dirfd < 0)
        return dirfd;
    struct hdr h;
    int fd;
    int rc = open_payload(dirfd, step, shard, &h, &fd, info);
    close(dirfd);
    if (rc != 0)
        return rc;
    if (h.len > SIZE_MAX - 1) {
        close(fd);
        return -ENOMEM;
    }
    void *p = malloc(h.len ? h.len : 1);
    if (!p) {
        close(fd);
        return -ENOMEM;
    }
    const char *why;
    rc = read_payload(fd, &h, p, &why);
    close(fd);
    if (rc != 0) {
        free(p);
        return rc;
    }
    *buf = p;
    *len = h.len;
    return 0;
}

int el_ckpt_load_into(const char *dir, int64_t step, int shard, void *buf,
                      size_t len)
{
    if (!dir || (!buf && len) || step < 0)
        return EL_EUSAGE;
    int dirfd = open_dir(dir);
    if (dirfd < 0)
        return dirfd;
    struct hdr h;
    int fd;
    int rc = open_payload(dirfd, step, shard, &h, &fd, NULL);
    close(dirfd);
    if (rc != 0)
        return rc;
    const char *why;
    rc = h.len != len ? EL_EFORMAT : read_payload(fd, &h, buf, &why);
    close(fd);
    return rc;
}
