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
 * zero++ (hpZ, quantized weights/gradients), offload ratio/buffer settings. Every key is a row of `zero_keys` or `offload_keys` below: what
 * DeepSpeed does with it and what shardsim does.
 * What it is not: the other sections (ds_config.c lists them).
 */
#include <stdio.h>
#include <string.h>

#include "shardsim/strategy.h"
#include "train/ds_config_impl.h"

#ifdef SHS_HAVE_JANSSON

/* ---- offload_optimizer / offload_param (runtime/zero/offload_config.py) ---- */

/* device: *(int *)sec 0 none, 1 cpu */
static shs_status_t read_device(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                void *sec) {
    const char *d = NULL;
    if (json_is_null(v)) return SHS_OK;
    SHS_CHECK(shs__ds_get_str(r, kp, v, &d));
    if (!strcmp(d, "cpu")) *(int *)sec = 1;
    else if (!strcmp(d, "none")) *(int *)sec = 0;
    else if (!strcmp(d, "nvme")) return shs__ds_not_modelled(r, kp, v, "shardsim offloads to host memory only (cpu)");
    else return shs__ds_bad_type(r, kp, v, "\"cpu\", \"none\" or \"nvme\"");
    return SHS_OK;
}

#define NVME_BUFFERS "NVMe swapping buffers (shardsim offloads to host memory only)"
static const shs__ds_key_t offload_keys[] = {
    SHS__DS_MAP("device", "where the state lives: none, cpu or nvme (default none)",
        "cpu -> shardsim's offload (host memory); nvme refused", read_device),
    SHS__DS_IGNORE("pin_memory", "page-locked host buffers (default true)",
        "pinned host memory: transfer speed only"),
    SHS__DS_DEFAULT_ONLY("ratio", "offload_optimizer: the fraction of the optimizer offloaded (default 1)",
        "partial offload", 1.0),
    SHS__DS_REFUSE_IF_TRUE("fast_init", "offload_optimizer: NVMe initialisation shortcut", "NVMe swapping"),
    SHS__DS_REFUSE_IF_TRUE("pipeline_read", "offload_optimizer: overlap NVMe reads with the step", "NVMe swapping"),
    SHS__DS_REFUSE_IF_TRUE("pipeline_write", "offload_optimizer: overlap NVMe writes with the step", "NVMe swapping"),
    SHS__DS_REFUSE("nvme_path", "the NVMe mount used with device nvme", NVME_BUFFERS),
    SHS__DS_REFUSE("buffer_count", "NVMe staging buffers", NVME_BUFFERS),
    SHS__DS_REFUSE("buffer_size", "offload_param: size of each NVMe staging buffer", NVME_BUFFERS),
    SHS__DS_REFUSE("max_in_cpu", "offload_param: parameters kept in host memory with nvme", NVME_BUFFERS),
};

/* offload_optimizer / offload_param: *(int *)out 0 none, 1 cpu. */
static shs_status_t read_offload(shs__ds_reader_t *r, const char *kp, const json_t *obj, int *device) {
    *device = 0;
    if (json_is_null(obj)) return SHS_OK;
    return shs__ds_read_keys(r, kp, obj, SHS__DS_ROWS(offload_keys), device, NULL);
}

/* ---- zero_optimization (runtime/zero/config.py) --------------------------------- */

static shs_status_t read_stage(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                               void *sec) {
    shs__ds_zero_t *z = sec;
    SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 3, &z->stage));
    z->has_stage = 1;
    return SHS_OK;
}

static shs_status_t read_offload_optimizer(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                           const json_t *v, void *sec) {
    return read_offload(r, kp, v, &((shs__ds_zero_t *)sec)->off_opt);
}

static shs_status_t read_offload_param(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                       void *sec) {
    return read_offload(r, kp, v, &((shs__ds_zero_t *)sec)->off_param);
}

static shs_status_t read_persistence(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                     void *sec) {
    shs__ds_zero_t *z = sec;
    if (z->has_persistence) return shs_set_error(SHS_PARSE, "%s: %s: the persistence threshold is given twice "
                                                 "(it and its alias)", r->path, kp);
    if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PERSISTENCE;
    else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->persistence));
    z->has_persistence = 1;
    return SHS_OK;
}

static shs_status_t read_prefetch(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec) {
    shs__ds_zero_t *z = sec;
    if (z->has_prefetch) return shs_set_error(SHS_PARSE, "%s: %s: the prefetch bucket size is given twice "
                                              "(it and its alias)", r->path, kp);
    if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_PREFETCH;
    else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->prefetch));
    z->has_prefetch = 1;
    return SHS_OK;
}

/* "auto": the Trainer fills it from the hidden size */
static shs_status_t read_reduce_bucket(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                       void *sec) {
    shs__ds_zero_t *z = sec;
    if (shs__ds_is_auto(v)) r->ds->autos |= 1u << SHS_DS_AUTO_REDUCE_BUCKET;
    else SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->reduce_bucket));
    z->has_reduce_bucket = 1;
    return SHS_OK;
}

static shs_status_t read_allgather_bucket(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                          const json_t *v, void *sec) {
    shs__ds_zero_t *z = sec;
    SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e15, &z->allgather_bucket));
    if (z->allgather_bucket % 2)
        return shs_set_error(SHS_INVALID_ARG, "%s: %s = %ld: DeepSpeed requires a multiple of its "
                             "nccl_start_alignment_factor 2 (stage_1_and_2.py)", r->path, kp, z->allgather_bucket);
    z->has_allgather_bucket = 1;
    return SHS_OK;
}

static shs_status_t read_contiguous(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                    void *sec) {
    shs__ds_zero_t *z = sec;
    SHS_CHECK(shs__ds_get_bool(r, kp, v, &z->contiguous));
    z->has_contiguous = 1;
    return SHS_OK;
}

static shs_status_t read_overlap(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                 void *sec) {
    shs__ds_zero_t *z = sec;
    SHS_CHECK(shs__ds_get_bool(r, kp, v, &z->overlap));
    z->has_overlap = 1;
    return SHS_OK;
}

static shs_status_t read_max_live(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                  void *sec) {
    shs__ds_zero_t *z = sec;
    if (z->has_max_live) return shs_set_error(SHS_PARSE, "%s: %s: the live-parameter budget is given twice "
                                              "(it and its alias)", r->path, kp);
    SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->max_live));
    z->has_max_live = 1;
    return SHS_OK;
}

static shs_status_t read_max_reuse(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                                   void *sec) {
    shs__ds_zero_t *z = sec;
    if (z->has_max_reuse) return shs_set_error(SHS_PARSE, "%s: %s: the reuse distance is given twice "
                                               "(it and its alias)", r->path, kp);
    SHS_CHECK(shs__ds_get_int(r, kp, v, 0, 1e18, &z->max_reuse));
    z->has_max_reuse = 1;
    return SHS_OK;
}

static shs_status_t read_mics(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp, const json_t *v,
                              void *sec) {
    shs__ds_zero_t *z = sec;
    SHS_CHECK(shs__ds_get_int(r, kp, v, -1, SHS_MAX_WORLD, &z->mics));
    if (z->mics == 0) return shs__ds_bad_type(r, kp, v, "-1 (off) or a group size >= 1");
    return SHS_OK;
}

static shs_status_t read_deprecated_offload(shs__ds_reader_t *r, const shs__ds_key_t *row, const char *kp,
                                            const json_t *v, void *sec) {
    return shs_set_error(SHS_UNSUPPORTED, "%s: %s is DeepSpeed's deprecated spelling: use offload_optimizer / "
                         "offload_param {\"device\": \"cpu\"}", r->path, kp);
}

#define CHECKPOINT_SAVE "checkpoint saving"
#define PREFETCH "the units next in order gathered ahead within this many elements; 0: no prefetch"
#define LIVE "no prefetch above this many gathered elements (0: none)"
#define REUSE "a unit whose backward comes within this many gathered elements of its forward stays gathered"
static const shs__ds_key_t zero_keys[] = {
    SHS__DS_MAP("stage", "0 none, 1 optimizer states, 2 + gradients, 3 + parameters (default 0)",
        "ddp, zero1, zero2, zero3", read_stage),
    SHS__DS_MAP("offload_optimizer", "ZeRO-Offload of the optimizer state and step (stages 1-3)", "offload optimizer",
        read_offload_optimizer),
    SHS__DS_MAP("offload_param", "parameters offloaded (stage 3)",
        "offload params (with offload_optimizer cpu beside it)", read_offload_param),
    SHS__DS_MAP("stage3_param_persistence_threshold",
        "parameters with fewer elements stay unpartitioned (default 1e5)", "--replicate-below, per wrap unit",
        read_persistence),
    SHS__DS_MAP("param_persistence_threshold", "alias of stage3_param_persistence_threshold",
        "--replicate-below, per wrap unit", read_persistence),
    SHS__DS_MAP("stage3_prefetch_bucket_size", "elements prefetched ahead of use (default 5e7)",
        PREFETCH, read_prefetch),
    SHS__DS_MAP("prefetch_bucket_size", "alias of stage3_prefetch_bucket_size", PREFETCH, read_prefetch),
    SHS__DS_MAP("reduce_bucket_size", "elements reduced per call (default 5e8)",
        "ZeRO-2/3 gradients reduce-scattered together in buckets of this many elements", read_reduce_bucket),
    SHS__DS_MAP("mics_shard_size", "MiCS: ZeRO-3 within groups of this many ranks (default -1: off)",
        "hybrid_shard with this shard group", read_mics),
    SHS__DS_REFUSE_IF_TRUE("mics_hierarchical_params_gather", "MiCS's two-level all-gather",
        "MiCS's two-level all-gather"),
    SHS__DS_REFUSE_IF_FALSE("reduce_scatter", "false: gradients all-reduced instead of reduce-scattered (default true)",
        "ZeRO gradients reduced by all-reduce instead of reduce-scatter"),
    SHS__DS_MAP("stage3_max_live_parameters", "parameters gathered at once at most (default 1e9)", LIVE,
        read_max_live),
    SHS__DS_MAP("max_live_parameters", "alias of stage3_max_live_parameters", LIVE, read_max_live),
    SHS__DS_MAP("stage3_max_reuse_distance", "keep a parameter gathered if reused within this many (default 1e9)",
        REUSE, read_max_reuse),
    SHS__DS_MAP("max_reuse_distance", "alias of stage3_max_reuse_distance", REUSE, read_max_reuse),
    SHS__DS_DEFAULT_ONLY("zero_hpz_partition_size", "ZeRO++ hpZ: a secondary parameter partition (default 1)",
        "ZeRO++ hierarchical partitioning", 1),
    SHS__DS_REFUSE_IF_TRUE("zero_quantized_weights", "ZeRO++ qwZ: weights all-gathered in int8",
        "ZeRO++ quantized communication"),
    SHS__DS_REFUSE_IF_TRUE("zero_quantized_gradients", "ZeRO++ qgZ: gradients reduced in int4",
        "ZeRO++ quantized communication"),
    SHS__DS_REFUSE_IF_TRUE("zero_quantized_nontrainable_weights", "ZeRO++: frozen weights held quantized",
        "ZeRO++ quantized communication"),
    SHS__DS_MAP("cpu_offload", "deprecated spelling of offload_optimizer", "refused naming the new spelling",
        read_deprecated_offload),
    SHS__DS_MAP("cpu_offload_param", "deprecated spelling of offload_param", "refused naming the new spelling",
        read_deprecated_offload),
    SHS__DS_MAP("cpu_offload_use_pin_memory", "deprecated spelling of pin_memory", "refused naming the new spelling",
        read_deprecated_offload),
    SHS__DS_MAP("contiguous_gradients", "copies gradients into one buffer as they are produced (default true)",
        "the ipg buffer of reduce_bucket_size elements in the GPU ledger", read_contiguous),
    SHS__DS_MAP("overlap_comm", "overlaps reductions with backward (default: true at stage 3)",
        "ZeRO-1/2: a second ipg buffer (DeepSpeed's double buffer)", read_overlap),
    SHS__DS_IGNORE("allgather_partitions", "ZeRO-1/2: all-gather vs broadcast of the updated partitions",
        "ZeRO-1/2 all-gather implementation; same bytes"),
    SHS__DS_MAP("allgather_bucket_size", "elements all-gathered per call (default 5e8; even)",
        "ZeRO-1/2 re-gather the whole partition in one all-gather (DeepSpeed with all_gather_into_tensor)",
        read_allgather_bucket),
    SHS__DS_IGNORE("round_robin_gradients", "stage 1-2 offload: gradient copy order",
        "gradient copy order under offload; same results"),
    SHS__DS_IGNORE("sub_group_size", "elements per optimizer sub-step (default 1e9)",
        "optimizer step granularity; same results"),
    SHS__DS_IGNORE("stage3_gather_16bit_weights_on_model_save", "save_16bit_model gathers the weights",
        CHECKPOINT_SAVE),
    SHS__DS_IGNORE("gather_16bit_weights_on_model_save", "alias of stage3_gather_16bit_weights_on_model_save",
        CHECKPOINT_SAVE),
    SHS__DS_IGNORE("stage3_gather_fp16_weights_on_model_save", "deprecated spelling of the above", CHECKPOINT_SAVE),
    SHS__DS_IGNORE("elastic_checkpoint", "checkpoint layout for another world size", "checkpoint format"),
    SHS__DS_IGNORE("load_from_fp32_weights", "checkpoint loading from the fp32 copy", "checkpoint loading"),
    SHS__DS_IGNORE("ignore_unused_parameters", "tolerate parameters without gradients", "every parameter is used"),
    SHS__DS_IGNORE("memory_efficient_linear", "ZeRO-3 linear that frees its input early",
        "activation memory of DeepSpeed's linear; shardsim's model is its own"),
    SHS__DS_IGNORE("log_trace_cache_warnings", "logging", "logging"),
};

shs_status_t shs__ds_read_zero(shs__ds_reader_t *r, const json_t *obj, shs__ds_zero_t *z) {
    return shs__ds_read_keys(r, "zero_optimization", obj, SHS__DS_ROWS(zero_keys), z, NULL);
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
