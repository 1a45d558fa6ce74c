/* strategy_reduce.c - gradient reduction on one rank, as the stage's row
 * says (stages.c): whole units (DDP, replicated units) join an all-reduce
 * bucket; sharded units are reduce-scattered over the shard group, in place
 * in the full gradient when the stage keeps it (ZeRO-1) or into the
 * persistent gradient shard (ZeRO-2/3), and for hybrid sharding the shard is
 * then all-reduced across the replicas. Carried in reduce_dtype.
 * What it is not: when a unit is ready (the parameter source's grads_ready,
 * strategy_source.c) or the collectives themselves (src/comm/).
 */
#include <stddef.h>

#include "strategy/strategy_unit.h"

/* AVG all-reduce of n gradients (grad_dtype) in place, carried in
 * reduce_dtype: through a reduce_dtype copy when the two differ, its result
 * stored back in grad_dtype. */
static shs_status_t all_reduce_grads(shs_strategy_t *s, void *p, size_t n) {
    shs_dtype_t rd = s->cfg.reduce_dtype, gd = grad_dtype(s);
    shs_comm_t *comm = tagged(s, s->comm, SHS_TAG_GRAD_ALL_REDUCE, s->bucket_unit);
    if (rd == gd) return shs_all_reduce(p, p, n, gd, SHS_AVG, comm);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, n * shs_dtype_size(rd), SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, p, gd, n);
    shs_status_t st = shs_all_reduce(tmp, tmp, n, rd, SHS_AVG, comm);
    if (st == SHS_OK) shs_cast(s->dev, p, gd, tmp, rd, n);
    shs_device_free(s->dev, tmp);
    return st;
}

/* AVG reduce-scatter of a unit's full gradient (full_len, grad_dtype) into
 * `out` (S, grad_dtype; may be inside `full` at the shard's offset: in place)
 * over the shard group, then for hybrid sharding an AVG all-reduce of the
 * shard across the replicas (PyTorch HSDP's order); carried in reduce_dtype
 * as all_reduce_grads. */
static shs_status_t reduce_scatter_grads(shs_strategy_t *s, unit_state_t *u, void *full, void *out) {
    shs_dtype_t rd = s->cfg.reduce_dtype, gd = grad_dtype(s);
    size_t S = u->shard.size;
    int unit = unit_index(s, u);
    shs_comm_t *shard_comm = tagged(s, s->shard_comm, SHS_TAG_REDUCE_SCATTER, unit);
    /* replica_comm exists for SHS_GRAD_REDUCE_SCATTER_REPLICAS with more than one replica */
    shs_comm_t *replica_comm = s->replica_comm ? tagged(s, s->replica_comm, SHS_TAG_REPLICA_ALL_REDUCE, unit) : NULL;
    if (rd == gd) {
        SHS_CHECK(shs_reduce_scatter(full, out, S, gd, SHS_AVG, shard_comm));
        return replica_comm ? shs_all_reduce(out, out, S, gd, SHS_AVG, replica_comm) : SHS_OK;
    }
    size_t es = shs_dtype_size(rd);
    void *tmp;
    SHS_CHECK(shs_device_alloc(s->dev, &tmp, (u->full_len ? u->full_len : 1) * es, SHS_MEM_COMM, "reduce buffer"));
    shs_cast(s->dev, tmp, rd, full, gd, u->full_len);
    char *mine = (char *)tmp + u->shard.offset * es;
    shs_status_t st = shs_reduce_scatter(tmp, mine, S, rd, SHS_AVG, shard_comm);
    if (st == SHS_OK && replica_comm) st = shs_all_reduce(mine, mine, S, rd, SHS_AVG, replica_comm);
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
