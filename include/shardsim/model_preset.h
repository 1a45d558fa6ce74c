/* model_preset.h - named model shapes (GPT-2 and GPT-3 sizes; Llama 2,
 * Llama 3, Llama 3.1 and Mistral sizes) and the closed form of a GPT's
 * parameter count (a Llama's is shs_llama_num_params, llama.h).
 *
 * What it is: the shapes of Radford et al. 2019 (GPT-2: 124M, 350M, 774M,
 * 1.5B; context 1024, vocabulary 50257) and Brown et al. 2020, Table 2.1
 * (GPT-3 6.7B, 13B, 175B; context 2048, the same 50257-token vocabulary),
 * with the LM head tied to the token embedding as both papers do. Each
 * preset carries the parameter count published for it. The Llama-family
 * shapes are their Hugging Face config.json values (sources in
 * model_preset.c), each with its exact published count.
 * What it is not: weights or a tokenizer; shardsim's kernels train only on
 * byte tokens, presets are for the meta backend (meta_run.h, compare).
 */
#ifndef SHARDSIM_MODEL_PRESET_H
#define SHARDSIM_MODEL_PRESET_H

#include <stdint.h>

#include "shardsim/gpt.h"
#include "shardsim/train.h"

typedef struct {
    const char *name;            /* "gpt2-124m", ..., "gpt3-175b", "llama2-7b", ..., "mistral-7b" */
    shs_gpt_config_t cfg;        /* SHS_ARCH_GPT: the shape. SHS_ARCH_LLAMA: only cfg.context is set,
                                  * the context a run takes by default: the pre-training context (Llama
                                  * 3.1's original_max_position_embeddings, Mistral 7B's 8192, ...; the
                                  * row's comment in model_preset.c cites it) */
    uint64_t published_params;   /* the count published for it (exact where one is published, else as rounded
                                  * in the source: see `source`) */
    uint64_t published_unit;     /* the rounding of published_params: 1 exact, 1e6 "774M", 1e8 "1.5B", ... */
    const char *source;
    shs_model_arch_t arch;       /* SHS_ARCH_GPT (0) or SHS_ARCH_LLAMA */
    shs_llama_config_t llama;    /* SHS_ARCH_LLAMA: the shape (HF config.json names) */
} shs_model_preset_t;

/* The presets: the GPTs in size order, then the Llama family in size order
 * within each family; *count gets their number. */
const shs_model_preset_t *shs_model_presets(int *count);
/* The preset named `name`, or NULL. */
const shs_model_preset_t *shs_model_preset_find(const char *name);

/* Parameters of the GPT in gpt.h (tied LM head), counted from its layout
 * (gpt.c): per block ln_1 2C, c_attn 3C^2 + 3C, attn c_proj C^2 + C, ln_2 2C,
 * c_fc 4C^2 + 4C, mlp c_proj 4C^2 + C, i.e. 12C^2 + 13C; wte V C; wpe T C;
 * ln_f 2C. Total 12 L C^2 + 13 L C + (V + T) C + 2C. */
uint64_t shs_gpt_num_params(const shs_gpt_config_t *cfg);

#endif
