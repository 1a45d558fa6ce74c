/* hf_config_impl.h - private: the value readers the config.json reader's
 * parts share (hf_config.c: dispatch, common keys, gpt2;
 * hf_config_llama.c: the Llama family). Each reader names the file and the
 * key in its error; an absent key leaves *out as it is (the caller's
 * default).
 * What it is not: the public API (hf_config.h). */
#ifndef SHARDSIM_HF_CONFIG_IMPL_H
#define SHARDSIM_HF_CONFIG_IMPL_H

#include "shardsim/hf_config.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

/* SHS_PARSE "NAME: key \"KEY\": ..." */
#define SHS__HF_BAD(key, ...) shs_set_error(SHS_PARSE, "%s: key \"%s\": " __VA_ARGS__)

/* A positive integer that fits an int; absent or null: SHS_PARSE when
 * required, else *out kept. */
shs_status_t shs__hf_int(const char *name, json_t *root, const char *key, int required, int *out);
/* A finite number (null counts as absent when null_ok). */
shs_status_t shs__hf_num(const char *name, json_t *root, const char *key, int null_ok, double *out);
/* A boolean. */
shs_status_t shs__hf_bool(const char *name, json_t *root, const char *key, int *out);
/* Absent, or the boolean `want` (else refused with `why`). */
shs_status_t shs__hf_want_bool(const char *name, json_t *root, const char *key, int want, const char *why);
/* Absent, or one of the strings of `want` (NULL-terminated; refused with `why`). */
shs_status_t shs__hf_want_str(const char *name, json_t *root, const char *key, const char *const *want,
                              const char *why);
/* Every key of root is in one of the NULL-terminated lists, starts with '_',
 * or is one every config may carry (hf_config.h's rule); else SHS_PARSE
 * naming the first other key. */
shs_status_t shs__hf_known_keys(const char *name, json_t *root, const char *model_type,
                                const char *const *const *lists);
/* Append "text" to a "; "- or ", "-separated field. */
void shs__hf_append(char *field, size_t size, const char *sep, const char *fmt, ...);

/* The Llama family (hf_config_llama.c): 1 when model_type is one of its
 * names; its parse into out->llama (validated), out->notes, out->not_applied. */
int shs__hf_is_llama_family(const char *model_type);
shs_status_t shs__hf_parse_llama(const char *name, json_t *root, shs_hf_config_t *out);
#endif

#endif
