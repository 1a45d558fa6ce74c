/* check.h - the verdict of `train --check ddp` as a library object: a
 * reference DDP run on the same data, stepped beside the run under test,
 * and after each step the gradient norm, the loss, every parameter and every
 * replica compared bit for bit (SHS_NOT_EQUAL names the first difference).
 * Modes that are not bit-exact by design (shs_check_inexact_reason) report
 * the drift from DDP instead; their replicas are still compared exactly.
 * What it is not: the trainer (train.h) or the printing (sim/).
 */
#ifndef SHARDSIM_CHECK_H
#define SHARDSIM_CHECK_H

#include "shardsim/train.h"

/* What differs after shs_checker_step returned SHS_NOT_EQUAL, in the order
 * the checks run. */
typedef enum {
    SHS_CHECK_SAME,       /* nothing */
    SHS_CHECK_GRAD_NORM,  /* the clipped-against global gradient norm */
    SHS_CHECK_LOSS,       /* the step's loss */
    SHS_CHECK_PARAMS,     /* a parameter (or a padding element) of the gathered snapshots */
    SHS_CHECK_REPLICAS    /* a rank's full replica against its shard owner's element */
} shs_check_diff_t;

/* Drift from DDP: loss difference (run minus DDP; for the worst: its largest
 * absolute value), largest |a - b| and largest |a - b| / max(|a|, |b|) over
 * the real parameter elements (0 where both are 0; a NaN counts as infinite). */
typedef struct {
    double loss, max_abs, max_rel;
} shs_check_drift_t;

/* One step's verdict. */
typedef struct {
    float ref_loss;             /* the DDP run's loss of this step */
    shs_check_diff_t differs;   /* SHS_CHECK_SAME unless SHS_NOT_EQUAL */
    shs_check_drift_t drift;    /* inexact modes: this step's drift (zeros otherwise) */
    shs_check_drift_t worst;    /* inexact modes: the worst drift so far (loss: largest |difference|) */
} shs_check_step_t;

/* Why a run under cfg cannot match DDP bit for bit, or NULL when it must:
 * "reduce order ring" (NCCL's ring order), or "hybrid sharding (a sum of
 * group sums)" (hybrid with 1 < G < N; strategy.h). */
const char *shs_check_inexact_reason(const shs_train_config_t *cfg);

typedef struct shs_checker shs_checker_t;

/* Set up the reference: cfg (the run under test's config) as plain DDP
 * without offload or activation checkpointing, on ref_comm (NULL: its own
 * rank threads; else this process's rank of a multi-process world, like
 * cfg->comm) and without the trace. merge_comm: with a multi-process world,
 * a communicator of the same processes over which the snapshots and
 * verdicts are merged (borrowed, outlives the checker); NULL on threads.
 * To resume, load the same checkpoint into shs_checker_reference().
 * Errors: as shs_trainer_create (text "reference DDP run: ..."), SHS_HOST_OOM. */
shs_status_t shs_checker_create(shs_checker_t **out, const shs_train_config_t *cfg, const shs_corpus_t *corpus,
                                shs_comm_t *ref_comm, shs_comm_t *merge_comm);
void shs_checker_destroy(shs_checker_t *ck);

/* The reference DDP run (owned by the checker). */
shs_trainer_t *shs_checker_reference(shs_checker_t *ck);
/* shs_check_inexact_reason of the run under test. */
const char *shs_checker_inexact_reason(const shs_checker_t *ck);

/* After run (the run under test, of the config given at create) has taken
 * a step with loss `loss`: step the reference and compare. SHS_OK when all
 * matches (inexact modes: replicas match; out->drift filled); SHS_NOT_EQUAL
 * with out->differs and shs_last_error() saying "step S: " and what differs:
 * the gradient norm or loss values, or the unit, tensor (layout name),
 * element (row, col) and both values with their f32 bits, or the rank whose
 * replica differs. Other errors: the reference's step ("reference DDP run:
 * ..."), a snapshot or a rank's replica check failed. */
shs_status_t shs_checker_step(shs_checker_t *ck, shs_trainer_t *run, float loss, shs_check_step_t *out);

#endif
