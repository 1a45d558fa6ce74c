/* model_choice.h - the model a command runs when it is not the default GPT:
 * a Hugging Face config.json (--hf-config, hf_config.h) or a Llama-family
 * preset (compare --model, model_preset.h), put into a train config, with
 * the context checked against what the model takes, and the header line
 * that names it. Shared by train (train_options.c, cmd_train.c) and
 * compare (cmd_compare.c).
 * What it is not: the config reader (src/model/hf_config.c). */
#ifndef SHARDSIM_SIM_MODEL_CHOICE_H
#define SHARDSIM_SIM_MODEL_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/hf_config.h"
#include "shardsim/model_preset.h"
#include "shardsim/train.h"

#define SIM_ROW_HF_CONFIG                                                                                          \
    {"--hf-config", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE",                                                         \
     "the model of a Hugging Face config.json: model_type llama, mistral,\n"                                     \
     "qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo2, internlm2\n"                                        \
     "(Llama architecture) or gpt2; keys it does not model are refused by\n"                                     \
     "name, mixtures of experts too; --context is the only shape option\n"                                      \
     "beside it. The model's context: max_position_embeddings (gpt2\n"                                          \
     "n_positions), or when shorter the pre-training context of a long-\n"                                       \
     "context model: rope_scaling.original_max_position_embeddings\n"                                            \
     "(Llama-3.1: 8192) or Phi-3's original_max_position_embeddings.\n"                                          \
     "Default --context: train 64, compare the model's context; both at most\n"                                  \
     "65536 and the model's limit"}

/* Put a Llama shape into c (arch SHS_ARCH_LLAMA, c->llama) with context T:
 * the given one (T > 0) or default_T, capped at max_position. A T above it
 * is a usage error (exit 2) naming the key (`what` names the model in the
 * message); -1 when fine. */
int sim_model_set_llama(const char *cmd, const char *what, const shs_llama_config_t *llama, int T, int default_T,
                        shs_train_config_t *c);

/* Put a parsed config.json into c: a Llama as sim_model_set_llama, gpt2 as
 * the GPT shape (c->model, arch SHS_ARCH_GPT) with its context chosen the
 * same way against n_positions. Returns -1 or the usage exit code. */
int sim_model_set_hf(const char *cmd, const char *path, const shs_hf_config_t *h, int T, int default_T,
                     shs_train_config_t *c);

/* "NAME: llama L=32 C=4096 NH=32 NKV=8 I=14336 V=128256 T=8192, 8030261248 params"
 * (or the GPT's L/C/NH/T/V) into buf; params 0 leaves out the count. */
void sim_model_describe(char *buf, size_t n, const char *name, const shs_train_config_t *c, uint64_t params);

#endif
