/* ds_config.c - DeepSpeed's ds_config.json into shs_train_config_t (see
 * ds_config.h).
 *
 * Read from DeepSpeed's sources (deepspeedai/DeepSpeed): docs/_pages/
 * config-json.md (each key's meaning), deepspeed/runtime/config.py (batch
 * rule, duplicate keys refused, optimizer names), runtime/zero/config.py
 * (zero_optimization fields, aliases and defaults), runtime/precision_config.py
 * (fp16/bf16 fields and defaults), runtime/fp16/loss_scaler.py
 * (DynamicLossScaler.update_scale) and runtime/engine.py
 * (_configure_basic_optimizer). The mapping:
 *
 *   zero_optimization.stage 0..3 (default 0)  -> ddp, zero1, zero2, zero3
 *   zero_optimization.mics_shard_size G > 0   -> hybrid_shard with G ranks per
 *       shard group (MiCS: ZeRO-3 within groups, replicas across); stage 3 only
 *   offload_optimizer.device cpu | none       -> offload optimizer (ZeRO-Offload)
 *   offload_param.device cpu | none           -> offload params (stage 3; shardsim's
 *       params offload keeps the optimizer on the host too, so it needs
 *       offload_optimizer cpu beside it); nvme refused by name
 *   stage3_param_persistence_threshold T (default 1e5; alias
 *       param_persistence_threshold), stage 3 -> --replicate-below T. DeepSpeed
 *       keeps each *parameter* with fewer than T elements unpartitioned;
 *       shardsim shards wrap units (flat parameters), so here a whole *unit*
 *       with fewer than T elements stays replicated and a small parameter
 *       inside a larger unit is sharded with it (a header note says so).
 *   stage3_prefetch_bucket_size (default 5e7; alias prefetch_bucket_size):
 *       0 -> no prefetch; > 0 -> shardsim's one-unit-ahead prefetch (the
 *       element budget is not modelled: a header note says so)
 *   bf16.enabled (alias bfloat16)             -> param dtype bf16
 *   fp16.enabled                              -> param dtype f16 with DeepSpeed's loss
 *       scaler (strategy.h SHS_SCALER_DEEPSPEED, DynamicLossScaler's rule):
 *       initial_scale_power p -> initial scale 2^p (default 16);
 *       loss_scale_window W (default 1000) -> scale_window W (counted from
 *       the last overflow); hysteresis (default 2) -> delayed_shift;
 *       consecutive_hysteresis (default false); min_loss_scale m (default
 *       1) -> the floor max(scale/2, m), and an overflow at m stops the run
 *       as DeepSpeed's raise_error_at_min_scale (0: no floor, as DeepSpeed
 *       before it required m > 0). loss_scale x > 0 -> a static scale x
 *       (SHS_SCALER_STATIC: overflow steps still skipped, as ZeRO's step()
 *       does); the dynamic keys then have no effect (a header note says so).
 *   communication_data_type fp32|fp16|bf16    -> reduce dtype
 *   data_types.grad_accum_dtype               -> grad accum dtype
 *   gradient_clipping x (default 0: none)     -> clip the global 2-norm to x
 *   gradient_accumulation_steps, train_micro_batch_size_per_gpu,
 *       train_batch_size                      -> accumulation, micro-batch, and
 *       DeepSpeed's batch rule (shs_ds_config_apply)
 *   optimizer.type Adam | AdamW (any case, as DeepSpeed lower-cases its own
 *       names) -> AdamW: DeepSpeed's Adam runs with adam_w_mode true by default
 *       (decoupled weight decay, i.e. AdamW); adam_w_mode false with type
 *       Adam is Adam with L2 decay, not modelled; "SGD" (torch.optim's name,
 *       which DeepSpeed looks up as is) -> SGD
 *   optimizer.params lr, betas [b1, b2], eps, weight_decay, momentum (SGD).
 *       weight_decay when absent: 0 (FusedAdam's and DeepSpeedCPUAdam's
 *       default), 0.01 with torch_adam (torch.optim.AdamW's); lr when
 *       absent: 1e-3 (the optimizers' default). bias_correction false,
 *       amsgrad true, SGD dampening / nesterov: refused; max_grad_norm
 *       refused as DeepSpeed refuses it (use gradient_clipping).
 *
 * Refused as not modelled (they change the numbers): scheduler (shardsim
 * keeps lr constant), prescale_gradients true, gradient_predivide_factor
 * != 1, sparse_gradients true, amp / fp16.auto_cast / *_master_weights_*
 * enabled, reduce_scatter false, zero++ (hpZ, quantized weights/gradients),
 * stage3_max_live_parameters / max_reuse_distance other than their 1e9
 * default, offload ratio/buffer settings, elasticity, pipeline, sparse
 * attention, compression, curriculum and data efficiency sections.
 * Ignored (change nothing shardsim computes): see `ignored_top` and
 * `ignored_zero` below, each with its reason.
 */
#include "shardsim/ds_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shardsim/features.h"
#include "shardsim/strategy.h"
#include "core/json_object.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

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

/* Keys accepted without effect, with the reason the header shows. */
typedef struct {
    const char *key, *why;
} ignored_key_t;

static const ignored_key_t ignored_top[] = {
    {"steps_per_print", "logging"},
    {"wall_clock_breakdown", "timing printout"},
    {"memory_breakdown", "memory printout"},
    {"dump_state", "printout"},
    {"tensorboard", "monitor"},
    {"wandb", "monitor"},
    {"csv_monitor", "monitor"},
    {"comet", "monitor"},
    {"flops_profiler", "profiler"},
    {"comms_logger", "logging"},
    {"timers", "timing printout"},
    {"zero_allow_untested_optimizer", "a permission, no behaviour"},
    {"checkpoint", "checkpoint format and tag checks"},
    {"dataloader_drop_last", "DeepSpeed's data loader; shardsim's data is its own"},
    {"activation_checkpointing", "configures deepspeed.checkpointing, used only by models that call it "
                                 "(shardsim: --checkpoint-activations)"},
    {"aio", "NVMe I/O settings (NVMe offload is refused)"},
};

static const ignored_key_t ignored_zero[] = {
    {"contiguous_gradients", "a contiguous gradient buffer against fragmentation; shardsim's memory does not fragment"},
    {"overlap_comm", "timing only"},
    {"allgather_partitions", "ZeRO-1/2 all-gather implementation; same bytes"},
    {"allgather_bucket_size", "groups the same all-gathers into other calls; same results"},
    {"reduce_bucket_size", "groups the same reductions into other calls; shardsim reduces per wrap unit"},
    {"round_robin_gradients", "gradient copy order under offload; same results"},
    {"sub_group_size", "optimizer step granularity; same results"},
    {"stage3_gather_16bit_weights_on_model_save", "checkpoint saving"},
    {"gather_16bit_weights_on_model_save", "checkpoint saving"},
    {"stage3_gather_fp16_weights_on_model_save", "checkpoint saving"},
    {"elastic_checkpoint", "checkpoint format"},
    {"load_from_fp32_weights", "checkpoint loading"},
    {"ignore_unused_parameters", "every parameter is used"},
    {"memory_efficient_linear", "activation memory of DeepSpeed's linear; shardsim's model is its own"},
    {"log_trace_cache_warnings", "logging"},
};

static const ignored_key_t ignored_offload[] = {
    {"pin_memory", "pinned host memory: transfer speed only"},
};

#define MAX_REFUSED 16

typedef struct {
    const char *path;
    shs_ds_config_t *ds;
    int num_refused;                 /* keys refused so far (all are named in one error) */
    char refused[MAX_REFUSED][320];
} rd_t;

/* The error just set (SHS_UNSUPPORTED, "path: ...") kept for the one error
 * that names every refused key of the file. */
static void keep_refused(rd_t *r) {
    const char *e = shs_last_error();
    size_t n = strlen(r->path);
    if (!strncmp(e, r->path, n) && !strncmp(e + n, ": ", 2)) e += n + 2;
    if (r->num_refused < MAX_REFUSED) snprintf(r->refused[r->num_refused], sizeof r->refused[0], "%s", e);
    r->num_refused++;
}

/* A check whose SHS_UNSUPPORTED (a refused key) is kept and reading goes on;
 * any other error returns. */
#define KEY(r, expr)                                     \
    do {                                                 \
        shs_status_t key_st_ = (expr);                   \
        if (key_st_ == SHS_UNSUPPORTED) keep_refused(r); \
        else if (key_st_ != SHS_OK) return key_st_;      \
    } while (0)

static int is_auto(const json_t *v) { return json_is_string(v) && !strcmp(json_string_value(v), "auto"); }

/* "key" or "parent.key" */
static void key_path(char *out, size_t n, const char *parent, const char *key) {
    if (parent && *parent) snprintf(out, n, "%s.%s", parent, key);
    else snprintf(out, n, "%s", key);
}

static char *show(const json_t *v, char *buf, size_t n) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, n, "%s", s ? s : "?");
    free(s);
    return buf;
}

static shs_status_t not_modelled(rd_t *r, const char *kp, const json_t *v, const char *fmt, ...) {
    char val[128], why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return shs_set_error(SHS_UNSUPPORTED, "%s: %s = %s is not modelled: %s", r->path, kp, show(v, val, sizeof val), why);
}

static shs_status_t bad_type(rd_t *r, const char *kp, const json_t *v, const char *want) {
    char val[128];
    if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
        return shs_set_error(SHS_PARSE, "%s: %s = \"auto\": 'auto' is filled in by the Hugging Face Trainer; give %s",
                             r->path, kp, want);
    return shs_set_error(SHS_PARSE, "%s: %s = %s: want %s", r->path, kp, show(v, val, sizeof val), want);
}

static shs_status_t get_bool(rd_t *r, const char *kp, const json_t *v, int *out) {
    if (!json_is_boolean(v)) return bad_type(r, kp, v, "true or false");
    *out = json_is_true(v);
    return SHS_OK;
}

static shs_status_t get_num(rd_t *r, const char *kp, const json_t *v, double lo, double hi, double *out) {
    char want[96];
    snprintf(want, sizeof want, "a number in [%g, %g]", lo, hi);
    if (!json_is_number(v)) return bad_type(r, kp, v, want);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return bad_type(r, kp, v, want);
    *out = d;
    return SHS_OK;
}

/* An integer, or a real with an integral value (5e8 is common in configs). */
static shs_status_t get_int(rd_t *r, const char *kp, const json_t *v, double lo, double hi, long *out) {
    char want[96];
    snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", lo, hi);
    if (!json_is_number(v)) return bad_type(r, kp, v, want);
    double d = json_number_value(v);
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi) return bad_type(r, kp, v, want);
    *out = (long)d;
    return SHS_OK;
}

static shs_status_t get_str(rd_t *r, const char *kp, const json_t *v, const char **out) {
    if (!json_is_string(v)) return bad_type(r, kp, v, "a string");
    *out = json_string_value(v);
    return SHS_OK;
}

static shs_status_t want_object(rd_t *r, const char *kp, const json_t *v) {
    return json_is_object(v) ? SHS_OK : bad_type(r, kp, v, "an object");
}

static shs_status_t unknown_key(rd_t *r, const char *kp) {
    return shs_set_error(SHS_UNSUPPORTED,
                         "%s: unknown key %s (shardsim refuses keys it does not know rather than ignore a "
                         "misspelt one; see include/shardsim/ds_config.h)", r->path, kp);
}

/* An ignored key: noted with its reason; 1 if `key` is in the table. */
static int try_ignored(rd_t *r, const ignored_key_t *t, size_t n, const char *parent, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].key, key)) {
            shs_ds_config_t *ds = r->ds;
            if (ds->num_ignored < SHS_DS_MAX_NOTES) {
                char kp[80];
                key_path(kp, sizeof kp, parent, key);
                snprintf(ds->ignored[ds->num_ignored++], sizeof ds->ignored[0], "%s (%s)", kp, t[i].why);
            }
            return 1;
        }
    return 0;
}

static void note(shs_ds_config_t *ds, const char *fmt, ...) {
    if (ds->num_notes >= SHS_DS_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ds->notes[ds->num_notes++], sizeof ds->notes[0], fmt, ap);
    va_end(ap);
}

static void set(shs_ds_config_t *ds, shs_ds_setting_t s, shs_ds_source_t from) { ds->src[s] = from; }

/* A flag that is refused when true (default false). */
static shs_status_t refuse_true(rd_t *r, const char *kp, const json_t *v, const char *why) {
    int b = 0;
    SHS_CHECK(get_bool(r, kp, v, &b));
    return b ? not_modelled(r, kp, v, "%s", why) : SHS_OK;
}

/* A number accepted only at DeepSpeed's default `dflt`. */
static shs_status_t only_default(rd_t *r, const char *kp, const json_t *v, double dflt, const char *why) {
    double d = 0;
    SHS_CHECK(get_num(r, kp, v, -1e300, 1e300, &d));
    return d == dflt ? SHS_OK : not_modelled(r, kp, v, "%s (only DeepSpeed's default %g is)", why, dflt);
}

/* offload_optimizer / offload_param: *device 0 none, 1 cpu. */
static shs_status_t read_offload(rd_t *r, const char *kp, const json_t *obj, int *device) {
    SHS_CHECK(want_object(r, kp, obj));
    const char *key;
    json_t *v;
    *device = 0;
    json_object_foreach((json_t *)obj, key, v) {
        char sub[128];
        key_path(sub, sizeof sub, kp, key);
        if (!strcmp(key, "device")) {
            const char *d = NULL;
            if (json_is_null(v)) continue;
            SHS_CHECK(get_str(r, sub, v, &d));
            if (!strcmp(d, "cpu")) *device = 1;
            else if (!strcmp(d, "none")) *device = 0;
            else if (!strcmp(d, "nvme")) KEY(r, not_modelled(r, sub, v, "shardsim offloads to host memory only (cpu)"));
            else return bad_type(r, sub, v, "\"cpu\", \"none\" or \"nvme\"");
        } else if (try_ignored(r, ignored_offload, sizeof ignored_offload / sizeof ignored_offload[0], kp, key)) {
        } else if (!strcmp(key, "ratio")) {
            KEY(r, only_default(r, sub, v, 1.0, "partial offload"));
        } else if (!strcmp(key, "fast_init") || !strcmp(key, "pipeline_read") || !strcmp(key, "pipeline_write")) {
            KEY(r, refuse_true(r, sub, v, "NVMe swapping"));
        } else if (!strcmp(key, "nvme_path") || !strcmp(key, "buffer_count") || !strcmp(key, "buffer_size") ||
                   !strcmp(key, "max_in_cpu")) {
            KEY(r, not_modelled(r, sub, v, "NVMe swapping buffers (shardsim offloads to host memory only)"));
        } else {
            KEY(r, unknown_key(r, sub));
        }
    }
    return SHS_OK;
}

typedef struct {
    long stage;
    int has_stage;
    int off_opt, off_param;
    long mics;
    long persistence;
    int has_persistence;
    long prefetch;
    int has_prefetch;
} zero_t;

static shs_status_t read_zero(rd_t *r, const json_t *obj, zero_t *z) {
    SHS_CHECK(want_object(r, "zero_optimization", obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        key_path(kp, sizeof kp, "zero_optimization", key);
        if (!strcmp(key, "stage")) {
            SHS_CHECK(get_int(r, kp, v, 0, 3, &z->stage));
            z->has_stage = 1;
        } else if (!strcmp(key, "offload_optimizer")) {
            if (!json_is_null(v)) KEY(r, read_offload(r, kp, v, &z->off_opt));
        } else if (!strcmp(key, "offload_param")) {
            if (!json_is_null(v)) KEY(r, read_offload(r, kp, v, &z->off_param));
        } else if (!strcmp(key, "stage3_param_persistence_threshold") || !strcmp(key, "param_persistence_threshold")) {
            if (z->has_persistence) return shs_set_error(SHS_PARSE, "%s: %s: the persistence threshold is given twice "
                                                         "(it and its alias)", r->path, kp);
            if (is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PERSISTENCE;
            else SHS_CHECK(get_int(r, kp, v, 0, 1e15, &z->persistence));
            z->has_persistence = 1;
        } else if (!strcmp(key, "stage3_prefetch_bucket_size") || !strcmp(key, "prefetch_bucket_size")) {
            if (z->has_prefetch) return shs_set_error(SHS_PARSE, "%s: %s: the prefetch bucket size is given twice "
                                                      "(it and its alias)", r->path, kp);
            if (is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PREFETCH;
            else SHS_CHECK(get_int(r, kp, v, 0, 1e18, &z->prefetch));
            z->has_prefetch = 1;
        } else if (!strcmp(key, "reduce_bucket_size") && is_auto(v)) {
            r->ds->autos |= 1u << SHS_DS_AUTO_REDUCE_BUCKET;
            try_ignored(r, ignored_zero, sizeof ignored_zero / sizeof ignored_zero[0], "zero_optimization", key);
        } else if (!strcmp(key, "mics_shard_size")) {
            SHS_CHECK(get_int(r, kp, v, -1, SHS_MAX_WORLD, &z->mics));
            if (z->mics == 0) return bad_type(r, kp, v, "-1 (off) or a group size >= 1");
        } else if (!strcmp(key, "mics_hierarchical_params_gather")) {
            KEY(r, refuse_true(r, kp, v, "MiCS's two-level all-gather"));
        } else if (!strcmp(key, "reduce_scatter")) {
            int b = 0;
            SHS_CHECK(get_bool(r, kp, v, &b));
            if (!b) KEY(r, not_modelled(r, kp, v, "ZeRO gradients reduced by all-reduce instead of reduce-scatter"));
        } else if (!strcmp(key, "stage3_max_live_parameters") || !strcmp(key, "max_live_parameters") ||
                   !strcmp(key, "stage3_max_reuse_distance") || !strcmp(key, "max_reuse_distance")) {
            KEY(r, only_default(r, kp, v, 1e9, "a budget on gathered parameters"));
        } else if (!strcmp(key, "zero_hpz_partition_size")) {
            KEY(r, only_default(r, kp, v, 1, "ZeRO++ hierarchical partitioning"));
        } else if (!strcmp(key, "zero_quantized_weights") || !strcmp(key, "zero_quantized_gradients") ||
                   !strcmp(key, "zero_quantized_nontrainable_weights")) {
            KEY(r, refuse_true(r, kp, v, "ZeRO++ quantized communication"));
        } else if (!strcmp(key, "cpu_offload") || !strcmp(key, "cpu_offload_param") ||
                   !strcmp(key, "cpu_offload_use_pin_memory")) {
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: %s is DeepSpeed's deprecated spelling: use offload_optimizer / "
                                 "offload_param {\"device\": \"cpu\"}", r->path, kp));
        } else if (!try_ignored(r, ignored_zero, sizeof ignored_zero / sizeof ignored_zero[0], "zero_optimization", key)) {
            KEY(r, unknown_key(r, kp));
        }
    }
    return SHS_OK;
}

typedef struct {
    int enabled, has, is_auto;
    double loss_scale;
    long power, window, hysteresis;
    double min_scale;
    int consecutive;
} fp16_t;

static shs_status_t read_fp16(rd_t *r, const json_t *obj, fp16_t *f) {
    SHS_CHECK(want_object(r, "fp16", obj));
    const char *key;
    json_t *v;
    f->has = 1;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        key_path(kp, sizeof kp, "fp16", key);
        if (!strcmp(key, "enabled")) {
            if (is_auto(v)) {
                f->is_auto = 1;
                r->ds->autos |= 1u << SHS_DS_AUTO_FP16;
            } else SHS_CHECK(get_bool(r, kp, v, &f->enabled));
        } else if (!strcmp(key, "loss_scale")) SHS_CHECK(get_num(r, kp, v, 0, 1e38, &f->loss_scale));
        else if (!strcmp(key, "initial_scale_power")) SHS_CHECK(get_int(r, kp, v, 0, 126, &f->power));
        else if (!strcmp(key, "loss_scale_window")) SHS_CHECK(get_int(r, kp, v, 1, 1e9, &f->window));
        else if (!strcmp(key, "hysteresis")) SHS_CHECK(get_int(r, kp, v, 1, 1e9, &f->hysteresis));
        else if (!strcmp(key, "min_loss_scale")) SHS_CHECK(get_num(r, kp, v, 0, 1e38, &f->min_scale));
        else if (!strcmp(key, "consecutive_hysteresis")) SHS_CHECK(get_bool(r, kp, v, &f->consecutive));
        else if (!strcmp(key, "auto_cast"))
            KEY(r, refuse_true(r, kp, v, "inputs cast to fp16 by the engine; fix: set it false or remove it (the "
                                         "model then runs in the param dtype f16)"));
        else if (!strcmp(key, "fp16_master_weights_and_grads"))
            KEY(r, refuse_true(r, kp, v, "shardsim keeps f32 master weights; fix: set it false or remove it"));
        else if (!strcmp(key, "consistent_hysteresis")) /* not DeepSpeed's: its FP16 model forbids unknown fields */
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s (DeepSpeed refuses it too); fix: "
                                 "fp16.consecutive_hysteresis is DeepSpeed's key", r->path, kp));
        else
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: unknown key %s; fix: fp16 takes enabled, loss_scale, "
                                 "initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis, "
                                 "min_loss_scale (DeepSpeed's precision_config.py)", r->path, kp));
    }
    return SHS_OK;
}

static shs_status_t read_bf16(rd_t *r, const char *name, const json_t *obj, int *enabled) {
    *enabled = 0;
    SHS_CHECK(want_object(r, name, obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        key_path(kp, sizeof kp, name, key);
        if (!strcmp(key, "enabled")) {
            if (is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_BF16;
            else SHS_CHECK(get_bool(r, kp, v, enabled));
        } else if (!strcmp(key, "immediate_grad_update")) KEY(r, refuse_true(r, kp, v, "updates during backward"));
        else if (!strcmp(key, "check_grad_overflow")) KEY(r, refuse_true(r, kp, v, "bf16 overflow skipping"));
        else if (!strcmp(key, "bf16_master_weights_and_grads") || !strcmp(key, "bf16_optimizer_states"))
            KEY(r, refuse_true(r, kp, v, "shardsim keeps f32 master weights and optimizer state"));
        else KEY(r, unknown_key(r, kp));
    }
    return SHS_OK;
}

static shs_status_t ds_dtype(rd_t *r, const char *kp, const json_t *v, shs_dtype_t *out) {
    const char *s = NULL;
    SHS_CHECK(get_str(r, kp, v, &s));
    if (!strcasecmp(s, "fp32") || !strcasecmp(s, "float32") || !strcasecmp(s, "float")) *out = SHS_F32;
    else if (!strcasecmp(s, "fp16") || !strcasecmp(s, "float16") || !strcasecmp(s, "half")) *out = SHS_F16;
    else if (!strcasecmp(s, "bf16") || !strcasecmp(s, "bfloat16")) *out = SHS_BF16;
    else return bad_type(r, kp, v, "\"fp32\", \"fp16\" or \"bf16\"");
    return SHS_OK;
}

static shs_status_t read_optimizer(rd_t *r, const json_t *obj) {
    shs_ds_config_t *ds = r->ds;
    SHS_CHECK(want_object(r, "optimizer", obj));
    json_t *type = json_object_get(obj, "type"), *params = json_object_get(obj, "params");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strcmp(key, "type") && strcmp(key, "params")) {
            char kp[128];
            key_path(kp, sizeof kp, "optimizer", key);
            if (!strcmp(key, "legacy_fusion")) KEY(r, refuse_true(r, kp, v, "legacy fused fp16 optimizer"));
            else KEY(r, unknown_key(r, kp));
        }
    }
    if (!type) return shs_set_error(SHS_PARSE, "%s: optimizer has no \"type\"", r->path);
    const char *t = NULL;
    SHS_CHECK(get_str(r, "optimizer.type", type, &t));
    int adam = !strcasecmp(t, "adam"), adamw = !strcasecmp(t, "adamw"), sgd = !strcmp(t, "SGD");
    if (!adam && !adamw && !sgd) {
        if (!strcasecmp(t, "sgd"))
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: optimizer.type = \"%s\": DeepSpeed looks non-DeepSpeed optimizers "
                                 "up as torch.optim.%s; write \"SGD\"", r->path, t, t));
        KEY(r, not_modelled(r, "optimizer.type", type, "shardsim has Adam/AdamW (adam_w_mode) and SGD"));
    }
    shs_optim_config_t *o = &ds->vals.strategy.optim;
    *o = shs_optim_default(sgd ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW);
    set(ds, SHS_DS_OPTIMIZER, SHS_DS_FROM_CONFIG);
    int torch_adam = 0, adam_w_mode = 1;
    json_t *wd = NULL;
    if (params) {
        SHS_CHECK(want_object(r, "optimizer.params", params));
        json_t *ta = json_object_get(params, "torch_adam");
        if (ta && !sgd) SHS_CHECK(get_bool(r, "optimizer.params.torch_adam", ta, &torch_adam));
        json_object_foreach(params, key, v) {
            char kp[128];
            double d = 0;
            key_path(kp, sizeof kp, "optimizer.params", key);
            /* the HF Trainer's TrainingArguments defaults (learning_rate, adam_beta1/2, adam_epsilon, weight_decay) */
            if (is_auto(v) && (!strcmp(key, "lr") || !strcmp(key, "weight_decay") ||
                               (!sgd && (!strcmp(key, "betas") || !strcmp(key, "eps"))))) {
                shs_ds_setting_t st0 = SHS_DS_LR, st1 = SHS_DS_NUM_SETTINGS;
                if (!strcmp(key, "lr")) {
                    o->lr = 5e-5f;
                    ds->autos |= 1u << SHS_DS_AUTO_LR;
                } else if (!strcmp(key, "weight_decay")) {
                    o->weight_decay = 0.0f;
                    wd = v;
                    st0 = SHS_DS_WEIGHT_DECAY;
                    ds->autos |= 1u << SHS_DS_AUTO_WEIGHT_DECAY;
                } else if (!strcmp(key, "betas")) {
                    o->beta1 = 0.9f;
                    o->beta2 = 0.999f;
                    st0 = SHS_DS_BETA1;
                    st1 = SHS_DS_BETA2;
                    ds->autos |= 1u << SHS_DS_AUTO_BETAS;
                } else {
                    o->eps = 1e-8f;
                    st0 = SHS_DS_EPS;
                    ds->autos |= 1u << SHS_DS_AUTO_EPS;
                }
                set(ds, st0, SHS_DS_FROM_AUTO);
                if (st1 != SHS_DS_NUM_SETTINGS) set(ds, st1, SHS_DS_FROM_AUTO);
            } else if (!strcmp(key, "lr")) {
                SHS_CHECK(get_num(r, kp, v, 1e-30, 1e6, &d));
                o->lr = (float)d;
                set(ds, SHS_DS_LR, SHS_DS_FROM_CONFIG);
            } else if (!strcmp(key, "weight_decay")) {
                SHS_CHECK(get_num(r, kp, v, 0, 1e6, &d));
                wd = v;
                o->weight_decay = (float)d;
            } else if (!strcmp(key, "max_grad_norm")) {
                KEY(r, not_modelled(r, kp, v, "DeepSpeed refuses it too: use gradient_clipping"));
            } else if (sgd && !strcmp(key, "momentum")) {
                SHS_CHECK(get_num(r, kp, v, 0, 1, &d));
                o->momentum = (float)d;
                set(ds, SHS_DS_MOMENTUM, SHS_DS_FROM_CONFIG);
            } else if (sgd && !strcmp(key, "dampening")) {
                KEY(r, only_default(r, kp, v, 0, "SGD dampening"));
            } else if (sgd && !strcmp(key, "nesterov")) {
                KEY(r, refuse_true(r, kp, v, "Nesterov momentum"));
            } else if (!sgd && !strcmp(key, "betas")) {
                double b1, b2;
                if (!json_is_array(v) || json_array_size(v) != 2) return bad_type(r, kp, v, "[beta1, beta2]");
                SHS_CHECK(get_num(r, "optimizer.params.betas[0]", json_array_get(v, 0), 0, 0.999999999, &b1));
                SHS_CHECK(get_num(r, "optimizer.params.betas[1]", json_array_get(v, 1), 0, 0.999999999, &b2));
                o->beta1 = (float)b1;
                o->beta2 = (float)b2;
                set(ds, SHS_DS_BETA1, SHS_DS_FROM_CONFIG);
                set(ds, SHS_DS_BETA2, SHS_DS_FROM_CONFIG);
            } else if (!sgd && !strcmp(key, "eps")) {
                SHS_CHECK(get_num(r, kp, v, 1e-30, 1, &d));
                o->eps = (float)d;
                set(ds, SHS_DS_EPS, SHS_DS_FROM_CONFIG);
            } else if (!sgd && !strcmp(key, "adam_w_mode")) {
                SHS_CHECK(get_bool(r, kp, v, &adam_w_mode));
            } else if (!sgd && !strcmp(key, "torch_adam")) {
            } else if (!sgd && !strcmp(key, "bias_correction")) {
                int b = 0;
                SHS_CHECK(get_bool(r, kp, v, &b));
                if (!b) KEY(r, not_modelled(r, kp, v, "Adam without bias correction"));
            } else if (!sgd && !strcmp(key, "amsgrad")) {
                KEY(r, refuse_true(r, kp, v, "AMSGrad"));
            } else {
                KEY(r, unknown_key(r, kp));
            }
        }
    }
    /* engine.py: effective_adam_w_mode = type is AdamW or adam_w_mode */
    if (adam && !adam_w_mode)
        KEY(r, not_modelled(r, "optimizer.params.adam_w_mode", json_object_get(params, "adam_w_mode"),
                            "Adam with L2 weight decay added to the gradient (shardsim's Adam is AdamW, decoupled)"));
    if (wd) set(ds, SHS_DS_WEIGHT_DECAY, is_auto(wd) ? SHS_DS_FROM_AUTO : SHS_DS_FROM_CONFIG);
    else {
        /* FusedAdam / DeepSpeedCPUAdam default 0; torch.optim.AdamW 0.01; torch.optim.SGD 0 */
        o->weight_decay = (!sgd && torch_adam) ? 0.01f : 0.0f;
        set(ds, SHS_DS_WEIGHT_DECAY, SHS_DS_FROM_DS_DEFAULT);
    }
    if (!json_object_get(params ? params : obj, "lr") || !params) set(ds, SHS_DS_LR, SHS_DS_FROM_DS_DEFAULT);
    return SHS_OK;
}

static shs_status_t read_data_types(rd_t *r, const json_t *obj) {
    SHS_CHECK(want_object(r, "data_types", obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        key_path(kp, sizeof kp, "data_types", key);
        if (!strcmp(key, "grad_accum_dtype")) {
            if (json_is_null(v)) continue;
            SHS_CHECK(ds_dtype(r, kp, v, &r->ds->vals.strategy.grad_accum_dtype));
            set(r->ds, SHS_DS_GRAD_ACCUM_DTYPE, SHS_DS_FROM_CONFIG);
        } else {
            KEY(r, unknown_key(r, kp));
        }
    }
    return SHS_OK;
}

static shs_status_t read_root(rd_t *r, const json_t *root) {
    shs_ds_config_t *ds = r->ds;
    zero_t z = {.mics = -1};
    fp16_t f = {.power = 16, .window = 1000, .hysteresis = 2, .min_scale = 1};
    int bf16 = 0, bf16_seen = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        double d = 0;
        long n;
        if (is_auto(v) && !strcmp(key, "train_batch_size")) {
            ds->autos |= 1u << SHS_DS_AUTO_TRAIN_BATCH;
        } else if (is_auto(v) && !strcmp(key, "train_micro_batch_size_per_gpu")) {
            ds->autos |= 1u << SHS_DS_AUTO_MICRO;
        } else if (is_auto(v) && !strcmp(key, "gradient_accumulation_steps")) {
            ds->autos |= 1u << SHS_DS_AUTO_ACCUM;
        } else if (is_auto(v) && !strcmp(key, "gradient_clipping")) {
            ds->autos |= 1u << SHS_DS_AUTO_CLIP;
            ds->vals.strategy.clip_norm = 1.0f; /* TrainingArguments.max_grad_norm */
            set(ds, SHS_DS_CLIP, SHS_DS_FROM_AUTO);
        } else if (!strcmp(key, "train_batch_size")) {
            SHS_CHECK(get_int(r, key, v, 1, 1e12, &ds->train_batch));
        } else if (!strcmp(key, "train_micro_batch_size_per_gpu")) {
            SHS_CHECK(get_int(r, key, v, 1, 65536, &n));
            ds->vals.micro_batch = (int)n;
            ds->has_micro = 1;
            set(ds, SHS_DS_MICRO_BATCH, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "gradient_accumulation_steps")) {
            SHS_CHECK(get_int(r, key, v, 1, 65536, &n));
            ds->vals.grad_accum = (int)n;
            ds->has_accum = 1;
            set(ds, SHS_DS_GRAD_ACCUM, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "gradient_clipping")) {
            SHS_CHECK(get_num(r, key, v, 0, 1e30, &d));
            ds->vals.strategy.clip_norm = (float)d;
            set(ds, SHS_DS_CLIP, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "zero_optimization")) {
            KEY(r, read_zero(r, v, &z));
        } else if (!strcmp(key, "fp16")) {
            KEY(r, read_fp16(r, v, &f));
        } else if (!strcmp(key, "bf16") || !strcmp(key, "bfloat16")) {
            if (bf16_seen) return shs_set_error(SHS_PARSE, "%s: %s: bf16 is given twice (bf16 and its old name bfloat16)",
                                                r->path, key);
            bf16_seen = 1;
            KEY(r, read_bf16(r, key, v, &bf16));
        } else if (!strcmp(key, "optimizer")) {
            KEY(r, read_optimizer(r, v));
        } else if (!strcmp(key, "communication_data_type")) {
            if (json_is_null(v)) continue;
            SHS_CHECK(ds_dtype(r, key, v, &ds->vals.strategy.reduce_dtype));
            set(ds, SHS_DS_REDUCE_DTYPE, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "data_types")) {
            KEY(r, read_data_types(r, v));
        } else if (!strcmp(key, "scheduler")) {
            json_t *ty = json_is_object(v) ? json_object_get(v, "type") : NULL;
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: scheduler (type %s) is not modelled: it changes the learning rate "
                                 "every step, and shardsim's optimizer keeps one constant lr (modelling it would need a "
                                 "per-step lr schedule, which shardsim lacks); remove the scheduler section to simulate "
                                 "the constant optimizer.params.lr", r->path,
                                 json_is_string(ty) ? json_string_value(ty) : "not given"));
        } else if (!strcmp(key, "prescale_gradients") || !strcmp(key, "sparse_gradients")) {
            KEY(r, refuse_true(r, key, v, "changes how gradients are reduced"));
        } else if (!strcmp(key, "gradient_predivide_factor")) {
            KEY(r, only_default(r, key, v, 1.0, "gradients divided before the reduction"));
        } else if (!strcmp(key, "amp")) {
            json_t *en = json_is_object(v) ? json_object_get(v, "enabled") : NULL;
            if (!json_is_object(v)) return bad_type(r, key, v, "an object");
            if (en) KEY(r, refuse_true(r, "amp.enabled", en, "NVIDIA Apex AMP"));
        } else if (!strcmp(key, "elasticity") || !strcmp(key, "pipeline") || !strcmp(key, "sparse_attention") ||
                   !strcmp(key, "compression_training") || !strcmp(key, "quantize_training") ||
                   !strcmp(key, "curriculum_learning") || !strcmp(key, "data_efficiency") ||
                   !strcmp(key, "progressive_layer_drop") || !strcmp(key, "torch_autocast") ||
                   !strcmp(key, "tensor_parallel") || !strcmp(key, "sequence_parallel_size")) {
            KEY(r, not_modelled(r, key, v, "shardsim simulates data parallelism with its own model and data"));
        } else if (!try_ignored(r, ignored_top, sizeof ignored_top / sizeof ignored_top[0], NULL, key)) {
            KEY(r, unknown_key(r, key));
        }
    }
    /* zero_optimization: the file's own stage; shs_ds_config_apply keeps what
     * the effective strategy takes */
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3};
    ds->vals.strategy.kind = kinds[z.stage];
    set(ds, SHS_DS_STAGE, z.has_stage ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    if (z.mics > 0) {
        if (z.stage != 3)
            KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.mics_shard_size = %ld needs stage 3 (MiCS "
                                 "shards parameters), not stage %ld", r->path, z.mics, z.stage));
        ds->vals.strategy.kind = SHS_HYBRID_SHARD;
        ds->vals.strategy.shard_group_size = (int)z.mics;
        set(ds, SHS_DS_SHARD_GROUP, SHS_DS_FROM_CONFIG);
    }
    if (z.off_param && (z.stage != 3))
        KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_param needs stage 3, not stage %ld",
                             r->path, z.stage));
    if (z.off_param && !z.off_opt)
        KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_param = cpu without offload_optimizer = "
                             "cpu is not modelled: shardsim's parameter offload keeps the optimizer on the host too",
                             r->path));
    if (z.off_opt && z.stage == 0)
        KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_optimizer needs a ZeRO stage (1-3), not "
                             "stage 0", r->path));
    ds->vals.strategy.offload = z.off_param ? SHS_OFFLOAD_PARAMS : z.off_opt ? SHS_OFFLOAD_OPTIMIZER : SHS_OFFLOAD_NONE;
    set(ds, SHS_DS_OFFLOAD, (z.off_opt || z.off_param) ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    /* the stage-3 settings as at stage 3 ("auto": resolved by apply) */
    ds->stage3_keys = z.has_persistence || z.has_prefetch;
    ds->vals.replicate_below = z.has_persistence ? (size_t)z.persistence : 100000;
    set(ds, SHS_DS_REPLICATE_BELOW, z.has_persistence ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    long pf = z.has_prefetch ? z.prefetch : 50000000;
    ds->vals.strategy.backward_prefetch = pf > 0 ? SHS_PREFETCH_PRE : SHS_PREFETCH_NONE;
    set(ds, SHS_DS_PREFETCH, z.has_prefetch ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    /* precision: DeepSpeed trains in fp32 unless fp16 or bf16 is enabled */
    if (f.enabled && bf16)
        return shs_set_error(SHS_INVALID_ARG, "%s: fp16.enabled and bf16.enabled are both true (DeepSpeed refuses "
                             "this too); fix: enable one of them", r->path);
    int dtype_auto = (ds->autos >> SHS_DS_AUTO_FP16 & 1) || (ds->autos >> SHS_DS_AUTO_BF16 & 1);
    ds->vals.strategy.param_dtype = f.enabled ? SHS_F16 : bf16 ? SHS_BF16 : SHS_F32;
    set(ds, SHS_DS_DTYPE, (f.enabled || bf16) ? SHS_DS_FROM_CONFIG : dtype_auto ? SHS_DS_FROM_AUTO : SHS_DS_FROM_DS_DEFAULT);
    json_t *fj = json_object_get(root, "fp16");
    if (f.enabled || f.is_auto) { /* "auto": the scaler applies if --param-dtype f16 turns fp16 on */
        shs_loss_scaler_config_t *sc = &ds->vals.strategy.scaler;
#define FP16_SRC(key) (json_object_get(fj, key) ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT)
        if (f.loss_scale > 0) { /* CreateLossScaler: a static LossScaler */
            sc->kind = SHS_SCALER_STATIC;
            sc->init_scale = (float)f.loss_scale;
            set(ds, SHS_DS_LOSS_SCALER, SHS_DS_FROM_CONFIG);
            set(ds, SHS_DS_INIT_SCALE, SHS_DS_FROM_CONFIG);
            static const char *const dyn[] = {"initial_scale_power", "loss_scale_window", "hysteresis",
                                              "consecutive_hysteresis", "min_loss_scale"};
            for (int k = 0; k < 5; k++)
                if (json_object_get(fj, dyn[k]))
                    note(ds, "fp16.%s: no effect beside the static fp16.loss_scale %g", dyn[k], f.loss_scale);
        } else {
            sc->kind = SHS_SCALER_DEEPSPEED;
            sc->init_scale = (float)ldexp(1.0, (int)f.power);
            sc->growth_interval = (int)f.window;
            sc->hysteresis = (int)f.hysteresis;
            sc->consecutive_hysteresis = f.consecutive;
            sc->min_scale = (float)f.min_scale;
            set(ds, SHS_DS_LOSS_SCALER, FP16_SRC("loss_scale"));
            set(ds, SHS_DS_INIT_SCALE, FP16_SRC("initial_scale_power"));
            set(ds, SHS_DS_GROWTH_INTERVAL, FP16_SRC("loss_scale_window"));
            set(ds, SHS_DS_HYSTERESIS, json_object_get(fj, "hysteresis") || json_object_get(fj, "consecutive_hysteresis")
                                           ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
            set(ds, SHS_DS_MIN_LOSS_SCALE, FP16_SRC("min_loss_scale"));
        }
#undef FP16_SRC
    } else if (f.has) {
        const char *k2;
        json_t *v2;
        json_object_foreach(fj, k2, v2)
            if (strcmp(k2, "enabled")) note(ds, "fp16.%s: no effect, fp16.enabled is false", k2);
    }
    if (!json_object_get(root, "gradient_clipping")) {
        ds->vals.strategy.clip_norm = 0;
        set(ds, SHS_DS_CLIP, SHS_DS_FROM_DS_DEFAULT);
    }
    return SHS_OK;
}
#endif

shs_status_t shs_ds_config_load(const char *path, shs_ds_config_t *out) {
#ifndef SHS_HAVE_JANSSON
    (void)out;
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
    ds->vals = shs_train_default_config();
    rd_t *r = calloc(1, sizeof *r);
    shs_status_t st = SHS_HOST_OOM;
    if (r) {
        r->path = ds->path;
        r->ds = ds;
        st = read_root(r, root);
        if (st == SHS_OK && r->num_refused == 1) {
            st = shs_set_error(SHS_UNSUPPORTED, "%s: %s", path, r->refused[0]);
        } else if (st == SHS_OK && r->num_refused > 1) { /* every refused key in one message */
            char msg[MAX_REFUSED * 330];
            size_t at = 0;
            /* the error text holds ~1 KiB: each refusal cut to its share, the key path first in each */
            int k = r->num_refused < MAX_REFUSED ? r->num_refused : MAX_REFUSED, share = 880 / k;
            for (int i = 0; i < k && at < sizeof msg; i++) {
                int rl = (int)strlen(r->refused[i]);
                at += (size_t)snprintf(msg + at, sizeof msg - at, "\n  %d. %.*s%s", i + 1, rl > share ? share - 3 : rl,
                                       r->refused[i], rl > share ? "..." : "");
            }
            if (r->num_refused > MAX_REFUSED && at < sizeof msg)
                snprintf(msg + at, sizeof msg - at, "\n  (and %d more)", r->num_refused - MAX_REFUSED);
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

/* Copy setting s from the file's values into cfg. */
static void copy_setting(shs_ds_setting_t s, const shs_train_config_t *from, shs_train_config_t *cfg) {
    shs_strategy_config_t *d = &cfg->strategy;
    const shs_strategy_config_t *f = &from->strategy;
    switch (s) {
    case SHS_DS_STAGE: d->kind = f->kind; break;
    case SHS_DS_SHARD_GROUP: d->shard_group_size = f->shard_group_size; break;
    case SHS_DS_DTYPE: d->param_dtype = f->param_dtype; break;
    case SHS_DS_REDUCE_DTYPE: d->reduce_dtype = f->reduce_dtype; break;
    case SHS_DS_GRAD_ACCUM_DTYPE: d->grad_accum_dtype = f->grad_accum_dtype; break;
    case SHS_DS_MICRO_BATCH: cfg->micro_batch = from->micro_batch; break;
    case SHS_DS_GRAD_ACCUM: cfg->grad_accum = from->grad_accum; break;
    case SHS_DS_WORLD: break; /* never from the file */
    case SHS_DS_OFFLOAD: d->offload = f->offload; break;
    case SHS_DS_CLIP: d->clip_norm = f->clip_norm; break;
    case SHS_DS_OPTIMIZER: d->optim.kind = f->optim.kind; break;
    case SHS_DS_LR: d->optim.lr = f->optim.lr; break;
    case SHS_DS_BETA1: d->optim.beta1 = f->optim.beta1; break;
    case SHS_DS_BETA2: d->optim.beta2 = f->optim.beta2; break;
    case SHS_DS_EPS: d->optim.eps = f->optim.eps; break;
    case SHS_DS_WEIGHT_DECAY: d->optim.weight_decay = f->optim.weight_decay; break;
    case SHS_DS_MOMENTUM: d->optim.momentum = f->optim.momentum; break;
    case SHS_DS_REPLICATE_BELOW: cfg->replicate_below = from->replicate_below; break;
    case SHS_DS_PREFETCH: d->backward_prefetch = f->backward_prefetch; break;
    case SHS_DS_INIT_SCALE: d->scaler.init_scale = f->scaler.init_scale; break;
    case SHS_DS_GROWTH_INTERVAL: d->scaler.growth_interval = f->scaler.growth_interval; break;
    case SHS_DS_LOSS_SCALER: d->scaler.kind = f->scaler.kind; break;
    case SHS_DS_HYSTERESIS:
        d->scaler.hysteresis = f->scaler.hysteresis;
        d->scaler.consecutive_hysteresis = f->scaler.consecutive_hysteresis;
        break;
    case SHS_DS_MIN_LOSS_SCALE: d->scaler.min_scale = f->scaler.min_scale; break;
    default: break;
    }
}

static int has_auto(const shs_ds_config_t *ds, shs_ds_auto_t a) { return (ds->autos >> a) & 1u; }

/* Whether a setting is one of the scaler's (they act only with param dtype f16). */
static int scaler_setting(int s) {
    return s == SHS_DS_INIT_SCALE || s == SHS_DS_GROWTH_INTERVAL || s == SHS_DS_LOSS_SCALER || s == SHS_DS_HYSTERESIS ||
           s == SHS_DS_MIN_LOSS_SCALE;
}

static int shards_params(shs_strategy_kind_t k) {
    const shs_stage_t *st = shs_strategy_stage(k);
    return st && st->shards_params;
}

shs_status_t shs_ds_config_apply(const shs_ds_config_t *ds, const int given[SHS_DS_NUM_SETTINGS], long hidden,
                                 shs_train_config_t *cfg, shs_ds_source_t src_out[SHS_DS_NUM_SETTINGS]) {
    shs_ds_source_t src[SHS_DS_NUM_SETTINGS];
#define GIVEN(x) (given && given[SHS_DS_##x])
    /* the effective strategy and dtype decide which of the file's settings apply */
    shs_strategy_kind_t kind = GIVEN(STAGE) ? cfg->strategy.kind : ds->vals.strategy.kind;
    shs_dtype_t dtype = GIVEN(DTYPE) ? cfg->strategy.param_dtype : ds->vals.strategy.param_dtype;
    if (ds->autos & (1u << SHS_DS_AUTO_REDUCE_BUCKET | 1u << SHS_DS_AUTO_PREFETCH | 1u << SHS_DS_AUTO_PERSISTENCE) &&
        hidden <= 0) {
        char keys[200] = "";
        for (int a = SHS_DS_AUTO_REDUCE_BUCKET; a <= SHS_DS_AUTO_PERSISTENCE; a++)
            if (has_auto(ds, (shs_ds_auto_t)a))
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", keys[0] ? ", " : "",
                         a == SHS_DS_AUTO_REDUCE_BUCKET ? "zero_optimization.reduce_bucket_size"
                         : a == SHS_DS_AUTO_PREFETCH    ? "zero_optimization.stage3_prefetch_bucket_size"
                                                        : "zero_optimization.stage3_param_persistence_threshold");
        return shs_set_error(SHS_INVALID_ARG, "%s: %s = \"auto\": the Hugging Face Trainer fills it from the model's "
                             "hidden size, which this model (--model-file) does not have; give an integer", ds->path,
                             keys);
    }
    for (int s = 0; s < SHS_DS_NUM_SETTINGS; s++) {
        if (given && given[s]) src[s] = SHS_DS_FROM_COMMAND_LINE;
        else if (ds->src[s] != SHS_DS_FROM_SHARDSIM) {
            /* an optimizer chosen on the command line keeps its own parameters' defaults */
            int other_optim = s >= SHS_DS_LR && s <= SHS_DS_MOMENTUM && GIVEN(OPTIMIZER);
            /* settings the effective strategy or dtype does not take */
            int not_taken = ((s == SHS_DS_REPLICATE_BELOW || s == SHS_DS_PREFETCH) && !shards_params(kind)) ||
                            (s == SHS_DS_SHARD_GROUP && !shs_strategy_is_hybrid(kind)) ||
                            (scaler_setting(s) && dtype != SHS_F16);
            if (other_optim || not_taken) src[s] = SHS_DS_FROM_SHARDSIM;
            else {
                copy_setting((shs_ds_setting_t)s, &ds->vals, cfg);
                src[s] = ds->src[s];
            }
        } else src[s] = SHS_DS_FROM_SHARDSIM;
    }
    /* "auto" stage-3 keys from the hidden size (trainer_config_finalize) */
    if (src[SHS_DS_REPLICATE_BELOW] == SHS_DS_FROM_CONFIG && has_auto(ds, SHS_DS_AUTO_PERSISTENCE)) {
        cfg->replicate_below = (size_t)(10 * hidden);
        src[SHS_DS_REPLICATE_BELOW] = SHS_DS_FROM_AUTO;
    }
    if (src[SHS_DS_PREFETCH] == SHS_DS_FROM_CONFIG && has_auto(ds, SHS_DS_AUTO_PREFETCH)) {
        cfg->strategy.backward_prefetch = (long)(0.9 * (double)hidden * (double)hidden) > 0 ? SHS_PREFETCH_PRE
                                                                                             : SHS_PREFETCH_NONE;
        src[SHS_DS_PREFETCH] = SHS_DS_FROM_AUTO;
    }
    /* the file's offload under a strategy that does not take it */
    if (!GIVEN(OFFLOAD) && ds->vals.strategy.offload != SHS_OFFLOAD_NONE) {
        if (kind == SHS_DDP)
            return shs_set_error(SHS_INVALID_ARG, "%s: zero_optimization.offload_optimizer = cpu needs a ZeRO stage, and "
                                 "the strategy is ddp (--strategy, over the file's %s); give --offload none beside it, "
                                 "or a ZeRO strategy", ds->path, shs_strategy_name(ds->vals.strategy.kind));
        if (ds->vals.strategy.offload == SHS_OFFLOAD_PARAMS && !shards_params(kind))
            cfg->strategy.offload = SHS_OFFLOAD_OPTIMIZER; /* offload_param: no effect (a header note says so) */
    }
    /* a MiCS group must divide the world (DeepSpeed's MiCS_CommGroups asserts it) */
    if (src[SHS_DS_SHARD_GROUP] == SHS_DS_FROM_CONFIG && cfg->world_size % ds->vals.strategy.shard_group_size)
        return shs_set_error(SHS_INVALID_ARG, "%s: zero_optimization.mics_shard_size %d must divide the world %d (%s)",
                             ds->path, ds->vals.strategy.shard_group_size, cfg->world_size,
                             GIVEN(WORLD) ? "command line" : "shardsim default");
    /* "auto" batch keys: the Trainer's arguments, i.e. the command line or shardsim's defaults */
    int auto_tb = has_auto(ds, SHS_DS_AUTO_TRAIN_BATCH);
    int auto_micro = (has_auto(ds, SHS_DS_AUTO_MICRO) || auto_tb) && !ds->has_micro;
    int auto_accum = (has_auto(ds, SHS_DS_AUTO_ACCUM) || auto_tb) && !ds->has_accum;
    if (auto_micro && !GIVEN(MICRO_BATCH)) src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_AUTO;
    if (auto_accum && !GIVEN(GRAD_ACCUM)) src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_AUTO;
    /* the batch rule (runtime/config.py): "given" = in the file, on the command line, or "auto" */
    int has_micro = ds->has_micro || GIVEN(MICRO_BATCH) || auto_micro;
    int has_accum = ds->has_accum || GIVEN(GRAD_ACCUM) || auto_accum;
    long tb = ds->train_batch, W = cfg->world_size;
    long mb = cfg->micro_batch, ga = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    const char *wsrc = GIVEN(WORLD) ? "command line" : "shardsim default";
    if (tb && has_micro && has_accum) {
        /* all three: only checked */
    } else if (tb && has_micro) {
        if (tb % (mb * W))
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by "
                                 "train_micro_batch_size_per_gpu %ld (%s) x world %ld (%s): DeepSpeed derives "
                                 "gradient_accumulation_steps as their quotient", ds->path, tb, mb,
                                 shs_ds_source_name(src[SHS_DS_MICRO_BATCH]), W, wsrc);
        ga = tb / mb / W;
        src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_DERIVED;
    } else if (tb && has_accum) {
        if (tb % (W * ga))
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by world %ld (%s) x "
                                 "gradient_accumulation_steps %ld (%s): DeepSpeed derives the micro-batch as their "
                                 "quotient", ds->path, tb, W, wsrc, ga, shs_ds_source_name(src[SHS_DS_GRAD_ACCUM]));
        mb = tb / W / ga;
        src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_DERIVED;
    } else if (has_micro && has_accum) {
        tb = mb * ga * W;
    } else if (tb) {
        if (tb % W)
            return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld is not divisible by world %ld (%s) x "
                                 "accumulation 1 (DeepSpeed's, with neither train_micro_batch_size_per_gpu nor "
                                 "gradient_accumulation_steps given)", ds->path, tb, W, wsrc);
        ga = 1;
        mb = tb / W;
        src[SHS_DS_GRAD_ACCUM] = src[SHS_DS_MICRO_BATCH] = SHS_DS_FROM_DERIVED;
    } else if (has_micro) {
        ga = 1;
        tb = mb * W;
        if (src[SHS_DS_GRAD_ACCUM] == SHS_DS_FROM_SHARDSIM) src[SHS_DS_GRAD_ACCUM] = SHS_DS_FROM_DERIVED;
    } else {
        return shs_set_error(SHS_INVALID_ARG, "%s: neither train_batch_size nor train_micro_batch_size_per_gpu is given "
                             "(nor --micro-batch): DeepSpeed needs one of them", ds->path);
    }
    if (mb < 1 || ga < 1 || tb != mb * ga * W)
        return shs_set_error(SHS_INVALID_ARG, "%s: train_batch_size %ld != train_micro_batch_size_per_gpu %ld (%s) x "
                             "gradient_accumulation_steps %ld (%s) x world %ld (%s): DeepSpeed requires them equal",
                             ds->path, tb, mb, shs_ds_source_name(src[SHS_DS_MICRO_BATCH]), ga,
                             shs_ds_source_name(src[SHS_DS_GRAD_ACCUM]), W, wsrc);
    if (mb > 65536 || ga > 65536)
        return shs_set_error(SHS_INVALID_ARG, "%s: derived micro-batch %ld or accumulation %ld is out of range", ds->path,
                             mb, ga);
    cfg->micro_batch = (int)mb;
    cfg->grad_accum = (int)ga;
    src[SHS_DS_WORLD] = GIVEN(WORLD) ? SHS_DS_FROM_COMMAND_LINE : SHS_DS_FROM_SHARDSIM;
#undef GIVEN
    if (src_out) memcpy(src_out, src, sizeof src);
    return SHS_OK;
}

static size_t add(char *buf, size_t n, size_t at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(at < n ? buf + at : NULL, at < n ? n - at : 0, fmt, ap);
    va_end(ap);
    return at + (k > 0 ? (size_t)k : 0);
}

size_t shs_ds_config_describe(const shs_ds_config_t *ds, const shs_train_config_t *cfg,
                              const shs_ds_source_t src[SHS_DS_NUM_SETTINGS], const char *prefix, char *buf,
                              size_t n) {
    const shs_strategy_config_t *s = &cfg->strategy;
    size_t at = 0;
    if (n) buf[0] = 0;
    at = add(buf, n, at, "%sDeepSpeed config %s, effective settings (source):\n", prefix, ds->path);
#define SRC(x) shs_ds_source_name(src[SHS_DS_##x])
    at = add(buf, n, at, "%s  strategy %s (%s)", prefix, shs_strategy_name(s->kind), SRC(STAGE));
    if (shs_strategy_is_hybrid(s->kind))
        at = add(buf, n, at, ", shard group %d (%s)", s->shard_group_size, SRC(SHARD_GROUP));
    if (src[SHS_DS_OFFLOAD] == SHS_DS_FROM_PER_ROW) at = add(buf, n, at, "; offload: each row's own\n");
    else
        at = add(buf, n, at, "; offload %s (%s)\n",
                 s->offload == SHS_OFFLOAD_PARAMS ? "params+optimizer" : s->offload == SHS_OFFLOAD_OPTIMIZER ? "optimizer" : "none",
                 SRC(OFFLOAD));
    at = add(buf, n, at, "%s  param dtype %s (%s); reduce dtype %s (%s); grad accum dtype %s (%s)\n", prefix,
             shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32), SRC(DTYPE),
             s->reduce_dtype ? shs_dtype_name(s->reduce_dtype) : "param dtype", SRC(REDUCE_DTYPE),
             s->grad_accum_dtype ? shs_dtype_name(s->grad_accum_dtype) : "param dtype", SRC(GRAD_ACCUM_DTYPE));
    if (s->param_dtype == SHS_F16) {
        shs_loss_scaler_config_t sc = s->scaler;
        shs_loss_scaler_fill_defaults(&sc);
        at = add(buf, n, at, "%s  loss scaler %s (%s): initial scale %g (%s)", prefix, shs_scaler_name(sc.kind),
                 SRC(LOSS_SCALER), (double)sc.init_scale, SRC(INIT_SCALE));
        if (sc.kind == SHS_SCALER_DEEPSPEED)
            at = add(buf, n, at, ", scale window %d (%s), hysteresis %d%s (%s), min loss scale %g (%s)",
                     sc.growth_interval, SRC(GROWTH_INTERVAL), sc.hysteresis,
                     sc.consecutive_hysteresis ? " consecutive" : "", SRC(HYSTERESIS), (double)sc.min_scale,
                     SRC(MIN_LOSS_SCALE));
        else if (sc.kind == SHS_SCALER_TORCH)
            at = add(buf, n, at, ", growth every %d good steps (%s)", sc.growth_interval, SRC(GROWTH_INTERVAL));
        at = add(buf, n, at, "\n");
    }
    int ga = cfg->grad_accum > 0 ? cfg->grad_accum : 1;
    at = add(buf, n, at, "%s  micro-batch %d (%s) x accumulation %d (%s) x world %d (%s) = train_batch_size %ld\n",
             prefix, cfg->micro_batch, SRC(MICRO_BATCH), ga, SRC(GRAD_ACCUM), cfg->world_size, SRC(WORLD),
             (long)cfg->micro_batch * ga * cfg->world_size);
    if (s->clip_norm > 0) at = add(buf, n, at, "%s  clipping: global 2-norm to %g (%s)\n", prefix, (double)s->clip_norm, SRC(CLIP));
    else at = add(buf, n, at, "%s  clipping: off (%s)\n", prefix, SRC(CLIP));
    const shs_optim_config_t *o = &s->optim;
    at = add(buf, n, at, "%s  optimizer %s (%s): lr %g (%s)", prefix, shs_optim_name(o->kind), SRC(OPTIMIZER),
             (double)o->lr, SRC(LR));
    if (o->kind == SHS_OPTIM_ADAMW)
        at = add(buf, n, at, ", betas %g (%s) %g (%s), eps %g (%s)", (double)o->beta1, SRC(BETA1), (double)o->beta2,
                 SRC(BETA2), (double)o->eps, SRC(EPS));
    else at = add(buf, n, at, ", momentum %g (%s)", (double)o->momentum, SRC(MOMENTUM));
    at = add(buf, n, at, ", weight decay %g (%s)\n", (double)o->weight_decay, SRC(WEIGHT_DECAY));
    if (src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM || src[SHS_DS_PREFETCH] != SHS_DS_FROM_SHARDSIM)
        at = add(buf, n, at, "%s  replicate units below %zu elements (%s); backward prefetch %s (%s)\n", prefix,
                 cfg->replicate_below, SRC(REPLICATE_BELOW),
                 s->backward_prefetch == SHS_PREFETCH_NONE ? "none" : s->backward_prefetch == SHS_PREFETCH_POST ? "post" : "pre",
                 SRC(PREFETCH));
    /* "auto" keys with what they became */
    for (int a = 0; a < SHS_DS_NUM_AUTOS; a++) {
        if (!has_auto(ds, (shs_ds_auto_t)a)) continue;
        static const char *const keys[] = {
#define SHS_DS_AUTO_KEY(id, key) key,
            SHS_DS_AUTO_MAP(SHS_DS_AUTO_KEY)
#undef SHS_DS_AUTO_KEY
        };
        char v[96];
        const shs_optim_config_t *op = &s->optim;
        long h = cfg->arch == SHS_ARCH_LLAMA ? cfg->llama.hidden : cfg->model.channels;
        int st3 = src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM;
        switch ((shs_ds_auto_t)a) {
        case SHS_DS_AUTO_MICRO: snprintf(v, sizeof v, "%d (%s)", cfg->micro_batch, SRC(MICRO_BATCH)); break;
        case SHS_DS_AUTO_ACCUM: snprintf(v, sizeof v, "%d (%s)", ga, SRC(GRAD_ACCUM)); break;
        case SHS_DS_AUTO_TRAIN_BATCH:
            snprintf(v, sizeof v, "%ld (micro-batch x accumulation x world)", (long)cfg->micro_batch * ga * cfg->world_size);
            break;
        case SHS_DS_AUTO_CLIP: snprintf(v, sizeof v, "%g (%s)", (double)s->clip_norm, src[SHS_DS_CLIP] == SHS_DS_FROM_AUTO ? "max_grad_norm default" : SRC(CLIP)); break;
        case SHS_DS_AUTO_LR: snprintf(v, sizeof v, "%g (%s)", (double)op->lr, SRC(LR)); break;
        case SHS_DS_AUTO_BETAS: snprintf(v, sizeof v, "[%g, %g] (%s)", (double)op->beta1, (double)op->beta2, SRC(BETA1)); break;
        case SHS_DS_AUTO_EPS: snprintf(v, sizeof v, "%g (%s)", (double)op->eps, SRC(EPS)); break;
        case SHS_DS_AUTO_WEIGHT_DECAY: snprintf(v, sizeof v, "%g (%s)", (double)op->weight_decay, SRC(WEIGHT_DECAY)); break;
        case SHS_DS_AUTO_FP16: snprintf(v, sizeof v, "%s (--param-dtype %s)", s->param_dtype == SHS_F16 ? "true" : "false",
                                        shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32)); break;
        case SHS_DS_AUTO_BF16: snprintf(v, sizeof v, "%s (--param-dtype %s)", s->param_dtype == SHS_BF16 ? "true" : "false",
                                        shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32)); break;
        case SHS_DS_AUTO_REDUCE_BUCKET: snprintf(v, sizeof v, "%ld (hidden %ld squared; ignored)", h * h, h); break;
        case SHS_DS_AUTO_PREFETCH:
            if (st3) snprintf(v, sizeof v, "%ld (0.9 x hidden %ld squared)", (long)(0.9 * (double)h * (double)h), h);
            else snprintf(v, sizeof v, "not filled (stage 3 only)");
            break;
        case SHS_DS_AUTO_PERSISTENCE:
            if (st3) snprintf(v, sizeof v, "%ld (10 x hidden %ld)", 10 * h, h);
            else snprintf(v, sizeof v, "not filled (stage 3 only)");
            break;
        default: v[0] = 0; break;
        }
        at = add(buf, n, at, "%s  auto (HF Trainer rule): %s = %s\n", prefix, keys[a], v);
    }
#undef SRC
    /* the file's settings the effective strategy or dtype does not take */
    const char *by = src[SHS_DS_STAGE] == SHS_DS_FROM_COMMAND_LINE ? "command line" : "config";
    if (src[SHS_DS_REPLICATE_BELOW] != SHS_DS_FROM_SHARDSIM) {
        at = add(buf, n, at, "%s  note: stage3_param_persistence_threshold %zu: applied per wrap unit (DeepSpeed: per "
                 "parameter)\n", prefix, cfg->replicate_below);
        if (s->backward_prefetch == SHS_PREFETCH_PRE && src[SHS_DS_PREFETCH] != SHS_DS_FROM_COMMAND_LINE)
            at = add(buf, n, at, "%s  note: stage3_prefetch_bucket_size: prefetch one unit ahead (the element budget is "
                     "not modelled)\n", prefix);
    } else if (ds->stage3_keys) {
        at = add(buf, n, at, "%s  note: stage3_* keys: no effect, they apply to stage 3 and the strategy is %s (%s)\n",
                 prefix, shs_strategy_name(s->kind), by);
    }
    if (shs_strategy_is_hybrid(ds->vals.strategy.kind) && src[SHS_DS_SHARD_GROUP] != SHS_DS_FROM_CONFIG)
        at = add(buf, n, at, "%s  note: zero_optimization.mics_shard_size %d: no effect, the strategy is %s (%s)%s\n",
                 prefix, ds->vals.strategy.shard_group_size, shs_strategy_name(s->kind), by,
                 shs_strategy_is_hybrid(s->kind) ? " and --shard-group-size gives the group" : "");
    if (ds->vals.strategy.offload == SHS_OFFLOAD_PARAMS && src[SHS_DS_OFFLOAD] == SHS_DS_FROM_CONFIG &&
        s->offload != SHS_OFFLOAD_PARAMS)
        at = add(buf, n, at, "%s  note: zero_optimization.offload_param: no effect, %s (%s) keeps parameters unsharded; "
                 "offload_optimizer applies\n", prefix, shs_strategy_name(s->kind), by);
    if (ds->src[SHS_DS_LOSS_SCALER] != SHS_DS_FROM_SHARDSIM && src[SHS_DS_LOSS_SCALER] == SHS_DS_FROM_SHARDSIM &&
        !(src[SHS_DS_DTYPE] == SHS_DS_FROM_COMMAND_LINE && s->param_dtype == SHS_F16))
        at = add(buf, n, at, "%s  note: fp16 loss-scaling keys: no effect, the param dtype is %s (%s)\n", prefix,
                 shs_dtype_name(s->param_dtype ? s->param_dtype : SHS_F32), shs_ds_source_name(src[SHS_DS_DTYPE]));
    for (int i = 0; i < ds->num_ignored; i++)
        at = add(buf, n, at, "%s  ignored: %s\n", prefix, ds->ignored[i]);
    for (int i = 0; i < ds->num_notes; i++) at = add(buf, n, at, "%s  note: %s\n", prefix, ds->notes[i]);
    return at;
}
