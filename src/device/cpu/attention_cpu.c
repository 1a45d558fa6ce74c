/* attention_cpu.c - the CPU backend's dropout and the attention kernels
 * beyond plain eager attention: eager with dropout on the probabilities,
 * and FlashAttention's forward and backward (Dao et al. 2022, Algorithms 1
 * and 2) that keep no (T,T) matrix. Contracts in device.h; the per-row math
 * is kernel_math.h's.
 * What it is: OpenMP loops over independent outputs, each output summed in
 * one fixed order, so the bits do not depend on the thread count.
 * What it is not: the plain eager kernels or the vtable (device_cpu.c).
 *
 * Legend: B batch, T time, C channels, NH heads, hs = C/NH head size,
 * C3 = 3C (qkv's row stride), n element count.
 */
#include <stdlib.h>
#include <string.h>

#include "device/cpu/attention_cpu.h"
#include "device/device_impl.h"

#ifdef _OPENMP
#define PARALLEL_FOR _Pragma("omp parallel for schedule(static) num_threads(nth) if(nth > 1)")
#else
#define PARALLEL_FOR (void)nth;
#endif

static int threads(const shs_device_t *dev) { return dev->num_threads > 1 ? dev->num_threads : 1; }

/* ---- dropout ------------------------------------------------------------- */

void shs__cpu_dropout_forward(shs_device_t *dev, float *out, uint8_t *mask, const float *inp, size_t n,
                              const shs_dropout_t *d) {
    int nth = threads(dev);
    uint32_t thr = shs__dropout_threshold(d->p);
    float scale = shs__dropout_scale(d->p);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) {
        int keep = d->p == 0.0f || shs__dropout_keep(d->key, d->offset + i, thr);
        mask[i] = (uint8_t)keep;
        out[i] = keep ? inp[i] * scale : 0.0f;
    }
}

void shs__cpu_dropout_backward(shs_device_t *dev, float *dinp, const uint8_t *mask, const float *dout, size_t n,
                               float p) {
    int nth = threads(dev);
    float scale = shs__dropout_scale(p);
    PARALLEL_FOR
    for (size_t i = 0; i < n; i++) dinp[i] += mask[i] ? dout[i] * scale : 0.0f;
}

/* ---- eager attention with dropout ------------------------------------------ */

void shs__cpu_attention_forward_dropout(shs_device_t *dev, float *out, float *preatt, float *att, float *att_drop,
                                        uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                        const shs_dropout_t *d) {
    int nth = threads(dev), hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = shs__attention_scale(hs), drop_scale = shs__dropout_scale(d->p);
    uint32_t thr = shs__dropout_threshold(d->p);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        size_t row = (size_t)bht * T;
        float *a = att + row, *ad = att_drop + row;
        uint8_t *mk = mask + row;
        shs__attention_scores_row(preatt + row, a, q, kv0, t, T, hs, C3, C, scale);
        for (int t2 = 0; t2 < T; t2++) {
            int keep = t2 <= t && (d->p == 0.0f || shs__dropout_keep(d->key, d->offset + row + (size_t)t2, thr));
            mk[t2] = (uint8_t)keep;
            ad[t2] = keep ? a[t2] * drop_scale : 0.0f;
        }
        float *o = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) o[i] = shs__attention_value_sum(ad, kv0 + 2 * (size_t)C + i, C3, t);
    }
}

void shs__cpu_attention_backward_dropout(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                                         const float *dout, const float *qkv, const float *att, const float *att_drop,
                                         const uint8_t *mask, int B, int T, int C, int NH, float p) {
    int nth = threads(dev), hs = C / NH;
    size_t C3 = 3 * (size_t)C, TT = (size_t)T * T;
    float scale = shs__attention_scale(hs), drop_scale = shs__dropout_scale(p);
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
        size_t row = (size_t)bht * T;
        shs__attention_bwd_row_dropout(datt + row, dpreatt + row, att + row, mask + row, drop_scale, dy, kv0, t, T,
                                       hs, C3, C);
    }
    /* pass 2 as the eager kernel's, with the dropped probabilities for dv */
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        size_t bh = (size_t)bht / T;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        const float *dy0 = dout + (size_t)b * T * C + h * hs;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + h * hs;
        for (int i = 0; i < hs; i++)
            shs__attention_bwd_qkv(dq, dq + C, dq + 2 * (size_t)C, dpreatt + bh * TT, att_drop + bh * TT, kv0, dy0, t,
                                   T, i, C3, C, scale);
    }
}

/* ---- FlashAttention ---------------------------------------------------------- */

void shs__cpu_attention_forward_flash(shs_device_t *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                      int NH, const shs_dropout_t *d) {
    int nth = threads(dev), hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = shs__attention_scale(hs), drop_scale = d ? shs__dropout_scale(d->p) : 1.0f;
    uint32_t thr = d ? shs__dropout_threshold(d->p) : 0;
    PARALLEL_FOR
    for (int bht = 0; bht < B * NH * T; bht++) {
        int b = bht / (NH * T), h = bht / T % NH, t = bht % T;
        const float *q = qkv + ((size_t)b * T + t) * C3 + h * hs;
        const float *kv0 = qkv + (size_t)b * T * C3 + h * hs;
        float s[SHS_FLASH_BLOCK];
        uint64_t ctr0 = d ? d->offset + (size_t)bht * T : 0;
        shs__flash_forward_row(out + ((size_t)b * T + t) * C + h * hs, lse + bht, q, kv0 + C, kv0 + 2 * (size_t)C, C3,
                               NULL, t, 0, hs, scale, 0.0f, d != NULL, d ? d->key : 0, ctr0, thr, drop_scale, s);
    }
}

/* One (b, h) per iteration: D per row, then queries t in increasing order
 * and for each the keys t2 <= t in increasing order, into zeroed per-(b,h)
 * dq, dk, dv (T, hs) that are added to dqkv once at the end. */
void shs__cpu_attention_backward_flash(shs_device_t *dev, float *dqkv, const float *dout, const float *qkv,
                                       const float *out, const float *lse, int B, int T, int C, int NH,
                                       const shs_dropout_t *d) {
    int nth = threads(dev), hs = C / NH;
    size_t C3 = 3 * (size_t)C, ths = (size_t)T * hs;
    float scale = shs__attention_scale(hs), drop_scale = d ? shs__dropout_scale(d->p) : 1.0f;
    uint32_t thr = d ? shs__dropout_threshold(d->p) : 0;
    PARALLEL_FOR
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        float *g = calloc(3 * ths + (size_t)T, sizeof *g); /* dq, dk, dv (T,hs), D (T) */
        SHS_ASSERT(g != NULL);
        float *dq = g, *dk = g + ths, *dv = g + 2 * ths, *D = g + 3 * ths;
        const float *base = qkv + (size_t)b * T * C3 + h * hs;
        for (int t = 0; t < T; t++) {
            const float *dy = dout + ((size_t)b * T + t) * C + h * hs, *o = out + ((size_t)b * T + t) * C + h * hs;
            float sum = 0.0f;
            for (int i = 0; i < hs; i++) sum += dy[i] * o[i];
            D[t] = sum;
        }
        for (int t = 0; t < T; t++) {
            const float *q = base + t * C3, *dy = dout + ((size_t)b * T + t) * C + h * hs;
            float L = lse[(size_t)bh * T + t];
            uint64_t ctr0 = d ? d->offset + ((size_t)bh * T + t) * T : 0;
            for (int t2 = 0; t2 <= t; t2++) {
                int kept = !d || shs__dropout_keep(d->key, ctr0 + (uint64_t)t2, thr);
                shs__flash_backward_pair(dq + (size_t)t * hs, dk + (size_t)t2 * hs, dv + (size_t)t2 * hs, q,
                                         base + t2 * C3 + C, base + t2 * C3 + 2 * (size_t)C, dy, L, D[t], hs, scale,
                                         0.0f, kept, drop_scale);
            }
        }
        for (int t = 0; t < T; t++) {
            float *dst = dqkv + ((size_t)b * T + t) * C3 + h * hs;
            for (int i = 0; i < hs; i++) {
                dst[i] += dq[(size_t)t * hs + i];
                dst[C + i] += dk[(size_t)t * hs + i];
                dst[2 * (size_t)C + i] += dv[(size_t)t * hs + i];
            }
        }
        free(g);
    }
}
