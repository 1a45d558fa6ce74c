/* ds_config.c - DeepSpeed's ds_config.json into shs_train_config_t (see
 * ds_config.h): the settings' names, the file's top-level keys and the
 * reading of a whole file. Each section has its own file with its mapping:
 * zero_optimization ds_config_zero.c; fp16, bf16, data_types
 * ds_config_precision.c; optimizer ds_config_optimizer.c; the command
 * line's precedence and DeepSpeed's batch rule ds_config_apply.c; the
 * header ds_config_describe.c; the value readers ds_config_read.c.
 *
 * Read from DeepSpeed's sources (deepspeedai/DeepSpeed): docs/_pages/
 * config-json.md (each key's meaning), deepspeed/runtime/config.py (batch
 * rule, duplicate keys refused, top-level keys). The top-level mapping:
 *
 *   communication_data_type fp32|fp16|bf16    -> reduce dtype
 *   gradient_clipping x (default 0: none)     -> clip the global 2-norm to x
 *   gradient_accumulation_steps, train_micro_batch_size_per_gpu,
 *       train_batch_size                      -> accumulation, micro-batch, and
 *       DeepSpeed's batch rule (shs_ds_config_apply)
 *
 * Refused as not modelled (they change the numbers): scheduler (shardsim
 * keeps lr constant), prescale_gradients true, gradient_predivide_factor
 * != 1, sparse_gradients true, amp enabled, elasticity, pipeline, sparse
 * attention, compression, curriculum and data efficiency sections.
 * Ignored (change nothing shardsim computes): see `ignored_top` below, each
 * with its reason.
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

/* Keys accepted without effect, with the reason the header shows. */
static const shs__ds_ignored_key_t ignored_top[] = {
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

static shs_status_t read_root(shs__ds_reader_t *r, const json_t *root) {
    shs_ds_config_t *ds = r->ds;
    shs__ds_zero_t z = {.mics = -1};
    shs__ds_fp16_t f = {.power = 16, .window = 1000, .hysteresis = 2, .min_scale = 1};
    int bf16 = 0, bf16_seen = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        double d = 0;
        long n;
        if (shs__ds_is_auto(v) && !strcmp(key, "train_batch_size")) {
            ds->autos |= 1u << SHS_DS_AUTO_TRAIN_BATCH;
        } else if (shs__ds_is_auto(v) && !strcmp(key, "train_micro_batch_size_per_gpu")) {
            ds->autos |= 1u << SHS_DS_AUTO_MICRO;
        } else if (shs__ds_is_auto(v) && !strcmp(key, "gradient_accumulation_steps")) {
            ds->autos |= 1u << SHS_DS_AUTO_ACCUM;
        } else if (shs__ds_is_auto(v) && !strcmp(key, "gradient_clipping")) {
            ds->autos |= 1u << SHS_DS_AUTO_CLIP;
            ds->vals.strategy.clip_norm = 1.0f; /* TrainingArguments.max_grad_norm */
            shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_AUTO);
        } else if (!strcmp(key, "train_batch_size")) {
            SHS_CHECK(shs__ds_get_int(r, key, v, 1, 1e12, &ds->train_batch));
        } else if (!strcmp(key, "train_micro_batch_size_per_gpu")) {
            SHS_CHECK(shs__ds_get_int(r, key, v, 1, 65536, &n));
            ds->vals.micro_batch = (int)n;
            ds->has_micro = 1;
            shs__ds_set(ds, SHS_DS_MICRO_BATCH, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "gradient_accumulation_steps")) {
            SHS_CHECK(shs__ds_get_int(r, key, v, 1, 65536, &n));
            ds->vals.grad_accum = (int)n;
            ds->has_accum = 1;
            shs__ds_set(ds, SHS_DS_GRAD_ACCUM, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "gradient_clipping")) {
            SHS_CHECK(shs__ds_get_num(r, key, v, 0, 1e30, &d));
            ds->vals.strategy.clip_norm = (float)d;
            shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "zero_optimization")) {
            SHS__DS_KEY(r, shs__ds_read_zero(r, v, &z));
        } else if (!strcmp(key, "fp16")) {
            SHS__DS_KEY(r, shs__ds_read_fp16(r, v, &f));
        } else if (!strcmp(key, "bf16") || !strcmp(key, "bfloat16")) {
            if (bf16_seen) return shs_set_error(SHS_PARSE, "%s: %s: bf16 is given twice (bf16 and its old name bfloat16)",
                                                r->path, key);
            bf16_seen = 1;
            SHS__DS_KEY(r, shs__ds_read_bf16(r, key, v, &bf16));
        } else if (!strcmp(key, "optimizer")) {
            SHS__DS_KEY(r, shs__ds_read_optimizer(r, v));
        } else if (!strcmp(key, "communication_data_type")) {
            if (json_is_null(v)) continue;
            SHS_CHECK(shs__ds_dtype(r, key, v, &ds->vals.strategy.reduce_dtype));
            shs__ds_set(ds, SHS_DS_REDUCE_DTYPE, SHS_DS_FROM_CONFIG);
        } else if (!strcmp(key, "data_types")) {
            SHS__DS_KEY(r, shs__ds_read_data_types(r, v));
        } else if (!strcmp(key, "scheduler")) {
            json_t *ty = json_is_object(v) ? json_object_get(v, "type") : NULL;
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: scheduler (type %s) is not modelled: it changes the learning rate "
                                 "every step, and shardsim's optimizer keeps one constant lr (modelling it would need a "
                                 "per-step lr schedule, which shardsim lacks); remove the scheduler section to simulate "
                                 "the constant optimizer.params.lr", r->path,
                                 json_is_string(ty) ? json_string_value(ty) : "not given"));
        } else if (!strcmp(key, "prescale_gradients") || !strcmp(key, "sparse_gradients")) {
            SHS__DS_KEY(r, shs__ds_refuse_true(r, key, v, "changes how gradients are reduced"));
        } else if (!strcmp(key, "gradient_predivide_factor")) {
            SHS__DS_KEY(r, shs__ds_only_default(r, key, v, 1.0, "gradients divided before the reduction"));
        } else if (!strcmp(key, "amp")) {
            json_t *en = json_is_object(v) ? json_object_get(v, "enabled") : NULL;
            if (!json_is_object(v)) return shs__ds_bad_type(r, key, v, "an object");
            if (en) SHS__DS_KEY(r, shs__ds_refuse_true(r, "amp.enabled", en, "NVIDIA Apex AMP"));
        } else if (!strcmp(key, "elasticity") || !strcmp(key, "pipeline") || !strcmp(key, "sparse_attention") ||
                   !strcmp(key, "compression_training") || !strcmp(key, "quantize_training") ||
                   !strcmp(key, "curriculum_learning") || !strcmp(key, "data_efficiency") ||
                   !strcmp(key, "progressive_layer_drop") || !strcmp(key, "torch_autocast") ||
                   !strcmp(key, "tensor_parallel") || !strcmp(key, "sequence_parallel_size")) {
            SHS__DS_KEY(r, shs__ds_not_modelled(r, key, v, "shardsim simulates data parallelism with its own model and data"));
        } else if (!shs__ds_try_ignored(r, ignored_top, sizeof ignored_top / sizeof ignored_top[0], NULL, key)) {
            SHS__DS_KEY(r, shs__ds_unknown_key(r, key));
        }
    }
    SHS_CHECK(shs__ds_zero_finish(r, &z));
    SHS_CHECK(shs__ds_precision_finish(r, json_object_get(root, "fp16"), &f, bf16));
    if (!json_object_get(root, "gradient_clipping")) {
        ds->vals.strategy.clip_norm = 0;
        shs__ds_set(ds, SHS_DS_CLIP, SHS_DS_FROM_DS_DEFAULT);
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
