/* strategy_step.c - the end of a training step on one rank: finishing
 * gradient reduction, offloading gradients to the host, the fp16 overflow
 * check and loss-scale update, unscaling, clipping with the exact norm
 * (exact_norm.h), the optimizer step and the re-gather of parameters. The
 * step reads each unit's gradient in f32 (step_grads). See
 * strategy.h for the semantics (loss scaling, clip_grad_norm_, ZeRO-Offload).
 * What it is not: the parameter source (strategy_source.c) or checkpoint state
 * (strategy_state.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shardsim/dtype.h"
#include "shardsim/exact_norm.h"
#include "strategy/strategy_unit.h"

/* ---- step -------------------------------------------------------------------- */

shs_status_t shs_strategy_begin_step(shs_strategy_t *s) {
    shs__strategy_drop_held(s);
    s->bucket_lo = s->bucket_hi = 0;
    s->micro = s->forwards = 0;
    if (s->grad_block) SHS_CHECK(shs_memset(s->dev, s->grad_block, 0, s->grad_block_len * grad_es(s)));
    return SHS_OK;
}

void shs_strategy_set_step(shs_strategy_t *s, long step) { s->step = step; }

void shs_strategy_set_sync(shs_strategy_t *s, int sync) {
    s->sync = sync;
    s->bucket_lo = s->bucket_hi = 0;
}

/* The f32 gradient the step reads for a unit's update range (*grad; with
 * *param and *n as update_range): the range itself when grads_in_place,
 * else a widened copy (COMM) with this step's scale_grads multipliers
 * applied in their order, the same f32 operations the in-place path made.
 * Give it back with put_step_grads. One unit at a time, so the copy is never
 * more than the largest unit's range. */
static shs_status_t step_grads(shs_strategy_t *s, const unit_state_t *u, float **param, float **grad, size_t *n) {
    void *g;
    update_range(s, u, param, &g, n);
    if (grads_in_place(s)) {
        *grad = g;
        return SHS_OK;
    }
    /* DeepSpeed's copy is one for the whole step (deepspeed_grad_copy), not one per unit */
    size_t b = (*n ? *n : 1) * sizeof(float);
    SHS_CHECK(shs_device_alloc_modeled(s->dev, (void **)grad, b, s->cfg.framework == SHS_FRAMEWORK_DEEPSPEED ? 0 : b,
                                       SHS_MEM_COMM, "gradient (f32 for the optimizer)"));
    if (*n) shs_cast(s->dev, *grad, SHS_F32, g, grad_dtype(s), *n);
    for (int k = 0; k < s->num_grad_coef && *n; k++) shs_scale(s->dev, *grad, s->grad_coef[k], *n);
    return SHS_OK;
}

static void put_step_grads(shs_strategy_t *s, float *grad) {
    if (!grads_in_place(s)) shs_device_free(s->dev, grad);
}

/* The GPU ledger's f32 gradient of DeepSpeed's optimizer step: the 16-bit
 * gradient partition widened at once for the step (stage 0 FP16_Optimizer's
 * fp32_groups_flat grad, ZeRO-1/2's single_partition_of_fp32_groups[i].grad,
 * ZeRO-3's fp32_partitioned_groups_flat grad, with one optimizer group and
 * sub-group), every unit's update range in f32 (GRADS); NULL in *out when
 * the gradients are f32 already or the framework is another. */
static shs_status_t deepspeed_grad_copy(shs_strategy_t *s, void **out) {
    *out = NULL;
    if (s->cfg.framework != SHS_FRAMEWORK_DEEPSPEED || grads_in_place(s)) return SHS_OK;
    size_t elems = 0;
    for (int i = 0; i < s->layout->num_units; i++) {
        float *param;
        void *grad;
        size_t n;
        update_range(s, &s->units[i], &param, &grad, &n);
        elems += n;
    }
    return shs_device_alloc_modeled(s->dev, out, 0, (elems ? elems : 1) * sizeof(float), SHS_MEM_GRADS,
                                    "f32 gradient partition (DeepSpeed's optimizer step)");
}

/* The total gradient norm (strategy.h): each element counted once. Under
 * DDP every rank holds every reduced element and computes it alone; under
 * ZeRO each rank adds its owned reduced shard (and rank 0 the replicated
 * units) and the exact partial sums are all-reduced (integer sum: exact),
 * tagged `kind`. */
static shs_status_t total_grad_norm(shs_strategy_t *s, int p, int local, shs_tag_kind_t kind, float *norm) {
    SHS_CHECK(shs_memset(s->opt_dev, s->norm_acc, 0, SHS_NORM_ACC_WORDS * sizeof(int64_t)));
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        /* counted once: whole units by rank 0, shards by the first replica */
        if (!local && p != SHS_NORM_INF && (u->whole ? s->rank != 0 : s->replica != 0)) continue;
        float *param, *grad;
        size_t n;
        SHS_CHECK(step_grads(s, u, &param, &grad, &n));
        shs_norm_accumulate(s->opt_dev, s->norm_acc, grad, n, p);
        put_step_grads(s, grad);
    }
    if (!local) SHS_CHECK(shs_all_reduce(s->norm_acc, s->norm_acc, SHS_NORM_ACC_WORDS, SHS_I64,
                                         p == SHS_NORM_INF ? SHS_MAX : SHS_SUM, tagged(s, s->comm, kind, -1)));
    int64_t acc[SHS_NORM_ACC_WORDS];
    SHS_CHECK(shs_memcpy_d2h(s->opt_dev, acc, s->norm_acc, sizeof acc));
    *norm = shs_exact_norm_finish(acc, p);
    return SHS_OK;
}

/* Multiply the gradient elements the optimizer reads by `coef`: in place,
 * or, when the step reads f32 copies, remembered for each copy (step_grads). */
static void scale_grads(shs_strategy_t *s, float coef) {
    if (!grads_in_place(s)) {
        SHS_ASSERT(s->num_grad_coef < (int)(sizeof s->grad_coef / sizeof s->grad_coef[0]));
        s->grad_coef[s->num_grad_coef++] = coef;
        return;
    }
    for (int i = 0; i < s->layout->num_units; i++) {
        float *param;
        void *grad;
        size_t n;
        update_range(s, &s->units[i], &param, &grad, &n);
        if (n) shs_scale(s->opt_dev, grad, coef, n);
    }
}

/* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6) in f32,
 * applied when below 1 to exactly the elements the optimizer reads. */
static shs_status_t clip_grads(shs_strategy_t *s) {
    int p = s->cfg.norm_type ? s->cfg.norm_type : 2;
    /* local when every rank holds every reduced element (nothing sharded: DDP) */
    SHS_CHECK(total_grad_norm(s, p, !s->stage->shards_optimizer, SHS_TAG_GRAD_NORM, &s->grad_norm));
    float coef = s->cfg.clip_norm / (s->grad_norm + 1e-6f);
    if (coef < 1.0f) scale_grads(s, coef);
    return SHS_OK;
}

/* Write +inf into a planted element of the reduced gradient, on the one rank
 * whose shard range holds it (also for whole units, so the fault is on a
 * single rank): a fault a test planted (strategy_testing.h). */
static shs_status_t plant_faults(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (!u->plant_inf) continue;
        size_t index = (size_t)u->plant_inf - 1;
        u->plant_inf = 0;
        if (index < u->shard.offset || index >= u->shard.offset + u->shard.valid) continue;
        float *param;
        void *grad;
        size_t n;
        update_range(s, u, &param, &grad, &n);
        size_t at = u->whole ? index : index - u->shard.offset;
        float inf = INFINITY;
        if (s->host || grad_dtype(s) == SHS_F32) {
            SHS_CHECK(shs_memcpy_h2d(s->opt_dev, (float *)grad + at, &inf, sizeof inf));
        } else { /* +inf in the 2-byte gradient dtype */
            uint16_t bits = grad_dtype(s) == SHS_BF16 ? shs_f32_to_bf16(inf) : shs_f32_to_f16(inf);
            SHS_CHECK(shs_memcpy_h2d(s->dev, grad_at(s, grad, at), &bits, sizeof bits));
        }
    }
    return SHS_OK;
}

/* The overflow check: an overflow anywhere (inf/NaN in any rank's reduced
 * gradient) is OR-ed across ranks, always through the communicator (a fault
 * may sit on one rank only), so every rank decides alike. Sets *skip;
 * updates the scale by the configured rule (loss_scale.c). */
static shs_status_t check_overflow(shs_strategy_t *s, int *skip) {
    float maxabs;
    SHS_CHECK(total_grad_norm(s, SHS_NORM_INF, 0, SHS_TAG_OVERFLOW_CHECK, &maxabs));
    *skip = !isfinite(maxabs);
    shs_status_t st = shs_loss_scale_update(&s->cfg.scaler, &s->scaler, *skip);
    if (st != SHS_OK) return shs_set_error(st, "rank %d step %ld: %s", s->rank, s->step, shs_last_error());
    return SHS_OK;
}

/* Offload: the reduced gradient range of every unit goes to the host, where
 * clipping, the overflow check and the optimizer run (ZeRO-Offload's CPU
 * step, Ren et al. 2021; FSDP CPUOffload). */
static shs_status_t offload_grads(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        float *param;
        void *grad;
        size_t n;
        device_range(s, u, &param, &grad, &n);
        s->d2h_bytes += n * grad_es(s);
        if (grad_dtype(s) == SHS_F32) {
            SHS_CHECK(shs_memcpy_d2h(s->dev, u->host_grad, grad, n * sizeof(float)));
            continue;
        }
        /* the 2-byte gradient crosses the link and is widened on the host */
        void *tmp;
        SHS_CHECK(shs_device_alloc(s->host, &tmp, (n ? n : 1) * grad_es(s), SHS_MEM_COMM, "offloaded gradient (grad dtype)"));
        shs_status_t st = shs_memcpy_d2h(s->dev, tmp, grad, n * grad_es(s));
        if (st == SHS_OK && n) shs_cast(s->host, u->host_grad, SHS_F32, tmp, grad_dtype(s), n);
        shs_device_free(s->host, tmp);
        SHS_CHECK(st);
    }
    return SHS_OK;
}

/* Offload optimizer: the updated master range goes back to the device
 * parameters (offloaded parameter shards are updated in place on the host). */
static shs_status_t upload_params(shs_strategy_t *s) {
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (!u->master) continue;
        float *param;
        void *grad;
        size_t n;
        device_range(s, u, &param, &grad, &n);
        SHS_CHECK(shs_memcpy_h2d(s->dev, param, u->master, n * sizeof(float)));
        s->h2d_bytes += n * sizeof(float);
    }
    return SHS_OK;
}

/* DeepSpeed ZeRO-1/2's re-gather after the step (zero.allgather_bucket):
 * DeepSpeed on a torch with all_gather_into_tensor (runtime/utils.py,
 * all_gather_into_tensor_dp_groups) gathers the rank's whole partition, every
 * sharded unit's shard in turn, in one all-gather whatever
 * allgather_bucket_size says (the older path split it by that size), into
 * the flat 16-bit buffer in place; here the partition is copied out, gathered
 * rank by rank, and each rank's part copied back into every unit's replica
 * (in param_dtype) or f32 parameters. Exact copies: the same bits as the
 * per-unit gathers. */
static shs_status_t regather_flat(shs_strategy_t *s) {
    shs_dtype_t pd = s->cfg.param_dtype;
    size_t P = 0, n = (size_t)s->shard_n;
    int last = -1;
    for (int i = 0; i < s->layout->num_units; i++)
        if (!s->units[i].whole) P += s->units[i].shard.size, last = i;
    if (last < 0) return SHS_OK;
    int lp = s->units[last].lp_replica != NULL;
    shs_dtype_t t = lp ? pd : SHS_F32;
    size_t es = shs_dtype_size(t);
    void *part = NULL, *all = NULL;
    shs_status_t st = shs_device_alloc_modeled(s->dev, &part, (P ? P : 1) * es, 0, SHS_MEM_COMM, "partition (flat)");
    if (st == SHS_OK)
        st = shs_device_alloc_modeled(s->dev, &all, (P ? P * n : 1) * es, 0, SHS_MEM_COMM, "parameters (flat)");
    size_t off = 0;
    for (int i = 0; st == SHS_OK && i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        if (u->whole) continue;
        if (lp) shs_cast(s->dev, (char *)part + off * es, pd, u->params, SHS_F32, u->shard.size);
        else st = shs_memcpy_d2d(s->dev, (char *)part + off * es, owned_params(u), u->shard.size * es);
        off += u->shard.size;
    }
    if (st == SHS_OK) st = shs_all_gather(part, all, P, t, tagged(s, s->shard_comm, SHS_TAG_PARAM_REGATHER, last));
    for (size_t r = 0; st == SHS_OK && r < n; r++) {
        off = 0;
        for (int i = 0; st == SHS_OK && i < s->layout->num_units; i++) {
            unit_state_t *u = &s->units[i];
            if (u->whole) continue;
            void *dst = lp ? (char *)u->lp_replica + r * u->shard.size * es : (void *)(u->params + r * u->shard.size);
            st = shs_memcpy_d2d(s->dev, dst, (char *)all + (r * P + off) * es, u->shard.size * es);
            off += u->shard.size;
        }
    }
    for (int i = 0; st == SHS_OK && i < s->layout->num_units; i++) s->units[i].lp_stale = 0;
    shs_device_free(s->dev, part);
    shs_device_free(s->dev, all);
    return st;
}

/* The end of finish_step: the next step's tags carry step + 1. */
static shs_status_t step_done(shs_strategy_t *s, long step) {
    s->step = step + 1;
    return shs_device_sync(s->dev);
}

shs_status_t shs_strategy_finish_step(shs_strategy_t *s, long step) {
    SHS_ASSERT(s->sync);
    s->step = step;
    shs__strategy_drop_held(s);
    SHS_CHECK(shs__strategy_flush_bucket(s));
    SHS_CHECK(shs__strategy_flush_rs_bucket(s));
    if (s->host) SHS_CHECK(offload_grads(s));
    SHS_CHECK(plant_faults(s));
    s->skipped = 0;
    s->num_grad_coef = 0;
    if (s->scaling) {
        float scale = s->scaler.scale; /* the scale backward used */
        SHS_CHECK(check_overflow(s, &s->skipped));
        if (s->skipped) return step_done(s, step); /* parameters and optimizer state unchanged */
        scale_grads(s, 1.0f / scale); /* unscale before clipping, as GradScaler.unscale_ */
    }
    if (s->cfg.clip_norm > 0) SHS_CHECK(clip_grads(s));
    /* this step's lr (and OneCycle's betas), rounded to f32 as the kernels take them */
    shs_optim_config_t optim = s->cfg.optim;
    shs_lr_point_t pt = shs_lr_schedule_at(&s->cfg.lr_schedule, (double)optim.lr, s->lr_applied);
    optim.lr = (float)pt.lr;
    if (pt.has_betas && optim.kind == SHS_OPTIM_ADAMW) {
        optim.beta1 = (float)pt.beta1;
        optim.beta2 = (float)pt.beta2;
    }
    void *ds_copy;
    SHS_CHECK(deepspeed_grad_copy(s, &ds_copy));
    for (int i = 0; i < s->layout->num_units; i++) {
        unit_state_t *u = &s->units[i];
        float *param, *grad;
        size_t n;
        shs_status_t st = step_grads(s, u, &param, &grad, &n);
        if (st != SHS_OK) {
            shs_device_free(s->dev, ds_copy);
            return st;
        }
        shs_optim_step(s->opt_dev, &optim, step, param, grad, u->optim_state, n);
        put_step_grads(s, grad);
    }
    shs_device_free(s->dev, ds_copy);
    s->lr_applied++;
    s->last_lr = optim.lr;
    if (s->host) SHS_CHECK(upload_params(s));
    for (int i = 0; i < s->layout->num_units; i++) shs__strategy_refresh_lp_shard(s, &s->units[i]);
    if (s->stage->regathers_params_after_step && s->cfg.zero.allgather_bucket) {
        SHS_CHECK(regather_flat(s));
    } else if (s->stage->regathers_params_after_step) {
        for (int i = 0; i < s->layout->num_units; i++) {
            unit_state_t *u = &s->units[i];
            if (u->whole) continue;
            if (u->lp_replica) SHS_CHECK(shs__strategy_refresh_replica(s, u)); /* in param_dtype */
            else SHS_CHECK(shs_all_gather(owned_params(u), u->params, u->shard.size, SHS_F32,
                                          tagged(s, s->shard_comm, SHS_TAG_PARAM_REGATHER, i)));
        }
    }
    return step_done(s, step);
}

float shs_strategy_grad_norm(const shs_strategy_t *s) { return s->grad_norm; }

void shs_strategy_add_comm_stats(const shs_strategy_t *s, shs_comm_stats_t *acc) {
    const shs_comm_t *sub[3] = {s->shard_comm != s->comm ? s->shard_comm : NULL, s->replica_comm, s->reshard_comm};
    for (int k = 0; k < 3; k++) {
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
long shs_strategy_lr_steps(const shs_strategy_t *s) { return s->lr_applied; }
void shs_strategy_set_lr_steps(shs_strategy_t *s, long applied) { s->lr_applied = applied; }
double shs_strategy_last_lr(const shs_strategy_t *s) { return s->last_lr; }

void shs_strategy_offload_stats(const shs_strategy_t *s, uint64_t *h2d_bytes, uint64_t *d2h_bytes,
                                shs_mem_stats_t *host) {
    *h2d_bytes = s->h2d_bytes;
    *d2h_bytes = s->d2h_bytes;
    if (s->host) shs_device_mem_stats(s->host, host);
    else memset(host, 0, sizeof *host);
}

