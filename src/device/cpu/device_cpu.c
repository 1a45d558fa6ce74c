/* device_cpu.c - the CPU (reference) backend: host memory and f32 kernels for
 * GPT-2 training, in the manner of llm.c's train_gpt2.c.
 *
 * What it is: the vtable behind shs_device_create_cpu(). Device memory is
 * 64-byte aligned host memory; kernels are plain C, parallelised with OpenMP
 * over independent output elements only, so each output element is computed
 * with one fixed summation order whatever dev->num_threads is. Results are
 * therefore bit-identical across thread counts and runs.
 * What it is not: a BLAS. No fast-math, no reassociated reductions. The
 * matmul lives in matmul_cpu.c: fma chains in a fixed order, vectorised across
 * outputs only, so its bits do not depend on the instruction set either.
 *
 * "Accumulates" here always means: the kernel computes the gradient term from
 * zero in its fixed order and then adds it to the output once, so backward
 * into a pre-filled buffer P is bit-identical to P + (backward into zeros),
 * i.e. to shs_accumulate() of a separately computed gradient.
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH head size,
 * V vocabulary, BT = B*T rows, OC output channels, n element count.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardsim/exact_norm.h"
#include "device/device_impl.h"
#include "device/cpu/matmul_cpu.h"
#include "shardsim/units.h"

/* OpenMP loop over independent outputs; `nth` must be in scope. Without
 * OpenMP (e.g. the TSan build) the loops simply run serially. */
#ifdef _OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")
#else
#define PARALLEL_FOR (void)nth;
#endif

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

#define LN_EPS 1e-5f

static void cpu_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *y = out + (size_t)r * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= (float)C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            v += d * d;
        }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * weight[c] + bias[c];
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
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        float m = mean[r], s = rstd[r];
        float g_mean = 0.0f, gn_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float g = weight[c] * dy[c];
            g_mean += g;
            gn_mean += g * norm;
        }
        g_mean /= (float)C;
        gn_mean /= (float)C;
        float *dx = dinp + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            float norm = (x[c] - m) * s;
            float g = weight[c] * dy[c];
            dx[c] += (g - g_mean - norm * gn_mean) * s;
        }
    }
    int nb = (C + COLS - 1) / COLS;
    PARALLEL_FOR
    for (int cb = 0; cb < nb; cb++) {
        int c0 = cb * COLS, nc = imin(COLS, C - c0);
        float dw[COLS] = {0}, db[COLS] = {0};
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
            for (int j = 0; j < nc; j++) {
                float norm = (x[j] - mean[r]) * rstd[r];
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
    float scale = 1.0f / sqrtf((float)hs);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs; /* position 0, head h */
        float *pre = preatt + (size_t)bht * T, *a = att + (size_t)bht * T;
        float maxval = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *k = kv0 + t2 * C3 + C;
            float dot = 0.0f;
            for (int i = 0; i < hs; i++) dot += q[i] * k[i];
            pre[t2] = dot * scale;
            if (pre[t2] > maxval) maxval = pre[t2];
        }
        float expsum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            a[t2] = expf(pre[t2] - maxval);
            expsum += a[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) a[t2] /= expsum;
        for (int t2 = t + 1; t2 < T; t2++) pre[t2] = a[t2] = 0.0f;
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) {
            float s = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) s += a[t2] * kv0[t2 * C3 + 2 * (size_t)C + i];
            o[i] = s;
        }
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
    float scale = 1.0f / sqrtf((float)hs);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
        const float *a = att + (size_t)bht * T;
        float *da = datt + (size_t)bht * T, *dp = dpreatt + (size_t)bht * T;
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            const float *v = kv0 + t2 * C3 + 2 * (size_t)C;
            float s = 0.0f;
            for (int i = 0; i < hs; i++) s += dy[i] * v[i];
            da[t2] = s;
            dot += a[t2] * s;
        }
        for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (da[t2] - dot);
        for (int t2 = t + 1; t2 < T; t2++) da[t2] = dp[t2] = 0.0f;
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
        for (int i = 0; i < hs; i++) {
            float sq = 0.0f, sk = 0.0f, sv = 0.0f;
            for (int t2 = 0; t2 <= t; t2++) sq += dp[(size_t)t * T + t2] * kv0[t2 * C3 + C + i];
            for (int t3 = t; t3 < T; t3++) {
                sk += dp[(size_t)t3 * T + t] * kv0[t3 * C3 + i];
                sv += a[(size_t)t3 * T + t] * dy0[(size_t)t3 * C + i];
            }
            dq[i] += sq * scale;
            dk[i] += sk * scale;
            dv[i] += sv;
        }
    }
}

/* ---- GELU (tanh approximation) ------------------------------------------ */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_COEF 0.044715f

static void cpu_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + GELU_COEF * x * x * x)));
    }
}

/* d/dx = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u',  u = s (x + a x^3), u' = s (1 + 3 a x^2) */
static void cpu_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_COEF * x * x * x);
        float ch = coshf(u);
        float sech2 = 1.0f / (ch * ch); /* coshf overflow gives inf -> 0, the right limit */
        float grad = 0.5f * (1.0f + tanhf(u)) +
                     0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_COEF * x * x);
        dinp[i] += grad * dout[i];
    }
}

/* ---- ReLU ----------------------------------------------------------------- */

static void cpu_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x > 0.0f ? x : (isnan(x) ? x : 0.0f);
    }
}

static void cpu_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
}

/* ---- encoder ------------------------------------------------------------ */

static void cpu_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                                const float *wpe, int B, int T, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int bt = 0; bt < B * T; bt++) {
        int32_t tok = tokens[bt];
        SHS_ASSERT(tok >= 0);
        const float *e = wte + (size_t)tok * C, *p = wpe + (size_t)(bt % T) * C;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

typedef struct { int32_t tok; int32_t pos; } tok_pos_t;

static int cmp_tok_pos(const void *x, const void *y) {
    const tok_pos_t *a = x, *b = y;
    if (a->tok != b->tok) return a->tok < b->tok ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* dwpe[t] += sum_b dout[b,t]; dwte[v] += sum over (b,t) with tokens[b,t] == v.
 * Positions are grouped by token (sorted by (token, position), a total order)
 * so each dwte row is summed by one thread in increasing (b,t). */
static void cpu_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                                 const int32_t *tokens, int B, int T, int C) {
    int nth = threads(dev);
    int BT = B * T;
    PARALLEL_FOR
    for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
            float s = 0.0f;
            for (int b = 0; b < B; b++) s += dout[((size_t)b * T + t) * C + c];
            dwpe[(size_t)t * C + c] += s;
        }
    }
    tok_pos_t *order = malloc(((size_t)BT + 1) * sizeof *order);
    int *group_start = malloc(((size_t)BT + 1) * sizeof *group_start);
    SHS_ASSERT(order != NULL && group_start != NULL);
    for (int i = 0; i < BT; i++) order[i] = (tok_pos_t){tokens[i], i};
    qsort(order, (size_t)BT, sizeof *order, cmp_tok_pos);
    int ngroups = 0;
    for (int i = 0; i < BT; i++)
        if (i == 0 || order[i].tok != order[i - 1].tok) group_start[ngroups++] = i;
    group_start[ngroups] = BT;
    PARALLEL_FOR
    for (int g = 0; g < ngroups; g++) {
        int first = group_start[g], end = group_start[g + 1];
        SHS_ASSERT(order[first].tok >= 0);
        float *dw = dwte + (size_t)order[first].tok * C;
        for (int c = 0; c < C; c++) {
            float s = 0.0f;
            for (int i = first; i < end; i++) s += dout[(size_t)order[i].pos * C + c];
            dw[c] += s;
        }
    }
    free(group_start);
    free(order);
}

/* ---- elementwise -------------------------------------------------------- */

static void cpu_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void cpu_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static void cpu_scale(shs_device_t *dev, float *x, float alpha, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

/* ---- softmax cross-entropy ---------------------------------------------- */

/* loss = -log(probs[target]) computed as log(sum exp(x - max)) - (x[target] - max),
 * which stays finite when probs[target] underflows. */
static void cpu_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                                    const int32_t *targets, int BT, int V) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < BT; r++) {
        const float *x = logits + (size_t)r * V;
        float *p = probs + (size_t)r * V;
        int32_t tgt = targets[r];
        SHS_ASSERT(tgt >= 0 && tgt < V);
        float maxval = -INFINITY;
        for (int v = 0; v < V; v++)
            if (x[v] > maxval) maxval = x[v];
        float sum = 0.0f;
        for (int v = 0; v < V; v++) {
            p[v] = expf(x[v] - maxval);
            sum += p[v];
        }
        for (int v = 0; v < V; v++) p[v] /= sum;
        losses[r] = logf(sum) - (x[tgt] - maxval);
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
        SHS_ASSERT(tgt >= 0 && tgt < V);
        for (int v = 0; v < V; v++) d[v] = (p[v] - (v == tgt ? 1.0f : 0.0f)) * dloss;
    }
}

/* ---- reductions (serial: the contract fixes index order) ---------------- */

static void cpu_sum(shs_device_t *dev, float *out, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    out[0] = (float)s;
}

static void cpu_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p) {
    shs_exact_norm_add(acc, x, n, p);
}

/* ---- cast ----------------------------------------------------------------
 * Every element goes through f32, which holds every f16 and bf16 value
 * exactly. The one inexact step is f64 -> f32 on the way to f16/bf16: there
 * f64 -> f32 rounds to odd, so the second rounding to nearest-even gives the
 * correctly rounded result (f32 keeps more than two extra bits; Boldo &
 * Melquiond 2008). f64 -> f32 itself is a plain C conversion (nearest-even). */

static float f64_to_f32_round_odd(double d) {
    float f = (float)d;
    if (!isfinite(d) || (double)f == d) return f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isinf(f) || fabs((double)f) > fabs(d)) u -= 1; /* rounded away from zero: truncate */
    u |= 1u;                                            /* sticky bit: inexact */
    memcpy(&f, &u, 4);
    return f;
}

static float load_f32(const void *src, shs_dtype_t t, size_t i, int to_16bit) {
    switch (t) {
    case SHS_F32: return ((const float *)src)[i];
    case SHS_F16: return shs_f16_to_f32(((const uint16_t *)src)[i]);
    case SHS_BF16: return shs_bf16_to_f32(((const uint16_t *)src)[i]);
    case SHS_F64: {
        double d = ((const double *)src)[i];
        return to_16bit ? f64_to_f32_round_odd(d) : (float)d;
    }
    default: SHS_ASSERT(!"cast: not a float dtype"); return 0.0f;
    }
}

static void cpu_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src,
                     shs_dtype_t src_dtype, size_t n) {
    SHS_ASSERT(shs_dtype_is_float(dst_dtype) && shs_dtype_is_float(src_dtype));
    int nth = threads(dev);
    if (dst_dtype == src_dtype) {
        if (dst != src) memmove(dst, src, n * shs_dtype_size(dst_dtype));
        return;
    }
    if (dst_dtype == SHS_F64 && src_dtype == SHS_F32) { /* the one path not via f32 */
        PARALLEL_FOR
        for (size_t i = 0; i < n; i++) ((double *)dst)[i] = ((const float *)src)[i];
        return;
    }
    int to_16bit = dst_dtype == SHS_F16 || dst_dtype == SHS_BF16;
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float f = load_f32(src, src_dtype, i, to_16bit);
        switch (dst_dtype) {
        case SHS_F32: ((float *)dst)[i] = f; break;
        case SHS_F64: ((double *)dst)[i] = f; break;
        case SHS_F16: ((uint16_t *)dst)[i] = shs_f32_to_f16(f); break;
        default: ((uint16_t *)dst)[i] = shs_f32_to_bf16(f); break;
        }
    }
}

/* ---- optimizers ----------------------------------------------------------- */

static void cpu_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                             const shs_adamw_hparams_t *hp) {
    int nth = threads(dev);
    float decay = 1.0f - hp->lr * hp->weight_decay;
    float step_size = hp->lr / hp->bias_correction1;
    float b1 = hp->beta1, b2 = hp->beta2, bc2s = hp->bias_correction2_sqrt, eps = hp->eps;
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        float denom = sqrtf(vi) / bc2s + eps;
        param[i] = param[i] * decay - step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

static void cpu_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                           float lr, float momentum, float weight_decay) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + weight_decay * param[i];
        if (momentum != 0.0f) {
            g = momentum * momentum_buf[i] + g;
            momentum_buf[i] = g;
        }
        param[i] -= lr * g;
    }
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
    .sum = cpu_sum,
    .norm_accumulate = cpu_norm_accumulate,
    .cast = cpu_cast,
    .adamw_update = cpu_adamw_update,
    .sgd_update = cpu_sgd_update,
};

shs_status_t shs_device_create_cpu(shs_device_t **out, int rank, size_t capacity, int num_threads) {
    return shs__device_new(out, &shs__cpu_iface, NULL, rank, capacity, num_threads);
}
