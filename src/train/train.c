/* train.c - the data-parallel training loop over a world of rank threads. */
#include "shardsim/train.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/shard.h"
#include "shardsim/memory_timeline.h"
#include "shardsim/trace_record.h"
#include "shardsim/world.h"
#include "strategy/strategy_testing.h" /* shs_strategy_flip_param_bit: the trainer's planted fault */
#include "train/step.h"

typedef struct {
    shs__rank_t run;                   /* model, strategy, the source the model is given */
    shs_trace_marking_source_t marking; /* with cfg.trace */
    shs__wrap_source_t wrap;           /* with cfg.wrap_min_params */
} rank_state_t;

struct shs_trainer {
    shs_train_config_t cfg;
    const shs_corpus_t *corpus;
    shs_documents_t docs;      /* with cfg.data_mode: the corpus's documents */
    shs_layout_t layout;       /* the strategy's: wrap units (shs_trainer_layout) */
    shs_layout_t model_layout; /* the model's when size-based wrapping groups blocks (wrap.num_physical) */
    shs__wrap_map_t wrap;      /* num_physical 0: no grouping, the model uses `layout` */
    shs_world_t *world;
    rank_state_t *ranks;
    shs_memory_timeline_t *timeline; /* --memory-timeline: rank 0's, else NULL */
    long step;             /* steps completed */
    int first_rank;        /* the first rank this process runs (0 unless cfg.comm) */
    float loss;            /* written by rank first_rank */
    float grad_norm;       /* written by rank first_rank */
    shs_loss_scale_state_t scaler_in; /* argument of the set-loss-scale job */
    long lr_steps_in;      /* argument of the set-lr-steps job */
    float *snapshot_out;   /* target of the snapshot job */
    const float *replica_ref;      /* the snapshot the replica job compares with */
    shs_replica_diff_t *replica_diffs; /* one per rank */
    int flip_unit, flip_rank; /* arguments of the bit-flip job */
    size_t flip_index;
};

shs_train_config_t shs_train_default_config(void) {
    shs_train_config_t c = {
        .model = {.num_layers = 4, .num_heads = 4, .channels = 128, .context = 64},
        .world_size = 4,
        .micro_batch = 4,
        .strategy = {.kind = SHS_ZERO3, .optim = shs_optim_default(SHS_OPTIM_ADAMW), .seed = 1337},
        .device_mem = SIZE_MAX,
    };
    return c;
}

shs_loss_norm_t shs_train_loss_norm(const shs_train_config_t *cfg) {
    if (cfg->loss_norm != SHS_LOSS_NORM_DEFAULT) return cfg->loss_norm;
    return cfg->data_mode != SHS_DATA_STREAM ? SHS_LOSS_NORM_GLOBAL_TOKENS : SHS_LOSS_NORM_PER_MICRO_BATCH;
}

/* ---- rank jobs ---------------------------------------------------------------- */

/* The memory timeline follows the step's phases. */
static void timeline_phase(void *user, shs__step_phase_t ph) {
    shs_memory_timeline_t *tl = user;
    switch (ph) {
    case SHS__STEP_FORWARD: shs_memory_timeline_set_backward(tl, 0); break;
    case SHS__STEP_BACKWARD: shs_memory_timeline_set_backward(tl, 1); break;
    case SHS__STEP_OPTIM: shs_memory_timeline_mark(tl, SHS_STEP_SEG_OPTIM, "optim"); break;
    case SHS__STEP_LOSS: shs_memory_timeline_mark(tl, SHS_STEP_SEG_LOSS, "loss"); break;
    case SHS__STEP_END: shs_memory_timeline_end_step(tl); break;
    }
}

static shs_status_t setup_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    rank_state_t *rs = &t->ranks[ctx->rank];
    if (t->cfg.trace) SHS_CHECK(shs_trace_recorder_attach(t->cfg.trace, ctx->comm, ctx->rank, NULL));
    const shs_layout_t *model_layout = t->wrap.num_physical ? &t->model_layout : &t->layout;
    rs->run.docs = t->cfg.data_mode != SHS_DATA_STREAM ? &t->docs : NULL;
    SHS_CHECK(shs__rank_setup(&rs->run, &t->cfg, model_layout, &t->layout, ctx->dev, ctx->comm));
    /* the decorators asked for, in front of the strategy's source (innermost
     * first); without any, the model calls the strategy directly */
    shs_param_source_t *src = rs->run.src;
    if (t->cfg.trace) /* names each unit's collectives "fwd/<unit>" in traces */
        src = shs_trace_marking_source(&rs->marking, src, ctx->comm, &t->layout);
    if (t->cfg.memory_timeline && ctx->rank == 0) {
        SHS_CHECK(shs_memory_timeline_create(&t->timeline, ctx->dev, &t->layout));
        src = shs_memory_timeline_source(t->timeline, src);
        rs->run.on_phase = timeline_phase;
        rs->run.phase_user = t->timeline;
    }
    if (t->wrap.num_physical) SHS_CHECK(shs__wrap_source(&rs->wrap, src, &t->wrap, &rs->run.phase, &src));
    rs->run.src = src;
    return SHS_OK;
}

static shs_status_t step_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    rank_state_t *rs = &t->ranks[ctx->rank];
    if (rs->run.on_phase) shs_memory_timeline_begin_step(t->timeline);
    float loss;
    SHS_CHECK(shs__rank_step(&rs->run, &t->cfg, t->corpus, t->step, &loss));
    if (ctx->rank == t->first_rank) {
        t->loss = loss;
        t->grad_norm = rs->run.grad_norm;
    }
    return SHS_OK;
}

/* Each rank of the first replica (every rank but under hybrid sharding)
 * writes its shard, padding included, at its offset in the unit. A hybrid
 * group's G-way padded buffer fits in the N-way one (G divides N); the rest
 * stays as zeroed by shs_trainer_snapshot. */
static shs_status_t snapshot_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    shs_strategy_t *s = t->ranks[ctx->rank].run.strategy;
    size_t base = 0;
    for (int u = 0; u < t->layout.num_units; u++) {
        shs_shard_t sh;
        int replica;
        shs_strategy_shard_info(s, u, &sh, &replica);
        if (replica == 0) SHS_CHECK(shs_strategy_read_shard(s, u, t->snapshot_out + base + sh.offset));
        base += shs_padded_numel(t->layout.units[u].numel, ctx->world_size, t->cfg.strategy.shard_align);
    }
    return SHS_OK;
}

static shs_status_t replica_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    shs_replica_diff_t *d = &t->replica_diffs[ctx->rank];
    d->rank = -1;
    size_t base = 0, max_numel = 0;
    for (int u = 0; u < t->layout.num_units; u++)
        if (shs_padded_numel(t->layout.units[u].numel, ctx->world_size, t->cfg.strategy.shard_align) > max_numel)
            max_numel = shs_padded_numel(t->layout.units[u].numel, ctx->world_size, t->cfg.strategy.shard_align);
    /* a full unit, or a shard: at most the N-way padded length (G divides N) */
    float *mine = malloc((max_numel ? max_numel : 1) * sizeof(float));
    if (!mine) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate replica buffer", ctx->rank);
    shs_status_t st = SHS_OK;
    for (int u = 0; u < t->layout.num_units && d->rank < 0; u++) {
        size_t numel = t->layout.units[u].numel;
        const float *ref = t->replica_ref + base;
        base += shs_padded_numel(numel, ctx->world_size, t->cfg.strategy.shard_align);
        shs_strategy_t *s = t->ranks[ctx->rank].run.strategy;
        size_t from = 0, n = numel;
        if (shs_strategy_holds_full(s, u)) {
            st = shs_strategy_read_full(s, u, mine);
        } else { /* a shard: compare its real elements (a replica's under hybrid sharding) */
            shs_shard_t sh;
            int replica;
            shs_strategy_shard_info(s, u, &sh, &replica);
            from = sh.offset;
            n = sh.valid;
            st = shs_strategy_read_shard(s, u, mine);
        }
        if (st != SHS_OK) break;
        if (memcmp(mine, ref + from, n * sizeof(float)) != 0) {
            size_t i = 0;
            while (memcmp(mine + i, ref + from + i, sizeof(float)) == 0) i++;
            *d = (shs_replica_diff_t){.rank = ctx->rank, .unit = u, .index = from + i};
        }
    }
    free(mine);
    return st;
}

/* The fault lands in one rank's memory: t->flip_rank's. */
static shs_status_t flip_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    if (ctx->rank != t->flip_rank) return SHS_OK;
    return shs_strategy_flip_param_bit(t->ranks[ctx->rank].run.strategy, t->flip_unit, t->flip_index);
}

static shs_status_t teardown_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    rank_state_t *rs = &t->ranks[ctx->rank];
    shs__rank_teardown(&rs->run);
    shs__wrap_source_free(&rs->wrap);
    memset(rs, 0, sizeof *rs);
    return SHS_OK;
}

/* ---- public ------------------------------------------------------------------- */

shs_status_t shs_trainer_create(shs_trainer_t **out, const shs_train_config_t *cfg, const shs_corpus_t *corpus) {
    *out = NULL;
    SHS_CHECK(shs__job_model_validate(cfg));
    int llama = !cfg->model_file && cfg->arch == SHS_ARCH_LLAMA;
    if (llama && cfg->llama.vocab < SHS_GPT_VOCAB)
        return shs_set_error(SHS_INVALID_ARG, "the Llama's vocab_size (%d) must be >= %d to train on byte tokens",
                             cfg->llama.vocab, SHS_GPT_VOCAB);
    if (cfg->grad_accum < 0 || cfg->grad_accum > 65536)
        return shs_set_error(SHS_INVALID_ARG, "gradient accumulation must be in 1..65536 (got %d)", cfg->grad_accum);
    const shs_strategy_config_t *sc = &cfg->strategy;
    if (sc->clip_norm > 0 && sc->norm_type != 0 && sc->norm_type != SHS_NORM_INF && sc->norm_type != 1 &&
        sc->norm_type != 2)
        return shs_set_error(SHS_INVALID_ARG, "norm type must be 1, 2 or inf (got %d)", sc->norm_type);
    if (cfg->world_size < 1 || cfg->world_size > SHS_MAX_WORLD)
        return shs_set_error(SHS_INVALID_ARG, "world size must be in 1..%d (got %d)", SHS_MAX_WORLD, cfg->world_size);
    if (cfg->micro_batch < 1 || cfg->micro_batch > 65536)
        return shs_set_error(SHS_INVALID_ARG, "micro-batch must be in 1..65536 (got %d)", cfg->micro_batch);
    if (cfg->data_mode != SHS_DATA_STREAM && cfg->data_mode != SHS_DATA_PACK && cfg->data_mode != SHS_DATA_PAD)
        return shs_set_error(SHS_INVALID_ARG, "data mode must be stream, pack or pad (got %d)", (int)cfg->data_mode);
    if (cfg->loss_norm < SHS_LOSS_NORM_DEFAULT || cfg->loss_norm > SHS_LOSS_NORM_GLOBAL_TOKENS)
        return shs_set_error(SHS_INVALID_ARG, "loss normalization must be per-micro-batch or global-tokens (got %d)",
                             (int)cfg->loss_norm);
    if (cfg->data_mode == SHS_DATA_PACK && (cfg->model_file || cfg->arch != SHS_ARCH_LLAMA))
        return shs_set_error(SHS_INVALID_ARG,
                             "--pack needs per-document attention masks and position ids restarting per document, "
                             "which only the Llama model has (the %s would attend across documents): use --pad",
                             cfg->model_file ? "model file's network" : "GPT");
    if (!corpus || (cfg->data_mode == SHS_DATA_STREAM && corpus->len < (size_t)cfg->model.context + 1))
        return shs_set_error(SHS_INVALID_ARG,
                             "context length %d needs at least %d bytes of text, but '%s' has %zu",
                             cfg->model.context, cfg->model.context + 1, corpus ? corpus->source : "?",
                             corpus ? corpus->len : (size_t)0);
    if (cfg->model_file && (cfg->recompute || cfg->checkpoint_activations || cfg->attention || cfg->autocast ||
                            cfg->dropout != 0.0f))
        return shs_set_error(SHS_INVALID_ARG, "recompute, attention, autocast and dropout apply to the GPT and the "
                             "Llama, not to a model file");
    shs_gpt_exec_t ex = {.recompute = cfg->recompute, .recompute_every = cfg->recompute_every,
                         .attention = cfg->attention, .autocast = cfg->autocast,
                         .dropout = cfg->dropout};
    if (shs_gpt_exec_validate(&ex) != SHS_OK) return SHS_INVALID_ARG;
    /* kernels index rows and (b, head, t) triples with int */
    size_t B = (size_t)cfg->micro_batch, T = (size_t)cfg->model.context, C = (size_t)cfg->model.channels;
    size_t widest = 4 * C > SHS_GPT_VOCAB ? 4 * C : SHS_GPT_VOCAB;
    size_t heads = (size_t)cfg->model.num_heads;
    if (llama) {
        size_t I = (size_t)cfg->llama.intermediate, V = (size_t)cfg->llama.vocab;
        size_t QD = (size_t)cfg->llama.num_heads * (size_t)shs_llama_head_dim(&cfg->llama);
        C = (size_t)cfg->llama.hidden;
        widest = I > V ? I : V;
        widest = C > widest ? C : widest;
        widest = QD > widest ? QD : widest;
        heads = (size_t)cfg->llama.num_heads;
    }
    if (!cfg->model_file && (B * T * widest > INT_MAX || B * heads * T * T > INT_MAX))
        return shs_set_error(SHS_INVALID_ARG,
                             "micro-batch %d x context %d is too large for this model (activation tensors of more "
                             "than 2^31 elements)", cfg->micro_batch, cfg->model.context);
    shs_trainer_t *t = calloc(1, sizeof *t);
    if (!t) return shs_set_error(SHS_HOST_OOM, "cannot allocate trainer");
    t->cfg = *cfg;
    if (!t->cfg.strategy.shard_align) t->cfg.strategy.shard_align = 1;
    t->corpus = corpus;
    shs_layout_t logical, grouped;
    shs_status_t st = SHS_OK;
    if (cfg->data_mode != SHS_DATA_STREAM)
        st = shs_documents_build(&t->docs, corpus, cfg->data_mode, cfg->doc_sep, cfg->model.context);
    if (st == SHS_OK) st = shs__job_layouts(cfg, &logical, &grouped, &t->wrap);
    if (st != SHS_OK) {
        shs_documents_free(&t->docs);
        free(t);
        return st;
    }
    if (t->wrap.num_physical) {
        t->model_layout = logical;
        t->layout = grouped;
    } else {
        t->layout = logical;
    }
    t->ranks = calloc((size_t)cfg->world_size, sizeof *t->ranks);
    if (!t->ranks) {
        st = shs_set_error(SHS_HOST_OOM, "cannot allocate trainer");
        goto fail;
    }
    shs_world_config_t wc = {.world_size = cfg->world_size, .device_mem = cfg->device_mem,
                             .timeout_ms = cfg->timeout_ms, .name = "world", .reduce_order = cfg->reduce_order,
                             .backend = cfg->backend, .gpu = cfg->gpu};
    if (cfg->comm) SHS_CHECK_GOTO(shs_world_create_local(&t->world, &wc, cfg->comm), st, fail);
    else SHS_CHECK_GOTO(shs_world_create(&t->world, &wc), st, fail);
    int local_count;
    shs_world_local_ranks(t->world, &t->first_rank, &local_count);
    SHS_CHECK_GOTO(shs_world_run(t->world, setup_job, t), st, fail);
    *out = t;
    return SHS_OK;
fail:
    shs_trainer_destroy(t);
    return st;
}

void shs_trainer_destroy(shs_trainer_t *t) {
    if (!t) return;
    if (t->world) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", shs_last_error()); /* teardown must not clobber the caller's error */
        shs_world_run(t->world, teardown_job, t);
        shs_world_destroy(t->world);
        shs_set_last_error_text(keep);
    }
    free(t->ranks);
    shs_documents_free(&t->docs);
    shs_memory_timeline_destroy(t->timeline);
    shs_layout_free(&t->layout);
    shs_layout_free(&t->model_layout);
    shs__wrap_free(&t->wrap);
    free(t);
}

const shs_step_segment_t *shs_trainer_timeline(const shs_trainer_t *t, int *count) {
    *count = 0;
    return t->timeline ? shs_memory_timeline_segments(t->timeline, count) : NULL;
}

/* per-micro-batch over documents: a micro-batch without a real target has
 * no mean (torch's mean over no elements is NaN). Checked for every rank's
 * micro-batches before the step, from the data alone, so that every rank
 * (and every process of a multi-process world) refuses the same step. */
static shs_status_t check_micro_batch_targets(const shs_trainer_t *t) {
    const shs_train_config_t *c = &t->cfg;
    if (c->data_mode == SHS_DATA_STREAM || shs_train_loss_norm(c) != SHS_LOSS_NORM_PER_MICRO_BATCH) return SHS_OK;
    int K = c->grad_accum > 1 ? c->grad_accum : 1, N = c->world_size, B = c->micro_batch;
    for (int k = 0; k < K; k++)
        for (int rank = 0; rank < N; rank++) {
            /* shs_data_batch's sequence index for micro-step step * K + k */
            uint64_t g0 = ((uint64_t)(t->step * K + k) * (uint64_t)N + (uint64_t)rank) * (uint64_t)B;
            int64_t n = 0;
            for (int b = 0; b < B && !n; b++)
                n += shs_documents_num_targets(&t->docs, c->strategy.seed, g0 + (uint64_t)b, c->model.context);
            if (!n)
                return shs_set_error(SHS_INVALID_ARG,
                                     "step %ld: rank %d's micro-batch %d (of %d, from 0) has no target tokens: every "
                                     "position is padding or a document's end, and --loss-norm per-micro-batch "
                                     "would average its 0/0 (NaN in torch) in; use --loss-norm global-tokens",
                                     t->step + 1, rank, k, K);
        }
    return SHS_OK;
}

shs_status_t shs_trainer_step(shs_trainer_t *t, float *loss) {
    SHS_CHECK(check_micro_batch_targets(t));
    SHS_CHECK(shs_world_run(t->world, step_job, t));
    t->step++;
    *loss = t->loss;
    return SHS_OK;
}

void shs_trainer_local_ranks(const shs_trainer_t *t, int *first, int *count) {
    shs_world_local_ranks(t->world, first, count);
}
const shs_layout_t *shs_trainer_layout(const shs_trainer_t *t) { return &t->layout; }
const shs_documents_t *shs_trainer_documents(const shs_trainer_t *t) {
    return t->cfg.data_mode != SHS_DATA_STREAM ? &t->docs : NULL;
}
int shs_trainer_world_size(const shs_trainer_t *t) { return t->cfg.world_size; }
const shs_train_config_t *shs_trainer_config(const shs_trainer_t *t) { return &t->cfg; }
long shs_trainer_steps_done(const shs_trainer_t *t) { return t->step; }
void shs_trainer_set_steps_done(shs_trainer_t *t, long steps_done) { t->step = steps_done; }
shs_loss_scale_state_t shs_trainer_loss_scale(const shs_trainer_t *t) {
    return shs_strategy_loss_scale(t->ranks[t->first_rank].run.strategy);
}

static shs_status_t set_scale_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    shs_strategy_set_loss_scale(t->ranks[ctx->rank].run.strategy, t->scaler_in);
    return SHS_OK;
}

shs_status_t shs_trainer_set_loss_scale(shs_trainer_t *t, shs_loss_scale_state_t st) {
    t->scaler_in = st;
    return shs_world_run(t->world, set_scale_job, t);
}
long shs_trainer_lr_steps(const shs_trainer_t *t) { return shs_strategy_lr_steps(t->ranks[t->first_rank].run.strategy); }
double shs_trainer_last_lr(const shs_trainer_t *t) { return shs_strategy_last_lr(t->ranks[t->first_rank].run.strategy); }

static shs_status_t set_lr_steps_job(shs_rank_ctx_t *ctx, void *arg) {
    shs_trainer_t *t = arg;
    shs_strategy_set_lr_steps(t->ranks[ctx->rank].run.strategy, t->lr_steps_in);
    return SHS_OK;
}

shs_status_t shs_trainer_set_lr_steps(shs_trainer_t *t, long applied) {
    t->lr_steps_in = applied;
    return shs_world_run(t->world, set_lr_steps_job, t);
}
float shs_trainer_last_grad_norm(const shs_trainer_t *t) { return t->cfg.strategy.clip_norm > 0 ? t->grad_norm : -1.0f; }

shs_status_t shs_trainer_run(shs_trainer_t *t, shs_rank_fn job, void *arg) { return shs_world_run(t->world, job, arg); }
shs_strategy_t *shs_trainer_strategy(shs_trainer_t *t, int rank) { return t->ranks[rank].run.strategy; }
shs_param_source_t *shs__trainer_model_source(shs_trainer_t *t, int rank) { return t->ranks[rank].run.src; }

size_t shs_trainer_snapshot_len(const shs_trainer_t *t) {
    size_t n = 0;
    for (int u = 0; u < t->layout.num_units; u++)
        n += shs_padded_numel(t->layout.units[u].numel, t->cfg.world_size, t->cfg.strategy.shard_align);
    return n;
}

shs_status_t shs_trainer_snapshot(shs_trainer_t *t, float *out) {
    memset(out, 0, shs_trainer_snapshot_len(t) * sizeof(float));
    t->snapshot_out = out;
    return shs_world_run(t->world, snapshot_job, t);
}

int shs_trainer_check_replicas(shs_trainer_t *t, const float *snapshot, shs_replica_diff_t *diff) {
    diff->rank = -1;
    t->replica_ref = snapshot;
    t->replica_diffs = calloc((size_t)t->cfg.world_size, sizeof *t->replica_diffs);
    for (int r = 0; t->replica_diffs && r < t->cfg.world_size; r++) t->replica_diffs[r].rank = -1;
    if (!t->replica_diffs || shs_world_run(t->world, replica_job, t) != SHS_OK) {
        free(t->replica_diffs);
        t->replica_diffs = NULL;
        return -1;
    }
    for (int r = 0; r < t->cfg.world_size && diff->rank < 0; r++)
        if (t->replica_diffs[r].rank >= 0) *diff = t->replica_diffs[r];
    free(t->replica_diffs);
    t->replica_diffs = NULL;
    return diff->rank < 0;
}

shs_status_t shs_trainer_flip_param_bit(shs_trainer_t *t, int unit, size_t index) {
    if (unit < 0 || unit >= t->layout.num_units || index >= t->layout.units[unit].numel)
        return shs_set_error(SHS_INVALID_ARG, "bit flip: no element %zu in unit %d", index, unit);
    if (t->cfg.comm) return shs_set_error(SHS_UNSUPPORTED, "bit flip: not with a multi-process world");
    t->flip_unit = unit;
    t->flip_index = index;
    /* the highest rank holding the element: the last replica, or its owner */
    for (t->flip_rank = t->cfg.world_size - 1; t->flip_rank > 0; t->flip_rank--) {
        shs_strategy_t *s = t->ranks[t->flip_rank].run.strategy;
        shs_shard_t sh;
        int replica;
        shs_strategy_shard_info(s, unit, &sh, &replica);
        if (shs_strategy_holds_full(s, unit) || (index >= sh.offset && index < sh.offset + sh.size)) break;
    }
    return shs_world_run(t->world, flip_job, t);
}

void shs_trainer_mem_stats(const shs_trainer_t *t, int rank, shs_mem_stats_t *out) {
    shs_rank_ctx_t *ctx = shs_world_rank(t->world, rank);
    if (!ctx) memset(out, 0, sizeof *out);
    else shs_device_mem_stats(ctx->dev, out);
}

void shs_trainer_gpu_mem_stats(const shs_trainer_t *t, int rank, shs_gpu_mem_stats_t *out) {
    shs_rank_ctx_t *ctx = shs_world_rank(t->world, rank);
    if (!ctx) memset(out, 0, sizeof *out);
    else shs_device_gpu_mem_stats(ctx->dev, out);
}

void shs_trainer_comm_stats(const shs_trainer_t *t, int rank, shs_comm_stats_t *out) {
    shs_rank_ctx_t *ctx = shs_world_rank(t->world, rank);
    memset(out, 0, sizeof *out);
    if (!ctx) return;
    shs__rank_comm_stats(&t->ranks[rank].run, out);
}

int shs_compare_snapshots(const shs_layout_t *layout, int nranks, size_t align, const float *a, const float *b,
                          shs_param_diff_t *diff) {
    static const float zero = 0.0f;
    size_t base = 0;
    for (int u = 0; u < layout->num_units; u++) {
        size_t numel = layout->units[u].numel, padded = shs_padded_numel(numel, nranks, align ? align : 1);
        for (size_t i = 0; i < padded; i++) {
            const float *pa = a + base + i, *pb = b + base + i;
            int same = i < numel ? memcmp(pa, pb, sizeof(float)) == 0
                                 : memcmp(pa, &zero, sizeof zero) == 0 && memcmp(pb, &zero, sizeof zero) == 0;
            if (same) continue;
            int ti = shs_layout_tensor_at(layout, u, i);
            *diff = (shs_param_diff_t){.unit = u, .tensor = ti, .a = *pa, .b = *pb,
                                       .index = ti >= 0 ? i - layout->tensors[ti].offset : i};
            return 0;
        }
        base += padded;
    }
    diff->unit = -1;
    return 1;
}
