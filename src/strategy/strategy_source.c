/* strategy_source.c - the parameter source the model calls on one rank
 * (param_source.h): acquiring and releasing a unit's compute parameters,
 * recording the execution order, prefetching (FSDP forward_prefetch,
 * backward_prefetch, limit_all_gathers), keeping gathered units from
 * forward to backward (reshard_after_forward=False), and handing each
 * unit's gradient to the reduction when its backward finishes.
 * What it is not: how parameters are gathered (strategy_unit.c) or
 * gradients reduced (strategy_reduce.c).
 */
#include <stdio.h>
#include <string.h>

#include "shardsim/log.h"
#include "strategy/strategy_unit.h"

/* Prefetch (FSDP forward_prefetch / backward_prefetch): gather `unit` now,
 * ahead of its use, holding one reference for its next acquire. Skipped
 * when it is already live or limit_all_gathers units are already held. The
 * decision depends only on state every rank shares, so all ranks issue the
 * same all-gathers in the same order. */
static shs_status_t prefetch(shs_strategy_t *s, int unit) {
    if (unit < 0) return SHS_OK;
    unit_state_t *u = &s->units[unit];
    if (!u->gathers || u->gather_refs > 0) return SHS_OK;
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
    shs_status_t st = shs__strategy_take_gathered(s, u);
    shs_comm_set_marker(s->shard_comm, saved);
    SHS_CHECK(st);
    u->held = UNIT_PREFETCHED;
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

/* Elements of every unit whose compute parameters are live now. */
static size_t live_elems(const shs_strategy_t *s) {
    size_t n = 0;
    for (int i = 0; i < s->layout->num_units; i++)
        if (s->units[i].gather_refs > 0) n += s->units[i].full_len;
    return n;
}

/* DeepSpeed ZeRO-3's prefetch (zero.prefetch_bucket, max_live): the units
 * after `unit` in the recorded order of this pass are gathered ahead while
 * the elements being prefetched stay within the prefetch bucket and the live
 * elements within max_live (partitioned_param_coordinator.fetch_sub_module);
 * units already live are passed over. */
static shs_status_t prefetch_budget(shs_strategy_t *s, int unit) {
    int ph = s->phase, at = -1;
    for (int i = 0; i < s->prev_len[ph] && at < 0; i++)
        if (s->prev[ph][i] == unit) at = i;
    if (at < 0) return SHS_OK;
    size_t budget = 0, live = live_elems(s);
    for (int i = at + 1; i < s->prev_len[ph]; i++) {
        unit_state_t *v = &s->units[s->prev[ph][i]];
        if (!v->gathers || v->gather_refs > 0) continue;
        if (budget + v->full_len > s->cfg.zero.prefetch_bucket) break;
        if (s->cfg.zero.max_live && live + v->full_len > s->cfg.zero.max_live) break;
        SHS_CHECK(prefetch(s, s->prev[ph][i]));
        budget += v->full_len;
        live += v->full_len;
    }
    return SHS_OK;
}

/* DeepSpeed ZeRO-3's reuse distance (zero.max_reuse): whether `unit`,
 * released after its forward use, is needed again (its backward) within
 * max_reuse gathered elements: the rest of the forward after it and the
 * backward before it, by the recorded orders (during a forward: the last
 * complete forward's, and the last backward's, still in order[BACKWARD]). */
static int reused_soon(const shs_strategy_t *s, int unit) {
    const int *fw = s->prev[SHS_PHASE_FORWARD], *bw = s->order[SHS_PHASE_BACKWARD];
    int nf = s->prev_len[SHS_PHASE_FORWARD], nb = s->order_len[SHS_PHASE_BACKWARD], i = 0;
    if (!s->cfg.zero.max_reuse || !nf || !nb) return 0;
    while (i < nf && fw[i] != unit) i++;
    size_t d = 0;
    for (i++; i < nf; i++) d += s->units[fw[i]].full_len;
    for (int j = 0; j < nb && bw[j] != unit; j++) d += s->units[bw[j]].full_len;
    return d <= s->cfg.zero.max_reuse;
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
    if (!u->gathers) {
        *params = u->params;
        return SHS_OK;
    }
    SHS_LOG(TRACE, STRATEGY, "unit %d: acquire parameters (%s)", unit, u->held != UNIT_NOT_HELD ? "held" : "gather");
    if (u->held != UNIT_NOT_HELD) { /* gathered ahead or kept from forward: take over that reference */
        if (u->held == UNIT_PREFETCHED) s->held_prefetches--;
        u->held = UNIT_NOT_HELD;
    } else {
        SHS_CHECK(shs__strategy_take_gathered(s, u));
    }
    if (u->gpu_cache && s->phase == SHS_PHASE_BACKWARD) { /* the cast copy is in use again: it is `gathered` now */
        shs_device_free(s->dev, u->gpu_cache);
        u->gpu_cache = NULL;
    }
    *params = u->gathered;
    /* prefetch what follows this use; a second use of a unit (the tied
     * embedding as the LM head) has no place of its own in the recorded
     * order, and what follows its first use is already done */
    if (!seen && s->cfg.zero.prefetch_bucket) return prefetch_budget(s, unit); /* DeepSpeed's, both passes */
    if (!seen && s->phase == SHS_PHASE_FORWARD && s->cfg.forward_prefetch) SHS_CHECK(prefetch(s, next_unit(s, unit)));
    if (!seen && s->phase == SHS_PHASE_BACKWARD && s->cfg.backward_prefetch == SHS_PREFETCH_PRE)
        SHS_CHECK(prefetch(s, next_unit(s, unit)));
    return SHS_OK;
}

static shs_status_t release_params(void *self, int unit) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (!u->gathers) return SHS_OK;
    SHS_ASSERT(u->gather_refs > 0);
    if (--u->gather_refs > 0) return SHS_OK;
    int keep = s->cfg.keep_after_forward || s->cfg.reshard_after_forward_size == 1 ||
               (s->phase == SHS_PHASE_FORWARD && reused_soon(s, unit));
    if (s->phase == SHS_PHASE_FORWARD && keep && !u->full_params && !u->lp_replica) {
        u->gather_refs = 1; /* keep it for backward (FSDP SHARD_GRAD_OP) */
        u->held = UNIT_KEPT_AFTER_FORWARD;
        return SHS_OK;
    }
    if (s->phase == SHS_PHASE_FORWARD && s->reshard_comm && !u->full_params && !u->lp_replica && !u->post_fwd)
        SHS_CHECK(shs__strategy_reshard(s, u)); /* FSDP2's reshard_after_forward=R: keep 1/R for backward */
    SHS_LOG(TRACE, STRATEGY, "unit %d: release parameters", unit);
    if (s->phase == SHS_PHASE_FORWARD && autocast_cached(s, u) && !u->gpu_cache) /* kept on the GPU until backward */
        SHS_CHECK(shs_device_alloc_modeled(s->dev, &u->gpu_cache, 0, shs__strategy_gathered_gpu_bytes(s, u),
                                           SHS_MEM_COMM, "autocast weight cache"));
    shs__strategy_drop_gathered(s, u);
    return SHS_OK;
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

/* The unit's full gradient in grad_dtype (transient for sharded gradients:
 * allocated zeroed at its first backward of the step). */
static shs_status_t ensure_grad_full(shs_strategy_t *s, unit_state_t *u) {
    if (u->grads_in_block || u->grad_full) return SHS_OK;
    size_t bytes = (u->full_len ? u->full_len : 1) * grad_es(s);
    SHS_CHECK(shs_device_alloc(s->dev, &u->grad_full, bytes, SHS_MEM_COMM, "unsharded gradient"));
    return shs_memset(s->dev, u->grad_full, 0, bytes);
}

/* The f32 buffer backward accumulates into (param_source.h): the stored
 * gradient itself (f32, nothing to round), or an f32 working copy: of the
 * stored gradient when it is kept in param_dtype, zeros for an f32
 * accumulation buffer below f32 (the micro-batch's own gradient, rounded and
 * added in grads_ready). A second acquire before grads_ready (a tied unit)
 * gets the same buffer. */
static shs_status_t acquire_grads(void *self, int unit, float **grads) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (!u->bwd) {
        SHS_CHECK(ensure_grad_full(s, u));
        if (bwd_in_place(s)) {
            u->bwd = u->grad_full;
        } else {
            /* the GPU computes the gradient in param_dtype: into the stored gradient when that is param_dtype
             * (nothing here), else into a param-dtype buffer added to the f32 accumulation buffer */
            size_t n = u->full_len ? u->full_len : 1;
            size_t gpu = grad_dtype(s) == SHS_F32 ? n * shs_dtype_size(s->cfg.param_dtype) : 0;
            SHS_CHECK(shs_device_alloc_modeled(s->dev, (void **)&u->bwd, n * sizeof(float), gpu, SHS_MEM_COMM,
                                               "gradient (f32 working copy)"));
            if (grad_dtype(s) == SHS_F32) SHS_CHECK(shs_memset(s->dev, u->bwd, 0, u->full_len * sizeof(float)));
            else shs_cast(s->dev, u->bwd, SHS_F32, u->grad_full, grad_dtype(s), u->full_len);
        }
    }
    *grads = u->bwd;
    return SHS_OK;
}

/* The working copy into the stored gradient: rounded to param_dtype, then
 * stored (acc = (t)(acc + g)) or added to the f32 accumulation buffer
 * (acc += (f32)(t)g). */
static shs_status_t fold_bwd(shs_strategy_t *s, unit_state_t *u) {
    float *b = u->bwd;
    u->bwd = NULL;
    if (b == u->grad_full || !b) return SHS_OK;
    shs_status_t st = SHS_OK;
    if (grad_dtype(s) != SHS_F32) {
        shs_cast(s->dev, u->grad_full, grad_dtype(s), b, SHS_F32, u->numel);
    } else {
        st = shs__strategy_round_to(s, b, b, u->numel, s->cfg.param_dtype);
        if (st == SHS_OK) shs_accumulate(s->dev, u->grad_full, b, u->numel);
    }
    shs_device_free(s->dev, b);
    return st;
}

static shs_status_t grads_ready(void *self, int unit) {
    shs_strategy_t *s = self;
    unit_state_t *u = &s->units[unit];
    if (s->cfg.backward_prefetch == SHS_PREFETCH_POST) SHS_CHECK(prefetch(s, next_unit(s, unit)));
    /* gradients come out of backward in param_dtype (accumulation included) */
    if (u->bwd) SHS_CHECK(fold_bwd(s, u));
    if (!s->sync) return SHS_OK; /* no_sync: keep accumulating locally */
    return shs__strategy_reduce_unit(s, u);
}

shs_param_source_t shs__strategy_param_source(shs_strategy_t *s) {
    return (shs_param_source_t){s, acquire_params, release_params, acquire_grads, grads_ready};
}
