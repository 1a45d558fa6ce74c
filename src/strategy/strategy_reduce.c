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
static shs_status_t reduce_scatter_grads_at(shs_strategy_t *s, const unit_state_t *u, int unit, void *full, void *out) {
    shs_dtype_t rd = s->cfg.reduce_dtype, gd = grad_dtype(s);
    size_t S = u->shard.size;
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

static shs_status_t reduce_scatter_grads(shs_strategy_t *s, unit_state_t *u, void *full, void *out) {
    return reduce_scatter_grads_at(s, u, unit_index(s, u), full, out);
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

/* DeepSpeed's reduce bucket (strategy.h shs_zero_knobs_t): one
 * reduce-scatter of every waiting unit's gradient. The send buffer holds,
 * for rank r = 0..n-1 in turn, rank r's part (S_u elements) of each
 * waiting unit in the order they joined, so rank r's output is its shards
 * of those units one after the other; each element is reduced over the
 * same ranks in the same order as a per-unit reduce-scatter. */
shs_status_t shs__strategy_flush_rs_bucket(shs_strategy_t *s) {
    if (!s->rs_n) return SHS_OK;
    size_t es = grad_es(s), per = 0, n = (size_t)s->shard_n;
    for (int i = 0; i < s->rs_n; i++) per += s->rs_units[i]->shard.size;
    void *send = NULL, *out = NULL;
    /* on the GPU: the ipg buffer itself with contiguous gradients, else reduce_scatter_coalesced's flat copy */
    size_t sb = (per > 0 ? per * n : 1) * es;
    shs_status_t st = shs_device_alloc_modeled(s->dev, &send, sb, s->cfg.zero.contiguous_gradients ? 0 : sb, SHS_MEM_COMM,
                                               "reduce bucket (rank by rank)");
    if (st == SHS_OK) /* the output lands in the gradient partitions: none of its own there */
        st = shs_device_alloc_modeled(s->dev, &out, (per ? per : 1) * es, 0, SHS_MEM_COMM, "reduce bucket output");
    for (size_t r = 0, off = 0; st == SHS_OK && r < n; r++)
        for (int i = 0; st == SHS_OK && i < s->rs_n; i++) {
            unit_state_t *u = s->rs_units[i];
            st = shs_memcpy_d2d(s->dev, grad_at(s, send, off), grad_at(s, u->rs_grad, r * u->shard.size),
                                u->shard.size * es);
            off += u->shard.size;
        }
    unit_state_t fake = {.shard = {.offset = (size_t)s->shard_rank * per, .size = per, .valid = per},
                         .full_len = per * n}; /* the bucket as one unit for reduce_scatter_grads */
    if (st == SHS_OK) {
        s->bucket_unit = unit_index(s, s->rs_units[s->rs_n - 1]);
        st = reduce_scatter_grads_at(s, &fake, s->bucket_unit, send, out);
    }
    for (size_t i = 0, off = 0; st == SHS_OK && i < (size_t)s->rs_n; i++) {
        unit_state_t *u = s->rs_units[i];
        st = shs_memcpy_d2d(s->dev, u->grad_shard, grad_at(s, out, off), u->shard.size * es);
        off += u->shard.size;
    }
    shs_device_free(s->dev, send);
    shs_device_free(s->dev, out);
    for (int i = 0; i < s->rs_n; i++) {
        shs_device_free(s->dev, s->rs_units[i]->rs_grad);
        s->rs_units[i]->rs_grad = NULL;
    }
    s->rs_n = 0;
    s->rs_elems = 0;
    return st;
}

/* A sharded unit's gradient joins the reduce bucket (or, larger than it,
 * goes alone after the waiting ones), as DeepSpeed's ipg bucket. */
static shs_status_t rs_bucket_join(shs_strategy_t *s, unit_state_t *u) {
    size_t cap = s->cfg.zero.reduce_bucket;
    if (s->rs_n && s->rs_elems + u->full_len > cap) SHS_CHECK(shs__strategy_flush_rs_bucket(s));
    if (u->full_len > cap) { /* an extra-large parameter: reduced directly */
        shs_status_t st = reduce_scatter_grads(s, u, u->grad_full, u->grad_shard);
        shs_device_free(s->dev, u->grad_full);
        u->grad_full = NULL;
        return st;
    }
    if (s->cfg.zero.contiguous_gradients) { /* copied into the ipg buffer, the gradient freed */
        size_t b = (u->full_len ? u->full_len : 1) * grad_es(s);
        SHS_CHECK(shs_device_alloc_modeled(s->dev, &u->rs_grad, b, 0, SHS_MEM_COMM, "gradient in the reduce bucket"));
        SHS_CHECK(shs_memcpy_d2d(s->dev, u->rs_grad, u->grad_full, u->full_len * grad_es(s)));
        shs_device_free(s->dev, u->grad_full);
    } else {
        u->rs_grad = u->grad_full;
    }
    u->grad_full = NULL;
    s->rs_units[s->rs_n++] = u;
    s->rs_elems += u->full_len;
    return SHS_OK;
}

shs_status_t shs__strategy_reduce_unit(shs_strategy_t *s, unit_state_t *u) {
    if (u->whole) return bucket_grads_ready(s, u);
    if (u->grads_in_block) /* ZeRO-1, in place: this rank's shard of grad_full becomes the reduced shard */
        return reduce_scatter_grads(s, u, u->grad_full, grad_at(s, u->grad_full, u->shard.offset));
    if (s->cfg.zero.reduce_bucket) return rs_bucket_join(s, u);
    shs_status_t st = reduce_scatter_grads(s, u, u->grad_full, u->grad_shard);
    shs_device_free(s->dev, u->grad_full); /* the transient full gradient */
    u->grad_full = NULL;
    return st;
}
