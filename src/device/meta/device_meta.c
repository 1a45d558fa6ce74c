/* device_meta.c - the meta backend: a device that keeps the books of a GPU
 * and moves no data, so a world of any size costs one rank.
 *
 * What it is: the third filling of the device vtable (device_impl.h).
 * Allocation hands out fake addresses from a per-device bump counter in a
 * reserved range [2^62, 2^63) that no user-space mapping can occupy, so
 * device.c's accounting (keyed by pointer) works unchanged and a stray
 * dereference faults at once. Copies and memset do nothing, except a
 * device->host copy whose destination is real host memory (outside the
 * reserved range), which is filled with zeros so callers read defined
 * values (a loss of 0, a gradient norm of 0). Kernels only add their cost to
 * counters:
 *   flops  2 per multiply-add; elementwise ops the count given per kernel
 *          below (estimates of the arithmetic, not of any GPU's instructions)
 *   bytes  every input read once and every output written once (f32 unless
 *          the kernel says otherwise): the traffic of a fused, cache-perfect
 *          kernel, the usual roofline lower bound.
 * Each launch is also reported to the device's kernel recorder (device.h),
 * with its shape for GEMMs (a matmul backward as its two GEMMs and the bias
 * sum) and the attention core, so a time model can price kernel by kernel.
 * The Llama-family kernels' formulas (RMSNorm, RoPE, SwiGLU, GQA eager and
 * flash, the encoder without positions) are stated beside each below;
 * attention counts the causal pairs even under a document mask (the meta
 * device cannot read doc_ids), so packed batches are counted as an upper bound.
 * What it is not: a cost model of a particular GPU (compare's time model
 * prices the records, src/time/), or usable memory.
 */
#include "device/device_impl.h"

#include <stdlib.h>
#include <string.h>

#define META_BASE ((uintptr_t)1 << 62)
#define META_END ((uintptr_t)1 << 63)
#define META_ALIGN 256u

typedef struct {
    uintptr_t next;          /* next fake address */
    shs_kernel_stats_t ks;
} meta_ctx_t;

static meta_ctx_t *ctx_of(const shs_device_t *dev) { return (meta_ctx_t *)dev->ctx; }

static int is_fake(const void *p) { return (uintptr_t)p >= META_BASE && (uintptr_t)p < META_END; }

static shs_status_t meta_alloc(shs_device_t *dev, void **ptr, size_t bytes) {
    meta_ctx_t *m = ctx_of(dev);
    size_t span = (bytes + META_ALIGN - 1) / META_ALIGN * META_ALIGN + META_ALIGN; /* a gap: 0 bytes stay unique */
    if (bytes > META_END - META_BASE || m->next > META_END - span)
        return shs_set_error(SHS_HOST_OOM, "rank %d: meta device address range exhausted", dev->rank);
    *ptr = (void *)m->next;
    m->next += span;
    return SHS_OK;
}

static void meta_free(shs_device_t *dev, void *ptr, size_t bytes) {} /* nothing to give back */

static shs_status_t meta_copy_nop(shs_device_t *dev, void *dst, const void *src, size_t bytes) { return SHS_OK; }

static shs_status_t meta_d2h(shs_device_t *dev, void *dst, const void *src, size_t bytes) {
    if (!is_fake(dst)) memset(dst, 0, bytes); /* real host memory: defined zeros */
    return SHS_OK;
}

static shs_status_t meta_memset(shs_device_t *dev, void *dst, int value, size_t bytes) { return SHS_OK; }

static void meta_destroy(shs_device_t *dev) { free(dev->ctx); }

/* One launch into the counters (matmul: its FLOPs are tensor-core work). */
static void tally(shs_device_t *dev, double flops, double bytes, int matmul) {
    shs_kernel_stats_t *k = &ctx_of(dev)->ks;
    k->kernels++;
    k->flops += (uint64_t)flops;
    k->bytes += (uint64_t)bytes;
    if (matmul) k->matmul_flops += (uint64_t)flops;
}

/* One record to the kernel recorder, if any (device.h). */
static void report(shs_device_t *dev, shs_kernel_info_t info) {
    if (dev->kernel_recorder) dev->kernel_recorder(dev->kernel_recorder_user, &info);
}

/* A launch without a shape: counted, and reported as one record of class
 * `cls` named after the kernel (`count` passes the function's name less
 * its "meta_"). */
static void count_as(shs_device_t *dev, double flops, double bytes, shs_kernel_class_t cls, const char *name) {
    tally(dev, flops, bytes, 0);
    report(dev, (shs_kernel_info_t){.cls = cls, .name = name, .flops = flops, .bytes = bytes});
}
#define count(dev, flops, bytes, cls) count_as(dev, flops, bytes, cls, __func__ + 5)

/* GEMM record: out (m x n), inner k; counted bytes as given */
static void report_gemm(shs_device_t *dev, const char *name, int backward, double m, double n, double k, double bytes) {
    report(dev, (shs_kernel_info_t){.cls = SHS_KERNEL_GEMM, .name = name, .backward = backward, .m = m, .n = n,
                                    .k = k, .flops = 2 * m * n * k, .bytes = bytes});
}
/* a bias add or column sum: an elementwise record */
static void report_bias(shs_device_t *dev, const char *name, double flops, double bytes) {
    report(dev, (shs_kernel_info_t){.cls = SHS_KERNEL_ELEMENTWISE, .name = name, .flops = flops, .bytes = bytes});
}
/* The attention core: counted (tensor-core work) and reported with its shape. */
static void count_attention(shs_device_t *dev, const char *name, int backward, int flash, int B, int NH, int T, int HD,
                            double flops, double bytes) {
    tally(dev, flops, bytes, 1);
    report(dev, (shs_kernel_info_t){.cls = SHS_KERNEL_ATTENTION, .name = name, .backward = backward, .flash = flash,
                                    .m = (double)B * NH, .n = T, .k = HD, .flops = flops, .bytes = bytes});
}

/* ---- kernels: cost only ---------------------------------------------------- */

static void meta_matmul_forward(shs_device_t *d, float *out, const float *inp, const float *w, const float *bias,
                                int BT, int C, int OC) {
    double bt = BT, c = C, oc = OC;
    tally(d, 2 * bt * c * oc + (bias ? bt * oc : 0), 4 * (bt * c + oc * c + bt * oc + (bias ? oc : 0)), 1);
    report_gemm(d, "matmul_forward", 0, bt, oc, c, 4 * (bt * c + oc * c + bt * oc));
    if (bias) report_bias(d, "matmul_forward bias", bt * oc, 4 * oc);
}
static void meta_matmul_backward(shs_device_t *d, float *dinp, float *dw, float *dbias, const float *dout,
                                 const float *inp, const float *w, int BT, int C, int OC) {
    double bt = BT, c = C, oc = OC;
    /* dweight always; dinp when asked; dbias a column sum */
    double f = 2 * bt * c * oc + (dinp ? 2 * bt * c * oc : 0) + (dbias ? bt * oc : 0);
    double b = 4 * (bt * oc + bt * c + 2 * oc * c + (dinp ? 2 * bt * c : 0) + (dbias ? 2 * oc : 0));
    tally(d, f, b, 1);
    report_gemm(d, "matmul_backward dweight", 1, oc, c, bt, 4 * (bt * oc + bt * c + 2 * oc * c));
    if (dinp) report_gemm(d, "matmul_backward dinp", 1, bt, c, oc, 4 * (2 * bt * c));
    if (dbias) report_bias(d, "matmul_backward dbias", bt * oc, 4 * (2 * oc));
}
static void meta_layernorm_forward(shs_device_t *d, float *out, float *mean, float *rstd, const float *inp,
                                   const float *w, const float *b, int N, int C) {
    double n = (double)N * C;
    /* mean, variance, normalize, scale, shift */
    count(d, 8 * n, 4 * (2 * n + 2.0 * C + 2.0 * N), SHS_KERNEL_ELEMENTWISE);
}
static void meta_layernorm_backward(shs_device_t *d, float *dinp, float *dw, float *db, const float *dout,
                                    const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                    int C) {
    double n = (double)N * C;
    count(d, 14 * n, 4 * (4 * n + 5.0 * C + 2.0 * N), SHS_KERNEL_ELEMENTWISE);
}
/* Causal: T(T+1)/2 (query, key) pairs per sequence and head; per pair 2 hs
 * for q.k, 2 hs for att.v and 5 for the softmax. */
static double causal_pairs(int B, int T, int NH) { return (double)B * NH * T * (T + 1.0) / 2.0; }
static void meta_attention_forward(shs_device_t *d, float *out, float *preatt, float *att, const float *qkv, int B,
                                   int T, int C, int NH) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C;
    count_attention(d, "attention_forward", 0, 0, B, NH, T, C / NH,
                    pairs * (4 * hs + 5), 4 * (3 * btc + btc + 2.0 * B * NH * T * T));
}
/* Backward: datt and dv (4 hs per pair), dq and dk (4 hs), softmax (4). */
static void meta_attention_backward(shs_device_t *d, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C, int NH) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C;
    count_attention(d, "attention_backward", 1, 0, B, NH, T, C / NH,
                    pairs * (8 * hs + 4), 4 * (btc + 3 * btc + 3 * btc + 3.0 * B * NH * T * T));
}
/* Dropout: a compare and a scale per element; reads inp, writes out and the 1-byte mask. */
static void meta_dropout_forward(shs_device_t *d, float *out, uint8_t *mask, const float *inp, size_t n,
                                 const shs_dropout_t *dp) {
    count(d, 2.0 * n, 9.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_dropout_backward(shs_device_t *d, float *dinp, const uint8_t *mask, const float *dout, size_t n,
                                  float p) {
    count(d, 2.0 * n, 13.0 * n, SHS_KERNEL_ELEMENTWISE);
}
/* Eager with dropout: the eager forward plus 2 per pair for the dropout,
 * and the dropped (T,T) matrix (f32) and mask (bytes) written. */
static void meta_attention_forward_dropout(shs_device_t *d, float *out, float *preatt, float *att, float *att_drop,
                                           uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                           const shs_dropout_t *dp) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C, tt = (double)B * NH * T * T;
    count_attention(d, "attention_forward_dropout", 0, 0, B, NH, T, C / NH,
                    pairs * (4 * hs + 7), 4 * (3 * btc + btc + 3.0 * tt) + tt);
}
static void meta_attention_backward_dropout(shs_device_t *d, float *dqkv, float *dpreatt, float *datt,
                                            const float *dout, const float *qkv, const float *att,
                                            const float *att_drop, const uint8_t *mask, int B, int T, int C, int NH,
                                            float p) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C, tt = (double)B * NH * T * T;
    count_attention(d, "attention_backward_dropout", 1, 0, B, NH, T, C / NH,
                    pairs * (8 * hs + 5), 4 * (btc + 3 * btc + 3 * btc + 4.0 * tt) + tt);
}
/* Flash forward: the eager forward's FLOPs (the block rescaling is O(T hs)
 * per row, not counted); reads qkv, writes out and lse (B,NH,T): no (T,T)
 * traffic. */
static void meta_attention_forward_flash(shs_device_t *d, float *out, float *lse, const float *qkv, int B, int T, int C,
                                         int NH, const shs_dropout_t *dp) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C;
    count_attention(d, "attention_forward_flash", 0, 1, B, NH, T, C / NH,
                    pairs * (4 * hs + 5), 4 * (3 * btc + btc + (double)B * NH * T));
}
/* Flash backward: per pair the scores again (2 hs), P (2), dv (2 hs), dP
 * (2 hs), dS (2), dq and dk (4 hs); D per row (2 hs). Reads qkv, dout, out,
 * lse; dqkv read and written. */
static void meta_attention_backward_flash(shs_device_t *d, float *dqkv, const float *dout, const float *qkv,
                                          const float *out, const float *lse, int B, int T, int C, int NH,
                                          const shs_dropout_t *dp) {
    double hs = (double)C / NH, pairs = causal_pairs(B, T, NH), btc = (double)B * T * C, rows = (double)B * NH * T;
    count_attention(d, "attention_backward_flash", 1, 1, B, NH, T, C / NH,
                    pairs * (10 * hs + 4) + rows * 2 * hs, 4 * (3 * btc + btc + btc + 6 * btc + rows));
}
static void meta_gelu_forward(shs_device_t *d, float *out, const float *inp, size_t n) {
    count(d, 10.0 * n, 8.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_gelu_backward(shs_device_t *d, float *dinp, const float *inp, const float *dout, size_t n) {
    count(d, 18.0 * n, 16.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_relu_forward(shs_device_t *d, float *out, const float *inp, size_t n) {
    count(d, 1.0 * n, 8.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_relu_backward(shs_device_t *d, float *dinp, const float *inp, const float *dout, size_t n) {
    count(d, 2.0 * n, 16.0 * n, SHS_KERNEL_ELEMENTWISE);
}
/* Encoder: with wpe one add per element, reads tokens, a wte row and a wpe
 * row, writes out; without wpe (Llama) a copy: no FLOPs, tokens, wte rows
 * and out. Backward: dwte (and dwpe) read and written, one add each. */
static void meta_encoder_forward(shs_device_t *d, float *out, const int32_t *tokens, const float *wte,
                                 const float *wpe, int B, int T, int C) {
    double btc = (double)B * T * C;
    count(d, wpe ? btc : 0, 4 * ((wpe ? 3 : 2) * btc + (double)B * T), SHS_KERNEL_ELEMENTWISE);
}
static void meta_encoder_backward(shs_device_t *d, float *dwte, float *dwpe, const float *dout,
                                  const int32_t *tokens, int B, int T, int C) {
    double btc = (double)B * T * C;
    count(d, (dwpe ? 2 : 1) * btc, 4 * ((dwpe ? 5 : 3) * btc + (double)B * T), SHS_KERNEL_ELEMENTWISE);
}
static void meta_residual_forward(shs_device_t *d, float *out, const float *a, const float *b, size_t n) {
    count(d, 1.0 * n, 12.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_accumulate(shs_device_t *d, float *dst, const float *src, size_t n) {
    count(d, 1.0 * n, 12.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_scale(shs_device_t *d, float *x, float alpha, size_t n) {
    count(d, 1.0 * n, 8.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_softmax_xent_forward(shs_device_t *d, float *losses, float *probs, const float *logits,
                                      const int32_t *targets, int BT, int V) {
    double n = (double)BT * V;
    count(d, 5 * n, 4 * (2 * n + 2.0 * BT), SHS_KERNEL_ELEMENTWISE); /* max, exp, sum, divide, log */
}
static void meta_softmax_xent_backward(shs_device_t *d, float *dlogits, const float *probs, const int32_t *targets,
                                       float dloss, int BT, int V) {
    double n = (double)BT * V;
    count(d, 2 * n, 4 * (2 * n + (double)BT), SHS_KERNEL_ELEMENTWISE);
}
static void meta_sum(shs_device_t *d, float *out, const float *x, size_t n) {
    count(d, 1.0 * n, 4.0 * n + 4, SHS_KERNEL_ELEMENTWISE);
}
static void meta_norm_accumulate(shs_device_t *d, int64_t *acc, const float *x, size_t n, int p) {
    count(d, 2.0 * n, 4.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_cast(shs_device_t *d, void *dst, shs_dtype_t dt, const void *src, shs_dtype_t st, size_t n) {
    count(d, 0, (double)n * (double)(shs_dtype_size(dt) + shs_dtype_size(st)), SHS_KERNEL_ELEMENTWISE);
}
static void meta_round(shs_device_t *d, float *x, shs_dtype_t dt, size_t n) {
    count(d, 0, 8.0 * n, SHS_KERNEL_ELEMENTWISE);
}
/* AdamW: weight decay 2, two moments 6, update 5 per element; reads p, g, m,
 * v and writes p, m, v. */
static void meta_adamw_update(shs_device_t *d, float *p, const float *g, float *m, float *v, size_t n,
                              const shs_adamw_hparams_t *hp) {
    count(d, 13.0 * n, 28.0 * n, SHS_KERNEL_OPTIMIZER);
}
static void meta_sgd_update(shs_device_t *d, float *p, const float *g, float *buf, size_t n, float lr,
                            float momentum, float wd) {
    int mom = momentum != 0.0f && buf;
    count(d, (mom ? 6.0 : 4.0) * n, (mom ? 20.0 : 12.0) * n, SHS_KERNEL_OPTIMIZER);
}

/* ---- Llama-family kernels ------------------------------------------------------
 * n = N*C (RMSNorm), n = B*T*NH*HD (RoPE), nq = B*T*NH*HD and nkv = B*T*NKV*HD
 * (attention); "read+written" for the outputs a kernel accumulates into. */

/* RMSNorm forward: per element square-add 2, normalize 1, weight 1; per row
 * divide by C, add eps, rsqrt 3. Reads inp, weight; writes out, rstd.
 *   flops = 4n + 3N, bytes = 4 (2n + C + N) */
static void meta_rmsnorm_forward(shs_device_t *d, float *out, float *rstd, const float *inp, const float *w, int N,
                                 int C, float eps) {
    double n = (double)N * C;
    count(d, 4 * n + 3.0 * N, 4 * (2 * n + C + (double)N), SHS_KERNEL_ELEMENTWISE);
}
/* RMSNorm backward: per element g = dy w 1, xhat 1, dot 2, dinp 4 (sub, two
 * multiplies, add), dweight 3 (xhat, multiply, add): 11. Reads dout, inp,
 * weight, rstd; dinp and dweight read+written.
 *   flops = 11n, bytes = 4 (4n + 3C + N) */
static void meta_rmsnorm_backward(shs_device_t *d, float *dinp, float *dw, const float *dout, const float *inp,
                                  const float *w, const float *rstd, int N, int C) {
    double n = (double)N * C;
    count(d, 11 * n, 4 * (4 * n + 3.0 * C + N), SHS_KERNEL_ELEMENTWISE);
}
/* RoPE: per pair (n/2 of them) the angle 1, cos 1, sin 1, the rotation 6
 * (4 multiplies, 2 adds): 9; backward 2 more for the accumulation. Reads inp
 * (dout), inv_freq and positions (int32; none when NULL); writes out (dinp
 * read+written).
 *   forward  flops = 4.5n, bytes = 4 (2n + HD/2 + [positions] B T)
 *   backward flops = 5.5n, bytes = 4 (3n + HD/2 + [positions] B T) */
static void meta_rope_forward(shs_device_t *d, float *out, const float *inp, const int32_t *pos, const float *inv_freq,
                              int B, int T, int NH, int HD) {
    double n = (double)B * T * NH * HD;
    count(d, 4.5 * n, 4 * (2 * n + HD / 2 + (pos ? (double)B * T : 0)), SHS_KERNEL_ELEMENTWISE);
}
static void meta_rope_backward(shs_device_t *d, float *dinp, const float *dout, const int32_t *pos,
                               const float *inv_freq, int B, int T, int NH, int HD) {
    double n = (double)B * T * NH * HD;
    count(d, 5.5 * n, 4 * (3 * n + HD / 2 + (pos ? (double)B * T : 0)), SHS_KERNEL_ELEMENTWISE);
}
/* SwiGLU forward: exp, add, divide (silu) and the multiply by up: 4 per
 * element; reads gate, up, writes out. Backward: sigmoid 3, silu 1, silu' 4,
 * dgate 3, dup 2: 13; reads dout, gate, up, dgate and dup read+written.
 *   forward flops = 4n, bytes = 12n;  backward flops = 13n, bytes = 28n */
static void meta_swiglu_forward(shs_device_t *d, float *out, const float *gate, const float *up, size_t n) {
    count(d, 4.0 * n, 12.0 * n, SHS_KERNEL_ELEMENTWISE);
}
static void meta_swiglu_backward(shs_device_t *d, float *dgate, float *dup, const float *dout, const float *gate,
                                 const float *up, size_t n) {
    count(d, 13.0 * n, 28.0 * n, SHS_KERNEL_ELEMENTWISE);
}
/* GQA attention: the causal pairs B NH T(T+1)/2 (the meta device cannot read
 * doc_ids, so a document mask is not subtracted: an upper bound), with the
 * per-pair FLOPs of the GPT kernels above (head size HD). doc_ids (int32,
 * when given) read once.
 *   eager forward  flops = pairs (4 HD + 5),  bytes = 4 (2nq + 2nkv + B NH T T + [doc] B T)
 *                  (reads q, k, v; writes out, att)
 *   eager backward flops = pairs (8 HD + 4),  bytes = 4 (4nq + 6nkv + 3 B NH T T)
 *                  (reads dout, q, k, v, att; dq, dk, dv read+written; datt written and read)
 *   flash forward  flops = pairs (4 HD + 5),  bytes = 4 (2nq + 2nkv + B NH T + [doc] B T)
 *   flash backward flops = pairs (10 HD + 4) + B NH T 2 HD,
 *                  bytes = 4 (5nq + 6nkv + B NH T + [doc] B T)
 *                  (reads dout, q, k, v, out, lse; dq, dk, dv read+written) */
static void meta_attention_gqa_forward(shs_device_t *d, float *out, float *att, const float *q, const float *k,
                                       const float *v, const int32_t *doc, int B, int T, int NH, int NKV, int HD) {
    double nq = (double)B * T * NH * HD, nkv = (double)B * T * NKV * HD, tt = (double)B * NH * T * T;
    count_attention(d, "attention_gqa_forward", 0, 0, B, NH, T, HD,
                    causal_pairs(B, T, NH) * (4.0 * HD + 5), 4 * (2 * nq + 2 * nkv + tt + (doc ? (double)B * T : 0)));
}
static void meta_attention_gqa_backward(shs_device_t *d, float *dq, float *dk, float *dv, float *datt,
                                        const float *dout, const float *q, const float *k, const float *v,
                                        const float *att, int B, int T, int NH, int NKV, int HD) {
    double nq = (double)B * T * NH * HD, nkv = (double)B * T * NKV * HD, tt = (double)B * NH * T * T;
    count_attention(d, "attention_gqa_backward", 1, 0, B, NH, T, HD,
                    causal_pairs(B, T, NH) * (8.0 * HD + 4), 4 * (4 * nq + 6 * nkv + 3 * tt));
}
static void meta_attention_gqa_forward_flash(shs_device_t *d, float *out, float *lse, const float *q, const float *k,
                                             const float *v, const int32_t *doc, int B, int T, int NH, int NKV,
                                             int HD) {
    double nq = (double)B * T * NH * HD, nkv = (double)B * T * NKV * HD, rows = (double)B * NH * T;
    count_attention(d, "attention_gqa_forward_flash", 0, 1, B, NH, T, HD,
                    causal_pairs(B, T, NH) * (4.0 * HD + 5), 4 * (2 * nq + 2 * nkv + rows + (doc ? (double)B * T : 0)));
}
static void meta_attention_gqa_backward_flash(shs_device_t *d, float *dq, float *dk, float *dv, const float *dout,
                                              const float *q, const float *k, const float *v, const float *out,
                                              const float *lse, const int32_t *doc, int B, int T, int NH, int NKV,
                                              int HD) {
    double nq = (double)B * T * NH * HD, nkv = (double)B * T * NKV * HD, rows = (double)B * NH * T;
    count_attention(d, "attention_gqa_backward_flash", 1, 1, B, NH, T, HD,
                    causal_pairs(B, T, NH) * (10.0 * HD + 4) + rows * 2 * HD,
                    4 * (5 * nq + 6 * nkv + rows + (doc ? (double)B * T : 0)));
}

static void meta_kernel_stats(const shs_device_t *dev, shs_kernel_stats_t *out) { *out = ctx_of(dev)->ks; }

const shs_device_iface_t shs__meta_iface = {
    .name = "meta",
    .alloc = meta_alloc,
    .free = meta_free,
    .memcpy_h2d = meta_copy_nop,
    .memcpy_d2h = meta_d2h,
    .memcpy_d2d = meta_copy_nop,
    .memset = meta_memset,
    .destroy = meta_destroy,
    .matmul_forward = meta_matmul_forward,
    .matmul_backward = meta_matmul_backward,
    .layernorm_forward = meta_layernorm_forward,
    .layernorm_backward = meta_layernorm_backward,
    .attention_forward = meta_attention_forward,
    .attention_backward = meta_attention_backward,
    .dropout_forward = meta_dropout_forward,
    .dropout_backward = meta_dropout_backward,
    .attention_forward_dropout = meta_attention_forward_dropout,
    .attention_backward_dropout = meta_attention_backward_dropout,
    .attention_forward_flash = meta_attention_forward_flash,
    .attention_backward_flash = meta_attention_backward_flash,
    .gelu_forward = meta_gelu_forward,
    .gelu_backward = meta_gelu_backward,
    .relu_forward = meta_relu_forward,
    .relu_backward = meta_relu_backward,
    .encoder_forward = meta_encoder_forward,
    .encoder_backward = meta_encoder_backward,
    .residual_forward = meta_residual_forward,
    .accumulate = meta_accumulate,
    .scale = meta_scale,
    .softmax_xent_forward = meta_softmax_xent_forward,
    .softmax_xent_backward = meta_softmax_xent_backward,
    .xent_ignore_index = 1,
    .sum = meta_sum,
    .norm_accumulate = meta_norm_accumulate,
    .cast = meta_cast,
    .round = meta_round,
    .adamw_update = meta_adamw_update,
    .sgd_update = meta_sgd_update,
    .rmsnorm_forward = meta_rmsnorm_forward,
    .rmsnorm_backward = meta_rmsnorm_backward,
    .rope_forward = meta_rope_forward,
    .rope_backward = meta_rope_backward,
    .swiglu_forward = meta_swiglu_forward,
    .swiglu_backward = meta_swiglu_backward,
    .attention_gqa_forward = meta_attention_gqa_forward,
    .attention_gqa_backward = meta_attention_gqa_backward,
    .attention_gqa_forward_flash = meta_attention_gqa_forward_flash,
    .attention_gqa_backward_flash = meta_attention_gqa_backward_flash,
    .kernel_stats = meta_kernel_stats,
};

shs_status_t shs_device_create_meta(shs_device_t **out, int rank, size_t capacity) {
    meta_ctx_t *m = calloc(1, sizeof *m);
    if (!m) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate meta device", rank);
    m->next = META_BASE;
    shs_status_t st = shs__device_new(out, &shs__meta_iface, m, rank, capacity, 1);
    if (st != SHS_OK) free(m);
    return st;
}

int shs_device_is_meta(const shs_device_t *dev) { return dev && dev->iface == &shs__meta_iface; }


