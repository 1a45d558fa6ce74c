/* step.h - one rank's training step, the one loop behind the trainer
 * (train.c: rank threads on CPU or CUDA devices) and the meta run
 * (meta_run.c: representative ranks on meta devices). Internal.
 *
 * What it is: a rank's model, strategy and loss scalar set up in one order
 * (activations first, so a model that cannot fit fails fast; then the
 * strategy, which initializes the parameters), and the step: K micro-
 * batches of forward and backward (no_sync until the last), the strategy's
 * finish (reduction, clipping, optimizer), the loss all-reduce (AVG).
 * What it is not: the world of ranks (world.h), the decorators in front of
 * the strategy's source (the callers attach what they were asked for).
 */
#ifndef SHARDSIM_TRAIN_STEP_H
#define SHARDSIM_TRAIN_STEP_H

#include <stdint.h>

#include "shardsim/train.h"
#include "train/wrap.h"

/* Where a step is, as its phase hook hears it. */
typedef enum {
    SHS__STEP_FORWARD,   /* a micro-batch's forward starts */
    SHS__STEP_BACKWARD,  /* its backward starts */
    SHS__STEP_OPTIM,     /* the strategy's finish (flush, clip, optimizer) starts */
    SHS__STEP_LOSS,      /* the loss all-reduce starts */
    SHS__STEP_END        /* the loss all-reduce is done */
} shs__step_phase_t;

typedef struct {
    shs_device_t *dev;            /* borrowed */
    shs_comm_t *comm;             /* the rank's world communicator (borrowed) */
    shs_model_t *model;
    shs_strategy_t *strategy;
    float *loss_dev;              /* (1) device scalar of the loss all-reduce */
    int32_t *tokens, *targets;    /* host (K*B*T: the step's K micro-batches), zeros until a corpus fills them */
    int32_t *positions, *doc_ids; /* host (K*B*T) with packed documents, else NULL */
    const shs_documents_t *docs;  /* the trainer's documents with cfg->data_mode, else NULL (borrowed) */
    int64_t *count_dev;           /* (1) device i64 of the token-count all-reduce (global-tokens), else NULL */
    shs_param_source_t *src;      /* what the model is given: the strategy's own source unless a
                                   * caller put decorators in front */
    shs_phase_t phase;            /* the pass being run (decorators read it) */
    void (*on_phase)(void *user, shs__step_phase_t ph); /* optional */
    void *phase_user;
    float grad_norm;              /* the last step's (shs_strategy_grad_norm) */
} shs__rank_t;

/* Check the job's network: the GPT's config, or the Llama's (and the
 * context within its max_position_embeddings), or a model file's context
 * (1..65536). Errors: SHS_INVALID_ARG naming the field. */
shs_status_t shs__job_model_validate(const shs_train_config_t *cfg);
/* The attention term's width per token: the sum over layers of the
 * attention width (GPT C, the Llama family's NH*HD) times the keys a query
 * reads (T, or min(T, window) on a windowed layer): L C T for the GPT.
 * 12 x it is PaLM's attention FLOPs per token. 0 for a model file. */
double shs__job_attention_per_token(const shs_train_config_t *cfg);

/* The layouts of the job `cfg`: the model's (the GPT's, the Llama's or cfg->model_file's),
 * its units below cfg->replicate_below marked replicated (not under DDP);
 * with cfg->wrap_min_params also the strategy's grouped layout and its map
 * (shs__wrap_build over the decoder's layers); else `grouped` stays empty and w->num_physical 0.
 * Errors: SHS_INVALID_ARG (wrapping a netdesc), SHS_HOST_OOM; nothing to
 * free then. */
shs_status_t shs__job_layouts(const shs_train_config_t *cfg, shs_layout_t *model, shs_layout_t *grouped,
                              shs__wrap_map_t *w);

/* Set up rank `r` on `dev` and `comm`: the model on `model_layout` (GPT,
 * Llama or cfg->model_file), the strategy (cfg->strategy) on `strategy_layout` (the same
 * layout unless size-based wrapping groups units), the loss scalar; r->src
 * is the strategy's source. On error the caller still calls
 * shs__rank_teardown. Errors: as shs_gpt_create / shs_llama_create / shs_strategy_create,
 * SHS_HOST_OOM. */
shs_status_t shs__rank_setup(shs__rank_t *r, const shs_train_config_t *cfg, const shs_layout_t *model_layout,
                             const shs_layout_t *strategy_layout, shs_device_t *dev, shs_comm_t *comm);
void shs__rank_teardown(shs__rank_t *r);

/* Step number steps_done + 1 on this rank. With `corpus`, micro-batch k
 * reads the data of "step" steps_done*K + k (every rank its slice; r->docs
 * cut it into documents); without, the tokens stay as they are (the meta
 * run: values do not matter, every target counts). The loss is normalized
 * as shs_train_loss_norm(cfg) says (train.h: with global-tokens a count
 * all-reduce precedes the first forward). *loss: the step's normalized
 * loss over the global batch. */
shs_status_t shs__rank_step(shs__rank_t *r, const shs_train_config_t *cfg, const shs_corpus_t *corpus,
                            long steps_done, float *loss);

/* The rank's collective counts: its world communicator's plus the
 * strategy's sub-communicators'. */
void shs__rank_comm_stats(const shs__rank_t *r, shs_comm_stats_t *out);

/* The source rank `rank`'s model calls in a trainer (train.c): the
 * strategy's own unless decorators were asked for (tests check which). */
shs_param_source_t *shs__trainer_model_source(shs_trainer_t *t, int rank);

#endif
