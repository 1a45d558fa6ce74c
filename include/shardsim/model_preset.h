/* model_preset.h - named GPT shapes (GPT-2 and GPT-3 sizes) and the closed
 * form of a GPT's parameter count.
 *
 * What it is: the shapes of Radford et al. 2019 (GPT-2: 124M, 350M, 774M,
 * 1.5B; context 1024, vocabulary 50257) and Brown et al. 2020, Table 2.1
 * (GPT-3 6.7B, 13B, 175B; context 2048, the same 50257-token vocabulary),
 * with the LM head tied to the token embedding as both papers do. Each
 * preset carries the parameter count published for it.
 * What it is not: weights or a tokenizer; shardsim's kernels train only on
 * byte tokens, presets are for the meta backend (meta_run.h, compare).
 */
#ifndef SHARDSIM_MODEL_PRESET_H
#define SHARDSIM_MODEL_PRESET_H

#include <stdint.h>

#include "shardsim/gpt.h"

typedef struct {
    const char *name;            /* "gpt2-124m", ..., "gpt3-175b" */
    shs_gpt_config_t cfg;
    uint64_t published_params;   /* the count published for it (exact where one is published, else as rounded
                                  * in the source: see `source`) */
    uint64_t published_unit;     /* the rounding of published_params: 1 exact, 1e6 "774M", 1e8 "1.5B", ... */
    const char *source;
} shs_model_preset_t;

/* The presets, in size order; *count gets their number. */
const shs_model_preset_t *shs_model_presets(int *count);
/* The preset named `name`, or NULL. */
const shs_model_preset_t *shs_model_preset_find(const char *name);

/* Parameters of the GPT in gpt.h (tied LM head), counted from its layout
 * (gpt.c): per block ln_1 2C, c_attn 3C^2 + 3C, attn c_proj C^2 + C, ln_2 2C,
 * c_fc 4C^2 + 4C, mlp c_proj 4C^2 + C, i.e. 12C^2 + 13C; wte V C; wpe T C;
 * ln_f 2C. Total 12 L C^2 + 13 L C + (V + T) C + 2C. */
uint64_t shs_gpt_num_params(const shs_gpt_config_t *cfg);

#endif
