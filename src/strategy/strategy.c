/* strategy.c - creating and destroying a rank's strategy: the stage's row
 * (stages.c) turned into each unit's form (plan_unit), the shard and
 * replica groups of hybrid sharding, the host device of offloading, and
 * the persistent buffers with their initial values. See strategy.h for what
 * each stage holds and when it communicates; the parameter source is in
 * strategy_source.c, gradient reduction in strategy_reduce.c, the step in
 * strategy_step.c, checkpoint state in strategy_state.c.
 * What it is not: the collectives themselves (src/comm/) or the math
 * (src/model/, optim.c).
 */
#include "shardsim/strategy.h"

#include <math.h>
#include <stdlib.h>

#include "shardsim/shard.h"
#include "strategy/strategy_unit.h"

/* ---- create / destroy ------------------------------------------------------ */

/* Fill elements [begin, end) of unit `unit`'s flat parameter into device
 * memory `dst`, generating the initial values on the host in chunks. */
static shs_status_t init_params(shs_strategy_t *s, shs_device_t *d, int unit, size_t begin, size_t end, float *dst) {
    enum { CHUNK = 1 << 16 };
    if (shs_device_is_meta(d)) return SHS_OK; /* meta: no values to generate (device.h) */
    float *host = malloc(CHUNK * sizeof(float));
    if (!host) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate init buffer", s->rank);
    shs_status_t st = SHS_OK;
    for (size_t i = begin; i < end && st == SHS_OK; i += CHUNK) {
        size_t n = end - i < CHUNK ? end - i : CHUNK;
        shs_layout_init_range(s->layout, s->cfg.seed, unit, i, i + n, host);
        st = shs_memcpy_h2d(d, dst + (i - begin), host, n * sizeof(float));
    }
    free(host);
    return st;
}

static shs_status_t alloc_floats(shs_strategy_t *s, float **p, size_t n, shs_mem_category_t cat, const char *tag) {
    return shs_device_alloc(s->dev, (void **)p, n * sizeof(float), cat, tag);
}

/* Unit i's form on this rank, from the stage's row (stages.c), the param
 * dtype, the offload setting and the layout: the one place the stage's
 * choices become per-unit facts. */
static void plan_unit(shs_strategy_t *s, int i) {
    const shs_stage_t *st = s->stage;
    unit_state_t *u = &s->units[i];
    u->numel = s->layout->units[i].numel;
    /* replicated units are held whole and all-reduced under every stage */
    u->whole = !st->shards_optimizer || s->layout->units[i].replicated;
    u->shard = shs_shard_of(u->numel, s->shard_n, s->shard_rank, s->cfg.shard_align);
    u->full_len = u->whole ? u->numel : shs_padded_numel(u->numel, s->shard_n, s->cfg.shard_align);
    /* a stage that re-gathers after the step keeps, with a 2-byte param
     * dtype, f32 master shards plus a full replica in that dtype (DeepSpeed
     * ZeRO-1/2); in f32 its parameters are their own master and stay full */
    u->keeps_lp_replica = !u->whole && st->regathers_params_after_step && low_precision(s);
    u->full_params = u->whole || (!st->shards_params && !u->keeps_lp_replica);
    u->grads_in_block = u->whole || !st->shards_grads;
    u->gathers = !u->full_params || low_precision(s);
    u->params_on_host = s->cfg.offload == SHS_OFFLOAD_PARAMS && !u->full_params;
    /* a stage that shards its parameters keeps, below f32, the shard in
     * param_dtype too (DeepSpeed ZeRO-3), unless the shard lives on the host */
    u->keeps_lp_shard = !u->whole && st->shards_params && low_precision(s) && !u->params_on_host;
}

/* Reserve a unit's persistent buffers without touching them, so that a model
 * too large for the device fails before any slow initialization. */
static shs_status_t alloc_unit(shs_strategy_t *s, int i) {
    unit_state_t *u = &s->units[i];
    if (u->full_params) SHS_CHECK(alloc_floats(s, &u->params, u->full_len, SHS_MEM_PARAMS, "parameters"));
    else SHS_CHECK(shs_device_alloc(params_dev(s, u), (void **)&u->params, u->shard.size * sizeof(float),
                                    SHS_MEM_PARAMS, u->params_on_host ? "offloaded parameter shard" : "parameter shard"));
    if (u->full_params && low_precision(s) && s->cfg.framework == SHS_FRAMEWORK_DEEPSPEED)
        SHS_CHECK(shs_device_alloc_modeled(s->dev, &u->gpu_lp_params, 0, (u->numel ? u->numel : 1) *
                                           shs_dtype_size(s->cfg.param_dtype), SHS_MEM_PARAMS,
                                           "16-bit parameters (DeepSpeed)"));
    if (u->keeps_lp_replica) {
        SHS_CHECK(shs_device_alloc(s->dev, &u->lp_replica, (u->full_len ? u->full_len : 1) * shs_dtype_size(s->cfg.param_dtype),
                                   SHS_MEM_PARAMS, "parameters (param-dtype replica)"));
        u->lp_stale = 1; /* gathered at first use, once the shards hold their values */
    }
    if (u->keeps_lp_shard) { /* FSDP2 keeps none: it casts the f32 shard for each all-gather */
        size_t b = (u->shard.size ? u->shard.size : 1) * shs_dtype_size(s->cfg.param_dtype);
        SHS_CHECK(shs_device_alloc_modeled(s->dev, &u->lp_shard, b, s->cfg.framework == SHS_FRAMEWORK_TORCH ? 0 : b,
                                           SHS_MEM_PARAMS, "parameter shard (param dtype)"));
    }
    if (!u->grads_in_block)
        SHS_CHECK(shs_device_alloc(s->dev, &u->grad_shard, (u->shard.size ? u->shard.size : 1) * grad_es(s), SHS_MEM_GRADS,
                                   "gradient shard"));
    size_t n_state = optim_state_len(s, u), n_opt = optim_len(u);
    if (n_state)
        SHS_CHECK(shs_device_alloc(s->opt_dev, (void **)&u->optim_state, n_state * sizeof(float), SHS_MEM_OPTIM,
                                   "optimizer state"));
    if (s->host) {
        SHS_CHECK(shs_device_alloc(s->host, (void **)&u->host_grad, (n_opt ? n_opt : 1) * sizeof(float),
                                   SHS_MEM_GRADS, "offloaded gradient"));
        if (!u->params_on_host)
            SHS_CHECK(shs_device_alloc(s->host, (void **)&u->master, (n_opt ? n_opt : 1) * sizeof(float),
                                       SHS_MEM_PARAMS, "master parameters"));
    }
    return SHS_OK;
}

/* Initial parameters (shs_layout_init_range), zero gradient shard and state. */
static shs_status_t init_unit(shs_strategy_t *s, int i) {
    unit_state_t *u = &s->units[i];
    if (u->full_params) SHS_CHECK(init_params(s, s->dev, i, 0, u->full_len, u->params));
    else SHS_CHECK(init_params(s, params_dev(s, u), i, u->shard.offset, u->shard.offset + u->shard.size, u->params));
    shs__strategy_refresh_lp_shard(s, u);
    if (u->grad_shard) SHS_CHECK(shs_memset(s->dev, u->grad_shard, 0, u->shard.size * grad_es(s)));
    if (u->optim_state) SHS_CHECK(shs_memset(s->opt_dev, u->optim_state, 0, optim_state_len(s, u) * sizeof(float)));
    return shs__strategy_download_master(s, u);
}

int shs_strategy_is_hybrid(shs_strategy_kind_t k) {
    const shs_stage_t *st = shs_strategy_stage(k);
    return st && st->reduce == SHS_GRAD_REDUCE_SCATTER_REPLICAS;
}

int shs_strategy_hybrid_color(int G, int split_index, int rank, int *key) {
    *key = rank;
    return split_index == 0 ? rank / G : rank % G;
}

/* reshard_after_forward_size as it acts: 0 (off) unless 1 < R < the shard group */
static int reshard_groups(const shs_strategy_config_t *cfg, int shard_n) {
    int R = cfg->reshard_after_forward_size;
    return R > 1 && R < shard_n ? R : 0;
}

int shs_strategy_split(const shs_strategy_config_t *cfg, int world, int split_index, int rank, int *color, int *key) {
    int hybrid = shs_strategy_is_hybrid(cfg->kind), G = cfg->shard_group_size ? cfg->shard_group_size : world;
    int R = reshard_groups(cfg, hybrid ? G : world);
    int kinds[3], n = 0;
    if (hybrid) kinds[n++] = 1;
    if (hybrid && world / G > 1) kinds[n++] = 2;
    if (R) kinds[n++] = 3;
    *key = rank;
    *color = 0;
    if (split_index < 0 || split_index >= n) return 0;
    int k = kinds[split_index];
    *color = k == 1 ? rank / G : k == 2 ? rank % G : rank / R;
    return k;
}

shs_status_t shs_strategy_create(shs_strategy_t **out, const shs_strategy_config_t *cfg,
                                 const shs_layout_t *layout, shs_device_t *dev, shs_comm_t *comm) {
    *out = NULL;
    const shs_stage_t *stage = shs_strategy_stage(cfg->kind);
    if (!stage) return shs_set_error(SHS_INVALID_ARG, "invalid strategy %d", (int)cfg->kind);
    if (cfg->clip_norm > 0 && cfg->norm_type && cfg->norm_type != SHS_NORM_INF && cfg->norm_type != 1 && cfg->norm_type != 2)
        return shs_set_error(SHS_INVALID_ARG, "norm type must be 1, 2 or inf (got %d)", cfg->norm_type);
    for (int k = 0; k < 2; k++) {
        shs_dtype_t t = k ? cfg->reduce_dtype : cfg->param_dtype;
        if (t != SHS_DTYPE_DEFAULT && t != SHS_F32 && t != SHS_BF16 && t != SHS_F16)
            return shs_set_error(SHS_INVALID_ARG, "%s dtype must be f32, bf16 or f16 (got %s)", k ? "reduce" : "param",
                                 shs_dtype_name(t));
    }
    if ((int)cfg->framework < 0 || cfg->framework >= SHS_NUM_FRAMEWORKS)
        return shs_set_error(SHS_INVALID_ARG, "invalid framework %d", (int)cfg->framework);
    shs_dtype_t pd = cfg->param_dtype ? cfg->param_dtype : SHS_F32;
    if (cfg->grad_accum_dtype != SHS_DTYPE_DEFAULT && cfg->grad_accum_dtype != SHS_F32 && cfg->grad_accum_dtype != pd)
        return shs_set_error(SHS_INVALID_ARG, "gradient accumulation dtype must be f32 or the param dtype %s (got %s)",
                             shs_dtype_name(pd), shs_dtype_name(cfg->grad_accum_dtype));
    SHS_CHECK(shs_lr_schedule_check(&cfg->lr_schedule));
    if (cfg->gradient_predivide_factor < 0 || !isfinite(cfg->gradient_predivide_factor))
        return shs_set_error(SHS_INVALID_ARG, "gradient predivide factor %g must be >= 0 (0: none)",
                             (double)cfg->gradient_predivide_factor);
    shs_strategy_t *s = calloc(1, sizeof *s);
    if (!s || !(s->units = calloc((size_t)layout->num_units ? (size_t)layout->num_units : 1, sizeof *s->units))) {
        free(s);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate strategy state");
    }
    s->cfg = *cfg;
    s->stage = stage;
    if (!s->cfg.bucket_bytes) s->cfg.bucket_bytes = SHS_DEFAULT_BUCKET_BYTES;
    if (!s->cfg.shard_align) s->cfg.shard_align = 1;
    s->layout = layout;
    s->dev = dev;
    s->comm = comm;
    s->rank = shs_comm_rank(comm);
    s->nranks = shs_comm_size(comm);
    s->shard_comm = comm;
    s->shard_n = s->nranks;
    s->shard_rank = s->rank;
    s->sync = 1;
    s->step = 1;
    s->bucket_unit = -1;
    s->grad_norm = -1.0f;
    s->opt_dev = dev;
    if (s->cfg.param_dtype == SHS_DTYPE_DEFAULT) s->cfg.param_dtype = SHS_F32;
    if (s->cfg.reduce_dtype == SHS_DTYPE_DEFAULT) s->cfg.reduce_dtype = s->cfg.param_dtype;
    if (s->cfg.grad_accum_dtype == SHS_DTYPE_DEFAULT) s->cfg.grad_accum_dtype = s->cfg.param_dtype;
    if (s->cfg.framework == SHS_FRAMEWORK_DEFAULT) s->cfg.framework = stage->framework;
    shs_loss_scaler_fill_defaults(&s->cfg.scaler);
    s->scaling = s->cfg.param_dtype == SHS_F16;
    s->scaler = shs_loss_scale_initial(&s->cfg.scaler);
    if (!s->scaling) s->scaler.scale = 1.0f;
    s->source = shs__strategy_param_source(s);
    s->phase = SHS_PHASE_FORWARD;
    int orders_ok = 1;
    for (int ph = 0; ph < 2; ph++) {
        s->order[ph] = calloc((size_t)layout->num_units + 1, sizeof(int));
        s->prev[ph] = calloc((size_t)layout->num_units + 1, sizeof(int));
        orders_ok = orders_ok && s->order[ph] && s->prev[ph];
    }
    if (!orders_ok) {
        for (int ph = 0; ph < 2; ph++) free(s->order[ph]), free(s->prev[ph]);
        free(s->units);
        free(s);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate strategy state");
    }

    shs_status_t st = SHS_OK;
    if (shs_strategy_is_hybrid(cfg->kind)) {
        int G = cfg->shard_group_size ? cfg->shard_group_size : s->nranks;
        if (G < 1 || s->nranks % G != 0) {
            st = shs_set_error(SHS_INVALID_ARG, "shard group size %d must divide the world size %d", G, s->nranks);
            goto fail;
        }
        /* groups of G consecutive ranks shard; ranks equal mod G replicate.
         * With one replica (G = N) there is no replica group: an all-reduce
         * over one rank would change nothing and only add calls. */
        uint64_t caller_tag = shs_comm_tag(comm); /* restored: the caller's later calls are its own */
        shs_comm_set_tag(comm, shs_comm_tag_pack(SHS_TAG_SPLIT, -1, 0, 0));
        int key, color = shs_strategy_hybrid_color(G, 0, s->rank, &key);
        st = shs_comm_split(comm, color, key, &s->shard_comm);
        color = shs_strategy_hybrid_color(G, 1, s->rank, &key);
        if (st == SHS_OK && s->nranks / G > 1) st = shs_comm_split(comm, color, key, &s->replica_comm);
        shs_comm_set_tag(comm, caller_tag);
        if (st != SHS_OK) goto fail;
        s->shard_n = G;
        s->shard_rank = s->rank % G;
        s->replica = s->rank / G;
    }
    if (cfg->reshard_after_forward_size < 0 || (cfg->reshard_after_forward_size > 0 &&
                                                 s->shard_n % cfg->reshard_after_forward_size != 0)) {
        st = shs_set_error(SHS_INVALID_ARG, "reshard_after_forward %d must be a positive divisor of the shard group's "
                           "%d ranks (FSDP2 reshards to a smaller mesh that divides it)",
                           cfg->reshard_after_forward_size, s->shard_n);
        goto fail;
    }
    if (reshard_groups(&s->cfg, s->shard_n) && stage->shards_params) {
        /* R consecutive world ranks, inside one shard group (R divides G) */
        uint64_t caller_tag = shs_comm_tag(comm);
        shs_comm_set_tag(comm, shs_comm_tag_pack(SHS_TAG_SPLIT, -1, 0, 0));
        int R = reshard_groups(&s->cfg, s->shard_n);
        st = shs_comm_split(comm, s->rank / R, s->rank, &s->reshard_comm);
        shs_comm_set_tag(comm, caller_tag);
        if (st != SHS_OK) goto fail;
        s->reshard_n = R;
    }
    if (cfg->offload != SHS_OFFLOAD_NONE) {
        if (cfg->offload == SHS_OFFLOAD_PARAMS && !stage->shards_params) {
            st = shs_set_error(SHS_INVALID_ARG, "offloading parameters needs sharded parameters (zero3 or "
                               "hybrid_shard), not %s; use --offload optimizer", shs_strategy_name(cfg->kind));
            goto fail;
        }
        /* host memory: unlimited here, accounted apart from the device */
        SHS_CHECK_GOTO(shs_device_is_meta(dev) ? shs_device_create_meta(&s->host, s->rank, SIZE_MAX)
                                               : shs_device_create_cpu(&s->host, s->rank, SIZE_MAX, 1), st, fail);
        s->opt_dev = s->host;
    }
    for (int i = 0; i < layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        plan_unit(s, i);
        u->grad_offset = s->grad_block_len;
        if (u->grads_in_block) s->grad_block_len += u->full_len;
    }
    if (s->grad_block_len) {
        SHS_CHECK_GOTO(shs_device_alloc(dev, &s->grad_block, s->grad_block_len * grad_es(s), SHS_MEM_GRADS, "gradients"),
                       st, fail);
        for (int i = 0; i < layout->num_units; i++)
            if (s->units[i].grads_in_block) s->units[i].grad_full = grad_at(s, s->grad_block, s->units[i].grad_offset);
    }
    if (s->cfg.zero.reduce_bucket && stage->shards_grads) {
        if (!(s->rs_units = calloc((size_t)layout->num_units + 1, sizeof *s->rs_units))) {
            st = shs_set_error(SHS_HOST_OOM, "cannot allocate strategy state");
            goto fail;
        }
        /* DeepSpeed's ipg buffer (two for ZeRO-1/2 with overlap_comm): the GPU's, held throughout */
        size_t nbuf = s->cfg.zero.overlap_comm && !stage->shards_params ? 2 : 1;
        if (s->cfg.zero.contiguous_gradients)
            SHS_CHECK_GOTO(shs_device_alloc_modeled(dev, &s->ipg, 0, nbuf * s->cfg.zero.reduce_bucket * grad_es(s),
                                                    SHS_MEM_COMM, "ipg buffer (DeepSpeed's reduce bucket)"), st, fail);
    }
    if (cfg->clip_norm > 0 || s->scaling)
        SHS_CHECK_GOTO(shs_device_alloc(s->opt_dev, (void **)&s->norm_acc, SHS_NORM_ACC_WORDS * sizeof(int64_t),
                                        SHS_MEM_OTHER, "gradient norm"), st, fail);
    for (int i = 0; i < layout->num_units; i++) SHS_CHECK_GOTO(alloc_unit(s, i), st, fail);
    for (int i = 0; i < layout->num_units; i++) SHS_CHECK_GOTO(init_unit(s, i), st, fail);
    *out = s;
    return SHS_OK;
fail:
    shs_strategy_destroy(s);
    return st;
}

void shs_strategy_destroy(shs_strategy_t *s) {
    if (!s) return;
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        shs_device_free(params_dev(s, u), u->params);
        shs_device_free(s->dev, u->lp_replica);
        shs_device_free(s->dev, u->lp_shard);
        shs_device_free(s->dev, u->gpu_cache);
        shs_device_free(s->dev, u->gpu_lp_params);
        shs_device_free(s->dev, u->post_fwd);
        if (u->rs_grad != u->grad_full) shs_device_free(s->dev, u->rs_grad);
        if (u->bwd != u->grad_full) shs_device_free(s->dev, u->bwd);
        shs_device_free(s->dev, u->gathered);
        if (!u->grads_in_block) shs_device_free(s->dev, u->grad_full);
        shs_device_free(s->dev, u->grad_shard);
        shs_device_free(s->opt_dev, u->optim_state);
        if (s->host) shs_device_free(s->host, u->host_grad);
        if (s->host) shs_device_free(s->host, u->master);
    }
    shs_device_free(s->dev, s->grad_block);
    shs_device_free(s->dev, s->ipg);
    free(s->rs_units);
    shs_device_free(s->opt_dev, s->norm_acc);
    for (int ph = 0; ph < 2; ph++) free(s->order[ph]), free(s->prev[ph]);
    if (s->shard_comm != s->comm) shs_comm_destroy(s->shard_comm);
    shs_comm_destroy(s->replica_comm);
    shs_comm_destroy(s->reshard_comm);
    free(s->units);
    shs_device_destroy(s->host);
    free(s);
}

shs_param_source_t *shs_strategy_source(shs_strategy_t *s) { return &s->source; }

size_t shs_strategy_master_bytes(const shs_strategy_t *s) {
    if (!low_precision(s)) return 0;
    size_t b = 0;
    for (int i = 0; i < s->layout->num_units; i++) {
        const unit_state_t *u = &s->units[i];
        if (!u->params_on_host) b += (u->full_params ? u->full_len : u->shard.size) * sizeof(float);
    }
    return b;
}

