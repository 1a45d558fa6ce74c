/* llama.c - the Llama family's config (llama.h): checks, derived
 * dimensions, parameter count, RoPE frequencies and scale, the embedding
 * multiplier, and the layout with Hugging Face tensor names.
 * What it is not: the forward and backward passes (llama_model.c, the
 * layer in llama_layer.c), sharding, optimization, a config file reader
 * (hf_config.c) or the GPT (gpt.c).
 * Legend: C hidden, NH heads, NKV key/value heads, HD head dim, QD = NH*HD,
 * KVD = NKV*HD, R rotary dim, I intermediate, L layers, V vocabulary.
 * Sources for the RoPE variants: transformers' modeling_rope_utils.py
 * (_compute_llama3_parameters, _compute_linear_scaling_rope_parameters,
 * _compute_longrope_parameters, _compute_dynamic_ntk_parameters). */
#include "model/llama_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"

/* ---- derived dimensions ---------------------------------------------------- */

int shs_llama_head_dim(const shs_llama_config_t *c) {
    return c->head_dim ? c->head_dim : c->num_heads ? c->hidden / c->num_heads : 0;
}

int shs_llama_rotary_dim(const shs_llama_config_t *c) { return c->rotary_dim ? c->rotary_dim : shs_llama_head_dim(c); }

unsigned shs_llama_norms(const shs_llama_config_t *c) { return c->norms ? c->norms : SHS_LLAMA_NORMS_PRE; }

int shs_llama_layer_window(const shs_llama_config_t *c, int l) {
    if (c->sliding_window <= 0) return 0;
    if (c->window_pattern >= 2) return (l + 1) % c->window_pattern ? c->sliding_window : 0;
    return l >= c->window_first_layer ? c->sliding_window : 0;
}

double shs_llama_attention_width(const shs_llama_config_t *c, int T) {
    double qd = (double)c->num_heads * shs_llama_head_dim(c), sum = 0;
    for (int l = 0; l < c->num_layers; l++) {
        int W = shs_llama_layer_window(c, l);
        sum += qd * (W && W < T ? W : T);
    }
    return sum;
}

/* ---- checks ------------------------------------------------------------------ */

static shs_status_t check_rope_scaling(const shs_llama_config_t *c) {
    const shs_rope_scaling_t *s = &c->rope_scaling;
    switch (s->kind) {
    case SHS_ROPE_SCALING_NONE: return SHS_OK;
    case SHS_ROPE_SCALING_LLAMA3:
        if (!(s->factor > 0.0) || !isfinite(s->factor))
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.factor must be > 0 (got %g)", s->factor);
        if (!(s->low_freq_factor > 0.0) || !(s->high_freq_factor > s->low_freq_factor) ||
            !isfinite(s->high_freq_factor))
            return shs_set_error(SHS_INVALID_ARG,
                                 "rope_scaling needs 0 < low_freq_factor < high_freq_factor (got %g and %g)",
                                 s->low_freq_factor, s->high_freq_factor);
        if (s->original_max_position_embeddings < 1)
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.original_max_position_embeddings must be >= 1 (got %d)",
                                 s->original_max_position_embeddings);
        return SHS_OK;
    case SHS_ROPE_SCALING_LINEAR:
    case SHS_ROPE_SCALING_DYNAMIC:
        if (!(s->factor > 0.0) || !isfinite(s->factor))
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.factor must be > 0 (got %g)", s->factor);
        return SHS_OK;
    case SHS_ROPE_SCALING_LONGROPE: {
        int R = shs_llama_rotary_dim(c);
        if (s->num_factors != R / 2)
            return shs_set_error(SHS_INVALID_ARG,
                                 "rope_scaling: longrope's short_factor and long_factor need rotary dim / 2 = %d "
                                 "entries each (got %d)", R / 2, s->num_factors);
        for (int i = 0; i < s->num_factors; i++)
            if (!(s->short_factor[i] > 0.0f) || !(s->long_factor[i] > 0.0f) || !isfinite(s->short_factor[i]) ||
                !isfinite(s->long_factor[i]))
                return shs_set_error(SHS_INVALID_ARG, "rope_scaling: longrope factor %d must be > 0", i);
        if (s->original_max_position_embeddings < 1)
            return shs_set_error(SHS_INVALID_ARG, "original_max_position_embeddings must be >= 1 (got %d)",
                                 s->original_max_position_embeddings);
        if (!(s->attention_factor >= 0.0) || !isfinite(s->attention_factor))
            return shs_set_error(SHS_INVALID_ARG, "rope_scaling.attention_factor must be >= 0 (got %g)",
                                 s->attention_factor);
        return SHS_OK;
    }
    }
    return shs_set_error(SHS_INVALID_ARG, "rope_scaling kind %d is not known (none, llama3, linear, longrope, dynamic)",
                         (int)s->kind);
}

static int is_flag(int x) { return x == 0 || x == 1; }
static int finite_nonneg(double x) { return x >= 0.0 && isfinite(x); }

/* The extensions' fields. */
static shs_status_t check_extensions(const shs_llama_config_t *c) {
    if (!is_flag(c->attention_bias) || !is_flag(c->norm_plus_one) || !is_flag(c->embed_scale))
        return shs_set_error(SHS_INVALID_ARG, "attention_bias, norm_plus_one and embed_scale must be 0 or 1");
    if (c->act != SHS_LLAMA_ACT_SILU && c->act != SHS_LLAMA_ACT_GELU_TANH)
        return shs_set_error(SHS_INVALID_ARG, "hidden_act kind %d is not known (silu or gelu_pytorch_tanh)", (int)c->act);
    if (c->norms > 15) return shs_set_error(SHS_INVALID_ARG, "norms %u is not a set of SHS_LLAMA_NORM_* bits", c->norms);
    if (c->qk_norm != SHS_QK_NORM_NONE && c->qk_norm != SHS_QK_NORM_HEAD && c->qk_norm != SHS_QK_NORM_ALL)
        return shs_set_error(SHS_INVALID_ARG, "qk_norm kind %d is not known", (int)c->qk_norm);
    if (!finite_nonneg(c->query_pre_attn_scalar))
        return shs_set_error(SHS_INVALID_ARG, "query_pre_attn_scalar must be > 0 (got %g)", c->query_pre_attn_scalar);
    if (!finite_nonneg(c->attn_softcap))
        return shs_set_error(SHS_INVALID_ARG, "attn_logit_softcapping must be > 0 (got %g)", (double)c->attn_softcap);
    if (!finite_nonneg(c->final_softcap))
        return shs_set_error(SHS_INVALID_ARG, "final_logit_softcapping must be > 0 (got %g)", (double)c->final_softcap);
    if (c->sliding_window < 0)
        return shs_set_error(SHS_INVALID_ARG, "sliding_window must be >= 1 (got %d)", c->sliding_window);
    if (c->window_pattern < 0 || c->window_pattern == 1)
        return shs_set_error(SHS_INVALID_ARG, "sliding_window_pattern must be >= 2 (got %d)", c->window_pattern);
    if (c->window_first_layer < 0 || c->window_first_layer > c->num_layers)
        return shs_set_error(SHS_INVALID_ARG, "max_window_layers must be in 0..num_hidden_layers (%d) (got %d)",
                             c->num_layers, c->window_first_layer);
    if (!finite_nonneg(c->rope_local_theta))
        return shs_set_error(SHS_INVALID_ARG, "rope_local_base_freq must be > 0 (got %g)", c->rope_local_theta);
    int plain = c->qkv_bias == 0 && c->attention_bias == 0 && c->qk_norm == SHS_QK_NORM_NONE &&
                shs_llama_norms(c) == SHS_LLAMA_NORMS_PRE;
    switch (c->names) {
    case SHS_LLAMA_NAMES_HF: return SHS_OK;
    case SHS_LLAMA_NAMES_PHI3:
        if (!plain)
            return shs_set_error(SHS_INVALID_ARG, "Phi-3's fused projections have no biases, q/k norms or other norms");
        return SHS_OK;
    case SHS_LLAMA_NAMES_INTERNLM2:
        if (c->qkv_bias || c->qk_norm != SHS_QK_NORM_NONE || shs_llama_norms(c) != SHS_LLAMA_NORMS_PRE)
            return shs_set_error(SHS_INVALID_ARG, "InternLM2's layer takes attention_bias (its bias key: wqkv and wo), "
                                 "not qkv_bias, and no q/k or other norms");
        return SHS_OK;
    }
    return shs_set_error(SHS_INVALID_ARG, "tensor naming %d is not known", (int)c->names);
}

shs_status_t shs_llama_config_validate(const shs_llama_config_t *c) {
    if (c->num_layers < 1 || c->num_layers > SHS_GPT_MAX_LAYERS)
        return shs_set_error(SHS_INVALID_ARG, "num_hidden_layers must be in 1..%d (got %d)", SHS_GPT_MAX_LAYERS,
                             c->num_layers);
    if (c->hidden < 1 || c->hidden > 65536)
        return shs_set_error(SHS_INVALID_ARG, "hidden_size must be in 1..65536 (got %d)", c->hidden);
    if (c->head_dim < 0 || c->head_dim > 65536)
        return shs_set_error(SHS_INVALID_ARG, "head_dim must be in 1..65536 (got %d)", c->head_dim);
    if (c->num_heads < 1 || c->num_heads > 65536 || (!c->head_dim && c->hidden % c->num_heads != 0) ||
        (!c->head_dim && !c->rotary_dim && (c->hidden / c->num_heads) % 2 != 0))
        return shs_set_error(SHS_INVALID_ARG,
                             "num_attention_heads (%d) must be >= 1 and divide hidden_size (%d) into an even head "
                             "dimension (RoPE rotates pairs)", c->num_heads, c->hidden);
    int HD = shs_llama_head_dim(c), R = shs_llama_rotary_dim(c);
    if ((size_t)c->num_heads * (size_t)HD > (1u << 20))
        return shs_set_error(SHS_INVALID_ARG, "num_attention_heads x head_dim must be at most %d (got %d x %d)",
                             1 << 20, c->num_heads, HD);
    if (c->rotary_dim < 0 || R < 2 || R > HD || R % 2 != 0)
        return shs_set_error(SHS_INVALID_ARG, "the rotary dimension (head_dim %d%s) must be even and in 2..%d (got %d)",
                             HD, c->rotary_dim ? " x partial_rotary_factor" : "", HD, R);
    if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0)
        return shs_set_error(SHS_INVALID_ARG, "num_key_value_heads (%d) must be >= 1 and divide num_attention_heads (%d)",
                             c->num_kv_heads, c->num_heads);
    if (c->intermediate < 1 || c->intermediate > (1 << 20))
        return shs_set_error(SHS_INVALID_ARG, "intermediate_size must be in 1..%d (got %d)", 1 << 20, c->intermediate);
    if (c->vocab < 1 || c->vocab > (1 << 22))
        return shs_set_error(SHS_INVALID_ARG, "vocab_size must be in 1..%d (got %d)", 1 << 22, c->vocab);
    if (c->max_position < 1)
        return shs_set_error(SHS_INVALID_ARG, "max_position_embeddings must be >= 1 (got %d)", c->max_position);
    if (!(c->rms_norm_eps > 0.0f) || !isfinite(c->rms_norm_eps))
        return shs_set_error(SHS_INVALID_ARG, "rms_norm_eps must be > 0 (got %g)", (double)c->rms_norm_eps);
    if (!(c->rope_theta > 0.0) || !isfinite(c->rope_theta))
        return shs_set_error(SHS_INVALID_ARG, "rope_theta must be > 0 (got %g)", c->rope_theta);
    if (!is_flag(c->tie_word_embeddings))
        return shs_set_error(SHS_INVALID_ARG, "tie_word_embeddings must be 0 or 1 (got %d)", c->tie_word_embeddings);
    if (!is_flag(c->qkv_bias)) return shs_set_error(SHS_INVALID_ARG, "qkv_bias must be 0 or 1 (got %d)", c->qkv_bias);
    SHS_CHECK(check_extensions(c));
    return check_rope_scaling(c);
}

/* ---- layout ------------------------------------------------------------------ */

/* One tensor of the list: name suffix, shape, init, and the slots it serves. */
static void put_tensor(shs__llama_tensor_t *out, int *n, const char *suffix, int rows, int cols, shs_init_kind_t init,
                       int nslots, const int *slot, const size_t *off) {
    shs__llama_tensor_t *t = &out[(*n)++];
    snprintf(t->suffix, sizeof t->suffix, "%.39s", suffix);
    t->rows = rows, t->cols = cols, t->init = init, t->nslots = nslots;
    for (int i = 0; i < nslots; i++) t->slot[i] = slot[i], t->off[i] = off[i];
}
#define ONE(suffix, rows, cols, init, s) put_tensor(out, &n, suffix, rows, cols, init, 1, (int[]){s}, (size_t[]){0})

int shs__llama_layer_tensors(const shs_llama_config_t *c, shs__llama_tensor_t *out) {
    int n = 0, C = c->hidden, HD = shs_llama_head_dim(c), QD = c->num_heads * HD, KVD = c->num_kv_heads * HD;
    int I = c->intermediate;
    unsigned norms = shs_llama_norms(c);
    shs_init_kind_t norm_init = c->norm_plus_one ? SHS_INIT_ZEROS : SHS_INIT_ONES;
    int bias = c->qkv_bias || c->attention_bias, internlm = c->names == SHS_LLAMA_NAMES_INTERNLM2;
    if (norms & SHS_LLAMA_NORM_ATTN_IN)
        ONE(internlm ? "attention_norm.weight" : "input_layernorm.weight", C, 1, norm_init, SHS__LP_ATTN_IN);
    if (internlm) {
        ONE("attention.wqkv.weight", QD + 2 * KVD, C, SHS_INIT_NORMAL, SHS__LP_QKV_GROUPED);
        if (bias) ONE("attention.wqkv.bias", QD + 2 * KVD, 1, SHS_INIT_ZEROS, SHS__LP_QKVB_GROUPED);
        ONE("attention.wo.weight", C, QD, SHS_INIT_NORMAL, SHS__LP_O);
        if (bias) ONE("attention.wo.bias", C, 1, SHS_INIT_ZEROS, SHS__LP_OB);
        ONE("ffn_norm.weight", C, 1, norm_init, SHS__LP_MLP_IN);
        ONE("feed_forward.w1.weight", I, C, SHS_INIT_NORMAL, SHS__LP_GATE);
        ONE("feed_forward.w3.weight", I, C, SHS_INIT_NORMAL, SHS__LP_UP);
        ONE("feed_forward.w2.weight", C, I, SHS_INIT_NORMAL, SHS__LP_DOWN);
        return n;
    }
    if (c->names == SHS_LLAMA_NAMES_PHI3) {
        put_tensor(out, &n, "self_attn.qkv_proj.weight", QD + 2 * KVD, C, SHS_INIT_NORMAL, 3,
                   (int[]){SHS__LP_Q, SHS__LP_K, SHS__LP_V},
                   (size_t[]){0, (size_t)QD * C, (size_t)(QD + KVD) * C});
    } else {
        ONE("self_attn.q_proj.weight", QD, C, SHS_INIT_NORMAL, SHS__LP_Q);
        ONE("self_attn.k_proj.weight", KVD, C, SHS_INIT_NORMAL, SHS__LP_K);
        ONE("self_attn.v_proj.weight", KVD, C, SHS_INIT_NORMAL, SHS__LP_V);
    }
    if (bias) {
        ONE("self_attn.q_proj.bias", QD, 1, SHS_INIT_ZEROS, SHS__LP_QB);
        ONE("self_attn.k_proj.bias", KVD, 1, SHS_INIT_ZEROS, SHS__LP_KB);
        ONE("self_attn.v_proj.bias", KVD, 1, SHS_INIT_ZEROS, SHS__LP_VB);
    }
    if (c->qk_norm != SHS_QK_NORM_NONE) {
        int head = c->qk_norm == SHS_QK_NORM_HEAD;
        ONE("self_attn.q_norm.weight", head ? HD : QD, 1, norm_init, SHS__LP_QN);
        ONE("self_attn.k_norm.weight", head ? HD : KVD, 1, norm_init, SHS__LP_KN);
    }
    ONE("self_attn.o_proj.weight", C, QD, SHS_INIT_NORMAL, SHS__LP_O);
    if (c->attention_bias) ONE("self_attn.o_proj.bias", C, 1, SHS_INIT_ZEROS, SHS__LP_OB);
    if (norms & SHS_LLAMA_NORM_ATTN_OUT) ONE("post_attention_layernorm.weight", C, 1, norm_init, SHS__LP_ATTN_OUT);
    if (norms & SHS_LLAMA_NORM_MLP_IN)
        ONE(norms & SHS_LLAMA_NORM_ATTN_OUT ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight", C,
            1, norm_init, SHS__LP_MLP_IN);
    if (c->names == SHS_LLAMA_NAMES_PHI3) {
        put_tensor(out, &n, "mlp.gate_up_proj.weight", 2 * I, C, SHS_INIT_NORMAL, 2, (int[]){SHS__LP_GATE, SHS__LP_UP},
                   (size_t[]){0, (size_t)I * C});
    } else {
        ONE("mlp.gate_proj.weight", I, C, SHS_INIT_NORMAL, SHS__LP_GATE);
        ONE("mlp.up_proj.weight", I, C, SHS_INIT_NORMAL, SHS__LP_UP);
    }
    ONE("mlp.down_proj.weight", C, I, SHS_INIT_NORMAL, SHS__LP_DOWN);
    if (norms & SHS_LLAMA_NORM_MLP_OUT) ONE("post_feedforward_layernorm.weight", C, 1, norm_init, SHS__LP_MLP_OUT);
    return n;
}
#undef ONE

const char *shs__llama_embed_name(const shs_llama_config_t *c) {
    return c->names == SHS_LLAMA_NAMES_INTERNLM2 ? "model.tok_embeddings.weight" : "model.embed_tokens.weight";
}

const char *shs__llama_head_name(const shs_llama_config_t *c) {
    return c->names == SHS_LLAMA_NAMES_INTERNLM2 ? "output.weight" : "lm_head.weight";
}

uint64_t shs_llama_num_params(const shs_llama_config_t *c) {
    shs__llama_tensor_t t[SHS__LLAMA_MAX_LAYER_TENSORS];
    int n = shs__llama_layer_tensors(c, t);
    uint64_t layer = 0, C = (uint64_t)c->hidden, V = (uint64_t)c->vocab;
    for (int i = 0; i < n; i++) layer += (uint64_t)t[i].rows * (uint64_t)t[i].cols;
    return (uint64_t)c->num_layers * layer + V * C + C + (c->tie_word_embeddings ? 0 : V * C);
}

shs_status_t shs_llama_layout_create(shs_layout_t *lo, const shs_llama_config_t *cfg) {
    SHS_CHECK(shs_llama_config_validate(cfg));
    shs_layout_init(lo);
    int L = cfg->num_layers, C = cfg->hidden, V = cfg->vocab;
    shs_init_kind_t norm_init = cfg->norm_plus_one ? SHS_INIT_ZEROS : SHS_INIT_ONES;
    shs__llama_tensor_t lt[SHS__LLAMA_MAX_LAYER_TENSORS];
    int nlt = shs__llama_layer_tensors(cfg, lt);
    const float std = 0.02f; /* HF initializer_range */
    shs_status_t st = SHS_OK;
#define ADD(name, r, c, kind) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, name, r, c, kind, (kind) == SHS_INIT_NORMAL ? std : 0), st, fail)
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "embed"), st, fail);
    ADD(shs__llama_embed_name(cfg), V, C, SHS_INIT_NORMAL);
    for (int l = 0; l < L; l++) {
        char n[64];
        snprintf(n, sizeof n, "layer%d", l);
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, n), st, fail);
        for (int i = 0; i < nlt; i++) {
            snprintf(n, sizeof n, "model.layers.%d.%.39s", l, lt[i].suffix);
            ADD(n, lt[i].rows, lt[i].cols, lt[i].init);
        }
    }
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "norm"), st, fail);
    ADD("model.norm.weight", C, 1, norm_init);
    if (!cfg->tie_word_embeddings) {
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, "lm_head"), st, fail);
        ADD(shs__llama_head_name(cfg), V, C, SHS_INIT_NORMAL);
    }
#undef ADD
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}

/* ---- RoPE --------------------------------------------------------------------- */

void shs_llama_inv_freq(const shs_llama_config_t *c, shs_rope_freq_t which, float *inv_freq) {
    int R = shs_llama_rotary_dim(c);
    const shs_rope_scaling_t *s = &c->rope_scaling;
    int local = which == SHS_ROPE_FREQ_LOCAL;
    double theta = local && c->rope_local_theta > 0 ? c->rope_local_theta : c->rope_theta;
    for (int i = 0; i < R / 2; i++) {
        double base = pow(theta, (double)(2 * i) / (double)R);
        float f = (float)(1.0 / base);
        if (!local && s->kind == SHS_ROPE_SCALING_LLAMA3) {
            /* HF _compute_llama3_parameters: wavelengths shorter than
             * old_ctx / high_freq_factor are kept, longer than old_ctx /
             * low_freq_factor divided by factor, and those between blended */
            double old_ctx = s->original_max_position_embeddings;
            double low_wavelen = old_ctx / s->low_freq_factor, high_wavelen = old_ctx / s->high_freq_factor;
            double inv = f, wavelen = 2.0 * M_PI / inv;
            double scaled = wavelen > low_wavelen ? inv / s->factor : inv;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                double smooth = (old_ctx / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
                scaled = (1.0 - smooth) * scaled / s->factor + smooth * scaled;
            }
            f = (float)scaled;
        } else if (!local && s->kind == SHS_ROPE_SCALING_LINEAR) {
            f = (float)((double)f / s->factor); /* HF: inv_freq /= factor */
        } else if (!local && s->kind == SHS_ROPE_SCALING_LONGROPE) {
            double ext = which == SHS_ROPE_FREQ_LONG ? s->long_factor[i] : s->short_factor[i];
            f = (float)(1.0 / (ext * base));
        }
        inv_freq[i] = f;
    }
}

float shs_llama_rope_mscale(const shs_llama_config_t *c) {
    const shs_rope_scaling_t *s = &c->rope_scaling;
    if (s->kind != SHS_ROPE_SCALING_LONGROPE) return 1.0f;
    if (s->attention_factor > 0) return (float)s->attention_factor;
    double orig = s->original_max_position_embeddings, f = (double)c->max_position / orig;
    return f <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(f) / log(orig));
}

float shs_llama_embed_scale(const shs_llama_config_t *c, shs_dtype_t dtype) {
    if (!c->embed_scale) return 1.0f;
    float f = (float)sqrt((double)c->hidden);
    if (dtype == SHS_BF16) return shs__bf16_to_f32(shs__f32_to_bf16(f));
    if (dtype == SHS_F16) return shs__f16_round(f);
    return f;
}

void shs_llama_describe_extras(const shs_llama_config_t *c, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
#define PUT(...) (len += (size_t)snprintf(buf + len, len < n ? n - len : 0, __VA_ARGS__))
    if (c->head_dim) PUT(" hd=%d", c->head_dim);
    if (c->rotary_dim) PUT(" rot=%d", c->rotary_dim);
    if (c->attention_bias) PUT(" abias");
    if (c->act) PUT(" act=%d", (int)c->act);
    if (c->norms) PUT(" norms=%u", c->norms);
    if (c->qk_norm) PUT(" qkn=%d", (int)c->qk_norm);
    if (c->norm_plus_one) PUT(" w+1");
    if (c->embed_scale) PUT(" escale");
    if (c->query_pre_attn_scalar > 0) PUT(" qpas=%.9g", c->query_pre_attn_scalar);
    if (c->attn_softcap > 0 || c->final_softcap > 0) PUT(" cap=%.9g/%.9g", (double)c->attn_softcap, (double)c->final_softcap);
    if (c->sliding_window) PUT(" win=%d/%d/%d", c->sliding_window, c->window_pattern, c->window_first_layer);
    if (c->rope_local_theta > 0) PUT(" ltheta=%.9g", c->rope_local_theta);
    if (c->names) PUT(" names=%d", (int)c->names);
    const shs_rope_scaling_t *s = &c->rope_scaling;
    if (s->kind == SHS_ROPE_SCALING_LONGROPE) {
        double sum_s = 0, sum_l = 0;
        for (int i = 0; i < s->num_factors; i++) sum_s += s->short_factor[i] * (i + 1.0), sum_l += s->long_factor[i] * (i + 1.0);
        PUT(" longrope=%.9g/%.9g/%.9g", s->attention_factor, sum_s, sum_l);
    }
#undef PUT
}
