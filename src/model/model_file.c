/* model_file.c - user-defined models from a model-description file: the
 * parameter layout a parsed file implies (the parser is model_file_parse.c),
 * and the model that runs the layers in sequence, all math through
 * device.h (see model_file.h; the format is in README.md,
 * "Model-description files").
 * What it is not: a graph language (no residuals, no branches) or a
 * tokenizer (inputs are the trainer's bytes).
 * Legend: B micro-batch, T context, BT = B*T rows, V vocabulary of an
 * Embedding, K width of the last used layer (classes of the loss).
 */
#include "shardsim/model_file.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "model/model_file_impl.h"

/* ---- layout -------------------------------------------------------------- */

shs_status_t shs_model_file_layout_create(shs_layout_t *lo, const shs_model_file_t *nd) {
    shs_layout_init(lo);
    shs_status_t st = SHS_OK;
    for (int u = 0; u < nd->num_units; u++) {
        const nd_unit_t *U = &nd->units[u];
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, U->name), st, fail);
        lo->units[u].replicated = U->replicated;
        for (int i = U->first_layer; i < U->first_layer + U->num_layers; i++) {
            const nd_layer_t *L = &nd->layers[i];
            char n[48];
            switch (L->kind) {
            case ND_LINEAR:
                snprintf(n, sizeof n, "%s.weight", L->name);
                if (L->weight >= 0)
                    SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[1], L->size[0], SHS_INIT_NORMAL, 0.02f), st,
                                   fail);
                snprintf(n, sizeof n, "%s.bias", L->name);
                if (L->bias_t >= 0) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[1], 1, SHS_INIT_ZEROS, 0), st, fail);
                break;
            case ND_LAYERNORM:
                snprintf(n, sizeof n, "%s.weight", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], 1, SHS_INIT_ONES, 0), st, fail);
                snprintf(n, sizeof n, "%s.bias", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], 1, SHS_INIT_ZEROS, 0), st, fail);
                break;
            case ND_EMBEDDING:
                snprintf(n, sizeof n, "%s.weight", L->name);
                SHS_CHECK_GOTO(shs_layout_add_tensor(lo, n, L->size[0], L->size[1], SHS_INIT_NORMAL, 0.02f), st,
                               fail);
                break;
            case ND_GELU:
            case ND_RELU:
                break;
            }
        }
    }
    SHS_ASSERT(lo->num_tensors == nd->num_tensors);
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}

/* ---- the model ------------------------------------------------------------ */

typedef struct {
    shs_model_t base;           /* ops: nd_ops */
    const shs_model_file_t *nd;
    const shs_layout_t *layout;
    shs_device_t *dev;
    int B, T;
    float *acts_mem;            /* forward activations, one block */
    float *x0;                  /* (BT, in_w) input vectors (first used layer not an Embedding) */
    float **out;                /* per layer: (BT, out_w) output of a used layer, else NULL */
    const float **in;           /* per layer: its input in the forward pass (x0 or an earlier out) */
    float **mean, **rstd;       /* per layer: (BT) for LayerNorm */
    float *pos;                 /* (T, C) zeros for the encoder kernel's position term; dwpe scratch */
    float *probs, *losses;      /* (BT, K), (BT) */
    float *loss_sum;            /* (1) */
    float *dA, *dB;             /* (BT, max_w) backward ping-pong */
    float *dummy;               /* (1) stands in for the pointer of an empty tensor */
    int32_t *tokens, *targets;  /* (BT) device: token % V (Embedding input), target % K (or ignored) */
    int64_t num_targets;        /* the last forward's counted targets */
    int32_t *h_tok, *h_tgt;     /* (BT) host staging */
    float *h_x0;                /* (BT, in_w) host staging */
} nd_model_t;

static const shs_model_ops_t nd_ops;
static void nd_destroy(shs_model_t *m);

static float *carve(float *base, size_t *cursor, size_t n) {
    float *p = base ? base + *cursor : NULL;
    *cursor += n;
    return p;
}

static void layout_acts(nd_model_t *m, float *base, size_t *total) {
    const shs_model_file_t *nd = m->nd;
    size_t BT = (size_t)m->B * (size_t)m->T, cur = 0;
    m->x0 = carve(base, &cur, BT * (size_t)nd->in_w);
    const float *prev = m->x0;
    for (int i = 0; i < nd->num_layers; i++) {
        const nd_layer_t *L = &nd->layers[i];
        m->out[i] = m->mean[i] = m->rstd[i] = NULL;
        m->in[i] = NULL;
        if (!L->used) continue;
        m->in[i] = prev;
        prev = m->out[i] = carve(base, &cur, BT * (size_t)L->out_w);
        if (L->kind == ND_LAYERNORM) {
            m->mean[i] = carve(base, &cur, BT);
            m->rstd[i] = carve(base, &cur, BT);
        }
    }
    const nd_layer_t *F = &nd->layers[nd->first_used];
    m->pos = carve(base, &cur, F->kind == ND_EMBEDDING ? (size_t)m->T * (size_t)F->out_w : 0);
    m->probs = carve(base, &cur, BT * (size_t)nd->out_w);
    m->losses = carve(base, &cur, BT);
    m->loss_sum = carve(base, &cur, 1);
    m->dA = carve(base, &cur, BT * (size_t)nd->max_w);
    m->dB = carve(base, &cur, BT * (size_t)nd->max_w);
    m->dummy = carve(base, &cur, 1);
    *total = cur;
}

shs_status_t shs_model_file_model_create(shs_model_t **out, const shs_model_file_t *nd, const shs_layout_t *layout,
                                      shs_device_t *dev, int B, int T) {
    *out = NULL;
    if (B < 1 || T < 1) return shs_set_error(SHS_INVALID_ARG, "micro-batch and context must be >= 1 (got %d, %d)", B, T);
    if (layout->num_units != nd->num_units || layout->num_tensors != nd->num_tensors)
        return shs_set_error(SHS_INVALID_ARG, "layout (%d units, %d tensors) is not the one of '%s' (%d units, %d tensors)",
                             layout->num_units, layout->num_tensors, nd->source, nd->num_units, nd->num_tensors);
    if ((size_t)B * (size_t)T * (size_t)(nd->max_w > 1 ? nd->max_w : 1) > INT_MAX)
        return shs_set_error(SHS_INVALID_ARG,
                             "micro-batch %d x context %d is too large for '%s' (activations of width %d would have "
                             "more than 2^31 elements)", B, T, nd->source, nd->max_w);
    nd_model_t *m = calloc(1, sizeof *m);
    if (!m) return shs_set_error(SHS_HOST_OOM, "cannot allocate model");
    m->base.ops = &nd_ops;
    m->nd = nd;
    m->layout = layout;
    m->dev = dev;
    m->B = B;
    m->T = T;
    size_t BT = (size_t)B * (size_t)T, L = (size_t)nd->num_layers, n_acts;
    m->out = calloc(L, sizeof *m->out);
    m->in = calloc(L, sizeof *m->in);
    m->mean = calloc(L, sizeof *m->mean);
    m->rstd = calloc(L, sizeof *m->rstd);
    m->h_tok = malloc(2 * BT * sizeof *m->h_tok);
    m->h_x0 = malloc((BT * (size_t)nd->in_w + 1) * sizeof *m->h_x0);
    shs_status_t st = SHS_OK;
    if (!m->out || !m->in || !m->mean || !m->rstd || !m->h_tok || !m->h_x0) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate model");
        goto fail;
    }
    m->h_tgt = m->h_tok + BT;
    layout_acts(m, NULL, &n_acts);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&m->acts_mem, n_acts * sizeof(float), SHS_MEM_ACTIVATIONS,
                                    "activations"), st, fail);
    SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&m->tokens, 2 * BT * sizeof(int32_t), SHS_MEM_ACTIVATIONS,
                                    "tokens"), st, fail);
    m->targets = m->tokens + BT;
    layout_acts(m, m->acts_mem, &n_acts);
    *out = &m->base;
    return SHS_OK;
fail:
    nd_destroy(&m->base);
    return st;
}

static void nd_destroy(shs_model_t *base) {
    nd_model_t *m = (nd_model_t *)base;
    if (!m) return;
    shs_device_free(m->dev, m->acts_mem);
    shs_device_free(m->dev, m->tokens);
    free(m->out);
    free(m->in);
    free(m->mean);
    free(m->rstd);
    free(m->h_tok);
    free(m->h_x0);
    free(m);
}

/* Element 0 of layout tensor `t` inside the unit buffer `base`. An empty
 * tensor is never read, but kernels want a valid pointer: the dummy. */
static const float *tensor_at(const nd_model_t *m, const float *base, int t) {
    const shs_tensor_info_t *ti = &m->layout->tensors[t];
    return ti->numel && base ? base + ti->offset : m->dummy;
}
static float *grad_at(const nd_model_t *m, float *base, int t) { return (float *)tensor_at(m, base, t); }

static shs_status_t nd_forward(shs_model_t *base, shs_param_source_t *src, const shs_batch_t *batch,
                               float *mean_loss) {
    nd_model_t *m = (nd_model_t *)base;
    const shs_model_file_t *nd = m->nd;
    shs_device_t *d = m->dev;
    int BT = m->B * m->T, K = nd->out_w;
    const nd_layer_t *F = &nd->layers[nd->first_used];
    /* inputs: token % V for an Embedding, else the one-hot vector of token % in (zero width: nothing);
     * tokens and targets are bytes, read as unsigned */
    uint32_t V = F->kind == ND_EMBEDDING ? (uint32_t)F->size[0] : (nd->in_w > 0 ? (uint32_t)nd->in_w : 1u);
    if (batch->doc_ids || batch->positions)
        return shs_set_error(SHS_UNSUPPORTED, "a described model has no per-document attention masks or position "
                                              "ids (packed documents need a Llama model)");
    const int32_t *tokens = batch->tokens, *targets = batch->targets;
    for (int r = 0; r < BT; r++) {
        m->h_tok[r] = (int32_t)((uint32_t)tokens[r] % V);
        m->h_tgt[r] = targets[r] == SHS_IGNORE_INDEX ? SHS_IGNORE_INDEX : (int32_t)((uint32_t)targets[r] % (uint32_t)K);
    }
    m->num_targets = shs_batch_num_targets(batch, (size_t)BT);
    SHS_CHECK(shs_memcpy_h2d(d, m->tokens, m->h_tok, 2 * (size_t)BT * sizeof(int32_t)));
    if (F->kind != ND_EMBEDDING && nd->in_w > 0) {
        size_t W = (size_t)nd->in_w;
        memset(m->h_x0, 0, (size_t)BT * W * sizeof(float));
        for (int r = 0; r < BT; r++) m->h_x0[(size_t)r * W + (size_t)m->h_tok[r]] = 1.0f;
        SHS_CHECK(shs_memcpy_h2d(d, m->x0, m->h_x0, (size_t)BT * W * sizeof(float)));
    }

    for (int u = 0; u < nd->num_units; u++) {
        const nd_unit_t *U = &nd->units[u];
        const float *p = NULL;
        if (U->fwd_params) SHS_CHECK(src->acquire_params(src->self, u, &p));
        for (int i = U->first_layer; i < U->first_layer + U->num_layers; i++) {
            const nd_layer_t *L = &nd->layers[i];
            if (!L->used) continue;
            const float *x = m->in[i];
            float *y = m->out[i];
            size_t n = (size_t)BT * (size_t)L->out_w;
            switch (L->kind) {
            case ND_LINEAR: {
                const float *bias = L->bias_t >= 0 ? tensor_at(m, p, L->bias_t) : NULL;
                if (L->tied >= 0) {
                    /* the Embedding's weight (V, C) is this layer's (out, in): acquire its unit again */
                    const nd_layer_t *E = &nd->layers[L->tied];
                    const float *pe;
                    SHS_CHECK(src->acquire_params(src->self, E->unit, &pe));
                    shs_matmul_forward(d, y, x, tensor_at(m, pe, E->weight), bias, BT, L->in_w, L->out_w);
                    SHS_CHECK(src->release_params(src->self, E->unit));
                } else {
                    shs_matmul_forward(d, y, x, tensor_at(m, p, L->weight), bias, BT, L->in_w, L->out_w);
                }
                break;
            }
            case ND_LAYERNORM:
                shs_layernorm_forward(d, y, m->mean[i], m->rstd[i], x, tensor_at(m, p, L->weight),
                                      tensor_at(m, p, L->bias_t), BT, L->out_w);
                break;
            case ND_GELU: shs_gelu_forward(d, y, x, n); break;
            case ND_RELU: shs_relu_forward(d, y, x, n); break;
            case ND_EMBEDDING:
                /* the encoder kernel adds a position row: give it zeros (wte + 0 is exact) */
                SHS_CHECK(shs_memset(d, m->pos, 0, (size_t)m->T * (size_t)L->out_w * sizeof(float)));
                shs_encoder_forward(d, y, m->tokens, tensor_at(m, p, L->weight), m->pos, m->B, m->T, L->out_w);
                break;
            }
        }
        if (U->fwd_params) SHS_CHECK(src->release_params(src->self, u));
    }
    const float *logits = m->out[nd->last_used];
    shs_softmax_xent_forward(d, m->losses, m->probs, logits, m->targets, BT, K);
    shs_sum(d, m->loss_sum, m->losses, (size_t)BT);
    float sum;
    SHS_CHECK(shs_memcpy_d2h(d, &sum, m->loss_sum, sizeof sum));
    *mean_loss = m->num_targets ? sum / (float)m->num_targets : 0.0f;
    return SHS_OK;
}

/* Every unit, in reverse order, gets acquire_grads and then grads_ready once
 * its layers are done. A tied Linear adds into its Embedding's unit, which
 * comes earlier, so that unit's grads_ready still follows both uses. */
static shs_status_t nd_backward(shs_model_t *base, shs_param_source_t *src, float dloss) {
    nd_model_t *m = (nd_model_t *)base;
    const shs_model_file_t *nd = m->nd;
    shs_device_t *d = m->dev;
    int BT = m->B * m->T, K = nd->out_w;
    float *dcur = m->dA, *dnext = m->dB;
    shs_softmax_xent_backward(d, dcur, m->probs, m->targets, m->num_targets ? dloss / (float)m->num_targets : 0.0f,
                              BT, K);
    for (int u = nd->num_units - 1; u >= 0; u--) {
        const nd_unit_t *U = &nd->units[u];
        const float *p = NULL;
        float *g;
        SHS_CHECK(src->acquire_grads(src->self, u, &g));
        if (U->bwd_params) SHS_CHECK(src->acquire_params(src->self, u, &p));
        for (int i = U->first_layer + U->num_layers - 1; i >= U->first_layer; i--) {
            const nd_layer_t *L = &nd->layers[i];
            if (!L->used) continue;
            const float *x = m->in[i];
            int first = i == nd->first_used;
            size_t n_in = (size_t)BT * (size_t)L->in_w;
            /* d(input): not needed for the first layer (its input is data), except as LayerNorm's scratch */
            if (!first || L->kind == ND_LAYERNORM) SHS_CHECK(shs_memset(d, dnext, 0, n_in * sizeof(float)));
            float *dinp = first && L->kind != ND_LAYERNORM ? NULL : dnext;
            switch (L->kind) {
            case ND_LINEAR: {
                float *dbias = L->bias_t >= 0 ? grad_at(m, g, L->bias_t) : NULL;
                if (L->tied >= 0) {
                    const nd_layer_t *E = &nd->layers[L->tied];
                    const float *pe;
                    float *ge;
                    SHS_CHECK(src->acquire_params(src->self, E->unit, &pe));
                    SHS_CHECK(src->acquire_grads(src->self, E->unit, &ge));
                    shs_matmul_backward(d, dinp, grad_at(m, ge, E->weight), dbias, dcur, x, tensor_at(m, pe, E->weight),
                                        BT, L->in_w, L->out_w);
                    SHS_CHECK(src->release_params(src->self, E->unit));
                } else {
                    shs_matmul_backward(d, dinp, grad_at(m, g, L->weight), dbias, dcur, x, tensor_at(m, p, L->weight),
                                        BT, L->in_w, L->out_w);
                }
                break;
            }
            case ND_LAYERNORM:
                shs_layernorm_backward(d, dnext, grad_at(m, g, L->weight), grad_at(m, g, L->bias_t), dcur, x,
                                       tensor_at(m, p, L->weight), m->mean[i], m->rstd[i], BT, L->out_w);
                break;
            case ND_GELU:
                if (dinp) shs_gelu_backward(d, dinp, x, dcur, n_in);
                break;
            case ND_RELU:
                if (dinp) shs_relu_backward(d, dinp, x, dcur, n_in);
                break;
            case ND_EMBEDDING:
                /* the position part lands in the scratch m->pos, re-zeroed by the next forward */
                shs_encoder_backward(d, grad_at(m, g, L->weight), m->pos, dcur, m->tokens, m->B, m->T, L->out_w);
                break;
            }
            float *t = dcur;
            dcur = dnext;
            dnext = t;
        }
        if (U->bwd_params) SHS_CHECK(src->release_params(src->self, u));
        SHS_CHECK(src->grads_ready(src->self, u));
    }
    return SHS_OK;
}

static const shs_model_ops_t nd_ops = {nd_forward, nd_backward, nd_destroy};
