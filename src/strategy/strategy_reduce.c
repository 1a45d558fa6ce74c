/* strategy_reduce.c - gradient reduction on one rank, as the stage's row
 * says (stages.c): whole units (DDP, replicated units) join an all-reduce
 * bucket; sharded units are reduce-scattered over the shard group, in place
 * in the full gradient when the stage keeps it (ZeRO-1) or into the
 * persistent gradient shard (ZeRO-2/3), and for hybrid sharding the shard is
 * then all-reduced across the replicas. Carried in reduce_dtype; the mean is
 * the collectives' AVG, or DeepSpeed's multiplies around a SUM.
 * What it is not: when a unit is ready (the parameter source's grads_ready,
 * strategy_source.c) or the collectives themselves (src/comm/).
 */
#include <stddef.h>

#include "strategy/strategy_unit.h"

/* DeepSpeed's averaging (strategy.h: prescale_gradients,
 * gradient_predivide_factor), written out as engine.py's allreduce_bucket
 * applies it to the tensor it all-reduces (in the reduce dtype):
 *   prescale:           x *= 1/N; SUM
 *   predivide factor f: x *= 1/f; SUM; x *= f/N   (each multiply skipped
 *                       where it is 1: f == 1 before, f == N after)
 * Each multiplier is computed in f64 (Python) and taken as f32, the opmath
 * of torch's mul_ for f32, f16 and bf16 tensors: every element is rounded to
 * the reduce dtype after its f32 product. The mean is over all N ranks (for
 * hybrid sharding: the shard group's reduce-scatter and the replicas'
 * all-reduce are both SUMs, the f/N multiply follows the last). Off (both
 * unset): the collectives' own AVG (NCCL's ncclAvg), as before. */
static int ds_averaging(const shs_strategy_t *s) {
    float f = s->cfg.gradient_predivide_factor;
    return s->cfg.prescale_gradients || (f != 0.0f && f != 1.0f);
}

/* x (n, dtype) *= k, the product taken in f32 and rounded to dtype. */
static shs_status_t scale_in_dtype(shs_strategy_t *s, void *x, shs_dtype_t dtype, size_t n, float k) {
    if (n == 0) return SHS_OK;
    if (dtype == SHS_F32) {
        shs_scale(s->dev, x, k, n);
        return SHS_OK;
    }
    float *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, (void **)&tmp, n * sizeof(float), SHS_MEM_COMM, "gradient averaging (f32)"));
    shs_cast(s->dev, tmp, SHS_F32, x, dtype, n);
    shs_scale(s->dev, tmp, k, n);
    shs_cast(s->dev, x, dtype, tmp, SHS_F32, n);
    shs_device_free(s->dev, tmp);
    return SHS_OK;
}

/* The multiplier before the SUM, and after it (1: none). */
static float ds_pre(const shs_strategy_t *s) {
    double f = s->cfg.gradient_predivide_factor;
    if (s->cfg.prescale_gradients) return (float)(1.0 / (double)s->nranks);
    return f != 1.0 ? (float)(1.0 / f) : 1.0f;
}
static float ds_post(const shs_strategy_t *s) {
    double f = s->cfg.gradient_predivide_factor;
    if (s->cfg.prescale_gradients || f == (double)s->nranks) return 1.0f;
    return (float)(f / (double)s->nranks);
}

/* The reducing op of the gradient collectives. */
static shs_redop_t grad_op(const shs_strategy_t *s) { return ds_averaging(s) ? SHS_SUM : SHS_AVG; }

/* Before the first SUM of n elements (dtype): DeepSpeed's multiply, if any. */
static shs_status_t before_sum(shs_strategy_t *s, void *x, shs_dtype_t dtype, size_t n) {
    float k = ds_averaging(s) ? ds_pre(s) : 1.0f;
    return k != 1.0f ? scale_in_dtype(s, x, dtype, n, k) : SHS_OK;
}
/* After the last SUM: DeepSpeed's multiply, if any. */
static shs_status_t after_sum(shs_strategy_t *s, void *x, shs_dtype_t dtype, size_t n) {
    float k = ds_averaging(s) ? ds_post(s) : 1.0f;
    return k != 1.0f ? scale_in_dtype(s, x, dtype, n, k) : SHS_OK;
}

/* The mean all-reduce of n gradients (grad_dtype) in place, carried in
 * reduce_dtype: through a reduce_dtype copy when the two differ, its result
 * stored back in grad_dtype. */
static shs_status_t all_reduce_grads(shs_strategy_t *s, void *p, size_t n) {
    shs_dtype_t rd = s->cfg.reduce_dtype, gd = grad_dtype(s);
    shs_comm_t *comm = tagged(s, s->comm, SHS_TAG_GRAD_ALL_REDUCE, s->bucket_unit);
    void *x = p, *tmp = NULL;
    if (rd != gd) {
        SHS_CHECK(shs_device_alloc(s->dev, &tmp, n * shs_dtype_size(rd), SHS_MEM_COMM, "reduce buffer"));
        shs_cast(s->dev, tmp, rd, p, gd, n);
        x = tmp;
    }
    shs_status_t st = before_sum(s, x, rd, n);
    if (st == SHS_OK) st = shs_all_reduce(x, x, n, rd, grad_op(s), comm);
    if (st == SHS_OK) st = after_sum(s, x, rd, n);
    if (tmp) {
        if (st == SHS_OK) shs_cast(s->dev, p, gd, tmp, rd, n);
        shs_device_free(s->dev, tmp);
    }
    return st;
}

/* The mean reduce-scatter of a unit's full gradient (full_len, grad_dtype)
 * into `out` (S, grad_dtype; may be inside `full` at the shard's offset: in
 * place) over the shard group, then for hybrid sharding an all-reduce of the
 * shard across the replicas (PyTorch HSDP's order); carried in reduce_dtype
 * as all_reduce_grads. */
static shs_status_t reduce_scatter_grads(shs_strategy_t *s, unit_state_t *u, void *full, void *out) {
    shs_dtype_t rd = s->cfg.reduce_dtype, gd = grad_dtype(s);
    size_t S = u->shard.size;
    int unit = unit_index(s, u);
    shs_comm_t *shard_comm = tagged(s, s->shard_comm, SHS_TAG_REDUCE_SCATTER, unit);
    /* replica_comm exists for SHS_GRAD_REDUCE_SCATTER_REPLICAS with more than one replica */
    shs_comm_t *replica_comm = s->replica_comm ? tagged(s, s->replica_comm, SHS_TAG_REPLICA_ALL_REDUCE, unit) : NULL;
    shs_redop_t op = grad_op(s);
    if (rd == gd) {
        SHS_CHECK(before_sum(s, full, gd, u->full_len));
        SHS_CHECK(shs_reduce_scatter(full, out, S, gd, op, shard_comm));
        if (replica_comm) SHS_CHECK(shs_all_reduce(out, out, S, gd, op, replica_comm));
        return after_sum(s, out, gd, S);
    }
    size_t es = shs_dtype_size(rd);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, (u->full_len ? u->full_len : 1) * es, SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, full, gd, u->full_len);
    char *mine = (char *)tmp + u->shard.offset * es;
    shs_status_t st = before_sum(s, tmp, rd, u->full_len);
    if (st == SHS_OK) st = shs_reduce_scatter(tmp, mine, S, rd, op, shard_comm);
    if (st == SHS_OK && replica_comm) st = shs_all_reduce(mine, mine, S, rd, op, replica_comm);
    if (st == SHS_OK) st = after_sum(s, mine, rd, S);
    if (st == SHS_OK) shs_cast(s->dev, out, gd, mine, rd, S);
    shs_device_free(s->dev, tmp);
    return st;
}

/* All-reduce the pending bucket (strategy_unit.h). */
shs_status_t shs__strategy_flush_bucket(shs_strategy_t *s) {
    size_t n = s->bucket_hi - s->bucket_lo;
    if (n == 0) return SHS_OK;
    void *p = grad_at(s, s->grad_block, s->bucket_lo);
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
    if ((s->bucket_hi - s->bucket_lo) * grad_es(s) >= s->cfg.bucket_bytes) SHS_CHECK(shs__strategy_flush_bucket(s));
    return SHS_OK;
}

shs_status_t shs__strategy_reduce_unit(shs_strategy_t *s, unit_state_t *u) {
    if (u->whole) return bucket_grads_ready(s, u);
    if (u->grads_in_block) /* ZeRO-1, in place: this rank's shard of grad_full becomes the reduced shard */
        return reduce_scatter_grads(s, u, u->grad_full, grad_at(s, u->grad_full, u->shard.offset));
    shs_status_t st = reduce_scatter_grads(s, u, u->grad_full, u->grad_shard);
    shs_device_free(s->dev, u->grad_full); /* the transient full gradient */
    u->grad_full = NULL;
    return st;
}
