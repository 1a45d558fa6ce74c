/* meta_run.c - training steps on the meta backend for representative ranks
 * (meta_run.h): the trainer's step (train/step.h) on a meta device and a
 * meta communicator, a parameter source decorator in front of the strategy
 * that cuts the timeline at unit boundaries and counts the collectives of
 * each segment.
 * What it is not: the strategies or the model (their real code runs here
 * unchanged) or a time model (sim/cmd_compare.c).
 */
#include "shardsim/meta_run.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/comm_meta.h"
#include "shardsim/shard.h"
#include "train/step_segments.h"
#include "train/step.h"

/* ---- one representative rank ------------------------------------------------ */

typedef struct {
    shs_param_decorator_t base; /* first: the source given to the model */
    shs__rank_t run;
    const shs_layout_t *units; /* the strategy's layout (timeline labels) */
    const shs__wrap_map_t *w;  /* size-based wrapping's map, or NULL */
    const shs_strategy_config_t *strategy; /* its splits of the world (shs_strategy_split) */
    int world;
    /* timeline of the current step */
    int recording;
    shs__step_seg_list_t segs;
    shs_meta_call_t *calls;
    size_t ncalls, cap_calls;
    shs_meta_kernel_t *kern;
    size_t nkern, cap_kern;
    shs_status_t oom;        /* host allocation failure inside a callback */
} run_t;

static void seg_begin(run_t *r, shs_step_seg_kind_t kind, const char *label) {
    if (r->recording && shs__step_seg_open(&r->segs, r->run.dev, kind, -1, label, r->ncalls) != 0) {
        r->oom = SHS_HOST_OOM;
        r->recording = 0;
    }
}

/* A (strategy) unit's segment starts at the first parameter or gradient
 * acquire of any of its (model) units, in either pass. */
static void cut(shs_param_decorator_t *d, shs_param_call_t call, int unit) {
    run_t *r = (run_t *)d;
    if (!r->recording || (call != SHS_PARAM_CALL_ACQUIRE_PARAMS && call != SHS_PARAM_CALL_ACQUIRE_GRADS)) return;
    int p = r->w ? r->w->phys_of[unit] : unit;
    if (shs__step_seg_open_unit(&r->segs, r->run.dev, r->run.phase == SHS_PHASE_BACKWARD, p, r->units->units[p].name,
                           r->ncalls) != 0) {
        r->oom = SHS_HOST_OOM;
        r->recording = 0;
    }
}

static void on_phase(void *user, shs__step_phase_t ph) {
    run_t *r = user;
    if (ph == SHS__STEP_OPTIM) seg_begin(r, SHS_STEP_SEG_OPTIM, "optim");
    else if (ph == SHS__STEP_LOSS) seg_begin(r, SHS_STEP_SEG_LOSS, "loss");
    else if (ph == SHS__STEP_END && r->recording) {
        shs__step_seg_close(&r->segs, r->run.dev, r->ncalls);
        r->recording = 0;
    }
}

static void recorder(void *user, const shs_comm_t *comm, const shs_comm_call_info_t *info) {
    run_t *r = user;
    if (!r->recording || info->status != SHS_OK || info->op == SHS_OP_BARRIER || info->op == SHS_OP_SPLIT) return;
    if (r->ncalls == r->cap_calls) {
        size_t cap = r->cap_calls ? 2 * r->cap_calls : 256;
        shs_meta_call_t *p = realloc(r->calls, cap * sizeof *p);
        if (!p) {
            r->oom = SHS_HOST_OOM;
            r->recording = 0;
            return;
        }
        r->calls = p;
        r->cap_calls = cap;
    }
    int n = shs_comm_size(comm);
    uint64_t bytes = info->bytes;
    if (info->op == SHS_OP_ALL_GATHER || info->op == SHS_OP_REDUCE_SCATTER) bytes *= (uint64_t)n;
    int split = shs_comm_meta_split_index(comm), color, key;
    int group = split < 0 ? 0 : shs_strategy_split(r->strategy, r->world, split, 0, &color, &key);
    r->calls[r->ncalls++] = (shs_meta_call_t){.op = info->op, .bytes = bytes, .comm_size = n,
                                              .group = group, .segment = r->segs.n - 1,
                                              .ahead = info->marker && strchr(info->marker, '/') != NULL};
}

static int same_kernel(const shs_kernel_info_t *a, const shs_kernel_info_t *b) {
    if (a->cls != b->cls || strcmp(a->name, b->name) != 0) return 0;
    if (a->cls == SHS_KERNEL_ELEMENTWISE || a->cls == SHS_KERNEL_OPTIMIZER) return 1;
    return a->backward == b->backward && a->flash == b->flash && a->m == b->m && a->n == b->n && a->k == b->k;
}

/* The device's kernel recorder: the open segment's kernels, merged. */
static void on_kernel(void *user, const shs_kernel_info_t *k) {
    run_t *r = user;
    if (!r->recording || !r->segs.n) return;
    int seg = r->segs.n - 1;
    for (size_t i = r->nkern; i-- > 0 && r->kern[i].segment == seg;)
        if (same_kernel(&r->kern[i].info, k)) {
            r->kern[i].info.flops += k->flops;
            r->kern[i].info.bytes += k->bytes;
            r->kern[i].count++;
            return;
        }
    if (r->nkern == r->cap_kern) {
        size_t cap = r->cap_kern ? 2 * r->cap_kern : 256;
        shs_meta_kernel_t *p = realloc(r->kern, cap * sizeof *p);
        if (!p) {
            r->oom = SHS_HOST_OOM;
            r->recording = 0;
            return;
        }
        r->kern = p;
        r->cap_kern = cap;
    }
    r->kern[r->nkern++] = (shs_meta_kernel_t){.info = *k, .count = 1, .segment = seg};
}

/* The color every rank passes in the strategy's split number split_index. */
static int split_color(void *user, int split_index, int rank, int *key) {
    const run_t *r = user;
    int color;
    return shs_strategy_split(r->strategy, r->world, split_index, rank, &color, key) ? color : SHS_SPLIT_NOCOLOR;
}

static void add_stats(shs_comm_stats_t *acc, const shs_comm_stats_t *a, int sign) {
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        acc->calls[op] += (uint64_t)((int64_t)sign * (int64_t)a->calls[op]);
        acc->bytes[op] += (uint64_t)((int64_t)sign * (int64_t)a->bytes[op]);
        acc->bytes_sent[op] += (uint64_t)((int64_t)sign * (int64_t)a->bytes_sent[op]);
    }
}

/* The steps of train.c's ranks (shs__rank_setup, shs__rank_step) on a meta
 * device and communicator, with the timeline cut in front of the
 * strategy's source (and the wrap map behind it). */
static shs_status_t run_rank(const shs_meta_config_t *mc, const shs_layout_t *logical, const shs_layout_t *phys,
                             const shs__wrap_map_t *w, int rank, shs_meta_rank_result_t *res) {
    const shs_train_config_t *tc = &mc->train;
    int N = tc->world_size;
    run_t r = {.units = phys, .w = w, .strategy = &tc->strategy, .world = N};
    shs__wrap_source_t ws = {0};
    shs_device_t *dev = NULL;
    shs_comm_t *comm = NULL;
    shs_status_t st = SHS_OK;
    SHS_CHECK_GOTO(shs_device_create_meta(&dev, rank, tc->device_mem), st, done);
    if (mc->gpu_reserve_limit) shs_device_set_gpu_reserve_limit(dev, mc->gpu_reserve_limit);
    SHS_CHECK_GOTO(shs_comm_create_meta(&comm, N, rank, "world", split_color, &r), st, done);
    shs_comm_set_recorder(comm, recorder, &r);
    shs_device_set_kernel_recorder(dev, on_kernel, &r);
    SHS_CHECK_GOTO(shs__rank_setup(&r.run, tc, logical, phys, dev, comm), st, done);
    shs_param_source_t *src = r.run.src;
    if (w) SHS_CHECK_GOTO(shs__wrap_source(&ws, src, w, &r.run.phase, &src), st, done);
    r.run.src = shs_param_decorator_init(&r.base, src, cut);
    r.run.on_phase = on_phase;
    r.run.phase_user = &r;
    int steps = mc->steps > 0 ? mc->steps : 1;
    shs_comm_stats_t before;
    for (int step = 0; step < steps; step++) {
        if (step == steps - 1) {
            shs__rank_comm_stats(&r.run, &before);
            r.recording = 1;
            seg_begin(&r, SHS_STEP_SEG_SETUP, "step start");
        }
        float loss;
        SHS_CHECK_GOTO(shs__rank_step(&r.run, tc, NULL, step, &loss), st, done);
    }
    if (r.oom != SHS_OK) {
        st = shs_set_error(SHS_HOST_OOM, "cannot grow the meta timeline");
        goto done;
    }
    res->rank = rank;
    shs_device_mem_stats(dev, &res->mem);
    shs_device_gpu_mem_stats(dev, &res->gpu);
    shs__rank_comm_stats(&r.run, &res->comm);
    res->last_step_comm = res->comm;
    add_stats(&res->last_step_comm, &before, -1);
    shs_device_kernel_stats(dev, &res->kernels);
    shs_strategy_offload_stats(r.run.strategy, &res->h2d_bytes, &res->d2h_bytes, &res->host);
    res->master_bytes = shs_strategy_master_bytes(r.run.strategy);
    res->segments = r.segs.segs;
    res->num_segments = r.segs.n;
    res->calls = r.calls;
    res->num_calls = r.ncalls;
    res->kernel_log = r.kern;
    res->num_kernel_log = r.nkern;
    r.segs.segs = NULL;
    r.calls = NULL;
    r.kern = NULL;
done:
    shs__rank_teardown(&r.run);
    shs__wrap_source_free(&ws);
    shs_comm_destroy(comm);
    shs_device_destroy(dev);
    free(r.segs.segs);
    free(r.calls);
    free(r.kern);
    return st;
}

/* ---- public ------------------------------------------------------------------- */

shs_status_t shs_meta_run(const shs_meta_config_t *cfg, shs_meta_result_t *out) {
    memset(out, 0, sizeof *out);
    const shs_train_config_t *tc = &cfg->train;
    SHS_CHECK(shs__job_model_validate(tc));
    if (tc->world_size < 1 || tc->world_size > SHS_MAX_META_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "world size must be in 1..%d (got %d)", SHS_MAX_META_WORLD, tc->world_size);
    if (tc->micro_batch < 1 || (size_t)tc->micro_batch * (size_t)tc->model.context > INT_MAX)
        return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 with micro-batch x context < 2^31 (got %d)",
                             tc->micro_batch);
    if (tc->grad_accum < 0 || tc->grad_accum > 65536)
        return shs_set_error(SHS_INVALID_ARG, "gradient accumulation must be in 1..65536 (got %d)", tc->grad_accum);
    shs_layout_t logical, grouped;
    shs__wrap_map_t w;
    SHS_CHECK(shs__job_layouts(tc, &logical, &grouped, &w));
    const shs_layout_t *phys = w.num_physical ? &grouped : &logical;
    int N = tc->world_size;
    int shard_n = shs_strategy_is_hybrid(tc->strategy.kind) && tc->strategy.shard_group_size
                      ? tc->strategy.shard_group_size : N;
    size_t align = tc->strategy.shard_align ? tc->strategy.shard_align : 1;
    out->num_params = phys->num_params;
    out->num_units = phys->num_units;
    out->world_size = N;
    for (int u = 0; u < phys->num_units; u++) {
        int whole = tc->strategy.kind == SHS_DDP || phys->units[u].replicated;
        out->padded_params += whole ? phys->units[u].numel : shs_padded_numel(phys->units[u].numel, shard_n, align);
    }
    shs_status_t st = SHS_OK;
    out->num_ranks = N > 1 ? 2 : 1;
    for (int k = 0; k < out->num_ranks && st == SHS_OK; k++)
        st = run_rank(cfg, &logical, phys, w.num_physical ? &w : NULL, k == 0 ? 0 : N - 1, &out->ranks[k]);
    if (st != SHS_OK) shs_meta_result_free(out);
    shs__wrap_free(&w);
    shs_layout_free(&grouped);
    shs_layout_free(&logical);
    return st;
}

void shs_meta_result_free(shs_meta_result_t *r) {
    for (int k = 0; k < 2; k++) {
        free(r->ranks[k].segments);
        free(r->ranks[k].calls);
        free(r->ranks[k].kernel_log);
        r->ranks[k].segments = NULL;
        r->ranks[k].calls = NULL;
        r->ranks[k].kernel_log = NULL;
    }
}

const shs_meta_rank_result_t *shs_meta_worst_rank(const shs_meta_result_t *r) {
    const shs_meta_rank_result_t *w = &r->ranks[0];
    for (int k = 1; k < r->num_ranks; k++)
        if (r->ranks[k].gpu.alloc.total_peak > w->gpu.alloc.total_peak) w = &r->ranks[k];
    return w;
}
