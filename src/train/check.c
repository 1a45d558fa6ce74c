/* check.c - the --check ddp verdict (see check.h): the reference DDP run, the
 * snapshot comparison (merged over processes under a multi-process world),
 * the replica check and, for the inexact-by-design modes, the drift.
 * What it is not: the trainer (train.c) or the snapshot itself (train.c). */
#include "shardsim/check.h"

#include "shardsim/shard.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct shs_checker {
    shs_trainer_t *ref;
    const char *inexact;  /* shs_check_inexact_reason of the run under test; NULL: exact */
    shs_comm_t *merge;    /* multi-process: merges snapshots and verdicts; NULL on threads */
    shs_check_drift_t worst;
    size_t len;           /* floats per snapshot */
    float *snap_run, *snap_ref;
};

const char *shs_check_inexact_reason(const shs_train_config_t *cfg) {
    if (cfg->reduce_order == SHS_REDUCE_ORDER_RING) return "reduce order ring";
    int G = cfg->strategy.shard_group_size ? cfg->strategy.shard_group_size : cfg->world_size;
    int hybrid = cfg->strategy.kind == SHS_HYBRID_SHARD || cfg->strategy.kind == SHS_HYBRID_SHARD_ZERO2;
    if (hybrid && G > 1 && G < cfg->world_size) return "hybrid sharding (a sum of group sums)";
    return NULL;
}

shs_status_t shs_checker_create(shs_checker_t **out, const shs_train_config_t *cfg, const shs_corpus_t *corpus,
                                shs_comm_t *ref_comm, shs_comm_t *merge_comm) {
    *out = NULL;
    shs_checker_t *ck = calloc(1, sizeof *ck);
    if (!ck) return shs_set_error(SHS_HOST_OOM, "reference DDP run: out of host memory");
    shs_train_config_t ref = *cfg;
    ref.strategy.kind = SHS_DDP;
    ref.strategy.offload = SHS_OFFLOAD_NONE;     /* offloading must not change a bit: compare with plain DDP */
    ref.checkpoint_activations = 0;     /* the reference keeps every activation */
    ref.recompute = SHS_RECOMPUTE_NONE;
    ref.comm = ref_comm;
    ref.trace = NULL;                   /* a trace records the run under test */
    shs_status_t st = shs_trainer_create(&ck->ref, &ref, corpus);
    if (st != SHS_OK) {
        free(ck);
        return shs_set_error(st, "reference DDP run: %s", shs_last_error());
    }
    ck->inexact = shs_check_inexact_reason(cfg);
    ck->merge = merge_comm;
    ck->len = shs_trainer_snapshot_len(ck->ref);
    ck->snap_run = malloc(ck->len * sizeof(float));
    ck->snap_ref = malloc(ck->len * sizeof(float));
    if (!ck->snap_run || !ck->snap_ref) {
        size_t len = ck->len;
        shs_checker_destroy(ck);
        return shs_set_error(SHS_HOST_OOM, "out of host memory for --check snapshots (%zu floats each)", len);
    }
    *out = ck;
    return SHS_OK;
}

void shs_checker_destroy(shs_checker_t *ck) {
    if (!ck) return;
    shs_trainer_destroy(ck->ref);
    free(ck->snap_run);
    free(ck->snap_ref);
    free(ck);
}

shs_trainer_t *shs_checker_reference(shs_checker_t *ck) { return ck->ref; }

const char *shs_checker_inexact_reason(const shs_checker_t *ck) { return ck->inexact; }

static uint32_t bits_of(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

/* How far snapshot a (the run) is from b (DDP) over the real elements
 * (padding skipped); loss left 0. */
static shs_check_drift_t param_drift(const shs_layout_t *lo, int nranks, size_t align, const float *a, const float *b) {
    shs_check_drift_t d = {0, 0, 0};
    size_t base = 0;
    for (int u = 0; u < lo->num_units; u++) {
        size_t numel = lo->units[u].numel;
        for (size_t i = 0; i < numel; i++) {
            double x = a[base + i], y = b[base + i], ad = fabs(x - y), m = fmax(fabs(x), fabs(y));
            if (isnan(ad)) ad = INFINITY;
            double rel = ad == 0 ? 0 : m > 0 && isfinite(m) ? ad / m : INFINITY;
            if (ad > d.max_abs) d.max_abs = ad;
            if (rel > d.max_rel) d.max_rel = rel;
        }
        base += shs_padded_numel(numel, nranks, align ? align : 1);
    }
    return d;
}

/* Multi-process: every process has its own rank's replica verdict; all agree
 * on the lowest rank whose replica differs and where (MIN, then a broadcast). */
static shs_status_t agree_replicas(shs_comm_t *merge, int *ok, shs_replica_diff_t *rd) {
    int64_t bad = *ok ? INT64_MAX : (int64_t)rd->rank;
    SHS_CHECK(shs_all_reduce(&bad, &bad, 1, SHS_I64, SHS_MIN, merge));
    if (bad == INT64_MAX) {
        *ok = 1;
        return SHS_OK;
    }
    int64_t where[2] = {rd->unit, (int64_t)rd->index};
    SHS_CHECK(shs_broadcast(where, where, 2, SHS_I64, (int)bad, merge));
    *ok = 0;
    *rd = (shs_replica_diff_t){.rank = (int)bad, .unit = (int)where[0], .index = (size_t)where[1]};
    return SHS_OK;
}

/* Both runs' snapshots; under a multi-process world each process fills its
 * ranks' shards and the others hold zero bits, so an integer sum over the
 * processes assembles every snapshot exactly. */
static shs_status_t gather_snapshots(shs_checker_t *ck, shs_trainer_t *run) {
    if (shs_trainer_snapshot_len(run) != ck->len)
        return shs_set_error(SHS_INVALID_ARG, "snapshot: the run has %zu parameter elements, the reference %zu",
                             shs_trainer_snapshot_len(run), ck->len);
    shs_status_t st;
    if ((st = shs_trainer_snapshot(run, ck->snap_run)) != SHS_OK || (st = shs_trainer_snapshot(ck->ref, ck->snap_ref)) != SHS_OK ||
        (ck->merge && ((st = shs_all_reduce(ck->snap_run, ck->snap_run, ck->len, SHS_I32, SHS_SUM, ck->merge)) != SHS_OK ||
                       (st = shs_all_reduce(ck->snap_ref, ck->snap_ref, ck->len, SHS_I32, SHS_SUM, ck->merge)) != SHS_OK)))
        return shs_set_error(st, "snapshot: %s", shs_last_error());
    return SHS_OK;
}

static shs_status_t params_differ(const shs_layout_t *lo, long step, const char *name, const shs_param_diff_t *d) {
    if (d->tensor < 0)
        return shs_set_error(SHS_NOT_EQUAL, "step %ld: first difference in unit %s, padding element %zu (must stay 0): "
                             "%.9g (%s) != %.9g (ddp) (bits 0x%08x, 0x%08x)", step, lo->units[d->unit].name, d->index,
                             (double)d->a, name, (double)d->b, (unsigned)bits_of(d->a), (unsigned)bits_of(d->b));
    const shs_tensor_info_t *ti = &lo->tensors[d->tensor];
    return shs_set_error(SHS_NOT_EQUAL, "step %ld: first difference in unit %s, tensor %s, element %zu (row %zu, col %zu): "
                         "%.9g (%s) != %.9g (ddp) (bits 0x%08x, 0x%08x)", step, lo->units[d->unit].name, ti->name,
                         d->index, d->index / (size_t)ti->cols, d->index % (size_t)ti->cols, (double)d->a, name,
                         (double)d->b, (unsigned)bits_of(d->a), (unsigned)bits_of(d->b));
}

shs_status_t shs_checker_step(shs_checker_t *ck, shs_trainer_t *run, float loss, shs_check_step_t *out) {
    memset(out, 0, sizeof *out);
    out->worst = ck->worst;
    shs_status_t st = shs_trainer_step(ck->ref, &out->ref_loss);
    if (st != SHS_OK) return shs_set_error(st, "reference DDP run: %s", shs_last_error());
    SHS_CHECK(gather_snapshots(ck, run));
    const shs_train_config_t *cfg = shs_trainer_config(run);
    const shs_layout_t *lo = shs_trainer_layout(run);
    const char *name = shs_strategy_name(cfg->strategy.kind);
    long step = shs_trainer_steps_done(run);
    float norm = shs_trainer_last_grad_norm(run), ref_norm = shs_trainer_last_grad_norm(ck->ref);
    if (!ck->inexact && bits_of(norm) != bits_of(ref_norm)) {
        out->differs = SHS_CHECK_GRAD_NORM;
        return shs_set_error(SHS_NOT_EQUAL, "step %ld: gradient norm differs: %s %.9g, ddp %.9g (bits 0x%08x, 0x%08x)",
                             step, name, (double)norm, (double)ref_norm, (unsigned)bits_of(norm),
                             (unsigned)bits_of(ref_norm));
    }
    if (!ck->inexact && bits_of(loss) != bits_of(out->ref_loss)) {
        out->differs = SHS_CHECK_LOSS;
        return shs_set_error(SHS_NOT_EQUAL, "step %ld: loss %.9g (%s) != %.9g (ddp) (bits 0x%08x, 0x%08x)", step,
                             (double)loss, name, (double)out->ref_loss, (unsigned)bits_of(loss),
                             (unsigned)bits_of(out->ref_loss));
    }
    shs_param_diff_t diff;
    if (!ck->inexact && !shs_compare_snapshots(lo, cfg->world_size, cfg->strategy.shard_align, ck->snap_run, ck->snap_ref, &diff)) {
        out->differs = SHS_CHECK_PARAMS;
        return params_differ(lo, step, name, &diff);
    }
    const char *which[2] = {name, "ddp"};
    shs_trainer_t *runs[2] = {run, ck->ref};
    float *snaps[2] = {ck->snap_run, ck->snap_ref};
    for (int k = 0; k < 2; k++) {
        shs_replica_diff_t rd;
        int ok = shs_trainer_check_replicas(runs[k], snaps[k], &rd);
        if (ok < 0) return shs_set_error(SHS_SYSTEM, "replica check: %s", shs_last_error());
        if (ck->merge && (st = agree_replicas(ck->merge, &ok, &rd)) != SHS_OK)
            return shs_set_error(st, "replica check: %s", shs_last_error());
        if (!ok) {
            out->differs = SHS_CHECK_REPLICAS;
            int ti = shs_layout_tensor_at(lo, rd.unit, rd.index);
            return shs_set_error(SHS_NOT_EQUAL, "step %ld: in the %s run, rank %d's copy of unit %s, tensor %s, element "
                                 "%zu differs from the shard owner's", step, which[k], rd.rank, lo->units[rd.unit].name,
                                 lo->tensors[ti].name, rd.index - lo->tensors[ti].offset);
        }
    }
    if (ck->inexact) {
        out->drift = param_drift(lo, cfg->world_size, cfg->strategy.shard_align, ck->snap_run, ck->snap_ref);
        out->drift.loss = (double)loss - (double)out->ref_loss;
        ck->worst.loss = fmax(ck->worst.loss, fabs(out->drift.loss));
        ck->worst.max_abs = fmax(ck->worst.max_abs, out->drift.max_abs);
        ck->worst.max_rel = fmax(ck->worst.max_rel, out->drift.max_rel);
        out->worst = ck->worst;
    }
    return SHS_OK;
}
