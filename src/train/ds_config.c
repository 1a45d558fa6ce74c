/* ds_config.c - DeepSpeed's ds_config.json into shs_train_config_t (see
 * ds_config.h): the settings' names, the file's top-level keys and the
 * reading of a whole file. Each section has its own file with its mapping:
 * zero_optimization ds_config_zero.c; fp16, bf16, data_types
 * ds_config_precision.c; optimizer ds_config_optimizer.c; scheduler
 * ds_config_scheduler.c; the command line's precedence, the stage rules and
 * DeepSpeed's batch rule ds_config_apply.c; the header ds_config_describe.c;
 * the value readers and the table walk ds_config_read.c.
 *
 * Read from DeepSpeed's sources (deepspeedai/DeepSpeed): docs/_pages/
 * config-json.md (each key's meaning), deepspeed/runtime/config.py (batch
 * rule, duplicate keys refused, the top-level keys it reads one by one,
 * passing over the others), runtime/engine.py (allreduce_bucket's
 * prescale / predivide). The top-level mapping:
 *
 *   communication_data_type fp32|fp16|bf16    -> reduce dtype
 *   gradient_clipping x (default 0: none)     -> clip the global 2-norm to x
 *   gradient_accumulation_steps, train_micro_batch_size_per_gpu,
 *       train_batch_size                      -> accumulation, micro-batch, and
 *       DeepSpeed's batch rule (shs_ds_config_apply)
 *   prescale_gradients, gradient_predivide_factor -> strategy.h's averaging
 *       (stage 0; ZeRO-1 does not read them; ZeRO-2/3 refuse them, as
 *       DeepSpeed's asserts do: ds_config_apply.c)
 *   scheduler                                 -> lr_schedule.h (ds_config_scheduler.c)
 *
 * Refused as not modelled (they change the numbers): sparse_gradients true,
 * gradient_allreduce_op sum, amp enabled, the pipeline, sparse attention,
 * compression, tensor/expert/sequence parallelism, and the feature sections
 * (elasticity, curriculum, data efficiency, progressive layer drop, MoQ,
 * torch_autocast) when enabled. Every top-level key is a row of `top_keys`
 * below: what DeepSpeed does with it and what shardsim does.
 */
#include "shardsim/ds_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/features.h"
#include "core/json_object.h"
#include "train/ds_config_impl.h"

static const char *const setting_names[] = {
#define SHS_DS_SETTING_NAME(id, name) name,
    SHS_DS_SETTING_MAP(SHS_DS_SETTING_NAME)
#undef SHS_DS_SETTING_NAME
};

const char *shs_ds_setting_name(shs_ds_setting_t s) {
    return (unsigned)s < SHS_DS_NUM_SETTINGS ? setting_names[s] : "invalid";
}

const char *shs_ds_source_name(shs_ds_source_t s) {
    switch (s) {
    case SHS_DS_FROM_CONFIG: return "config";
    case SHS_DS_FROM_DS_DEFAULT: return "DeepSpeed default";
    case SHS_DS_FROM_DERIVED: return "derived";
    case SHS_DS_FROM_COMMAND_LINE: return "command line";
    case SHS_DS_FROM_AUTO: return "auto";
    case SHS_DS_FROM_PER_ROW: return "each row's own";
    default: return "shardsim default";
    }
}

#ifdef SHS_HAVE_JANSSON

/* The top level's state while its keys are read. */
typedef struct {
    shs__ds_zero_t z;
    shs__ds_fp16_t f;
    int bf16, bf16_seen;
} root_t;

static shs_status_t read_train_batch(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                     void *sec) {
    if (!shs__ds_is_auto(v)) return shs__ds_get_int(r, kp, v, 1, 1e12, &r->ds->train_batch);
    r->ds->autos |= 1u << SHS_DS_AUTO_TRAIN_BATCH;
    return SHS_OK;
}

/* train_micro_batch_size_per_gpu, gradient_accumulation_steps: "auto", or
 * an integer into *val, noted as given (DeepSpeed's "provided"). */
static shs_status_t read_batch_int(shs__ds_reader_t *r, const char *kp, const json_t *v, shs_ds_auto_t a, int *val,
                                   int *given, shs_ds_setting_t s) {
    long n;
    if (shs__ds_is_auto(v)) {
        r->ds->autos |= 1u << a;
        return SHS_OK;
    }
    SHS_CHECK(shs__ds_get_int(r, kp, v, 1, 65536, &n));
    *val = (int)n;
    *given = 1;
    shs__ds_set(r->ds, s, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_micro(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    shs_ds_config_t *ds = r->ds;
    return read_batch_int(r, kp, v, SHS_DS_AUTO_MICRO, &ds->vals.micro_batch, &ds->has_micro, SHS_DS_MICRO_BATCH);
}

static shs_status_t read_accum(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    shs_ds_config_t *ds = r->ds;
    return read_batch_int(r, kp, v, SHS_DS_AUTO_ACCUM, &ds->vals.grad_accum, &ds->has_accum, SHS_DS_GRAD_ACCUM);
}

static shs_status_t read_clipping(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec) {
    shs_ds_config_t *ds = r->ds;
    double d = 0;
    if (shs__ds_is_auto(v)) {
        ds->autos |= 1u << SHS_DS_AUTO_CLIP;
        ds->vals.strategy.clip_norm = 1.0f; /* TrainingArguments.max_grad_norm */
        shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_AUTO);
        return SHS_OK;
    }
    SHS_CHECK(shs__ds_get_num(r, kp, v, 0, 1e30, &d));
    ds->vals.strategy.clip_norm = (float)d;
    shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_zero(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                              void *sec) {
    return shs__ds_read_zero(r, v, &((root_t *)sec)->z);
}

static shs_status_t read_fp16(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                              void *sec) {
    return shs__ds_read_fp16(r, v, &((root_t *)sec)->f);
}

static shs_status_t read_bf16(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                              void *sec) {
    root_t *rt = sec;
    if (rt->bf16_seen)
        return shs_set_error(SHS_PARSE, "%s: %s: bf16 is given twice (bf16 and its old name bfloat16)", r->path, kp);
    rt->bf16_seen = 1;
    return shs__ds_read_bf16(r, kp, v, &rt->bf16);
}

static shs_status_t read_optimizer(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                   void *sec) {
    return shs__ds_read_optimizer(r, v);
}

static shs_status_t read_comm_dtype(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                    void *sec) {
    if (json_is_null(v)) return SHS_OK;
    SHS_CHECK(shs__ds_dtype(r, kp, v, &r->ds->vals.strategy.reduce_dtype));
    shs__ds_set(r->ds, SHS_DS_REDUCE_DTYPE, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_data_types(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                    void *sec) {
    return shs__ds_read_data_types(r, v);
}

static shs_status_t read_scheduler(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                   void *sec) {
    return shs__ds_read_scheduler(r, v);
}

static shs_status_t read_prescale(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec) {
    SHS_CHECK(shs__ds_get_bool(r, kp, v, &r->ds->vals.strategy.prescale_gradients));
    shs__ds_set(r->ds, SHS_DS_GRAD_AVERAGING, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

static shs_status_t read_predivide(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                   void *sec) {
    double d = 0;
    if (json_is_number(v) && json_number_value(v) == 0) /* 1. / 0 in allreduce_bucket */
        return shs__ds_bad_type(r, kp, v, "a number > 0 (DeepSpeed divides by it: 0 is its ZeroDivisionError)");
    SHS_CHECK(shs__ds_get_num(r, kp, v, 1e-30, 1e30, &d));
    r->ds->vals.strategy.gradient_predivide_factor = (float)d;
    shs__ds_set(r->ds, SHS_DS_GRAD_AVERAGING, SHS_DS_FROM_CONFIG);
    return SHS_OK;
}

/* "mean" (DeepSpeed's default) is the averaging shardsim models; "sum" leaves the gradient summed */
static shs_status_t read_allreduce_op(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                      void *sec) {
    const char *op;
    SHS_CHECK(shs__ds_get_str(r, kp, v, &op));
    if (!strcmp(op, "mean")) return SHS_OK;
    if (!strcmp(op, "sum")) return shs__ds_not_modelled(r, kp, v, "%s", row->shardsim);
    return shs__ds_bad_type(r, kp, v, "\"mean\" or \"sum\"");
}

static shs_status_t read_compile(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    if (!json_is_object(v)) return shs__ds_bad_type(r, kp, v, "an object");
    json_t *dc = json_object_get(v, "deepcompile");
    if (dc) SHS_CHECK(shs__ds_refuse_true(r, "compile.deepcompile", dc, "DeepCompile's compiled ZeRO passes"));
    shs__ds_ignore(r, kp, "DeepCompile off: no effect");
    return SHS_OK;
}

#define REDUCTION "changes how gradients are reduced"
#define OWN_MODEL "shardsim simulates data parallelism with its own model and data"

/* A feature section with an "enabled" flag (default false): on, the feature
 * changes the model or the data, which shardsim does not model; off, it has
 * no effect. */
static shs_status_t read_enabled_section(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                         const json_t *v, void *sec) {
    if (!json_is_object(v)) return shs__ds_bad_type(r, kp, v, "an object");
    json_t *en = json_object_get(v, "enabled");
    int on = 0;
    if (en) SHS_CHECK(shs__ds_get_bool(r, kp, en, &on));
    if (on) return shs__ds_not_modelled(r, kp, v, "%s", OWN_MODEL);
    shs__ds_ignore(r, kp, "enabled false: no effect");
    return SHS_OK;
}

static shs_status_t read_amp(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                             void *sec) {
    if (!json_is_object(v)) return shs__ds_bad_type(r, kp, v, "an object");
    json_t *en = json_object_get(v, "enabled");
    return en ? shs__ds_refuse_true(r, "amp.enabled", en, "NVIDIA Apex AMP") : SHS_OK;
}

#define MONITOR "monitor"
static const shs__ds_key_t top_keys[] = {
    SHS__DS_MAP("train_batch_size", "the global batch: micro-batch x accumulation x world", "DeepSpeed's batch rule",
        read_train_batch),
    SHS__DS_MAP("train_micro_batch_size_per_gpu", "sequences per rank per micro-step", "micro-batch", read_micro),
    SHS__DS_MAP("gradient_accumulation_steps", "micro-steps per optimizer step", "accumulation", read_accum),
    SHS__DS_MAP("gradient_clipping", "clip the global 2-norm to this (default 0: off)", "clipping", read_clipping),
    SHS__DS_MAP("zero_optimization", "ZeRO (runtime/zero/config.py)", "ds_config_zero.c", read_zero),
    SHS__DS_MAP("fp16", "fp16 training and its loss scaler", "ds_config_precision.c", read_fp16),
    SHS__DS_MAP("bf16", "bf16 training", "ds_config_precision.c", read_bf16),
    SHS__DS_MAP("bfloat16", "old name of bf16", "ds_config_precision.c", read_bf16),
    SHS__DS_MAP("optimizer", "the optimizer DeepSpeed builds", "ds_config_optimizer.c", read_optimizer),
    SHS__DS_MAP("communication_data_type", "dtype gradients are reduced in (default: the param dtype)",
        "reduce dtype", read_comm_dtype),
    SHS__DS_MAP("data_types", "grad_accum_dtype", "ds_config_precision.c", read_data_types),
    SHS__DS_MAP_V("scheduler", "the learning-rate scheduler stepped after every applied optimizer step",
        "lr_schedule.h (ds_config_scheduler.c)", read_scheduler),
    SHS__DS_MAP_V("prescale_gradients", "divide gradients by the world before the reduction (default false)",
        "strategy.h prescale_gradients (stage 0; ZeRO-1 does not read it; ZeRO-2/3 refuse it)", read_prescale),
    SHS__DS_MAP_V("gradient_predivide_factor", "divide by f before the reduction, by N/f after (default 1)",
        "strategy.h gradient_predivide_factor (as prescale_gradients)", read_predivide),
    SHS__DS_MAP_V("gradient_allreduce_op", "mean (default) or sum of the data-parallel gradients",
        "mean; sum (gradients not averaged) refused", read_allreduce_op),
    SHS__DS_REFUSE_IF_TRUE("sparse_gradients", "sparse embedding gradients all-gathered", REDUCTION),
    SHS__DS_MAP("amp", "NVIDIA Apex AMP", "enabled refused", read_amp),
    SHS__DS_MAP("elasticity", "elastic batch sizes over changing worlds (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_REFUSE("pipeline", "pipeline engine settings", OWN_MODEL),
    SHS__DS_REFUSE("sparse_attention", "block-sparse attention in the model", OWN_MODEL),
    SHS__DS_REFUSE("compression_training", "quantization and pruning of the model", OWN_MODEL),
    SHS__DS_MAP("quantize_training", "MoQ quantized training (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_MAP("curriculum_learning", "sequence-length curriculum (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_MAP("data_efficiency", "data sampling and routing (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_MAP("progressive_layer_drop", "layers skipped in training (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_MAP("torch_autocast", "torch.autocast around the model (enabled, default false)",
        "enabled: refused; off: no effect", read_enabled_section),
    SHS__DS_REFUSE("tensor_parallel", "AutoTP tensor parallelism", OWN_MODEL),
    SHS__DS_DEFAULT_ONLY("sequence_parallel_size", "Ulysses sequence parallelism (default 1: off)", OWN_MODEL, 1),
    SHS__DS_IGNORE("steps_per_print", "progress printout interval", "logging"),
    SHS__DS_IGNORE("wall_clock_breakdown", "per-phase timings printed", "timing printout"),
    SHS__DS_IGNORE("memory_breakdown", "memory printed", "memory printout"),
    SHS__DS_IGNORE("dump_state", "the engine's state printed", "printout"),
    SHS__DS_IGNORE("tensorboard", "TensorBoard monitor", MONITOR),
    SHS__DS_IGNORE("wandb", "Weights & Biases monitor", MONITOR),
    SHS__DS_IGNORE("csv_monitor", "CSV monitor", MONITOR),
    SHS__DS_IGNORE("comet", "Comet monitor", MONITOR),
    SHS__DS_IGNORE("flops_profiler", "FLOPs profiler", "profiler"),
    SHS__DS_IGNORE("comms_logger", "communication logger", "logging"),
    SHS__DS_IGNORE("timers", "timer synchronisation", "timing printout"),
    SHS__DS_IGNORE("zero_allow_untested_optimizer", "lets ZeRO wrap a client optimizer",
        "a permission, no behaviour"),
    SHS__DS_IGNORE("checkpoint", "checkpoint tag validation and storage", "checkpoint format and tag checks"),
    SHS__DS_IGNORE("dataloader_drop_last", "DeepSpeed's data loader drops the last batch",
        "DeepSpeed's data loader; shardsim's data is its own"),
    SHS__DS_IGNORE("activation_checkpointing", "settings of deepspeed.checkpointing",
        "configures deepspeed.checkpointing, used only by models that call it (shardsim: --checkpoint-activations)"),
    SHS__DS_IGNORE("aio", "async I/O for NVMe offload", "NVMe I/O settings (NVMe offload is refused)"),
    SHS__DS_IGNORE("zero_force_ds_cpu_optimizer", "with offload, insist the optimizer is DeepSpeed's CPU Adam "
        "(default true)", "a check on the client's optimizer, no behaviour"),
    SHS__DS_IGNORE("disable_allgather", "read, used by no engine path", "no behaviour"),
    SHS__DS_IGNORE("vocabulary_size", "a warning when not a multiple of 8", "a warning's input"),
    SHS__DS_IGNORE("graph_harvesting", "CUDA-graph capture of the forward", "the same kernels replayed: timing only"),
    SHS__DS_IGNORE("log_level", "DeepSpeed's logger level", "logging"),
    SHS__DS_IGNORE("eigenvalue", "Hessian eigenvalues for MoQ's quantization schedule",
        "used by quantize_training only (enabled: refused)"),
    SHS__DS_IGNORE("autotuning", "the autotuner's search settings", "a separate tool's settings"),
    SHS__DS_IGNORE("nebula", "the Nebula checkpoint service", "checkpoint storage"),
    SHS__DS_IGNORE("use_data_before_expert_parallelism", "MoE process-group order",
        "no experts in shardsim's models"),
    SHS__DS_IGNORE("seq_parallel_communication_data_type", "sequence parallelism's reduction dtype",
        "sequence parallelism is off (sequence_parallel_size above 1 refused)"),
    SHS__DS_IGNORE("hybrid_engine", "RLHF generation with inference kernels", "generation; training steps unchanged"),
    SHS__DS_MAP("compile", "DeepCompile settings", "deepcompile true refused, else no effect", read_compile),
    SHS__DS_REFUSE_IF_FALSE("managed_gradient_accumulation", "false: the caller marks accumulation boundaries "
        "(default true)", "accumulation boundaries set by the caller"),
    SHS__DS_REFUSE("weight_quantization", "weights held quantized", OWN_MODEL),
    SHS__DS_REFUSE("expert_parallel", "mixture-of-experts parallelism", OWN_MODEL),
};

/* A key DeepSpeed does not read at the top level: it passes over it (its
 * config reads the keys it knows one by one), so it is accepted and listed,
 * with the known key it is closest to (at most 2 edits, or one name inside
 * the other). */
static int edit_distance(const char *a, const char *b) {
    size_t m = strlen(a), n = strlen(b);
    if (m > 63 || n > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= m; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= n; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= m; i++)
        for (size_t j = 1; j <= n; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[m][n];
}

static shs_status_t top_unknown(shs__ds_reader_t *r, const char *kp, const json_t *v, void *sec) {
    const char *near = NULL;
    int best = 3;
    size_t kl = strlen(kp);
    for (size_t i = 0; i < sizeof top_keys / sizeof top_keys[0]; i++) {
        const char *k = top_keys[i].key;
        int d = edit_distance(kp, k);
        if (kl >= 8 && (strstr(k, kp) || strstr(kp, k)) && d > 2) d = 2;
        if (d < best) best = d, near = k;
    }
    char why[160];
    snprintf(why, sizeof why, "not a DeepSpeed key: DeepSpeed passes over top-level keys it does not read%s%s%s",
             near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
    shs__ds_ignore(r, kp, why);
    return SHS_OK;
}

static shs_status_t read_root(shs__ds_reader_t *r, const json_t *root) {
    shs_ds_config_t *ds = r->ds;
    root_t rt = {.z = {.mics = -1}, .f = {.power = 16, .window = 1000, .hysteresis = 2, .min_scale = 1}};
    SHS_CHECK(shs__ds_read_keys(r, "", root, SHS__DS_ROWS(top_keys), &rt, top_unknown));
    SHS_CHECK(shs__ds_zero_finish(r, &rt.z));
    SHS_CHECK(shs__ds_precision_finish(r, json_object_get(root, "fp16"), &rt.f, rt.bf16));
    if (!json_object_get(root, "gradient_clipping")) {
        ds->vals.strategy.clip_norm = 0;
        shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_DS_DEFAULT);
    }
    return SHS_OK;
}
#endif

shs_status_t shs_ds_config_load(const char *path, shs_ds_config_t *out) {
    return shs_ds_config_load_for(path, SHS_DS_FOR_TRAIN, out);
}

shs_status_t shs_ds_config_load_for(const char *path, shs_ds_use_t use, shs_ds_config_t *out) {
#ifndef SHS_HAVE_JANSSON
    (void)out;
    (void)use;
    return shs_set_error(SHS_UNSUPPORTED, "%s: reading a DeepSpeed config %s", path,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
#else
    json_t *root;
    SHS_CHECK(shs__json_object_load(path, "DeepSpeed keys", &root));
    shs_ds_config_t *ds = calloc(1, sizeof *ds);
    if (!ds) {
        json_decref(root);
        return shs_set_error(SHS_HOST_OOM, "%s: out of host memory", path);
    }
    snprintf(ds->path, sizeof ds->path, "%s", path);
    ds->use = use;
    ds->vals = shs_train_default_config();
    shs__ds_reader_t *r = calloc(1, sizeof *r);
    shs_status_t st = SHS_HOST_OOM;
    if (r) {
        r->path = ds->path;
        r->ds = ds;
        st = read_root(r, root);
        if (st == SHS_OK && r->num_refused == 1) {
            st = shs_set_error(SHS_UNSUPPORTED, "%s: %s", path, r->refused[0]);
        } else if (st == SHS_OK && r->num_refused > 1) { /* every refused key in one message */
            char msg[SHS__DS_MAX_REFUSED * 330];
            size_t at = 0;
            /* the error text holds ~1 KiB: each refusal cut to its share, the key path first in each */
            int k = r->num_refused < SHS__DS_MAX_REFUSED ? r->num_refused : SHS__DS_MAX_REFUSED, share = 880 / k;
            for (int i = 0; i < k && at < sizeof msg; i++) {
                int rl = (int)strlen(r->refused[i]);
                at += (size_t)snprintf(msg + at, sizeof msg - at, "\n  %d. %.*s%s", i + 1, rl > share ? share - 3 : rl,
                                       r->refused[i], rl > share ? "..." : "");
            }
            if (r->num_refused > SHS__DS_MAX_REFUSED && at < sizeof msg)
                snprintf(msg + at, sizeof msg - at, "\n  (and %d more)", r->num_refused - SHS__DS_MAX_REFUSED);
            st = shs_set_error(SHS_UNSUPPORTED, "%s: %d keys refused:%s", path, r->num_refused, msg);
        }
    } else {
        shs_set_error(SHS_HOST_OOM, "%s: out of host memory", path);
    }
    free(r);
    json_decref(root);
    if (st == SHS_OK) *out = *ds;
    free(ds);
    return st;
#endif
}
