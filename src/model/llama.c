/* llama.c - Llama-family decoder (llama.h): config checks, parameter count,
 * RoPE frequencies, layout with Hugging Face tensor names.
 * What it is not: the forward and backward passes (llama_model.c),
 * sharding (strategy.c), optimization (optim.c), a config file reader
 * (hf_config.c) or the GPT (gpt.c).
 * Legend: C hidden, NH heads, NKV key/value heads, HD head dim,
 * KVD = NKV*HD, I intermediate, L layers, V vocabulary.
 */
#include "shardsim/llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ----------------------------------------------------------------- */

shs_status_t shs_llama_config_validate(const shs_llama_config_t *c) {
    if (c->num_layers < 1 || c->num_layers > SHS_GPT_MAX_LAYERS)
        return shs_set_error(SHS_INVALID_ARG, "num_hidden_layers must be in 1..%d (got %d)", SHS_GPT_MAX_LAYERS,
                             c->num_layers);
    if (c->hidden < 1 || c->hidden > 65536)
        return shs_set_error(SHS_INVALID_ARG, "hidden_size must be in 1..65536 (got %d)", c->hidden);
    if (c->num_heads < 1 || c->hidden % c->num_heads != 0 || (c->hidden / c->num_heads) % 2 != 0)
        return shs_set_error(SHS_INVALID_ARG,
                             "num_attention_heads (%d) must be >= 1 and divide hidden_size (%d) into an even head "
                             "dimension (RoPE rotates pairs)", c->num_heads, c->hidden);
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
    if (c->tie_word_embeddings != 0 && c->tie_word_embeddings != 1)
        return shs_set_error(SHS_INVALID_ARG, "tie_word_embeddings must be 0 or 1 (got %d)", c->tie_word_embeddings);
    if (c->qkv_bias != 0 && c->qkv_bias != 1)
        return shs_set_error(SHS_INVALID_ARG, "qkv_bias must be 0 or 1 (got %d)", c->qkv_bias);
    const shs_rope_scaling_t *s = &c->rope_scaling;
    if (s->kind == SHS_ROPE_SCALING_LLAMA3) {
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
    } else if (s->kind != SHS_ROPE_SCALING_NONE) {
        return shs_set_error(SHS_INVALID_ARG, "rope_scaling kind %d is not known (none or llama3)", (int)s->kind);
    }
    return SHS_OK;
}

uint64_t shs_llama_num_params(const shs_llama_config_t *c) {
    uint64_t C = (uint64_t)c->hidden, NH = (uint64_t)c->num_heads, NKV = (uint64_t)c->num_kv_heads;
    uint64_t HD = NH ? C / NH : 0, I = (uint64_t)c->intermediate, V = (uint64_t)c->vocab;
    uint64_t layer = 2 * C + 2 * C * NH * HD + 2 * C * NKV * HD + 3 * C * I;
    if (c->qkv_bias) layer += NH * HD + 2 * NKV * HD;
    return (uint64_t)c->num_layers * layer + V * C + C + (c->tie_word_embeddings ? 0 : V * C);
}

void shs_llama_inv_freq(const shs_llama_config_t *c, float *inv_freq) {
    int HD = c->hidden / c->num_heads;
    const shs_rope_scaling_t *s = &c->rope_scaling;
    for (int i = 0; i < HD / 2; i++) {
        float f = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / (double)HD));
        if (s->kind == SHS_ROPE_SCALING_LLAMA3) {
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
        }
        inv_freq[i] = f;
    }
}

shs_status_t shs_llama_layout_create(shs_layout_t *lo, const shs_llama_config_t *cfg) {
    SHS_CHECK(shs_llama_config_validate(cfg));
    shs_layout_init(lo);
    int L = cfg->num_layers, C = cfg->hidden, NH = cfg->num_heads, HD = C / NH, KVD = cfg->num_kv_heads * HD;
    int I = cfg->intermediate, V = cfg->vocab;
    const float std = 0.02f; /* HF initializer_range */
    shs_status_t st = SHS_OK;
#define ADD(name, r, c, kind) SHS_CHECK_GOTO(shs_layout_add_tensor(lo, name, r, c, kind, (kind) == SHS_INIT_NORMAL ? std : 0), st, fail)
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "embed"), st, fail);
    ADD("model.embed_tokens.weight", V, C, SHS_INIT_NORMAL);
    for (int l = 0; l < L; l++) {
        char n[64];
        snprintf(n, sizeof n, "layer%d", l);
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, n), st, fail);
#define T_(suffix, r, c, kind) snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix); ADD(n, r, c, kind)
        /* this order is the P_ enum's of llama_model.c */
        T_("input_layernorm.weight", C, 1, SHS_INIT_ONES);
        T_("self_attn.q_proj.weight", NH * HD, C, SHS_INIT_NORMAL);
        T_("self_attn.k_proj.weight", KVD, C, SHS_INIT_NORMAL);
        T_("self_attn.v_proj.weight", KVD, C, SHS_INIT_NORMAL);
        if (cfg->qkv_bias) {
            T_("self_attn.q_proj.bias", NH * HD, 1, SHS_INIT_ZEROS);
            T_("self_attn.k_proj.bias", KVD, 1, SHS_INIT_ZEROS);
            T_("self_attn.v_proj.bias", KVD, 1, SHS_INIT_ZEROS);
        }
        T_("self_attn.o_proj.weight", C, NH * HD, SHS_INIT_NORMAL);
        T_("post_attention_layernorm.weight", C, 1, SHS_INIT_ONES);
        T_("mlp.gate_proj.weight", I, C, SHS_INIT_NORMAL);
        T_("mlp.up_proj.weight", I, C, SHS_INIT_NORMAL);
        T_("mlp.down_proj.weight", C, I, SHS_INIT_NORMAL);
#undef T_
    }
    SHS_CHECK_GOTO(shs_layout_add_unit(lo, "norm"), st, fail);
    ADD("model.norm.weight", C, 1, SHS_INIT_ONES);
    if (!cfg->tie_word_embeddings) {
        SHS_CHECK_GOTO(shs_layout_add_unit(lo, "lm_head"), st, fail);
        ADD("lm_head.weight", V, C, SHS_INIT_NORMAL);
    }
#undef ADD
    return SHS_OK;
fail:
    shs_layout_free(lo);
    return st;
}
