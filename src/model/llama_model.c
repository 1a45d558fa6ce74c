/* llama_model.c - the Llama family's model (llama.h): its activation
 * buffers and what each layer keeps for backward (recompute, autocast
 * dtypes), the embedding, the walk over decoder layers and wrap units, the
 * final norm and the LM head, forward and backward, all math through the
 * device interface (device.h).
 * What it is not: a decoder layer (llama_layer.c), the config, parameter
 * count or layout (llama.c), sharding, optimization, a config file reader
 * (hf_config.c) or the GPT (gpt.c).
 * Legend: B sequences, T context, C hidden, NH heads, NKV key/value heads,
 * HD head dim, QD = NH*HD, KVD = NKV*HD, R rotary dim, I intermediate, L
 * layers, V vocabulary.
 *
 * Dtypes (llama.h gives the rules): A, the activation dtype (autocast's,
 * else f32); R, the residual stream's (A when the parameters are A, else
 * f32); statistics, the log-sum-exp, logits and losses f32. Kernels work in
 * f32: a 16-bit tensor is read through a view and written through a commit
 * (model/autocast.h), with f32 work buffers shared by every layer.
 */
#include "model/llama_impl.h"

#include <stdlib.h>
#include <string.h>

#include "model/carver.h"
#include "model/loss_gpu_memory.h"
#include "model/recompute.h"

/* ---- activations ------------------------------------------------------------ */

/* Whether op-level SAC saves the output of projection lin (-1: none). */
static int mm_saved(const shs__llama_t *g, int lin) { return lin >= 0 && (g->op_saved >> g->lin_of[lin] & 1); }

int shs__llama_kept(const shs__llama_t *g, int l, int role, int lin) {
    return shs__ac_keeps(&g->ex, l, (shs__act_role_t)role, mm_saved(g, lin));
}

/* Per-layer buffers: name, elements, element size, role (recompute.h), the
 * projection whose output it is (or -1). ln1 / ln2 exist when the branch
 * has an input norm, or when the projections read A casts of an R input
 * (XIN1, XIN2); qp, kp, ao and mo are read by backward (saved) when a norm
 * follows them, else only op-level SAC keeps them. */
#define LAYER_BUFS(X)                                                                                           \
    X(rstd1, NIN ? BT : 0, 4, R_SAVED, -1) X(ln1, XIN1 ? g->n1 * BTC : 0, a, R_SAVED, -1)                       \
    X(qp, BTQ, a, QKN ? R_SAVED : R_MM, SHS__LIN_Q) X(kp, BTK, a, QKN ? R_SAVED : R_MM, SHS__LIN_K)              \
    X(rstdq, QKN ? BT * QKH : 0, 4, R_SAVED, -1) X(rstdk, QKN ? BT * KKH : 0, 4, R_SAVED, -1)                    \
    X(q, BTQ, a, R_SAVED, -1) X(k, BTK, a, R_SAVED, -1) X(v, BTK, a, R_SAVED, SHS__LIN_V)                        \
    X(att, eager ? TT : 0, a, R_PROBS, -1) X(lse, eager ? 0 : B * NH * T, 4, R_ATTN, -1)                         \
    X(atty, BTQ, a, R_ATTN, -1) X(ao, BTC, a, AOUT ? R_SAVED : R_MM, SHS__LIN_O)                                 \
    X(rstdao, AOUT ? BT : 0, 4, R_SAVED, -1) X(res2, BTC, r, R_SAVED, -1)                                        \
    X(rstd2, MIN ? BT : 0, 4, R_SAVED, -1) X(ln2, XIN2 ? g->n2 * BTC : 0, a, R_SAVED, -1)                        \
    X(gate, BTI, a, R_SAVED, SHS__LIN_GATE) X(up, BTI, a, R_SAVED, SHS__LIN_UP) X(act, BTI, a, R_SAVED, -1)      \
    X(mo, BTC, a, MOUT ? R_SAVED : R_MM, SHS__LIN_DOWN) X(rstdmo, MOUT ? BT : 0, 4, R_SAVED, -1)                 \
    X(res3, BTC, r, R_OUT, -1)

#define DIMS(g)                                                                                                  \
    const shs_llama_config_t *c = &(g)->cfg;                                                                     \
    size_t B = (size_t)(g)->B, T = (size_t)(g)->T, C = (size_t)c->hidden, NH = (size_t)c->num_heads;             \
    size_t BT = B * T, BTC = BT * C, BTQ = BT * (size_t)(g)->QD, BTK = BT * (size_t)(g)->KVD;                    \
    size_t BTI = BT * (size_t)c->intermediate, TT = B * NH * T * T, V = (size_t)c->vocab;                        \
    size_t a = shs_dtype_size((g)->amp.A), r = shs_dtype_size((g)->amp.R);                                       \
    int eager = (g)->ex.attention == SHS_ATTENTION_EAGER, QKN = c->qk_norm != SHS_QK_NORM_NONE;                  \
    size_t QKH = c->qk_norm == SHS_QK_NORM_HEAD ? NH : 1;                                                        \
    size_t KKH = c->qk_norm == SHS_QK_NORM_HEAD ? (size_t)c->num_kv_heads : 1;                                   \
    unsigned nb = (g)->norms;                                                                                    \
    int NIN = nb & SHS_LLAMA_NORM_ATTN_IN, AOUT = nb & SHS_LLAMA_NORM_ATTN_OUT, MIN = nb & SHS_LLAMA_NORM_MLP_IN; \
    int MOUT = nb & SHS_LLAMA_NORM_MLP_OUT, XIN1 = NIN || (g)->amp.A != (g)->amp.R;                               \
    int XIN2 = MIN || (g)->amp.A != (g)->amp.R;                                                                   \
    (void)BTK; (void)BTI; (void)TT; (void)V; (void)eager; (void)QKH; (void)KKH; (void)NIN; (void)AOUT; (void)MIN; \
    (void)MOUT; (void)QKN; (void)a; (void)r; (void)XIN1; (void)XIN2

/* The forward activations: the embedding output, each layer's kept
 * buffers, one shared set for what some layer does not keep, the final
 * norm, logits and loss, the RoPE frequencies. */
static void layout_acts(shs__llama_t *g, void *base, size_t *total) {
    DIMS(g);
    int L = c->num_layers;
    size_t half = (size_t)g->R / 2;
    shs__carver_t k = {base, 0, 0};
    for (k.es = 4; k.es >= 2; k.es /= 2) {
        shs__carve(&k, &g->encoded, BTC, r);
        for (int l = 0; l < L; l++) {
            shs__llama_acts_t *la = &g->layer[l];
#define CARVE(f, n, es, role, lin) if (shs__llama_kept(g, l, role, lin)) shs__carve(&k, &la->f, n, es);
            LAYER_BUFS(CARVE)
#undef CARVE
        }
#define CARVE_SHARED(f, n, es, role, lin)                                                                      \
        if (shs__ac_shared_needed(&g->ex, L, role, mm_saved(g, lin))) shs__carve(&k, &g->shared.f, n, es);
        LAYER_BUFS(CARVE_SHARED)
#undef CARVE_SHARED
        shs__carve(&k, &g->lnf, BTC, a);
        shs__carve(&k, &g->rstdf, BT, 4);
        shs__carve(&k, &g->logits, BT * V, 4);
        shs__carve(&k, &g->probs, BT * V, 4);
        shs__carve(&k, &g->losses, BT, 4);
        shs__carve(&k, &g->loss_sum, 1, 4);
        shs__carve(&k, &g->inv_freq, half, 4);
        shs__carve(&k, &g->inv_local, c->rope_local_theta > 0 ? half : 0, 4);
        shs__carve(&k, &g->inv_long, c->rope_scaling.kind == SHS_ROPE_SCALING_LONGROPE ? half : 0, 4);
    }
    for (int l = 0; l < L; l++) {
#define SHARE(f, n, es, role, lin) if (!shs__llama_kept(g, l, role, lin)) g->layer[l].f = g->shared.f;
        LAYER_BUFS(SHARE)
#undef SHARE
    }
    *total = k.cur;
}

static void layout_scratch(shs__llama_t *g, void *base, size_t *total) {
    DIMS(g);
    size_t wmax = C > (size_t)g->QD ? C : (size_t)g->QD;
    size_t wqkv = c->names == SHS_LLAMA_NAMES_INTERNLM2 ? (size_t)(g->QD + 2 * g->KVD) * (C + 1) : 0;
    shs__carver_t k = {base, 0, 4};
    shs__carve(&k, &g->dres, BTC, 4);
    shs__carve(&k, &g->dbtc, BTC > BTQ ? BTC : BTQ, 4);
    g->datty = g->dbtc; /* d(atty) is consumed before dbtc takes d(attention input) */
    shs__carve(&k, &g->dq, BTQ, 4);
    shs__carve(&k, &g->dqr, BTQ, 4);
    shs__carve(&k, &g->dk, BTK, 4);
    shs__carve(&k, &g->dkr, BTK, 4);
    shs__carve(&k, &g->dv, BTK, 4);
    shs__carve(&k, &g->dgate, BTI, 4);
    shs__carve(&k, &g->dup, BTI, 4);
    shs__carve(&k, &g->dact, BTI, 4);
    shs__carve(&k, &g->datt, eager ? TT : 0, 4);
    shs__carve(&k, &g->dlogits, BT * V, 4);
    shs__carve(&k, &g->proj, BTC, 4);
    shs__carve(&k, &g->dqn, QKN ? BTQ : 0, 4);
    shs__carve(&k, &g->dkn, QKN ? BTK : 0, 4);
    shs__carve(&k, &g->dpost, AOUT || MOUT ? BTC : 0, 4);
    shs__carve(&k, &g->wplus, c->norm_plus_one ? wmax : 0, 4);
    shs__carve(&k, &g->ones, c->norm_plus_one ? wmax : 0, 4);
    shs__carve(&k, &g->wqkv, wqkv, 4);
    shs__carve(&k, &g->dwqkv, wqkv, 4);
    *total = k.cur;
}

/* The largest weight and bias one autocast matmul rounds. */
static size_t max_rounded_weight(const shs__llama_t *g) {
    size_t C = (size_t)g->cfg.hidden, QD = (size_t)g->QD, I = (size_t)g->cfg.intermediate, V = (size_t)g->cfg.vocab;
    size_t n[] = {QD * C + QD, C * QD + C, I * C, V * C}, m = 0;
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) m = n[i] > m ? n[i] : m;
    return m;
}

/* The autocast emulation's f32 work: views of 16-bit activations and the
 * rounded weights (none without autocast). */
static void layout_work(shs__llama_t *g, void *base, size_t *total) {
    DIMS(g);
    int a16 = g->amp.A != SHS_F32, r16 = g->amp.R != SHS_F32;
    size_t wide = BTI > BTC ? BTI : BTC;
    wide = BTQ > wide ? BTQ : wide;
    shs__carver_t k = {base, 0, 4};
    shs__carve(&k, &g->wa, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wb, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wc, a16 ? wide : 0, 4);
    shs__carve(&k, &g->wk, a16 ? BTK : 0, 4);
    shs__carve(&k, &g->wv, a16 ? BTK : 0, 4);
    shs__carve(&k, &g->wt, a16 && eager ? TT : 0, 4);
    shs__carve(&k, &g->wx, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->wr, r16 ? BTC : 0, 4);
    shs__carve(&k, &g->amp.ww, g->amp.round_weights ? max_rounded_weight(g) : 0, 4);
    *total = k.cur;
}

static const shs_model_ops_t llama_ops;
static void llama_destroy(shs_model_t *m);

/* The slots of a layer unit: which tensor serves each, at what offset;
 * from which projections share a tensor, the linears in forward order
 * (op-level SAC counts them: a linear with a bias runs as addmm, which it
 * neither counts nor saves), n1 and n2. */
static void map_slots(shs__llama_t *g) {
    shs__llama_tensor_t lt[SHS__LLAMA_MAX_LAYER_TENSORS];
    g->ntensors = shs__llama_layer_tensors(&g->cfg, lt);
    const shs_tensor_info_t *t = &g->layout->tensors[g->layout->units[1].first_tensor];
    for (int k = 0; k < SHS__LP_COUNT; k++) g->slot_tensor[k] = -1, g->slot_off[k] = 0;
    for (int i = 0; i < g->ntensors; i++)
        for (int j = 0; j < lt[i].nslots; j++) {
            g->slot_tensor[lt[i].slot[j]] = i;
            g->slot_off[lt[i].slot[j]] = t[i].offset + lt[i].off[j];
        }
    int one_qkv = g->slot_tensor[SHS__LP_QKV_GROUPED] >= 0 || g->slot_tensor[SHS__LP_Q] == g->slot_tensor[SHS__LP_K];
    int one_gate_up = g->slot_tensor[SHS__LP_GATE] == g->slot_tensor[SHS__LP_UP];
    int n = 0, has_bias[SHS__LIN_COUNT];
    g->lin_of[SHS__LIN_Q] = n;
    has_bias[n++] = g->slot_tensor[SHS__LP_QB] >= 0 || g->slot_tensor[SHS__LP_QKVB_GROUPED] >= 0;
    for (int j = SHS__LIN_K; j <= SHS__LIN_V; j++) {
        if (one_qkv) {
            g->lin_of[j] = g->lin_of[SHS__LIN_Q];
            continue;
        }
        g->lin_of[j] = n;
        has_bias[n++] = g->slot_tensor[j == SHS__LIN_K ? SHS__LP_KB : SHS__LP_VB] >= 0;
    }
    g->lin_of[SHS__LIN_O] = n;
    has_bias[n++] = g->slot_tensor[SHS__LP_OB] >= 0;
    g->lin_of[SHS__LIN_GATE] = n;
    has_bias[n++] = 0;
    if (one_gate_up) g->lin_of[SHS__LIN_UP] = g->lin_of[SHS__LIN_GATE];
    else g->lin_of[SHS__LIN_UP] = n, has_bias[n++] = 0;
    g->lin_of[SHS__LIN_DOWN] = n;
    has_bias[n++] = 0;
    g->op_saved = shs__ac_op_saved_linears(has_bias, n);
    int casts = g->amp.A != g->amp.R;
    g->n1 = casts && !one_qkv ? 3 : 1;
    g->n2 = casts && !one_gate_up ? 2 : 1;
}

/* The RoPE frequencies, the ones of norm_plus_one, onto the device. */
static shs_status_t upload_constants(shs__llama_t *g) {
    const shs_llama_config_t *c = &g->cfg;
    size_t half = (size_t)g->R / 2, wmax = (size_t)(c->hidden > g->QD ? c->hidden : g->QD);
    size_t n = half > wmax ? half : wmax;
    float *h = malloc(n * sizeof(float) + sizeof(float));
    if (!h) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    shs_status_t st = SHS_OK;
    shs_llama_inv_freq(c, SHS_ROPE_FREQ_GLOBAL, h);
    SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_freq, h, half * sizeof(float)), st, done);
    if (g->inv_local) {
        shs_llama_inv_freq(c, SHS_ROPE_FREQ_LOCAL, h);
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_local, h, half * sizeof(float)), st, done);
    }
    if (g->inv_long) {
        shs_llama_inv_freq(c, SHS_ROPE_FREQ_LONG, h);
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->inv_long, h, half * sizeof(float)), st, done);
    }
    if (g->ones) {
        for (size_t i = 0; i < wmax; i++) h[i] = 1.0f;
        SHS_CHECK_GOTO(shs_memcpy_h2d(g->dev, g->ones, h, wmax * sizeof(float)), st, done);
    }
done:
    free(h);
    return st;
}

/* What the model refuses before it allocates: the exec, the layout, the
 * shape and the device's kernels. */
static shs_status_t check_create(const shs_layout_t *layout, const shs_llama_config_t *cfg, shs_device_t *dev, int B,
                                 int T, const shs_gpt_exec_t *ex) {
    SHS_CHECK(shs_llama_config_validate(cfg));
    SHS_CHECK(shs_gpt_exec_validate(ex));
    if (ex->dropout != 0.0f)
        return shs_set_error(SHS_UNSUPPORTED, "the Llama model has no dropout (got dropout %g)", (double)ex->dropout);
    int nunits = cfg->num_layers + (cfg->tie_word_embeddings ? 2 : 3);
    if (layout->num_units != nunits)
        return shs_set_error(SHS_INVALID_ARG, "layout has %d units, a Llama with %d layers and a%s head needs %d",
                             layout->num_units, cfg->num_layers, cfg->tie_word_embeddings ? " tied" : "n untied",
                             nunits);
    shs__llama_tensor_t lt[SHS__LLAMA_MAX_LAYER_TENSORS];
    if (layout->units[1].num_tensors != shs__llama_layer_tensors(cfg, lt))
        return shs_set_error(SHS_INVALID_ARG, "layout's layer unit has %d tensors, this config's layer %d",
                             layout->units[1].num_tensors, shs__llama_layer_tensors(cfg, lt));
    if (B < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 (got %d)", B);
    if (T < 1 || T > cfg->max_position)
        return shs_set_error(SHS_INVALID_ARG, "context %d must be in 1..max_position_embeddings (%d)", T,
                             cfg->max_position);
    if (!shs_device_supports(dev, SHS_KERNELS_LLAMA))
        return shs_set_error(SHS_UNSUPPORTED,
                             "the %s backend has no Llama kernels (RMSNorm, RoPE, SwiGLU, GeGLU, soft capping, "
                             "grouped-query attention); the cpu and meta backends have them", shs_device_backend(dev));
    if (ex->attention == SHS_ATTENTION_FLASH && !shs_device_supports(dev, SHS_KERNELS_FLASH_ATTENTION))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no kernels for attention flash",
                             shs_device_backend(dev));
    int autocast = ex->autocast == SHS_BF16 || ex->autocast == SHS_F16;
    if (autocast && !shs_device_supports(dev, SHS_KERNELS_ROUND))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no kernels for autocast", shs_device_backend(dev));
    return SHS_OK;
}

shs_status_t shs_llama_create(shs_model_t **out, const shs_layout_t *layout, const shs_llama_config_t *cfg,
                              shs_device_t *dev, int B, int T, const shs_gpt_exec_t *ex) {
    *out = NULL;
    SHS_CHECK(check_create(layout, cfg, dev, B, T, ex));
    shs__llama_t *g = calloc(1, sizeof *g);
    if (!g) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    g->base.ops = &llama_ops;
    g->cfg = *cfg;
    g->ex = *ex;
    g->layout = layout;
    g->dev = dev;
    g->B = B;
    g->T = T;
    g->HD = shs_llama_head_dim(cfg);
    g->QD = cfg->num_heads * g->HD;
    g->KVD = cfg->num_kv_heads * g->HD;
    g->R = shs_llama_rotary_dim(cfg);
    g->norms = shs_llama_norms(cfg);
    g->mscale = shs_llama_rope_mscale(cfg);
    g->head_unit = cfg->tie_word_embeddings ? 0 : cfg->num_layers + 2;
    shs__amp_setup(&g->amp, dev, ex);
    map_slots(g);
    g->layer = calloc((size_t)cfg->num_layers, sizeof *g->layer);
    shs_status_t st = SHS_OK;
    if (!g->layer) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    size_t n_acts, n_scratch, n_work, BT = (size_t)B * (size_t)T;
    layout_acts(g, NULL, &n_acts);
    layout_scratch(g, NULL, &n_scratch);
    layout_work(g, NULL, &n_work);
    /* the GPU ledger (device.h): the f32 logits and probabilities are the loss's, which the GPU holds at
     * its own peak (loss_gpu_memory.h), before the layers' backward needs the rest of the scratch (the
     * gradients, in dtype A there); the f32 work is the emulation's alone */
    size_t V = (size_t)cfg->vocab, a = shs_dtype_size(g->amp.A), grads = (n_scratch - 4 * BT * V) / 4 * a;
    size_t loss = shs__loss_gpu_bytes(BT, V, a, ex->loss_kernel);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->acts_mem, n_acts, n_acts - 8 * BT * V, SHS_MEM_ACTIVATIONS,
                                            "forward activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->scratch_mem, n_scratch, loss > grads ? loss : grads,
                                            SHS_MEM_ACTIVATIONS, "backward scratch"), st, fail);
    if (n_work)
        SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &g->work_mem, n_work, 0, SHS_MEM_ACTIVATIONS,
                                                "autocast f32 work (views of 16-bit activations, rounded weights)"),
                       st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&g->tokens, 4 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    g->targets = g->tokens + BT;
    g->positions = g->tokens + 2 * BT;
    g->doc_ids = g->tokens + 3 * BT;
    layout_acts(g, g->acts_mem, &n_acts);
    layout_scratch(g, g->scratch_mem, &n_scratch);
    layout_work(g, g->work_mem, &n_work);
    g->inv_cur = g->inv_freq;
    SHS_CHECK_GOTO(upload_constants(g), st, fail);
    *out = &g->base;
    return SHS_OK;
fail:
    llama_destroy(&g->base);
    return st;
}

static void llama_destroy(shs_model_t *m) {
    shs__llama_t *g = (shs__llama_t *)m;
    if (!g) return;
    shs_device_free(g->dev, g->acts_mem);
    shs_device_free(g->dev, g->scratch_mem);
    shs_device_free(g->dev, g->work_mem);
    shs_device_free(g->dev, g->tokens);
    free(g->layer);
    free(g);
}

/* ---- forward -------------------------------------------------------------------- */

/* A unit's first tensor inside its flat parameter (or gradient) buffer. */
static size_t first_offset(const shs__llama_t *g, int unit) {
    const shs_layout_t *lo = g->layout;
    return lo->tensors[lo->units[unit].first_tensor].offset;
}

/* LongRoPE's frequencies for this batch (HF longrope_frequency_update): the
 * long factors once its positions reach past original_max_position_embeddings
 * (seq_len = the largest position + 1, or T without positions). */
static void choose_rope(shs__llama_t *g, const shs_batch_t *batch) {
    g->inv_cur = g->inv_freq;
    if (!g->inv_long) return;
    int64_t seq_len = g->T;
    if (batch->positions) {
        seq_len = 0;
        for (size_t i = 0; i < (size_t)g->B * g->T; i++)
            if (batch->positions[i] + 1 > seq_len) seq_len = batch->positions[i] + 1;
    }
    if (seq_len > g->cfg.rope_scaling.original_max_position_embeddings) g->inv_cur = g->inv_long;
}

/* The embedding into g->encoded (R), times sqrt(C) in R (HF Gemma: the
 * normalizer a tensor of the hidden states' dtype) where the config says. */
static shs_status_t embed_forward(shs__llama_t *g, shs_param_source_t *src) {
    const shs_llama_config_t *c = &g->cfg;
    size_t btc = (size_t)g->B * g->T * c->hidden;
    const float *emb;
    SHS_CHECK(src->acquire_params(src->self, 0, &emb));
    float *o = shs__amp_target(g->encoded, g->amp.R, g->wx);
    shs_encoder_forward(g->dev, o, g->tokens, emb + first_offset(g, 0), NULL, g->B, g->T, c->hidden);
    if (c->embed_scale) shs_scale(g->dev, o, shs_llama_embed_scale(c, g->amp.R), btc);
    shs__amp_commit(&g->amp, g->encoded, g->amp.R, o, btc);
    return src->release_params(src->self, 0);
}

static shs_status_t llama_forward(shs_model_t *m, shs_param_source_t *src, const shs_batch_t *batch,
                                  float *mean_loss) {
    shs__llama_t *g = (shs__llama_t *)m;
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, C = c->hidden, L = c->num_layers, BT = B * T, V = c->vocab;
    size_t btc = (size_t)BT * C;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    size_t tok_bytes = (size_t)BT * sizeof(int32_t);
    g->num_targets = shs_batch_num_targets(batch, (size_t)BT);
    if (g->num_targets < BT && !shs_device_supports(d, SHS_KERNELS_IGNORE_INDEX))
        return shs_set_error(SHS_UNSUPPORTED, "the %s backend has no cross-entropy with ignored targets (%d of %d "
                             "targets are %d)", shs_device_backend(d), (int)(BT - g->num_targets), BT,
                             SHS_IGNORE_INDEX);
    SHS_CHECK(shs_memcpy_h2d(d, g->tokens, batch->tokens, tok_bytes));
    SHS_CHECK(shs_memcpy_h2d(d, g->targets, batch->targets, tok_bytes));
    g->has_positions = batch->positions != NULL;
    g->has_doc_ids = batch->doc_ids != NULL;
    if (batch->positions) SHS_CHECK(shs_memcpy_h2d(d, g->positions, batch->positions, tok_bytes));
    if (batch->doc_ids) SHS_CHECK(shs_memcpy_h2d(d, g->doc_ids, batch->doc_ids, tok_bytes));
    choose_rope(g, batch);
    SHS_CHECK(embed_forward(g, src));

    const void *x = g->encoded;
    for (int l = 0; l < L; l++) {
        const float *w, *p[SHS__LP_COUNT];
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        shs__llama_layer_views(g, w, p);
        shs__llama_layer_forward(g, l, x, p, 0);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        x = g->layer[l].res3;
    }

    const float *nw;
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    shs__llama_norm_to_copies(g, g->lnf, 1, g->rstdf, shs__amp_view(amp, x, amp->R, g->wx, btc),
                              nw + first_offset(g, L + 1));
    SHS_CHECK(src->release_params(src->self, L + 1));

    /* the head (unit 0 tied, else its own unit) stays resident for the
     * backward pass, which starts with it (FSDP keeps the last unit unsharded) */
    const float *hw;
    SHS_CHECK(src->acquire_params(src->self, g->head_unit, &hw));
    g->head_params = hw;
    shs__amp_matmul(amp, g->logits, shs__amp_view(amp, g->lnf, amp->A, g->wa, btc), hw + first_offset(g, g->head_unit),
                    NULL, BT, C, V, 1);
    if (c->final_softcap > 0) { /* HF Gemma 2: on the head's output, in its dtype */
        shs_softcap_forward(d, g->logits, g->logits, c->final_softcap, (size_t)BT * V);
        if (amp->A != SHS_F32) shs_round(d, g->logits, amp->A, (size_t)BT * V);
    }
    shs_softmax_xent_forward(d, g->losses, g->probs, g->logits, g->targets, BT, V);
    shs_sum(d, g->loss_sum, g->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, g->loss_sum, sizeof sum));
    *mean_loss = g->num_targets ? sum / (float)g->num_targets : 0.0f;
    return SHS_OK;
}

/* ---- backward -------------------------------------------------------------------- */

static shs_status_t llama_backward(shs_model_t *m, shs_param_source_t *src, float dloss) {
    shs__llama_t *g = (shs__llama_t *)m;
    const shs_llama_config_t *c = &g->cfg;
    int B = g->B, T = g->T, C = c->hidden, L = c->num_layers, BT = B * T, V = c->vocab;
    shs_device_t *d = g->dev;
    shs__amp_t *amp = &g->amp;
    size_t btc = (size_t)BT * C;
    const void *x_last = g->layer[L - 1].res3;

    /* LM head: still resident from the forward's last acquire */
    const float *hw = g->head_params;
    float *dhw;
    SHS_ASSERT(hw);
    g->head_params = NULL;
    SHS_CHECK(src->acquire_grads(src->self, g->head_unit, &dhw));
    shs_softmax_xent_backward(d, g->dlogits, g->probs, g->targets,
                              g->num_targets ? dloss / (float)g->num_targets : 0.0f, BT, V);
    if (c->final_softcap > 0)
        shs_softcap_backward(d, g->dlogits, g->dlogits, g->logits, c->final_softcap, (size_t)BT * V);
    shs_memset(d, g->dbtc, 0, btc * sizeof(float));
    size_t ho = first_offset(g, g->head_unit);
    shs__amp_matmul_backward(amp, g->dbtc, dhw + ho, NULL, g->dlogits, shs__amp_view(amp, g->lnf, amp->A, g->wa, btc),
                             hw + ho, BT, C, V);
    SHS_CHECK(src->release_params(src->self, g->head_unit));
    if (g->head_unit != 0) SHS_CHECK(src->grads_ready(src->self, g->head_unit));

    /* final RMSNorm */
    const float *nw;
    float *dnw;
    size_t off = first_offset(g, L + 1);
    SHS_CHECK(src->acquire_params(src->self, L + 1, &nw));
    SHS_CHECK(src->acquire_grads(src->self, L + 1, &dnw));
    shs_memset(d, g->dres, 0, btc * sizeof(float));
    shs__llama_norm_backward(g, g->dres, dnw + off, g->dbtc, shs__amp_view(amp, x_last, amp->R, g->wx, btc), nw + off,
                             g->rstdf, BT, C);
    SHS_CHECK(src->release_params(src->self, L + 1));
    SHS_CHECK(src->grads_ready(src->self, L + 1));

    for (int l = L - 1; l >= 0; l--) {
        const float *w, *p[SHS__LP_COUNT], *pg[SHS__LP_COUNT];
        float *gw;
        SHS_CHECK(src->acquire_params(src->self, 1 + l, &w));
        SHS_CHECK(src->acquire_grads(src->self, 1 + l, &gw));
        shs__llama_layer_views(g, w, p);
        shs__llama_layer_views(g, gw, pg);
        const void *x = l > 0 ? g->layer[l - 1].res3 : g->encoded;
        /* recompute (deterministic: the same bits as the forward's): the whole layer, or op-level SAC's part */
        if (shs__ac_block_recomputes(&g->ex, l)) shs__llama_layer_forward(g, l, x, p, 0);
        else if (g->ex.recompute == SHS_RECOMPUTE_SELECTIVE_OP) shs__llama_layer_forward(g, l, x, p, 1);
        shs__llama_layer_backward(g, l, x, p, pg);
        SHS_CHECK(src->release_params(src->self, 1 + l));
        SHS_CHECK(src->grads_ready(src->self, 1 + l));
    }

    /* embedding: needs no parameter values, only the gradient buffer */
    float *demb;
    SHS_CHECK(src->acquire_grads(src->self, 0, &demb));
    if (c->embed_scale) shs_scale(d, g->dres, shs_llama_embed_scale(c, amp->R), btc);
    shs_encoder_backward(d, demb + first_offset(g, 0), NULL, g->dres, g->tokens, B, T, C);
    SHS_CHECK(src->grads_ready(src->self, 0));
    return SHS_OK;
}

static const shs_model_ops_t llama_ops = {llama_forward, llama_backward, llama_destroy};
