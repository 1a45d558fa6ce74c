/* ds_config_zero.c - DeepSpeed's zero_optimization section (see
 * ds_config.h), read from runtime/zero/config.py (fields, aliases and
 * defaults) and runtime/zero/offload_config.py. The mapping:
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
 *   the ZeRO granularity (strategy.h shs_zero_knobs_t; DeepSpeed's defaults
 *   from runtime/zero/config.py; every size an integer >= 0, as DeepSpeed's
 *   Field(ge=0), "auto" as the HF Trainer fills it):
 *     reduce_bucket_size (default 5e8)              -> zero.reduce_bucket (ZeRO-2/3)
 *     contiguous_gradients (default true)           -> zero.contiguous_gradients
 *     overlap_comm (default: true at stage 3)       -> zero.overlap_comm
 *     allgather_bucket_size (default 5e8; even, as stage_1_and_2.py asserts a
 *         multiple of its nccl_start_alignment_factor 2) -> zero.allgather_bucket
 *         (ZeRO-1/2: DeepSpeed's one all-gather of the partition)
 *     stage3_prefetch_bucket_size (default 5e7; alias prefetch_bucket_size)
 *         -> zero.prefetch_bucket (0: no prefetch)
 *     stage3_max_live_parameters (default 1e9; alias max_live_parameters)
 *         -> zero.max_live (0: nothing prefetched)
 *     stage3_max_reuse_distance (default 1e9; alias max_reuse_distance)
 *         -> zero.max_reuse (0: nothing kept)
 *
 * Refused as not modelled (they change the numbers): reduce_scatter false,
 * zero++ (hpZ, quantized weights/gradients), offload ratio/buffer settings. Ignored (change nothing shardsim computes): `ignored_zero` and
 * `ignored_offload` below, each with its reason.
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <stdio.h>
#include <string.h>

#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

static const shs__ds_ignored_key_t ignored_zero[] = {
    {"allgather_partitions", "ZeRO-1/2 all-gather implementation; same bytes"},
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

static const shs__ds_ignored_key_t ignored_offload[] = {
    {"pin_memory", "pinned host memory: transfer speed only"},
};

/* offload_optimizer / offload_param: *device 0 none, 1 cpu. */
static shs_status_t read_offload(shs__ds_reader_t *r, const char *kp, const json_t *obj, int *device) {
    SHS_CHECK(shs__ds_want_object(r, kp, obj));
    const char *key;
    json_t *v;
    *device = 0;
    json_object_foreach((json_t *)obj, key, v) {
        char sub[128];
        shs__ds_key_path(sub, sizeof sub, kp, key);
        if (!strcmp(key, "device")) {
            const char *d = NULL;
            if (json_is_null(v)) continue;
            SHS_CHECK(shs__ds_get_str(r, sub, v, &d));
            if (!strcmp(d, "cpu")) *device = 1;
            else if (!strcmp(d, "none")) *device = 0;
            else if (!strcmp(d, "nvme")) SHS__DS_KEY(r, shs__ds_not_modelled(r, sub, v, "shardsim offloads to host memory only (cpu)"));
            else return shs__ds_bad_type(r, sub, v, "\"cpu\", \"none\" or \"nvme\"");
        } else if (shs__ds_try_ignored(r, ignored_offload, sizeof ignored_offload / sizeof ignored_offload[0], kp, key)) {
        } else if (!strcmp(key, "ratio")) {
            SHS__DS_KEY(r, shs__ds_only_default(r, sub, v, 1.0, "partial offload"));
        } else if (!strcmp(key, "fast_init") || !strcmp(key, "pipeline_read") || !strcmp(key, "pipeline_write")) {
            SHS__DS_KEY(r, shs__ds_refuse_true(r, sub, v, "NVMe swapping"));
        } else if (!strcmp(key, "nvme_path") || !strcmp(key, "buffer_count") || !strcmp(key, "buffer_size") ||
                   !strcmp(key, "max_in_cpu")) {
            SHS__DS_KEY(r, shs__ds_not_modelled(r, sub, v, "NVMe swapping buffers (shardsim offloads to host memory only)"));
        } else {
            SHS__DS_KEY(r, shs__ds_unknown_key(r, sub));
        }
    }
    return SHS_OK;
}

shs_status_t shs__ds_read_zero(shs__ds_reader_t *r, const json_t *obj, shs__ds_zero_t *z) {
    SHS_CHECK(shs__ds_want_object(r, "zero_optimization", obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        char kp[128];
        shs__ds_key_path(kp, sizeof kp, "zero_optimization", key);
        if (!strcmp(key, "stage")) {
            SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 3, &z->stage));
            z->has_stage = 1;
        } else if (!strcmp(key, "offload_optimizer")) {
            if (!json_is_null(v)) SHS__DS_KEY(r, read_offload(r, kp, v, &z->off_opt));
        } else if (!strcmp(key, "offload_param")) {
            if (!json_is_null(v)) SHS__DS_KEY(r, read_offload(r, kp, v, &z->off_param));
        } else if (!strcmp(key, "stage3_param_persistence_threshold") || !strcmp(key, "param_persistence_threshold")) {
            if (z->has_persistence) return shs_set_error(SHS_PARSE, "%s: %s: the persistence threshold is given twice "
                                                         "(it and its alias)", r->path, kp);
            if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PERSISTENCE;
            else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->persistence));
            z->has_persistence = 1;
        } else if (!strcmp(key, "stage3_prefetch_bucket_size") || !strcmp(key, "prefetch_bucket_size")) {
            if (z->has_prefetch) return shs_set_error(SHS_PARSE, "%s: %s: the prefetch bucket size is given twice "
                                                      "(it and its alias)", r->path, kp);
            if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PREFETCH;
            else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->prefetch));
            z->has_prefetch = 1;
        } else if (!strcmp(key, "reduce_bucket_size")) {
            if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_REDUCE_BUCKET;
            else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->reduce_bucket));
            z->has_reduce_bucket = 1;
        } else if (!strcmp(key, "allgather_bucket_size")) {
            SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->allgather_bucket));
            if (z->allgather_bucket % 2)
                return shs_set_error(SHS_INVALID_ARG, "%s: %s = %ld: DeepSpeed requires a multiple of its "
                                     "nccl_start_alignment_factor 2 (stage_1_and_2.py)", r->path, kp, z->allgather_bucket);
            z->has_allgather_bucket = 1;
        } else if (!strcmp(key, "contiguous_gradients")) {
            SHS_CHECK(shs__ds_get_bool(r, kp, v, &z->contiguous));
            z->has_contiguous = 1;
        } else if (!strcmp(key, "overlap_comm")) {
            SHS_CHECK(shs__ds_get_bool(r, kp, v, &z->overlap));
            z->has_overlap = 1;
        } else if (!strcmp(key, "mics_shard_size")) {
            SHS_CHECK(shs__ds_get_int(r, kp, v, -1, SHS_MAX_WORLD, &z->mics));
            if (z->mics == 0) return shs__ds_bad_type(r, kp, v, "-1 (off) or a group size >= 1");
        } else if (!strcmp(key, "mics_hierarchical_params_gather")) {
            SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "MiCS's two-level all-gather"));
        } else if (!strcmp(key, "reduce_scatter")) {
            int b = 0;
            SHS_CHECK(shs__ds_get_bool(r, kp, v, &b));
            if (!b) SHS__DS_KEY(r, shs__ds_not_modelled(r, kp, v, "ZeRO gradients reduced by all-reduce instead of reduce-scatter"));
        } else if (!strcmp(key, "stage3_max_live_parameters") || !strcmp(key, "max_live_parameters")) {
            if (z->has_max_live) return shs_set_error(SHS_PARSE, "%s: %s: the live-parameter budget is given twice "
                                                      "(it and its alias)", r->path, kp);
            SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->max_live));
            z->has_max_live = 1;
        } else if (!strcmp(key, "stage3_max_reuse_distance") || !strcmp(key, "max_reuse_distance")) {
            if (z->has_max_reuse) return shs_set_error(SHS_PARSE, "%s: %s: the reuse distance is given twice "
                                                       "(it and its alias)", r->path, kp);
            SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->max_reuse));
            z->has_max_reuse = 1;
        } else if (!strcmp(key, "zero_hpz_partition_size")) {
            SHS__DS_KEY(r, shs__ds_only_default(r, kp, v, 1, "ZeRO++ hierarchical partitioning"));
        } else if (!strcmp(key, "zero_quantized_weights") || !strcmp(key, "zero_quantized_gradients") ||
                   !strcmp(key, "zero_quantized_nontrainable_weights")) {
            SHS__DS_KEY(r, shs__ds_refuse_true(r, kp, v, "ZeRO++ quantized communication"));
        } else if (!strcmp(key, "cpu_offload") || !strcmp(key, "cpu_offload_param") ||
                   !strcmp(key, "cpu_offload_use_pin_memory")) {
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: %s is DeepSpeed's deprecated spelling: use offload_optimizer / "
                                 "offload_param {\"device\": \"cpu\"}", r->path, kp));
        } else if (!shs__ds_try_ignored(r, ignored_zero, sizeof ignored_zero / sizeof ignored_zero[0], "zero_optimization", key)) {
            SHS__DS_KEY(r, shs__ds_unknown_key(r, kp));
        }
    }
    return SHS_OK;
}

shs_status_t shs__ds_zero_finish(shs__ds_reader_t *r, const shs__ds_zero_t *z) {
    shs_ds_config_t *ds = r->ds;
    /* the file's own stage; shs_ds_config_apply keeps what
     * the effective strategy takes */
    static const shs_strategy_kind_t kinds[] = {SHS_DDP, SHS_ZERO1, SHS_ZERO2, SHS_ZERO3};
    ds->vals.strategy.kind = kinds[z->stage];
    shs__ds_set(ds, SHS_DS_STAGE, z->has_stage ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    if (z->mics > 0) {
        if (z->stage != 3)
            SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.mics_shard_size = %ld needs stage 3 (MiCS "
                                 "shards parameters), not stage %ld", r->path, z->mics, z->stage));
        ds->vals.strategy.kind = SHS_HYBRID_SHARD;
        ds->vals.strategy.shard_group_size = (int)z->mics;
        shs__ds_set(ds, SHS_DS_SHARD_GROUP, SHS_DS_FROM_CONFIG);
    }
    if (z->off_param && (z->stage != 3))
        SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_param needs stage 3, not stage %ld",
                             r->path, z->stage));
    if (z->off_param && !z->off_opt)
        SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_param = cpu without offload_optimizer = "
                             "cpu is not modelled: shardsim's parameter offload keeps the optimizer on the host too",
                             r->path));
    if (z->off_opt && z->stage == 0)
        SHS__DS_KEY(r, shs_set_error(SHS_UNSUPPORTED, "%s: zero_optimization.offload_optimizer needs a ZeRO stage (1-3), not "
                             "stage 0", r->path));
    ds->vals.strategy.offload = z->off_param ? SHS_OFFLOAD_PARAMS : z->off_opt ? SHS_OFFLOAD_OPTIMIZER : SHS_OFFLOAD_NONE;
    shs__ds_set(ds, SHS_DS_OFFLOAD, (z->off_opt || z->off_param) ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    /* the stage-3 settings as at stage 3 ("auto": resolved by apply) */
    ds->stage3_keys = z->has_persistence || z->has_prefetch;
    ds->vals.replicate_below = z->has_persistence ? (size_t)z->persistence : 100000;
    shs__ds_set(ds, SHS_DS_REPLICATE_BELOW, z->has_persistence ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    long pf = z->has_prefetch ? z->prefetch : 50000000;
    ds->vals.strategy.backward_prefetch = pf > 0 ? SHS_PREFETCH_PRE : SHS_PREFETCH_NONE;
    shs__ds_set(ds, SHS_DS_PREFETCH, z->has_prefetch ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    /* the granularity, DeepSpeed's defaults where the file is silent ("auto" sizes: apply's) */
    shs_zero_knobs_t *k = &ds->vals.strategy.zero;
    k->reduce_bucket = (size_t)(z->has_reduce_bucket ? z->reduce_bucket : 500000000);
    k->contiguous_gradients = z->has_contiguous ? z->contiguous : 1;
    k->overlap_comm = z->has_overlap ? z->overlap : z->stage == 3;
    /* any size: DeepSpeed on a torch with all_gather_into_tensor gathers the whole partition at once */
    k->allgather_bucket = (size_t)(z->has_allgather_bucket && z->allgather_bucket ? z->allgather_bucket : 500000000);
    k->prefetch_bucket = (size_t)(pf > 0 ? pf : 0);
    long live = z->has_max_live ? z->max_live : 1000000000;
    k->max_live = (size_t)(live > 0 ? live : 1); /* 0: nothing may be prefetched */
    k->max_reuse = (size_t)(z->has_max_reuse ? z->max_reuse : 1000000000);
    int any = z->has_reduce_bucket || z->has_contiguous || z->has_overlap || z->has_allgather_bucket ||
              z->has_max_live || z->has_max_reuse;
    shs__ds_set(ds, SHS_DS_ZERO_KNOBS, any ? SHS_DS_FROM_CONFIG : SHS_DS_FROM_DS_DEFAULT);
    ds->stage3_keys = ds->stage3_keys || z->has_max_live || z->has_max_reuse;
    return SHS_OK;
}

#endif
