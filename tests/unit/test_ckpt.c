/* test_ckpt.c -- checkpoints: CRC-32C, atomic save under a SIGKILL between
 * write and rename, detection of flipped bytes and truncation, keep-last-K,
 * sharded checkpoints written by several real processes with a
 * completion marker, and replicated checkpoints among forked ranks: one
 * writer per directory, resume from the newest any directory holds (node
 * 0's lost), a failed save (EFBIG under RLIMIT_FSIZE, ENOSPC on a full
 * tmpfs) reported as failed on every rank.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt/ckpt_int.h"
#include "elrun/ckpt.h"
#include "elrun/err.h"
#include "ranks.h"
#include "test.h"

/* ------------------------------------------------------------------------
 * Helpers: a temporary directory, file surgery, payloads.
 */

static char tmpdir[64];
static pid_t tmp_owner;

static int rm_one(const char *p, const struct stat *sb, int f, struct FTW *w)
{
    return remove(p);
}

/* Remove the test's directory: called at the end of each test and, for a
 * failed CHECK (which exits), by atexit in the test's own process. */
static void cleanup(void)
{
    if (tmpdir[0] && getpid() == tmp_owner)
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *mktmp(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/elrun-ckpt-XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    tmp_owner = getpid();
    atexit(cleanup);
    return tmpdir;
}

static void path_of(char *b, size_t n, const char *name)
{
    snprintf(b, n, "%s/%s", tmpdir, name);
}

static int exists(const char *name)
{
    char p[256];
    path_of(p, sizeof p, name);
    return access(p, F_OK) == 0;
}

static int count_entries(void)
{
    DIR *d = opendir(tmpdir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.' || (de->d_name[1] && de->d_name[1] != '.'))
            n++;
    closedir(d);
    return n;
}

/* How many entries of the directory start with prefix; the last one's name
 * goes to name. */
static int find_prefixed(const char *prefix, char *name, size_t len)
{
    DIR *d = opendir(tmpdir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            size_t l = strlen(de->d_name);
            CHECK(l < len);
            memcpy(name, de->d_name, l + 1);
            n++;
        }
    closedir(d);
    return n;
}

static void flip_byte(const char *name, off_t off)
{
    char p[256];
    path_of(p, sizeof p, name);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK_EQ(pread(fd, &c, 1, off), 1);
    c ^= 0x10;
    CHECK_EQ(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

static void truncate_to(const char *name, off_t len)
{
    char p[256];
    path_of(p, sizeof p, name);
    CHECK_EQ(truncate(p, len), 0);
}

static void fill(void *buf, size_t n, unsigned seed)
{
    unsigned char *p = buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

static struct el_ckpt_opts whole_opts(int keep)
{
    return (struct el_ckpt_opts){
        .dir = tmpdir, .rank = 0, .world = 1, .keep = keep};
}

/* Save a 1000-byte payload derived from step. */
static void save_step(const struct el_ckpt_opts *o, int64_t step)
{
    unsigned char buf[1000];
    fill(buf, sizeof buf, (unsigned)step);
    CHECK_OK(el_ckpt_save(o, step, buf, sizeof buf));
}

static void check_step(int64_t step, int shard)
{
    unsigned char want[1000];
    fill(want, sizeof want, (unsigned)step);
    void *got;
    size_t len;
    CHECK_OK(el_ckpt_load(tmpdir, step, shard, &got, &len, NULL));
    CHECK_MEM(got, len, want, sizeof want);
    free(got);
}

/* ------------------------------------------------------------------------
 * CRC-32C.
 */

TEST(ckpt_crc32c_vectors)
{
    CHECK_EQ(el_crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(el__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(el_crc32c(0, "", 0), 0);
    /* 32 zero bytes: RFC 3720 B.4 */
    unsigned char z[32] = {0};
    CHECK_EQ(el_crc32c(0, z, 32), 0x8A9136AAu);
    /* Hardware and table versions agree at every alignment and length,
     * and chaining equals one call. */
    static unsigned char big[5000];
    fill(big, sizeof big, 7);
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len < 300; len += 7) {
            uint32_t a = el_crc32c(0, big + off, len);
            CHECK_EQ(a, el__crc32c_sw(0, big + off, len));
            uint32_t c = el_crc32c(el_crc32c(0, big + off, len / 3),
                                   big + off + len / 3, len - len / 3);
            CHECK_EQ(a, c);
        }
}

/* ------------------------------------------------------------------------
 * Whole-state checkpoints.
 */

TEST(ckpt_roundtrip)
{
    mktmp();
    struct el_ckpt_info info;
    CHECK_EQ(el_ckpt_latest(tmpdir, &info, NULL), -ENOENT);
    struct el_ckpt_opts o = whole_opts(0);
    o.world = 4; /* rank 0 of 4 writes the whole state */
    save_step(&o, 100);
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 100);
    CHECK_EQ(info.world, 4);
    CHECK_EQ(info.sharded, 0);
    CHECK_EQ(info.bytes, 1000);
    CHECK_EQ(scan.nskipped, 0);
    check_step(100, 0);

    /* Other ranks' calls are no-ops in whole mode. */
    o.rank = 3;
    unsigned char junk[10] = {0};
    CHECK_OK(el_ckpt_save(&o, 200, junk, sizeof junk));
    CHECK_OK(el_ckpt_latest(tmpdir, &info, NULL));
    CHECK_EQ(info.step, 100);

    /* Several buffers make one payload; load_into wants the exact size. */
    o.rank = 0;
    unsigned char a[3] = {1, 2, 3}, b[2] = {4, 5};
    struct iovec iov[2] = {{a, 3}, {b, 2}};
    CHECK_OK(el_ckpt_savev(&o, 101, iov, 2));
    unsigned char got[5], want[5] = {1, 2, 3, 4, 5};
    CHECK_OK(el_ckpt_load_into(tmpdir, 101, 0, got, 5));
    CHECK_MEM(got, 5, want, 5);
    CHECK_EQ(el_ckpt_load_into(tmpdir, 101, 0, got, 4), EL_EFORMAT);
    CHECK_EQ(el_ckpt_load_into(tmpdir, 55, 0, got, 5), -ENOENT);

    /* Saving an existing step replaces it; an empty payload is fine. */
    CHECK_OK(el_ckpt_save(&o, 101, NULL, 0));
    void *p;
    size_t len = 99;
    CHECK_OK(el_ckpt_load(tmpdir, 101, 0, &p, &len, &info));
    CHECK_EQ(len, 0);
    CHECK_EQ(info.step, 101);
    free(p);
    cleanup();
}

TEST(ckpt_bad_options)
{
    mktmp();
    struct el_ckpt_opts o = whole_opts(0);
    char b = 0;
    CHECK_EQ(el_ckpt_save(NULL, 1, &b, 1), EL_EUSAGE);
    CHECK_EQ(el_ckpt_save(&o, -1, &b, 1), EL_EUSAGE);
    o.rank = 1;
    CHECK_EQ(el_ckpt_save(&o, 1, &b, 1), EL_EUSAGE); /* rank >= world */
    o.rank = 0;
    o.sharded = 1; /* sharded needs a barrier */
    CHECK_EQ(el_ckpt_save(&o, 1, &b, 1), EL_EUSAGE);
    o.sharded = 0;
    o.dir = "/proc/no/such/dir";
    CHECK(el_ckpt_save(&o, 1, &b, 1) < 0);
    CHECK_EQ(el_ckpt_latest("/nonexistent-elrun-dir", &(struct el_ckpt_info){0},
                            NULL),
             -ENOENT);
    cleanup();
}

static void die_now(const char *tmpname)
{
    raise(SIGKILL);
}

/* A process killed after writing and fsyncing the temporary file but before
 * the rename leaves the previous checkpoint as the newest good one. */
TEST(ckpt_sigkill_before_rename)
{
    mktmp();
    struct el_ckpt_opts o = whole_opts(3);
    save_step(&o, 10);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        el__ckpt_before_rename = die_now;
        unsigned char buf[1000];
        fill(buf, sizeof buf, 20);
        el_ckpt_save(&o, 20, buf, sizeof buf);
        _exit(0); /* not reached */
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* The temporary file is there, complete, but not under its name. */
    char prefix[128], tmpname[128];
    snprintf(prefix, sizeof prefix, ".ckpt-%010d.elck.tmp.%ld.", 20, (long)pid);
    CHECK(find_prefixed(prefix, tmpname, sizeof tmpname) == 1);
    CHECK(exists(tmpname));
    CHECK(!exists("ckpt-0000000020.elck"));

    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 10);
    CHECK_EQ(scan.nskipped, 0); /* temporary files are not checkpoints */
    check_step(10, 0);

    /* Training goes on; the stale temporary file goes once it is older
     * than every checkpoint kept. */
    save_step(&o, 20);
    save_step(&o, 30);
    CHECK(exists(tmpname));
    save_step(&o, 40);
    CHECK(exists(tmpname)); /* kept: 20, 30, 40 */
    check_step(20, 0);
    save_step(&o, 50);
    CHECK(!exists(tmpname));
    CHECK(!exists("ckpt-0000000020.elck"));
    CHECK_OK(el_ckpt_latest(tmpdir, &info, NULL));
    CHECK_EQ(info.step, 50);
    cleanup();
}

TEST(ckpt_flipped_byte_detected)
{
    mktmp();
    struct el_ckpt_opts o = whole_opts(-1);
    save_step(&o, 1);
    save_step(&o, 2);
    save_step(&o, 3);
    flip_byte("ckpt-0000000003.elck", EL_CKPT_HEADER_SIZE + 500); /* payload */
    flip_byte("ckpt-0000000002.elck", 20); /* the step, in the header */

    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 1);
    CHECK_EQ(scan.nskipped, 2);
    CHECK_EQ(scan.skipped[0].step, 3);
    CHECK_EQ(scan.skipped[0].err, EL_EFORMAT);
    CHECK(strstr(scan.skipped[0].what, "ckpt-0000000003.elck") != NULL);
    CHECK(strstr(scan.skipped[0].what, "payload checksum") != NULL);
    CHECK_EQ(scan.skipped[1].step, 2);
    CHECK(strstr(scan.skipped[1].what, "header checksum") != NULL);

    void *p;
    size_t len;
    CHECK_EQ(el_ckpt_load(tmpdir, 3, 0, &p, &len, NULL), EL_EFORMAT);
    CHECK_EQ(el_ckpt_load(tmpdir, 2, 0, &p, &len, NULL), EL_EFORMAT);
    check_step(1, 0);

    /* Every single-byte flip anywhere in the file is caught. */
    for (off_t off = 0; off < EL_CKPT_HEADER_SIZE + 1000; off += 13) {
        save_step(&o, 5);
        flip_byte("ckpt-0000000005.elck", off);
        CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
        CHECK_EQ(info.step, 1);
        CHECK_EQ(scan.skipped[0].step, 5);
    }
    cleanup();
}

TEST(ckpt_truncated_detected)
{
    mktmp();
    struct el_ckpt_opts o = whole_opts(-1);
    save_step(&o, 7);
    save_step(&o, 8);
    save_step(&o, 9);
    truncate_to("ckpt-0000000009.elck", EL_CKPT_HEADER_SIZE + 999);
    truncate_to("ckpt-0000000008.elck", 30);

    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 7);
    CHECK_EQ(scan.nskipped, 2);
    CHECK(strstr(scan.skipped[0].what, "truncated payload") != NULL);
    CHECK(strstr(scan.skipped[1].what, "truncated header") != NULL);

    /* An empty file and a file with junk appended are caught as well. */
    truncate_to("ckpt-0000000007.elck", 0);
    CHECK_EQ(el_ckpt_latest(tmpdir, &info, &scan), -ENOENT);
    CHECK_EQ(scan.nskipped, 3);
    save_step(&o, 7);
    truncate_to("ckpt-0000000007.elck", EL_CKPT_HEADER_SIZE + 1001);
    CHECK_EQ(el_ckpt_latest(tmpdir, &info, &scan), -ENOENT);
    CHECK(strstr(scan.skipped[2].what, "trailing bytes") != NULL);
    cleanup();
}

TEST(ckpt_keep_last_k)
{
    mktmp();
    struct el_ckpt_opts o = whole_opts(3);
    for (int s = 1; s <= 7; s++)
        save_step(&o, s * 100);
    CHECK_EQ(count_entries(), 3);
    CHECK(exists("ckpt-0000000500.elck"));
    CHECK(exists("ckpt-0000000600.elck"));
    CHECK(exists("ckpt-0000000700.elck"));
    /* Unrelated files are never touched. */
    char p[256];
    path_of(p, sizeof p, "notes.txt");
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fclose(f);
    o.keep = 1;
    save_step(&o, 800);
    CHECK_EQ(count_entries(), 2);
    CHECK(exists("ckpt-0000000800.elck"));
    CHECK(exists("notes.txt"));
    /* keep < 0 keeps everything; keep 0 means the default, 3. */
    o.keep = -1;
    for (int s = 9; s <= 12; s++)
        save_step(&o, s * 100);
    CHECK_EQ(count_entries(), 6);
    o.keep = 0;
    save_step(&o, 1300);
    CHECK_EQ(count_entries(), 4);
    check_step(1100, 0);
    cleanup();
}

/* ------------------------------------------------------------------------
 * Sharded checkpoints written by real processes.
 */

struct shared {
    pthread_barrier_t bar;
};

static int proc_barrier(void *arg)
{
    int r = pthread_barrier_wait(&((struct shared *)arg)->bar);
    return r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : -r;
}

/* Fork 'world' ranks, each saving a distinct 1000-byte shard for each step
 * in steps[0..nsteps); returns when they all exited 0. */
static void sharded_run(int world, const int64_t *steps, int nsteps, int keep)
{
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_barrier_init(&sh->bar, &a, (unsigned)world), 0);
    fflush(NULL);
    pid_t pids[16];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0) {
            struct el_ckpt_opts o = {.dir = tmpdir,
                                     .rank = r,
                                     .world = world,
                                     .sharded = 1,
                                     .keep = keep,
                                     .barrier = proc_barrier,
                                     .barrier_arg = sh};
            for (int i = 0; i < nsteps; i++) {
                unsigned char buf[1000];
                fill(buf, sizeof buf, (unsigned)(steps[i] * 100 + r));
                if (el_ckpt_save(&o, steps[i], buf, sizeof buf) != 0)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int r = 0; r < world; r++) {
        int st;
        CHECK_EQ(waitpid(pids[r], &st, 0), pids[r]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    munmap(sh, sizeof *sh);
}

static void check_shard(int64_t step, int r)
{
    unsigned char want[1000];
    fill(want, sizeof want, (unsigned)(step * 100 + r));
    void *got;
    size_t len;
    struct el_ckpt_info info;
    CHECK_OK(el_ckpt_load(tmpdir, step, r, &got, &len, &info));
    CHECK_MEM(got, len, want, sizeof want);
    CHECK_EQ(info.sharded, 1);
    free(got);
}

TEST(ckpt_sharded_with_marker)
{
    mktmp();
    int64_t steps[] = {10, 20, 30, 40};
    sharded_run(3, steps, 4, 2);
    /* Two checkpoints of 3 shards + marker each. */
    CHECK_EQ(count_entries(), 8);
    CHECK(exists("ckpt-0000000040.done"));
    CHECK(exists("ckpt-0000000040.r00002.elck"));
    CHECK(!exists("ckpt-0000000020.r00000.elck"));

    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 40);
    CHECK_EQ(info.world, 3);
    CHECK_EQ(info.sharded, 1);
    CHECK_EQ(info.bytes, 3000);
    CHECK_EQ(scan.nskipped, 0);
    for (int r = 0; r < 3; r++)
        check_shard(40, r);
    void *p;
    size_t len;
    CHECK_EQ(el_ckpt_load(tmpdir, 40, 3, &p, &len, NULL), EL_EFORMAT);

    /* Without its marker a checkpoint is incomplete. */
    char m[256];
    path_of(m, sizeof m, "ckpt-0000000040.done");
    CHECK_EQ(unlink(m), 0);
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 30);
    CHECK_EQ(scan.nskipped, 1);
    CHECK(strstr(scan.skipped[0].what, "incomplete") != NULL);

    /* A damaged or missing shard spoils its checkpoint. */
    flip_byte("ckpt-0000000030.r00001.elck", EL_CKPT_HEADER_SIZE + 3);
    CHECK_EQ(el_ckpt_latest(tmpdir, &info, &scan), -ENOENT);
    CHECK_EQ(scan.nskipped, 2);
    CHECK(strstr(scan.skipped[1].what, "r00001") != NULL);
    CHECK_EQ(el_ckpt_load(tmpdir, 30, 1, &p, &len, NULL), EL_EFORMAT);
    check_shard(30, 2);
    cleanup();
}

TEST(ckpt_sharded_world_change)
{
    mktmp();
    int64_t s1[] = {100};
    sharded_run(4, s1, 1, 3);
    /* A later round with fewer ranks rewrites step 100; the shard of the
     * rank that is gone stays on disk but is not part of the checkpoint. */
    int64_t s2[] = {100, 200};
    sharded_run(2, s2, 2, 3);
    struct el_ckpt_info info;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, NULL));
    CHECK_EQ(info.step, 200);
    CHECK_EQ(info.world, 2);
    check_shard(100, 0);
    check_shard(100, 1);
    void *p;
    size_t len;
    CHECK_EQ(el_ckpt_load(tmpdir, 100, 3, &p, &len, NULL), EL_EFORMAT);
    cleanup();
}

/* A rank that dies between its shard and the barrier: the others' barrier
 * fails (here: reports the lost peer) and the checkpoint never gets its
 * marker, so the previous one stays the newest. */
static int peer_lost_barrier(void *arg)
{
    return EL_EPEERLOST;
}

TEST(ckpt_sharded_rank_dies)
{
    mktmp();
    int64_t s1[] = {5};
    sharded_run(2, s1, 1, 3);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct el_ckpt_opts o = {.dir = tmpdir,
                                 .rank = 1,
                                 .world = 2,
                                 .sharded = 1,
                                 .barrier = peer_lost_barrier};
        unsigned char buf[1000] = {0};
        el__ckpt_before_rename = die_now;
        el_ckpt_save(&o, 6, buf, sizeof buf);
        _exit(0);
    }
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFSIGNALED(st));
    struct el_ckpt_opts o = {.dir = tmpdir,
                             .rank = 0,
                             .world = 2,
                             .sharded = 1,
                             .barrier = peer_lost_barrier};
    unsigned char buf[1000] = {0};
    CHECK_EQ(el_ckpt_save(&o, 6, buf, sizeof buf), EL_EPEERLOST);
    CHECK(exists("ckpt-0000000006.r00000.elck"));
    CHECK(!exists("ckpt-0000000006.done"));
    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 5);
    CHECK_EQ(scan.nskipped, 1);
    CHECK_EQ(scan.skipped[0].step, 6);
    check_shard(5, 1);
    cleanup();
}

/* ------------------------------------------------------------------------
 * Model-based check: random damage to random checkpoints (a flipped byte
 * anywhere, a truncation, junk appended, a lost marker or shard); the
 * newest undamaged one is always found and every newer one is reported.
 */

static int no_barrier(void *arg)
{
    return 0;
}

static void damage(int64_t step, int sharded, uint32_t *rnd)
{
    char name[64], p[256];
    *rnd = *rnd * 1103515245u + 12345u;
    int how = (int)((*rnd >> 16) % 4);
    if (sharded)
        snprintf(name, sizeof name,
                 (*rnd >> 4) % 2 ? "ckpt-%010lld.done"
                                 : "ckpt-%010lld.r00000.elck",
                 (long long)step);
    else
        snprintf(name, sizeof name, "ckpt-%010lld.elck", (long long)step);
    if (!sharded && how == 3)
        how = 0;
    path_of(p, sizeof p, name);
    struct stat st;
    CHECK_EQ(stat(p, &st), 0);
    *rnd = *rnd * 1103515245u + 12345u;
    off_t at = (off_t)((*rnd >> 8) % (uint32_t)st.st_size);
    if (how == 0) {
        flip_byte(name, at);
    } else if (how == 1) {
        truncate_to(name, at);
    } else if (how == 2) {
        FILE *f = fopen(p, "a");
        CHECK(f != NULL);
        fputc('x', f);
        fclose(f);
    } else {
        CHECK_EQ(unlink(p), 0);
    }
}

TEST(ckpt_random_damage)
{
    mktmp();
    uint32_t rnd = 12345;
    for (int iter = 0; iter < 150; iter++) {
        /* Six checkpoints, whole or sharded (world 1) at random. */
        int sharded[7], bad[7] = {0};
        for (int s = 1; s <= 6; s++) {
            rnd = rnd * 1103515245u + 12345u;
            sharded[s] = (int)((rnd >> 16) & 1);
            struct el_ckpt_opts o = {.dir = tmpdir,
                                     .world = 1,
                                     .keep = -1,
                                     .sharded = sharded[s],
                                     .barrier = no_barrier};
            unsigned char buf[300];
            fill(buf, sizeof buf, (unsigned)(iter * 10 + s));
            CHECK_OK(el_ckpt_save(&o, s, buf, sizeof buf));
        }
        for (int k = 0; k < 3; k++) {
            rnd = rnd * 1103515245u + 12345u;
            int s = 1 + (int)((rnd >> 16) % 6);
            if (bad[s])
                continue;
            damage(s, sharded[s], &rnd);
            bad[s] = 1;
        }
        int want = 0, newer_bad = 0;
        for (int s = 6; s >= 1; s--) {
            if (!bad[s]) {
                want = s;
                break;
            }
            newer_bad++;
        }
        struct el_ckpt_info info;
        struct el_ckpt_scan scan;
        int rc = el_ckpt_latest(tmpdir, &info, &scan);
        if (want == 0) {
            CHECK_EQ(rc, -ENOENT);
        } else {
            CHECK_OK(rc);
            CHECK_EQ(info.step, want);
            CHECK_EQ(info.sharded, sharded[want]);
            unsigned char exp[300];
            fill(exp, sizeof exp, (unsigned)(iter * 10 + want));
            void *got;
            size_t len;
            CHECK_OK(el_ckpt_load(tmpdir, want, 0, &got, &len, NULL));
            CHECK_MEM(got, len, exp, sizeof exp);
            free(got);
        }
        CHECK_EQ(scan.nskipped, newer_bad);
        /* Start over. */
        cleanup();
        CHECK_EQ(mkdir(tmpdir, 0700), 0);
    }
    cleanup();
}

/* Re-saving a step in which one rank's write fails: its shard from the
 * earlier save must not make the new checkpoint look complete. */
static void lose_tmp(const char *tmpname)
{
    char p[256];
    path_of(p, sizeof p, tmpname);
    unlink(p); /* the rename then fails */
}

TEST(ckpt_sharded_failed_rewrite)
{
    mktmp();
    int64_t s1[] = {8, 9};
    sharded_run(2, s1, 2, -1);
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_barrier_init(&sh->bar, &a, 2), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct el_ckpt_opts o = {.dir = tmpdir,
                                 .rank = 1,
                                 .world = 2,
                                 .sharded = 1,
                                 .keep = -1,
                                 .barrier = proc_barrier,
                                 .barrier_arg = sh};
        unsigned char buf[1000];
        fill(buf, sizeof buf, 12345);
        el__ckpt_before_rename = lose_tmp;
        _exit(el_ckpt_save(&o, 9, buf, sizeof buf) == -ENOENT ? 0 : 1);
    }
    struct el_ckpt_opts o = {.dir = tmpdir,
                             .rank = 0,
                             .world = 2,
                             .sharded = 1,
                             .keep = -1,
                             .barrier = proc_barrier,
                             .barrier_arg = sh};
    unsigned char buf[1000];
    fill(buf, sizeof buf, 9 * 100 + 0); /* the same bytes as before */
    CHECK_EQ(el_ckpt_save(&o, 9, buf, sizeof buf), -ENOENT);
    int st;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(!exists("ckpt-0000000009.r00001.elck"));
    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    CHECK_OK(el_ckpt_latest(tmpdir, &info, &scan));
    CHECK_EQ(info.step, 8);
    CHECK_EQ(scan.nskipped, 1);
    CHECK(strstr(scan.skipped[0].what, "r00001.elck: missing") != NULL);
    munmap(sh, sizeof *sh);
    cleanup();
}

/* ------------------------------------------------------------------------
 * Replicated checkpoints (el_ckpt_dp_*) among forked ranks (ranks.h).
 */

/* Where each rank keeps its checkpoints, and what a run does. */
struct dp_case {
    char dir[16][160];
    int64_t steps[4];  /* steps to save, in order; -1 ends the list       */
    size_t bytes;      /* payload size of each save                       */
    int resume;        /* resume first and check what comes back          */
    int64_t want_step; /* the step resume must find (-1: -ENOENT)         */
    int want_src, want_holders, want_dirs, want_world;
    int fsize_rank; /* this rank gets RLIMIT_FSIZE = fsize_limit       */
    long fsize_limit;
    int fail_expected; /* saves must fail, agreed, with this error        */
    int want_saved;    /* and this many directories holding the step      */
};

static int wrote_here; /* the rename hook counts this process's writes */
static void count_write(const char *tmpname)
{
    (void)tmpname;
    wrote_here++;
}

static int dp_body(struct el_comm *c, int rank, int world, void *arg)
{
    const struct dp_case *k = arg;
    el__ckpt_before_rename = count_write;
    if (rank == k->fsize_rank) {
        /* A real file-system failure without privileges: writes past the
         * limit fail with EFBIG (SIGXFSZ ignored). */
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {(rlim_t)k->fsize_limit, (rlim_t)k->fsize_limit};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            RANK_FAIL("setrlimit: %s", strerror(errno));
    }
    struct el_ckpt_dp *dp;
    char err[512];
    int rc = el_ckpt_dp_open(&dp, c, k->dir[rank], 3, err, sizeof err);
    if (rc != 0)
        RANK_FAIL("el_ckpt_dp_open: %s: %s", el_strerror(rc), err);
    if (el_ckpt_dp_dirs(dp) != k->want_dirs)
        RANK_FAIL("%d directories, want %d", el_ckpt_dp_dirs(dp), k->want_dirs);
    /* The writer of a directory is the lowest rank that uses it. */
    int writer = 1;
    for (int r = 0; r < rank; r++)
        if (strcmp(k->dir[r], k->dir[rank]) == 0)
            writer = 0;
    if (el_ckpt_dp_is_writer(dp) != writer)
        RANK_FAIL("writer %d, want %d", el_ckpt_dp_is_writer(dp), writer);

    if (k->resume) {
        void *p = NULL;
        size_t len = 0;
        struct el_ckpt_dp_found f;
        rc = el_ckpt_dp_resume(dp, &p, &len, &f, NULL);
        if (k->want_step < 0) {
            if (rc != -ENOENT)
                RANK_FAIL("resume: %s, want ENOENT", el_strerror(rc));
        } else {
            if (rc != 0)
                RANK_FAIL("resume: %s: %s", el_strerror(rc),
                          el_ckpt_dp_errmsg(dp));
            unsigned char *want = malloc(k->bytes);
            fill(want, k->bytes, (unsigned)k->want_step);
            int same = len == k->bytes && memcmp(p, want, len) == 0;
            free(want);
            free(p);
            if (!same)
                RANK_FAIL("resumed payload differs (%zu bytes)", len);
            if (f.info.step != k->want_step || f.src != k->want_src ||
                f.holders != k->want_holders || f.dirs != k->want_dirs ||
                f.info.world != k->want_world || f.info.bytes != k->bytes)
                RANK_FAIL("found step %lld src %d holders %d dirs %d world "
                          "%d",
                          (long long)f.info.step, f.src, f.holders, f.dirs,
                          f.info.world);
        }
    }
    unsigned char *buf = malloc(k->bytes);
    for (int i = 0; i < 4 && k->steps[i] >= 0; i++) {
        fill(buf, k->bytes, (unsigned)k->steps[i]);
        struct iovec iov = {buf, k->bytes};
        struct el_ckpt_dp_saved sv;
        wrote_here = 0;
        rc = el_ckpt_dp_savev(dp, k->steps[i], &iov, 1, &sv);
        if (rc != k->fail_expected)
            RANK_FAIL("save %lld: %s (%s), want %s", (long long)k->steps[i],
                      el_strerror(rc), el_ckpt_dp_errmsg(dp),
                      el_strerror(k->fail_expected));
        int renames = writer && !(rank == k->fsize_rank && rc != 0);
        if (wrote_here != renames)
            RANK_FAIL("wrote %d files, want %d", wrote_here, renames);
        int want_saved = k->fail_expected ? k->want_saved : k->want_dirs;
        if (sv.dirs != k->want_dirs || sv.saved != want_saved)
            RANK_FAIL("saved in %d of %d, want %d of %d", sv.saved, sv.dirs,
                      want_saved, k->want_dirs);
        if (rc != 0) {
            /* Every rank says the same thing: who failed, where, why. */
            char want[256];
            snprintf(want, sizeof want,
                     "checkpoint step %lld is not saved "
                     "in %d of %d checkpoint directories: rank %d (%s): %s",
                     (long long)k->steps[i], k->want_dirs - want_saved,
                     k->want_dirs, k->fsize_rank, k->dir[k->fsize_rank],
                     el_strerror(k->fail_expected));
            if (strcmp(el_ckpt_dp_errmsg(dp), want) != 0)
                RANK_FAIL("message \"%s\", want \"%s\"", el_ckpt_dp_errmsg(dp),
                          want);
            if (sv.local_rc != (rank == k->fsize_rank ? k->fail_expected : 0))
                RANK_FAIL("local_rc %d", sv.local_rc);
        }
    }
    free(buf);
    el_ckpt_dp_close(dp);
    (void)world;
    return 0;
}

static void dp_run(int world, struct dp_case *k)
{
    int status[16];
    int bad = ranks_run(world, 0, dp_body, k, status);
    for (int r = 0; r < world; r++)
        if (status[r] != 0)
            fprintf(stderr, "  rank %d exited %d\n", r, status[r]);
    CHECK_EQ(bad, 0);
}

static struct dp_case dp_case_new(void)
{
    struct dp_case k;
    memset(&k, 0, sizeof k);
    for (int i = 0; i < 4; i++)
        k.steps[i] = -1;
    k.bytes = 3000;
    k.want_step = -1;
    k.fsize_rank = -1;
    return k;
}

/* Only files that are checkpoints (no probes or temporaries left). */
static int only_checkpoints(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (strncmp(de->d_name, "ckpt-", 5) != 0)
            TEST_FAIL_("%s/%s is not a checkpoint", dir, de->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* One directory shared by three ranks: rank 0 alone writes it (the others
 * would replace and prune the same files), every rank is told it is saved,
 * and each resumes the newest. */
TEST(ckpt_dp_shared_dir_one_writer)
{
    mktmp();
    struct dp_case k = dp_case_new();
    for (int r = 0; r < 3; r++)
        snprintf(k.dir[r], sizeof k.dir[r], "%s/shared", tmpdir);
    k.want_dirs = 1;
    k.steps[0] = 10, k.steps[1] = 20;
    dp_run(3, &k);
    CHECK_EQ(only_checkpoints(k.dir[0]), 2);

    k.steps[0] = 30, k.steps[1] = -1;
    k.resume = 1, k.want_step = 20, k.want_src = 0, k.want_holders = 1;
    k.want_world = 3;
    dp_run(3, &k);
    CHECK_EQ(only_checkpoints(k.dir[0]), 3);
    cleanup();
}

/* Two "nodes" of two ranks, each node with its own directory: both nodes
 * keep every checkpoint; after node 0's directory is lost the ranks resume
 * from node 1's (rank 2 broadcasts it), not from scratch. */
TEST(ckpt_dp_newest_from_any_node)
{
    mktmp();
    struct dp_case k = dp_case_new();
    for (int r = 0; r < 4; r++)
        snprintf(k.dir[r], sizeof k.dir[r], "%s/node%d", tmpdir, r / 2);
    k.want_dirs = 2;
    k.steps[0] = 100, k.steps[1] = 200;
    dp_run(4, &k);
    for (int n = 0; n < 2; n++) {
        struct el_ckpt_info info;
        CHECK_OK(el_ckpt_latest(k.dir[2 * n], &info, NULL));
        CHECK_EQ(info.step, 200);
        CHECK_EQ(only_checkpoints(k.dir[2 * n]), 2);
    }

    /* Both hold step 200: the lowest writer (rank 0) sends it. */
    k.steps[0] = -1;
    k.resume = 1, k.want_step = 200, k.want_src = 0, k.want_holders = 2;
    k.want_world = 4;
    dp_run(4, &k);

    /* Node 0's disk is lost. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", k.dir[0]);
    CHECK_EQ(system(cmd), 0);
    k.want_src = 2, k.want_holders = 1;
    dp_run(4, &k);

    /* Node 1 alone has a newer one (saved alone when the round broke). */
    unsigned char buf[3000];
    fill(buf, sizeof buf, 300);
    struct el_ckpt_opts o = {.dir = k.dir[2], .rank = 0, .world = 4};
    CHECK_OK(el_ckpt_save(&o, 300, buf, sizeof buf));
    k.want_step = 300;
    dp_run(4, &k);
    cleanup();
}

/* No checkpoint anywhere: -ENOENT on every rank; a world of one with no
 * communicator works the same way. */
TEST(ckpt_dp_nothing_to_resume_and_world_of_one)
{
    mktmp();
    struct dp_case k = dp_case_new();
    for (int r = 0; r < 2; r++)
        snprintf(k.dir[r], sizeof k.dir[r], "%s/r%d", tmpdir, r);
    k.want_dirs = 2, k.resume = 1;
    dp_run(2, &k);

    struct dp_case one = dp_case_new();
    snprintf(one.dir[0], sizeof one.dir[0], "%s/alone", tmpdir);
    one.want_dirs = 1, one.resume = 1;
    int st;
    CHECK_EQ(ranks_run(1, 1, dp_body, &one, &st), 0);
    one.steps[0] = 5;
    CHECK_EQ(ranks_run(1, 1, dp_body, &one, &st), 0);
    one.steps[0] = -1, one.want_step = 5, one.want_holders = 1;
    one.want_world = 1;
    CHECK_EQ(ranks_run(1, 1, dp_body, &one, &st), 0);
    cleanup();
}

/* A save that fails in one directory is a failed save on every rank, with
 * the same message naming the rank, its directory and the error; the other
 * directory has it, and the failed one keeps its previous checkpoint. */
TEST(ckpt_dp_failed_save_is_failed_everywhere)
{
    mktmp();
    struct dp_case k = dp_case_new();
    for (int r = 0; r < 2; r++)
        snprintf(k.dir[r], sizeof k.dir[r], "%s/node%d", tmpdir, r);
    k.want_dirs = 2;
    k.steps[0] = 6;
    dp_run(2, &k);
    k.bytes = 200000, k.steps[0] = 7;
    k.fsize_rank = 0, k.fsize_limit = 65536;
    k.fail_expected = -EFBIG, k.want_saved = 1;
    dp_run(2, &k);
    struct el_ckpt_info info;
    CHECK_OK(el_ckpt_latest(k.dir[0], &info, NULL));
    CHECK_EQ(info.step, 6);
    CHECK_EQ(only_checkpoints(k.dir[0]), 1); /* no temporary left */
    CHECK_OK(el_ckpt_latest(k.dir[1], &info, NULL));
    CHECK_EQ(info.step, 7);

    /* One shared directory whose writer fails: saved nowhere. */
    for (int r = 0; r < 3; r++)
        snprintf(k.dir[r], sizeof k.dir[r], "%s/shared", tmpdir);
    k.want_dirs = 1, k.want_saved = 0;
    dp_run(3, &k);
    cleanup();
}

/* The disk full for real (ENOSPC on a 64 KiB tmpfs), where this process may
 * mount one (root); elsewhere the EFBIG test above stands for it. */
TEST(ckpt_dp_enospc_is_failed_everywhere)
{
    mktmp();
    struct dp_case k = dp_case_new();
    snprintf(k.dir[0], sizeof k.dir[0], "%s/full", tmpdir);
    snprintf(k.dir[1], sizeof k.dir[1], "%s/node1", tmpdir);
    CHECK_EQ(mkdir(k.dir[0], 0755), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "mount -t tmpfs -o size=64k elrun-test %s "
             "2>/dev/null",
             k.dir[0]);
    if (system(cmd) != 0) {
        fprintf(stderr, "  (cannot mount a tmpfs here: not tested)\n");
        cleanup();
        return;
    }
    k.want_dirs = 2;
    k.bytes = 200000, k.steps[0] = 200;
    k.fsize_rank = 0, k.fsize_limit = RLIM_INFINITY;
    k.fail_expected = -ENOSPC, k.want_saved = 1;
    int status[2];
    int bad = ranks_run(2, 0, dp_body, &k, status);
    int left = only_checkpoints(k.dir[0]);
    snprintf(cmd, sizeof cmd, "umount %s", k.dir[0]);
    CHECK_EQ(system(cmd), 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(left, 0);
    cleanup();
}

/* A rank whose directory cannot be created fails the open on every rank,
 * with a message naming it. */
static int dp_open_body(struct el_comm *c, int rank, int world, void *arg)
{
    const struct dp_case *k = arg;
    struct el_ckpt_dp *dp = NULL;
    char err[512], want[512];
    int rc = el_ckpt_dp_open(&dp, c, k->dir[rank], 3, err, sizeof err);
    snprintf(want, sizeof want,
             "rank 1 cannot create files in its "
             "checkpoint directory %s: %s",
             k->dir[1], el_strerror(-ENOTDIR));
    if (rc != -ENOTDIR || dp != NULL || strcmp(err, want) != 0)
        RANK_FAIL("open: %s: \"%s\"", el_strerror(rc), err);
    (void)world;
    return 0;
}

TEST(ckpt_dp_unusable_dir_fails_open_everywhere)
{
    mktmp();
    struct dp_case k = dp_case_new();
    snprintf(k.dir[0], sizeof k.dir[0], "%s/ok", tmpdir);
    snprintf(k.dir[1], sizeof k.dir[1], "%s/file/sub", tmpdir);
    snprintf(k.dir[2], sizeof k.dir[2], "%s/ok", tmpdir);
    char path[256];
    snprintf(path, sizeof path, "%s/file", tmpdir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fclose(f);
    int status[3];
    CHECK_EQ(ranks_run(3, 0, dp_open_body, &k, status), 0);
    CHECK_EQ(only_checkpoints(k.dir[0]), 0); /* the probe is gone */
    cleanup();
}
