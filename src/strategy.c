/* strategy.c - DDP and ZeRO-1/2/3 over per-unit flat parameters.
 * See strategy.h for what each stage holds and when it communicates.
 * What it is not: the collectives themselves (comm_thread.c) or the math
 * (model.c, optim.c).
 */
#include "shardsim/strategy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/shard.h"

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

/* One wrap unit's buffers on this rank. */
typedef struct {
    size_t numel;          /* real elements */
    int whole;             /* held whole and all-reduced: DDP, or a replicated unit */
    shs_shard_t shard;     /* this rank's range of the padded flat buffer */
    size_t full_len;       /* elements in the full flat buffer: numel (whole) or N*S (sharded) */
    float *params;         /* whole/Z1/Z2: full (full_len); Z3: shard (S) */
    float *gathered;       /* Z3 or low precision: f32 compute params while acquired (COMM) */
    int gather_refs;       /* outstanding acquires of `gathered` (a held ref included) */
    int held;              /* gathered ahead (prefetch) or kept after forward: one ref held for the next acquire */
    size_t plant_inf;      /* plant_grad_inf: element + 1 to poison at finish_step, 0 none */
    float *grad_full;      /* whole/Z1: view into grad_block; Z2/Z3: transient (COMM) */
    float *grad_shard;     /* Z2/Z3: reduced gradient shard (S) */
    size_t grad_offset;    /* whole/Z1: offset of this unit in grad_block */
    float *optim_state;    /* state_per_param * (whole: numel, sharded: S); on the host when offloading */
    float *host_grad;      /* offload: the reduced gradient range the optimizer reads (host, GRADS) */
    float *master;         /* offload optimizer: f32 master copy of the updated range (host, PARAMS);
                            * offload params: NULL (the parameter shard itself lives on the host) */
} unit_state_t;

struct shs_strategy {
    shs_strategy_config_t cfg;
    const shs_layout_t *layout;
    shs_device_t *dev;
    shs_device_t *host;    /* offload: host memory (its own accounting) and the CPU optimizer */
    shs_device_t *opt_dev; /* where the optimizer, clipping and overflow checks run: host or dev */
    uint64_t h2d_bytes, d2h_bytes; /* offload traffic */
    shs_comm_t *comm;      /* the world: DDP all-reduces, norms, overflow flags */
    int rank, nranks;
    /* sharding: over the world, or for hybrid sharding over this rank's
     * group of shard_group_size consecutive ranks, replicated across groups */
    shs_comm_t *shard_comm, *replica_comm; /* replica_comm: hybrid only */
    int shard_n, shard_rank, replica;
    int sync;              /* reduce in grads_ready (0: no_sync micro-batch) */
    float grad_norm;       /* last step's total norm, -1 without clipping */
    int scaling;           /* dynamic loss scaling on (param dtype f16) */
    shs_loss_scale_state_t scaler;
    int skipped;           /* the last step was skipped for overflow */
    shs_phase_t phase;
    /* execution order, per phase: units in order of first acquire during this
     * pass (order) and during the last complete one (prev); FSDP records it
     * the same way to drive prefetching */
    int *order[2], *prev[2];
    int order_len[2], prev_len[2];
    int held_prefetches;   /* units gathered ahead and not yet used */
    unit_state_t *units;
    float *grad_block;     /* whole and Z1 units' gradients, contiguous (GRADS) */
    size_t grad_block_len;
    int64_t *norm_acc;     /* SHS_NORM_ACC_WORDS (OTHER), with clipping */
    /* bucket: the pending ready range [bucket_lo, bucket_hi) of grad_block */
    size_t bucket_lo, bucket_hi;
    shs_param_source_t source;
};

static int stage_shards_params(const shs_strategy_t *s) {
    return s->cfg.kind == SHS_ZERO3 || s->cfg.kind == SHS_HYBRID_SHARD;
}
static int stage_shards_grads(const shs_strategy_t *s) { return s->cfg.kind != SHS_DDP && s->cfg.kind != SHS_ZERO1; }
/* Stages that keep full parameters but update only a shard, re-gathering
 * after the optimizer step. */
static int stage_regathers(const shs_strategy_t *s) {
    return s->cfg.kind == SHS_ZERO1 || s->cfg.kind == SHS_ZERO2 || s->cfg.kind == SHS_HYBRID_SHARD_ZERO2;
}
/* Whether the unit's parameters are held in full on this rank. */
static int full_params(const shs_strategy_t *s, const unit_state_t *u) { return u->whole || !stage_shards_params(s); }
/* Whether the unit's gradient lives in grad_block (rather than transiently). */
static int in_grad_block(const shs_strategy_t *s, const unit_state_t *u) { return u->whole || !stage_shards_grads(s); }

/* This rank's shard of a unit's parameters, in whichever buffer holds it. */
static float *owned_params(const shs_strategy_t *s, const unit_state_t *u) {
    return full_params(s, u) ? u->params + u->shard.offset : u->params;
}

/* The elements the optimizer updates on this rank: parameters, their
 * reduced gradient, and the count (padding is never updated, so it stays
 * exactly 0 whatever the optimizer would make of 0/0, e.g. AdamW eps = 0). */
static void device_range(const shs_strategy_t *s, const unit_state_t *u, float **param, float **grad, size_t *n) {
    if (u->whole) {
        *param = u->params; *grad = u->grad_full; *n = u->numel;
    } else if (s->cfg.kind == SHS_ZERO1) {
        *param = owned_params(s, u); *grad = u->grad_full + u->shard.offset; *n = u->shard.valid;
    } else {
        *param = owned_params(s, u); *grad = u->grad_shard; *n = u->shard.valid;
    }
}

/* Whether the unit's parameter shard itself lives on the host (offload params). */
static int params_on_host(const shs_strategy_t *s, const unit_state_t *u) {
    return s->cfg.offload == SHS_OFFLOAD_PARAMS && !full_params(s, u);
}
static shs_device_t *params_dev(const shs_strategy_t *s, const unit_state_t *u) {
    return params_on_host(s, u) ? s->host : s->dev;
}

/* The optimizer's view of the range (on opt_dev): the device range, or with
 * offloading the host copies of the gradient and of the parameters. */
static void update_range(const shs_strategy_t *s, const unit_state_t *u, float **param, float **grad, size_t *n) {
    device_range(s, u, param, grad, n);
    if (!s->host) return;
    *grad = u->host_grad;
    if (u->master) *param = u->master;
}

/* The master copy of the updated range from the device parameters. */
static shs_status_t download_master(shs_strategy_t *s, unit_state_t *u) {
    if (!u->master) return SHS_OK;
    float *param, *grad;
    size_t n;
    device_range(s, u, &param, &grad, &n);
    return shs_memcpy_d2h(s->dev, u->master, param, n * sizeof(float));
}

/* ---- precision helpers ------------------------------------------------------ */

static int low_precision(const shs_strategy_t *s) { return s->cfg.param_dtype != SHS_F32; }

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

/* The unit's full parameters in compute precision into u->gathered (f32,
 * full_len): ZeRO-3 all-gathers its shards in param_dtype; full holders round
 * their copy. */
static shs_status_t materialize_params(shs_strategy_t *s, unit_state_t *u) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t len = full_params(s, u) ? u->numel : u->full_len;
    SHS_CHECK(shs_device_alloc(s->dev, (void **)&u->gathered, (len ? len : 1) * sizeof(float), SHS_MEM_COMM,
                               low_precision(s) ? "compute params (f32 view)" : "zero3 gathered params"));
    if (full_params(s, u)) return round_to(s, u->gathered, u->params, u->numel, pd);
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
        shs_status_t st = shs_all_gather(shard, u->gathered, u->shard.size, SHS_F32, s->shard_comm);
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
        st = shs_all_gather(lp_shard, lp_full, u->shard.size, pd, s->shard_comm);
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
     * not the unit whose acquire triggered it */
    char saved[SHS_COMM_MARKER_MAX], mark[SHS_COMM_MARKER_MAX];
    snprintf(saved, sizeof saved, "%s", shs_comm_marker(s->shard_comm));
    snprintf(mark, sizeof mark, "%.*s/%s", (int)strcspn(saved, "/"), saved, s->layout->units[unit].name);
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
    { /* record the execution order */
        int ph = s->phase, seen = 0;
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
    if (s->phase == SHS_PHASE_FORWARD && s->cfg.forward_prefetch) SHS_CHECK(prefetch(s, next_unit(s, unit)));
    if (s->phase == SHS_PHASE_BACKWARD && s->cfg.backward_prefetch == SHS_PREFETCH_PRE)
        SHS_CHECK(prefetch(s, next_unit(s, unit)));
    return SHS_OK;
}

static shs_status_t release_params(void *self, int unit) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (!gathers(s, u)) return SHS_OK;
    SHS_ASSERT(u->gather_refs > 0);
    if (--u->gather_refs > 0) return SHS_OK;
    if (s->phase == SHS_PHASE_FORWARD && s->cfg.keep_after_forward && !full_params(s, u)) {
        u->gather_refs = 1; /* keep it for backward (FSDP SHARD_GRAD_OP) */
        u->held = 2;
        return SHS_OK;
    }
    drop_gathered(s, u);
    return SHS_OK;
}

/* Free whatever is still held (a prefetch never used, a unit kept from
 * forward that backward did not need). Local: no communication. */
static void drop_held(shs_strategy_t *s) {
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
    if (rd == SHS_F32) return shs_all_reduce(p, p, n, SHS_F32, SHS_AVG, s->comm);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, n * shs_dtype_size(rd), SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, p, SHS_F32, n);
    shs_status_t st = shs_all_reduce(tmp, tmp, n, rd, SHS_AVG, s->comm);
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
    if (rd == SHS_F32) {
        SHS_CHECK(shs_reduce_scatter(full, out, S, SHS_F32, SHS_AVG, s->shard_comm));
        return s->replica_comm ? shs_all_reduce(out, out, S, SHS_F32, SHS_AVG, s->replica_comm) : SHS_OK;
    }
    size_t es = shs_dtype_size(rd);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, (u->full_len ? u->full_len : 1) * es, SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, full, SHS_F32, u->full_len);
    char *mine = (char *)tmp + u->shard.offset * es;
    shs_status_t st = shs_reduce_scatter(tmp, mine, S, rd, SHS_AVG, s->shard_comm);
    if (st == SHS_OK && s->replica_comm) st = shs_all_reduce(mine, mine, S, rd, SHS_AVG, s->replica_comm);
    if (st == SHS_OK) shs_cast(s->dev, out, SHS_F32, mine, rd, S);
    shs_device_free(s->dev, tmp);
    return st;
}

static shs_status_t flush_bucket(shs_strategy_t *s) {
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
    if (s->bucket_hi != s->bucket_lo && hi != s->bucket_lo) SHS_CHECK(flush_bucket(s));
    if (s->bucket_hi == s->bucket_lo) s->bucket_hi = hi;
    s->bucket_lo = lo;
    if ((s->bucket_hi - s->bucket_lo) * sizeof(float) >= s->cfg.bucket_bytes) SHS_CHECK(flush_bucket(s));
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

/* Elements the unit's optimizer state covers per state array. */
static size_t optim_len(const unit_state_t *u) { return u->whole ? u->numel : u->shard.size; }
/* The optimizer steps on update_range's n elements with state [m (n) | v (n)]:
 * the distance between state arrays (numel whole, the valid part of a shard). */
static size_t optim_stride(const unit_state_t *u) { return u->whole ? u->numel : u->shard.valid; }

static size_t optim_state_len(const shs_strategy_t *s, const unit_state_t *u) {
    return (size_t)shs_optim_state_per_param(&s->cfg.optim) * optim_len(u);
}

/* Reserve a unit's persistent buffers without touching them, so that a model
 * too large for the device fails before any slow initialization. */
static shs_status_t alloc_unit(shs_strategy_t *s, int i) {
    unit_state_t *u = &s->units[i];
    if (full_params(s, u)) SHS_CHECK(alloc_floats(s, &u->params, u->full_len, SHS_MEM_PARAMS, "parameters"));
    else SHS_CHECK(shs_device_alloc(params_dev(s, u), (void **)&u->params, u->shard.size * sizeof(float),
                                    SHS_MEM_PARAMS, params_on_host(s, u) ? "offloaded parameter shard" : "parameter shard"));
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
    return download_master(s, u);
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
    if (cfg->kind == SHS_HYBRID_SHARD || cfg->kind == SHS_HYBRID_SHARD_ZERO2) {
        int G = cfg->shard_group_size ? cfg->shard_group_size : s->nranks;
        if (G < 1 || s->nranks % G != 0) {
            st = shs_set_error(SHS_INVALID_ARG, "shard group size %d must divide the world size %d", G, s->nranks);
            goto fail;
        }
        /* groups of G consecutive ranks shard; ranks equal mod G replicate */
        SHS_CHECK_GOTO(shs_comm_split(comm, s->rank / G, s->rank, &s->shard_comm), st, fail);
        SHS_CHECK_GOTO(shs_comm_split(comm, s->rank % G, s->rank, &s->replica_comm), st, fail);
        s->shard_n = G;
        s->shard_rank = s->rank % G;
        s->replica = s->rank / G;
    }
    if (cfg->offload != SHS_OFFLOAD_NONE) {
        if (cfg->offload == SHS_OFFLOAD_PARAMS && !stage_shards_params(s)) {
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

/* ---- step -------------------------------------------------------------------- */

shs_status_t shs_strategy_begin_step(shs_strategy_t *s) {
    drop_held(s);
    s->bucket_lo = s->bucket_hi = 0;
    if (s->grad_block) SHS_CHECK(shs_memset(s->dev, s->grad_block, 0, s->grad_block_len * sizeof(float)));
    return SHS_OK;
}

void shs_strategy_set_sync(shs_strategy_t *s, int sync) {
    s->sync = sync;
    s->bucket_lo = s->bucket_hi = 0;
}

/* The total gradient norm (strategy.h): each element counted once. Under
 * DDP every rank holds every reduced element and computes it alone; under
 * ZeRO each rank adds its owned reduced shard (and rank 0 the replicated
 * units) and the exact partial sums are all-reduced (integer sum: exact). */
static shs_status_t total_grad_norm(shs_strategy_t *s, int p, int local, float *norm) {
    SHS_CHECK(shs_memset(s->opt_dev, s->norm_acc, 0, SHS_NORM_ACC_WORDS * sizeof(int64_t)));
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        /* counted once: whole units by rank 0, shards by the first replica */
        if (!local && p != SHS_NORM_INF && (u->whole ? s->rank != 0 : s->replica != 0)) continue;
        float *param, *grad;
        size_t n;
        update_range(s, u, &param, &grad, &n);
        shs_norm_accumulate(s->opt_dev, s->norm_acc, grad, n, p);
    }
    if (!local) SHS_CHECK(shs_all_reduce(s->norm_acc, s->norm_acc, SHS_NORM_ACC_WORDS, SHS_I64,
                                         p == SHS_NORM_INF ? SHS_MAX : SHS_SUM, s->comm));
    int64_t acc[SHS_NORM_ACC_WORDS];
    SHS_CHECK(shs_memcpy_d2h(s->opt_dev, acc, s->norm_acc, sizeof acc));
    *norm = shs_exact_norm_finish(acc, p);
    return SHS_OK;
}

/* Multiply the gradient elements the optimizer reads by `coef`. */
static void scale_grads(shs_strategy_t *s, float coef) {
    for (int i = 0; i < s->layout->num_units; i++) {
        float *param, *grad;
        size_t n;
        update_range(s, &s->units[i], &param, &grad, &n);
        if (n) shs_scale(s->opt_dev, grad, coef, n);
    }
}

/* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6) in f32,
 * applied when below 1 to exactly the elements the optimizer reads. */
static shs_status_t clip_grads(shs_strategy_t *s) {
    int p = s->cfg.norm_type ? s->cfg.norm_type : 2;
    SHS_CHECK(total_grad_norm(s, p, s->cfg.kind == SHS_DDP, &s->grad_norm));
    float coef = s->cfg.clip_norm / (s->grad_norm + 1e-6f);
    if (coef < 1.0f) scale_grads(s, coef);
    return SHS_OK;
}

/* Write +inf into a planted element of the reduced gradient, on the one rank
 * whose shard range holds it (also for whole units, so the fault is on a
 * single rank). */
static shs_status_t plant_faults(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (!u->plant_inf) continue;
        size_t index = (size_t)u->plant_inf - 1;
        u->plant_inf = 0;
        if (index < u->shard.offset || index >= u->shard.offset + u->shard.valid) continue;
        float *param, *grad;
        size_t n;
        update_range(s, u, &param, &grad, &n);
        float inf = INFINITY;
        SHS_CHECK(shs_memcpy_h2d(s->opt_dev, grad + (u->whole ? index : index - u->shard.offset), &inf, sizeof inf));
    }
    return SHS_OK;
}

/* GradScaler: an overflow anywhere (inf/NaN in any rank's reduced gradient)
 * is OR-ed across ranks, always through the communicator (a fault may sit on
 * one rank only), so every rank decides alike. Sets *skip; updates the scale
 * as GradScaler.update(). */
static shs_status_t check_overflow(shs_strategy_t *s, int *skip) {
    float maxabs;
    SHS_CHECK(total_grad_norm(s, SHS_NORM_INF, 0, &maxabs));
    shs_loss_scale_state_t *st = &s->scaler;
    const shs_loss_scaler_config_t *c = &s->cfg.scaler;
    *skip = !isfinite(maxabs);
    if (*skip) {
        st->scale *= c->backoff_factor;
        st->good_steps = 0;
        st->skipped_steps++;
    } else if (++st->good_steps == c->growth_interval) {
        st->scale *= c->growth_factor;
        st->good_steps = 0;
    }
    return SHS_OK;
}

/* Offload: the reduced gradient range of every unit goes to the host, where
 * clipping, the overflow check and the optimizer run (ZeRO-Offload's CPU
 * step, Ren et al. 2021; FSDP CPUOffload). */
static shs_status_t offload_grads(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        float *param, *grad;
        size_t n;
        device_range(s, u, &param, &grad, &n);
        SHS_CHECK(shs_memcpy_d2h(s->dev, u->host_grad, grad, n * sizeof(float)));
        s->d2h_bytes += n * sizeof(float);
    }
    return SHS_OK;
}

/* Offload optimizer: the updated master range goes back to the device
 * parameters (offloaded parameter shards are updated in place on the host). */
static shs_status_t upload_params(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (!u->master) continue;
        float *param, *grad;
        size_t n;
        device_range(s, u, &param, &grad, &n);
        SHS_CHECK(shs_memcpy_h2d(s->dev, param, u->master, n * sizeof(float)));
        s->h2d_bytes += n * sizeof(float);
    }
    return SHS_OK;
}

shs_status_t shs_strategy_finish_step(shs_strategy_t *s, long step) {
    SHS_ASSERT(s->sync);
    drop_held(s);
    SHS_CHECK(flush_bucket(s));
    if (s->host) SHS_CHECK(offload_grads(s));
    SHS_CHECK(plant_faults(s));
    s->skipped = 0;
    if (s->scaling) {
        float scale = s->scaler.scale; /* the scale backward used */
        SHS_CHECK(check_overflow(s, &s->skipped));
        if (s->skipped) return shs_device_sync(s->dev); /* parameters and optimizer state unchanged */
        scale_grads(s, 1.0f / scale); /* unscale before clipping, as GradScaler.unscale_ */
    }
    if (s->cfg.clip_norm > 0) SHS_CHECK(clip_grads(s));
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        float *param, *grad;
        size_t n;
        update_range(s, u, &param, &grad, &n);
        shs_optim_step(s->opt_dev, &s->cfg.optim, step, param, grad, u->optim_state, n);
    }
    if (s->host) SHS_CHECK(upload_params(s));
    if (stage_regathers(s)) {
        for (int i = 0; i < s->layout->num_units; i++) {
            unit_state_t *u = &s->units[i];
            if (!u->whole)
                SHS_CHECK(shs_all_gather(owned_params(s, u), u->params, u->shard.size, SHS_F32, s->shard_comm));
        }
    }
    return shs_device_sync(s->dev);
}

float shs_strategy_grad_norm(const shs_strategy_t *s) { return s->grad_norm; }

void shs_strategy_add_comm_stats(const shs_strategy_t *s, shs_comm_stats_t *acc) {
    const shs_comm_t *sub[2] = {s->shard_comm != s->comm ? s->shard_comm : NULL, s->replica_comm};
    for (int k = 0; k < 2; k++) {
        if (!sub[k]) continue;
        shs_comm_stats_t cs;
        shs_comm_get_stats(sub[k], &cs);
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            acc->calls[op] += cs.calls[op];
            acc->bytes[op] += cs.bytes[op];
            acc->bytes_sent[op] += cs.bytes_sent[op];
        }
    }
}

void shs_strategy_shard_info(const shs_strategy_t *s, int unit, shs_shard_t *shard, int *replica) {
    *shard = s->units[unit].shard;
    *replica = s->replica;
}

shs_loss_scale_state_t shs_strategy_loss_scale(const shs_strategy_t *s) { return s->scaler; }
void shs_strategy_set_loss_scale(shs_strategy_t *s, shs_loss_scale_state_t st) { s->scaler = st; }
int shs_strategy_step_skipped(const shs_strategy_t *s) { return s->skipped; }

shs_status_t shs_strategy_plant_grad_inf(shs_strategy_t *s, int unit, size_t index) {
    if (unit < 0 || unit >= s->layout->num_units || index >= s->units[unit].numel)
        return shs_set_error(SHS_INVALID_ARG, "plant inf: no element %zu in unit %d", index, unit);
    s->units[unit].plant_inf = index + 1;
    return SHS_OK;
}

int shs_strategy_holds_full(const shs_strategy_t *s, int unit) { return full_params(s, &s->units[unit]); }

void shs_strategy_offload_stats(const shs_strategy_t *s, uint64_t *h2d_bytes, uint64_t *d2h_bytes,
                                shs_mem_stats_t *host) {
    *h2d_bytes = s->h2d_bytes;
    *d2h_bytes = s->d2h_bytes;
    if (s->host) shs_device_mem_stats(s->host, host);
    else memset(host, 0, sizeof *host);
}

/* ---- reading and writing state ---------------------------------------------- */

shs_status_t shs_strategy_read_shard(shs_strategy_t *s, int unit, float *out) {
    unit_state_t *u = &s->units[unit];
    const float *src = owned_params(s, u);
    /* a whole unit's buffer is unpadded: elements past numel read as zero */
    size_t avail = u->whole ? u->shard.valid : u->shard.size;
    memset(out, 0, u->shard.size * sizeof(float));
    return shs_memcpy_d2h(params_dev(s, u), out, src, avail * sizeof(float));
}

int shs_strategy_state_per_param(const shs_strategy_t *s) { return shs_optim_state_per_param(&s->cfg.optim); }

shs_status_t shs_strategy_read_state(shs_strategy_t *s, int unit, float *params, float *state) {
    SHS_CHECK(shs_strategy_read_shard(s, unit, params));
    unit_state_t *u = &s->units[unit];
    int k = shs_strategy_state_per_param(s);
    size_t S = u->shard.size, stride = optim_stride(u);
    /* whole units keep state for all numel elements: take the shard's range */
    size_t from = u->whole ? u->shard.offset : 0;
    for (int j = 0; j < k; j++) {
        memset(state + (size_t)j * S, 0, S * sizeof(float));
        SHS_CHECK(shs_memcpy_d2h(s->opt_dev, state + (size_t)j * S, u->optim_state + (size_t)j * stride + from,
                                 u->shard.valid * sizeof(float)));
    }
    return SHS_OK;
}

shs_status_t shs_strategy_load_state(shs_strategy_t *s, int unit, const float *params, const float *state) {
    unit_state_t *u = &s->units[unit];
    int k = shs_strategy_state_per_param(s);
    if (full_params(s, u)) {
        SHS_CHECK(shs_memcpy_h2d(s->dev, u->params, params, u->numel * sizeof(float)));
    } else {
        shs_device_t *pd = params_dev(s, u);
        SHS_CHECK(shs_memset(pd, u->params, 0, u->shard.size * sizeof(float)));
        SHS_CHECK(shs_memcpy_h2d(pd, u->params, params + u->shard.offset, u->shard.valid * sizeof(float)));
    }
    size_t stride = optim_stride(u);
    if (k) SHS_CHECK(shs_memset(s->opt_dev, u->optim_state, 0, optim_state_len(s, u) * sizeof(float)));
    for (int j = 0; j < k; j++) {
        float *dst = u->optim_state + (size_t)j * stride;
        const float *src = state + (size_t)j * u->numel;
        if (u->whole) SHS_CHECK(shs_memcpy_h2d(s->opt_dev, dst, src, u->numel * sizeof(float)));
        else SHS_CHECK(shs_memcpy_h2d(s->opt_dev, dst, src + u->shard.offset, u->shard.valid * sizeof(float)));
    }
    return download_master(s, u);
}

shs_status_t shs_strategy_read_full(shs_strategy_t *s, int unit, float *out) {
    if (!full_params(s, &s->units[unit]))
        return shs_set_error(SHS_UNSUPPORTED, "rank %d: %s keeps only a shard of unit %d", s->rank,
                             shs_strategy_name(s->cfg.kind), unit);
    return shs_memcpy_d2h(s->dev, out, s->units[unit].params, s->units[unit].numel * sizeof(float));
}

shs_status_t shs_strategy_flip_param_bit(shs_strategy_t *s, int unit, size_t index) {
    if (unit < 0 || unit >= s->layout->num_units || index >= s->units[unit].numel)
        return shs_set_error(SHS_INVALID_ARG, "bit flip: no element %zu in unit %d", index, unit);
    unit_state_t *u = &s->units[unit];
    float *p;
    if (full_params(s, u)) p = u->params + index;
    else if (index >= u->shard.offset && index < u->shard.offset + u->shard.size) p = u->params + (index - u->shard.offset);
    else return SHS_OK;
    uint32_t bits;
    shs_device_t *d = params_dev(s, u);
    SHS_CHECK(shs_memcpy_d2h(d, &bits, p, sizeof bits));
    bits ^= 1u;
    SHS_CHECK(shs_memcpy_h2d(d, p, &bits, sizeof bits));
    return download_master(s, u); /* the fault is in the parameters the optimizer also updates */
}
