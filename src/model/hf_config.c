/* hf_config.c - the Hugging Face config.json reader (hf_config.h): the
 * value readers, the keys every config may carry, model_type dispatch
 * (mixtures of experts refused by name), gpt2, and the default context.
 * What it is not: the Llama family's keys (hf_config_llama.c).
 * Key meanings and defaults are those of transformers' GPT2Config and the
 * configs hf_config_llama.c names. */
#include "model/hf_config_impl.h"

#include <math.h>
#include <stdarg.h>
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
    int llama3 = rs->kind == SHS_ROPE_SCALING_LLAMA3, longrope = rs->kind == SHS_ROPE_SCALING_LONGROPE;
    if ((llama3 || longrope) && rs->original_max_position_embeddings < T) {
        T = rs->original_max_position_embeddings; /* pre-training's context, before the long-context stage */
        *key = llama3 ? "rope_scaling.original_max_position_embeddings" : "original_max_position_embeddings";
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

#define BAD SHS__HF_BAD

/* Keys that change nothing shardsim computes (hf_config.h): token ids,
 * bookkeeping, the inference cache (use_cache, its older name output_past,
 * cache_implementation), output switches, the initializer's spread,
 * activation checkpointing (same results), the sequence-classification
 * summary head of gpt2, remote-code pointers, transformers.js's settings.
 * Besides these, every key starting with '_' is transformers' private
 * bookkeeping (_name_or_path, _attn_implementation, _commit_hash, ...). */
static const char *const harmless[] = {
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "transformers_version", "use_cache", "output_past", "cache_implementation", "initializer_range", "model_type",
    "torch_dtype", "dtype", "tokenizer_class", "return_dict", "output_hidden_states", "output_attentions",
    "gradient_checkpointing", "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
    "summary_use_proj", "task_specific_params", "id2label", "label2id", "auto_map", "transformers.js_config", NULL,
};

shs_status_t shs__hf_int(const char *name, json_t *root, const char *key, int required, int *out) {
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

shs_status_t shs__hf_num(const char *name, json_t *root, const char *key, int null_ok, double *out) {
    json_t *v = json_object_get(root, key);
    if (!v || (null_ok && json_is_null(v))) return SHS_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v))) return BAD(key, "want a number", name, key);
    *out = json_number_value(v);
    return SHS_OK;
}

shs_status_t shs__hf_bool(const char *name, json_t *root, const char *key, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    if (!json_is_boolean(v)) return BAD(key, "want true or false", name, key);
    *out = json_is_true(v);
    return SHS_OK;
}

shs_status_t shs__hf_want_bool(const char *name, json_t *root, const char *key, int want, const char *why) {
    int b = want;
    SHS_CHECK(shs__hf_bool(name, root, key, &b));
    if (b != want) return BAD(key, "%s is not modelled (%s)", name, key, b ? "true" : "false", why);
    return SHS_OK;
}

shs_status_t shs__hf_want_str(const char *name, json_t *root, const char *key, const char *const *want,
                              const char *why) {
    json_t *v = json_object_get(root, key);
    if (!v) return SHS_OK;
    const char *s = json_string_value(v);
    if (!s) return BAD(key, "want a string", name, key);
    for (int i = 0; want[i]; i++)
        if (!strcmp(s, want[i])) return SHS_OK;
    return BAD(key, "'%s' is not modelled (%s)", name, key, s, why);
}

static int in_list(const char *key, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}

shs_status_t shs__hf_known_keys(const char *name, json_t *root, const char *model_type,
                                const char *const *const *lists) {
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        int known = key[0] == '_' || in_list(key, harmless);
        for (int l = 0; !known && lists[l]; l++) known = in_list(key, lists[l]);
        if (!known)
            return shs_set_error(SHS_PARSE, "%s: key \"%s\" is not modelled for model_type %s (see hf_config.h for "
                                 "the keys shardsim reads)", name, key, model_type);
    }
    return SHS_OK;
}

void shs__hf_append(char *field, size_t size, const char *sep, const char *fmt, ...) {
    size_t len = strlen(field);
    if (len && len < size) len += (size_t)snprintf(field + len, size - len, "%s", sep);
    if (len >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(field + len, size - len, fmt, ap);
    va_end(ap);
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

static shs_status_t parse_gpt2(const char *name, json_t *root, shs_hf_config_t *out) {
    static const char *const known[] = {
        "n_embd", "n_layer", "n_head", "n_positions", "n_ctx", "vocab_size", "n_inner", "activation_function",
        "layer_norm_epsilon", "tie_word_embeddings", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
        "reorder_and_upcast_attn", "attn_pdrop", "embd_pdrop", "resid_pdrop", "n_special", "predict_special_tokens",
        NULL,
    };
    shs_gpt_config_t *g = &out->gpt;
    *g = (shs_gpt_config_t){0};
    SHS_CHECK(shs__hf_int(name, root, "n_embd", 1, &g->channels));
    SHS_CHECK(shs__hf_int(name, root, "n_layer", 1, &g->num_layers));
    SHS_CHECK(shs__hf_int(name, root, "n_head", 1, &g->num_heads));
    SHS_CHECK(shs__hf_int(name, root, "vocab_size", 1, &g->vocab));
    int ctx = 0;
    SHS_CHECK(shs__hf_int(name, root, "n_ctx", 0, &ctx));
    SHS_CHECK(shs__hf_int(name, root, "n_positions", !ctx, &g->context));
    if (!g->context) g->context = ctx;
    if (ctx && ctx != g->context)
        return BAD("n_ctx", "%d differs from n_positions %d", name, "n_ctx", ctx, g->context);
    int inner = 0;
    SHS_CHECK(shs__hf_int(name, root, "n_inner", 0, &inner));
    if (inner && inner != 4 * g->channels)
        return BAD("n_inner", "%d is not modelled (null or 4 n_embd = %d)", name, "n_inner", inner, 4 * g->channels);
    SHS_CHECK(shs__hf_want_str(name, root, "activation_function", (const char *const[]){"gelu_new", NULL},
                               "shardsim's GELU is the tanh form, gelu_new"));
    double eps = 1e-5;
    SHS_CHECK(shs__hf_num(name, root, "layer_norm_epsilon", 0, &eps));
    if (eps != 1e-5)
        return BAD("layer_norm_epsilon", "%g is not modelled (shardsim's LayerNorm uses 1e-5)", name,
                   "layer_norm_epsilon", eps);
    SHS_CHECK(shs__hf_want_bool(name, root, "tie_word_embeddings", 1, "the GPT's head is tied"));
    SHS_CHECK(shs__hf_want_bool(name, root, "scale_attn_weights", 1, "attention scores are scaled by 1/sqrt(head dim)"));
    SHS_CHECK(shs__hf_want_bool(name, root, "scale_attn_by_inverse_layer_idx", 0, "no per-layer score scaling"));
    SHS_CHECK(shs__hf_want_bool(name, root, "reorder_and_upcast_attn", 0, "no upcast attention"));
    /* n_special, predict_special_tokens: OpenAI GPT's extra token embeddings,
     * left in older gpt2 configs (gpt2-medium/large/xl); GPT2Config has none */
    json_t *ns = json_object_get(root, "n_special");
    int64_t special;
    if (ns && (shs__json_int(ns, &special) || special != 0))
        return BAD("n_special", "is not modelled (0 only: GPT-2 has no extra special-token embeddings)", name,
                   "n_special");
    int predict = 0;
    SHS_CHECK(shs__hf_bool(name, root, "predict_special_tokens", &predict)); /* no special tokens to predict: moot */
    static const char *const drops[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop"};
    for (int k = 0; k < 3; k++) {
        double p = 0;
        SHS_CHECK(shs__hf_num(name, root, drops[k], 0, &p));
        if (p < 0 || p >= 1) return BAD(drops[k], "want a probability in [0, 1)", name, drops[k]);
        if (p != 0) shs__hf_append(out->not_applied, sizeof out->not_applied, ", ", "%s %g", drops[k], p);
    }
    SHS_CHECK(shs__hf_known_keys(name, root, out->model_type, (const char *const *const[]){known, NULL}));
    if (g->channels % g->num_heads)
        return BAD("n_head", "%d does not divide n_embd %d", name, "n_head", g->num_heads, g->channels);
    out->arch = SHS_ARCH_GPT;
    return SHS_OK;
}

/* Model types shardsim refuses by name, and why. */
static const char *refusal_of(const char *mt) {
    static const char *const moe[] = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "olmoe",
                                      "phimoe", "dbrx", "granitemoe", "jetmoe", "llama4", "llama4_text", "gpt_oss",
                                      "minimax", "hunyuan_v1_moe", "ernie4_5_moe", "glm4_moe", NULL};
    if (in_list(mt, moe))
        return "a mixture of experts: it needs expert parallelism (shardsim trains dense decoders)";
    if (!strcmp(mt, "gemma3"))
        return "the multimodal Gemma 3 (a SigLIP vision tower beside the decoder): shardsim models its text "
               "decoder, a config with model_type gemma3_text (its text_config's keys)";
    return NULL;
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
    } else if (mt && refusal_of(mt)) {
        st = shs_set_error(SHS_PARSE, "%s: key \"model_type\": '%s' is not modelled: %s", name, mt, refusal_of(mt));
    } else if (!mt || (!shs__hf_is_llama_family(mt) && strcmp(mt, "gpt2"))) {
        st = shs_set_error(SHS_PARSE,
                           "%s: key \"model_type\": '%s' is not modelled (llama, mistral, qwen2, qwen3, gemma, gemma2, "
                           "gemma3_text, phi3, olmo2, internlm2, gpt2)", name, mt ? mt : "(not a string)");
    } else {
        snprintf(out->model_type, sizeof out->model_type, "%s", mt);
        st = read_dtype(name, root, &out->torch_dtype);
        if (st == SHS_OK) st = !strcmp(mt, "gpt2") ? parse_gpt2(name, root, out) : shs__hf_parse_llama(name, root, out);
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
