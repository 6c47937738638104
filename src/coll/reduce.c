/* reduce.c -- the reduction kernels of allreduce: dst[i] = op(dst[i], src[i])
 * for every type and operation, and the division that turns a sum into an
 * average.  Plain loops the compiler vectorizes; integer sums use unsigned
 * arithmetic so that overflow wraps instead of being undefined.
 */
#include <stdint.h>
#include <string.h>

#include "coll/coll_int.h"

size_t el_dtype_size(enum el_dtype t)
{
    switch (t) {
    case EL_FLOAT32:
    case EL_INT32:
        return 4;
    case EL_FLOAT64:
    case EL_INT64:
        return 8;
    }
    return 0;
}

#define KERNELS(name, T, UT)                                             \
    static void sum_##name(T *restrict d, const T *restrict s, size_t n) \
    {                                                                    \
        for (size_t i = 0; i < n; i++)                                   \
            d[i] = (T)((UT)d[i] + (UT)s[i]);                             \
    }                                                                    \
    static void max_##name(T *restrict d, const T *restrict s, size_t n) \
    {                                                                    \
        for (size_t i = 0; i < n; i++)                                   \
            d[i] = s[i] > d[i] ? s[i] : d[i];                            \
    }                                                                    \
    static void min_##name(T *restrict d, const T *restrict s, size_t n) \
    {                                                                    \
        for (size_t i = 0; i < n; i++)                                   \
            d[i] = s[i] < d[i] ? s[i] : d[i];                            \
    }

KERNELS(f32, float, float)
KERNELS(f64, double, double)
KERNELS(i32, int32_t, uint32_t)
KERNELS(i64, int64_t, uint64_t)

#define DISPATCH(name, T)             \
    do {                              \
        size_t n = bytes / sizeof(T); \
        if (op == EL_MAX)             \
            max_##name(dst, src, n);  \
        else if (op == EL_MIN)        \
            min_##name(dst, src, n);  \
        else                          \
            sum_##name(dst, src, n);  \
    } while (0)

void el__reduce(void *dst, const void *src, size_t bytes, enum el_dtype t,
                enum el_redop op)
{
    switch (t) {
    case EL_FLOAT32:
        DISPATCH(f32, float);
        break;
    case EL_FLOAT64:
        DISPATCH(f64, double);
        break;
    case EL_INT32:
        DISPATCH(i32, int32_t);
        break;
    case EL_INT64:
        DISPATCH(i64, int64_t);
        break;
    }
}

void el__finish(void *dst, size_t bytes, enum el_dtype t, enum el_redop op,
                int world)
{
    if (op != EL_AVG)
        return;
    switch (t) {
    case EL_FLOAT32: {
        float *d = dst;
        for (size_t i = 0; i < bytes / 4; i++)
            d[i] /= (float)world;
        break;
    }
    case EL_FLOAT64: {
        double *d = dst;
        for (size_t i = 0; i < bytes / 8; i++)
            d[i] /= (double)world;
        break;
    }
    case EL_INT32: {
        int32_t *d = dst;
        for (size_t i = 0; i < bytes / 4; i++)
            d[i] /= world;
        break;
    }
    case EL_INT64: {
        int64_t *d = dst;
        for (size_t i = 0; i < bytes / 8; i++)
            d[i] /= world;
        break;
    }
    }
}
