/* kernels.cu - the CUDA backend's kernels: how every operation of
 * include/shardsim/device.h keeps its contract, and this file's kernels:
 * elementwise, sum and norm, cast, the optimizers, and the collectives'
 * rank-ordered reduction (the matmul: kernels_matmul.cu; layernorm,
 * attention, encoder, softmax: kernels_layers.cu).
 *
 * What it is: CUDA C kernels that keep device.h's determinism contract the
 * same way the CPU backend does. Work is split over independent OUTPUT
 * elements only; each output element is computed by one thread, with the
 * summation order device.h (or the CPU reference, src/device/cpu/device_cpu.c) fixes:
 *   - no atomics anywhere, no reductions split across threads except the
 *     integer norm accumulator, whose int64 sums are associative (exact);
 *   - fixed launch configurations (THREADS per block, grid from the sizes);
 *   - compiled with --fmad=false (Makefile): no a*b+c is contracted into an
 *     fma behind our back, as gcc's -ffp-contract=off on the CPU side; the
 *     fmas device.h asks for (matmul chains) are explicit fmaf() calls;
 *   - IEEE division and square root (nvcc's defaults -prec-div=true,
 *     -prec-sqrt=true, -ftz=false; never --use_fast_math).
 * The math of each element or row is kernel_math.h's: the same SHS_HD
 * functions the CPU backend calls, so both run the same operations in the
 * same order; the .cu files hold the thread decomposition and the launches
 * (kernels_launch.h the launch configuration they share).
 * Consequence: a kernel whose CPU reference uses only + - * / sqrt and fma
 * gives the CPU's bits exactly (matmul, layernorm, attention backward,
 * encoder, residual, accumulate, scale, relu, sum, norm, cast, adamw, sgd,
 * softmax backward). Kernels that call expf, logf, tanhf, coshf (attention
 * forward, softmax forward, GELU) agree to a few ulps only: CUDA's libm is
 * not glibc's (CUDA C Programming Guide, "Mathematical Functions": expf 2
 * ulp, tanhf 2 ulp, logf 1 ulp, coshf 2 ulp). They are still deterministic
 * run to run. tests/gpu/test_cuda_kernels.c states the tolerance per kernel.
 *
 * The matmul is our own tiled kernel, not cuBLAS (kernels_matmul.cu says why).
 *
 * What it is not: fast. Per-row statistics (layernorm, softmax, attention
 * scores) run one thread per row, because the contract fixes a sequential
 * order; this is a reference backend, not llm.c's tuned kernels.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH, V vocabulary,
 * BT = B*T rows, OC output channels, n element count.
 */
#include <math.h>
#include <stdint.h>

#include "device/cuda/kernels.h"
#include "device/cuda/kernels_launch.h"
#include "device/kernel_math.h"

/* ---- elementwise ------------------------------------------------------------ */

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) out[i] = shs__gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] += shs__gelu_grad(inp[i]) * dout[i];
}

__global__ void relu_forward_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) out[i] = shs__relu(inp[i]);
}

__global__ void relu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] += shs__relu_grad(inp[i], dout[i]);
}

__global__ void residual_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *dst, const float *src, size_t n) {
    GRID_STRIDE(i, n) dst[i] += src[i];
}

__global__ void scale_kernel(float *x, float alpha, size_t n) {
    GRID_STRIDE(i, n) x[i] *= alpha;
}

extern "C" cudaError_t shs__cuda_gelu_forward(cudaStream_t s, float *out, const float *inp, size_t n) {
    ELEMENTWISE(gelu_forward, gelu_forward_kernel, n, out, inp, n);
}
extern "C" cudaError_t shs__cuda_gelu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                               size_t n) {
    ELEMENTWISE(gelu_backward, gelu_backward_kernel, n, dinp, inp, dout, n);
}
extern "C" cudaError_t shs__cuda_relu_forward(cudaStream_t s, float *out, const float *inp, size_t n) {
    ELEMENTWISE(relu_forward, relu_forward_kernel, n, out, inp, n);
}
extern "C" cudaError_t shs__cuda_relu_backward(cudaStream_t s, float *dinp, const float *inp, const float *dout,
                                               size_t n) {
    ELEMENTWISE(relu_backward, relu_backward_kernel, n, dinp, inp, dout, n);
}
extern "C" cudaError_t shs__cuda_residual_forward(cudaStream_t s, float *out, const float *a, const float *b,
                                                  size_t n) {
    ELEMENTWISE(residual, residual_kernel, n, out, a, b, n);
}
extern "C" cudaError_t shs__cuda_accumulate(cudaStream_t s, float *dst, const float *src, size_t n) {
    ELEMENTWISE(accumulate, accumulate_kernel, n, dst, src, n);
}
extern "C" cudaError_t shs__cuda_scale(cudaStream_t s, float *x, float alpha, size_t n) {
    ELEMENTWISE(scale, scale_kernel, n, x, alpha, n);
}

/* ---- reductions ---------------------------------------------------------------- */

/* device.h fixes the order: f64, index order, one rounding to f32 at the end.
 * A sequential chain of f64 roundings cannot be split, so one thread walks it
 * (the model calls it on B*T losses). */
__global__ void sum_kernel(float *out, const float *x, size_t n) { out[0] = shs__sum_f64(x, n); }

extern "C" cudaError_t shs__cuda_sum(cudaStream_t s, float *out, const float *x, size_t n) {
    sum_kernel<<<1, 1, 0, s>>>(out, x, n);
    return launched();
}

/* Exact norm accumulator (exact_norm.h): 20 base-2^32 digits (LSB 2^-298)
 * plus NaN and infinity counts. Each thread accumulates its grid-stride
 * elements into its own digits and normalizes them; a block sums its
 * threads' words by a fixed tree, writing one partial per block; one thread
 * then adds the partials to acc in block order and normalizes. The words are
 * int64 sums, so the result equals the CPU's shs_exact_norm_add() word for
 * word whatever the split (a normalized accumulator is unique for its value).
 * p = SHS_NORM_INF: word 0 is max |x| as f32 bits, the NaN word a flag; both
 * combine by max. Bounds: a thread sees at most n / (NORM_BLOCKS * THREADS)
 * elements, each adding < 2^32 to a digit (carried every 2^30 terms as on
 * the CPU); after normalizing, block and grid sums of 2^15 digits < 2^32
 * stay far below 2^63. */
#define NORM_DIGITS 20
#define NORM_WORDS (NORM_DIGITS + 2)
#define NAN_WORD NORM_DIGITS
#define INF_WORD (NORM_DIGITS + 1)
#define NORM_P_INF (-1)

extern "C" size_t shs__cuda_norm_scratch_words(void) { return (size_t)SHS_CUDA_NORM_BLOCKS * NORM_WORDS; }

__device__ static void norm_normalize(long long *acc) {
    long long carry = 0;
    for (int i = 0; i < NORM_DIGITS; i++) {
        long long v = acc[i] + carry;
        acc[i] = v & 0xffffffffLL;
        carry = v >> 32;
    }
    acc[NORM_DIGITS - 1] += carry * 4294967296LL;
}

/* acc += m * 2^k, m < 2^48, k >= 0: three digits, split by hand (no int128). */
__device__ static void norm_add_scaled(long long *acc, unsigned long long m, int k) {
    int i = k >> 5, sh = k & 31;
    unsigned long long lo = m << sh;                       /* low 64 bits of m * 2^sh */
    unsigned long long hi = sh ? m >> (64 - sh) : 0ull;   /* bits 64..79 */
    acc[i] += (long long)(lo & 0xffffffffull);
    acc[i + 1] += (long long)(lo >> 32);
    if (i + 2 < NORM_DIGITS) acc[i + 2] += (long long)hi;
}

__global__ void norm_partial_kernel(long long *partial, const float *x, size_t n, int p) {
    long long d[NORM_WORDS];
    for (int w = 0; w < NORM_WORDS; w++) d[w] = 0;
    size_t since_carry = 0;
    GRID_STRIDE(j, n) {
        uint32_t bits = __float_as_uint(x[j]);
        if (p == NORM_P_INF) {
            bits &= 0x7fffffffu;
            if (bits > 0x7f800000u) d[NAN_WORD] = 1;
            else if ((long long)bits > d[0]) d[0] = bits;
            continue;
        }
        uint32_t ex = (bits >> 23) & 0xff, frac = bits & 0x7fffff;
        if (ex == 0xff) {
            d[frac ? NAN_WORD : INF_WORD]++;
            continue;
        }
        if (ex == 0 && frac == 0) continue;
        unsigned long long m = ex ? (frac | 0x800000u) : frac;
        int e = (ex ? (int)ex : 1) - 150;
        if (p == 1) norm_add_scaled(d, m, e + 298);
        else norm_add_scaled(d, m * m, 2 * e + 298);
        if (++since_carry == (size_t)1 << 30) {
            norm_normalize(d);
            since_carry = 0;
        }
    }
    if (p != NORM_P_INF) norm_normalize(d);
    __shared__ long long sh[THREADS];
    for (int w = 0; w < NORM_WORDS; w++) {
        sh[threadIdx.x] = d[w];
        __syncthreads();
        for (int half = THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) {
                long long a = sh[threadIdx.x], b = sh[threadIdx.x + half];
                sh[threadIdx.x] = p == NORM_P_INF ? (a > b ? a : b) : a + b;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) partial[(size_t)blockIdx.x * NORM_WORDS + w] = sh[0];
        __syncthreads();
    }
}

__global__ void norm_finish_kernel(long long *acc, const long long *partial, int nblocks, int p) {
    for (int b = 0; b < nblocks; b++)
        for (int w = 0; w < NORM_WORDS; w++) {
            long long v = partial[(size_t)b * NORM_WORDS + w];
            if (p == NORM_P_INF) {
                if (v > acc[w]) acc[w] = v;
            } else {
                acc[w] += v;
            }
        }
    if (p != NORM_P_INF) norm_normalize(acc);
}

extern "C" cudaError_t shs__cuda_norm_accumulate(cudaStream_t s, int64_t *acc, const float *x, size_t n, int p,
                                                 int64_t *scratch) {
    norm_partial_kernel<<<SHS_CUDA_NORM_BLOCKS, THREADS, 0, s>>>((long long *)scratch, x, n, p);
    norm_finish_kernel<<<1, 1, 0, s>>>((long long *)acc, (const long long *)scratch, SHS_CUDA_NORM_BLOCKS, p);
    return launched();
}

/* ---- cast (the conversions: kernel_math.h and core/half.h, shared with the CPU) ---- */

__global__ void cast_kernel(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n) {
    int to_16bit = dst_dtype == SHS_F16 || dst_dtype == SHS_BF16;
    GRID_STRIDE(i, n) shs__cast_one(dst, dst_dtype, src, src_dtype, i, to_16bit);
}

extern "C" cudaError_t shs__cuda_cast(cudaStream_t s, void *dst, shs_dtype_t dst_dtype, const void *src,
                                      shs_dtype_t src_dtype, size_t n) {
    if (n == 0) return cudaSuccess;
    if (dst_dtype == src_dtype) {
        if (dst == src) return cudaSuccess;
        return cudaMemcpyAsync(dst, src, n * (dst_dtype == SHS_F64 ? 8 : dst_dtype == SHS_F32 ? 4 : 2),
                               cudaMemcpyDeviceToDevice, s);
    }
    cast_kernel<<<grid_for(n), THREADS, 0, s>>>(dst, (int)dst_dtype, src, (int)src_dtype, n);
    return launched();
}

/* ---- optimizers ------------------------------------------------------------------ */

__global__ void adamw_kernel(float *param, const float *grad, float *m, float *v, size_t n, shs__adamw_coef_t k) {
    GRID_STRIDE(i, n) shs__adamw_one(param, grad, m, v, i, k);
}

__global__ void sgd_kernel(float *param, const float *grad, float *momentum_buf, size_t n, float lr, float momentum,
                           float weight_decay) {
    GRID_STRIDE(i, n) shs__sgd_one(param, grad, momentum_buf, i, lr, momentum, weight_decay);
}

extern "C" cudaError_t shs__cuda_adamw_update(cudaStream_t s, float *param, const float *grad, float *m, float *v,
                                              size_t n, shs__adamw_coef_t k) {
    ELEMENTWISE(adamw, adamw_kernel, n, param, grad, m, v, n, k);
}

extern "C" cudaError_t shs__cuda_sgd_update(cudaStream_t s, float *param, const float *grad, float *momentum_buf,
                                            size_t n, float lr, float momentum, float weight_decay) {
    ELEMENTWISE(sgd, sgd_kernel, n, param, grad, momentum_buf, n, lr, momentum, weight_decay);
}

/* ---- collectives' reduction (comm_reduce.c's rules) ---------------------------------
 * Traits per dtype: Acc the accumulator type, load (stored -> Acc), the
 * rounding after each sum/prod (f16/bf16 only), AVG's pre-multiply of every
 * source by the dtype's 1/N (floats, PreMul; comm.h: NCCL's FuncPreMulSum)
 * and the final store with AVG's divisor (integers: NCCL's SumPostDiv). One
 * thread per element: it reads the element from every source in order, then
 * writes every destination. */

enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3, OP_AVG = 4 };

/* AVG's scalar, the host's value (comm_reduce.c, declared in comm_impl.h). */
extern "C" double shs__avg_scale(shs_dtype_t dtype, int nranks);

template <typename T, typename U, typename W> struct IntTraits {
    typedef T Stored;
    typedef T Acc;
    __device__ static Acc load(Stored v) { return v; }
    __device__ static Acc sum(Acc a, Acc b) { return (T)((U)a + (U)b); }
    __device__ static Acc prod(Acc a, Acc b) { return (T)((U)a * (U)b); }
    __device__ static Acc max(Acc a, Acc b) { return b > a ? b : a; }
    __device__ static Acc min(Acc a, Acc b) { return b < a ? b : a; }
    static const bool PreMul = false;
    __device__ static Acc premul(Acc a, Acc) { return a; }
    __device__ static Stored store(Acc a, int divisor) { return divisor == 1 ? a : (T)((W)a / (W)divisor); }
};

template <typename F> struct FloatTraits {
    typedef F Stored;
    typedef F Acc;
    __device__ static Acc load(Stored v) { return v; }
    __device__ static Acc sum(Acc a, Acc b) { return a + b; }
    __device__ static Acc prod(Acc a, Acc b) { return a * b; }
    __device__ static Acc max(Acc a, Acc b) { return SHS_MAX_FIRST_NAN(a, b); }
    __device__ static Acc min(Acc a, Acc b) { return SHS_MIN_FIRST_NAN(a, b); }
    static const bool PreMul = true;
    __device__ static Acc premul(Acc a, Acc k) { return a * k; }
    __device__ static Stored store(Acc a, int) { return a; }
};

/* f16 and bf16: combined in f32, rounded to the dtype after every op (Bits:
 * the dtype's conversions, core/half.h). */
struct F16Bits {
    __device__ static float to_f32(uint16_t v) { return shs__f16_to_f32(v); }
    __device__ static uint16_t from_f32(float f) { return shs__f32_to_f16(f); }
};
struct BF16Bits {
    __device__ static float to_f32(uint16_t v) { return shs__bf16_to_f32(v); }
    __device__ static uint16_t from_f32(float f) { return shs__f32_to_bf16(f); }
};

template <typename Bits> struct HalfTraits {
    typedef uint16_t Stored;
    typedef float Acc;
    __device__ static Acc load(Stored v) { return Bits::to_f32(v); }
    __device__ static Acc round(float f) { return Bits::to_f32(Bits::from_f32(f)); }
    __device__ static Acc sum(Acc a, Acc b) { return round(a + b); }
    __device__ static Acc prod(Acc a, Acc b) { return round(a * b); }
    __device__ static Acc max(Acc a, Acc b) { return SHS_MAX_FIRST_NAN(a, b); }
    __device__ static Acc min(Acc a, Acc b) { return SHS_MIN_FIRST_NAN(a, b); }
    static const bool PreMul = true;
    /* a * k of two dtype values is exact in f32 (comm_reduce.c): one rounding */
    __device__ static Acc premul(Acc a, Acc k) { return round(a * k); }
    __device__ static Stored store(Acc a, int) { return Bits::from_f32(a); }
};

template <typename Tr, int OP>
__global__ void reduce_kernel(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t n,
                              typename Tr::Acc scale) {
    typedef typename Tr::Stored S;
    typedef typename Tr::Acc A;
    const bool pre = OP == OP_AVG && Tr::PreMul;
    GRID_STRIDE(i, n) {
        A acc = Tr::load(((const S *)srcs[0])[i]);
        if (pre) acc = Tr::premul(acc, scale);
        for (int k = 1; k < nsrc; k++) {
            A y = Tr::load(((const S *)srcs[k])[i]);
            if (pre) y = Tr::premul(y, scale);
            switch (OP) {
            case OP_PROD: acc = Tr::prod(acc, y); break;
            case OP_MAX: acc = Tr::max(acc, y); break;
            case OP_MIN: acc = Tr::min(acc, y); break;
            default: acc = Tr::sum(acc, y); break;
            }
        }
        S out = Tr::store(acc, OP == OP_AVG && !Tr::PreMul ? nsrc : 1);
        for (int d = 0; d < ndst; d++) ((S *)dsts[d])[i] = out;
    }
}

template <typename Tr>
static cudaError_t reduce_with(cudaStream_t s, void *const *dsts, int ndst, const void *const *srcs, int nsrc,
                               size_t n, int op, double avg_scale) {
    unsigned g = grid_for(n);
    typename Tr::Acc k = (typename Tr::Acc)avg_scale; /* exact: a value of the dtype (0 for integers) */
    switch (op) {
    case OP_SUM: reduce_kernel<Tr, OP_SUM><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_PROD: reduce_kernel<Tr, OP_PROD><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_MAX: reduce_kernel<Tr, OP_MAX><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_MIN: reduce_kernel<Tr, OP_MIN><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    case OP_AVG: reduce_kernel<Tr, OP_AVG><<<g, THREADS, 0, s>>>(dsts, ndst, srcs, nsrc, n, k); break;
    default: return cudaErrorInvalidValue;
    }
    return launched();
}

extern "C" cudaError_t shs__cuda_reduce(cudaStream_t s, void *const *dsts, int ndst, const void *const *srcs,
                                        int nsrc, size_t n, shs_dtype_t dtype, int op) {
    if (n == 0 || nsrc < 1) return cudaSuccess;
    double k = shs__avg_scale(dtype, nsrc);
    switch (dtype) {
    case SHS_I8: return reduce_with<IntTraits<int8_t, uint8_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U8: return reduce_with<IntTraits<uint8_t, uint8_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_I32: return reduce_with<IntTraits<int32_t, uint32_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U32: return reduce_with<IntTraits<uint32_t, uint32_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_I64: return reduce_with<IntTraits<int64_t, uint64_t, int64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_U64: return reduce_with<IntTraits<uint64_t, uint64_t, uint64_t> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F16: return reduce_with<HalfTraits<F16Bits> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_BF16: return reduce_with<HalfTraits<BF16Bits> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F32: return reduce_with<FloatTraits<float> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    case SHS_F64: return reduce_with<FloatTraits<double> >(s, dsts, ndst, srcs, nsrc, n, op, k);
    default: return cudaErrorInvalidValue;
    }
}
