/* fuzz_ckpt.c -- libFuzzer target for reading checkpoints: whatever bytes a
 * checkpoint file holds (a torn write, a flipped bit, garbage), the readers
 * must answer "good" or "corrupt" without crashing, and anything they accept
 * must load back with the size they reported.
 *
 * The input is written as the checkpoint of step 1 in a private directory;
 * a good checkpoint of step 0 beside it must always remain findable.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elrun/ckpt.h"
#include "elrun/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/elrun-fuzz-ckpt.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    struct el_ckpt_opts o = {.dir = dir, .rank = 0, .world = 1, .keep = -1};
    if (el_ckpt_save(&o, 0, "good", 4) != 0)
        abort();
    atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0])
        setup();
    char path[128];
    snprintf(path, sizeof path, "%s/ckpt-%010d.elck", dir, 1);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);

    struct el_ckpt_info info;
    struct el_ckpt_scan scan;
    int rc = el_ckpt_latest(dir, &info, &scan);
    if (rc != 0)
        abort(); /* step 0 is intact, so something must be found */
    void *buf = NULL;
    size_t len = 0;
    if (info.step == 1) {
        /* Accepted as good: it must load, with the size reported. */
        if (el_ckpt_load(dir, 1, 0, &buf, &len, NULL) != 0 || len != info.bytes)
            abort();
    } else if (info.step != 0) {
        abort();
    }
    free(buf);
    /* Loading it directly must also fail cleanly or succeed. */
    rc = el_ckpt_load(dir, 1, 0, &buf, &len, NULL);
    if (rc == 0)
        free(buf);
    else if (rc != EL_EFORMAT && rc != -ENOENT)
        abort();
    unlink(path);
    return 0;
}
