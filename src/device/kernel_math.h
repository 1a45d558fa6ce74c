/* kernel_math.h - private: the per-element and per-row math of the kernels,
 * written once for the CPU backend (cpu/device_cpu.c, compiled by cc) and the
 * CUDA backend (cuda/kernels.cu, compiled by nvcc) as SHS_HD static inline
 * functions; also the max/min rule of the collectives' reduction, which
 * comm_reduce.c and kernels.cu share.
 *
 * What it is: the arithmetic each output element or row goes through, in the
 * order device.h fixes (a sum is always walked in increasing index, from 0).
 * Both compilers keep it as written: cc with -ffp-contract=off, nvcc with
 * --fmad=false (no a*b+c contracted into an fma), IEEE division and sqrt on
 * both. So where only + - * / sqrt are involved the two backends give the same
 * bits; where a libm function is (expf, logf, tanhf, coshf) each backend calls
 * its own libm (glibc on the host, CUDA's on the device) and they agree to a
 * few ulps only (kernels.cu's header lists them).
 * What it is not: the parallel structure. Which thread computes which
 * element (OpenMP loops on the CPU, blocks and threads on the GPU) stays with
 * each backend; the functions below take one element, one row, or one
 * (row, channel) and never synchronise.
 *
 * Legend: T time, C channels, hs head size, C3 = 3*C (row stride of qkv),
 * V vocabulary; t, t2, t3 positions; i a channel of a head.
 */
#ifndef SHARDSIM_KERNEL_MATH_H
#define SHARDSIM_KERNEL_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "core/host_device.h"
#include "core/rng.h"
#include "shardsim/dtype.h"

/* ---- layernorm ------------------------------------------------------------ */

#define SHS_LN_EPS 1e-5f

/* One row x[0..C): mean, then the variance about it (both summed in index
 * order, divided by C), and rstd = 1 / sqrt(var + eps). */
static inline SHS_HD void shs__layernorm_stats(const float *x, int C, float *mean, float *rstd) {
    float m = 0.0f;
    for (int c = 0; c < C; c++) m += x[c];
    m /= (float)C;
    float v = 0.0f;
    for (int c = 0; c < C; c++) {
        float d = x[c] - m;
        v += d * d;
    }
    v /= (float)C;
    *mean = m;
    *rstd = 1.0f / sqrtf(v + SHS_LN_EPS);
}

/* The normalized value of one element. */
static inline SHS_HD float shs__layernorm_norm(float x, float mean, float rstd) { return (x - mean) * rstd; }

/* One output element: norm * weight + bias. */
static inline SHS_HD float shs__layernorm_out(float x, float mean, float rstd, float weight, float bias) {
    return shs__layernorm_norm(x, mean, rstd) * weight + bias;
}

/* One row of the input gradient, with norm = (x - mean) * rstd and
 * g = weight * dy: dx[c] += (g - mean_c(g) - norm * mean_c(g * norm)) * rstd. */
static inline SHS_HD void shs__layernorm_dinp_row(float *dx, const float *x, const float *dy, const float *weight,
                                                  float m, float s, int C) {
    float g_mean = 0.0f, gn_mean = 0.0f;
    for (int c = 0; c < C; c++) {
        float norm = shs__layernorm_norm(x[c], m, s);
        float g = weight[c] * dy[c];
        g_mean += g;
        gn_mean += g * norm;
    }
    g_mean /= (float)C;
    gn_mean /= (float)C;
    for (int c = 0; c < C; c++) {
        float norm = shs__layernorm_norm(x[c], m, s);
        float g = weight[c] * dy[c];
        dx[c] += (g - g_mean - norm * gn_mean) * s;
    }
}

/* ---- attention ---------------------------------------------------------------
 * Row (b, h, t) of the (T,T) score matrix; kv0 points at position 0 of head h
 * in qkv (keys at kv0 + t2*C3 + C, values at kv0 + t2*C3 + 2C). */

static inline SHS_HD float shs__attention_scale(int hs) { return 1.0f / sqrtf((float)hs); }

/* Gemma 2's soft cap of an attention score or a logit, in Hugging Face's
 * order: (s / cap), tanh, times cap; cap 0: s unchanged. */
static inline SHS_HD float shs__softcap(float s, float cap) { return cap > 0.0f ? tanhf(s / cap) * cap : s; }

/* pre[t2] = (q . k_t2) * scale and att = softmax over t2 <= t (max
 * subtracted); both 0 above the diagonal (t2 > t). */
static inline SHS_HD void shs__attention_scores_row(float *pre, float *a, const float *q, const float *kv0, int t,
                                                    int T, int hs, size_t C3, int C, float scale) {
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
}

/* One output channel: sum_{t2<=t} a[t2] * v[t2 * stride]. */
static inline SHS_HD float shs__attention_value_sum(const float *a, const float *v, size_t stride, int t) {
    float sum = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) sum += a[t2] * v[t2 * stride];
    return sum;
}

/* Backward pass 1, one row: da[t2] = dy . v_t2, dp[t2] = a[t2] (da[t2] - a . da);
 * both 0 above the diagonal. dy: dout at (b, t), head h. */
static inline SHS_HD void shs__attention_bwd_row(float *da, float *dp, const float *a, const float *dy,
                                                 const float *kv0, int t, int T, int hs, size_t C3, int C) {
    float dot = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *v = kv0 + t2 * C3 + 2 * (size_t)C;
        float sum = 0.0f;
        for (int i = 0; i < hs; i++) sum += dy[i] * v[i];
        da[t2] = sum;
        dot += a[t2] * sum;
    }
    for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (da[t2] - dot);
    for (int t2 = t + 1; t2 < T; t2++) da[t2] = dp[t2] = 0.0f;
}

/* Backward pass 2, channel i of position t (dq, dk, dv: the q, k, v parts of
 * dqkv at (b, t), head h; dp, a: the (T,T) matrices of (b, h); dy0: dout at
 * (b, 0), head h):
 *   dq[i] += scale * sum_{t2<=t} dp[t][t2] k_t2[i]
 *   dk[i] += scale * sum_{t3>=t} dp[t3][t] q_t3[i]
 *   dv[i] +=         sum_{t3>=t} a[t3][t]  dout_t3[i] */
static inline SHS_HD void shs__attention_bwd_qkv(float *dq, float *dk, float *dv, const float *dp, const float *a,
                                                 const float *kv0, const float *dy0, int t, int T, int i, size_t C3,
                                                 int C, float scale) {
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

/* ---- dropout and FlashAttention (host only: the CUDA backend has neither) ----
 * Dropout keeps element `i` of stream `key` iff the top 32 bits of
 * shs__dropout_bits(key, i) are >= floor(p * 2^32) (device.h). */

static inline uint64_t shs__dropout_bits(uint64_t key, uint64_t i) { return shs__mix64(key ^ shs__mix64(i)); }
static inline uint32_t shs__dropout_threshold(float p) { return (uint32_t)((double)p * 4294967296.0); }
static inline int shs__dropout_keep(uint64_t key, uint64_t i, uint32_t threshold) {
    return (uint32_t)(shs__dropout_bits(key, i) >> 32) >= threshold;
}
/* The factor a kept element is multiplied by. */
static inline float shs__dropout_scale(float p) { return 1.0f / (1.0f - p); }

/* Keys per block of FlashAttention's inner loop (its K/V tile, B_c). */
#define SHS_FLASH_BLOCK 64

/* One query row (b, h, t) of the flash forward: keys t2 = 0..t in blocks of
 * SHS_FLASH_BLOCK; per block the running max m is raised to the block's,
 * the running sum l and output o are rescaled by exp(m_old - m_new), then
 * each key adds p = exp(s - m) to l and (dropped and scaled) p * v to o.
 * Finally o /= l and *lse = m + log(l). s: SHS_FLASH_BLOCK floats of scratch.
 * Key t2's vectors are k0 + t2 * stride and v0 + t2 * stride. doc: NULL, or
 * the document ids of the row's sequence (T): key t2 is skipped unless
 * doc[t2] == doc[t] (a block with no key left changes nothing).
 * drop: 0 (no dropout), else key t2 is kept iff shs__dropout_keep(key,
 * ctr0 + t2, thr), ctr0 the counter of (t, t2 = 0), and scaled by drop_scale.
 * j_first: the first key (0, or a sliding window's t - W + 1; the blocks
 * start there); softcap: 0, or each score s becomes shs__softcap(s, softcap). */
static inline void shs__flash_forward_row(float *o, float *lse, const float *q, const float *k0, const float *v0,
                                          size_t stride, const int32_t *doc, int t, int j_first, int hs, float scale,
                                          float softcap, int drop, uint64_t key, uint64_t ctr0, uint32_t thr,
                                          float drop_scale, float *s) {
    float m = -INFINITY, l = 0.0f;
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int j0 = j_first; j0 <= t; j0 += SHS_FLASH_BLOCK) {
        int j1 = j0 + SHS_FLASH_BLOCK <= t + 1 ? j0 + SHS_FLASH_BLOCK : t + 1;
        float mb = m;
        for (int j = j0; j < j1; j++) {
            if (doc && doc[j] != doc[t]) continue;
            const float *k = k0 + j * stride;
            float dot = 0.0f;
            for (int i = 0; i < hs; i++) dot += q[i] * k[i];
            s[j - j0] = shs__softcap(dot * scale, softcap);
            if (s[j - j0] > mb) mb = s[j - j0];
        }
        if (mb == -INFINITY) continue; /* every key of the block masked */
        float corr = expf(m - mb); /* the first block: exp(-inf) = 0, and l, o are 0 */
        l *= corr;
        for (int i = 0; i < hs; i++) o[i] *= corr;
        for (int j = j0; j < j1; j++) {
            if (doc && doc[j] != doc[t]) continue;
            float p = expf(s[j - j0] - mb);
            l += p;
            float pd = drop ? (shs__dropout_keep(key, ctr0 + (uint64_t)j, thr) ? p * drop_scale : 0.0f) : p;
            const float *v = v0 + j * stride;
            for (int i = 0; i < hs; i++) o[i] += pd * v[i];
        }
        m = mb;
    }
    for (int i = 0; i < hs; i++) o[i] /= l;
    *lse = m + logf(l);
}

/* Backward of one (query t, key t2) pair of the flash backward, given the
 * row's q, dout dy, lse and D = dy . o: recomputes s and P = exp(s - lse),
 * then (dropout: Pd = keep ? P * drop_scale : 0, and dP likewise masked)
 *   dv += Pd dy;  dS = P (dP - D) with dP = dy . v;  dq += scale dS k;  dk += scale dS q.
 * softcap > 0: s = softcap tanh(s0 / softcap), and dS is multiplied by its
 * derivative 1 - tanh^2 (the tanh recomputed). */
static inline void shs__flash_backward_pair(float *dq, float *dk, float *dv, const float *q, const float *k,
                                            const float *v, const float *dy, float lse, float D, int hs, float scale,
                                            float softcap, int kept, float drop_scale) {
    float dot = 0.0f, dpd = 0.0f;
    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
    float s = dot * scale, th = 0.0f;
    if (softcap > 0.0f) {
        th = tanhf(s / softcap);
        s = th * softcap;
    }
    float p = expf(s - lse);
    float pd = kept ? p * drop_scale : 0.0f;
    for (int i = 0; i < hs; i++) dpd += dy[i] * v[i];
    float ds = p * ((kept ? dpd * drop_scale : 0.0f) - D);
    if (softcap > 0.0f) ds *= 1.0f - th * th;
    for (int i = 0; i < hs; i++) {
        dv[i] += pd * dy[i];
        dq[i] += scale * ds * k[i];
        dk[i] += scale * ds * q[i];
    }
}

/* Eager backward pass 1 with dropout on the probabilities, one row: dd[t2] =
 * dy . v_t2 (gradient of the dropped probabilities), da = mask ? dd * scale
 * : 0, dp[t2] = a[t2] (da[t2] - a . da); both written 0 above the diagonal. */
static inline void shs__attention_bwd_row_dropout(float *da, float *dp, const float *a, const uint8_t *mask,
                                                  float drop_scale, const float *dy, const float *kv0, int t, int T,
                                                  int hs, size_t C3, int C) {
    float dot = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) {
        const float *v = kv0 + t2 * C3 + 2 * (size_t)C;
        float sum = 0.0f;
        for (int i = 0; i < hs; i++) sum += dy[i] * v[i];
        da[t2] = mask[t2] ? sum * drop_scale : 0.0f;
        dot += a[t2] * da[t2];
    }
    for (int t2 = 0; t2 <= t; t2++) dp[t2] = a[t2] * (da[t2] - dot);
    for (int t2 = t + 1; t2 < T; t2++) da[t2] = dp[t2] = 0.0f;
}

/* ---- GELU (tanh approximation) and ReLU -------------------------------------- */

#define SHS_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define SHS_GELU_COEF 0.044715f

static inline SHS_HD float shs__gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(SHS_GELU_SCALE * (x + SHS_GELU_COEF * x * x * x)));
}

/* d/dx = 0.5 (1 + tanh u) + 0.5 x sech^2(u) u',  u = s (x + a x^3), u' = s (1 + 3 a x^2) */
static inline SHS_HD float shs__gelu_grad(float x) {
    float u = SHS_GELU_SCALE * (x + SHS_GELU_COEF * x * x * x);
    float ch = coshf(u);
    float sech2 = 1.0f / (ch * ch); /* coshf overflow gives inf -> 0, the right limit */
    return 0.5f * (1.0f + tanhf(u)) + 0.5f * x * sech2 * SHS_GELU_SCALE * (1.0f + 3.0f * SHS_GELU_COEF * x * x);
}

/* NaN passes through. */
static inline SHS_HD float shs__relu(float x) { return x > 0.0f ? x : (isnan(x) ? x : 0.0f); }

/* The gradient term of one element. */
static inline SHS_HD float shs__relu_grad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }

/* ---- encoder backward -------------------------------------------------------- */

/* dwpe[t, c]'s term: sum over b of dout[b, t, c]. */
static inline SHS_HD float shs__encoder_dwpe_sum(const float *dout, int B, int T, int C, size_t t, int c) {
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += dout[((size_t)b * T + t) * C + c];
    return sum;
}

/* dwte[tok, c]'s term: sum of dout[pos[k], c] over one token's group
 * k = first..end-1 (positions in increasing order, shs__encoder_groups). */
static inline SHS_HD float shs__encoder_dwte_sum(const float *dout, const int32_t *pos, int first, int end, int C,
                                                 int c) {
    float sum = 0.0f;
    for (int k = first; k < end; k++) sum += dout[(size_t)pos[k] * C + c];
    return sum;
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

/* One row: p = softmax(x) (max subtracted, summed in index order); returns
 * the loss log(sum exp(x - max)) - (x[tgt] - max), which stays finite when
 * p[tgt] underflows; NaN for a target outside [0, V). */
static inline SHS_HD float shs__softmax_xent_row(float *p, const float *x, int V, int32_t tgt) {
    float maxval = -INFINITY;
    for (int v = 0; v < V; v++)
        if (x[v] > maxval) maxval = x[v];
    float sum = 0.0f;
    for (int v = 0; v < V; v++) {
        p[v] = expf(x[v] - maxval);
        sum += p[v];
    }
    for (int v = 0; v < V; v++) p[v] /= sum;
    return (tgt < 0 || tgt >= V) ? NAN : logf(sum) - (x[tgt] - maxval);
}

/* One logit's gradient: (p - [v == target]) * dloss. */
static inline SHS_HD float shs__softmax_xent_grad(float p, int is_target, float dloss) {
    return (p - (is_target ? 1.0f : 0.0f)) * dloss;
}

/* ---- sum ---------------------------------------------------------------------- */

/* device.h's order: f64, index order, one rounding to f32 at the end. */
static inline SHS_HD float shs__sum_f64(const float *x, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    return (float)sum;
}

/* ---- cast ----------------------------------------------------------------------
 * Every element goes through f32, which holds every f16 and bf16 value
 * exactly. The one inexact step is f64 -> f32 on the way to f16/bf16: there
 * f64 -> f32 rounds to odd, so the second rounding to nearest-even gives the
 * correctly rounded result (f32 keeps more than two extra bits; Boldo &
 * Melquiond 2008). f64 -> f32 itself is a plain C conversion (nearest-even). */

static inline SHS_HD float shs__f64_to_f32_round_odd(double d) {
    float f = (float)d;
    if (!isfinite(d) || (double)f == d) return f;
    uint32_t u = shs__f32_as_u32(f);
    if (isinf(f) || fabs((double)f) > fabs(d)) u -= 1; /* rounded away from zero: truncate */
    u |= 1u;                                            /* sticky bit: inexact */
    return shs__u32_as_f32(u);
}

/* Element i of src (a float dtype) as f32; f64 rounds to odd when the
 * destination is 16-bit. */
static inline SHS_HD float shs__cast_load_f32(const void *src, int src_dtype, size_t i, int to_16bit) {
    switch (src_dtype) {
    case SHS_F32: return ((const float *)src)[i];
    case SHS_F16: return shs__f16_to_f32(((const uint16_t *)src)[i]);
    case SHS_BF16: return shs__bf16_to_f32(((const uint16_t *)src)[i]);
    default: {
        double d = ((const double *)src)[i];
        return to_16bit ? shs__f64_to_f32_round_odd(d) : (float)d;
    }
    }
}

/* dst[i] = src[i] converted, for two different float dtypes; to_16bit: dst is
 * f16 or bf16. f32 -> f64 is the one path not via f32. */
static inline SHS_HD void shs__cast_one(void *dst, int dst_dtype, const void *src, int src_dtype, size_t i,
                                        int to_16bit) {
    if (dst_dtype == SHS_F64 && src_dtype == SHS_F32) {
        ((double *)dst)[i] = ((const float *)src)[i];
        return;
    }
    float f = shs__cast_load_f32(src, src_dtype, i, to_16bit);
    switch (dst_dtype) {
    case SHS_F32: ((float *)dst)[i] = f; break;
    case SHS_F64: ((double *)dst)[i] = f; break;
    case SHS_F16: ((uint16_t *)dst)[i] = shs__f32_to_f16(f); break;
    default: ((uint16_t *)dst)[i] = shs__f32_to_bf16(f); break;
    }
}

/* ---- the collectives' reduction (comm_reduce.c, kernels.cu) ----------------------
 * max and min of floats, f16/bf16 too: the first NaN operand wins, then the
 * larger (smaller); ties keep the earlier rank. Macros: they serve f32 and
 * f64 alike, in comm_reduce.c's vectorized loops. */
#define SHS_MAX_FIRST_NAN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) > (x) ? (y) : (x))
#define SHS_MIN_FIRST_NAN(x, y) ((x) != (x) ? (x) : (y) != (y) ? (y) : (y) < (x) ? (y) : (x))

/* ---- optimizers ------------------------------------------------------------------ */

/* AdamW's scalars for one call: decay = 1 - lr * weight_decay and
 * step_size = lr / bias_correction1 (device.h), computed once on the host
 * (shs__adamw_coef in device_impl.h). */
typedef struct {
    float decay, step_size, b1, b2, bc2s, eps;
} shs__adamw_coef_t;

/* One element: m, v updated, param = param * decay - step_size * m / (sqrt(v) / bc2s + eps). */
static inline SHS_HD void shs__adamw_one(float *param, const float *grad, float *m, float *v, size_t i,
                                         shs__adamw_coef_t k) {
    float g = grad[i];
    float mi = k.b1 * m[i] + (1.0f - k.b1) * g;
    float vi = k.b2 * v[i] + (1.0f - k.b2) * g * g;
    float denom = sqrtf(vi) / k.bc2s + k.eps;
    param[i] = param[i] * k.decay - k.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
}

/* One element: g = grad + weight_decay * param, through the momentum buffer
 * when momentum != 0; param -= lr * g. */
static inline SHS_HD void shs__sgd_one(float *param, const float *grad, float *momentum_buf, size_t i, float lr,
                                       float momentum, float weight_decay) {
    float g = grad[i] + weight_decay * param[i];
    if (momentum != 0.0f) {
        g = momentum * momentum_buf[i] + g;
        momentum_buf[i] = g;
    }
    param[i] -= lr * g;
}

#endif
