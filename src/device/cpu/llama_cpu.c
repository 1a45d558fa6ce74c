/* llama_cpu.c - the CPU backend's Llama-family kernels (SHS_KERNELS_LLAMA):
 * RMSNorm, rotary position embedding (partial, scaled), SwiGLU and GeGLU,
 * soft capping, and grouped-query causal attention with optional
 * per-document masks, sliding windows and score soft caps, eager and
 * FlashAttention. Contracts in device.h; the flash row is kernel_math.h's,
 * shared with the GPT flash kernel (attention_cpu.c). Sources: Zhang &
 * Sennrich 2019 (RMSNorm), Su et al. 2021 (RoPE), Shazeer 2020 (SwiGLU,
 * GeGLU), Ainslie et al. 2023 (GQA), Dao et al. 2022 (FlashAttention),
 * Gemma Team 2024 (soft capping), and Hugging Face transformers'
 * modeling_llama.py, modeling_gemma2.py and modeling_phi3.py for the
 * conventions (LlamaRMSNorm in f32, rotate_half on the rotary part,
 * repeat_kv, tanh capping order, the window t - t2 < W).
 * What it is: OpenMP loops over independent outputs, each output summed in
 * one fixed order from zero and (for "accumulates") added once, so the bits
 * do not depend on the thread count and backward into a pre-filled buffer P
 * is bit-identical to P + (backward into zeros).
 * What it is not: the vtable (device_cpu.c), the argument checks (device.c),
 * or the GPT kernels.
 *
 * Legend: B batch, T time, NH query heads, NKV key/value heads, G = NH/NKV
 * query heads per key/value head, HD head dim, N rows, C channels, n element
 * count; q rows (b,t,h) at ((b*T + t)*NH + h)*HD, k and v rows (b,t,kvh) at
 * ((b*T + t)*NKV + kvh)*HD, att/datt rows (b,h,t) at ((b*NH + h)*T + t)*T;
 * R rotary channels, W window, cap soft cap.
 */
#include <math.h>
#include <stdlib.h>

#include "device/cpu/llama_cpu.h"
#include "device/device_impl.h"

#ifdef _OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")
#else
#define PARALLEL_FOR (void)nth;
#endif

/* Column sums over rows (dweight) walk COLS adjacent columns per iteration. */
#define COLS 16

static int threads(const shs_device_t *dev) { return dev->num_threads > 1 ? dev->num_threads : 1; }

/* ---- RMSNorm ------------------------------------------------------------------
 * rstd = 1/sqrt(sum_c x^2 / C + eps), y = (x rstd) w. With xhat = x rstd and
 * g = dy w (per row): dx = rstd (g - xhat mean_c(g xhat)), dw = sum_rows dy xhat. */

void shs__cpu_rmsnorm_forward(shs_device_t *dev, float *out, float *rstd, const float *inp, const float *weight,
                              int N, int C, float eps) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;
        float *y = out + (size_t)r * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        float s = 1.0f / sqrtf(ss / (float)C + eps);
        for (int c = 0; c < C; c++) y[c] = (x[c] * s) * weight[c];
        rstd[r] = s;
    }
}

void shs__cpu_rmsnorm_backward(shs_device_t *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                               const float *weight, const float *rstd, int N, int C) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C, *dy = dout + (size_t)r * C;
        float *dx = dinp + (size_t)r * C, s = rstd[r];
        float dot = 0.0f; /* sum_c g xhat */
        for (int c = 0; c < C; c++) dot += (dy[c] * weight[c]) * (x[c] * s);
        float mean = dot / (float)C;
        for (int c = 0; c < C; c++) dx[c] += s * (dy[c] * weight[c] - (x[c] * s) * mean);
    }
    int nb = (C + COLS - 1) / COLS;
    PARALLEL_FOR
    for (int cb = 0; cb < nb; cb++) {
        int c0 = cb * COLS, nc = C - c0 < COLS ? C - c0 : COLS;
        float dw[COLS] = {0};
        for (int r = 0; r < N; r++) {
            const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
            for (int j = 0; j < nc; j++) dw[j] += dy[j] * (x[j] * rstd[r]);
        }
        for (int j = 0; j < nc; j++) dweight[c0 + j] += dw[j];
    }
}

/* ---- RoPE (rotate_half layout on the first R channels) -----------------------------
 * Per (b, t) row and pair i < R/2 (the same angle for every head):
 * a = (float)pos * inv_freq[i], c = cosf(a) m, s = sinf(a) m; forward
 * R(a), backward R(-a) = R(a)^T; channels [R, HD) pass through. */

static int rope_pos(const int32_t *positions, int bt, int T) { return positions ? positions[bt] : bt % T; }

void shs__cpu_rope_forward(shs_device_t *dev, float *out, const float *inp, const int32_t *positions,
                           const shs_rope_t *rope, int B, int T, int NH, int HD) {
    int nth = threads(dev), half = rope->rot_dim / 2, R = rope->rot_dim;
    const float *inv_freq = rope->inv_freq;
    float m = rope->mscale;
    PARALLEL_FOR
    for (int bt = 0; bt < B * T; bt++) {
        float pos = (float)rope_pos(positions, bt, T);
        for (int i = 0; i < half; i++) {
            float a = pos * inv_freq[i], c = cosf(a) * m, s = sinf(a) * m;
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)bt * NH + h) * HD + i;
                float x0 = inp[o], x1 = inp[o + half]; /* both read first: out may alias inp */
                out[o] = x0 * c - x1 * s;
                out[o + half] = x1 * c + x0 * s;
            }
        }
        if (out != inp)
            for (int h = 0; h < NH; h++)
                for (int j = R; j < HD; j++) out[((size_t)bt * NH + h) * HD + j] = inp[((size_t)bt * NH + h) * HD + j];
    }
}

void shs__cpu_rope_backward(shs_device_t *dev, float *dinp, const float *dout, const int32_t *positions,
                            const shs_rope_t *rope, int B, int T, int NH, int HD) {
    int nth = threads(dev), half = rope->rot_dim / 2, R = rope->rot_dim;
    const float *inv_freq = rope->inv_freq;
    float m = rope->mscale;
    PARALLEL_FOR
    for (int bt = 0; bt < B * T; bt++) {
        float pos = (float)rope_pos(positions, bt, T);
        for (int i = 0; i < half; i++) {
            float a = pos * inv_freq[i], c = cosf(a) * m, s = sinf(a) * m;
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)bt * NH + h) * HD + i;
                float g0 = dout[o], g1 = dout[o + half];
                dinp[o] += g0 * c + g1 * s;
                dinp[o + half] += g1 * c - g0 * s;
            }
        }
        for (int h = 0; h < NH; h++)
            for (int j = R; j < HD; j++) dinp[((size_t)bt * NH + h) * HD + j] += dout[((size_t)bt * NH + h) * HD + j];
    }
}

/* ---- SwiGLU and GeGLU -----------------------------------------------------------------
 * silu(g) = g / (1 + exp(-g)); with sig = 1 / (1 + exp(-g)):
 * silu'(g) = sig (1 + g (1 - sig)). GeGLU: gelu and gelu' of kernel_math.h
 * (the tanh form, torch's approximate='tanh'). */

void shs__cpu_swiglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void shs__cpu_swiglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                              const float *up, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sig = 1.0f / (1.0f + expf(-g));
        dgate[i] += dout[i] * up[i] * (sig * (1.0f + g * (1.0f - sig)));
        dup[i] += dout[i] * (g * sig);
    }
}

void shs__cpu_geglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) out[i] = shs__gelu(gate[i]) * up[i];
}

void shs__cpu_geglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                             const float *up, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        dgate[i] += dout[i] * up[i] * shs__gelu_grad(gate[i]);
        dup[i] += dout[i] * shs__gelu(gate[i]);
    }
}

/* ---- soft capping ------------------------------------------------------------------------ */

void shs__cpu_softcap_forward(shs_device_t *dev, float *out, const float *inp, float cap, size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) out[i] = shs__softcap(inp[i], cap);
}

void shs__cpu_softcap_backward(shs_device_t *dev, float *dinp, const float *dout, const float *out, float cap,
                               size_t n) {
    int nth = threads(dev);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        float t = out[i] / cap;
        dinp[i] = ((dout[i] * cap) * (1.0f - t * t)) / cap;
    }
}

/* ---- grouped-query attention, eager ----------------------------------------------
 * Row (b, h, t) of att: s[t2] = cap((q_t . k_t2) scale) over the allowed
 * keys t2 of t (t2 <= t, inside the window, of t's document), softmax over
 * them (max subtracted), 0 elsewhere; out_t = sum of att[t2] v_t2 over the
 * same keys in increasing t2. Key/value head kvh = h / G. A masked entry
 * is exactly 0 in att, and the backward (which takes no doc_ids) skips the
 * entries where att is 0: those whose probability underflowed have a zero
 * gradient anyway. */

static int allowed(const int32_t *doc, int W, int t, int t2) {
    return (!doc || doc[t2] == doc[t]) && (!W || t - t2 < W);
}

static float dot_hd(const float *a, const float *b, int HD) {
    float d = 0.0f;
    for (int i = 0; i < HD; i++) d += a[i] * b[i];
    return d;
}

void shs__cpu_attention_gqa_forward(shs_device_t *dev, float *out, float *att, const float *q, const float *k,
                                    const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                    int T, int NH, int NKV, int HD) {
    int nth = threads(dev), G = NH / NKV, W = opt->window;
    size_t kvs = (size_t)NKV * HD; /* k and v row stride over t */
    float scale = opt->scale, cap = opt->softcap;
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const int32_t *doc = doc_ids ? doc_ids + (size_t)b * T : NULL;
        const float *qt = q + ((size_t)b * T + t) * NH * HD + (size_t)h * HD;
        const float *k0 = k + (size_t)b * T * kvs + (size_t)(h / G) * HD, *v0 = v + (k0 - k);
        float *a = att + (size_t)bht * T, maxv = -INFINITY, sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            a[t2] = 0.0f;
            if (!allowed(doc, W, t, t2)) continue;
            a[t2] = shs__softcap(dot_hd(qt, k0 + t2 * kvs, HD) * scale, cap);
            if (a[t2] > maxv) maxv = a[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) {
            if (!allowed(doc, W, t, t2)) continue;
            a[t2] = expf(a[t2] - maxv);
            sum += a[t2];
        }
        for (int t2 = 0; t2 <= t; t2++)
            if (allowed(doc, W, t, t2)) a[t2] /= sum;
        for (int t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;
        float *o = out + ((size_t)b * T + t) * NH * HD + (size_t)h * HD;
        for (int i = 0; i < HD; i++) {
            float acc = 0.0f;
            for (int t2 = 0; t2 <= t; t2++)
                if (allowed(doc, W, t, t2)) acc += a[t2] * v0[t2 * kvs + i];
            o[i] = acc;
        }
    }
}

/* Three passes over disjoint outputs:
 *   1. datt row (b,h,t): dP[t2] = dout_t . v_t2, then in place
 *      dS[t2] = att[t2] (dP[t2] - sum_t3 att[t3] dP[t3])   (0 where att is 0),
 *      times 1 - tanh^2 of the uncapped score / cap with a soft cap
 *   2. dq_t  += scale * sum_{t2<=t} dS[t][t2] k_t2
 *   3. dk_t  += scale * sum_{h in group} sum_{t3>=t} dS_h[t3][t] q_{t3,h}
 *      dv_t  +=         sum_{h in group} sum_{t3>=t} att_h[t3][t] dout_{t3,h}
 *      (h outer, t3 inner, one accumulator per element). */
void shs__cpu_attention_gqa_backward(shs_device_t *dev, float *dq, float *dk, float *dv, float *datt,
                                     const float *dout, const float *q, const float *k, const float *v,
                                     const float *att, const shs_attention_opts_t *opt, int B, int T, int NH, int NKV,
                                     int HD) {
    int nth = threads(dev), G = NH / NKV;
    size_t kvs = (size_t)NKV * HD, qs = (size_t)NH * HD, TT = (size_t)T * T;
    float scale = opt->scale, cap = opt->softcap;
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *dy = dout + ((size_t)b * T + t) * qs + (size_t)h * HD;
        const float *k0 = k + (size_t)b * T * kvs + (size_t)(h / G) * HD, *v0 = v + (k0 - k);
        const float *a = att + (size_t)bht * T;
        float *d = datt + (size_t)bht * T, dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            d[t2] = 0.0f;
            if (a[t2] == 0.0f) continue;
            d[t2] = dot_hd(dy, v0 + t2 * kvs, HD);
            dot += a[t2] * d[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) d[t2] = a[t2] == 0.0f ? 0.0f : a[t2] * (d[t2] - dot);
        if (cap > 0.0f) {
            const float *qt = q + ((size_t)b * T + t) * qs + (size_t)h * HD;
            for (int t2 = 0; t2 <= t; t2++) {
                if (a[t2] == 0.0f) continue;
                float th = tanhf(dot_hd(qt, k0 + t2 * kvs, HD) * scale / cap);
                d[t2] *= 1.0f - th * th;
            }
        }
        for (int t2 = t + 1; t2 < T; t2++) d[t2] = 0.0f;
    }
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *k0 = k + (size_t)b * T * kvs + (size_t)(h / G) * HD;
        const float *a = att + (size_t)bht * T, *d = datt + (size_t)bht * T;
        float *g = dq + ((size_t)b * T + t) * qs + (size_t)h * HD;
        for (int i = 0; i < HD; i++) {
            float acc = 0.0f;
            for (int t2 = 0; t2 <= t; t2++)
                if (a[t2] != 0.0f) acc += d[t2] * k0[t2 * kvs + i];
            g[i] += acc * scale;
        }
    }
    PARALLEL_FOR
    for (int bkt = 0; bkt < B * NKV * T; bkt++) {
        int b = bkt / (NKV * T), kvh = bkt / T % NKV, t = bkt % T;
        size_t row = ((size_t)b * T + t) * kvs + (size_t)kvh * HD;
        for (int i = 0; i < HD; i++) {
            float sk = 0.0f, sv = 0.0f;
            for (int h = kvh * G; h < (kvh + 1) * G; h++) {
                const float *a = att + ((size_t)b * NH + h) * TT, *d = datt + ((size_t)b * NH + h) * TT;
                const float *q0 = q + (size_t)b * T * qs + (size_t)h * HD, *dy0 = dout + (q0 - q);
                for (int t3 = t; t3 < T; t3++) {
                    size_t e = (size_t)t3 * T + t;
                    if (a[e] == 0.0f) continue;
                    sk += d[e] * q0[t3 * qs + i];
                    sv += a[e] * dy0[t3 * qs + i];
                }
            }
            dk[row + i] += sk * scale;
            dv[row + i] += sv;
        }
    }
}

/* ---- grouped-query attention, FlashAttention ----------------------------------------- */

/* The first key query t may attend: 0, or the window's t - W + 1. */
static int first_key(int W, int t) { return W && t - W + 1 > 0 ? t - W + 1 : 0; }

void shs__cpu_attention_gqa_forward_flash(shs_device_t *dev, float *out, float *lse, const float *q, const float *k,
                                          const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                          int B, int T, int NH, int NKV, int HD) {
    int nth = threads(dev), G = NH / NKV;
    size_t kvs = (size_t)NKV * HD, qs = (size_t)NH * HD;
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        size_t kv0 = (size_t)b * T * kvs + (size_t)(h / G) * HD, qo = ((size_t)b * T + t) * qs + (size_t)h * HD;
        float s[SHS_FLASH_BLOCK];
        shs__flash_forward_row(out + qo, lse + bht, q + qo, k + kv0, v + kv0, kvs,
                               doc_ids ? doc_ids + (size_t)b * T : NULL, t, first_key(opt->window, t), HD, opt->scale,
                               opt->softcap, 0, 0, 0, 0, 1.0f, s);
    }
}

/* One (b, kvh) per iteration: for each query head h of the group in
 * increasing order, D per row, then queries t in increasing order and for
 * each the allowed keys t2 <= t in increasing order, into zeroed dq (G,T,HD),
 * dk, dv (T,HD) that are added to the outputs once at the end. */
void shs__cpu_attention_gqa_backward_flash(shs_device_t *dev, float *dq, float *dk, float *dv, const float *dout,
                                           const float *q, const float *k, const float *v, const float *out,
                                           const float *lse, const int32_t *doc_ids, const shs_attention_opts_t *opt,
                                           int B, int T, int NH, int NKV, int HD) {
    int nth = threads(dev), G = NH / NKV, W = opt->window;
    size_t kvs = (size_t)NKV * HD, qs = (size_t)NH * HD, ths = (size_t)T * HD;
    float scale = opt->scale, cap = opt->softcap;
    PARALLEL_FOR
    for (int bk = 0; bk < B * NKV; bk++) {
        int b = bk / NKV, kvh = bk % NKV;
        const int32_t *doc = doc_ids ? doc_ids + (size_t)b * T : NULL;
        float *g = calloc(((size_t)G + 2) * ths + (size_t)T, sizeof *g); /* dq (G,T,HD), dk, dv (T,HD), D (T) */
        SHS_ASSERT(g != NULL);
        float *gk = g + (size_t)G * ths, *gv = gk + ths, *D = gv + ths;
        size_t kv0 = (size_t)b * T * kvs + (size_t)kvh * HD;
        for (int j = 0; j < G; j++) {
            int h = kvh * G + j;
            size_t q0 = (size_t)b * T * qs + (size_t)h * HD;
            for (int t = 0; t < T; t++) D[t] = dot_hd(dout + q0 + t * qs, out + q0 + t * qs, HD);
            for (int t = 0; t < T; t++) {
                float L = lse[((size_t)b * NH + h) * T + t];
                for (int t2 = first_key(W, t); t2 <= t; t2++) {
                    if (!allowed(doc, W, t, t2)) continue;
                    shs__flash_backward_pair(g + (size_t)j * ths + (size_t)t * HD, gk + (size_t)t2 * HD,
                                             gv + (size_t)t2 * HD, q + q0 + t * qs, k + kv0 + t2 * kvs,
                                             v + kv0 + t2 * kvs, dout + q0 + t * qs, L, D[t], HD, scale, cap, 1, 1.0f);
                }
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < HD; i++) dq[q0 + t * qs + i] += g[(size_t)j * ths + (size_t)t * HD + i];
        }
        for (int t = 0; t < T; t++)
            for (int i = 0; i < HD; i++) {
                dk[kv0 + t * kvs + i] += gk[(size_t)t * HD + i];
                dv[kv0 + t * kvs + i] += gv[(size_t)t * HD + i];
            }
        free(g);
    }
}
