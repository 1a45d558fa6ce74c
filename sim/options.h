/* options.h - the option rows several commands share (args.h's table), each
 * defined once: the model's shape, the world, the micro-batch, the
 * optimizer, the dtypes, the device memory, hybrid sharding's group and the
 * collective timeout; and the checks of their keyword values. A command puts
 * a row into its table as `[ITS_ID] = SIM_ROW_LAYERS`.
 * What it is not: the parser (args.c) or any command's own rows. */
#ifndef SHARDSIM_SIM_OPTIONS_H
#define SHARDSIM_SIM_OPTIONS_H

#include "args.h"
#include "shardsim/ds_config.h"
#include "shardsim/dtype.h"
#include "shardsim/gpt.h"
#include "shardsim/optim.h"
#include "shardsim/train.h"
#include "shardsim/world.h"

#define SIM_ROW_WORLD {"--world", NULL, SIM_OPT_INT, 1, SHS_MAX_WORLD, 0, 0, "N", "ranks (simulated GPUs), 1..1024"}
#define SIM_ROW_LAYERS {"--layers", NULL, SIM_OPT_INT, 1, SHS_GPT_MAX_LAYERS, 0, 0, "L", "transformer blocks"}
#define SIM_ROW_HEADS {"--heads", NULL, SIM_OPT_INT, 1, 65536, 0, 0, "NH", "attention heads, must divide channels"}
#define SIM_ROW_CHANNELS {"--channels", NULL, SIM_OPT_INT, 1, 65536, 0, 0, "C", "model width"}
#define SIM_ROW_CONTEXT {"--context", NULL, SIM_OPT_INT, 1, SHS_TRAIN_MAX_CONTEXT, 0, 0, "T", "sequence length"}
#define SIM_ROW_MICRO_BATCH {"--micro-batch", NULL, SIM_OPT_INT, 1, 65536, 0, 0, "B", "sequences per rank per step"}
#define SIM_ROW_OPTIMIZER {"--optimizer", NULL, SIM_OPT_STR, 0, 0, 0, 0, "O", "adamw | sgd (PyTorch's defaults: sgd momentum 0)"}
#define SIM_ROW_MOMENTUM {"--momentum", NULL, SIM_OPT_F32, 0, 1, 0, 0, "X", "SGD momentum"}
#define SIM_ROW_PARAM_DTYPE                                                                                        \
    {"--param-dtype", NULL, SIM_OPT_STR, 0, 0, 0, 0, "D",                                                          \
     "f32 | bf16 | f16: parameters as the model computes with them\n"                                            \
     "(FSDP MixedPrecision param_dtype; f32 master weights stay on the\n"                                         \
     "shards; ZeRO-3 all-gathers in D). f16 turns on dynamic loss scaling"}
#define SIM_ROW_REDUCE_DTYPE                                                                                       \
    {"--reduce-dtype", NULL, SIM_OPT_STR, 0, 0, 0, 0, "D", "f32 | bf16 | f16: gradient reduction dtype"}
#define SIM_ROW_GRAD_ACCUM_DTYPE                                                                                   \
    {"--grad-accum-dtype", NULL, SIM_OPT_STR, 0, 0, 0, 0, "D",                                                     \
     "f32 | the param dtype: gradients stored and accumulated in D\n"                                            \
     "(DeepSpeed data_types.grad_accum_dtype); f32 below an f32 param dtype\n"                                   \
     "keeps an f32 buffer each micro-batch's rounded gradient is added to"}
#define SIM_ROW_DEVICE_MEM {"--device-mem", NULL, SIM_OPT_SIZE, 0, 0, 0, 0, "SIZE", "memory per simulated GPU, e.g. 80GiB, 512MiB (GiB = 2^30 bytes,\nGB = 1e9; a bare number is bytes)"}
#define SIM_ROW_SHARD_GROUP_SIZE                                                                                   \
    {"--shard-group-size", NULL, SIM_OPT_INT, 1, SHS_MAX_WORLD, 0, 0, "G",                                         \
     "hybrid_*: shard within groups of G consecutive ranks, replicate\nacross the N/G groups"}
#define SIM_ROW_TIMEOUT {"--timeout", NULL, SIM_OPT_FLOAT, 0.001, 86400, 0, 0, "SEC", "collective timeout in seconds"}

#define SIM_ROW_RECOMPUTE                                                                                          \
    {"--recompute-granularity", NULL, SIM_OPT_STR, 0, 0, 0, 0, "G",                                                 \
     "full | selective | none (Megatron-LM's names): full recomputes each\n"                                      \
     "block's forward in backward (as --checkpoint-activations); selective\n"                                    \
     "only the attention core (Korthikanti et al. 2022); the GPT and the\n"                                     \
     "Llama, not --model-file"}
#define SIM_ROW_AC_MODE                                                                                            \
    {"--ac-mode", NULL, SIM_OPT_STR, 0, 0, 0, 0, "M",                                                              \
     "none | full | selective (torchtitan's activation_checkpoint.mode): full\n"                                  \
     "is --recompute-granularity full; selective is --selective-ac-option's\n"                                   \
     "policy; one policy, several spellings: conflicting ones are refused"}
#define SIM_ROW_SELECTIVE_AC_OPTION                                                                                \
    {"--selective-ac-option", NULL, SIM_OPT_STR, 0, 0, 0, 0, "op|N",                                               \
     "with --ac-mode selective (torchtitan's option, default 2): op keeps per\n"                                  \
     "block the outputs of every other bias-free matmul (aten.mm) and of the\n"                                  \
     "flash attention kernel, recomputes the rest; N recomputes every N-th\n"                                    \
     "block in full (1 <= N <= layers)"}
#define SIM_ROW_ATTENTION                                                                                          \
    {"--attention", NULL, SIM_OPT_STR, 0, 0, 0, 0, "K",                                                            \
     "eager | flash: flash keeps no TxT matrix, only a log-sum-exp per row,\n"                                   \
     "and recomputes the probabilities in backward (FlashAttention); cpu and\n"                                  \
     "meta backends; the GPT and the Llama, not --model-file"}
#define SIM_ROW_AUTOCAST                                                                                           \
    {"--autocast", NULL, SIM_OPT_STR, 0, 0, 0, 0, "D",                                                             \
     "bf16 | f16 | off: emulate torch.autocast: matmuls read D-rounded inputs\n"                                 \
     "and write D, norms/softmax/loss in f32; activations stored in D\n"                                         \
     "(2 bytes) where torch keeps them so (gpt.h, llama.h); the GPT and the\n"                                 \
     "Llama, not --model-file"}
#define SIM_ROW_DROPOUT                                                                                            \
    {"--dropout", NULL, SIM_OPT_FLOAT, 0, 1, 1, 0, "P",                                                            \
     "dropout probability, 0 <= P < 1, on attention probabilities and both\n"                                   \
     "projection outputs (GPT-2's), 1-byte masks; the GPT only"}

#define SIM_ROW_DS_CONFIG                                                                                          \
    {"--ds-config", NULL, SIM_OPT_STR, 0, 0, 0, 0, "FILE",                                                         \
     "a DeepSpeed ds_config.json: ZeRO stage, offload, fp16/bf16, batch sizes,\n"                               \
     "clipping, optimizer (include/shardsim/ds_config.h); options given beside\n"                               \
     "it win; keys shardsim does not model are refused by name"}

/* The execution options as given (NULL / 0 when absent). */
typedef struct {
    int checkpoint;             /* --checkpoint-activations given true */
    const char *recompute;      /* --recompute-granularity */
    const char *ac_mode;        /* --ac-mode */
    const char *ac_option;      /* --selective-ac-option */
    const char *attention;      /* --attention */
    const char *autocast;       /* --autocast */
    int dropout_given;
    double dropout;             /* --dropout */
} sim_exec_args_t;

/* Into cfg's recompute, recompute_every, attention, autocast and dropout.
 * The recompute policy's spellings (--checkpoint-activations,
 * --recompute-granularity, --ac-mode with --selective-ac-option) must name
 * one policy; each refused value or conflict names its options. -1 to go
 * on, else a usage error of cmd. */
int sim_opt_exec(const char *cmd, const sim_exec_args_t *in, shs_train_config_t *cfg);
/* A note for a run's header when its recompute policy does something else
 * than its name suggests (Megatron's selective with flash attention saves
 * nothing), else NULL. */
const char *sim_recompute_note(const shs_train_config_t *cfg);
/* Once the model is known: --selective-ac-option N beyond its layer count
 * (no block would recompute) is refused. -1 to go on, else a usage error. */
int sim_opt_exec_check_model(const char *cmd, const shs_train_config_t *cfg);
/* --param-dtype / --reduce-dtype / --grad-accum-dtype: f32, bf16 or f16 into *out. -1 to go on,
 * else a usage error of cmd naming opt. */
int sim_opt_dtype(const char *cmd, const char *opt, const char *val, shs_dtype_t *out);
/* --optimizer: *out = the named optimizer's PyTorch defaults (sgd: momentum
 * 0, as torch.optim.SGD). -1 to go on, else a usage error of cmd. */
int sim_opt_optimizer(const char *cmd, const char *val, shs_optim_config_t *out);

/* --ds-config: read `path` for `use` (train or compare) into *ds and apply it to *cfg (shs_ds_config_apply:
 * the settings with given[s] keep cfg's command-line value; cfg already
 * holds the model, whose hidden size resolves the hidden-size "auto" keys;
 * no_hidden: the model has none, a --model-file network), sources in src.
 * -1 to go on, else SIM_EXIT_ERROR after an error line of cmd naming the
 * file and the key. */
int sim_ds_config_apply(const char *cmd, const char *path, shs_ds_use_t use, const int given[SHS_DS_NUM_SETTINGS],
                        int no_hidden, shs_ds_config_t *ds, shs_train_config_t *cfg, shs_ds_source_t src[SHS_DS_NUM_SETTINGS]);

#endif
