/* hf_config.c - the Hugging Face config.json reader (hf_config.h).
 * Key meanings and defaults are those of transformers' LlamaConfig,
 * MistralConfig, Qwen2Config and GPT2Config. */
#include "shardsim/hf_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/features.h"
#include "core/json_object.h"
#include "trace/trace_json.h"
#include "trace/trace_util.h"

/* the default context and the key it comes from */
static int context_of(const shs_hf_config_t *c, const char **key) {
    if (c->arch == SHS_ARCH_GPT) {
        *key = "n_positions";
        return c->gpt.context;
    }
    int T = c->llama.max_position;
    *key = "max_position_embeddings";
    const shs_rope_scaling_t *rs = &c->llama.rope_scaling;
    if (rs->kind == SHS_ROPE_SCALING_LLAMA3 && rs->original_max_position_embeddings < T) {
        T = rs->original_max_position_embeddings; /* pre-training's context, before the long-context stage */
        *key = "rope_scaling.original_max_position_embeddings";
    }
    if (c->sliding_window > 0 && c->sliding_window < T) {
        T = c->sliding_window;
        *key = "sliding_window";
    }
    return T;
}

int shs_hf_config_context(const shs_hf_config_t *c) {
    const char *key;
    return context_of(c, &key);
}

const char *shs_hf_config_context_key(const shs_hf_config_t *c) {
    const char *key;
    context_of(c, &key);
    return key;
}

#ifdef SHS_HAVE_JANSSON

#define BAD(key, ...) shs_set_error(SHS_PARSE, "%s: key \"%s\": " __VA_ARGS__)

/* Keys that change nothing shardsim computes (hf_config.h): token ids,
 * bookkeeping, the inference cache (use_cache, and output_past, its older
 * name), output switches, the initializer's spread (shardsim initializes as
 * llama.h / gpt.h say), activation checkpointing (same results), the
 * sequence-classification summary head of gpt2. Besides these, every key
 * starting with '_' is transformers' private bookkeeping (_name_or_path,
 * _attn_implementation, _attn_implementation_autoset, _commit_hash,
 * _num_labels, ...). */
static const char *const harmless[] = {
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "transformers_version", "use_cache", "output_past", "initializer_range", "model_type", "torch_dtype", "dtype",
    "tokenizer_class", "return_dict", "output_hidden_states", "output_attentions", "gradient_checkpointing",
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "task_specific_params", "id2label", "label2id",
};

/* a positive integer that fits an int */
static shs_status_t get_int(const char *name, json_t *root, const char *key, int required, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return shs_set_error(SHS_PARSE, "%s: missing key \"%s\"", name, key);
        return SHS_OK;
    }
    if (json_is_number(v) && json_number_value(v) > 0x7fffffff) /* positive, just not an int */
        return BAD(key, "%.15g is too large: at most %d", name, key, json_number_value(v), 0x7fffffff);
    int64_t x;
    if (shs__json_int(v, &x) || x < 1) return BAD(key, "want a positive integer", name, key);
    *out = (int)x;
    return SHS_OK;
}

/* a finite number */
static shs_status_t get_num(const char *name, json_t *root, const char *key, double *out) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) return BAD(key, "want a number", name, key);
    *out = json_number_value(v);
    return SHS_OK;
}

/* a boolean; absent leaves *out */
static shs_status_t get_bool(const char *name, json_t *root, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    if (!json_is_boolean(v)) return BAD(key, "want true or false", name, key);
    *out = json_is_true(v);
    return SHS_OK;
}

/* key absent, or equal to want (a boolean) */
static shs_status_t want_bool(const char *name, json_t *root, const char *key, int want, const char *why) {
    int b = want;
    SHS_CHECK(get_bool(name, root, key, &b));
    if (b != want) return BAD(key, "%s is not modelled (%s)", name, key, b ? "true" : "false", why);
    return SHS_OK;
}

/* key absent or a string equal to want */
static shs_status_t want_str(const char *name, json_t *root, const char *key, const char *want, const char *why) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    const char *s = json_string_value(v);
    if (!s) return BAD(key, "want a string", name, key);
    if (strcmp(s, want) != 0) return BAD(key, "'%s' is not modelled (%s)", name, key, s, why);
    return SHS_OK;
}

static shs_status_t read_dtype(const char *name, json_t *root, shs_dtype_t *out) {
    static const char *const keys[] = {"torch_dtype", "dtype"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(root, keys[k]);
        if (!v || json_is_null(v)) continue;
        const char *s = json_string_value(v);
        if (!s) return BAD(keys[k], "want a string", name, keys[k]);
        const char *n = !strncmp(s, "torch.", 6) ? s + 6 : s;
        if (!strcmp(n, "float32")) *out = SHS_F32;
        else if (!strcmp(n, "bfloat16")) *out = SHS_BF16;
        else if (!strcmp(n, "float16")) *out = SHS_F16;
        else return BAD(keys[k], "'%s' is not one of float32, bfloat16, float16", name, keys[k], s);
    }
    return SHS_OK;
}

/* rope_scaling: null, or Llama 3.1's "llama3" */
static shs_status_t read_rope_scaling(const char *name, json_t *root, shs_rope_scaling_t *rs) {
    static const char key[] = "rope_scaling";
    json_t *v = json_object_get(root, key);
    *rs = (shs_rope_scaling_t){SHS_ROPE_SCALING_NONE, 0, 0, 0, 0};
    if (!v || json_is_null(v)) return SHS_OK;
    if (!json_is_object(v)) return BAD(key, "want null or an object", name, key);
    json_t *t = json_object_get(v, "rope_type");
    if (!t) t = json_object_get(v, "type"); /* the older spelling */
    const char *type = json_string_value(t);
    if (!type) return BAD(key, "no rope_type", name, key);
    if (strcmp(type, "llama3") != 0)
        return BAD(key, "rope_type '%s' is not modelled (llama3 only)", name, key, type);
    static const char *const num_keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings"};
    double x[4];
    for (int k = 0; k < 4; k++) {
        json_t *f = json_object_get(v, num_keys[k]);
        if (!f) return shs_set_error(SHS_PARSE, "%s: key \"%s\": missing \"%s\"", name, key, num_keys[k]);
        if (!json_is_number(f) || !(json_number_value(f) > 0) || !isfinite(json_number_value(f)))
            return shs_set_error(SHS_PARSE, "%s: key \"%s\": \"%s\" wants a positive number", name, key, num_keys[k]);
        x[k] = json_number_value(f);
    }
    const char *k2;
    json_t *f;
    json_object_foreach(v, k2, f) {
        int known = !strcmp(k2, "rope_type") || !strcmp(k2, "type");
        for (int k = 0; k < 4; k++) known |= !strcmp(k2, num_keys[k]);
        if (!known) return shs_set_error(SHS_PARSE, "%s: key \"%s\": unknown entry \"%s\"", name, key, k2);
    }
    if (x[3] != floor(x[3]) || x[3] > 0x7fffffff)
        return shs_set_error(SHS_PARSE, "%s: key \"%s\": original_max_position_embeddings wants an integer", name, key);
    if (!(x[2] > x[1]))
        return shs_set_error(SHS_PARSE, "%s: key \"%s\": high_freq_factor must exceed low_freq_factor", name, key);
    *rs = (shs_rope_scaling_t){SHS_ROPE_SCALING_LLAMA3, x[0], x[1], x[2], (int)x[3]};
    return SHS_OK;
}

static int in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}

/* every key of root is a shape key, a checked key or harmless */
static shs_status_t no_unknown_keys(const char *name, json_t *root, const char *model_type, const char *const *known,
                                    size_t nknown) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (key[0] == '_' || in_list(key, known, nknown) || in_list(key, harmless, sizeof harmless / sizeof harmless[0]))
            continue;
        return shs_set_error(SHS_PARSE, "%s: key \"%s\" is not modelled for model_type %s (see hf_config.h for "
                             "the keys shardsim reads)", name, key, model_type);
    }
    return SHS_OK;
}

/* layer_types (newer transformers): one entry per layer, "full_attention"
 * everywhere is the one attention shardsim models */
static shs_status_t read_layer_types(const char *name, json_t *root, int num_layers) {
    static const char key[] = "layer_types";
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return SHS_OK;
    if (!json_is_array(v)) return BAD(key, "want a list of strings, one per layer", name, key);
    if (json_array_size(v) != (size_t)num_layers)
        return BAD(key, "has %zu entries, num_hidden_layers is %d", name, key, json_array_size(v), num_layers);
    for (size_t i = 0; i < json_array_size(v); i++) {
        const char *t = json_string_value(json_array_get(v, i));
        if (!t) return BAD(key, "entry %zu (layer %zu) is not a string", name, key, i, i);
        if (strcmp(t, "full_attention") != 0)
            return BAD(key, "layer %zu is '%s': only full_attention is modelled (no sliding-window or other "
                       "attention kinds)", name, key, i, t);
    }
    return SHS_OK;
}

static shs_status_t parse_llama(const char *name, json_t *root, shs_hf_config_t *out) {
    const char *mt = out->model_type;
    int qwen2 = !strcmp(mt, "qwen2"), mistral = !strcmp(mt, "mistral"), llama = !strcmp(mt, "llama");
    static const char *const known[] = {
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
        "tie_word_embeddings", "hidden_act", "attention_bias", "mlp_bias", "head_dim", "pretraining_tp",
        "attention_dropout", "sliding_window", "use_sliding_window", "max_window_layers", "use_mrope", "layer_types",
    };
    shs_llama_config_t *c = &out->llama;
    *c = (shs_llama_config_t){0};
    SHS_CHECK(get_int(name, root, "hidden_size", 1, &c->hidden));
    SHS_CHECK(get_int(name, root, "num_hidden_layers", 1, &c->num_layers));
    SHS_CHECK(get_int(name, root, "num_attention_heads", 1, &c->num_heads));
    SHS_CHECK(get_int(name, root, "intermediate_size", 1, &c->intermediate));
    SHS_CHECK(get_int(name, root, "vocab_size", 1, &c->vocab));
    SHS_CHECK(get_int(name, root, "max_position_embeddings", 1, &c->max_position));
    c->num_kv_heads = c->num_heads; /* HF: num_key_value_heads None means num_attention_heads (MHA) */
    SHS_CHECK(get_int(name, root, "num_key_value_heads", 0, &c->num_kv_heads));
    double eps = 1e-6, theta = 10000.0; /* the three configs' defaults */
    SHS_CHECK(get_num(name, root, "rms_norm_eps", &eps));
    SHS_CHECK(get_num(name, root, "rope_theta", &theta));
    if (!(eps > 0)) return BAD("rms_norm_eps", "want a number > 0", name, "rms_norm_eps");
    if (!((float)eps > 0) || !isfinite((float)eps)) /* the RMSNorm's epsilon is an f32 */
        return BAD("rms_norm_eps", "%g is out of range: an f32 > 0 wanted (about 1.4e-45 to 3.4e+38)", name,
                   "rms_norm_eps", eps);
    if (!(theta > 0)) return BAD("rope_theta", "want a number > 0", name, "rope_theta");
    c->rms_norm_eps = (float)eps;
    c->rope_theta = theta;
    SHS_CHECK(get_bool(name, root, "tie_word_embeddings", &c->tie_word_embeddings));
    SHS_CHECK(read_rope_scaling(name, root, &c->rope_scaling));
    SHS_CHECK(want_str(name, root, "hidden_act", "silu", "SwiGLU's activation is silu"));
    if (c->hidden % c->num_heads)
        return BAD("num_attention_heads", "%d does not divide hidden_size %d", name, "num_attention_heads",
                   c->num_heads, c->hidden);
    json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        int64_t x;
        if (shs__json_int(hd, &x) || x != c->hidden / c->num_heads)
            return BAD("head_dim", "not hidden_size / num_attention_heads = %d: a separate head dim is not modelled",
                       name, "head_dim", c->hidden / c->num_heads);
    }
    if (c->num_heads % c->num_kv_heads)
        return BAD("num_key_value_heads", "%d does not divide num_attention_heads %d", name, "num_key_value_heads",
                   c->num_kv_heads, c->num_heads);
    double drop = 0, tp = 1;
    SHS_CHECK(get_num(name, root, "attention_dropout", &drop));
    if (drop != 0) return BAD("attention_dropout", "%g is not modelled (0 only)", name, "attention_dropout", drop);
    SHS_CHECK(get_num(name, root, "pretraining_tp", &tp));
    if (tp != 1)
        return BAD("pretraining_tp", "%g is not modelled (1 only: HF slices the projections into that many "
                   "matmuls, a different summation order)", name, "pretraining_tp", tp);
    if (llama) {
        SHS_CHECK(want_bool(name, root, "attention_bias", 0, "Llama's projections have no biases"));
        SHS_CHECK(want_bool(name, root, "mlp_bias", 0, "Llama's MLP has no biases"));
    } else {
        static const char *const only_llama[] = {"attention_bias", "mlp_bias"};
        for (int k = 0; k < 2; k++)
            if (json_object_get(root, only_llama[k]))
                return BAD(only_llama[k], "is not a %s key", name, only_llama[k], mt);
    }
    if (qwen2) {
        c->qkv_bias = 1; /* Qwen2Attention: q_proj, k_proj, v_proj with bias, o_proj without */
        SHS_CHECK(want_bool(name, root, "use_sliding_window", 0, "sliding-window attention"));
        SHS_CHECK(want_bool(name, root, "use_mrope", 0, "multimodal rotary embeddings"));
        /* sliding_window and max_window_layers apply only with use_sliding_window */
    } else {
        static const char *const only_qwen2[] = {"use_sliding_window", "max_window_layers", "use_mrope"};
        for (int k = 0; k < 3; k++)
            if (json_object_get(root, only_qwen2[k]))
                return BAD(only_qwen2[k], "is not a %s key", name, only_qwen2[k], mt);
    }
    if (mistral) {
        int w = 0;
        SHS_CHECK(get_int(name, root, "sliding_window", 0, &w));
        out->sliding_window = w;
    } else if (llama && json_object_get(root, "sliding_window")) {
        return BAD("sliding_window", "is not a llama key", name, "sliding_window");
    }
    SHS_CHECK(read_layer_types(name, root, c->num_layers));
    SHS_CHECK(no_unknown_keys(name, root, mt, known, sizeof known / sizeof known[0]));
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

static shs_status_t parse_gpt2(const char *name, json_t *root, shs_hf_config_t *out) {
    static const char *const known[] = {
        "n_embd", "n_layer", "n_head", "n_positions", "n_ctx", "vocab_size", "n_inner", "activation_function",
        "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn", "attn_pdrop", "embd_pdrop", "resid_pdrop", "n_special", "predict_special_tokens",
    };
    shs_gpt_config_t *g = &out->gpt;
    *g = (shs_gpt_config_t){0};
    SHS_CHECK(get_int(name, root, "n_embd", 1, &g->channels));
    SHS_CHECK(get_int(name, root, "n_layer", 1, &g->num_layers));
    SHS_CHECK(get_int(name, root, "n_head", 1, &g->num_heads));
    SHS_CHECK(get_int(name, root, "vocab_size", 1, &g->vocab));
    int ctx = 0;
    SHS_CHECK(get_int(name, root, "n_ctx", 0, &ctx));
    SHS_CHECK(get_int(name, root, "n_positions", !ctx, &g->context));
    if (!g->context) g->context = ctx;
    if (ctx && ctx != g->context)
        return BAD("n_ctx", "%d differs from n_positions %d", name, "n_ctx", ctx, g->context);
    int inner = 0;
    SHS_CHECK(get_int(name, root, "n_inner", 0, &inner));
    if (inner && inner != 4 * g->channels)
        return BAD("n_inner", "%d is not modelled (null or 4 n_embd = %d)", name, "n_inner", inner, 4 * g->channels);
    SHS_CHECK(want_str(name, root, "activation_function", "gelu_new", "shardsim's GELU is the tanh form, gelu_new"));
    double eps = 1e-5;
    SHS_CHECK(get_num(name, root, "layer_norm_epsilon", &eps));
    if (eps != 1e-5)
        return BAD("layer_norm_epsilon", "%g is not modelled (shardsim's LayerNorm uses 1e-5)", name,
                   "layer_norm_epsilon", eps);
    SHS_CHECK(want_bool(name, root, "tie_word_embeddings", 1, "the GPT's head is tied"));
    SHS_CHECK(want_bool(name, root, "scale_attn_weights", 1, "attention scores are scaled by 1/sqrt(head dim)"));
    SHS_CHECK(want_bool(name, root, "scale_attn_by_inverse_layer_idx", 0, "no per-layer score scaling"));
    SHS_CHECK(want_bool(name, root, "reorder_and_upcast_attn", 0, "no upcast attention"));
    /* n_special, predict_special_tokens: OpenAI GPT's extra token embeddings,
     * left in older gpt2 configs (gpt2-medium/large/xl); GPT2Config has none */
    json_t *ns = json_object_get(root, "n_special");
    int64_t special;
    if (ns && (shs__json_int(ns, &special) || special != 0))
        return BAD("n_special", "is not modelled (0 only: GPT-2 has no extra special-token embeddings)", name,
                   "n_special");
    int predict = 0;
    SHS_CHECK(get_bool(name, root, "predict_special_tokens", &predict)); /* no special tokens to predict: moot */
    static const char *const drops[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop"};
    for (int k = 0; k < 3; k++) {
        double p = 0;
        SHS_CHECK(get_num(name, root, drops[k], &p));
        if (p < 0 || p >= 1) return BAD(drops[k], "want a probability in [0, 1)", name, drops[k]);
        if (p == 0) continue;
        size_t len = strlen(out->not_applied);
        snprintf(out->not_applied + len, sizeof out->not_applied - len, "%s%s %g", len ? ", " : "", drops[k], p);
    }
    SHS_CHECK(no_unknown_keys(name, root, out->model_type, known, sizeof known / sizeof known[0]));
    if (g->channels % g->num_heads)
        return BAD("n_head", "%d does not divide n_embd %d", name, "n_head", g->num_heads, g->channels);
    out->arch = SHS_ARCH_GPT;
    return SHS_OK;
}
#endif

shs_status_t shs_hf_config_parse(const char *text, size_t len, const char *name, shs_hf_config_t *out) {
    memset(out, 0, sizeof *out);
#ifndef SHS_HAVE_JANSSON
    (void)text;
    (void)len;
    return shs_set_error(SHS_UNSUPPORTED, "%s: reading a Hugging Face config.json %s (built without jansson)", name,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
#else
    json_t *root;
    SHS_CHECK(shs__json_object_parse(text, len, name, "config keys", &root));
    shs_status_t st = SHS_OK;
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!json_object_get(root, "model_type")) {
        st = shs_set_error(SHS_PARSE, "%s: missing key \"model_type\"", name);
    } else if (!mt || (strcmp(mt, "llama") && strcmp(mt, "mistral") && strcmp(mt, "qwen2") && strcmp(mt, "gpt2"))) {
        st = shs_set_error(SHS_PARSE, "%s: key \"model_type\": '%s' is not modelled (llama, mistral, qwen2, gpt2)",
                           name, mt ? mt : "(not a string)");
    } else {
        snprintf(out->model_type, sizeof out->model_type, "%s", mt);
        st = read_dtype(name, root, &out->torch_dtype);
        if (st == SHS_OK) st = !strcmp(mt, "gpt2") ? parse_gpt2(name, root, out) : parse_llama(name, root, out);
    }
    json_decref(root);
    return st;
#endif
}

shs_status_t shs_hf_config_load(const char *path, shs_hf_config_t *out) {
    memset(out, 0, sizeof *out);
    char *buf;
    size_t len;
    SHS_CHECK(shs__read_file(path, &buf, &len));
    shs_status_t st = shs_hf_config_parse(buf, len, path, out);
    free(buf);
    return st;
}
