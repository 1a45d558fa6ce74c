/* step.c - one rank's setup and training step (step.h). */
#include "train/step.h"

#include <stdlib.h>
#include <string.h>

shs_status_t shs__job_model_validate(const shs_train_config_t *cfg) {
    if (!cfg->model_file && cfg->arch == SHS_ARCH_GPT) return shs_gpt_config_validate(&cfg->model);
    if (!cfg->model_file && cfg->arch != SHS_ARCH_LLAMA)
        return shs_set_error(SHS_INVALID_ARG, "model architecture %d is not known (gpt or llama)", (int)cfg->arch);
    if (cfg->model.context < 1 || cfg->model.context > SHS_TRAIN_MAX_CONTEXT)
        return shs_set_error(SHS_INVALID_ARG, "context must be in 1..%d (got %d)", SHS_TRAIN_MAX_CONTEXT,
                             cfg->model.context);
    if (cfg->model_file) return SHS_OK;
    SHS_CHECK(shs_llama_config_validate(&cfg->llama));
    if (cfg->model.context > cfg->llama.max_position)
        return shs_set_error(SHS_INVALID_ARG, "context %d is longer than the Llama's max_position_embeddings (%d)",
                             cfg->model.context, cfg->llama.max_position);
    return SHS_OK;
}

double shs__job_attention_per_token(const shs_train_config_t *cfg) {
    if (cfg->model_file) return 0;
    if (cfg->arch == SHS_ARCH_LLAMA) return shs_llama_attention_width(&cfg->llama, cfg->model.context);
    return (double)cfg->model.num_layers * cfg->model.channels * cfg->model.context;
}

shs_status_t shs__job_layouts(const shs_train_config_t *cfg, shs_layout_t *model, shs_layout_t *grouped,
                              shs__wrap_map_t *w) {
    memset(w, 0, sizeof *w);
    shs_layout_init(grouped);
    if (cfg->wrap_min_params && cfg->model_file)
        return shs_set_error(SHS_INVALID_ARG, "size-based wrapping applies to the GPT and the Llama only");
    int llama = !cfg->model_file && cfg->arch == SHS_ARCH_LLAMA;
    SHS_CHECK(cfg->model_file ? shs_model_file_layout_create(model, cfg->model_file)
              : llama         ? shs_llama_layout_create(model, &cfg->llama)
                              : shs_gpt_layout_create(model, &cfg->model));
    if (cfg->strategy.kind != SHS_DDP)
        for (int u = 0; u < model->num_units; u++)
            if (model->units[u].numel < cfg->replicate_below) model->units[u].replicated = 1;
    if (!cfg->wrap_min_params) return SHS_OK;
    /* the blocks: units 1..L of either decoder (after them the final norm, and the Llama's untied head) */
    int blocks = llama ? cfg->llama.num_layers : cfg->model.num_layers;
    shs_status_t st = shs__wrap_build(model, blocks, cfg->wrap_min_params, grouped, w);
    if (st != SHS_OK) shs_layout_free(model);
    return st;
}

shs_status_t shs__rank_setup(shs__rank_t *r, const shs_train_config_t *cfg, const shs_layout_t *model_layout,
                             const shs_layout_t *strategy_layout, shs_device_t *dev, shs_comm_t *comm) {
    r->dev = dev;
    r->comm = comm;
    size_t K = cfg->grad_accum > 1 ? (size_t)cfg->grad_accum : 1;
    size_t bt = (size_t)cfg->micro_batch * (size_t)cfg->model.context * K; /* the step's micro-batches */
    r->tokens = calloc(bt ? bt : 1, sizeof(int32_t));
    r->targets = calloc(bt ? bt : 1, sizeof(int32_t));
    if (cfg->data_mode == SHS_DATA_PACK) {
        r->positions = calloc(bt ? bt : 1, sizeof(int32_t));
        r->doc_ids = calloc(bt ? bt : 1, sizeof(int32_t));
    }
    if (!r->tokens || !r->targets || (cfg->data_mode == SHS_DATA_PACK && (!r->positions || !r->doc_ids)))
        return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate batch", shs_comm_rank(comm));
    if (cfg->data_mode != SHS_DATA_STREAM && !shs_device_supports(dev, SHS_KERNELS_IGNORE_INDEX))
        return shs_set_error(SHS_UNSUPPORTED,
                             "rank %d: %s data has ignored targets (document ends%s) but this device's "
                             "cross-entropy kernel cannot skip them (SHS_KERNELS_IGNORE_INDEX; the CUDA backend "
                             "lacks it): train on the CPU backend",
                             shs_comm_rank(comm), cfg->data_mode == SHS_DATA_PACK ? "packed" : "padded",
                             cfg->data_mode == SHS_DATA_PAD ? ", padding" : "");
    /* activations first: their allocation is cheap, the strategy's includes
     * initializing the parameters, so a model that cannot fit fails fast */
    shs_gpt_exec_t ex = {
        .recompute = cfg->checkpoint_activations ? SHS_RECOMPUTE_FULL : cfg->recompute,
        .recompute_every = cfg->recompute_every,
        .attention = cfg->attention,
        .autocast = cfg->autocast,
        .param_dtype = cfg->strategy.param_dtype,
        .dropout = cfg->dropout,
        .seed = cfg->strategy.seed,
        .loss_kernel = cfg->loss_kernel,
    };
    if (cfg->model_file)
        SHS_CHECK(shs_model_file_model_create(&r->model, cfg->model_file, model_layout, dev, cfg->micro_batch,
                                           cfg->model.context));
    else if (cfg->arch == SHS_ARCH_LLAMA)
        SHS_CHECK(shs_llama_create(&r->model, model_layout, &cfg->llama, dev, cfg->micro_batch, cfg->model.context,
                                   &ex));
    else
        SHS_CHECK(shs_gpt_create_ex(&r->model, model_layout, &cfg->model, dev, cfg->micro_batch, &ex));
    if (cfg->poison_freed) shs_device_set_poison_freed(dev, 1u << SHS_MEM_COMM);
    SHS_CHECK(shs_strategy_create(&r->strategy, &cfg->strategy, strategy_layout, dev, comm));
    SHS_CHECK(shs_device_alloc(dev, (void **)&r->loss_dev, sizeof(float), SHS_MEM_OTHER, "loss"));
    if (shs_train_loss_norm(cfg) == SHS_LOSS_NORM_GLOBAL_TOKENS)
        SHS_CHECK(shs_device_alloc(dev, (void **)&r->count_dev, sizeof(int64_t), SHS_MEM_OTHER, "token count"));
    r->src = shs_strategy_source(r->strategy);
    return SHS_OK;
}

void shs__rank_teardown(shs__rank_t *r) {
    shs_model_destroy(r->model);
    shs_strategy_destroy(r->strategy);
    if (r->dev) shs_device_free(r->dev, r->loss_dev);
    if (r->dev && r->count_dev) shs_device_free(r->dev, r->count_dev);
    free(r->tokens);
    free(r->targets);
    free(r->positions);
    free(r->doc_ids);
    memset(r, 0, sizeof *r);
}

static void enter(shs__rank_t *r, shs__step_phase_t ph, const char *marker) {
    shs_comm_set_marker(r->comm, marker);
    if (ph == SHS__STEP_FORWARD || ph == SHS__STEP_BACKWARD) {
        r->phase = ph == SHS__STEP_FORWARD ? SHS_PHASE_FORWARD : SHS_PHASE_BACKWARD;
        shs_strategy_set_phase(r->strategy, r->phase);
    }
    if (r->on_phase) r->on_phase(r->phase_user, ph);
}

/* The step's global count of counted targets: this rank's K micro-batches'
 * all-reduced (SUM) over the ranks, the same on every rank. */
static shs_status_t global_token_count(shs__rank_t *r, int K, size_t bt, long steps_done, int64_t *count) {
    int64_t local = 0;
    for (int k = 0; k < K; k++)
        local += shs_batch_num_targets(&(shs_batch_t){.targets = r->targets + (size_t)k * bt}, bt);
    shs_comm_set_marker(r->comm, "token-count");
    SHS_CHECK(shs_memcpy_h2d(r->dev, r->count_dev, &local, sizeof local));
    shs_comm_set_tag(r->comm, shs_comm_tag_pack(SHS_TAG_TOKEN_COUNT, -1, 0, steps_done + 1));
    shs_status_t st = shs_all_reduce(r->count_dev, r->count_dev, 1, SHS_I64, SHS_SUM, r->comm);
    shs_comm_set_tag(r->comm, 0);
    SHS_CHECK(st);
    return shs_memcpy_d2h(r->dev, count, r->count_dev, sizeof *count);
}

shs_status_t shs__rank_step(shs__rank_t *r, const shs_train_config_t *cfg, const shs_corpus_t *corpus,
                            long steps_done, float *loss) {
    int K = cfg->grad_accum > 1 ? cfg->grad_accum : 1;
    int rank = shs_comm_rank(r->comm), nranks = shs_comm_size(r->comm);
    size_t bt = (size_t)cfg->micro_batch * (size_t)cfg->model.context;
    int global_tokens = shs_train_loss_norm(cfg) == SHS_LOSS_NORM_GLOBAL_TOKENS;
    /* per-micro-batch: the mean over the K micro-batch means (f32, in
     * order); global-tokens: sum_k mean_k * n_k / G (f64, in order) */
    float local_loss = 0.0f;
    double token_loss = 0.0;
    int64_t G = 0;
    shs_strategy_set_step(r->strategy, steps_done + 1); /* the step the call tags carry (resumed runs) */
    /* micro-batch k of step s is the data of "step" s*K + k: every rank's
     * slice, every micro-batch distinct, whatever the strategy */
    if (corpus)
        for (int k = 0; k < K; k++) {
            size_t o = (size_t)k * bt;
            shs_data_batch(corpus, r->docs, cfg->strategy.seed, steps_done * K + k, rank, nranks, cfg->micro_batch,
                           cfg->model.context, r->tokens + o, r->targets + o, r->positions ? r->positions + o : NULL,
                           r->doc_ids ? r->doc_ids + o : NULL);
        }
    if (global_tokens) {
        SHS_CHECK(global_token_count(r, K, bt, steps_done, &G));
        /* every rank holds the same G: every rank refuses, none left waiting */
        if (G == 0)
            return shs_set_error(SHS_INVALID_ARG, "step %ld: the global batch has no target tokens: every position is "
                                 "padding or a document's end (the loss would be 0/0)", steps_done + 1);
    }
    SHS_CHECK(shs_strategy_begin_step(r->strategy));
    float scale = shs_strategy_loss_scale(r->strategy).scale; /* 1 without fp16 loss scaling */
    for (int k = 0; k < K; k++) {
        size_t o = (size_t)k * bt;
        shs_batch_t batch = {.tokens = r->tokens + o, .targets = r->targets + o,
                             .positions = r->positions ? r->positions + o : NULL,
                             .doc_ids = r->doc_ids ? r->doc_ids + o : NULL};
        float micro_loss;
        shs_gpt_set_position(r->model, (uint64_t)(steps_done * K + k), (uint64_t)rank * (uint64_t)cfg->micro_batch);
        enter(r, SHS__STEP_FORWARD, "fwd");
        SHS_CHECK(shs_model_forward(r->model, r->src, &batch, &micro_loss));
        shs_strategy_set_sync(r->strategy, k == K - 1);
        /* per-micro-batch: d(step loss)/d(micro loss) = 1/K, the gradient is
         * the mean over the micro-batches, as `(loss / K).backward()` in
         * torch; times the loss scale, as `scaler.scale(loss / K).backward()`.
         * global-tokens: N * n_k / G times the loss scale (train.h) */
        float dloss = scale / (float)K;
        if (global_tokens) {
            int64_t n_k = shs_batch_num_targets(&batch, bt);
            dloss = (float)((double)scale * nranks * (double)n_k / (double)G);
            token_loss += (double)micro_loss * (double)n_k;
        }
        enter(r, SHS__STEP_BACKWARD, "bwd");
        SHS_CHECK(shs_model_backward(r->model, r->src, dloss));
        local_loss += micro_loss;
    }
    local_loss = global_tokens ? (float)(token_loss / (double)G) : local_loss / (float)K;
    enter(r, SHS__STEP_OPTIM, "optim");
    SHS_CHECK(shs_strategy_finish_step(r->strategy, steps_done + 1));
    r->grad_norm = shs_strategy_grad_norm(r->strategy);
    enter(r, SHS__STEP_LOSS, "loss");
    SHS_CHECK(shs_memcpy_h2d(r->dev, r->loss_dev, &local_loss, sizeof local_loss));
    shs_comm_set_tag(r->comm, shs_comm_tag_pack(SHS_TAG_LOSS_ALL_REDUCE, -1, 0, steps_done + 1));
    /* per-micro-batch: the mean of the ranks' means; global-tokens: the sum
     * of the ranks' shares of sum S / G */
    shs_status_t st = shs_all_reduce(r->loss_dev, r->loss_dev, 1, SHS_F32, global_tokens ? SHS_SUM : SHS_AVG, r->comm);
    shs_comm_set_tag(r->comm, 0); /* calls outside the step are untagged */
    SHS_CHECK(st);
    if (r->on_phase) r->on_phase(r->phase_user, SHS__STEP_END);
    return shs_memcpy_d2h(r->dev, loss, r->loss_dev, sizeof *loss);
}

void shs__rank_comm_stats(const shs__rank_t *r, shs_comm_stats_t *out) {
    shs_comm_get_stats(r->comm, out);
    shs_strategy_add_comm_stats(r->strategy, out);
}
