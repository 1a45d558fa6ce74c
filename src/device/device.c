/* device.c - public device wrappers for kernels: argument and bounds checks,
 * then dispatch to the backend vtable (device_impl.h).
 * What it is not: memory (device_memory.c) or any backend's kernels
 * (device_cpu.c, ...).
 */
#include "device/device_impl.h"

#include "shardsim/units.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Kernels return nothing: an overflow is a programming error, reported and aborted. */
static void kernel_range(const shs_device_t *dev, const char *op, const char *arg, const void *p, size_t n, size_t es) {
    if (!p || !n) return;
    if (n > SIZE_MAX / es || shs__device_check_range(dev, op, arg, p, n * es, 0) != SHS_OK) {
        fprintf(stderr, "shardsim: %s\n", n > SIZE_MAX / es ? "kernel element count overflows size_t" : shs_last_error());
        SHS_ASSERT(!"kernel argument outside its device allocation");
    }
}
#define KRANGE(op, arg, n) kernel_range(dev, op, #arg, arg, n, sizeof *(arg))

void shs_device_set_kernel_recorder(shs_device_t *dev, shs_kernel_recorder_fn fn, void *user) {
    if (!dev) return;
    dev->kernel_recorder = fn;
    dev->kernel_recorder_user = user;
}

/* ---- kernels: check shapes, dispatch ------------------------------------ */

void shs_matmul_forward(shs_device_t *dev, float *out, const float *inp, const float *weight,
                        const float *bias, int BT, int C, int OC) {
    SHS_ASSERT(out && inp && weight && BT >= 0 && C >= 0 && OC >= 0);
    dev->iface->matmul_forward(dev, out, inp, weight, bias, BT, C, OC);
}
void shs_matmul_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int BT, int C, int OC) {
    SHS_ASSERT(dweight && dout && inp && weight && BT >= 0 && C >= 0 && OC >= 0);
    dev->iface->matmul_backward(dev, dinp, dweight, dbias, dout, inp, weight, BT, C, OC);
}
void shs_layernorm_forward(shs_device_t *dev, float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C) {
    SHS_ASSERT(out && mean && rstd && inp && weight && bias && N >= 0 && C > 0);
    dev->iface->layernorm_forward(dev, out, mean, rstd, inp, weight, bias, N, C);
}
void shs_layernorm_backward(shs_device_t *dev, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight,
                            const float *mean, const float *rstd, int N, int C) {
    SHS_ASSERT(dinp && dweight && dbias && dout && inp && weight && mean && rstd && N >= 0 && C > 0);
    dev->iface->layernorm_backward(dev, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void shs_attention_forward(shs_device_t *dev, float *out, float *preatt, float *att, const float *qkv,
                           int B, int T, int C, int NH) {
    SHS_ASSERT(out && preatt && att && qkv && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    dev->iface->attention_forward(dev, out, preatt, att, qkv, B, T, C, NH);
}
void shs_attention_backward(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt,
                            const float *dout, const float *qkv, const float *att, int B, int T,
                            int C, int NH) {
    SHS_ASSERT(dqkv && dpreatt && datt && dout && qkv && att && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    dev->iface->attention_backward(dev, dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH);
}
int shs_device_supports(const shs_device_t *dev, unsigned sets) {
    const shs_device_iface_t *f = dev->iface;
    if ((sets & SHS_KERNELS_FLASH_ATTENTION) && !(f->attention_forward_flash && f->attention_backward_flash)) return 0;
    if ((sets & SHS_KERNELS_DROPOUT) && !(f->dropout_forward && f->dropout_backward && f->attention_forward_dropout &&
                                          f->attention_backward_dropout))
        return 0;
    if ((sets & SHS_KERNELS_ROUND) && !f->round) return 0;
    if ((sets & SHS_KERNELS_LLAMA) &&
        !(f->rmsnorm_forward && f->rmsnorm_backward && f->rope_forward && f->rope_backward && f->swiglu_forward &&
          f->swiglu_backward && f->geglu_forward && f->geglu_backward && f->softcap_forward &&
          f->softcap_backward && f->attention_gqa_forward && f->attention_gqa_backward &&
          f->attention_gqa_forward_flash && f->attention_gqa_backward_flash))
        return 0;
    if ((sets & SHS_KERNELS_IGNORE_INDEX) && !f->xent_ignore_index) return 0;
    return 1;
}
/* A kernel the backend lacks: a programming error (callers ask
 * shs_device_supports first). */
#define KNEED(slot) SHS_ASSERT(dev->iface->slot && #slot " is not implemented by this backend")
static int dropout_ok(const shs_dropout_t *d) { return !d || (d->p >= 0.0f && d->p < 1.0f); }
void shs_dropout_forward(shs_device_t *dev, float *out, uint8_t *mask, const float *inp, size_t n,
                         const shs_dropout_t *d) {
    SHS_ASSERT(out && mask && inp && d && dropout_ok(d));
    KNEED(dropout_forward);
    KRANGE("dropout_forward", out, n), KRANGE("dropout_forward", mask, n), KRANGE("dropout_forward", inp, n);
    dev->iface->dropout_forward(dev, out, mask, inp, n, d);
}
void shs_dropout_backward(shs_device_t *dev, float *dinp, const uint8_t *mask, const float *dout, size_t n, float p) {
    SHS_ASSERT(dinp && mask && dout && p >= 0.0f && p < 1.0f);
    KNEED(dropout_backward);
    KRANGE("dropout_backward", dinp, n), KRANGE("dropout_backward", mask, n), KRANGE("dropout_backward", dout, n);
    dev->iface->dropout_backward(dev, dinp, mask, dout, n, p);
}
void shs_attention_forward_dropout(shs_device_t *dev, float *out, float *preatt, float *att, float *att_drop,
                                   uint8_t *mask, const float *qkv, int B, int T, int C, int NH,
                                   const shs_dropout_t *d) {
    SHS_ASSERT(out && preatt && att && att_drop && mask && qkv && d && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 &&
               C % NH == 0);
    KNEED(attention_forward_dropout);
    dev->iface->attention_forward_dropout(dev, out, preatt, att, att_drop, mask, qkv, B, T, C, NH, d);
}
void shs_attention_backward_dropout(shs_device_t *dev, float *dqkv, float *dpreatt, float *datt, const float *dout,
                                    const float *qkv, const float *att, const float *att_drop, const uint8_t *mask,
                                    int B, int T, int C, int NH, float p) {
    SHS_ASSERT(dqkv && dpreatt && datt && dout && qkv && att && att_drop && mask && p >= 0.0f && p < 1.0f &&
               B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_backward_dropout);
    dev->iface->attention_backward_dropout(dev, dqkv, dpreatt, datt, dout, qkv, att, att_drop, mask, B, T, C, NH, p);
}
void shs_attention_forward_flash(shs_device_t *dev, float *out, float *lse, const float *qkv, int B, int T, int C,
                                 int NH, const shs_dropout_t *d) {
    SHS_ASSERT(out && lse && qkv && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_forward_flash);
    size_t btc = (size_t)B * T * C;
    KRANGE("attention_forward_flash", out, btc), KRANGE("attention_forward_flash", qkv, 3 * btc);
    KRANGE("attention_forward_flash", lse, (size_t)B * NH * T);
    dev->iface->attention_forward_flash(dev, out, lse, qkv, B, T, C, NH, d && d->p > 0.0f ? d : NULL);
}
void shs_attention_backward_flash(shs_device_t *dev, float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  const shs_dropout_t *d) {
    SHS_ASSERT(dqkv && dout && qkv && out && lse && dropout_ok(d) && B >= 0 && T > 0 && NH > 0 && C % NH == 0);
    KNEED(attention_backward_flash);
    size_t btc = (size_t)B * T * C;
    KRANGE("attention_backward_flash", dqkv, 3 * btc), KRANGE("attention_backward_flash", qkv, 3 * btc);
    KRANGE("attention_backward_flash", dout, btc), KRANGE("attention_backward_flash", out, btc);
    KRANGE("attention_backward_flash", lse, (size_t)B * NH * T);
    dev->iface->attention_backward_flash(dev, dqkv, dout, qkv, out, lse, B, T, C, NH, d && d->p > 0.0f ? d : NULL);
}
void shs_round(shs_device_t *dev, float *x, shs_dtype_t dtype, size_t n) {
    SHS_ASSERT(x && (dtype == SHS_F16 || dtype == SHS_BF16));
    KNEED(round);
    KRANGE("round", x, n);
    dev->iface->round(dev, x, dtype, n);
}
/* ---- Llama-family kernels (SHS_KERNELS_LLAMA) ---- */
void shs_rmsnorm_forward(shs_device_t *dev, float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps) {
    SHS_ASSERT(out && rstd && inp && weight && N >= 0 && C > 0 && eps >= 0.0f);
    KNEED(rmsnorm_forward);
    size_t n = (size_t)N * C;
    KRANGE("rmsnorm_forward", out, n), KRANGE("rmsnorm_forward", rstd, (size_t)N);
    KRANGE("rmsnorm_forward", inp, n), KRANGE("rmsnorm_forward", weight, (size_t)C);
    dev->iface->rmsnorm_forward(dev, out, rstd, inp, weight, N, C, eps);
}
void shs_rmsnorm_backward(shs_device_t *dev, float *dinp, float *dweight, const float *dout, const float *inp,
                          const float *weight, const float *rstd, int N, int C) {
    SHS_ASSERT(dinp && dweight && dout && inp && weight && rstd && N >= 0 && C > 0);
    KNEED(rmsnorm_backward);
    size_t n = (size_t)N * C;
    KRANGE("rmsnorm_backward", dinp, n), KRANGE("rmsnorm_backward", dweight, (size_t)C);
    KRANGE("rmsnorm_backward", dout, n), KRANGE("rmsnorm_backward", inp, n);
    KRANGE("rmsnorm_backward", weight, (size_t)C), KRANGE("rmsnorm_backward", rstd, (size_t)N);
    dev->iface->rmsnorm_backward(dev, dinp, dweight, dout, inp, weight, rstd, N, C);
}
/* out/dinp and inp/dout (B,T,NH,HD), positions (B,T) or NULL, inv_freq (R/2);
 * the rope with its defaults filled in. */
static shs_rope_t rope_checks(shs_device_t *dev, const char *op, const float *out, const float *inp,
                              const int32_t *positions, const shs_rope_t *rope, int B, int T, int NH, int HD) {
    SHS_ASSERT(out && inp && rope && rope->inv_freq && B >= 0 && T >= 0 && NH > 0 && HD > 0 && HD % 2 == 0);
    shs_rope_t r = *rope;
    if (!r.rot_dim) r.rot_dim = HD;
    if (r.mscale == 0.0f) r.mscale = 1.0f;
    SHS_ASSERT(r.rot_dim >= 2 && r.rot_dim <= HD && r.rot_dim % 2 == 0 && isfinite(r.mscale));
    size_t n = (size_t)B * T * NH * HD;
    KRANGE(op, out, n), KRANGE(op, inp, n), KRANGE(op, r.inv_freq, (size_t)r.rot_dim / 2);
    KRANGE(op, positions, (size_t)B * T);
    return r;
}
void shs_rope_forward(shs_device_t *dev, float *out, const float *inp, const int32_t *positions, const shs_rope_t *rope,
                      int B, int T, int NH, int HD) {
    KNEED(rope_forward);
    shs_rope_t r = rope_checks(dev, "rope_forward", out, inp, positions, rope, B, T, NH, HD);
    dev->iface->rope_forward(dev, out, inp, positions, &r, B, T, NH, HD);
}
void shs_rope_backward(shs_device_t *dev, float *dinp, const float *dout, const int32_t *positions,
                       const shs_rope_t *rope, int B, int T, int NH, int HD) {
    KNEED(rope_backward);
    shs_rope_t r = rope_checks(dev, "rope_backward", dinp, dout, positions, rope, B, T, NH, HD);
    dev->iface->rope_backward(dev, dinp, dout, positions, &r, B, T, NH, HD);
}
/* The gated MLP activations: out (n) = act(gate) * up, and the backward. */
static void glu_forward_checks(shs_device_t *dev, const char *op, float *out, const float *gate, const float *up,
                               size_t n) {
    SHS_ASSERT(out && gate && up);
    KRANGE(op, out, n), KRANGE(op, gate, n), KRANGE(op, up, n);
}
static void glu_backward_checks(shs_device_t *dev, const char *op, float *dgate, float *dup, const float *dout,
                                const float *gate, const float *up, size_t n) {
    SHS_ASSERT(dgate && dup && dout && gate && up);
    KRANGE(op, dgate, n), KRANGE(op, dup, n), KRANGE(op, dout, n), KRANGE(op, gate, n), KRANGE(op, up, n);
}
void shs_swiglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n) {
    KNEED(swiglu_forward);
    glu_forward_checks(dev, "swiglu_forward", out, gate, up, n);
    dev->iface->swiglu_forward(dev, out, gate, up, n);
}
void shs_swiglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                         const float *up, size_t n) {
    KNEED(swiglu_backward);
    glu_backward_checks(dev, "swiglu_backward", dgate, dup, dout, gate, up, n);
    dev->iface->swiglu_backward(dev, dgate, dup, dout, gate, up, n);
}
void shs_geglu_forward(shs_device_t *dev, float *out, const float *gate, const float *up, size_t n) {
    KNEED(geglu_forward);
    glu_forward_checks(dev, "geglu_forward", out, gate, up, n);
    dev->iface->geglu_forward(dev, out, gate, up, n);
}
void shs_geglu_backward(shs_device_t *dev, float *dgate, float *dup, const float *dout, const float *gate,
                        const float *up, size_t n) {
    KNEED(geglu_backward);
    glu_backward_checks(dev, "geglu_backward", dgate, dup, dout, gate, up, n);
    dev->iface->geglu_backward(dev, dgate, dup, dout, gate, up, n);
}
void shs_softcap_forward(shs_device_t *dev, float *out, const float *inp, float cap, size_t n) {
    SHS_ASSERT(out && inp && cap > 0.0f && isfinite(cap));
    KNEED(softcap_forward);
    KRANGE("softcap_forward", out, n), KRANGE("softcap_forward", inp, n);
    dev->iface->softcap_forward(dev, out, inp, cap, n);
}
void shs_softcap_backward(shs_device_t *dev, float *dinp, const float *dout, const float *out, float cap, size_t n) {
    SHS_ASSERT(dinp && dout && out && cap > 0.0f && isfinite(cap));
    KNEED(softcap_backward);
    KRANGE("softcap_backward", dinp, n), KRANGE("softcap_backward", dout, n), KRANGE("softcap_backward", out, n);
    dev->iface->softcap_backward(dev, dinp, dout, out, cap, n);
}
/* The shape checks every GQA kernel shares (NH % NKV != 0 is named on
 * stderr), and opt with its defaults filled in. */
static shs_attention_opts_t gqa_checks(shs_device_t *dev, const char *op, const shs_attention_opts_t *opt, int B, int T,
                                       int NH, int NKV, int HD) {
    SHS_ASSERT(B >= 0 && T > 0 && NH > 0 && NKV > 0 && HD > 0);
    if (NH % NKV != 0) {
        fprintf(stderr, "shardsim: %s: %d query heads are not a multiple of %d key/value heads\n", op, NH, NKV);
        SHS_ASSERT(!"attention_gqa: NH % NKV != 0");
    }
    shs_attention_opts_t o = opt ? *opt : (shs_attention_opts_t){0};
    SHS_ASSERT(o.scale >= 0.0f && isfinite(o.scale) && o.softcap >= 0.0f && isfinite(o.softcap) && o.window >= 0);
    if (o.scale == 0.0f) o.scale = shs__attention_scale(HD);
    return o;
}
void shs_attention_gqa_forward(shs_device_t *dev, float *out, float *att, const float *q, const float *k,
                               const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B, int T,
                               int NH, int NKV, int HD) {
    SHS_ASSERT(out && att && q && k && v);
    KNEED(attention_gqa_forward);
    const char *op = "attention_gqa_forward";
    shs_attention_opts_t o = gqa_checks(dev, op, opt, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, out, nq), KRANGE(op, att, (size_t)B * NH * T * T), KRANGE(op, q, nq), KRANGE(op, k, nkv);
    KRANGE(op, v, nkv), KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_forward(dev, out, att, q, k, v, doc_ids, &o, B, T, NH, NKV, HD);
}
void shs_attention_gqa_backward(shs_device_t *dev, float *dq, float *dk, float *dv, float *datt, const float *dout,
                                const float *q, const float *k, const float *v, const float *att,
                                const shs_attention_opts_t *opt, int B, int T, int NH, int NKV, int HD) {
    SHS_ASSERT(dq && dk && dv && datt && dout && q && k && v && att);
    KNEED(attention_gqa_backward);
    const char *op = "attention_gqa_backward";
    shs_attention_opts_t o = gqa_checks(dev, op, opt, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD, ntt = (size_t)B * NH * T * T;
    KRANGE(op, dq, nq), KRANGE(op, dk, nkv), KRANGE(op, dv, nkv), KRANGE(op, datt, ntt), KRANGE(op, dout, nq);
    KRANGE(op, q, nq), KRANGE(op, k, nkv), KRANGE(op, v, nkv), KRANGE(op, att, ntt);
    dev->iface->attention_gqa_backward(dev, dq, dk, dv, datt, dout, q, k, v, att, &o, B, T, NH, NKV, HD);
}
void shs_attention_gqa_forward_flash(shs_device_t *dev, float *out, float *lse, const float *q, const float *k,
                                     const float *v, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                     int T, int NH, int NKV, int HD) {
    SHS_ASSERT(out && lse && q && k && v);
    KNEED(attention_gqa_forward_flash);
    const char *op = "attention_gqa_forward_flash";
    shs_attention_opts_t o = gqa_checks(dev, op, opt, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, out, nq), KRANGE(op, lse, (size_t)B * NH * T), KRANGE(op, q, nq), KRANGE(op, k, nkv);
    KRANGE(op, v, nkv), KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_forward_flash(dev, out, lse, q, k, v, doc_ids, &o, B, T, NH, NKV, HD);
}
void shs_attention_gqa_backward_flash(shs_device_t *dev, float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v, const float *out,
                                      const float *lse, const int32_t *doc_ids, const shs_attention_opts_t *opt, int B,
                                      int T, int NH, int NKV, int HD) {
    SHS_ASSERT(dq && dk && dv && dout && q && k && v && out && lse);
    KNEED(attention_gqa_backward_flash);
    const char *op = "attention_gqa_backward_flash";
    shs_attention_opts_t o = gqa_checks(dev, op, opt, B, T, NH, NKV, HD);
    size_t nq = (size_t)B * T * NH * HD, nkv = (size_t)B * T * NKV * HD;
    KRANGE(op, dq, nq), KRANGE(op, dk, nkv), KRANGE(op, dv, nkv), KRANGE(op, dout, nq), KRANGE(op, q, nq);
    KRANGE(op, k, nkv), KRANGE(op, v, nkv), KRANGE(op, out, nq), KRANGE(op, lse, (size_t)B * NH * T);
    KRANGE(op, doc_ids, (size_t)B * T);
    dev->iface->attention_gqa_backward_flash(dev, dq, dk, dv, dout, q, k, v, out, lse, doc_ids, &o, B, T, NH, NKV, HD);
}
#undef KNEED
/* The checks every activation's forward (out = f(inp)) and backward
 * (dinp += f'(inp) * dout) shares. */
static void activation_forward_checks(shs_device_t *dev, const char *op, float *out, const float *inp, size_t n) {
    SHS_ASSERT(out && inp);
    KRANGE(op, out, n), KRANGE(op, inp, n);
}
static void activation_backward_checks(shs_device_t *dev, const char *op, float *dinp, const float *inp,
                                       const float *dout, size_t n) {
    SHS_ASSERT(dinp && inp && dout);
    KRANGE(op, dinp, n), KRANGE(op, inp, n), KRANGE(op, dout, n);
}
void shs_gelu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    activation_forward_checks(dev, "gelu_forward", out, inp, n);
    dev->iface->gelu_forward(dev, out, inp, n);
}
void shs_gelu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    activation_backward_checks(dev, "gelu_backward", dinp, inp, dout, n);
    dev->iface->gelu_backward(dev, dinp, inp, dout, n);
}
void shs_relu_forward(shs_device_t *dev, float *out, const float *inp, size_t n) {
    activation_forward_checks(dev, "relu_forward", out, inp, n);
    dev->iface->relu_forward(dev, out, inp, n);
}
void shs_relu_backward(shs_device_t *dev, float *dinp, const float *inp, const float *dout, size_t n) {
    activation_backward_checks(dev, "relu_backward", dinp, inp, dout, n);
    dev->iface->relu_backward(dev, dinp, inp, dout, n);
}
void shs_encoder_forward(shs_device_t *dev, float *out, const int32_t *tokens, const float *wte,
                         const float *wpe, int B, int T, int C) {
    SHS_ASSERT(out && tokens && wte && B >= 0 && T >= 0 && C >= 0);
    SHS_ASSERT((wpe || shs_device_supports(dev, SHS_KERNELS_LLAMA)) && "encoder without wpe needs SHS_KERNELS_LLAMA");
    dev->iface->encoder_forward(dev, out, tokens, wte, wpe, B, T, C);
}
void shs_encoder_backward(shs_device_t *dev, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C) {
    SHS_ASSERT(dwte && dout && tokens && B >= 0 && T >= 0 && C >= 0);
    SHS_ASSERT((dwpe || shs_device_supports(dev, SHS_KERNELS_LLAMA)) && "encoder without dwpe needs SHS_KERNELS_LLAMA");
    dev->iface->encoder_backward(dev, dwte, dwpe, dout, tokens, B, T, C);
}
void shs_residual_forward(shs_device_t *dev, float *out, const float *a, const float *b, size_t n) {
    SHS_ASSERT(out && a && b);
    KRANGE("residual_forward", out, n), KRANGE("residual_forward", a, n), KRANGE("residual_forward", b, n);
    dev->iface->residual_forward(dev, out, a, b, n);
}
void shs_accumulate(shs_device_t *dev, float *dst, const float *src, size_t n) {
    SHS_ASSERT(dst && src);
    KRANGE("accumulate", dst, n), KRANGE("accumulate", src, n);
    dev->iface->accumulate(dev, dst, src, n);
}
void shs_scale(shs_device_t *dev, float *x, float alpha, size_t n) {
    SHS_ASSERT(x);
    KRANGE("scale", x, n);
    dev->iface->scale(dev, x, alpha, n);
}
void shs_softmax_xent_forward(shs_device_t *dev, float *losses, float *probs, const float *logits,
                              const int32_t *targets, int BT, int V) {
    SHS_ASSERT(losses && probs && logits && targets && BT >= 0 && V > 0);
    dev->iface->softmax_xent_forward(dev, losses, probs, logits, targets, BT, V);
}
void shs_softmax_xent_backward(shs_device_t *dev, float *dlogits, const float *probs,
                               const int32_t *targets, float dloss, int BT, int V) {
    SHS_ASSERT(dlogits && probs && targets && BT >= 0 && V > 0);
    dev->iface->softmax_xent_backward(dev, dlogits, probs, targets, dloss, BT, V);
}
void shs_sum(shs_device_t *dev, float *out, const float *x, size_t n) {
    SHS_ASSERT(out && (x || !n));
    KRANGE("sum", out, 1), KRANGE("sum", x, n);
    dev->iface->sum(dev, out, x, n);
}
void shs_norm_accumulate(shs_device_t *dev, int64_t *acc, const float *x, size_t n, int p) {
    SHS_ASSERT(acc && (x || !n) && (p == SHS_NORM_INF || p == 1 || p == 2));
    KRANGE("norm_accumulate", x, n);
    dev->iface->norm_accumulate(dev, acc, x, n, p);
}
void shs_cast(shs_device_t *dev, void *dst, shs_dtype_t dst_dtype, const void *src,
              shs_dtype_t src_dtype, size_t n) {
    SHS_ASSERT(dst && src && shs_dtype_is_float(dst_dtype) && shs_dtype_is_float(src_dtype));
    kernel_range(dev, "cast", "dst", dst, n, shs_dtype_size(dst_dtype));
    kernel_range(dev, "cast", "src", src, n, shs_dtype_size(src_dtype));
    dev->iface->cast(dev, dst, dst_dtype, src, src_dtype, n);
}
void shs_adamw_update(shs_device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                      const shs_adamw_hparams_t *hp) {
    SHS_ASSERT(hp && (!n || (param && grad && m && v)));
    KRANGE("adamw_update", param, n), KRANGE("adamw_update", grad, n), KRANGE("adamw_update", m, n),
        KRANGE("adamw_update", v, n);
    dev->iface->adamw_update(dev, param, grad, m, v, n, hp);
}
void shs_sgd_update(shs_device_t *dev, float *param, const float *grad, float *momentum_buf, size_t n,
                    float lr, float momentum, float weight_decay) {
    SHS_ASSERT(!n || (param && grad && (momentum_buf || momentum == 0.0f)));
    KRANGE("sgd_update", param, n), KRANGE("sgd_update", grad, n), KRANGE("sgd_update", momentum_buf, n);
    dev->iface->sgd_update(dev, param, grad, momentum_buf, n, lr, momentum, weight_decay);
}
