/* device_cpu.c - the CPU (reference) backend: host memory and f32 kernels for
 * GPT-2 training, in the manner of llm.c's train_gpt2.c.
 *
 * What it is: the vtable behind shs_device_create_cpu(). Device memory is
 * 64-byte aligned host memory; kernels are plain C, parallelised with OpenMP
 * over independent output elements only, so each output element is computed
 * with one fixed summation order whatever dev->num_threads is. Results are
 * therefore bit-identical across thread counts and runs.
 * The math of each element or row is kernel_math.h's, shared with the CUDA
 * backend; this file holds the loops around it.
 * What it is not: a BLAS. No fast-math, no reassociated reductions. The
 * matmul lives in matmul_cpu.c: fma chains in a fixed order, vectorised across
 * outputs only, so its bits do not depend on the instruction set either.
 * Dropout and the flash / dropout attention kernels live in attention_cpu.c,
 * the Llama-family kernels (RMSNorm, RoPE, SwiGLU, GQA) in llama_cpu.c.
 *
 * "Accumulates" here always means: the kernel computes the gradient term from
 * zero in its fixed order and then adds it to the output once, so backward
 * into a pre-filled buffer P is bit-identical to P + (backward into zeros),
 * i.e. to shs_accumulate() of a separately computed gradient.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH head size,
 * V vocabulary, BT = B*T rows, OC output channels, n element count.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardsim/exact_norm.h"
#include "shardsim/model.h" /* SHS_IGNORE_INDEX */
#include "device/device_impl.h"
#include "device/cpu/attention_cpu.h"
#include "device/cpu/llama_cpu.h"
#include "device/cpu/matmul_cpu.h"
#include "shardsim/units.h"

/* OpenMP loop over independent outputs; `nth` must be in scope. Without
 * OpenMP (e.g. the TSan build) the loops simply run serially. */
#ifdef _OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")
#else
#define PARALLEL_FOR (void)nth;
#endif

/* OpenMP loop over n independent elements i (the CPU's GRID_STRIDE);
 * declares nth, so one per function. */
#define EACH_ELEMENT(i, n)                                                                                  \
    int nth = threads(dev);                                                                                 \
    PARALLEL_FOR                                                                                            \
    for (size_t i = 0; i < (n); i++)

/* Column sums over rows (dweight and dbias of layernorm) walk COLS adjacent
 * columns per thread so each row read is one cache line, not a strided hop. */
#define COLS 16

static int threads(const shs_device_t *dev) { return dev->num_threads > 1 ? dev->num_threads : 1; }

static int imin(int a, int b) { return a < b ? a : b; }

/* ---- memory ---------------------------------------------------------- */

/* All CPU devices of the process share the host's RAM: their allocations
 * together may not exceed 80% of it, so an oversized simulation fails with a
 * clear error instead of meeting the kernel's OOM killer. */
static _Atomic size_t host_bytes_in_use;

static size_t host_budget(void) {
    static _Atomic size_t budget;
    size_t b = atomic_load(&budget);
    if (!b) {
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        b = ram > 0 ? (size_t)(ram * 0.8) : SIZE_MAX;
        atomic_store(&budget, b);
    }
    return b;
}

static shs_status_t cpu_alloc(shs_device_t *dev, void **ptr, size_t bytes) {
    void *p = NULL;
    *ptr = NULL;
    size_t before = atomic_fetch_add(&host_bytes_in_use, bytes), budget = host_budget();
    if (before + bytes < before || before + bytes > budget) {
        atomic_fetch_sub(&host_bytes_in_use, bytes);
        char req[32], used[32], ram[32];
        return shs_set_error(SHS_HOST_OOM,
                             "rank %d: cannot allocate %s: the simulated devices of this process already hold %s "
                             "of host memory, and the limit is %s (80%% of RAM)",
                             dev->rank, shs_format_bytes(req, sizeof req, (double)bytes),
                             shs_format_bytes(used, sizeof used, (double)before),
                             shs_format_bytes(ram, sizeof ram, (double)budget));
    }
    /* bytes == 0 still gets its own (unique, non-NULL) block */
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || !p) {
        atomic_fetch_sub(&host_bytes_in_use, bytes);
        char req[32];
        return shs_set_error(SHS_HOST_OOM, "rank %d: host allocation of %s failed", dev->rank,
                             shs_format_bytes(req, sizeof req, (double)bytes));
    }
    *ptr = p;
    return SHS_OK;
}

static void cpu_free(shs_device_t *dev, void *ptr, size_t bytes) {
    free(ptr);
    atomic_fetch_sub(&host_bytes_in_use, bytes);
}

static shs_status_t cpu_memcpy(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
    return SHS_OK;
}

static shs_status_t cpu_memcpy_d2d(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (bytes) memmove(dst, src, bytes);
    return SHS_OK;
}

static shs_status_t cpu_memset(shs_device_t *dev, void *dst, int value, size_t bytes) {
    if (bytes) memset(dst, value, bytes);
    return SHS_OK;
}

static shs_status_t cpu_sync(shs_device_t *dev) { return SHS_OK; }

static void cpu_destroy(shs_device_t *dev) {} /* no backend context */

/* ---- layernorm --------------------------------------------------------- */

static void cpu_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *y = out + (size_t)r * C;
        float m, s;
        shs__layernorm_stats(x, C, &m, &s);
        for (int c = 0; c < C; c++) y[c] = shs__layernorm_out(x[c], m, s, weight[c], bias[c]);
        mean[r] = m;
        rstd[r] = s;
    }
}

/* With norm = (x - mean) * rstd and g = weight * dout (per row):
 *   dinp   = rstd * (g - mean_c(g) - norm * mean_c(g * norm))
 *   dweight = sum_rows dout * norm,  dbias = sum_rows dout. */
static void cpu_layernorm_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight,
                                   const float *mean, const float *rstd, int N, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < N; r++)
        shs__layernorm_dinp_row(dinp + (size_t)r * C, inp + (size_t)r * C, dout + (size_t)r * C, weight, mean[r],
                                rstd[r], C);
    int nb = (C + COLS - 1) / COLS;
    PARALLEL_FOR
    for (int cb = 0; cb < nb; cb++) {
        int c0 = cb * COLS, nc = imin(COLS, C - c0);
        float dw[COLS] = {0}, db[COLS] = {0};
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
            for (int j = 0; j < nc; j++) {
                float norm = shs__layernorm_norm(x[j], mean[r], rstd[r]);
                dw[j] += dy[j] * norm;
                db[j] += dy[j];
            }
        }
        for (int j = 0; j < nc; j++) {
            dweight[c0 + j] += dw[j];
            dbias[c0 + j] += db[j];
        }
    }
}

/* ---- attention -----------------------------------------------------------
 * For batch b, head h, query position t (row of the (T,T) score matrix):
 *   preatt[t2] = (q_t . k_t2) * scale      t2 <= t, scale = 1/sqrt(hs)
 *   att[t2]    = softmax over t2 <= t     (0 above the diagonal)
 *   out_t      = sum_{t2<=t} att[t2] v_t2
 * q_t, k_t, v_t are the hs channels of head h in qkv (B,T,3C). */

static void cpu_attention_forward(shs_device_t *dev, float *out, float *preatt, float *att, const float *qkv,
                                  int B, int T, int C, int NH) {
    int nth = threads(dev);
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = shs__attention_scale(hs);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs; /* position 0, head h */
        float *a = att + (size_t)bht * T;
        shs__attention_scores_row(preatt + (size_t)bht * T, a, q, kv0, t, T, hs, C3, C, scale);
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) o[i] = shs__attention_value_sum(a, kv0 + 2 * (size_t)C + i, C3, t);
    }
}

/* Two passes, each over (b, h, t) with disjoint outputs:
 *   1. datt[t][t2]    = dout_t . v_t2
 *      dpreatt[t][t2] = att[t][t2] * (datt[t][t2] - sum_t3 att[t][t3] datt[t][t3])
 *   2. dq_t  += scale * sum_{t2<=t} dpreatt[t][t2] k_t2
 *      dk_t  += scale * sum_{t3>=t} dpreatt[t3][t] q_t3
 *      dv_t  +=         sum_{t3>=t} att[t3][t]    dout_t3 */
static void cpu_attention_backward(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                                   const float *dout, const float *qkv, const float *att, int B, int T,
                                   int C, int NH) {
    int nth = threads(dev);
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C, TT = (size_t)T * T;
    float scale = shs__attention_scale(hs);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
        shs__attention_bwd_row(datt + (size_t)bht * T, dpreatt + (size_t)bht * T, att + (size_t)bht * T, dy, kv0, t,
                               T, hs, C3, C);
    }
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        size_t bh = (size_t)bht / T; /* index of (b,h) */
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy0 = dout + (size_t)b * T * C + h * hs;
        const float *a = att + bh * TT, *dp = dpreatt + bh * TT;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
        float *dk = dq + C, *dv = dq + 2 * (size_t)C;
        for (int i = 0; i < hs; i++) shs__attention_bwd_qkv(dq, dk, dv, dp, a, kv0, dy0, t, T, i, C3, C, scale);
    }
}

/* ---- GELU (tanh approximation) and ReLU ------------------------------------ */

static void cpu_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    EACH_ELEMENT(i, n) out[i] = shs__gelu(inp[i]);
}

static void cpu_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    EACH_ELEMENT(i, n) dinp[i] += shs__gelu_grad(inp[i]) * dout[i];
}

static void cpu_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    EACH_ELEMENT(i, n) out[i] = shs__relu(inp[i]);
}

static void cpu_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    EACH_ELEMENT(i, n) dinp[i] += shs__relu_grad(inp[i], dout[i]);
}

/* ---- encoder ------------------------------------------------------------ */

static void cpu_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                                const float *wpe, int B, int T, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int bt = 0; bt < B * T; bt++) {
        int32_t tok = tokens[bt];
        SHS_ASSERT(tok >= 0);
        const float *e = wte + (size_t)tok * C;
        float *o = out + (size_t)bt * C;
        if (!wpe) { /* no position embedding (Llama: RoPE in attention instead) */
            for (int c = 0; c < C; c++) o[c] = e[c];
            continue;
        }
        const float *p = wpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

/* dwpe[t] += sum_b dout[b,t] (dwpe NULL: none); dwte[v] += sum over (b,t) with tokens[b,t] == v,
 * each dwte row summed by one thread in increasing (b,t) (shs__encoder_groups). */
static void cpu_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                                 const int32_t *tokens, int B, int T, int C) {
    int nth = threads(dev);
    int BT = B * T;
    if (dwpe) {
        PARALLEL_FOR
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) dwpe[(size_t)t * C + c] += shs__encoder_dwpe_sum(dout, B, T, C, (size_t)t, c);
    }
    int32_t *groups = malloc((3 * (size_t)BT + 1) * sizeof *groups);
    SHS_ASSERT(groups != NULL);
    int ngroups = shs__encoder_groups(tokens, BT, groups);
    const int32_t *pos = groups, *group_start = groups + BT, *group_tok = group_start + ngroups + 1;
    PARALLEL_FOR
    for (int g = 0; g < ngroups; g++) {
        float *dw = dwte + (size_t)group_tok[g] * C;
        for (int c = 0; c < C; c++) dw[c] += shs__encoder_dwte_sum(dout, pos, group_start[g], group_start[g + 1], C, c);
    }
    free(groups);
}

/* ---- elementwise -------------------------------------------------------- */

static void cpu_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n) {
    EACH_ELEMENT(i, n) out[i] = a[i] + b[i];
}

static void cpu_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n) {
    EACH_ELEMENT(i, n) dst[i] += src[i];
}

static void cpu_scale(shs_device_t *dev, float *x, float alpha, size_t n) {
    EACH_ELEMENT(i, n) x[i] *= alpha;
}

/* ---- softmax cross-entropy ---------------------------------------------- */

/* loss = -log(probs[target]), computed so that it stays finite (kernel_math.h);
 * an ignored target (SHS_IGNORE_INDEX) still gets its probs, with loss 0. */
static void cpu_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                                    const int32_t *targets, int BT, int V) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        int32_t tgt = targets[r];
        SHS_ASSERT((tgt >= 0 && tgt < V) || tgt == SHS_IGNORE_INDEX);
        float loss = shs__softmax_xent_row(probs + (size_t)r * V, logits + (size_t)r * V, V, tgt);
        losses[r] = tgt == SHS_IGNORE_INDEX ? 0.0f : loss;
    }
}

static void cpu_softmax_xent_backward(shs_device_t *dev, float *dlogits, const float *probs,
                                      const int32_t *targets, float dloss, int BT, int V) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        const float *p = probs + (size_t)r * V;
        float *d = dlogits + (size_t)r * V;
        int32_t tgt = targets[r];
        SHS_ASSERT((tgt >= 0 && tgt < V) || tgt == SHS_IGNORE_INDEX);
        if (tgt == SHS_IGNORE_INDEX) {
            memset(d, 0, (size_t)V * sizeof *d);
            continue;
        }
        for (int v = 0; v < V; v++) d[v] = shs__softmax_xent_grad(p[v], v == tgt, dloss);
    }
}

/* ---- reductions (serial: the contract fixes index order) ---------------- */

static void cpu_sum(shs_device_t *dev, float *out, const float *x, size_t n) { out[0] = shs__sum_f64(x, n); }

static void cpu_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p) {
    shs_exact_norm_add(acc, x, n, p);
}

/* ---- cast (the rounding rules: kernel_math.h) ------------------------------ */

static void cpu_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src,
                     shs_dtype_t src_dtype, size_t n) {
    SHS_ASSERT(shs_dtype_is_float(dst_dtype) && shs_dtype_is_float(src_dtype));
    if (dst_dtype == src_dtype) {
        if (dst != src) memmove(dst, src, n * shs_dtype_size(dst_dtype));
        return;
    }
    int to_16bit = dst_dtype == SHS_F16 || dst_dtype == SHS_BF16;
    EACH_ELEMENT(i, n) shs__cast_one(dst, (int)dst_dtype, src, (int)src_dtype, i, to_16bit);
}

static void cpu_round(shs_device_t *dev, float *x, shs_dtype_t dtype, size_t n) {
    EACH_ELEMENT(i, n) x[i] = dtype == SHS_F16 ? shs__f16_to_f32(shs__f32_to_f16(x[i])) : shs__bf16_to_f32(shs__f32_to_bf16(x[i]));
}

/* ---- optimizers ----------------------------------------------------------- */

static void cpu_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                             const shs_adamw_hparams_t *hp) {
    shs__adamw_coef_t k = shs__adamw_coef(hp);
    EACH_ELEMENT(i, n) shs__adamw_one(param, grad, m, v, i, k);
}

static void cpu_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                           float lr, float momentum, float weight_decay) {
    EACH_ELEMENT(i, n) shs__sgd_one(param, grad, momentum_buf, i, lr, momentum, weight_decay);
}

/* ---- vtable and constructor ---------------------------------------------- */

const shs_device_iface_t shs__cpu_iface = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memcpy_h2d = cpu_memcpy,
    .memcpy_d2h = cpu_memcpy,
    .memcpy_d2d = cpu_memcpy_d2d,
    .memset = cpu_memset,
    .sync = cpu_sync,
    .destroy = cpu_destroy,
    .matmul_forward = shs__cpu_matmul_forward,
    .matmul_backward = shs__cpu_matmul_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .dropout_forward = shs__cpu_dropout_forward,
    .dropout_backward = shs__cpu_dropout_backward,
    .attention_forward_dropout = shs__cpu_attention_forward_dropout,
    .attention_backward_dropout = shs__cpu_attention_backward_dropout,
    .attention_forward_flash = shs__cpu_attention_forward_flash,
    .attention_backward_flash = shs__cpu_attention_backward_flash,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .encoder_forward = cpu_encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .residual_forward = cpu_residual_forward,
    .accumulate = cpu_accumulate,
    .scale = cpu_scale,
    .softmax_xent_forward = cpu_softmax_xent_forward,
    .softmax_xent_backward = cpu_softmax_xent_backward,
    .xent_ignore_index = 1,
    .sum = cpu_sum,
    .norm_accumulate = cpu_norm_accumulate,
    .cast = cpu_cast,
    .round = cpu_round,
    .adamw_update = cpu_adamw_update,
    .sgd_update = cpu_sgd_update,
    .rmsnorm_forward = shs__cpu_rmsnorm_forward,
    .rmsnorm_backward = shs__cpu_rmsnorm_backward,
    .rope_forward = shs__cpu_rope_forward,
    .rope_backward = shs__cpu_rope_backward,
    .swiglu_forward = shs__cpu_swiglu_forward,
    .swiglu_backward = shs__cpu_swiglu_backward,
    .geglu_forward = shs__cpu_geglu_forward,
    .geglu_backward = shs__cpu_geglu_backward,
    .softcap_forward = shs__cpu_softcap_forward,
    .softcap_backward = shs__cpu_softcap_backward,
    .attention_gqa_forward = shs__cpu_attention_gqa_forward,
    .attention_gqa_backward = shs__cpu_attention_gqa_backward,
    .attention_gqa_forward_flash = shs__cpu_attention_gqa_forward_flash,
    .attention_gqa_backward_flash = shs__cpu_attention_gqa_backward_flash,
};

shs_status_t shs_device_create_cpu(shs_device_t **out, int rank, size_t capacity, int num_threads) {
    return shs__device_new(out, &shs__cpu_iface, NULL, rank, capacity, num_threads);
}
