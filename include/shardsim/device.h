/* device.h - the device interface: one simulated GPU's memory and kernels.
 *
 * What it is: an opaque device handle and every operation that model, optimizer
 * and sharding code need. Pointers returned by shs_device_alloc() are *device
 * pointers*: callers pass them to the functions below and never dereference
 * them, so a CUDA backend can fill the same vtable (src/device/device_impl.h) without
 * changes above this line. Every allocation carries a memory category, and the
 * device keeps current and peak bytes per category against a capacity.
 * What it is not: a communicator (see comm.h) or a tensor library.
 *
 * Conventions (llm.c's): outputs first, dimensions last. Legend:
 *   B batch (sequences per rank), T time (context), C channels, NH heads,
 *   V vocabulary, BT = B*T rows, OC output channels, n element count.
 * All float tensors are f32, row-major. "accumulates" means the kernel adds
 * (+=) into the output, as gradient kernels do: it computes its term from
 * zero in a fixed order and adds it once, so backward into a pre-filled
 * buffer P is bit-identical to P + (backward into zeros). Otherwise outputs
 * are overwritten. Unless stated, outputs must not alias inputs.
 * Kernels are deterministic: each output element is computed with one fixed
 * summation order whatever the number of threads.
 * Argument errors in kernels are programming errors and abort (SHS_ASSERT);
 * memory operations return a status.
 */
#ifndef SHARDSIM_DEVICE_H
#define SHARDSIM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/dtype.h"
#include "shardsim/exact_norm.h"
#include "shardsim/status.h"

typedef struct shs_device shs_device_t;

/* What an allocation holds, for per-category accounting (ZeRO paper §3 terms). */
#define SHS_MEM_CATEGORY_MAP(X)                                                       \
    X(PARAMS, "params")                                                              \
    X(GRADS, "grads")                                                                \
    X(OPTIM, "optim")                                                                \
    X(ACTIVATIONS, "activations")                                                    \
    X(COMM, "comm")                                                                  \
    X(OTHER, "other")

typedef enum {
#define SHS_MEM_ENUM(name, str) SHS_MEM_##name,
    SHS_MEM_CATEGORY_MAP(SHS_MEM_ENUM)
#undef SHS_MEM_ENUM
    SHS_MEM_NUM_CATEGORIES
} shs_mem_category_t;

/* Short name: "params", "grads", "optim", "activations", "comm", "other". */
const char *shs_mem_category_name(shs_mem_category_t c);

typedef struct {
    size_t capacity;                          /* bytes; SIZE_MAX = unlimited */
    size_t current[SHS_MEM_NUM_CATEGORIES];   /* bytes in use now */
    size_t peak[SHS_MEM_NUM_CATEGORIES];      /* max of current[c] since reset */
    size_t total_current;                     /* sum over categories */
    size_t total_peak;                        /* max of total_current since reset */
    size_t num_allocs;                        /* live allocations */
} shs_mem_stats_t;

/* Create a CPU (reference) device for `rank` with `capacity` bytes
 * (SIZE_MAX for unlimited). `num_threads` OpenMP threads run each kernel
 * (<= 1: serial). Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_device_create_cpu(shs_device_t **out, int rank, size_t capacity, int num_threads);
/* Create a META device for `rank`: it keeps the books of a real device and
 * moves no data (the meta backend; src/device/meta/device_meta.c). Allocations
 * are accounted exactly as on the CPU device (category, current, peak,
 * capacity) but hand out fake, unique addresses in a reserved range that
 * must never be dereferenced; copies and memset do nothing, except that a
 * device->host copy to real host memory fills it with zeros; kernels only
 * add their FLOPs and memory traffic to the counters of
 * shs_device_kernel_stats(). Needs a 64-bit address space.
 * Errors: SHS_HOST_OOM. */
shs_status_t shs_device_create_meta(shs_device_t **out, int rank, size_t capacity);
/* Create a CUDA device for `rank` on GPU `gpu_index` (src/device/cuda/,
 * built only when the Makefile found nvcc). Memory is plain cudaMalloc with
 * `capacity` bytes of accounting on top (SIZE_MAX: the GPU's own limit);
 * every kernel runs on the device's own stream, deterministically (same
 * inputs, same bits, run after run). Several devices may share one GPU.
 * Versus the CPU backend: bit-identical for every kernel except those that
 * call exp/log/tanh/cosh (attention forward, softmax forward, GELU), which
 * agree to a few ulps (src/device/cuda/kernels.cu). Device pointers are GPU
 * memory: only the copy functions below may take host pointers.
 * Errors: SHS_UNSUPPORTED (built without CUDA, or no CUDA device: the text
 * says which), SHS_INVALID_ARG (no such GPU), SHS_INTERNAL (CUDA error),
 * SHS_HOST_OOM. */
shs_status_t shs_device_create_cuda(shs_device_t **out, int rank, int gpu_index, size_t capacity);
/* Number of CUDA devices in *count. Errors: SHS_UNSUPPORTED with *count = 0
 * and the text "no CUDA device (...)" when there is none or no driver, or
 * "built without the CUDA backend" when nvcc was not found at build time. */
shs_status_t shs_cuda_device_count(int *count);
/* Whether `dev` is a meta device (code that fills device memory from host
 * data, e.g. parameter initialization, skips the work on it). */
int shs_device_is_meta(const shs_device_t *dev);

/* Work the kernels of a device have done since it was created. Counted by
 * backends that model cost (meta); FLOPs as the usual 2 per multiply-add,
 * bytes as each kernel's minimal memory traffic (inputs read once, outputs
 * written once); the per-kernel formulas are in src/device/meta/device_meta.c. */
typedef struct {
    uint64_t kernels;    /* kernel launches */
    uint64_t flops;      /* floating-point operations */
    uint64_t bytes;      /* bytes read + written by the kernels */
    uint64_t matmul_flops; /* of flops: matmuls and attention (tensor-core work on a GPU) */
} shs_kernel_stats_t;

/* One kernel as a counting backend (meta) ran it, for a time model to
 * price: its class, its shape and what it counted (the same FLOPs and
 * bytes as shs_kernel_stats_t; the records of one launch sum to them). A
 * matmul backward is two GEMM records (the weight gradient, and the input
 * gradient when asked) and a bias column sum (elementwise). */
typedef enum {
    SHS_KERNEL_ELEMENTWISE = 0, /* memory bound: norms, activations, residuals, softmax, casts, encoder */
    SHS_KERNEL_GEMM,            /* out (m x n) = A (m x k) B (k x n) */
    SHS_KERNEL_ATTENTION,       /* the causal attention core: m = B x NH (batch x query heads), n = T, k = HD */
    SHS_KERNEL_OPTIMIZER,       /* the optimizer's update over f32 state */
    SHS_KERNEL_NUM_CLASSES
} shs_kernel_class_t;
typedef struct {
    shs_kernel_class_t cls;
    const char *name;        /* the device interface's slot, e.g. "matmul_forward" (static) */
    int backward;            /* a backward kernel */
    int flash;               /* attention: 1 flash (no (T,T) matrix), 0 eager */
    double m, n, k;          /* GEMM and attention shapes (above); 0 for the others */
    double flops, bytes;     /* as counted (device_meta.c's formulas; bytes as f32 unless it says otherwise) */
} shs_kernel_info_t;
typedef void (*shs_kernel_recorder_fn)(void *user, const shs_kernel_info_t *k);
/* Call fn(user, info) for every kernel `dev` runs from now on (NULL: stop).
 * Only counting backends (meta) report; others never call it. The info is
 * valid during the call only. */
void shs_device_set_kernel_recorder(shs_device_t *dev, shs_kernel_recorder_fn fn, void *user);

/* Fill *out. Errors: SHS_UNSUPPORTED for a backend that does not count
 * (cpu); *out is zeroed then. */
shs_status_t shs_device_kernel_stats(const shs_device_t *dev, shs_kernel_stats_t *out);

/* Frees the device; every live allocation is released. NULL is a no-op. */
void shs_device_destroy(shs_device_t *dev);
/* Backend name, e.g. "cpu". */
const char *shs_device_backend(const shs_device_t *dev);

/* ---- memory ---------------------------------------------------------- */

/* Allocate `bytes` of device memory in category `cat`; `tag` (static string,
 * may be NULL) names the allocation in error messages. Contents are
 * unspecified. bytes == 0 returns a unique non-NULL pointer.
 * Errors: SHS_OUT_OF_MEMORY when current usage + bytes exceeds the capacity;
 * the last-error text names the rank, the request (bytes, category, tag) and
 * the current usage per category. SHS_HOST_OOM when the host refuses. */
shs_status_t shs_device_alloc(shs_device_t *dev, void **ptr, size_t bytes, shs_mem_category_t cat,
                              const char *tag);
/* Release an allocation made on this device. NULL is a no-op; a pointer not
 * owned by this device aborts. */
void shs_device_free(shs_device_t *dev, void *ptr);
/* Debugging use-after-free: from now on, fill every freed allocation whose
 * category bit (1 << category) is in the mask with all-ones bytes (an f32
 * NaN) before releasing it, so a stale read poisons results. 0: off. */
void shs_device_set_poison_freed(shs_device_t *dev, unsigned category_mask);
/* Copies of `bytes` bytes. Device ranges must lie inside allocations of this
 * device. Host->device, device->host, device->device (may overlap: memmove). */
shs_status_t shs_memcpy_h2d(shs_device_t *dev, void *dst, const void *src, size_t bytes);
shs_status_t shs_memcpy_d2h(shs_device_t *dev, void *dst, const void *src, size_t bytes);
shs_status_t shs_memcpy_d2d(shs_device_t *dev, void *dst, const void *src, size_t bytes);
/* Set `bytes` bytes at `dst` to the byte `value`. */
shs_status_t shs_memset(shs_device_t *dev, void *dst, int value, size_t bytes);
/* Wait for queued work; returns the first asynchronous error (CPU: always SHS_OK). */
shs_status_t shs_device_sync(shs_device_t *dev);

void shs_device_mem_stats(const shs_device_t *dev, shs_mem_stats_t *out);
/* Set every peak to the current value (both ledgers; the caching allocator
 * model's reserved peak too). */
void shs_device_reset_peak(shs_device_t *dev);

/* ---- the modelled GPU's ledger ------------------------------------------
 * shardsim emulates a GPU run. Some of its buffers exist only because the
 * kernels here compute in f32 (an f32 view of a 16-bit tensor, an f32
 * working copy of a 16-bit gradient), and some the GPU run it models holds
 * at another size. So every device keeps a second ledger, of what the
 * modelled GPU run holds: shs_device_alloc counts `bytes` in both;
 * shs_device_alloc_modeled counts `bytes` in the device's ledger (what this
 * process holds: shs_device_mem_stats, the capacity check, train's report)
 * and `gpu_bytes` in the GPU's (shs_device_gpu_mem_stats, compare's report).
 * The GPU ledger's allocations also go through a model of PyTorch's CUDA
 * caching allocator (src/device/caching_allocator.h: 512 B rounding, 2 MiB /
 * 20 MiB / 2 MiB-rounded segments, best fit, split and merge), whose
 * segments are the bytes a GPU run reserves. */

/* Allocate as shs_device_alloc (the same errors, capacity check on `bytes`),
 * with `gpu_bytes` counted in the GPU ledger in place of `bytes`: 0 for a
 * buffer only the emulation needs; more than `bytes` for one the GPU run
 * holds larger (`bytes` may be 0: the GPU holds a buffer this process does
 * not need). The allocation's category is the same in both ledgers. */
shs_status_t shs_device_alloc_modeled(shs_device_t *dev, void **ptr, size_t bytes, size_t gpu_bytes,
                                      shs_mem_category_t cat, const char *tag);

typedef struct {
    shs_mem_stats_t alloc;    /* the GPU ledger: current and peak per category, totals, live
                               * allocations with gpu_bytes > 0; capacity as the device's */
    size_t reserved;          /* the caching allocator model's segments now, bytes */
    size_t reserved_peak;     /* their most since creation or shs_device_reset_peak */
    uint64_t alloc_retries;   /* times cached segments were released to stay within the limit */
    size_t emulation_current; /* sum over live allocations of bytes - gpu_bytes where positive: what
                               * this process holds that the GPU run does not */
    size_t emulation_peak;
} shs_gpu_mem_stats_t;

void shs_device_gpu_mem_stats(const shs_device_t *dev, shs_gpu_mem_stats_t *out);
/* The bytes the caching allocator model may reserve before it releases its
 * cached, unsplit segments and retries (the board's memory less what lives
 * outside the allocator: CUDA context, NCCL buffers). Default: unlimited.
 * Call before the first allocation. */
void shs_device_set_gpu_reserve_limit(shs_device_t *dev, size_t bytes);
/* As shs_device_window_peak over the GPU ledger's total. */
size_t shs_device_gpu_window_peak(shs_device_t *dev);
/* The highest total bytes in use since the previous call (or creation), and
 * a new window starting now; the peaks of shs_device_mem_stats are not
 * touched. For timelines (train --memory-timeline). */
size_t shs_device_window_peak(shs_device_t *dev);

/* ---- kernels (all f32 unless stated) --------------------------------- */

/* out (BT,OC) = inp (BT,C) @ weight(OC,C)^T + bias (OC); bias may be NULL.
 * Each out element is one chain of fused multiply-adds (fmaf: one rounding
 * per step) in increasing c: acc = bias[o] (or 0); for c = 0..C-1:
 * acc = fma(inp[r,c], weight[o,c], acc); out[r,o] = acc. The bits are the
 * same for every thread count and every instruction set. */
void shs_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                        const float *bias, int BT, int C, int OC);
/* Backward of shs_matmul_forward. Accumulates: dinp (BT,C) += dout @ weight;
 * dweight (OC,C) += dout^T @ inp; dbias (OC) += column sums of dout.
 * dinp and dbias may be NULL (not needed). Each term is computed from 0 in a
 * fixed order and then added once (x = x + term):
 *   dinp[r,c]    term = fma chain over o = 0..OC-1 of dout[r,o] * weight[o,c]
 *   dweight[o,c] term = fma chain over r = 0..BT-1 of dout[r,o] * inp[r,c]
 *   dbias[o]     term = f32 sum (plain adds) over r = 0..BT-1 of dout[r,o]
 * where an fma chain is t = 0; t = fma(x_k, y_k, t) for k in increasing order.
 * The bits are the same for every thread count and every instruction set. */
void shs_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int BT, int C, int OC);

/* LayerNorm over the last dim (eps = 1e-5, biased variance; Ba et al. 2016,
 * as torch.nn.LayerNorm). inp/out (N,C); weight, bias (C); writes mean and
 * rstd (N) for the backward pass. */
void shs_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C);
/* Accumulates dinp (N,C), dweight (C), dbias (C). */
void shs_layernorm_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight,
                            const float *mean, const float *rstd, int N, int C);

/* Causal multi-head self-attention (Vaswani et al. 2017, scaled by
 * 1/sqrt(C/NH)). qkv (B,T,3C) holds q, k, v for each position; head h uses
 * channels [h*C/NH, (h+1)*C/NH) of each. Writes preatt and att (B,NH,T,T)
 * (scores and softmax; entries above the diagonal are 0) and out (B,T,C). */
void shs_attention_forward(shs_device_t *dev, float *out, float *preatt, float *att, const float *qkv,
                           int B, int T, int C, int NH);
/* Accumulates dqkv (B,T,3C). dpreatt and datt (B,NH,T,T) are scratch,
 * overwritten. */
void shs_attention_backward(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                            const float *dout, const float *qkv, const float *att, int B, int T,
                            int C, int NH);

/* Dropout (Srivastava et al. 2014, as torch.nn.Dropout in training): each
 * element is kept with probability 1 - p and scaled by 1/(1-p) (the f32
 * value 1.0f / (1.0f - p)), else zeroed. Which elements are kept is a pure
 * function of (key, offset + i): element i is kept iff the top 32 bits of
 * shs__dropout_bits(key, offset + i) (kernel_math.h, splitmix64) are >=
 * p * 2^32 (rounded down), so a mask is reproduced exactly by recomputation
 * in backward, by another rank, or by a different kernel (flash attention
 * regenerates the eager kernel's mask of the same (B,NH,T,T) positions). */
typedef struct {
    float p;            /* drop probability, 0 <= p < 1; 0: no dropout */
    uint64_t key;       /* the random stream (the caller hashes seed, step, layer, site) */
    uint64_t offset;    /* counter of element 0 (a position in the global batch) */
} shs_dropout_t;

/* out (n) = dropout(inp); mask (n bytes) = 1 where kept, 0 where dropped.
 * out may alias inp. (SHS_KERNELS_DROPOUT) */
void shs_dropout_forward(shs_device_t *dev, float *out, uint8_t *mask, const float *inp, size_t n,
                         const shs_dropout_t *d);
/* Accumulates dinp (n) += mask ? dout / (1 - p) : 0 (the same scale as forward). */
void shs_dropout_backward(shs_device_t *dev, float *dinp, const uint8_t *mask, const float *dout, size_t n, float p);

/* Eager causal attention with dropout on the probabilities (GPT-2's
 * attn_dropout): as shs_attention_forward (preatt, att the scores and
 * softmax), then att_drop = dropout(att) over the (B,NH,T,T) positions,
 * element (b,h,t,t2) at counter d->offset + ((b*NH + h)*T + t)*T + t2,
 * mask (B,NH,T,T bytes), and out (B,T,C) = att_drop @ v. Entries above the
 * diagonal are 0 in every output. (SHS_KERNELS_DROPOUT) */
void shs_attention_forward_dropout(shs_device_t *dev, float *out, float *preatt, float *att, float *att_drop,
                                   uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                   const shs_dropout_t *d);
/* Its backward; accumulates dqkv (B,T,3C). dpreatt, datt (B,NH,T,T) are
 * scratch, overwritten. p: the forward's drop probability. */
void shs_attention_backward_dropout(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                    const float *qkv, const float *att, const float *att_drop, const uint8_t *mask,
                                    int B, int T, int C, int NH, float p);

/* FlashAttention (Dao et al. 2022, Algorithm 1), the same causal attention
 * as shs_attention_forward without the (T,T) matrices: per query row the
 * keys are visited in blocks of SHS_FLASH_BLOCK (kernel_math.h) in
 * increasing order with an online softmax (running max m, running sum l,
 * output rescaled per block), so only out (B,T,C) and the log-sum-exp
 * lse (B,NH,T) = m + log(l) of each row (scaled scores) are written.
 * d: NULL or p = 0 for none, else dropout on the probabilities with the
 * counters of shs_attention_forward_dropout (the same mask). Agrees with
 * the eager kernel to rounding only (a different summation order); the
 * order is fixed, so the bits do not depend on the thread count.
 * (SHS_KERNELS_FLASH_ATTENTION) */
void shs_attention_forward_flash(shs_device_t *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH, const shs_dropout_t *d);
/* Its backward (Algorithm 2): recomputes P = exp(S - lse) from q, k and
 * lse, with D = rowsum(dout * out) per row; accumulates dqkv (B,T,3C),
 * each dq row summed over keys and each dk, dv row over queries in
 * increasing order. out and lse are the forward's; d its dropout. */
void shs_attention_backward_flash(shs_device_t *dev, float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  const shs_dropout_t *d);
/* Kernel sets a backend may lack (the CUDA backend has none of them). */
typedef enum {
    SHS_KERNELS_FLASH_ATTENTION = 1, /* shs_attention_{forward,backward}_flash */
    SHS_KERNELS_DROPOUT = 2,         /* shs_dropout_*, shs_attention_*_dropout */
    SHS_KERNELS_ROUND = 4,           /* shs_round */
    SHS_KERNELS_LLAMA = 8,           /* shs_rmsnorm_*, shs_rope_*, shs_swiglu_*, shs_geglu_*,
                                      * shs_softcap_*, shs_attention_gqa_* (eager and flash),
                                      * shs_encoder_* without positions */
    SHS_KERNELS_IGNORE_INDEX = 16,   /* shs_softmax_xent_* with SHS_IGNORE_INDEX targets */
} shs_kernel_set_t;
/* 1 if the backend has every kernel of the sets in the mask `sets` (0: 1). */
int shs_device_supports(const shs_device_t *dev, unsigned sets);

/* x (n) f32, in place: each value rounded to the nearest value of `dtype`
 * (f16 or bf16; nearest-even, as shs_cast) and kept as f32. For emulating a
 * kernel whose output is stored in a 16-bit dtype. (SHS_KERNELS_ROUND) */
void shs_round(shs_device_t *dev, float *x, shs_dtype_t dtype, size_t n);

/* GELU, tanh approximation (Hendrycks & Gimpel 2016; torch approximate='tanh'):
 * out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). n elements. */
void shs_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n);
/* Accumulates dinp (n) += gelu'(inp) * dout. */
void shs_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n);

/* ReLU: out (n) = max(inp, +0), NaN passed through (torch.relu). n elements. */
void shs_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n);
/* Accumulates dinp (n) += (inp > 0 ? dout : 0): the derivative at 0 is 0, as in torch. */
void shs_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n);

/* ---- Llama-family kernels (SHS_KERNELS_LLAMA) -------------------------
 * Sources: Touvron et al. 2023 (Llama), and Hugging Face transformers'
 * modeling_llama.py / modeling_gemma2.py / modeling_phi3.py for the exact
 * conventions (RMSNorm computed in f32, rotate_half RoPE, repeat_kv
 * grouping, soft capping, sliding windows). HD = head dim, NKV = key/value
 * heads (NH % NKV == 0; NKV == NH is MHA, NKV == 1 is MQA). */

/* RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm) over the last dim:
 * rstd (N) = 1 / sqrt(mean(inp^2) + eps) (sum of squares in f32 in
 * increasing c), out (N,C) = (inp * rstd) * weight (C). */
void shs_rmsnorm_forward(shs_device_t *dev, float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps);
/* Accumulates dinp (N,C) and dweight (C) (over rows in increasing order). */
void shs_rmsnorm_backward(shs_device_t *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C);

/* Rotary position embedding (Su et al. 2021) in HF's rotate_half layout.
 * x (B,T,NH,HD); channels [0, R) rotate, R = rope->rot_dim (HF
 * partial_rotary_factor: R < HD; the channels [R, HD) pass unchanged): for
 * i < R/2 the pair (x[i], x[i + R/2]) is rotated by the angle a =
 * (float)pos * inv_freq[i] (f32 product, cosf/sinf), with c = cos a * m and
 * s = sin a * m (f32; m = rope->mscale, LongRoPE's attention factor):
 * out[i] = x[i] c - x[i+R/2] s, out[i+R/2] = x[i+R/2] c + x[i] s.
 * positions (B,T) int32 device array, or NULL for t. out may alias inp. */
typedef struct {
    const float *inv_freq; /* (R/2) f32 device array (the caller applies rope_theta and any rope scaling) */
    int rot_dim;           /* R, even, 2..HD; 0: HD */
    float mscale;          /* m; 0: 1 */
} shs_rope_t;
void shs_rope_forward(shs_device_t *dev, float *out, const float *inp, const int32_t *positions, const shs_rope_t *rope,
                      int B, int T, int NH, int HD);
/* Accumulates dinp (B,T,NH,HD) += R(-a) m dout on [0, R) (the transposed
 * rotation) and dout on [R, HD). */
void shs_rope_backward(shs_device_t *dev, float *dinp, const float *dout, const int32_t *positions,
                       const shs_rope_t *rope, int B, int T, int NH, int HD);

/* SwiGLU (Shazeer 2020; Llama's MLP): out (n) = silu(gate) * up with
 * silu(x) = x / (1 + expf(-x)). */
void shs_swiglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n);
/* Accumulates dgate (n) += dout * up * silu'(gate) and dup (n) += dout * silu(gate). */
void shs_swiglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, size_t n);
/* GeGLU (Shazeer 2020; Gemma's MLP with hidden_activation gelu_pytorch_tanh):
 * out (n) = gelu(gate) * up, gelu the tanh form of shs_gelu_forward. */
void shs_geglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n);
/* Accumulates dgate (n) += dout * up * gelu'(gate) and dup (n) += dout * gelu(gate). */
void shs_geglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, size_t n);

/* Soft capping (Gemma 2's final_logit_softcapping): out (n) = tanh(inp /
 * cap) * cap in that order, cap > 0. out may alias inp. */
void shs_softcap_forward(shs_device_t *dev, float *out, const float *inp, float cap, size_t n);
/* Its backward from the forward's output: with t = out / cap, dinp (n) =
 * ((dout * cap) * (1 - t t)) / cap, autograd's chain through multiply,
 * tanh and divide. Overwrites dinp (as shs_softmax_xent_backward does),
 * which may alias dout or out. */
void shs_softcap_backward(shs_device_t *dev, float *dinp, const float *dout, const float *out, float cap, size_t n);

/* What the GQA kernels below take beyond the causal mask; NULL or the zero
 * value: HF's Llama attention. */
typedef struct {
    float scale;   /* scores (q . k) * scale; 0: 1/sqrt(HD). Gemma 2/3: query_pre_attn_scalar^-1/2 */
    float softcap; /* > 0: each scaled score s becomes tanh(s / softcap) * softcap (that order)
                    * before the mask (Gemma 2's attn_logit_softcapping); 0: none */
    int window;    /* > 0: query t attends keys t2 > t - window only (HF sliding_window: Mistral,
                    * Gemma 2/3's sliding layers, Qwen2's use_sliding_window); 0: every t2 <= t */
} shs_attention_opts_t;

/* Grouped-query causal attention (Ainslie et al. 2023), eager: q (B,T,NH*HD),
 * k and v (B,T,NKV*HD); query head h reads key/value head h / (NH/NKV)
 * (HF repeat_kv). Position t attends to t2 iff t2 <= t, t2 is inside
 * opt's window and, when doc_ids (B,T int32 device array) is not NULL,
 * doc_ids[b,t2] == doc_ids[b,t] (packed documents). Writes att (B,NH,T,T)
 * (the softmax; masked entries 0) and out (B,T,NH*HD). */
void shs_attention_gqa_forward(shs_device_t *dev, float *out, float *att, const float *q, const float *k,
                               const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B, int T,
                               int NH, int NKV, int HD);
/* Its backward: accumulates dq (B,T,NH*HD), dk and dv (B,T,NKV*HD) (a
 * shared key/value head sums its query heads in increasing h). The mask is
 * read from att: its 0 entries are skipped (a probability that underflowed
 * to 0 has a zero gradient too). With a softcap the capped score's
 * derivative 1 - tanh^2 is recomputed from q and k. datt (B,NH,T,T) is
 * scratch, overwritten. opt: the forward's. */
void shs_attention_gqa_backward(shs_device_t *dev, float *dq, float *dk, float *dv, float *datt, const float *dout,
                                const float *q, const float *k, const float *v, const float *att,
                                const shs_attention_opts_t *opt, int B, int T, int NH, int NKV, int HD);
/* The same attention as FlashAttention (Dao et al. 2022; keys in blocks of
 * SHS_FLASH_BLOCK from the row's first allowed key, online softmax):
 * writes out and lse (B,NH,T) only. */
void shs_attention_gqa_forward_flash(shs_device_t *dev, float *out, float *lse, const float *q, const float *k,
                                     const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                     int T, int NH, int NKV, int HD);
/* Its backward (recomputes the probabilities from lse): accumulates dq,
 * dk, dv as shs_attention_gqa_backward. out, lse, opt: the forward's. */
void shs_attention_gqa_backward_flash(shs_device_t *dev, float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v, const float *out,
                                      const float *lse, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                      int T, int NH, int NKV, int HD);

/* Token + position embedding: out (B,T,C) = wte[tokens[b,t]] + wpe[t].
 * tokens (B,T) int32 in [0,V) (device memory); wte (V,C); wpe (>=T,C), or
 * NULL for no position embedding (out = wte[tokens], SHS_KERNELS_LLAMA). */
void shs_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                         const float *wpe, int B, int T, int C);
/* Accumulates dwte rows and dwpe (T,C; NULL: none, SHS_KERNELS_LLAMA) from dout (B,T,C),
 * visiting (b,t) in increasing order for each row. */
void shs_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C);

/* out (n) = a + b. out may alias a or b. */
void shs_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n);
/* dst (n) += src. */
void shs_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n);
/* x (n) *= alpha, in place. */
void shs_scale(shs_device_t *dev, float *x, float alpha, size_t n);

/* Softmax cross-entropy: probs (BT,V) = softmax(logits (BT,V)) per row;
 * losses (BT) = -log probs[targets]. targets (BT) int32 in [0,V), or
 * SHS_IGNORE_INDEX (-100, model.h) on a backend with
 * SHS_KERNELS_IGNORE_INDEX: that row's loss is 0 and its dlogits row 0. */
void shs_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                              const int32_t *targets, int BT, int V);
/* dlogits (BT,V) = (probs - onehot(targets)) * dloss (overwritten), where
 * dloss is d(loss)/d(losses[i]), the same for every row (e.g. 1/BT for a mean). */
void shs_softmax_xent_backward(shs_device_t *dev, float *dlogits, const float *probs,
                               const int32_t *targets, float dloss, int BT, int V);

/* out[0] = sum of x (n), accumulated in f64 in index order, rounded once to f32.
 * out is a device pointer to one float. */
void shs_sum(shs_device_t *dev, float *out, const float *x, size_t n);
/* Add |x[i]|^p (p = 1 or 2; SHS_NORM_INF for max |x|) over n elements into the exact accumulator acc
 * (device pointer to SHS_NORM_ACC_WORDS int64, see exact_norm.h; zero it to
 * start). The result does not depend on how the elements are split across
 * calls or ranks. Read it back and finish with shs_exact_norm_finish(). */
void shs_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p);

/* Convert n elements between float dtypes (f32, f16, bf16, f64), rounding to
 * nearest-even (dtype.h). dst and src must not overlap unless identical and
 * the dtypes have the same size. */
void shs_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src,
              shs_dtype_t src_dtype, size_t n);

/* Host-computed AdamW constants (Loshchilov & Hutter 2019; torch.optim.AdamW). */
typedef struct {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;         /* decoupled: param *= 1 - lr * weight_decay */
    float bias_correction1;     /* 1 - beta1^step */
    float bias_correction2_sqrt;/* sqrt(1 - beta2^step) */
} shs_adamw_hparams_t;

/* One AdamW step on n elements, in place on param, m, v; as torch.optim.AdamW
 * (foreach=False): p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= (lr / bc1) * m / (sqrt(v) / bc2_sqrt + eps). */
void shs_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                      const shs_adamw_hparams_t *hp);
/* One SGD step on n elements, in place, as torch.optim.SGD (dampening 0,
 * nesterov off): g' = g + wd p; buf = momentum buf + g'; p -= lr buf.
 * When momentum == 0 the step is p -= lr g' and momentum_buf (may be NULL)
 * is not touched. */
void shs_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                    float lr, float momentum, float weight_decay);

#endif
