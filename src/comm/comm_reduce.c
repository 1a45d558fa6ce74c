/* comm_reduce.c - the element-wise reduction behind every reducing collective.
 *
 * What it is: shs__reduce(), which combines N source arrays in source (rank)
 * order for every dtype and op, with the rounding rules of comm.h: integers
 * wrap (two's complement, as NCCL on GPUs), f16/bf16 are combined in f32 and
 * rounded to the dtype after every op. AVG is NCCL's: for floats every
 * source is first multiplied by the dtype's 1/N (shs__avg_scale) and
 * rounded, then the products are summed; for integers the wrapped sum is
 * divided by N at the end, truncating toward zero.
 * The element rules (f16/bf16 rounding, first-NaN max/min) are core/half.h's
 * and device/kernel_math.h's, shared with the CUDA reduction (kernels.cu).
 * What it is not: a data mover or anything parallel; callers pick the slice.
 *
 * Work goes tile by tile: a tile of the first source is loaded into an
 * accumulator (f32 for the 16-bit floats; float AVG multiplies it by 1/N on
 * the way), every further source is combined into it by one vectorizable
 * loop per (dtype, op), and the tile is stored.
 * That is why dst may equal a source (in-place collectives). The tile may go
 * to several destinations (one rank writing its reduced chunk into every
 * rank's output), with ordinary or streaming stores.
 */
#include <stdint.h>
#include <string.h>

#include "comm/comm_impl.h"
#include "core/half.h"
#include "device/kernel_math.h"

#define TILE 1024

typedef void (*load_fn)(void *restrict acc, const void *restrict src, size_t n);
typedef void (*combine_fn)(void *restrict acc, const void *restrict src, size_t n);
typedef void (*store_fn)(void *restrict dst, const void *restrict acc, size_t n, int divisor);
typedef void (*avg_fn)(void *restrict acc, const void *restrict src, size_t n, double scale);

#define IDENT(v) (v)

/* Every loop runs over a tile. GCC's -O2 vectorizer (very-cheap cost model)
 * only takes loops whose trip count is a known constant, so a full tile is a
 * loop of exactly TILE iterations, and a partial tile (every buffer under
 * TILE elements, i.e. every small collective) runs as sub-blocks of exactly
 * SUB iterations plus a scalar tail of fewer than SUB. Element-wise either
 * way: the blocking changes no result. */
#define SUB 64
#define TILE_LOOP(i, n, ...)                                                                       \
    do {                                                                                           \
        if ((n) == TILE) {                                                                         \
            for (size_t i = 0; i < TILE; i++) { __VA_ARGS__; }                                     \
        } else {                                                                                   \
            size_t i##_base = 0;                                                                   \
            for (; i##_base + SUB <= (n); i##_base += SUB)                                         \
                for (size_t i##_k = 0; i##_k < SUB; i##_k++) {                                     \
                    size_t i = i##_base + i##_k;                                                   \
                    __VA_ARGS__;                                                                   \
                }                                                                                  \
            for (size_t i = i##_base; i < (n); i++) { __VA_ARGS__; }                               \
        }                                                                                          \
    } while (0)

/* ---- integers: accumulate in the type itself, wrap through unsigned ---- */

#define INT_KERNELS(N, T, U, W)                                                                    \
    static void N##_sum(void *restrict acc, const void *restrict src, size_t n) {                  \
        T *restrict a = acc; const T *restrict s = src;                                            \
        TILE_LOOP(i, n, a[i] = (T)((U)a[i] + (U)s[i]));                                            \
    }                                                                                              \
    static void N##_prod(void *restrict acc, const void *restrict src, size_t n) {                 \
        T *restrict a = acc; const T *restrict s = src;                                            \
        TILE_LOOP(i, n, a[i] = (T)((U)a[i] * (U)s[i]));                                            \
    }                                                                                              \
    static void N##_max(void *restrict acc, const void *restrict src, size_t n) {                  \
        T *restrict a = acc; const T *restrict s = src;                                            \
        TILE_LOOP(i, n, a[i] = s[i] > a[i] ? s[i] : a[i]);                                         \
    }                                                                                              \
    static void N##_min(void *restrict acc, const void *restrict src, size_t n) {                  \
        T *restrict a = acc; const T *restrict s = src;                                            \
        TILE_LOOP(i, n, a[i] = s[i] < a[i] ? s[i] : a[i]);                                         \
    }                                                                                              \
    static void N##_store(void *restrict dst, const void *restrict acc, size_t n, int divisor) {   \
        if (divisor == 1) { memcpy(dst, acc, n * sizeof(T)); return; }                             \
        T *restrict d = dst; const T *restrict a = acc;                                            \
        TILE_LOOP(i, n, d[i] = (T)((W)a[i] / (W)divisor));                                         \
    }

INT_KERNELS(i8, int8_t, uint8_t, int64_t)
INT_KERNELS(u8, uint8_t, uint8_t, uint64_t)
INT_KERNELS(i32, int32_t, uint32_t, int64_t)
INT_KERNELS(u32, uint32_t, uint32_t, uint64_t)
INT_KERNELS(i64, int64_t, uint64_t, int64_t)
INT_KERNELS(u64, uint64_t, uint64_t, uint64_t)

/* ---- floats: TA accumulator, TS stored type, CVT stored -> TA, RND rounds
 * a TA result to the stored precision ---- */

#define FLOAT_COMBINE(N, OP, TA, TS, CVT, RND, EXPR)                                               \
    static void N##_##OP(void *restrict acc, const void *restrict src, size_t n) {                 \
        TA *restrict a = acc; const TS *restrict s = src;                                          \
        TILE_LOOP(i, n, TA x = a[i]; TA y = CVT(s[i]); a[i] = RND(EXPR));                          \
    }
/* AVG's two loops: load a = RND(x * scale), add a = RND(a + RND(x * scale)).
 * scale is the dtype's 1/N held in TA (exact: it is a value of the dtype).
 * For f16 and bf16 the product of two dtype values is exact in f32 (11+11
 * and 8+8 significant bits; bf16 below f32's normal range excepted, which
 * needs N > 512), so RND rounds it once, as NCCL's half/bf16 multiply. */
#define FLOAT_AVG(N, TA, TS, CVT, RND)                                                             \
    static void N##_avg_load(void *restrict acc, const void *restrict src, size_t n, double scale) { \
        TA *restrict a = acc; const TS *restrict s = src; const TA k = (TA)scale;                  \
        TILE_LOOP(i, n, a[i] = RND(CVT(s[i]) * k));                                                \
    }                                                                                              \
    static void N##_avg_add(void *restrict acc, const void *restrict src, size_t n, double scale) { \
        TA *restrict a = acc; const TS *restrict s = src; const TA k = (TA)scale;                  \
        TILE_LOOP(i, n, a[i] = RND(a[i] + RND(CVT(s[i]) * k)));                                    \
    }
#define FLOAT_KERNELS(N, TA, TS, CVT, RND)                                                         \
    FLOAT_COMBINE(N, sum, TA, TS, CVT, RND, x + y)                                                 \
    FLOAT_COMBINE(N, prod, TA, TS, CVT, RND, x * y)                                                \
    FLOAT_COMBINE(N, max, TA, TS, CVT, IDENT, SHS_MAX_FIRST_NAN(x, y))                             \
    FLOAT_COMBINE(N, min, TA, TS, CVT, IDENT, SHS_MIN_FIRST_NAN(x, y))                             \
    FLOAT_AVG(N, TA, TS, CVT, RND)

FLOAT_KERNELS(f32, float, float, IDENT, IDENT)
FLOAT_KERNELS(f64, double, double, IDENT, IDENT)
FLOAT_KERNELS(f16, float, uint16_t, shs__f16_to_f32, shs__f16_round)
FLOAT_KERNELS(bf16, float, uint16_t, shs__bf16_to_f32, shs__bf16_round)

/* Float stores: AVG's 1/N was applied to every source, nothing is divided
 * here. The accumulator of f16/bf16 holds values already rounded to the
 * dtype, so the conversion is exact. */
static void f16_store(void *restrict dst, const void *restrict acc, size_t n, int divisor) {
    uint16_t *restrict d = dst; const float *restrict a = acc;
    TILE_LOOP(i, n, d[i] = shs__f32_to_f16(a[i]));
}
static void bf16_store(void *restrict dst, const void *restrict acc, size_t n, int divisor) {
    uint16_t *restrict d = dst; const float *restrict a = acc;
    TILE_LOOP(i, n, d[i] = shs__f32_to_bf16(a[i]));
}
static void f32_store(void *restrict dst, const void *restrict acc, size_t n, int divisor) {
    memcpy(dst, acc, n * sizeof(float));
}
static void f64_store(void *restrict dst, const void *restrict acc, size_t n, int divisor) {
    memcpy(dst, acc, n * sizeof(double));
}

static void f16_load(void *restrict acc, const void *restrict src, size_t n) {
    float *restrict a = acc; const uint16_t *restrict s = src;
    TILE_LOOP(i, n, a[i] = shs__f16_to_f32(s[i]));
}
static void bf16_load(void *restrict acc, const void *restrict src, size_t n) {
    float *restrict a = acc; const uint16_t *restrict s = src;
    TILE_LOOP(i, n, a[i] = shs__bf16_to_f32(s[i]));
}

#define KERNEL_ROW(N) {N##_sum, N##_prod, N##_max, N##_min}
static const combine_fn combine_table[SHS_NUM_DTYPES][4] = {
    [SHS_I8] = KERNEL_ROW(i8),   [SHS_U8] = KERNEL_ROW(u8),   [SHS_I32] = KERNEL_ROW(i32),
    [SHS_U32] = KERNEL_ROW(u32), [SHS_I64] = KERNEL_ROW(i64), [SHS_U64] = KERNEL_ROW(u64),
    [SHS_F16] = KERNEL_ROW(f16), [SHS_F32] = KERNEL_ROW(f32), [SHS_F64] = KERNEL_ROW(f64),
    [SHS_BF16] = KERNEL_ROW(bf16),
};
static const store_fn store_table[SHS_NUM_DTYPES] = {
    [SHS_I8] = i8_store,   [SHS_U8] = u8_store,   [SHS_I32] = i32_store, [SHS_U32] = u32_store,
    [SHS_I64] = i64_store, [SHS_U64] = u64_store, [SHS_F16] = f16_store, [SHS_F32] = f32_store,
    [SHS_F64] = f64_store, [SHS_BF16] = bf16_store,
};
/* NULL: the accumulator has the dtype's own layout (memcpy). */
static const load_fn load_table[SHS_NUM_DTYPES] = {[SHS_F16] = f16_load, [SHS_BF16] = bf16_load};
/* Float AVG's load and add (FLOAT_AVG); NULL for integers. */
static const avg_fn avg_load_table[SHS_NUM_DTYPES] = {
    [SHS_F16] = f16_avg_load, [SHS_F32] = f32_avg_load, [SHS_F64] = f64_avg_load, [SHS_BF16] = bf16_avg_load};
static const avg_fn avg_add_table[SHS_NUM_DTYPES] = {
    [SHS_F16] = f16_avg_add, [SHS_F32] = f32_avg_add, [SHS_F64] = f64_avg_add, [SHS_BF16] = bf16_avg_add};

/* NCCL's AVG scalar (src/enqueue.cc, hostToDevRedOp, ncclAvg): 1/N computed
 * in double, converted to float, then to the dtype (__float2half /
 * __float2bfloat16, round to nearest even); f64 keeps the double. */
double shs__avg_scale(shs_dtype_t dtype, int nranks) {
    double inv = 1.0 / (double)nranks;
    switch (dtype) {
    case SHS_F64: return inv;
    case SHS_F32: return (float)inv;
    case SHS_F16: return shs__f16_round((float)inv);
    case SHS_BF16: return shs__bf16_round((float)inv);
    default: return 0.0;
    }
}

/* ---- copies, optionally with non-temporal (streaming) stores ----------- */

/* Streaming stores bypass the cache: no read-for-ownership of the destination
 * line and no eviction of data that is still needed, which is what lets a
 * collective on buffers larger than the cache approach memcpy's bandwidth.
 * SSE2 (baseline on x86-64) on x86-64; plain memcpy elsewhere and under TSan
 * (which does not see intrinsic stores). */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

static void stream_copy(void *dst, const void *src, size_t bytes) {
#if HAVE_STREAM
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, bytes);
#else
    memcpy(dst, src, bytes);
#endif
}

void shs__stream_fence(void) {
#if HAVE_STREAM
    _mm_sfence();
#endif
}

/* Ask for [p, p+bytes) ahead of use: a large, uncached collective is bound by
 * how many memory reads are in flight, and the hardware prefetchers stop at
 * every 4 KiB page. */
static void prefetch_range(const void *p, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 3);
}

static void copy_out(void *dst, const void *src, size_t bytes, int stream) {
    if (dst == src || !bytes) return;
    if (stream) stream_copy(dst, src, bytes);
    else memcpy(dst, src, bytes);
}

void shs__copy_multi(void *const *dsts, int ndst, const void *src, size_t bytes, int stream) {
    enum { CHUNK = 16 * 1024 }; /* src chunk stays in L1 while it goes to every dst */
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t m = bytes - off < CHUNK ? bytes - off : CHUNK;
        if (stream && off + m < bytes) prefetch_range((const char *)src + off + m, bytes - off - m < CHUNK ? bytes - off - m : CHUNK);
        for (int k = 0; k < ndst; k++) copy_out((char *)dsts[k] + off, (const char *)src + off, m, stream);
    }
    if (stream) shs__stream_fence();
}

/* ---- the reduction ------------------------------------------------------- */

/* f32 sum or average of buffers larger than the cache, fused: each group of
 * 4 elements is loaded from every source (for AVG multiplied by `scale`, the
 * f32 1/N, as it is loaded), added in source order, and stored with
 * streaming stores straight into every dst.
 * No tile in between, so the output is written once and nothing else is
 * (the tiled path stores the tile, then copies it out: measured 20-30 %
 * slower at 64 MiB). The same multiplies and adds in the same order as the
 * tiled path, so the same bits; in place is safe because element i of a dst
 * is stored after element i of every source was read. Returns 0 (nothing
 * done) when the dsts are not equally aligned mod 16 or not float-aligned.
 * scale 0 means SUM (no multiply). */
/* Element i of the fused f32 sum, stored with ordinary stores (the
 * unaligned head and the tail). */
static inline void f32_sum_element(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t i,
                                   float scale) {
    float acc = ((const float *)srcs[0])[i];
    if (scale != 0.0f) acc *= scale;
    for (int j = 1; j < nsrc; j++) {
        float y = ((const float *)srcs[j])[i];
        acc += scale != 0.0f ? y * scale : y;
    }
    for (int k = 0; k < ndst; k++) ((float *)dsts[k])[i] = acc;
}

static int f32_sum_streamed(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n, float scale) {
#if HAVE_STREAM
    /* whole 64-byte lines per dst, one after the other: a line's four
     * streaming stores fill one write-combining buffer, which leaves as one
     * full-line write (interleaving partial lines of N dsts was 10x slower
     * at N = 8) */
    uintptr_t mis = (uintptr_t)dsts[0] & 63;
    for (int k = 1; k < ndst; k++)
        if (((uintptr_t)dsts[k] & 63) != mis) return 0;
    if (mis & 3) return 0;
    size_t head = ((64 - mis) & 63) / 4, i = 0;
    if (head > n) head = n;
    for (; i < head; i++) f32_sum_element(dsts, ndst, srcs, nsrc, i, scale);
    const __m128 vs = _mm_set1_ps(scale);
    const int avg = scale != 0.0f;
    const float *s0 = srcs[0];
    for (; i + 16 <= n; i += 16) {
        __m128 a0 = _mm_loadu_ps(s0 + i), a1 = _mm_loadu_ps(s0 + i + 4);
        __m128 a2 = _mm_loadu_ps(s0 + i + 8), a3 = _mm_loadu_ps(s0 + i + 12);
        if (avg) {
            a0 = _mm_mul_ps(a0, vs), a1 = _mm_mul_ps(a1, vs);
            a2 = _mm_mul_ps(a2, vs), a3 = _mm_mul_ps(a3, vs);
        }
        for (int j = 1; j < nsrc; j++) {
            const float *sj = (const float *)srcs[j] + i;
            __m128 y0 = _mm_loadu_ps(sj), y1 = _mm_loadu_ps(sj + 4);
            __m128 y2 = _mm_loadu_ps(sj + 8), y3 = _mm_loadu_ps(sj + 12);
            if (avg) {
                y0 = _mm_mul_ps(y0, vs), y1 = _mm_mul_ps(y1, vs);
                y2 = _mm_mul_ps(y2, vs), y3 = _mm_mul_ps(y3, vs);
            }
            a0 = _mm_add_ps(a0, y0), a1 = _mm_add_ps(a1, y1);
            a2 = _mm_add_ps(a2, y2), a3 = _mm_add_ps(a3, y3);
        }
        for (int k = 0; k < ndst; k++) {
            float *d = (float *)dsts[k] + i;
            _mm_stream_ps(d, a0);
            _mm_stream_ps(d + 4, a1);
            _mm_stream_ps(d + 8, a2);
            _mm_stream_ps(d + 12, a3);
        }
    }
    for (; i < n; i++) f32_sum_element(dsts, ndst, srcs, nsrc, i, scale);
    shs__stream_fence();
    return 1;
#else
    (void)dsts, (void)ndst, (void)srcs, (void)nsrc, (void)n, (void)scale;
    return 0;
#endif
}

void shs__reduce_multi(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n, shs_dtype_t dtype,
                       shs_redop_t op, int stream) {
    SHS_ASSERT(nsrc >= 1 && ndst >= 1 && dtype >= 0 && dtype < SHS_NUM_DTYPES && op >= 0 && op < SHS_NUM_REDOPS);
    size_t esize = shs_dtype_size(dtype);
    int float_avg = op == SHS_AVG && shs_dtype_is_float(dtype);
    double scale = float_avg ? shs__avg_scale(dtype, nsrc) : 0.0;
    combine_fn combine = combine_table[dtype][op == SHS_AVG ? SHS_SUM : op];
    avg_fn avg_add = float_avg ? avg_add_table[dtype] : NULL;
    store_fn store = store_table[dtype];
    load_fn load = load_table[dtype];
    int divisor = op == SHS_AVG && !float_avg ? nsrc : 1; /* integer AVG only */
    if (stream && dtype == SHS_F32 && (op == SHS_SUM || op == SHS_AVG) &&
        f32_sum_streamed(dsts, ndst, srcs, nsrc, n, (float)scale))
        return;
    /* The stored tile goes straight to a single cached dst; otherwise it is
     * formed once (in `out`, or in acc itself when acc has the dtype's layout
     * and nothing is divided) and copied to every dst. */
    int direct = ndst == 1 && !stream, acc_is_out = !load && divisor == 1;
    union { float f[TILE]; double d[TILE]; uint64_t u[TILE]; } acc; /* (TILE) in the accumulator type */
    union { double d[TILE]; uint64_t u[TILE]; } out;                 /* (TILE) in the dtype */

    for (size_t off = 0; off < n; off += TILE) {
        size_t m = n - off < TILE ? n - off : TILE;
        size_t byte_off = off * esize;
        if (stream && off + m < n) {
            size_t next = (n - off - m < TILE ? n - off - m : TILE) * esize;
            for (int j = 0; j < nsrc; j++) prefetch_range((const char *)srcs[j] + byte_off + m * esize, next);
        }
        const char *first = (const char *)srcs[0] + byte_off;
        if (avg_add) {
            avg_load_table[dtype](&acc, first, m, scale);
            for (int j = 1; j < nsrc; j++) avg_add(&acc, (const char *)srcs[j] + byte_off, m, scale);
        } else {
            if (load) load(&acc, first, m);
            else memcpy(&acc, first, m * esize);
            for (int j = 1; j < nsrc; j++) combine(&acc, (const char *)srcs[j] + byte_off, m);
        }
        if (direct) {
            store((char *)dsts[0] + byte_off, &acc, m, divisor);
            continue;
        }
        const void *tile = &acc;
        if (!acc_is_out) {
            store(&out, &acc, m, divisor);
            tile = &out;
        }
        for (int k = 0; k < ndst; k++) copy_out((char *)dsts[k] + byte_off, tile, m * esize, stream);
    }
    if (stream) shs__stream_fence();
}

void shs__reduce(void *dst, const void *const *srcs, int nsrc, size_t n, shs_dtype_t dtype, shs_redop_t op) {
    shs__reduce_multi(&dst, 1, srcs, nsrc, n, dtype, op, 0);
}
