/* ckpt_int.h -- internals of the checkpoint module shared with its tests. */
#ifndef ELRUN_CKPT_INT_H
#define ELRUN_CKPT_INT_H

#include <stddef.h>
#include <stdint.h>

/* The portable CRC-32C, and whether el_crc32c() uses the CPU instruction. */
uint32_t el__crc32c_sw(uint32_t crc, const void *buf, size_t len);
int el__crc32c_hw_available(void);

/* mkdir -p: 0, EL_EUSAGE (empty or too long), or -errno. */
int el__ckpt_mkdir_p(const char *dir);

/* Test hook: if set, called with the temporary file's name after it is
 * written and fsync'd and before it is renamed into place.  Tests use it to
 * kill the process at the worst moment.  Not thread-safe; tests only. */
extern void (*el__ckpt_before_rename)(const char *tmpname);

#endif
