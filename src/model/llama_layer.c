/* llama_layer.c - one decoder layer of the Llama family (llama_impl.h):
 * forward and backward, built from per-feature steps (norms before and
 * after each branch, the q/k/v projections plain, fused or grouped, q/k
 * norms, RoPE with its per-layer frequencies, the attention core with the
 * layer's window and soft cap, the gated MLP), all math through device.h.
 * What it is not: the embedding, the head or the walk over layers and
 * units (llama.c), or the config (llama_config.c).
 * Sources: transformers' modeling_llama.py, modeling_gemma2.py,
 * modeling_gemma3.py, modeling_qwen3.py, modeling_olmo2.py,
 * modeling_phi3.py and InternLM2's modeling_internlm2.py for where each
 * norm, bias and reshape sits.
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, QD = NH*HD, KVD = NKV*HD, I intermediate. */
#include "model/llama_impl.h"

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

/* The attention core of layer l from its stored q, k, v into `out`. */
static void attention_core_forward(shs__llama_t *g, int l, float *out) {
    const shs_llama_config_t *c = &g->cfg;
    shs__llama_acts_t *a = &g->layer[l];
    shs_attention_opts_t o = layer_opts(g, l);
    if (g->ex.attention == SHS_ATTENTION_FLASH)
        shs_attention_gqa_forward_flash(g->dev, out, a->lse, a->q, a->k, a->v, doc_arg(g), &o, g->B, g->T,
                                        c->num_heads, c->num_kv_heads, g->HD);
    else
        shs_attention_gqa_forward(g->dev, out, a->att, a->q, a->k, a->v, doc_arg(g), &o, g->B, g->T, c->num_heads,
                                  c->num_kv_heads, g->HD);
}

/* q, k, v of layer l from its attention input xin: projected, q and k
 * normed (qk_norm) and rotated, then the core into a->atty. */
static void attention_forward(shs__llama_t *g, int l, const float *xin, const float *const p[SHS__LP_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, BT = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads;
    shs_device_t *d = g->dev;
    shs__llama_acts_t *a = &g->layer[l];
    qkv_t w = qkv_weights(g, p);
    int qkn = c->qk_norm != SHS_QK_NORM_NONE;
    shs_matmul_forward(d, qkn ? a->qraw : a->q, xin, w.w[0], w.b[0], BT, C, g->QD);
    shs_matmul_forward(d, qkn ? a->kraw : a->k, xin, w.w[1], w.b[1], BT, C, g->KVD);
    shs_matmul_forward(d, a->v, xin, w.w[2], w.b[2], BT, C, g->KVD);
    if (qkn) {
        shs__llama_norm_forward(g, a->q, a->rstdq, a->qraw, p[SHS__LP_QN], qk_rows(g, NH), qk_cols(g, NH));
        shs__llama_norm_forward(g, a->k, a->rstdk, a->kraw, p[SHS__LP_KN], qk_rows(g, NKV), qk_cols(g, NKV));
    }
    shs_rope_t rope = layer_rope(g, l);
    shs_rope_forward(d, a->q, a->q, pos_arg(g), &rope, B, T, NH, g->HD);
    shs_rope_forward(d, a->k, a->k, pos_arg(g), &rope, B, T, NKV, g->HD);
    attention_core_forward(g, l, a->atty);
}

/* d(loss)/d(atty) in g->datty on entry; the gradients of q, k, v's
 * projections accumulate into gw and d(loss)/d(xin) is written to g->dbtc. */
static void attention_backward(shs__llama_t *g, int l, const float *xin, const float *const p[SHS__LP_COUNT],
                               const float *const gw[SHS__LP_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, BT = B * T, C = c->hidden, NH = c->num_heads, NKV = c->num_kv_heads, HD = g->HD;
    size_t btq = (size_t)BT * g->QD, btk = (size_t)BT * g->KVD;
    shs_device_t *d = g->dev;
    shs__llama_acts_t *a = &g->layer[l];
    shs_attention_opts_t o = layer_opts(g, l);
    /* selective recompute: the probabilities again (same bits) */
    if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE && g->ex.attention == SHS_ATTENTION_EAGER)
        attention_core_forward(g, l, g->dq);
    shs_memset(d, g->dqr, 0, btq * sizeof(float));
    shs_memset(d, g->dkr, 0, btk * sizeof(float));
    shs_memset(d, g->dv, 0, btk * sizeof(float));
    if (g->ex.attention == SHS_ATTENTION_FLASH)
        shs_attention_gqa_backward_flash(d, g->dqr, g->dkr, g->dv, g->datty, a->q, a->k, a->v, a->atty, a->lse,
                                         doc_arg(g), &o, B, T, NH, NKV, HD);
    else
        shs_attention_gqa_backward(d, g->dqr, g->dkr, g->dv, g->datt, g->datty, a->q, a->k, a->v, a->att, &o, B, T,
                                   NH, NKV, HD);
    shs_memset(d, g->dq, 0, btq * sizeof(float));
    shs_memset(d, g->dk, 0, btk * sizeof(float));
    shs_rope_t rope = layer_rope(g, l);
    shs_rope_backward(d, g->dq, g->dqr, pos_arg(g), &rope, B, T, NH, HD);
    shs_rope_backward(d, g->dk, g->dkr, pos_arg(g), &rope, B, T, NKV, HD);
    const float *dq = g->dq, *dk = g->dk;
    if (c->qk_norm != SHS_QK_NORM_NONE) {
        shs_memset(d, g->dqn, 0, btq * sizeof(float));
        shs_memset(d, g->dkn, 0, btk * sizeof(float));
        shs__llama_norm_backward(g, g->dqn, (float *)gw[SHS__LP_QN], g->dq, a->qraw, p[SHS__LP_QN], a->rstdq,
                                 qk_rows(g, NH), qk_cols(g, NH));
        shs__llama_norm_backward(g, g->dkn, (float *)gw[SHS__LP_KN], g->dk, a->kraw, p[SHS__LP_KN], a->rstdk,
                                 qk_rows(g, NKV), qk_cols(g, NKV));
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
    for (int i = 0; i < 3; i++)
        shs_matmul_backward(d, g->dbtc, (float *)dw.w[i], (float *)dw.b[i], dy[i], xin, w.w[i], BT, C, oc[i]);
    if (grouped) scatter_dwqkv(g, (float *)gw[SHS__LP_QKV_GROUPED], (float *)gw[SHS__LP_QKVB_GROUPED]);
}

/* ---- the gated MLP ---------------------------------------------------------------------- */

static void mlp_forward(shs__llama_t *g, int l, const float *xin, const float *const p[SHS__LP_COUNT], float *out) {
    const shs_llama_config_t *c = &g->cfg;
    int BT = g->B * g->T, C = c->hidden, I = c->intermediate;
    shs_device_t *d = g->dev;
    shs__llama_acts_t *a = &g->layer[l];
    shs_matmul_forward(d, a->gate, xin, p[SHS__LP_GATE], NULL, BT, C, I);
    shs_matmul_forward(d, a->up, xin, p[SHS__LP_UP], NULL, BT, C, I);
    if (c->act == SHS_LLAMA_ACT_GELU_TANH) shs_geglu_forward(d, a->act, a->gate, a->up, (size_t)BT * I);
    else shs_swiglu_forward(d, a->act, a->gate, a->up, (size_t)BT * I);
    shs_matmul_forward(d, out, a->act, p[SHS__LP_DOWN], NULL, BT, I, C);
}

/* d(loss)/d(out) in dout; d(loss)/d(xin) written to g->dbtc. */
static void mlp_backward(shs__llama_t *g, int l, const float *xin, const float *dout, const float *const p[SHS__LP_COUNT],
                         const float *const gw[SHS__LP_COUNT]) {
    const shs_llama_config_t *c = &g->cfg;
    int BT = g->B * g->T, C = c->hidden, I = c->intermediate;
    size_t bti = (size_t)BT * I;
    shs_device_t *d = g->dev;
    shs__llama_acts_t *a = &g->layer[l];
#define W(k) ((float *)gw[k])
    shs_memset(d, g->dact, 0, bti * sizeof(float));
    shs_matmul_backward(d, g->dact, W(SHS__LP_DOWN), NULL, dout, a->act, p[SHS__LP_DOWN], BT, I, C);
    shs_memset(d, g->dgate, 0, bti * sizeof(float));
    shs_memset(d, g->dup, 0, bti * sizeof(float));
    if (c->act == SHS_LLAMA_ACT_GELU_TANH) shs_geglu_backward(d, g->dgate, g->dup, g->dact, a->gate, a->up, bti);
    else shs_swiglu_backward(d, g->dgate, g->dup, g->dact, a->gate, a->up, bti);
    shs_memset(d, g->dbtc, 0, (size_t)BT * C * sizeof(float));
    shs_matmul_backward(d, g->dbtc, W(SHS__LP_GATE), NULL, g->dgate, xin, p[SHS__LP_GATE], BT, C, I);
    shs_matmul_backward(d, g->dbtc, W(SHS__LP_UP), NULL, g->dup, xin, p[SHS__LP_UP], BT, C, I);
#undef W
}

/* ---- the layer ------------------------------------------------------------------------------
 * res2 = x + [ATTN_OUT norm] o(attention([ATTN_IN norm] x))
 * res3 = res2 + [MLP_OUT norm] down(act(gate(m)) * up(m)), m = [MLP_IN norm] res2 */

void shs__llama_layer_forward(shs__llama_t *g, int l, const float *x, const float *const p[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    size_t btc = (size_t)BT * C;
    unsigned norms = g->norms;
    shs_device_t *d = g->dev;
    shs__llama_acts_t *a = &g->layer[l];
    const float *xin = x;
    if (norms & SHS_LLAMA_NORM_ATTN_IN) {
        shs__llama_norm_forward(g, a->ln1, a->rstd1, x, p[SHS__LP_ATTN_IN], BT, C);
        xin = a->ln1;
    }
    attention_forward(g, l, xin, p);
    int post = norms & SHS_LLAMA_NORM_ATTN_OUT;
    shs_matmul_forward(d, post ? a->ao : g->proj, a->atty, p[SHS__LP_O], p[SHS__LP_OB], BT, g->QD, C);
    if (post) shs__llama_norm_forward(g, g->proj, a->rstdao, a->ao, p[SHS__LP_ATTN_OUT], BT, C);
    shs_residual_forward(d, a->res2, x, g->proj, btc);
    const float *min = a->res2;
    if (norms & SHS_LLAMA_NORM_MLP_IN) {
        shs__llama_norm_forward(g, a->ln2, a->rstd2, a->res2, p[SHS__LP_MLP_IN], BT, C);
        min = a->ln2;
    }
    post = norms & SHS_LLAMA_NORM_MLP_OUT;
    mlp_forward(g, l, min, p, post ? a->mo : g->proj);
    if (post) shs__llama_norm_forward(g, g->proj, a->rstdmo, a->mo, p[SHS__LP_MLP_OUT], BT, C);
    shs_residual_forward(d, a->res3, a->res2, g->proj, btc);
}

/* d(loss)/d(input of an input norm) from g->dbtc into g->dres: through the
 * norm (accumulating), or added when the layer has none there. */
static void branch_input_backward(shs__llama_t *g, int has_norm, int slot, const float *x, const float *rstd,
                                  const float *const p[SHS__LP_COUNT], const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    if (has_norm) shs__llama_norm_backward(g, g->dres, (float *)gw[slot], g->dbtc, x, p[slot], rstd, BT, C);
    else shs_accumulate(g->dev, g->dres, g->dbtc, (size_t)BT * C);
}

/* d(loss)/d(a branch's output before its output norm): g->dres itself, or
 * through the norm into g->dpost. */
static const float *branch_output_backward(shs__llama_t *g, int has_norm, int slot, const float *y, const float *rstd,
                                           const float *const p[SHS__LP_COUNT], const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    if (!has_norm) return g->dres;
    shs_memset(g->dev, g->dpost, 0, (size_t)BT * C * sizeof(float));
    shs__llama_norm_backward(g, g->dpost, (float *)gw[slot], g->dres, y, p[slot], rstd, BT, C);
    return g->dpost;
}

void shs__llama_layer_backward(shs__llama_t *g, int l, const float *x, const float *const p[SHS__LP_COUNT],
                               const float *const gw[SHS__LP_COUNT]) {
    int BT = g->B * g->T, C = g->cfg.hidden;
    unsigned norms = g->norms;
    shs__llama_acts_t *a = &g->layer[l];
    shs_device_t *d = g->dev;
    /* the MLP branch */
    int mlp_in = norms & SHS_LLAMA_NORM_MLP_IN;
    const float *dm = branch_output_backward(g, norms & SHS_LLAMA_NORM_MLP_OUT, SHS__LP_MLP_OUT, a->mo, a->rstdmo, p, gw);
    mlp_backward(g, l, mlp_in ? a->ln2 : a->res2, dm, p, gw);
    branch_input_backward(g, mlp_in, SHS__LP_MLP_IN, a->res2, a->rstd2, p, gw);
    /* the attention branch */
    int attn_in = norms & SHS_LLAMA_NORM_ATTN_IN;
    const float *da = branch_output_backward(g, norms & SHS_LLAMA_NORM_ATTN_OUT, SHS__LP_ATTN_OUT, a->ao, a->rstdao, p,
                                             gw);
    shs_memset(d, g->datty, 0, (size_t)BT * g->QD * sizeof(float));
    shs_matmul_backward(d, g->datty, (float *)gw[SHS__LP_O], (float *)gw[SHS__LP_OB], da, a->atty, p[SHS__LP_O], BT,
                        g->QD, C);
    attention_backward(g, l, attn_in ? a->ln1 : x, p, gw);
    branch_input_backward(g, attn_in, SHS__LP_ATTN_IN, x, a->rstd1, p, gw);
}
