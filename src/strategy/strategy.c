/* strategy.c - DDP, ZeRO-1/2/3 and hybrid sharding over per-unit flat
 * parameters: creation, the parameter source the model calls (gathering,
 * mixed-precision rounding, prefetch) and gradient reduction. The step
 * (clipping, loss scaling, offload, optimizer) is in strategy_step.c,
 * checkpoint state in strategy_state.c. See strategy.h for what each stage
 * holds and when it communicates.
 * What it is not: the collectives themselves (comm_thread.c) or the math
 * (model.c, optim.c).
 */
#include "shardsim/strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/shard.h"
#include "strategy/strategy_impl.h"

static const char *const strategy_names[SHS_NUM_STRATEGIES] = {"ddp", "zero1", "zero2", "zero3", "hybrid_shard",
                                                                "hybrid_shard_zero2"};

const char *shs_strategy_name(shs_strategy_kind_t k) {
    return (int)k >= 0 && k < SHS_NUM_STRATEGIES ? strategy_names[k] : "invalid";
}

int shs_strategy_parse(const char *name, shs_strategy_kind_t *out) {
    for (int k = 0; k < SHS_NUM_STRATEGIES; k++)
        if (strcmp(name, strategy_names[k]) == 0) { *out = (shs_strategy_kind_t)k; return 0; }
    return -1;
}

/* ---- precision helpers ------------------------------------------------------ */

/* Round n f32 values at dst (from src; may be the same) to dtype t, through
 * a temporary t buffer (COMM): dst = (f32)(t)src. */
static shs_status_t round_to(shs_strategy_t *s, float *dst, const float *src, size_t n, shs_dtype_t t) {
    if (n == 0) return SHS_OK;
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, n * shs_dtype_size(t), SHS_MEM_COMM, "low-precision copy"));
    shs_cast(s->dev, tmp, t, src, SHS_F32, n);
    shs_cast(s->dev, dst, SHS_F32, tmp, t, n);
    shs_device_free(s->dev, tmp);
    return SHS_OK;
}

/* ZeRO-1/2 with a 2-byte param dtype: every rank's replica in param_dtype
 * from the f32 master shards, each rounded once (an all-gather over the
 * shard group, as DeepSpeed's after its step). */
shs_status_t shs__strategy_refresh_replica(shs_strategy_t *s, unit_state_t *u) {
    if (!u->lp_replica) return SHS_OK;
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t es = shs_dtype_size(pd);
    void *lp_shard;
    SHS_CHECK(shs_device_alloc(s->dev, &lp_shard, (u->shard.size ? u->shard.size : 1) * es, SHS_MEM_COMM,
                               "low-precision shard"));
    shs_cast(s->dev, lp_shard, pd, u->params, SHS_F32, u->shard.size);
    shs_status_t st = shs_all_gather(lp_shard, u->lp_replica, u->shard.size, pd,
                                     tagged(s, s->shard_comm, SHS_TAG_PARAM_REGATHER, unit_index(s, u)));
    shs_device_free(s->dev, lp_shard);
    if (st == SHS_OK) u->lp_stale = 0;
    return st;
}

/* The unit's full parameters in compute precision into u->gathered (f32,
 * full_len): ZeRO-3 all-gathers its shards in param_dtype; ZeRO-1/2 widen
 * their param_dtype replica; full holders round their copy. */
static shs_status_t materialize_params(shs_strategy_t *s, unit_state_t *u) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t len = full_params(s, u) ? u->numel : u->full_len;
    SHS_CHECK(shs_device_alloc(s->dev, (void **)&u->gathered, (len ? len : 1) * sizeof(float), SHS_MEM_COMM,
                               low_precision(s) ? "compute params (f32 view)" : "zero3 gathered params"));
    if (u->lp_replica) {
        if (u->lp_stale) SHS_CHECK(shs__strategy_refresh_replica(s, u));
        shs_cast(s->dev, u->gathered, SHS_F32, u->lp_replica, pd, u->full_len);
        return SHS_OK;
    }
    if (full_params(s, u)) return round_to(s, u->gathered, u->params, u->numel, pd);
    if (u->skip_gather) { /* fault injection (shs_strategy_skip_gather) */
        u->skip_gather = 0;
        return shs_memset(s->dev, u->gathered, 0, len * sizeof(float));
    }
    shs_comm_t *comm = tagged(s, s->shard_comm,
                              s->phase == SHS_PHASE_BACKWARD ? SHS_TAG_BWD_ALL_GATHER : SHS_TAG_FWD_ALL_GATHER,
                              unit_index(s, u));
    const float *shard = u->params;
    float *staged = NULL;
    if (params_on_host(s, u)) { /* offloaded shard: copy it in first */
        SHS_CHECK(shs_device_alloc(s->dev, (void **)&staged, (u->shard.size ? u->shard.size : 1) * sizeof(float),
                                   SHS_MEM_COMM, "parameter shard from host"));
        shs_status_t st = shs_memcpy_h2d(s->dev, staged, u->params, u->shard.size * sizeof(float));
        if (st != SHS_OK) {
            shs_device_free(s->dev, staged);
            return st;
        }
        s->h2d_bytes += u->shard.size * sizeof(float);
        shard = staged;
    }
    if (pd == SHS_F32) {
        shs_status_t st = shs_all_gather(shard, u->gathered, u->shard.size, SHS_F32, comm);
        shs_device_free(s->dev, staged);
        return st;
    }
    size_t es = shs_dtype_size(pd);
    void *lp_shard = NULL, *lp_full = NULL;
    shs_status_t st = shs_device_alloc(s->dev, &lp_shard, (u->shard.size ? u->shard.size : 1) * es, SHS_MEM_COMM,
                                       "low-precision shard");
    if (st == SHS_OK)
        st = shs_device_alloc(s->dev, &lp_full, (u->full_len ? u->full_len : 1) * es, SHS_MEM_COMM,
                              "zero3 gathered params (low precision)");
    if (st == SHS_OK) {
        shs_cast(s->dev, lp_shard, pd, shard, SHS_F32, u->shard.size);
        st = shs_all_gather(lp_shard, lp_full, u->shard.size, pd, comm);
    }
    if (st == SHS_OK) shs_cast(s->dev, u->gathered, SHS_F32, lp_full, pd, u->full_len);
    shs_device_free(s->dev, lp_shard);
    shs_device_free(s->dev, lp_full);
    shs_device_free(s->dev, staged);
    return st;
}

/* ---- parameter source: acquire / release --------------------------------- */

/* Whether acquiring the unit materializes a buffer (all-gather or rounding). */
static int gathers(const shs_strategy_t *s, const unit_state_t *u) { return !full_params(s, u) || low_precision(s); }

static void drop_gathered(shs_strategy_t *s, unit_state_t *u) {
    shs_device_free(s->dev, u->gathered);
    u->gathered = NULL;
    u->gather_refs = 0;
}

/* Take one reference on the unit's materialized parameters, gathering them
 * if none is live. */
static shs_status_t take_gathered(shs_strategy_t *s, unit_state_t *u) {
    if (u->gather_refs == 0) {
        shs_status_t st = materialize_params(s, u);
        if (st != SHS_OK) {
            drop_gathered(s, u);
            return st;
        }
    }
    u->gather_refs++;
    return SHS_OK;
}

/* Prefetch (FSDP forward_prefetch / backward_prefetch): gather `unit` now,
 * ahead of its use, holding one reference for its next acquire. Skipped
 * when it is already live or limit_all_gathers units are already held. The
 * decision depends only on state every rank shares, so all ranks issue the
 * same all-gathers in the same order. */
static shs_status_t prefetch(shs_strategy_t *s, int unit) {
    if (unit < 0) return SHS_OK;
    unit_state_t *u = &s->units[unit];
    if (!gathers(s, u) || u->gather_refs > 0) return SHS_OK;
    if (s->cfg.limit_all_gathers > 0 && s->held_prefetches >= s->cfg.limit_all_gathers) return SHS_OK;
    /* in traces the gather is marked with the unit it is for ("bwd/block0"),
     * not the unit whose acquire triggered it; the phase comes from the
     * world communicator's marker (the trainer marks that one, not hybrid
     * sharding's shard group) */
    char saved[SHS_COMM_MARKER_MAX], mark[SHS_COMM_MARKER_MAX];
    const char *phase = shs_comm_marker(s->comm);
    snprintf(mark, sizeof mark, "%.*s/%s", (int)strcspn(phase, "/"), phase, s->layout->units[unit].name);
    snprintf(saved, sizeof saved, "%s", shs_comm_marker(s->shard_comm));
    shs_comm_set_marker(s->shard_comm, mark);
    shs_status_t st = take_gathered(s, u);
    shs_comm_set_marker(s->shard_comm, saved);
    SHS_CHECK(st);
    u->held = 1;
    s->held_prefetches++;
    return SHS_OK;
}

/* The unit that follows `unit` in the last complete pass of the current
 * phase, or -1 (none, or no pass recorded yet: the first forward and the
 * first backward do not prefetch). */
static int next_unit(const shs_strategy_t *s, int unit) {
    int ph = s->phase;
    for (int i = 0; i + 1 < s->prev_len[ph]; i++)
        if (s->prev[ph][i] == unit) return s->prev[ph][i + 1];
    return -1;
}

static shs_status_t acquire_params(void *self, int unit, const float **params) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    int seen = 0; /* the unit was already used in this pass (a tied unit's second use) */
    { /* record the execution order */
        int ph = s->phase;
        for (int i = 0; i < s->order_len[ph] && !seen; i++) seen = s->order[ph][i] == unit;
        if (!seen) s->order[ph][s->order_len[ph]++] = unit;
    }
    if (!gathers(s, u)) {
        *params = u->params;
        return SHS_OK;
    }
    if (u->held) { /* gathered ahead or kept from forward: take over that reference */
        if (u->held == 1) s->held_prefetches--;
        u->held = 0;
    } else {
        SHS_CHECK(take_gathered(s, u));
    }
    *params = u->gathered;
    /* prefetch what follows this use; a second use of a unit (the tied
     * embedding as the LM head) has no place of its own in the recorded
     * order, and what follows its first use is already done */
    if (!seen && s->phase == SHS_PHASE_FORWARD && s->cfg.forward_prefetch) SHS_CHECK(prefetch(s, next_unit(s, unit)));
    if (!seen && s->phase == SHS_PHASE_BACKWARD && s->cfg.backward_prefetch == SHS_PREFETCH_PRE)
        SHS_CHECK(prefetch(s, next_unit(s, unit)));
    return SHS_OK;
}

static shs_status_t release_params(void *self, int unit) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (!gathers(s, u)) return SHS_OK;
    SHS_ASSERT(u->gather_refs > 0);
    if (--u->gather_refs > 0) return SHS_OK;
    if (s->phase == SHS_PHASE_FORWARD && s->cfg.keep_after_forward && !full_params(s, u) && !u->lp_replica) {
        u->gather_refs = 1; /* keep it for backward (FSDP SHARD_GRAD_OP) */
        u->held = 2;
        return SHS_OK;
    }
    drop_gathered(s, u);
    return SHS_OK;
}

/* Free whatever is still held (a prefetch never used, a unit kept from
 * forward that backward did not need). Local: no communication. */
void shs__strategy_drop_held(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (u->held && u->gather_refs == 1) drop_gathered(s, u);
        else if (u->held) u->gather_refs--;
        u->held = 0;
    }
    s->held_prefetches = 0;
}

void shs_strategy_set_phase(shs_strategy_t *s, shs_phase_t phase) {
    /* entering a phase: its last complete pass becomes the reference */
    if (s->order_len[phase]) {
        memcpy(s->prev[phase], s->order[phase], (size_t)s->order_len[phase] * sizeof(int));
        s->prev_len[phase] = s->order_len[phase];
    }
    s->order_len[phase] = 0;
    s->phase = phase;
    if (phase == SHS_PHASE_FORWARD) s->micro = s->forwards++;
}

static shs_status_t acquire_grads(void *self, int unit, float **grads) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (!in_grad_block(s, u) && !u->grad_full) {
        SHS_CHECK(shs_device_alloc(s->dev, (void **)&u->grad_full, u->full_len * sizeof(float), SHS_MEM_COMM,
                                   "unsharded gradient"));
        SHS_CHECK(shs_memset(s->dev, u->grad_full, 0, u->full_len * sizeof(float)));
    }
    *grads = u->grad_full;
    return SHS_OK;
}

/* AVG all-reduce of n f32 gradients in place, carried in reduce_dtype. */
static shs_status_t all_reduce_grads(shs_strategy_t *s, float *p, size_t n) {
    shs_dtype_t rd = s->cfg.reduce_dtype;
    shs_comm_t *comm = tagged(s, s->comm, SHS_TAG_GRAD_ALL_REDUCE, s->bucket_unit);
    if (rd == SHS_F32) return shs_all_reduce(p, p, n, SHS_F32, SHS_AVG, comm);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, n * shs_dtype_size(rd), SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, p, SHS_F32, n);
    shs_status_t st = shs_all_reduce(tmp, tmp, n, rd, SHS_AVG, comm);
    if (st == SHS_OK) shs_cast(s->dev, p, SHS_F32, tmp, rd, n);
    shs_device_free(s->dev, tmp);
    return st;
}

/* AVG reduce-scatter of a unit's full f32 gradient (full_len) into `out`
 * (S f32; may be full + shard.offset: in place) over the shard group, then
 * for hybrid sharding an AVG all-reduce of the shard across the replicas
 * (PyTorch HSDP's order); carried in reduce_dtype. */
static shs_status_t reduce_scatter_grads(shs_strategy_t *s, unit_state_t *u, float *full, float *out) {
    shs_dtype_t rd = s->cfg.reduce_dtype;
    size_t S = u->shard.size;
    int unit = unit_index(s, u);
    shs_comm_t *shard_comm = tagged(s, s->shard_comm, SHS_TAG_REDUCE_SCATTER, unit);
    shs_comm_t *replica_comm = s->replica_comm ? tagged(s, s->replica_comm, SHS_TAG_REPLICA_ALL_REDUCE, unit) : NULL;
    if (rd == SHS_F32) {
        SHS_CHECK(shs_reduce_scatter(full, out, S, SHS_F32, SHS_AVG, shard_comm));
        return replica_comm ? shs_all_reduce(out, out, S, SHS_F32, SHS_AVG, replica_comm) : SHS_OK;
    }
    size_t es = shs_dtype_size(rd);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, (u->full_len ? u->full_len : 1) * es, SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, full, SHS_F32, u->full_len);
    char *mine = (char *)tmp + u->shard.offset * es;
    shs_status_t st = shs_reduce_scatter(tmp, mine, S, rd, SHS_AVG, shard_comm);
    if (st == SHS_OK && replica_comm) st = shs_all_reduce(mine, mine, S, rd, SHS_AVG, replica_comm);
    if (st == SHS_OK) shs_cast(s->dev, out, SHS_F32, mine, rd, S);
    shs_device_free(s->dev, tmp);
    return st;
}

shs_status_t shs__strategy_flush_bucket(shs_strategy_t *s) {
    size_t n = s->bucket_hi - s->bucket_lo;
    if (n == 0) return SHS_OK;
    float *p = s->grad_block + s->bucket_lo;
    s->bucket_hi = s->bucket_lo;
    return all_reduce_grads(s, p, n);
}

/* A whole unit joins the pending all-reduce bucket when it is adjacent to it
 * (units finish in reverse order, so buckets grow toward the front of
 * grad_block); a full bucket is all-reduced at once (torch DDP). */
static shs_status_t bucket_grads_ready(shs_strategy_t *s, unit_state_t *u) {
    size_t lo = u->grad_offset, hi = lo + u->numel;
    if (s->bucket_hi != s->bucket_lo && hi != s->bucket_lo) SHS_CHECK(shs__strategy_flush_bucket(s));
    if (s->bucket_hi == s->bucket_lo) s->bucket_hi = hi;
    s->bucket_lo = lo;
    s->bucket_unit = unit_index(s, u);
    if ((s->bucket_hi - s->bucket_lo) * sizeof(float) >= s->cfg.bucket_bytes) SHS_CHECK(shs__strategy_flush_bucket(s));
    return SHS_OK;
}

static shs_status_t grads_ready(void *self, int unit) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (s->cfg.backward_prefetch == SHS_PREFETCH_POST) SHS_CHECK(prefetch(s, next_unit(s, unit)));
    /* gradients come out of backward in param_dtype (accumulation included) */
    if (low_precision(s)) SHS_CHECK(round_to(s, u->grad_full, u->grad_full, u->numel, s->cfg.param_dtype));
    if (!s->sync) return SHS_OK; /* no_sync: keep accumulating locally */
    if (u->whole) return bucket_grads_ready(s, u);
    if (s->cfg.kind == SHS_ZERO1) /* in place: this rank's shard of grad_full becomes the reduced shard */
        return reduce_scatter_grads(s, u, u->grad_full, u->grad_full + u->shard.offset);
    shs_status_t st = reduce_scatter_grads(s, u, u->grad_full, u->grad_shard);
    shs_device_free(s->dev, u->grad_full);
    u->grad_full = NULL;
    return st;
}

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

/* Reserve a unit's persistent buffers without touching them, so that a model
 * too large for the device fails before any slow initialization. */
static shs_status_t alloc_unit(shs_strategy_t *s, int i) {
    unit_state_t *u = &s->units[i];
    if (full_params(s, u)) SHS_CHECK(alloc_floats(s, &u->params, u->full_len, SHS_MEM_PARAMS, "parameters"));
    else SHS_CHECK(shs_device_alloc(params_dev(s, u), (void **)&u->params, u->shard.size * sizeof(float),
                                    SHS_MEM_PARAMS, params_on_host(s, u) ? "offloaded parameter shard" : "parameter shard"));
    if (stage_has_lp_replicas(s) && !u->whole) {
        SHS_CHECK(shs_device_alloc(s->dev, &u->lp_replica, (u->full_len ? u->full_len : 1) * shs_dtype_size(s->cfg.param_dtype),
                                   SHS_MEM_PARAMS, "parameters (param-dtype replica)"));
        u->lp_stale = 1; /* gathered at first use, once the shards hold their values */
    }
    if (!in_grad_block(s, u)) SHS_CHECK(alloc_floats(s, &u->grad_shard, u->shard.size, SHS_MEM_GRADS, "gradient shard"));
    size_t n_state = optim_state_len(s, u), n_opt = optim_len(u);
    if (n_state)
        SHS_CHECK(shs_device_alloc(s->opt_dev, (void **)&u->optim_state, n_state * sizeof(float), SHS_MEM_OPTIM,
                                   "optimizer state"));
    if (s->host) {
        SHS_CHECK(shs_device_alloc(s->host, (void **)&u->host_grad, (n_opt ? n_opt : 1) * sizeof(float),
                                   SHS_MEM_GRADS, "offloaded gradient"));
        if (!params_on_host(s, u))
            SHS_CHECK(shs_device_alloc(s->host, (void **)&u->master, (n_opt ? n_opt : 1) * sizeof(float),
                                       SHS_MEM_PARAMS, "master parameters"));
    }
    return SHS_OK;
}

/* Initial parameters (shs_layout_init_range), zero gradient shard and state. */
static shs_status_t init_unit(shs_strategy_t *s, int i) {
    unit_state_t *u = &s->units[i];
    if (full_params(s, u)) SHS_CHECK(init_params(s, s->dev, i, 0, u->full_len, u->params));
    else SHS_CHECK(init_params(s, params_dev(s, u), i, u->shard.offset, u->shard.offset + u->shard.size, u->params));
    if (u->grad_shard) SHS_CHECK(shs_memset(s->dev, u->grad_shard, 0, u->shard.size * sizeof(float)));
    if (u->optim_state) SHS_CHECK(shs_memset(s->opt_dev, u->optim_state, 0, optim_state_len(s, u) * sizeof(float)));
    return shs__strategy_download_master(s, u);
}

int shs_strategy_is_hybrid(shs_strategy_kind_t k) { return k == SHS_HYBRID_SHARD || k == SHS_HYBRID_SHARD_ZERO2; }

int shs_strategy_hybrid_color(int G, int split_index, int rank, int *key) {
    *key = rank;
    return split_index == 0 ? rank / G : rank % G;
}

shs_status_t shs_strategy_create(shs_strategy_t **out, const shs_strategy_config_t *cfg,
                                 const shs_layout_t *layout, shs_device_t *dev, shs_comm_t *comm) {
    *out = NULL;
    if ((int)cfg->kind < 0 || cfg->kind >= SHS_NUM_STRATEGIES)
        return shs_set_error(SHS_INVALID_ARG, "invalid strategy %d", (int)cfg->kind);
    if (cfg->clip_norm > 0 && cfg->norm_type && cfg->norm_type != SHS_NORM_INF && cfg->norm_type != 1 && cfg->norm_type != 2)
        return shs_set_error(SHS_INVALID_ARG, "norm type must be 1, 2 or inf (got %d)", cfg->norm_type);
    for (int k = 0; k < 2; k++) {
        shs_dtype_t t = k ? cfg->reduce_dtype : cfg->param_dtype;
        if (t != 0 && t != SHS_F32 && t != SHS_BF16 && t != SHS_F16)
            return shs_set_error(SHS_INVALID_ARG, "%s dtype must be f32, bf16 or f16 (got %s)", k ? "reduce" : "param",
                                 shs_dtype_name(t));
    }
    shs_strategy_t *s = calloc(1, sizeof *s);
    if (!s || !(s->units = calloc((size_t)layout->num_units ? (size_t)layout->num_units : 1, sizeof *s->units))) {
        free(s);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate strategy state");
    }
    s->cfg = *cfg;
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
    if (s->cfg.param_dtype == 0) s->cfg.param_dtype = SHS_F32;
    if (s->cfg.reduce_dtype == 0) s->cfg.reduce_dtype = s->cfg.param_dtype;
    shs_loss_scaler_config_t *sc = &s->cfg.scaler;
    if (sc->init_scale <= 0) sc->init_scale = 65536.0f;
    if (sc->growth_factor <= 0) sc->growth_factor = 2.0f;
    if (sc->backoff_factor <= 0) sc->backoff_factor = 0.5f;
    if (sc->growth_interval <= 0) sc->growth_interval = 2000;
    s->scaling = s->cfg.param_dtype == SHS_F16;
    s->scaler.scale = s->scaling ? sc->init_scale : 1.0f;
    s->source = (shs_param_source_t){s, acquire_params, release_params, acquire_grads, grads_ready};
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
    if (cfg->offload != SHS_OFFLOAD_NONE) {
        if (cfg->offload == SHS_OFFLOAD_PARAMS && !stage_is_param_sharded(s)) {
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
        u->numel = layout->units[i].numel;
        u->whole = cfg->kind == SHS_DDP || layout->units[i].replicated;
        u->shard = shs_shard_of(u->numel, s->shard_n, s->shard_rank, s->cfg.shard_align);
        u->full_len = u->whole ? u->numel : shs_padded_numel(u->numel, s->shard_n, s->cfg.shard_align);
        u->grad_offset = s->grad_block_len;
        if (in_grad_block(s, u)) s->grad_block_len += u->full_len;
    }
    if (s->grad_block_len) {
        SHS_CHECK_GOTO(shs_device_alloc(dev, (void **)&s->grad_block, s->grad_block_len * sizeof(float),
                                        SHS_MEM_GRADS, "gradients"), st, fail);
        for (int i = 0; i < layout->num_units; i++)
            if (in_grad_block(s, &s->units[i])) s->units[i].grad_full = s->grad_block + s->units[i].grad_offset;
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
        shs_device_free(s->dev, u->gathered);
        if (!in_grad_block(s, u)) shs_device_free(s->dev, u->grad_full);
        shs_device_free(s->dev, u->grad_shard);
        shs_device_free(s->opt_dev, u->optim_state);
        if (s->host) shs_device_free(s->host, u->host_grad);
        if (s->host) shs_device_free(s->host, u->master);
    }
    shs_device_free(s->dev, s->grad_block);
    shs_device_free(s->opt_dev, s->norm_acc);
    for (int ph = 0; ph < 2; ph++) free(s->order[ph]), free(s->prev[ph]);
    if (s->shard_comm != s->comm) shs_comm_destroy(s->shard_comm);
    shs_comm_destroy(s->replica_comm);
    free(s->units);
    shs_device_destroy(s->host);
    free(s);
}

shs_param_source_t *shs_strategy_source(shs_strategy_t *s) { return &s->source; }

