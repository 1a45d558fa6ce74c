/* matmul_cpu.c - the CPU backend's matmul: forward, and backward into dinp,
 * dweight and dbias.
 *
 * What it is: one packed, register-blocked GEMM driver behind the three
 * products, with a micro-kernel per instruction set (AVX-512F, AVX2+FMA, and
 * portable C99 fmaf()) picked at run time, so the default build needs no
 * -march flag. What it is not: a BLAS. It never splits or reorders a
 * reduction. Every output element is one chain of fused multiply-adds over
 * the reduction index in increasing order,
 *     acc = init;  for k = 0..K-1:  acc = fma(A(i,k), B(k,j), acc)
 * (one rounding per step), with init the bias or 0. Vector lanes hold
 * different output elements j and threads own different output tiles, so the
 * bits depend neither on the thread count nor on the instruction set.
 *
 * Vocabulary: the GEMM computes an (M,N) result with reduction length K.
 *   tile     MR x NR output elements, held in registers by the micro-kernel.
 *   A panel  MR rows of A, packed k-major: Ap[k*MR + i], rows past M zero.
 *   B panel  NR columns of B, packed k-major: Bp[k*NR + j], columns past N zero.
 *   K block  KC consecutive k. A tile's chains run block after block; between
 *            blocks the accumulators rest in memory (an exact f32 store and
 *            load), so blocking for L1 changes no bit.
 * The products (weight (OC,C), inp (BT,C), dout (BT,OC)):
 *   forward  out (BT,OC)     M=BT N=OC K=C    A(i,k) = inp[i*C+k]    B(k,j) = weight[j*C+k]
 *   dinp     (BT,C)   +=     M=BT N=C  K=OC   A(i,k) = dout[i*OC+k]  B(k,j) = weight[k*C+j]
 *   dweight  (OC,C)   +=     M=OC N=C  K=BT   A(i,k) = dout[k*OC+i]  B(k,j) = inp[k*C+j]
 * "+=" products run their chain from 0 (resting in a scratch result between
 * K blocks) and add it to the output once, at the end.
 * Packing costs O((M+N) K) moves against O(M N K) fmas.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "device/device_impl.h"
#include "device/cpu/matmul_cpu.h"

#ifdef _OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")
#define PARALLEL _Pragma("omp parallel num_threads(nth) if(nth > 1)")
#define FOR _Pragma("omp for schedule(static)")
static int thread_num(void) { return omp_get_thread_num(); }
static int num_threads(void) { return omp_get_num_threads(); }
#else
#define PARALLEL_FOR (void)nth;
#define PARALLEL (void)nth;
#define FOR
static int thread_num(void) { return 0; }
static int num_threads(void) { return 1; }
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_PATHS 1
#include <immintrin.h>
#define TARGET(isa) __attribute__((target(isa)))
#else
#define HAVE_X86_PATHS 0
#endif

#define MR 12  /* tile rows */
#define NR 32  /* tile columns: two zmm, four ymm */
#define KC 256 /* K block: a B panel block is KC*NR*4 = 32 KiB, for L1 */
#define COLS 16 /* dbias: adjacent columns summed per thread */

static int threads(const shs_device_t *dev) { return dev->num_threads > 1 ? dev->num_threads : 1; }
static int imin(int a, int b) { return a < b ? a : b; }

/* ---- micro-kernels ----------------------------------------------------------
 * One tile over one K block: each accumulator starts from cin (row stride
 * ldin), else from init (one NR row, e.g. the bias) in every row, else from 0;
 * runs its fma chain over kc steps; then cout (row stride ldout) = acc, or
 * cout += acc when add. A is read in place, A(i,k) = a[i*rs + k*ks], in one of
 * two layouts, each its own kernel: "rows" (ks = 1, rs = lda: inp, dout) and
 * "kmaj" (rs = 1, ks = lda: dout^T, and packed edge panels with lda = MR). */
typedef struct {
    const float *cin;
    const float *init;
    float *cout;
    size_t ldin, ldout;
    int add;
} tile_io_t;

typedef void (*kernel_fn)(int kc, const float *a, size_t lda, const float *Bp, const tile_io_t *io);
typedef struct {
    kernel_fn rows, kmaj;
} kernels_t;

static inline void body_scalar(int kc, const float *a, size_t rs, size_t ks, const float *restrict Bp,
                               const tile_io_t *io) {
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++)
            acc[i][j] = io->cin ? io->cin[i * io->ldin + j] : io->init ? io->init[j] : 0.0f;
    for (int k = 0; k < kc; k++, a += ks, Bp += NR)
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(a[i * rs], Bp[j], acc[i][j]);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float *o = &io->cout[i * io->ldout + j];
            *o = io->add ? *o + acc[i][j] : acc[i][j];
        }
}

/* The two layouts of A, as two kernels (name_rows, name_kmaj) of one body. */
#define KERNEL_PAIR(name, attr, body)                                                                        \
    attr static void name##_rows(int kc, const float *a, size_t lda, const float *Bp, const tile_io_t *io) { \
        body(kc, a, lda, 1, Bp, io);                                                                         \
    }                                                                                                        \
    attr static void name##_kmaj(int kc, const float *a, size_t lda, const float *Bp, const tile_io_t *io) { \
        body(kc, a, 1, lda, Bp, io);                                                                         \
    }
KERNEL_PAIR(kernel_scalar, , body_scalar)

#if HAVE_X86_PATHS
/* One vector body, instantiated per instruction set: the tile runs as
 * SUB x (2 x W) sub-tiles (W floats a vector), each holding 2*SUB vector
 * accumulators; per k, 2 B loads and SUB broadcasts of A. AVX-512: SUB = MR,
 * W = 16 (24 zmm accumulators, the whole tile at once); AVX2: 16 ymm
 * registers only, so SUB = 4, W = 8 (8 accumulators, 3 x 2 sub-tiles).
 * Each lane is one output element's fma chain, in k order, as body_scalar. */
#define VECTOR_BODY(name, isa, VEC, W, SUB, LOAD, BCAST, FMA, ADD, STORE, ZERO)                              \
    static inline __attribute__((always_inline, target(isa))) void name(                                    \
        int kc, const float *a0, size_t rs, size_t ks, const float *restrict Bp, const tile_io_t *io) {      \
        for (int i0 = 0; i0 < MR; i0 += SUB)                                                                 \
            for (int j0 = 0; j0 < NR; j0 += 2 * W) {                                                         \
                VEC c[SUB][2];                                                                               \
                if (io->cin) {                                                                               \
                    _Pragma("GCC unroll 12") for (int i = 0; i < SUB; i++) {                                 \
                        const float *s = io->cin + (i0 + i) * io->ldin + j0;                                 \
                        c[i][0] = LOAD(s);                                                                   \
                        c[i][1] = LOAD(s + W);                                                               \
                    }                                                                                        \
                } else {                                                                                     \
                    VEC v0 = io->init ? LOAD(io->init + j0) : ZERO();                                        \
                    VEC v1 = io->init ? LOAD(io->init + j0 + W) : ZERO();                                    \
                    _Pragma("GCC unroll 12") for (int i = 0; i < SUB; i++) c[i][0] = v0, c[i][1] = v1;       \
                }                                                                                            \
                const float *a = a0 + i0 * rs, *b = Bp + j0;                                                 \
                for (int k = 0; k < kc; k++, a += ks, b += NR) {                                             \
                    VEC b0 = LOAD(b), b1 = LOAD(b + W);                                                      \
                    _Pragma("GCC unroll 12") for (int i = 0; i < SUB; i++) {                                 \
                        VEC av = BCAST(a + i * rs);                                                          \
                        c[i][0] = FMA(av, b0, c[i][0]);                                                      \
                        c[i][1] = FMA(av, b1, c[i][1]);                                                      \
                    }                                                                                        \
                }                                                                                            \
                _Pragma("GCC unroll 12") for (int i = 0; i < SUB; i++) {                                     \
                    float *o = io->cout + (i0 + i) * io->ldout + j0;                                         \
                    if (io->add) {                                                                           \
                        c[i][0] = ADD(LOAD(o), c[i][0]);                                                     \
                        c[i][1] = ADD(LOAD(o + W), c[i][1]);                                                 \
                    }                                                                                        \
                    STORE(o, c[i][0]);                                                                       \
                    STORE(o + W, c[i][1]);                                                                   \
                }                                                                                            \
            }                                                                                                \
    }

#define BCAST512(p) _mm512_set1_ps(*(p))
VECTOR_BODY(body_avx512, "avx512f,fma", __m512, 16, MR, _mm512_loadu_ps, BCAST512, _mm512_fmadd_ps, _mm512_add_ps,
            _mm512_storeu_ps, _mm512_setzero_ps)
VECTOR_BODY(body_avx2, "avx2,fma", __m256, 8, 4, _mm256_loadu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps,
            _mm256_storeu_ps, _mm256_setzero_ps)

KERNEL_PAIR(kernel_avx512, TARGET("avx512f,fma"), body_avx512)
KERNEL_PAIR(kernel_avx2, TARGET("avx2,fma"), body_avx2)
#endif

/* ---- instruction-set choice ---------------------------------------------- */

static _Atomic int forced_isa = SHS__MM_ISA_AUTO;

int shs__cpu_matmul_isa_available(shs__mm_isa_t isa) {
    switch (isa) {
    case SHS__MM_ISA_AUTO:
    case SHS__MM_ISA_SCALAR: return 1;
#if HAVE_X86_PATHS
    case SHS__MM_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SHS__MM_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
#endif
    default: return 0;
    }
}

int shs__cpu_matmul_force_isa(shs__mm_isa_t isa) {
    if (!shs__cpu_matmul_isa_available(isa)) return 0;
    atomic_store(&forced_isa, (int)isa);
    return 1;
}

shs__mm_isa_t shs__cpu_matmul_isa(void) {
    static _Atomic int best = SHS__MM_ISA_AUTO;
    int f = atomic_load(&forced_isa);
    if (f != SHS__MM_ISA_AUTO) return (shs__mm_isa_t)f;
    int b = atomic_load(&best);
    if (b == SHS__MM_ISA_AUTO) {
        b = SHS__MM_ISA_SCALAR;
        for (int i = SHS__MM_NUM_ISA - 1; i > SHS__MM_ISA_SCALAR; i--)
            if (shs__cpu_matmul_isa_available((shs__mm_isa_t)i)) {
                b = i;
                break;
            }
        atomic_store(&best, b);
    }
    return (shs__mm_isa_t)b;
}

const char *shs__cpu_matmul_isa_name(shs__mm_isa_t isa) {
    switch (isa) {
    case SHS__MM_ISA_AUTO: return "auto";
    case SHS__MM_ISA_SCALAR: return "scalar";
    case SHS__MM_ISA_AVX2: return "avx2";
    case SHS__MM_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

static kernels_t kernels_for(shs__mm_isa_t isa) {
#if HAVE_X86_PATHS
    if (isa == SHS__MM_ISA_AVX512) return (kernels_t){kernel_avx512_rows, kernel_avx512_kmaj};
    if (isa == SHS__MM_ISA_AVX2) return (kernels_t){kernel_avx2_rows, kernel_avx2_kmaj};
#endif
    return (kernels_t){kernel_scalar_rows, kernel_scalar_kmaj};
}

/* ---- packing and the GEMM driver ------------------------------------------ */

typedef struct {
    int M, N, K;
    const float *A;
    size_t a_rs, a_ks;  /* A(i,k) = A[i*a_rs + k*a_ks] */
    const float *B;
    size_t b_ks, b_cs;  /* B(k,j) = B[k*b_ks + j*b_cs] */
    const float *bias;  /* (N) where each chain starts, or NULL: 0 */
    float *out;         /* (M,N), row stride N */
    int accumulate;     /* out += chain (from 0) instead of out = chain */
} gemm_t;

static float *falloc(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    SHS_ASSERT(p != NULL);
    return p;
}

/* dst[k*W + w] = X[w*ws + k*ks] for w < nw, 0 for nw <= w < W; k < K. */
static void pack_panel(float *restrict dst, int W, const float *X, size_t ws, size_t ks, int nw, int K) {
    if (ws == 1) {
        for (int k = 0; k < K; k++) {
            memcpy(dst + (size_t)k * W, X + (size_t)k * ks, (size_t)nw * sizeof(float));
            memset(dst + (size_t)k * W + nw, 0, (size_t)(W - nw) * sizeof(float));
        }
        return;
    }
    enum { KB = 16 }; /* transpose in blocks of KB k: one cache line of each source row */
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = imin(K, k0 + KB);
        for (int w = 0; w < nw; w++)
            for (int k = k0; k < k1; k++) dst[(size_t)k * W + w] = X[(size_t)w * ws + (size_t)k * ks];
        for (int k = k0; k < k1; k++)
            for (int w = nw; w < W; w++) dst[(size_t)k * W + w] = 0.0f;
    }
}

/* Where a tile's A block lies: A(i,k) = a[i*lda + k] ("rows") or
 * a[k*lda + i] (kmaj); `padded` when rows past M hold zeros (packed panels). */
typedef struct {
    const float *a;
    size_t lda;
    int kmaj, padded;
} a_block_t;

static void call_kernel(const kernels_t *kern, int kc, const a_block_t *ab, const float *Bp, const tile_io_t *io) {
    if (ab->kmaj) kern->kmaj(kc, ab->a, ab->lda, Bp, io);
    else kern->rows(kc, ab->a, ab->lda, Bp, io);
}

/* One tile over one K block. A tile cut by the edge of the result (mr < MR
 * or nr < NR) runs on full local copies (A packed k-major into `edge`, which
 * holds MR*KC floats, unless already padded); only its valid part reaches
 * io->cout. */
static void run_tile(const kernels_t *kern, int kc, a_block_t ab, int mr, const float *Bp, int nr,
                     const tile_io_t *io, float *edge) {
    if (mr >= MR && nr >= NR) {
        call_kernel(kern, kc, &ab, Bp, io);
        return;
    }
    mr = imin(mr, MR), nr = imin(nr, NR);
    if (mr < MR && !ab.padded) {
        pack_panel(edge, MR, ab.a, ab.kmaj ? 1 : ab.lda, ab.kmaj ? ab.lda : 1, mr, kc);
        ab = (a_block_t){edge, MR, 1, 1};
    }
    float cin[MR * NR], cout[MR * NR];
    tile_io_t e = {NULL, io->init, cout, NR, NR, 0};
    if (io->cin) {
        memset(cin, 0, sizeof cin);
        for (int i = 0; i < mr; i++) memcpy(cin + i * NR, io->cin + i * io->ldin, (size_t)nr * sizeof(float));
        e.cin = cin;
    }
    call_kernel(kern, kc, &ab, Bp, &e);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float *o = &io->cout[i * io->ldout + j];
            *o = io->add ? *o + cout[i * NR + j] : cout[i * NR + j];
        }
}

/* Threads share out the tiles, t = jp*mt + ip, as contiguous ranges, the same
 * in every K block, so a tile's chain stays with one thread; consecutive tiles
 * share their B panel. Each thread packs the B panels of its own range (a
 * panel on a boundary is packed by both neighbours). A is read in place when
 * its rows are contiguous in k; a k-major A (dout^T, rows OC apart, which
 * would map a whole K block onto a few L1 sets) is packed once, together,
 * the one point where threads wait for each other before the end. */
static void gemm(int nth, const gemm_t *g, kernels_t kern) {
    int M = g->M, N = g->N, K = g->K;
    if (M <= 0 || N <= 0) return;
    SHS_ASSERT(g->a_ks == 1 || g->a_rs == 1);
    int mt = (M + MR - 1) / MR, nt = (N + NR - 1) / NR, nk = K > 0 ? (K + KC - 1) / KC : 1;
    float *init = NULL;
    if (g->bias) {
        init = falloc((size_t)nt * NR);
        memcpy(init, g->bias, (size_t)N * sizeof(float));
        memset(init + N, 0, (size_t)(nt * NR - N) * sizeof(float));
    }
    float *Ap = g->a_ks != 1 ? falloc((size_t)mt * MR * K) : NULL;
    /* where chains rest between K blocks */
    float *scratch = g->accumulate && nk > 1 ? falloc((size_t)M * N) : NULL;
    float *rest = scratch ? scratch : g->out;
    PARALLEL
    {
        if (Ap) {
            FOR
            for (int ip = 0; ip < mt; ip++)
                pack_panel(Ap + (size_t)ip * MR * K, MR, g->A + (size_t)ip * MR * g->a_rs, g->a_rs, g->a_ks,
                           imin(MR, M - ip * MR), K);
        }
        long ntiles = (long)mt * nt, tid = thread_num(), nthr = num_threads();
        long t0 = ntiles * tid / nthr, t1 = ntiles * (tid + 1) / nthr;
        if (t0 < t1) {
            int jp0 = (int)(t0 / mt), jp1 = (int)((t1 - 1) / mt);
            float *Bp = falloc((size_t)(jp1 - jp0 + 1) * NR * K), *edge = falloc((size_t)MR * KC);
            for (int jp = jp0; jp <= jp1; jp++)
                pack_panel(Bp + (size_t)(jp - jp0) * NR * K, NR, g->B + (size_t)jp * NR * g->b_cs, g->b_cs, g->b_ks,
                           imin(NR, N - jp * NR), K);
            for (int pc = 0; pc < nk; pc++) {
                int k0 = pc * KC, kc = imin(KC, K - k0), last = pc == nk - 1;
                for (long t = t0; t < t1; t++) {
                    int jp = (int)(t / mt), ip = (int)(t % mt), i0 = ip * MR, j0 = jp * NR;
                    size_t at = (size_t)i0 * N + j0;
                    tile_io_t io = {
                        .cin = pc ? rest + at : NULL,
                        .init = init ? init + j0 : NULL,
                        .cout = last ? g->out + at : rest + at,
                        .ldin = (size_t)N,
                        .ldout = (size_t)N,
                        .add = last && g->accumulate,
                    };
                    a_block_t ab = Ap ? (a_block_t){Ap + (size_t)ip * MR * K + (size_t)k0 * MR, MR, 1, 1}
                                      : (a_block_t){g->A + (size_t)i0 * g->a_rs + k0, g->a_rs, 0, 0};
                    run_tile(&kern, kc, ab, M - i0, Bp + (size_t)(jp - jp0) * NR * K + (size_t)k0 * NR, N - j0,
                             &io, edge);
                }
            }
            free(edge);
            free(Bp);
        }
    }
    free(scratch);
    free(Ap);
    free(init);
}

/* ---- the vtable slots ----------------------------------------------------- */

void shs__cpu_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                             const float *bias, int BT, int C, int OC) {
    gemm_t g = {.M = BT, .N = OC, .K = C, .A = inp, .a_rs = (size_t)C, .a_ks = 1, .B = weight, .b_ks = 1,
                .b_cs = (size_t)C, .bias = bias, .out = out, .accumulate = 0};
    gemm(threads(dev), &g, kernels_for(shs__cpu_matmul_isa()));
}

void shs__cpu_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const float *weight, int BT, int C, int OC) {
    int nth = threads(dev);
    kernels_t kern = kernels_for(shs__cpu_matmul_isa());
    if (dinp) {
        gemm_t g = {.M = BT, .N = C, .K = OC, .A = dout, .a_rs = (size_t)OC, .a_ks = 1, .B = weight,
                    .b_ks = (size_t)C, .b_cs = 1, .out = dinp, .accumulate = 1};
        gemm(nth, &g, kern);
    }
    gemm_t g = {.M = OC, .N = C, .K = BT, .A = dout, .a_rs = 1, .a_ks = (size_t)OC, .B = inp, .b_ks = (size_t)C,
                .b_cs = 1, .out = dweight, .accumulate = 1};
    gemm(nth, &g, kern);
    if (dbias) { /* column sums, rows in increasing order, plain f32 adds from 0 */
        int nb = (OC + COLS - 1) / COLS;
        PARALLEL_FOR
        for (int ob = 0; ob < nb; ob++) {
            int o0 = ob * COLS, no = imin(COLS, OC - o0);
            float s[COLS] = {0};
            for (int r = 0; r < BT; r++)
                for (int j = 0; j < no; j++) s[j] += dout[(size_t)r * OC + o0 + j];
            for (int j = 0; j < no; j++) dbias[o0 + j] += s[j];
        }
    }
}
