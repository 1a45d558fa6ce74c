/* llama_layer.c - one decoder layer of the Llama family (llama_impl.h):
 * forward and backward, built from per-feature steps (norms before and
 * after each branch, the q/k/v projections plain, fused or grouped, q/k
 * norms, RoPE with its per-layer frequencies, the attention core with the
 * layer's window and soft cap, the gated MLP), all math through device.h.
 * What it is not: the embedding, the head, the buffers or the walk over
 * layers and units (llama_model.c), or the config (llama.c).
 * Sources: transformers' modeling_llama.py, modeling_gemma2.py,
 * modeling_gemma3.py, modeling_qwen3.py, modeling_olmo2.py,
 * modeling_phi3.py and InternLM2's modeling_internlm2.py for where each
 * norm, bias and reshape sits.
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, QD = NH*HD, KVD = NKV*HD, I intermediate.
 * Dtypes as llama_model.c: tensors stored in A (or R) are read through
 * f32 views and written through commits (model/autocast.h); which work
 * buffer holds which view is chosen so that no view is overwritten while
 * a kernel still reads it. */
#include "model/llama_impl.h"
#include "model/recompute.h"

#include <math.h>
#include <string.h>

void shs__llama_layer_views(const shs__llama_t *g, const float *base, const float *p[SHS__LP_COUNT]) {
    for (int k = 0; k < SHS__LP_COUNT; k++) p[k] = g->slot_tensor[k] >= 0 ? base + g->slot_off[k] : NULL;
}

/* ---- RMSNorm with the config's weight ----------------------------------------------
 * Gemma multiplies by (1 + w) (HF GemmaRMSNorm: output * (1.0 + weight),
 * the sum in f32): formed into g->wplus before each use; its gradient with
 * respect to w is the one with respect to (1 + w). */

static const float *norm_weight(shs__llama_t *g, const float *w, int n) {
    if (!g->cfg.norm_plus_one) return w;
    shs_residual_forward(g->dev, g->wplus, w, g->ones, (size_t)n);
    return g->wplus;
}

void shs__llama_norm_forward(shs__llama_t *g, float *out, float *rstd, const float *x, const float *w, int N, int C) {
    shs_rmsnorm_forward(g->dev, out, rstd, x, norm_weight(g, w, C), N, C, g->cfg.rms_norm_eps);
}

void shs__llama_norm_backward(shs__llama_t *g, float *dx, float *dw, const float *dy, const float *x, const float *w,
                              const float *rstd, int N, int C) {
    shs_rmsnorm_backward(g->dev, dx, dw, dy, x, norm_weight(g, w, C), rstd, N, C);
}

void *shs__llama_copy(const shs__llama_t *g, void *ln, int i) {
    return (char *)ln + (size_t)i * (size_t)g->B * (size_t)g->T * (size_t)g->cfg.hidden * shs_dtype_size(g->amp.A);
}

void shs__llama_norm_to_copies(shs__llama_t *g, void *ln, int copies, float *rstd, const float *x32, const float *w) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    const float *o = x32;
    if (w) {
        float *t = shs__amp_target(ln, g->amp.A, g->wa);
        shs__llama_norm_forward(g, t, rstd, x32, w, BT, C);
        o = t;
    }
    for (int i = 0; i < copies; i++) shs__amp_commit(&g->amp, shs__llama_copy(g, ln, i), g->amp.A, o, (size_t)BT * C);
}

/* out (BT,OC) A = the autocast linear of a stored (BT,C) A input. */
static void linear_forward(shs__llama_t *g, void *out, const void *inp, const float *w, const float *bias, int C,
                           int OC) {
    int BT = g->B * g->T;
    float *o = shs__amp_target(out, g->amp.A, g->wb);
    shs__amp_matmul(&g->amp, o, shs__amp_view(&g->amp, inp, g->amp.A, g->wa, (size_t)BT * C), w, bias, BT, C, OC, 0);
    shs__amp_commit(&g->amp, out, g->amp.A, o, (size_t)BT * OC);
}

/* ---- projections ----------------------------------------------------------------------
 * q (BT,QD), k, v (BT,KVD) = x W^T (+ b). InternLM2's wqkv holds, per
 * key/value head h, its G = NH/NKV query heads' rows, then its key's, then
 * its value's: its row blocks are copied into g->wqkv in the order q, k, v
 * (and its bias after them), so the three matmuls read contiguous rows;
 * the gradient is formed there and added back block by block. */

/* Row block j (0 queries, 1 key, 2 value) of key/value head h of a grouped
 * wqkv: `rows` rows from grouped row `from` to ordered row `to`. */
typedef struct {
    int from, to, rows;
} block_t;

static block_t grouped_block(const shs__llama_t *g, int h, int j) {
    int G = g->cfg.num_heads / g->cfg.num_kv_heads, HD = g->HD, base = h * (G + 2) * HD;
    if (j == 0) return (block_t){base, h * G * HD, G * HD};
    return (block_t){base + (G + j - 1) * HD, g->QD + (j - 1) * g->KVD + h * HD, HD};
}

/* The ordered weight (and bias) of a grouped wqkv into g->wqkv. */
static shs_status_t gather_wqkv(shs__llama_t *g, const float *w, const float *bias) {
    int C = g->cfg.hidden, rows = g->QD + 2 * g->KVD;
    for (int h = 0; h < g->cfg.num_kv_heads; h++)
        for (int j = 0; j < 3; j++) {
            block_t b = grouped_block(g, h, j);
            SHS_CHECK(shs_memcpy_d2d(g->dev, g->wqkv + (size_t)b.to * C, w + (size_t)b.from * C,
                                     (size_t)b.rows * C * sizeof(float)));
            if (bias)
                SHS_CHECK(shs_memcpy_d2d(g->dev, g->wqkv + (size_t)rows * C + b.to, bias + b.from,
                                         (size_t)b.rows * sizeof(float)));
        }
    return SHS_OK;
}

/* The ordered gradient in g->dwqkv added into the grouped gradients. */
static void scatter_dwqkv(shs__llama_t *g, float *dw, float *dbias) {
    int C = g->cfg.hidden, rows = g->QD + 2 * g->KVD;
    for (int h = 0; h < g->cfg.num_kv_heads; h++)
        for (int j = 0; j < 3; j++) {
            block_t b = grouped_block(g, h, j);
            shs_accumulate(g->dev, dw + (size_t)b.from * C, g->dwqkv + (size_t)b.to * C, (size_t)b.rows * C);
            if (dbias) shs_accumulate(g->dev, dbias + b.from, g->dwqkv + (size_t)rows * C + b.to, (size_t)b.rows);
        }
}

/* The q, k, v weights and biases as three contiguous projections. */
typedef struct {
    const float *w[3], *b[3];
} qkv_t;

static qkv_t qkv_weights(shs__llama_t *g, const float *const p[SHS__LP_COUNT]) {
    int C = g->cfg.hidden;
    if (p[SHS__LP_QKV_GROUPED]) {
        SHS_ASSERT(gather_wqkv(g, p[SHS__LP_QKV_GROUPED], p[SHS__LP_QKVB_GROUPED]) == SHS_OK);
        const float *w = g->wqkv, *b = p[SHS__LP_QKVB_GROUPED] ? g->wqkv + (size_t)(g->QD + 2 * g->KVD) * C : NULL;
        return (qkv_t){{w, w + (size_t)g->QD * C, w + (size_t)(g->QD + g->KVD) * C},
                       {b, b ? b + g->QD : NULL, b ? b + g->QD + g->KVD : NULL}};
    }
    return (qkv_t){{p[SHS__LP_Q], p[SHS__LP_K], p[SHS__LP_V]}, {p[SHS__LP_QB], p[SHS__LP_KB], p[SHS__LP_VB]}};
}


/* ---- the attention branch -------------------------------------------------------------- */

/* The attention options and RoPE of layer l. */
static shs_attention_opts_t layer_opts(const shs__llama_t *g, int l) {
    const shs_llama_config_t *c = &g->cfg;
    float scale = c->query_pre_attn_scalar > 0 ? (float)pow(c->query_pre_attn_scalar, -0.5) : 0.0f;
    return (shs_attention_opts_t){scale, c->attn_softcap, shs_llama_layer_window(c, l)};
}

static shs_rope_t layer_rope(const shs__llama_t *g, int l) {
    if (g->cfg.rope_local_theta > 0 && shs_llama_layer_window(&g->cfg, l)) return (shs_rope_t){g->inv_local, g->R, 1.0f};
    return (shs_rope_t){g->inv_cur, g->R, g->mscale};
}

static const int32_t *pos_arg(const shs__llama_t *g) { return g->has_positions ? g->positions : NULL; }
static const int32_t *doc_arg(const shs__llama_t *g) { return g->has_doc_ids ? g->doc_ids : NULL; }

/* The rows and width the q (k) norm runs over: per head or the whole projection. */
static int qk_rows(const shs__llama_t *g, int heads) {
    return g->B * g->T * (g->cfg.qk_norm == SHS_QK_NORM_HEAD ? heads : 1);
}
static int qk_cols(const shs__llama_t *g, int heads) { return g->cfg.qk_norm == SHS_QK_NORM_HEAD ? g->HD : heads * g->HD; }

/* What the projections of the attention (MLP) input read, copy i: the A
 * copies when stored, else the layer input (res2) itself (then A is R). */
static const void *branch_input(const shs__llama_t *g, void *copies, const void *x, int i) {
    return copies ? shs__llama_copy(g, copies, i) : x;
}

/* q (k) of `heads` heads into `out` (A) from the projection in `proj`
 * (out itself when not kept apart): through the q (k) norm when the config
 * has one, then RoPE; in f32, the result rounded to A (and the norm's
 * output too where HF's norm returns its input's dtype: Gemma's (1 + w)
 * norms, OLMo 2's; Qwen3's LlamaRMSNorm returns f32 w times its rounded
 * normalized input, which is not emulated). */
static void qk_forward(shs__llama_t *g, int l, void *out, const void *proj, float *rstd, const float *w, int heads) {
    size_t n = (size_t)g->B * g->T * heads * g->HD;
    shs__amp_t *amp = &g->amp;
    const float *x32 = shs__amp_view(amp, proj, amp->A, g->wa, n);
    float *o = shs__amp_target(out, amp->A, g->wb);
    if (g->cfg.qk_norm != SHS_QK_NORM_NONE) {
        shs__llama_norm_forward(g, o, rstd, x32, w, qk_rows(g, heads), qk_cols(g, heads));
        /* Gemma's and OLMo 2's norms return their input's dtype (A): rounded before RoPE */
        if (amp->A != SHS_F32 && (g->cfg.norm_plus_one || g->cfg.qk_norm == SHS_QK_NORM_ALL))
            shs_round(g->dev, o, amp->A, n);
        x32 = o;
    }
    shs_rope_t rope = layer_rope(g, l);
    shs_rope_forward(g->dev, o, x32, pos_arg(g), &rope, g->B, g->T, heads, g->HD);
    shs__amp_commit(amp, out, amp->A, o, n);
}

/* The attention core of layer l from its stored q, k, v into `out` (f32);
 * eager's probabilities stored in A. */
static void attention_core_forward(shs__llama_t *g, int l, float *out) {
    const shs_llama_config_t *c = &g->cfg;
    shs__amp_t *amp = &g->amp;
    shs__llama_acts_t *a = &g->layer[l];
    size_t btq = (size_t)g->B * g->T * g->QD, btk = (size_t)g->B * g->T * g->KVD;
    size_t tt = (size_t)g->B * c->num_heads * g->T * g->T;
    shs_attention_opts_t o = layer_opts(g, l);
    const float *q = shs__amp_view(amp, a->q, amp->A, g->wa, btq);
    const float *k = shs__amp_view(amp, a->k, amp->A, g->wk, btk);
    const float *v = shs__amp_view(amp, a->v, amp->A, g->wv, btk);
    if (g->ex.attention == SHS_ATTENTION_FLASH) {
        shs_attention_gqa_forward_flash(g->dev, out, a->lse, q, k, v, doc_arg(g), &o, g->B, g->T, c->num_heads,
                                        c->num_kv_heads, g->HD);
        return;
    }
    float *att = shs__amp_target(a->att, amp->A, g->wt);
    shs_attention_gqa_forward(g->dev, out, att, q, k, v, doc_arg(g), &o, g->B, g->T, c->num_heads, c->num_kv_heads,
                              g->HD);
    shs__amp_commit(amp, a->att, amp->A, att, tt);
}

/* With op_recompute: whether layer l runs again the op whose output is a
 * buffer of `role` (model/recompute.h) from projection lin (or -1): it did
 * not keep it. Without: always. */
static int rerun(const shs__llama_t *g, int l, int op_recompute, int role, int lin) {
    return !(op_recompute && shs__llama_kept(g, l, role, lin));
}

/* q, k, v of layer l from its attention input (x: the layer input): projected,
 * q and k normed (qk_norm) and rotated, then the core into a->atty. */
static void attention_forward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                              int op_recompute) {
    const shs_llama_config_t *c = &g->cfg;
    int C = c->hidden, role = c->qk_norm != SHS_QK_NORM_NONE ? R_SAVED : R_MM;
    shs__llama_acts_t *a = &g->layer[l];
    qkv_t w = qkv_weights(g, p);
    void *qp = a->qp ? a->qp : a->q, *kp = a->kp ? a->kp : a->k;
    if (rerun(g, l, op_recompute, role, SHS__LIN_Q))
        linear_forward(g, qp, branch_input(g, a->ln1, x, 0), w.w[0], w.b[0], C, g->QD);
    if (rerun(g, l, op_recompute, role, SHS__LIN_K))
        linear_forward(g, kp, branch_input(g, a->ln1, x, g->n1 > 1 ? 1 : 0), w.w[1], w.b[1], C, g->KVD);
    if (rerun(g, l, op_recompute, R_SAVED, SHS__LIN_V))
        linear_forward(g, a->v, branch_input(g, a->ln1, x, g->n1 > 2 ? 2 : 0), w.w[2], w.b[2], C, g->KVD);
    qk_forward(g, l, a->q, qp, a->rstdq, p[SHS__LP_QN], c->num_heads);
    qk_forward(g, l, a->k, kp, a->rstdk, p[SHS__LP_KN], c->num_kv_heads);
    if (!rerun(g, l, op_recompute, R_ATTN, -1)) return;
    float *o = shs__amp_target(a->atty, g->amp.A, g->wb);
    attention_core_forward(g, l, o);
    shs__amp_commit(&g->amp, a->atty, g->amp.A, o, (size_t)g->B * g->T * g->QD);
}

/* d(loss)/d(atty) in g->datty on entry; the gradients of q, k, v's
 * projections accumulate into gw and d(loss)/d(attention input) is written
 * to g->dbtc. */
static void attention_backward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                               const float *const gw[SHS__LP_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, BT = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = g->HD;
    size_t btq = (size_t)BT * g->QD, btk = (size_t)BT * g->KVD, tt = (size_t)B * NH * T * T;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    shs_dtype_t A = amp->A;
    shs__llama_acts_t *a = &g->layer[l];
    shs_attention_opts_t o = layer_opts(g, l);
    /* selective recompute: the probabilities again (same bits) */
    if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE && g->ex.attention == SHS_ATTENTION_EAGER)
        attention_core_forward(g, l, g->dq);
    shs_memset(d, g->dqr, 0, btq * sizeof(float));
    shs_memset(d, g->dkr, 0, btk * sizeof(float));
    shs_memset(d, g->dv, 0, btk * sizeof(float));
    const float *q = shs__amp_view(amp, a->q, A, g->wa, btq), *k = shs__amp_view(amp, a->k, A, g->wk, btk);
    const float *v = shs__amp_view(amp, a->v, A, g->wv, btk);
    if (g->ex.attention == SHS_ATTENTION_FLASH)
        shs_attention_gqa_backward_flash(d, g->dqr, g->dkr, g->dv, g->datty, q, k, v,
                                         shs__amp_view(amp, a->atty, A, g->wc, btq), a->lse, doc_arg(g), &o, B, T, NH,
                                         NKV, HD);
    else
        shs_attention_gqa_backward(d, g->dqr, g->dkr, g->dv, g->datt, g->datty, q, k, v,
                                   shs__amp_view(amp, a->att, A, g->wt, tt), &o, B, T, NH, NKV, HD);
    shs_memset(d, g->dq, 0, btq * sizeof(float));
    shs_memset(d, g->dk, 0, btk * sizeof(float));
    shs_rope_t rope = layer_rope(g, l);
    shs_rope_backward(d, g->dq, g->dqr, pos_arg(g), &rope, B, T, NH, HD);
    shs_rope_backward(d, g->dk, g->dkr, pos_arg(g), &rope, B, T, NKV, HD);
    const float *dq = g->dq, *dk = g->dk;
    if (c->qk_norm != SHS_QK_NORM_NONE) {
        shs_memset(d, g->dqn, 0, btq * sizeof(float));
        shs_memset(d, g->dkn, 0, btk * sizeof(float));
        shs__llama_norm_backward(g, g->dqn, (float *)gw[SHS__LP_QN], g->dq, shs__amp_view(amp, a->qp, A, g->wa, btq),
                                 p[SHS__LP_QN], a->rstdq, qk_rows(g, NH), qk_cols(g, NH));
        shs__llama_norm_backward(g, g->dkn, (float *)gw[SHS__LP_KN], g->dk, shs__amp_view(amp, a->kp, A, g->wk, btk),
                                 p[SHS__LP_KN], a->rstdk, qk_rows(g, NKV), qk_cols(g, NKV));
        dq = g->dqn, dk = g->dkn;
    }
    qkv_t w = qkv_weights(g, p);
    int grouped = p[SHS__LP_QKV_GROUPED] != NULL;
    qkv_t dw;
    if (!grouped) {
        dw = qkv_weights(g, gw); /* the gradients' views, same layout */
    } else {
        size_t n = (size_t)(g->QD + 2 * g->KVD) * (C + 1);
        shs_memset(d, g->dwqkv, 0, n * sizeof(float));
        float *dwq = g->dwqkv, *dbq = gw[SHS__LP_QKVB_GROUPED] ? g->dwqkv + (size_t)(g->QD + 2 * g->KVD) * C : NULL;
        dw = (qkv_t){{dwq, dwq + (size_t)g->QD * C, dwq + (size_t)(g->QD + g->KVD) * C},
                     {dbq, dbq ? dbq + g->QD : NULL, dbq ? dbq + g->QD + g->KVD : NULL}};
    }
    shs_memset(d, g->dbtc, 0, (size_t)BT * C * sizeof(float));
    const float *dy[3] = {dq, dk, g->dv};
    int oc[3] = {g->QD, g->KVD, g->KVD};
    for (int i = 0; i < 3; i++) {
        const void *in = branch_input(g, a->ln1, x, i < g->n1 ? i : 0);
        shs__amp_matmul_backward(amp, g->dbtc, (float *)dw.w[i], (float *)dw.b[i], dy[i],
                                 shs__amp_view(amp, in, A, g->wa, (size_t)BT * C), w.w[i], BT, C, oc[i]);
    }
    if (grouped) scatter_dwqkv(g, (float *)gw[SHS__LP_QKV_GROUPED], (float *)gw[SHS__LP_QKVB_GROUPED]);
}

/* ---- the gated MLP ---------------------------------------------------------------------- */

/* gate, up and act (A) of layer l from the MLP input (res2: the attention
 * residual). */
static void mlp_forward(shs__llama_t *g, int l, const void *res2, const float *const p[SHS__LP_COUNT],
                        int op_recompute) {
    const shs_llama_config_t *c = &g->cfg;
    int C = c->hidden, I = c->intermediate;
    size_t bti = (size_t)g->B * g->T * I;
    shs__amp_t *amp = &g->amp;
    shs__llama_acts_t *a = &g->layer[l];
    if (rerun(g, l, op_recompute, R_SAVED, SHS__LIN_GATE))
        linear_forward(g, a->gate, branch_input(g, a->ln2, res2, 0), p[SHS__LP_GATE], NULL, C, I);
    if (rerun(g, l, op_recompute, R_SAVED, SHS__LIN_UP))
        linear_forward(g, a->up, branch_input(g, a->ln2, res2, g->n2 > 1 ? 1 : 0), p[SHS__LP_UP], NULL, C, I);
    float *o = shs__amp_target(a->act, amp->A, g->wc);
    const float *gt = shs__amp_view(amp, a->gate, amp->A, g->wa, bti), *up = shs__amp_view(amp, a->up, amp->A, g->wb, bti);
    if (c->act == SHS_LLAMA_ACT_GELU_TANH) shs_geglu_forward(g->dev, o, gt, up, bti);
    else shs_swiglu_forward(g->dev, o, gt, up, bti);
    shs__amp_commit(amp, a->act, amp->A, o, bti);
}

/* d(loss)/d(down_proj's output) in dout; d(loss)/d(MLP input) written to g->dbtc. */
static void mlp_backward(shs__llama_t *g, int l, const void *res2, const float *dout,
                         const float *const p[SHS__LP_COUNT], const float *const gw[SHS__LP_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int BT = g->B * g->T, C = c->hidden, I = c->intermediate;
    size_t bti = (size_t)BT * I, btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    shs_dtype_t A = amp->A;
    shs__llama_acts_t *a = &g->layer[l];
#define W(k) ((float *)gw[k])
    shs_memset(d, g->dact, 0, bti * sizeof(float));
    shs__amp_matmul_backward(amp, g->dact, W(SHS__LP_DOWN), NULL, dout, shs__amp_view(amp, a->act, A, g->wa, bti),
                             p[SHS__LP_DOWN], BT, I, C);
    shs_memset(d, g->dgate, 0, bti * sizeof(float));
    shs_memset(d, g->dup, 0, bti * sizeof(float));
    const float *gt = shs__amp_view(amp, a->gate, A, g->wa, bti), *up = shs__amp_view(amp, a->up, A, g->wb, bti);
    if (c->act == SHS_LLAMA_ACT_GELU_TANH) shs_geglu_backward(d, g->dgate, g->dup, g->dact, gt, up, bti);
    else shs_swiglu_backward(d, g->dgate, g->dup, g->dact, gt, up, bti);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    shs__amp_matmul_backward(amp, g->dbtc, W(SHS__LP_GATE), NULL, g->dgate,
                             shs__amp_view(amp, branch_input(g, a->ln2, res2, 0), A, g->wa, btc), p[SHS__LP_GATE], BT,
                             C, I);
    shs__amp_matmul_backward(amp, g->dbtc, W(SHS__LP_UP), NULL, g->dup,
                             shs__amp_view(amp, branch_input(g, a->ln2, res2, g->n2 > 1 ? 1 : 0), A, g->wa, btc),
                             p[SHS__LP_UP], BT, C, I);
#undef W
}

/* ---- the layer ------------------------------------------------------------------------------
 * res2 = x + [ATTN_OUT norm] o(attention([ATTN_IN norm] x))
 * res3 = res2 + [MLP_OUT norm] down(act(gate(m)) * up(m)), m = [MLP_IN norm] res2
 * A branch's output norm reads the projection as stored (A) and its output
 * is rounded to A (HF: .to(input_dtype) / type_as) before the residual add. */

/* A branch's output as its residual add reads it (f32, A-rounded): the
 * projection (w, bias; input inp (BT,K) A) stored in y when the layer
 * keeps it (computed into it, or with op_recompute read back when kept),
 * then its output norm (nw, rstd) when the layer has one there; else the
 * projection computed into g->proj. */
static const float *branch_forward(shs__llama_t *g, int l, int op_recompute, void *y, int lin, const void *inp,
                                   const float *w, const float *bias, int K, const float *nw, float *rstd) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    size_t n = (size_t)BT * C;
    shs__amp_t *amp = &g->amp;
    if (!y) {
        shs__amp_matmul(amp, g->proj, shs__amp_view(amp, inp, amp->A, g->wa, (size_t)BT * K), w, bias, BT, K, C, 1);
        return g->proj;
    }
    if (rerun(g, l, op_recompute, nw ? R_SAVED : R_MM, lin)) linear_forward(g, y, inp, w, bias, K, C);
    if (!nw) return shs__amp_view(amp, y, amp->A, g->proj, n);
    shs__llama_norm_forward(g, g->proj, rstd, shs__amp_view(amp, y, amp->A, g->wa, n), nw, BT, C);
    if (amp->A != SHS_F32) shs_round(g->dev, g->proj, amp->A, n);
    return g->proj;
}

/* out (R) = in32 + add (f32). */
static void residual_forward(shs__llama_t *g, void *out, const float *in32, const float *add) {
    size_t btc = (size_t)g->B * g->T * g->cfg.hidden;
    float *o = shs__amp_target(out, g->amp.R, g->wr); /* may alias in32's view: residual_forward allows it */
    shs_residual_forward(g->dev, o, in32, add, btc);
    shs__amp_commit(&g->amp, out, g->amp.R, o, btc);
}

void shs__llama_layer_forward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                              int op_recompute) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    size_t btc = (size_t)BT * C;
    shs__amp_t *amp = &g->amp;
    shs__llama_acts_t *a = &g->layer[l];
    const float *x32 = shs__amp_view(amp, x, amp->R, g->wx, btc);
    if (a->ln1) shs__llama_norm_to_copies(g, a->ln1, g->n1, a->rstd1, x32, p[SHS__LP_ATTN_IN]);
    attention_forward(g, l, x, p, op_recompute);
    const float *o = branch_forward(g, l, op_recompute, a->ao, SHS__LIN_O, a->atty, p[SHS__LP_O], p[SHS__LP_OB], g->QD,
                                    p[SHS__LP_ATTN_OUT], a->rstdao);
    residual_forward(g, a->res2, x32, o);
    const float *res2 = shs__amp_view(amp, a->res2, amp->R, g->wr, btc);
    if (a->ln2) shs__llama_norm_to_copies(g, a->ln2, g->n2, a->rstd2, res2, p[SHS__LP_MLP_IN]);
    mlp_forward(g, l, a->res2, p, op_recompute);
    if (op_recompute && !p[SHS__LP_MLP_OUT]) return; /* backward reads nothing after act */
    o = branch_forward(g, l, op_recompute, a->mo, SHS__LIN_DOWN, a->act, p[SHS__LP_DOWN], NULL, g->cfg.intermediate,
                       p[SHS__LP_MLP_OUT], a->rstdmo);
    if (op_recompute) return;
    residual_forward(g, a->res3, res2, o);
}

/* d(loss)/d(a branch's input) from g->dbtc into g->dres: through its input
 * norm of x (R; accumulating), or added when the layer has none there. */
static void branch_input_backward(shs__llama_t *g, int slot, const void *x, const float *rstd,
                                  const float *const p[SHS__LP_COUNT], const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    if (!p[slot]) {
        shs_accumulate(g->dev, g->dres, g->dbtc, (size_t)BT * C);
        return;
    }
    shs__llama_norm_backward(g, g->dres, (float *)gw[slot], g->dbtc, shs__amp_view(&g->amp, x, g->amp.R, g->wx,
                             (size_t)BT * C), p[slot], rstd, BT, C);
}

/* d(loss)/d(a branch's output before its output norm): g->dres itself, or
 * through the norm (slot) of y (A) into g->dpost. */
static const float *branch_output_backward(shs__llama_t *g, int slot, const void *y, const float *rstd,
                                           const float *const p[SHS__LP_COUNT], const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    if (!p[slot]) return g->dres;
    shs_memset(g->dev, g->dpost, 0, (size_t)BT * C * sizeof(float));
    shs__llama_norm_backward(g, g->dpost, (float *)gw[slot], g->dres,
                             shs__amp_view(&g->amp, y, g->amp.A, g->wa, (size_t)BT * C), p[slot], rstd, BT, C);
    return g->dpost;
}

void shs__llama_layer_backward(shs__llama_t *g, int l, const void *x, const float *const p[SHS__LP_COUNT],
                               const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    shs__amp_t *amp = &g->amp;
    shs__llama_acts_t *a = &g->layer[l];
    /* the MLP branch */
    const float *dm = branch_output_backward(g, SHS__LP_MLP_OUT, a->mo, a->rstdmo, p, gw);
    mlp_backward(g, l, a->res2, dm, p, gw);
    branch_input_backward(g, SHS__LP_MLP_IN, a->res2, a->rstd2, p, gw);
    /* the attention branch */
    const float *da = branch_output_backward(g, SHS__LP_ATTN_OUT, a->ao, a->rstdao, p, gw);
    shs_memset(g->dev, g->datty, 0, (size_t)BT * g->QD * sizeof(float));
    shs__amp_matmul_backward(amp, g->datty, (float *)gw[SHS__LP_O], (float *)gw[SHS__LP_OB], da,
                             shs__amp_view(amp, a->atty, amp->A, g->wc, (size_t)BT * g->QD), p[SHS__LP_O], BT, g->QD,
                             C);
    attention_backward(g, l, x, p, gw);
    branch_input_backward(g, SHS__LP_ATTN_IN, x, a->rstd1, p, gw);
}
