/* meta_run.c - training steps on the meta backend for representative ranks
 * (meta_run.h): the trainer's step (train.c's step_job) on a meta device and
 * a meta communicator, a parameter source in front of the strategy that cuts
 * the timeline at unit boundaries and, for size-based wrapping, maps the
 * model's blocks onto grouped flat parameters.
 * What it is not: the strategies or the model (their real code runs here
 * unchanged) or a time model (sim/cmd_compare.c).
 */
#include "shardsim/meta_run.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/gpt.h"
#include "shardsim/comm_meta.h"
#include "shardsim/model_file.h"
#include "shardsim/shard.h"
#include "train/step_segments.h"

/* ---- wrap groups ----------------------------------------------------------- */

/* How the model's units (logical: embed, block0..L-1, lnf) map onto the
 * strategy's flat parameters (physical). */
typedef struct {
    int num_logical, num_physical;
    int *phys_of;            /* logical -> physical */
    size_t *offset_of;       /* logical -> first element inside its physical unit */
    int *first, *last;       /* physical -> lowest and highest logical member */
} wrap_map_t;

static void wrap_map_free(wrap_map_t *w) {
    free(w->phys_of);
    free(w->offset_of);
    free(w->first);
    free(w->last);
    memset(w, 0, sizeof *w);
}

/* Build the physical layout `phys` from the logical `lo`: identical when
 * min_params is 0 (or for a non-GPT); else GPT blocks (logical 1..L) grouped
 * greedily until a group holds >= min_params elements. */
static shs_status_t build_wrap(const shs_layout_t *lo, int is_gpt, size_t min_params, shs_layout_t *phys,
                               wrap_map_t *w) {
    int n = lo->num_units;
    memset(w, 0, sizeof *w);
    w->num_logical = n;
    w->phys_of = calloc((size_t)n, sizeof(int));
    w->offset_of = calloc((size_t)n, sizeof(size_t));
    w->first = calloc((size_t)n, sizeof(int));
    w->last = calloc((size_t)n, sizeof(int));
    if (!w->phys_of || !w->offset_of || !w->first || !w->last) {
        wrap_map_free(w);
        return shs_set_error(SHS_HOST_OOM, "cannot allocate wrap map");
    }
    shs_layout_init(phys);
    shs_status_t st = SHS_OK;
    int p = -1;
    size_t in_group = 0;
    for (int l = 0; l < n; l++) {
        const shs_unit_info_t *u = &lo->units[l];
        int groupable = is_gpt && min_params > 0 && l >= 1 && l <= n - 2;
        int prev_groupable = l - 1 >= 1 && l - 1 <= n - 2 && is_gpt && min_params > 0;
        int start = !(groupable && prev_groupable && in_group < min_params);
        if (start) {
            p++;
            in_group = 0;
            SHS_CHECK_GOTO(shs_layout_add_unit(phys, u->name), st, fail);
            w->first[p] = l;
        } else {
            snprintf(phys->units[p].name, sizeof phys->units[p].name, "blocks %d-%d", w->first[p] - 1, l - 1);
        }
        w->last[p] = l;
        w->phys_of[l] = p;
        w->offset_of[l] = phys->units[p].numel;
        for (int t = u->first_tensor; t < u->first_tensor + u->num_tensors; t++) {
            const shs_tensor_info_t *ti = &lo->tensors[t];
            SHS_CHECK_GOTO(shs_layout_add_tensor(phys, ti->name, ti->rows, ti->cols, ti->init, ti->std), st, fail);
        }
        phys->units[p].replicated = phys->units[p].replicated || u->replicated;
        in_group += u->numel;
    }
    w->num_physical = p + 1;
    return SHS_OK;
fail:
    shs_layout_free(phys);
    wrap_map_free(w);
    return st;
}

/* ---- one representative rank ------------------------------------------------ */

typedef struct {
    shs_device_t *dev;
    shs_comm_t *comm;
    const shs_layout_t *phys;
    /* timeline of the current step */
    int recording;
    shs__step_seg_list_t segs;
    shs_meta_call_t *calls;
    size_t ncalls, cap_calls;
    shs_status_t oom;        /* host allocation failure inside a callback */
} run_t;

typedef struct {
    run_t *run;
    shs_param_source_t *inner;
    const wrap_map_t *w;
    shs_phase_t phase;
    const float **held_params; /* physical */
    float **held_grads;
    shs_param_source_t pub;
} wrap_src_t;

static void seg_close(run_t *r) { shs__step_seg_close(&r->segs, r->dev, r->ncalls); }

static void seg_begin(run_t *r, shs_step_seg_kind_t kind, int unit, const char *label) {
    if (!r->recording) return;
    if (shs__step_seg_open(&r->segs, r->dev, kind, unit, label, r->ncalls) != 0) {
        r->oom = SHS_HOST_OOM;
        r->recording = 0;
    }
}

static void unit_seg(wrap_src_t *ws, int logical) {
    int p = ws->w->phys_of[logical];
    char label[48];
    int bwd = ws->phase == SHS_PHASE_BACKWARD;
    snprintf(label, sizeof label, "%s %s", bwd ? "bwd" : "fwd", ws->run->phys->units[p].name);
    seg_begin(ws->run, bwd ? SHS_STEP_SEG_BACKWARD : SHS_STEP_SEG_FORWARD, p, label);
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
    r->calls[r->ncalls++] = (shs_meta_call_t){.op = info->op, .bytes = bytes, .comm_size = n,
                                              .group = 1 + shs_comm_meta_split_index(comm),
                                              .segment = r->segs.n - 1};
}

/* Parameter source in front of the strategy's: timeline boundaries, and
 * for grouped blocks one physical acquire per pass (the first member in
 * the pass's order acquires, the last releases; in backward the lowest
 * member's grads_ready completes the group). Single-member units pass
 * straight through. */
static int multi(const wrap_src_t *ws, int p) { return ws->w->first[p] != ws->w->last[p]; }
static int first_in_pass(const wrap_src_t *ws, int p, int l) {
    return ws->phase == SHS_PHASE_BACKWARD ? l == ws->w->last[p] : l == ws->w->first[p];
}
static int last_in_pass(const wrap_src_t *ws, int p, int l) {
    return ws->phase == SHS_PHASE_BACKWARD ? l == ws->w->first[p] : l == ws->w->last[p];
}

static shs_status_t ws_acquire_params(void *self, int l, const float **params) {
    wrap_src_t *ws = self;
    int p = ws->w->phys_of[l];
    unit_seg(ws, l);
    if (!multi(ws, p) || first_in_pass(ws, p, l)) SHS_CHECK(ws->inner->acquire_params(ws->inner->self, p, &ws->held_params[p]));
    *params = ws->held_params[p] + ws->w->offset_of[l];
    return SHS_OK;
}
static shs_status_t ws_release_params(void *self, int l) {
    wrap_src_t *ws = self;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || last_in_pass(ws, p, l)) return ws->inner->release_params(ws->inner->self, p);
    return SHS_OK;
}
static shs_status_t ws_acquire_grads(void *self, int l, float **grads) {
    wrap_src_t *ws = self;
    int p = ws->w->phys_of[l];
    unit_seg(ws, l);
    if (!multi(ws, p) || first_in_pass(ws, p, l)) SHS_CHECK(ws->inner->acquire_grads(ws->inner->self, p, &ws->held_grads[p]));
    *grads = ws->held_grads[p] + ws->w->offset_of[l];
    return SHS_OK;
}
static shs_status_t ws_grads_ready(void *self, int l) {
    wrap_src_t *ws = self;
    int p = ws->w->phys_of[l];
    if (!multi(ws, p) || last_in_pass(ws, p, l)) return ws->inner->grads_ready(ws->inner->self, p);
    return SHS_OK;
}

/* Hybrid sharding's two splits (strategy.c): shard groups of G consecutive
 * ranks (color rank / G), then replica groups (color rank mod G); key rank. */
static int hybrid_color(void *user, int split_index, int rank, int *key) {
    int G = *(const int *)user;
    *key = rank;
    return split_index == 0 ? rank / G : rank % G;
}

static void add_stats(shs_comm_stats_t *acc, const shs_comm_stats_t *a, int sign) {
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        acc->calls[op] += (uint64_t)((int64_t)sign * (int64_t)a->calls[op]);
        acc->bytes[op] += (uint64_t)((int64_t)sign * (int64_t)a->bytes[op]);
        acc->bytes_sent[op] += (uint64_t)((int64_t)sign * (int64_t)a->bytes_sent[op]);
    }
}

static void all_comm_stats(shs_comm_t *world, shs_strategy_t *s, shs_comm_stats_t *out) {
    shs_comm_get_stats(world, out);
    shs_strategy_add_comm_stats(s, out);
}

static shs_status_t run_rank(const shs_meta_config_t *mc, const shs_layout_t *logical, const shs_layout_t *phys,
                             const wrap_map_t *w, int rank, shs_meta_rank_result_t *res) {
    const shs_train_config_t *tc = &mc->train;
    int N = tc->world_size, G = tc->shard_group_size ? tc->shard_group_size : N;
    int hybrid = tc->strategy == SHS_HYBRID_SHARD || tc->strategy == SHS_HYBRID_SHARD_ZERO2;
    run_t r = {0};
    r.phys = phys;
    shs_model_t *model = NULL;
    shs_strategy_t *strat = NULL;
    float *loss_dev = NULL;
    int32_t *tokens = NULL;
    const float **held_params = calloc((size_t)phys->num_units, sizeof *held_params);
    float **held_grads = calloc((size_t)phys->num_units, sizeof *held_grads);
    size_t bt = (size_t)tc->micro_batch * (size_t)tc->model.context;
    tokens = calloc(bt ? bt : 1, sizeof(int32_t)); /* token 0 everywhere: values do not matter here */
    shs_status_t st = SHS_OK;
    if (!held_params || !held_grads || !tokens) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate meta run state");
        goto done;
    }
    SHS_CHECK_GOTO(shs_device_create_meta(&r.dev, rank, tc->device_mem), st, done);
    SHS_CHECK_GOTO(shs_comm_create_meta(&r.comm, N, rank, "world", hybrid ? hybrid_color : NULL, &G), st, done);
    shs_comm_set_recorder(r.comm, recorder, &r);
    /* as train.c's setup_job: activations first, then the strategy, then the loss scalar */
    shs_strategy_config_t scfg = {.kind = tc->strategy, .bucket_bytes = tc->bucket_bytes, .optim = tc->optim,
                                  .seed = tc->seed, .shard_align = tc->shard_align,
                                  .shard_group_size = tc->shard_group_size,
                                  .keep_after_forward = tc->keep_after_forward,
                                  .backward_prefetch = tc->backward_prefetch,
                                  .forward_prefetch = tc->forward_prefetch,
                                  .limit_all_gathers = tc->limit_all_gathers, .offload = tc->offload,
                                  .clip_norm = tc->clip_norm, .norm_type = tc->norm_type,
                                  .param_dtype = tc->param_dtype, .reduce_dtype = tc->reduce_dtype,
                                  .scaler = tc->scaler};
    if (tc->model_file)
        SHS_CHECK_GOTO(shs_model_file_model_create(&model, tc->model_file, logical, r.dev, tc->micro_batch, tc->model.context),
                       st, done);
    else
        SHS_CHECK_GOTO(shs_gpt_create(&model, logical, &tc->model, r.dev, tc->micro_batch, tc->checkpoint_activations),
                       st, done);
    SHS_CHECK_GOTO(shs_strategy_create(&strat, &scfg, phys, r.dev, r.comm), st, done);
    SHS_CHECK_GOTO(shs_device_alloc(r.dev, (void **)&loss_dev, sizeof(float), SHS_MEM_OTHER, "loss"), st, done);

    wrap_src_t ws = {.run = &r, .inner = shs_strategy_source(strat), .w = w, .held_params = held_params,
                     .held_grads = held_grads};
    ws.pub = (shs_param_source_t){&ws, ws_acquire_params, ws_release_params, ws_acquire_grads, ws_grads_ready};
    int K = tc->grad_accum > 1 ? tc->grad_accum : 1, steps = mc->steps > 0 ? mc->steps : 1;
    shs_comm_stats_t before;
    for (int step = 0; step < steps; step++) {
        int last = step == steps - 1;
        if (last) {
            all_comm_stats(r.comm, strat, &before);
            r.recording = 1;
            seg_begin(&r, SHS_STEP_SEG_SETUP, -1, "step start");
        }
        float local_loss = 0.0f, loss;
        shs_strategy_set_step(strat, step + 1);
        SHS_CHECK_GOTO(shs_strategy_begin_step(strat), st, done);
        float scale = shs_strategy_loss_scale(strat).scale;
        for (int k = 0; k < K; k++) {
            float micro_loss;
            ws.phase = SHS_PHASE_FORWARD;
            shs_strategy_set_phase(strat, SHS_PHASE_FORWARD);
            SHS_CHECK_GOTO(shs_model_forward(model, &ws.pub, tokens, tokens, &micro_loss), st, done);
            shs_strategy_set_sync(strat, k == K - 1);
            ws.phase = SHS_PHASE_BACKWARD;
            shs_strategy_set_phase(strat, SHS_PHASE_BACKWARD);
            SHS_CHECK_GOTO(shs_model_backward(model, &ws.pub, scale / (float)K), st, done);
            local_loss += micro_loss;
        }
        local_loss /= (float)K;
        seg_begin(&r, SHS_STEP_SEG_OPTIM, -1, "optim");
        SHS_CHECK_GOTO(shs_strategy_finish_step(strat, step + 1), st, done);
        seg_begin(&r, SHS_STEP_SEG_LOSS, -1, "loss");
        SHS_CHECK_GOTO(shs_memcpy_h2d(r.dev, loss_dev, &local_loss, sizeof local_loss), st, done);
        shs_comm_set_tag(r.comm, shs_comm_tag_pack(SHS_TAG_LOSS_ALL_REDUCE, -1, 0, step + 1));
        SHS_CHECK_GOTO(shs_all_reduce(loss_dev, loss_dev, 1, SHS_F32, SHS_AVG, r.comm), st, done);
        SHS_CHECK_GOTO(shs_memcpy_d2h(r.dev, &loss, loss_dev, sizeof loss), st, done);
        if (last) {
            seg_close(&r);
            r.recording = 0;
        }
    }
    if (r.oom != SHS_OK) {
        st = shs_set_error(SHS_HOST_OOM, "cannot grow the meta timeline");
        goto done;
    }
    res->rank = rank;
    shs_device_mem_stats(r.dev, &res->mem);
    all_comm_stats(r.comm, strat, &res->comm);
    res->last_step_comm = res->comm;
    add_stats(&res->last_step_comm, &before, -1);
    shs_device_kernel_stats(r.dev, &res->kernels);
    shs_strategy_offload_stats(strat, &res->h2d_bytes, &res->d2h_bytes, &res->host);
    res->segments = r.segs.segs;
    res->num_segments = r.segs.n;
    res->calls = r.calls;
    res->num_calls = r.ncalls;
    r.segs.segs = NULL;
    r.calls = NULL;
done:
    shs_model_destroy(model);
    shs_strategy_destroy(strat);
    if (r.dev) shs_device_free(r.dev, loss_dev);
    shs_comm_destroy(r.comm);
    shs_device_destroy(r.dev);
    free(r.segs.segs);
    free(r.calls);
    free(held_params);
    free(held_grads);
    free(tokens);
    return st;
}

/* ---- public ------------------------------------------------------------------- */

shs_status_t shs_meta_run(const shs_meta_config_t *cfg, shs_meta_result_t *out) {
    memset(out, 0, sizeof *out);
    const shs_train_config_t *tc = &cfg->train;
    if (!tc->model_file) SHS_CHECK(shs_gpt_config_validate(&tc->model));
    else if (tc->model.context < 1 || tc->model.context > 65536)
        return shs_set_error(SHS_INVALID_ARG, "context must be in 1..65536 (got %d)", tc->model.context);
    if (tc->world_size < 1 || tc->world_size > SHS_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "world size must be in 1..%d (got %d)", SHS_MAX_WORLD, tc->world_size);
    if (tc->micro_batch < 1 || (size_t)tc->micro_batch * (size_t)tc->model.context > INT_MAX)
        return shs_set_error(SHS_INVALID_ARG, "micro-batch must be >= 1 with micro-batch x context < 2^31 (got %d)",
                             tc->micro_batch);
    if (tc->grad_accum < 0 || tc->grad_accum > 65536)
        return shs_set_error(SHS_INVALID_ARG, "gradient accumulation must be in 1..65536 (got %d)", tc->grad_accum);
    if (cfg->wrap_min_params && tc->model_file)
        return shs_set_error(SHS_INVALID_ARG, "size-based wrapping applies to the GPT only");
    shs_layout_t logical, phys;
    SHS_CHECK(tc->model_file ? shs_model_file_layout_create(&logical, tc->model_file) : shs_gpt_layout_create(&logical, &tc->model));
    if (tc->strategy != SHS_DDP)
        for (int u = 0; u < logical.num_units; u++)
            if (logical.units[u].numel < tc->replicate_below) logical.units[u].replicated = 1;
    wrap_map_t w;
    shs_status_t st = build_wrap(&logical, !tc->model_file, cfg->wrap_min_params, &phys, &w);
    if (st != SHS_OK) {
        shs_layout_free(&logical);
        return st;
    }
    int N = tc->world_size;
    int hybrid = tc->strategy == SHS_HYBRID_SHARD || tc->strategy == SHS_HYBRID_SHARD_ZERO2;
    int shard_n = hybrid && tc->shard_group_size ? tc->shard_group_size : N;
    size_t align = tc->shard_align ? tc->shard_align : 1;
    out->num_params = phys.num_params;
    out->num_units = phys.num_units;
    out->world_size = N;
    for (int u = 0; u < phys.num_units; u++) {
        int whole = tc->strategy == SHS_DDP || phys.units[u].replicated;
        out->padded_params += whole ? phys.units[u].numel : shs_padded_numel(phys.units[u].numel, shard_n, align);
    }
    out->num_ranks = N > 1 ? 2 : 1;
    for (int k = 0; k < out->num_ranks && st == SHS_OK; k++)
        st = run_rank(cfg, &logical, &phys, &w, k == 0 ? 0 : N - 1, &out->ranks[k]);
    if (st != SHS_OK) shs_meta_result_free(out);
    wrap_map_free(&w);
    shs_layout_free(&phys);
    shs_layout_free(&logical);
    return st;
}

void shs_meta_result_free(shs_meta_result_t *r) {
    for (int k = 0; k < 2; k++) {
        free(r->ranks[k].segments);
        free(r->ranks[k].calls);
        r->ranks[k].segments = NULL;
        r->ranks[k].calls = NULL;
    }
}

const shs_meta_rank_result_t *shs_meta_worst_rank(const shs_meta_result_t *r) {
    const shs_meta_rank_result_t *w = &r->ranks[0];
    for (int k = 1; k < r->num_ranks; k++)
        if (r->ranks[k].mem.total_peak > w->mem.total_peak) w = &r->ranks[k];
    return w;
}
