/* hf_config_llama.c - the Llama family's config.json keys (hf_config.h):
 * one table of families with transformers' defaults and the keys each
 * carries, then the shape, activation, biases, norms, RoPE scaling and
 * sliding windows read per family, and the keys' agreement checked.
 * What it is not: the value readers or gpt2 (hf_config.c).
 * Sources (key meanings and defaults): transformers' LlamaConfig,
 * MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig, Gemma2Config,
 * Gemma3TextConfig, Phi3Config, Olmo2Config and the modeling files beside
 * them (which layers take a window: modeling_qwen2.py's max_window_layers,
 * Gemma2's even layers, Gemma3's layer_types / sliding_window_pattern);
 * InternLM2's configuration_internlm2.py and modeling_internlm2.py. */
#include "model/hf_config_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef SHS_HAVE_JANSSON

#define BAD SHS__HF_BAD

typedef enum { F_LLAMA, F_MISTRAL, F_QWEN2, F_QWEN3, F_GEMMA, F_GEMMA2, F_GEMMA3, F_PHI3, F_OLMO2, F_INTERNLM2 } family_id_t;

typedef struct {
    const char *model_type;
    family_id_t id;
    double eps, theta; /* rms_norm_eps and rope_theta when absent */
    int tied;          /* tie_word_embeddings when absent */
    int head_dim;      /* head_dim when absent; 0: hidden_size / num_attention_heads */
    int window;        /* sliding_window when absent (qwen: used with use_sliding_window only) */
    const char *const *keys; /* its keys beyond the common ones */
} family_t;

static const char *const k_llama[] = {"attention_bias", "mlp_bias", "pretraining_tp", "is_llama_config",
                                      "rope_interleaved", NULL};
static const char *const k_mistral[] = {"sliding_window", NULL};
static const char *const k_qwen2[] = {"use_sliding_window", "sliding_window", "max_window_layers", "use_mrope", NULL};
static const char *const k_qwen3[] = {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
                                      NULL};
static const char *const k_gemma[] = {"attention_bias", "hidden_activation", NULL};
static const char *const k_gemma2[] = {"attention_bias", "hidden_activation", "attn_logit_softcapping",
                                       "final_logit_softcapping", "query_pre_attn_scalar", "sliding_window",
                                       "sliding_window_size", NULL};
static const char *const k_gemma3[] = {"attention_bias", "hidden_activation", "attn_logit_softcapping",
                                       "final_logit_softcapping", "query_pre_attn_scalar", "sliding_window",
                                       "sliding_window_pattern", "rope_local_base_freq", "use_bidirectional_attention",
                                       NULL};
static const char *const k_phi3[] = {"original_max_position_embeddings", "partial_rotary_factor", "sliding_window",
                                     "resid_pdrop", "embd_pdrop", "attention_bias", "mlp_bias", "lm_head_bias",
                                     "full_attn_mod", "interpolate_factor", NULL};
static const char *const k_olmo2[] = {"attention_bias", NULL};
static const char *const k_internlm2[] = {"bias", "attn_implementation", "pretraining_tp", NULL};

/* transformers' defaults (the Config classes' __init__ arguments) */
static const family_t families[] = {
    {"llama", F_LLAMA, 1e-6, 10000.0, 0, 0, 0, k_llama},
    {"mistral", F_MISTRAL, 1e-6, 10000.0, 0, 0, 4096, k_mistral},
    {"qwen2", F_QWEN2, 1e-6, 10000.0, 0, 0, 4096, k_qwen2},
    {"qwen3", F_QWEN3, 1e-6, 10000.0, 0, 128, 4096, k_qwen3},
    {"gemma", F_GEMMA, 1e-6, 10000.0, 1, 256, 0, k_gemma},
    {"gemma2", F_GEMMA2, 1e-6, 10000.0, 1, 256, 4096, k_gemma2},
    {"gemma3_text", F_GEMMA3, 1e-6, 1000000.0, 1, 256, 4096, k_gemma3},
    {"phi3", F_PHI3, 1e-5, 10000.0, 0, 0, 0, k_phi3},
    {"olmo2", F_OLMO2, 1e-5, 10000.0, 0, 0, 0, k_olmo2},
    {"internlm2", F_INTERNLM2, 1e-6, 10000.0, 0, 0, 0, k_internlm2},
};

static const family_t *family_of(const char *mt) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(families[i].model_type, mt)) return &families[i];
    return NULL;
}

int shs__hf_is_llama_family(const char *model_type) { return family_of(model_type) != NULL; }

static int is_gemma(const family_t *f) { return f->id == F_GEMMA || f->id == F_GEMMA2 || f->id == F_GEMMA3; }

/* ---- values ----------------------------------------------------------------------- */

/* A number that must be `want` when present (null allowed when null_ok). */
static shs_status_t want_num(const char *name, json_t *root, const char *key, double want, const char *why) {
    double x = want;
    SHS_CHECK(shs__hf_num(name, root, key, 0, &x));
    if (x != want) return BAD(key, "%g is not modelled (%g only: %s)", name, key, x, want, why);
    return SHS_OK;
}

/* A probability that is a training setting: listed in not_applied when > 0. */
static shs_status_t dropout_key(const char *name, json_t *root, const char *key, shs_hf_config_t *out) {
    double p = 0;
    SHS_CHECK(shs__hf_num(name, root, key, 0, &p));
    if (p < 0 || p >= 1) return BAD(key, "want a probability in [0, 1)", name, key);
    if (p != 0) shs__hf_append(out->not_applied, sizeof out->not_applied, ", ", "%s %g", key, p);
    return SHS_OK;
}

/* A positive float that fits an f32 (soft caps), or null / absent (keeps *out). */
static shs_status_t positive_f32(const char *name, json_t *root, const char *key, float *out) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    if (json_is_null(v)) {
        *out = 0;
        return SHS_OK;
    }
    double x = 0;
    SHS_CHECK(shs__hf_num(name, root, key, 0, &x));
    if (!(x > 0) || !isfinite((float)x)) return BAD(key, "%g is out of range: a positive f32 wanted", name, key, x);
    *out = (float)x;
    return SHS_OK;
}

/* ---- rope_scaling ------------------------------------------------------------------- */

/* rope_scaling's entry `key`: a positive number */
static shs_status_t scaling_num(const char *name, json_t *v, const char *key, int required, double *out) {
    json_t *f = json_object_get(v, key);
    if (!f || json_is_null(f)) {
        if (required) return shs_set_error(SHS_PARSE, "%s: key \"rope_scaling\": missing \"%s\"", name, key);
        return SHS_OK;
    }
    if (!json_is_number(f) || !(json_number_value(f) > 0) || !isfinite(json_number_value(f)))
        return shs_set_error(SHS_PARSE, "%s: key \"rope_scaling\": \"%s\" wants a positive number", name, key);
    *out = json_number_value(f);
    return SHS_OK;
}

/* longrope's short_factor / long_factor lists into f (HF: torch.tensor(list,
 * dtype=float32)); their length is checked against R / 2 by validation. */
static shs_status_t scaling_list(const char *name, json_t *v, const char *key, float *f, int *n) {
    json_t *a = json_object_get(v, key);
    if (!a) return shs_set_error(SHS_PARSE, "%s: key \"rope_scaling\": missing \"%s\"", name, key);
    if (!json_is_array(a) || json_array_size(a) > SHS_LONGROPE_MAX_FACTORS)
        return shs_set_error(SHS_PARSE, "%s: key \"rope_scaling\": \"%s\" wants a list of at most %d numbers", name,
                             key, SHS_LONGROPE_MAX_FACTORS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || !(json_number_value(x) > 0) || !isfinite((float)json_number_value(x)))
            return shs_set_error(SHS_PARSE, "%s: key \"rope_scaling\": %s[%zu] wants a positive number", name, key, i);
        f[i] = (float)json_number_value(x);
    }
    *n = (int)json_array_size(a);
    return SHS_OK;
}

/* rope_scaling: null, {"rope_type": "default"}, llama3, linear, dynamic
 * (identical to none for the contexts shardsim runs) or phi3's longrope
 * (its older name "su"); the original pre-training context of longrope is
 * Phi-3's top-level original_max_position_embeddings. */
static shs_status_t read_rope_scaling(const char *name, json_t *root, const family_t *f, shs_hf_config_t *out) {
    static const char key[] = "rope_scaling";
    shs_rope_scaling_t *rs = &out->llama.rope_scaling;
    json_t *v = json_object_get(root, key);
    *rs = (shs_rope_scaling_t){0};
    if (!v || json_is_null(v)) return SHS_OK;
    if (!json_is_object(v)) return BAD(key, "want null or an object", name, key);
    json_t *t = json_object_get(v, "rope_type");
    if (!t) t = json_object_get(v, "type"); /* the older spelling */
    const char *type = json_string_value(t);
    if (!type) return BAD(key, "no rope_type", name, key);
    const char *const *entries;
    static const char *const e_default[] = {"rope_type", "type", NULL};
    static const char *const e_factor[] = {"rope_type", "type", "factor", NULL};
    static const char *const e_llama3[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings", NULL};
    static const char *const e_longrope[] = {"rope_type", "type", "short_factor", "long_factor", "attention_factor",
                                             "original_max_position_embeddings", NULL};
    if (!strcmp(type, "default")) {
        entries = e_default;
    } else if (!strcmp(type, "llama3")) {
        entries = e_llama3;
        double x[4];
        static const char *const num_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                               "original_max_position_embeddings"};
        for (int k = 0; k < 4; k++) SHS_CHECK(scaling_num(name, v, num_keys[k], 1, &x[k]));
        if (x[3] != floor(x[3]) || x[3] > 0x7fffffff)
            return BAD(key, "original_max_position_embeddings wants an integer", name, key);
        if (!(x[2] > x[1])) return BAD(key, "high_freq_factor must exceed low_freq_factor", name, key);
        *rs = (shs_rope_scaling_t){.kind = SHS_ROPE_SCALING_LLAMA3, .factor = x[0], .low_freq_factor = x[1],
                                   .high_freq_factor = x[2], .original_max_position_embeddings = (int)x[3]};
    } else if (!strcmp(type, "linear") || !strcmp(type, "dynamic")) {
        entries = e_factor;
        rs->kind = !strcmp(type, "linear") ? SHS_ROPE_SCALING_LINEAR : SHS_ROPE_SCALING_DYNAMIC;
        SHS_CHECK(scaling_num(name, v, "factor", 1, &rs->factor));
        if (rs->kind == SHS_ROPE_SCALING_DYNAMIC)
            shs__hf_append(out->notes, sizeof out->notes, "; ", "rope_scaling dynamic: NTK scaling changes theta only "
                           "past max_position_embeddings, which no run reaches");
    } else if ((!strcmp(type, "longrope") || !strcmp(type, "su")) && f->id == F_PHI3) {
        entries = e_longrope;
        rs->kind = SHS_ROPE_SCALING_LONGROPE;
        int ns = 0, nl = 0;
        SHS_CHECK(scaling_list(name, v, "short_factor", rs->short_factor, &ns));
        SHS_CHECK(scaling_list(name, v, "long_factor", rs->long_factor, &nl));
        if (ns != nl) return BAD(key, "short_factor has %d entries, long_factor %d", name, key, ns, nl);
        rs->num_factors = ns;
        SHS_CHECK(scaling_num(name, v, "attention_factor", 0, &rs->attention_factor));
        double orig = 0;
        SHS_CHECK(scaling_num(name, v, "original_max_position_embeddings", 0, &orig));
        rs->original_max_position_embeddings = (int)orig;
    } else {
        return BAD(key, "rope_type '%s' is not modelled (llama3, linear, dynamic%s)", name, key, type,
                   f->id == F_PHI3 ? ", longrope" : "");
    }
    const char *k2;
    json_t *e;
    json_object_foreach(v, k2, e) {
        int known = 0;
        for (int k = 0; entries[k]; k++) known |= !strcmp(k2, entries[k]);
        if (!known) return shs_set_error(SHS_PARSE, "%s: key \"%s\": unknown entry \"%s\"", name, key, k2);
    }
    return SHS_OK;
}

/* ---- sliding windows ---------------------------------------------------------------- */

/* layer_types (newer transformers): one entry per layer, "full_attention" or
 * "sliding_attention"; authoritative where given. The windowed set must be
 * one llama.h can say: every layer from some layer on, or every layer but
 * each P-th. *any: some layer is windowed. */
static shs_status_t read_layer_types(const char *name, json_t *root, shs_llama_config_t *c, int *given, int *any) {
    static const char key[] = "layer_types";
    json_t *v = json_object_get(root, key);
    *given = *any = 0;
    if (!v || json_is_null(v)) return SHS_OK;
    if (!json_is_array(v)) return BAD(key, "want a list of strings, one per layer", name, key);
    int L = c->num_layers;
    if (json_array_size(v) != (size_t)L)
        return BAD(key, "has %zu entries, num_hidden_layers is %d", name, key, json_array_size(v), L);
    unsigned char sliding[SHS_GPT_MAX_LAYERS];
    int first_sliding = -1, first_full = -1;
    for (int i = 0; i < L; i++) {
        const char *t = json_string_value(json_array_get(v, i));
        if (!t) return BAD(key, "entry %d (layer %d) is not a string", name, key, i, i);
        if (strcmp(t, "full_attention") && strcmp(t, "sliding_attention"))
            return BAD(key, "layer %d is '%s': full_attention and sliding_attention are modelled", name, key, i, t);
        sliding[i] = !strcmp(t, "sliding_attention");
        if (sliding[i] && first_sliding < 0) first_sliding = i;
        if (!sliding[i] && first_full < 0) first_full = i;
    }
    *given = 1;
    *any = first_sliding >= 0;
    c->window_pattern = c->window_first_layer = 0;
    if (!*any) return SHS_OK;
    int from = 1; /* windowed from first_sliding on */
    for (int i = 0; i < L; i++) from &= sliding[i] == (i >= first_sliding);
    if (from) {
        c->window_first_layer = first_sliding;
        return SHS_OK;
    }
    int P = first_full + 1; /* every layer but each P-th */
    for (int i = 0; i < L; i++)
        if (P < 2 || sliding[i] != ((i + 1) % P != 0))
            return BAD(key, "layer %d breaks the patterns shardsim models (windows on every layer from one on, or "
                       "on all but every P-th)", name, key, i);
    c->window_pattern = P;
    return SHS_OK;
}

/* The window and which layers take it (llama.h's sliding_window,
 * window_pattern, window_first_layer), by family rule or layer_types. */
static shs_status_t read_windows(const char *name, json_t *root, const family_t *f, shs_hf_config_t *out) {
    shs_llama_config_t *c = &out->llama;
    int W = f->window;
    json_t *sw = json_object_get(root, "sliding_window");
    if (sw && json_is_null(sw)) W = 0;
    else SHS_CHECK(shs__hf_int(name, root, "sliding_window", 0, &W));
    int windowed = W > 0; /* by the family's rule, before layer_types */
    const char *rule = "sliding_window";
    switch (f->id) {
    case F_QWEN2:
    case F_QWEN3: {
        int use = 0, mwl = 28; /* Qwen2Config / Qwen3Config defaults */
        SHS_CHECK(shs__hf_bool(name, root, "use_sliding_window", &use));
        SHS_CHECK(shs__hf_int(name, root, "max_window_layers", 0, &mwl));
        if (use && !W) return BAD("use_sliding_window", "is true but sliding_window is null", name, "use_sliding_window");
        windowed = use;
        rule = "use_sliding_window";
        c->window_first_layer = use ? (mwl < c->num_layers ? mwl : c->num_layers) : 0;
        break;
    }
    case F_GEMMA2: {
        int older = W;
        SHS_CHECK(shs__hf_int(name, root, "sliding_window_size", 0, &older));
        if (older != W)
            return BAD("sliding_window_size", "%d disagrees with sliding_window %d (two spellings of one window)",
                       name, "sliding_window_size", older, W);
        c->window_pattern = 2; /* Gemma2Attention: sliding on layers with layer_idx % 2 == 0 */
        break;
    }
    case F_GEMMA3: {
        int P = 6; /* Gemma3TextConfig: kwargs.get("sliding_window_pattern", 6) */
        SHS_CHECK(shs__hf_int(name, root, "sliding_window_pattern", 0, &P));
        if (P < 2) return BAD("sliding_window_pattern", "%d: at least 2 wanted", name, "sliding_window_pattern", P);
        c->window_pattern = P;
        break;
    }
    default: break; /* mistral, phi3: every layer */
    }
    int given, any;
    SHS_CHECK(read_layer_types(name, root, c, &given, &any));
    if (given) {
        if (any && !windowed)
            return BAD("layer_types", "has sliding_attention layers but %s gives no window", name, "layer_types",
                       W ? rule : "sliding_window");
        windowed = any;
    }
    c->sliding_window = windowed ? W : 0;
    if (!windowed) c->window_pattern = c->window_first_layer = 0;
    if (windowed && W >= c->max_position)
        shs__hf_append(out->notes, sizeof out->notes, "; ", "sliding_window %d: no position can leave a window that "
                       "reaches max_position_embeddings %d", W, c->max_position);
    return SHS_OK;
}

/* ---- the family's own keys ------------------------------------------------------------ */

static const char *const silu[] = {"silu", NULL}, *const gelu_tanh[] = {"gelu_pytorch_tanh", NULL};
static const char *const gemma_acts[] = {"gelu", "gelu_pytorch_tanh", NULL};

static shs_status_t read_activation(const char *name, json_t *root, const family_t *f, shs_llama_config_t *c) {
    if (!is_gemma(f))
        return shs__hf_want_str(name, root, "hidden_act", silu, "the gated MLP's activation is silu (SwiGLU)");
    /* GemmaMLP: hidden_act is ignored for hidden_activation, default gelu_pytorch_tanh
     * (transformers PR 29402); Gemma2/3 read hidden_activation only */
    c->act = SHS_LLAMA_ACT_GELU_TANH;
    SHS_CHECK(shs__hf_want_str(name, root, "hidden_act", gemma_acts, "Gemma's GeGLU uses gelu_pytorch_tanh"));
    json_t *ha = json_object_get(root, "hidden_activation");
    if (ha && json_is_null(ha)) return SHS_OK;
    return shs__hf_want_str(name, root, "hidden_activation", gelu_tanh, "GeGLU with GELU's tanh form");
}

static shs_status_t read_family_keys(const char *name, json_t *root, const family_t *f, shs_hf_config_t *out) {
    shs_llama_config_t *c = &out->llama;
    int ab = 0;
    SHS_CHECK(shs__hf_bool(name, root, f->id == F_INTERNLM2 ? "bias" : "attention_bias", &ab));
    if (f->id == F_PHI3 && ab) return BAD("attention_bias", "true is not modelled (Phi-3's qkv_proj has no bias)", name,
                                          "attention_bias");
    c->attention_bias = ab;
    SHS_CHECK(shs__hf_want_bool(name, root, "mlp_bias", 0, "the gated MLP has no biases"));
    int tp = 1;
    SHS_CHECK(shs__hf_int(name, root, "pretraining_tp", 0, &tp));
    if (tp != 1)
        shs__hf_append(out->notes, sizeof out->notes, "; ", "pretraining_tp %d: HF slices the projections into %d "
                       "matmuls whose partial sums add to the same function; shardsim sums each output in one chain",
                       tp, tp);
    int flag = 0;
    SHS_CHECK(shs__hf_bool(name, root, "is_llama_config", &flag)); /* nanotron's bookkeeping */
    SHS_CHECK(shs__hf_want_bool(name, root, "rope_interleaved", 0, "transformers rotates halves (rotate_half)"));
    SHS_CHECK(shs__hf_want_bool(name, root, "use_mrope", 0, "multimodal rotary embeddings"));
    SHS_CHECK(shs__hf_want_bool(name, root, "use_bidirectional_attention", 0, "the decoder is causal"));
    if (f->id == F_QWEN2) c->qkv_bias = 1; /* Qwen2Attention: q, k, v with bias, o without */
    if (f->id == F_QWEN3 || f->id == F_GEMMA3) c->qk_norm = SHS_QK_NORM_HEAD;
    if (is_gemma(f)) c->norm_plus_one = c->embed_scale = 1; /* (1 + w) norms, embeddings times sqrt(C) */
    if (f->id == F_GEMMA2 || f->id == F_GEMMA3) {
        c->norms = SHS_LLAMA_NORM_ATTN_IN | SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_IN | SHS_LLAMA_NORM_MLP_OUT;
        c->query_pre_attn_scalar = 256;
        if (f->id == F_GEMMA2) c->attn_softcap = 50.0f, c->final_softcap = 30.0f; /* Gemma2Config defaults */
        SHS_CHECK(shs__hf_num(name, root, "query_pre_attn_scalar", 0, &c->query_pre_attn_scalar));
        if (!(c->query_pre_attn_scalar > 0))
            return BAD("query_pre_attn_scalar", "want a number > 0", name, "query_pre_attn_scalar");
        SHS_CHECK(positive_f32(name, root, "attn_logit_softcapping", &c->attn_softcap));
        SHS_CHECK(positive_f32(name, root, "final_logit_softcapping", &c->final_softcap));
    }
    if (f->id == F_GEMMA3) {
        c->rope_local_theta = 10000.0; /* rope_local_base_freq's default */
        SHS_CHECK(shs__hf_num(name, root, "rope_local_base_freq", 0, &c->rope_local_theta));
        if (!(c->rope_local_theta > 0)) return BAD("rope_local_base_freq", "want a number > 0", name, "rope_local_base_freq");
    }
    switch (f->id) {
    case F_PHI3: {
        c->names = SHS_LLAMA_NAMES_PHI3;
        SHS_CHECK(dropout_key(name, root, "resid_pdrop", out));
        SHS_CHECK(dropout_key(name, root, "embd_pdrop", out));
        SHS_CHECK(shs__hf_want_bool(name, root, "lm_head_bias", 0, "the LM head has no bias"));
        SHS_CHECK(want_num(name, root, "full_attn_mod", 1, "read by Microsoft's remote code only"));
        SHS_CHECK(want_num(name, root, "interpolate_factor", 1, "read by Microsoft's remote code only"));
        double prf = 1.0;
        SHS_CHECK(shs__hf_num(name, root, "partial_rotary_factor", 0, &prf));
        if (!(prf > 0 && prf <= 1)) return BAD("partial_rotary_factor", "want a number in (0, 1]", name,
                                               "partial_rotary_factor");
        int HD = c->head_dim ? c->head_dim : c->hidden / c->num_heads, R = (int)(HD * prf); /* HF: int(head_dim * f) */
        if (prf != 1.0) c->rotary_dim = R;
        if (R < 2 || R % 2)
            return BAD("partial_rotary_factor", "%g of head dim %d is %d rotary channels: an even number >= 2 wanted",
                       name, "partial_rotary_factor", prf, HD, R);
        break;
    }
    case F_OLMO2:
        c->norms = SHS_LLAMA_NORM_ATTN_OUT | SHS_LLAMA_NORM_MLP_OUT;
        c->qk_norm = SHS_QK_NORM_ALL;
        break;
    case F_INTERNLM2: c->names = SHS_LLAMA_NAMES_INTERNLM2; break;
    default: break;
    }
    return SHS_OK;
}

/* ---- the shape ------------------------------------------------------------------------ */

static shs_status_t read_shape(const char *name, json_t *root, const family_t *f, shs_llama_config_t *c) {
    SHS_CHECK(shs__hf_int(name, root, "hidden_size", 1, &c->hidden));
    SHS_CHECK(shs__hf_int(name, root, "num_hidden_layers", 1, &c->num_layers));
    SHS_CHECK(shs__hf_int(name, root, "num_attention_heads", 1, &c->num_heads));
    SHS_CHECK(shs__hf_int(name, root, "intermediate_size", 1, &c->intermediate));
    SHS_CHECK(shs__hf_int(name, root, "vocab_size", 1, &c->vocab));
    SHS_CHECK(shs__hf_int(name, root, "max_position_embeddings", 1, &c->max_position));
    if (c->num_layers > SHS_GPT_MAX_LAYERS)
        return BAD("num_hidden_layers", "%d is too large: at most %d", name, "num_hidden_layers", c->num_layers,
                   SHS_GPT_MAX_LAYERS);
    c->num_kv_heads = c->num_heads; /* HF: num_key_value_heads None means num_attention_heads (MHA) */
    SHS_CHECK(shs__hf_int(name, root, "num_key_value_heads", 0, &c->num_kv_heads));
    double eps = f->eps, theta = f->theta;
    SHS_CHECK(shs__hf_num(name, root, "rms_norm_eps", 0, &eps));
    SHS_CHECK(shs__hf_num(name, root, "rope_theta", 0, &theta));
    if (!(eps > 0)) return BAD("rms_norm_eps", "want a number > 0", name, "rms_norm_eps");
    if (!((float)eps > 0) || !isfinite((float)eps)) /* the RMSNorm's epsilon is an f32 */
        return BAD("rms_norm_eps", "%g is out of range: an f32 > 0 wanted (about 1.4e-45 to 3.4e+38)", name,
                   "rms_norm_eps", eps);
    if (!(theta > 0)) return BAD("rope_theta", "want a number > 0", name, "rope_theta");
    c->rms_norm_eps = (float)eps;
    c->rope_theta = theta;
    c->tie_word_embeddings = f->tied;
    SHS_CHECK(shs__hf_bool(name, root, "tie_word_embeddings", &c->tie_word_embeddings));
    /* head_dim: HF's getattr(config, "head_dim", hidden_size // num_attention_heads) */
    int hd = f->head_dim;
    json_t *h = json_object_get(root, "head_dim");
    if (h && json_is_null(h)) hd = 0;
    else SHS_CHECK(shs__hf_int(name, root, "head_dim", 0, &hd));
    if (!hd && c->hidden % c->num_heads)
        return BAD("num_attention_heads", "%d does not divide hidden_size %d, and no head_dim gives the head size",
                   name, "num_attention_heads", c->num_heads, c->hidden);
    if (f->id == F_INTERNLM2 && hd && hd * c->num_heads != c->hidden) /* InternLM2Attention raises on it */
        return BAD("head_dim", "%d x num_attention_heads %d is not hidden_size %d (InternLM2's wqkv and wo need it)",
                   name, "head_dim", hd, c->num_heads, c->hidden);
    c->head_dim = hd; /* 0 when it is the default C / NH, as a plain Llama's */
    if (hd && c->hidden % c->num_heads == 0 && hd == c->hidden / c->num_heads) c->head_dim = 0;
    if (c->num_heads % c->num_kv_heads)
        return BAD("num_key_value_heads", "%d does not divide num_attention_heads %d", name, "num_key_value_heads",
                   c->num_kv_heads, c->num_heads);
    double drop = 0;
    SHS_CHECK(shs__hf_num(name, root, "attention_dropout", 0, &drop));
    if (drop != 0) return BAD("attention_dropout", "%g is not modelled (0 only)", name, "attention_dropout", drop);
    return SHS_OK;
}

shs_status_t shs__hf_parse_llama(const char *name, json_t *root, shs_hf_config_t *out) {
    const family_t *f = family_of(out->model_type);
    static const char *const common[] = {
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "tie_word_embeddings",
        "hidden_act", "attention_dropout", "head_dim", "layer_types", NULL,
    };
    shs_llama_config_t *c = &out->llama;
    *c = (shs_llama_config_t){0};
    SHS_CHECK(read_shape(name, root, f, c));
    SHS_CHECK(read_activation(name, root, f, c));
    SHS_CHECK(read_family_keys(name, root, f, out));
    SHS_CHECK(read_rope_scaling(name, root, f, out));
    if (f->id == F_PHI3) { /* longrope's pre-training context: Phi3Config's top-level key */
        int orig = c->max_position;
        SHS_CHECK(shs__hf_int(name, root, "original_max_position_embeddings", 0, &orig));
        if (c->rope_scaling.kind == SHS_ROPE_SCALING_LONGROPE && !c->rope_scaling.original_max_position_embeddings)
            c->rope_scaling.original_max_position_embeddings = orig;
    }
    SHS_CHECK(read_windows(name, root, f, out));
    SHS_CHECK(shs__hf_known_keys(name, root, out->model_type, (const char *const *const[]){common, f->keys, NULL}));
    if (shs_llama_config_validate(c) != SHS_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", shs_last_error());
        return shs_set_error(SHS_INVALID_ARG, "%s: %s", name, why);
    }
    out->arch = SHS_ARCH_LLAMA;
    out->gpt = (shs_gpt_config_t){0};
    out->gpt.context = shs_hf_config_context(out);
    return SHS_OK;
}

#endif
