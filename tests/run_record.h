/* run_record.h - test helper: train a configuration for a few steps and
 * keep each step's loss, gradient norm and parameter snapshot, and compare
 * two such runs bit for bit. Shared by the equivalence-style tests. */
#ifndef SHARDSIM_TEST_RUN_RECORD_H
#define SHARDSIM_TEST_RUN_RECORD_H

#include <stddef.h>

#include "shardsim/train.h"

#define REC_MAX_STEPS 8

typedef struct {
    int steps;
    float loss[REC_MAX_STEPS];
    float norm[REC_MAX_STEPS];     /* shs_trainer_last_grad_norm */
    float *snap[REC_MAX_STEPS];    /* shs_trainer_snapshot after each step */
    size_t len;                    /* floats per snapshot */
    shs_layout_t layout;           /* a copy of the run's layout (units only) */
    int world_size;
    size_t align;
} run_record_t;

/* Train cfg on corpus for `steps` steps (<= REC_MAX_STEPS) and record it;
 * fails the test on any error. */
void record_run(const shs_train_config_t *cfg, const shs_corpus_t *corpus, int steps, run_record_t *rec);
void free_record(run_record_t *rec);

/* Two runs of the same layout: every step's loss and norm memcmp-equal,
 * every real element memcmp-equal, and every padding element of `got` +0.0
 * (the snapshots may differ in world size/alignment: elements are matched
 * by unit and index). */
void assert_same_run(const run_record_t *ref, const run_record_t *got);

/* The world sizes the training features are crossed with, and whether `make
 * test-full` (SHS_TEST_FULL=1) asked for every variant at every size. */
extern const int test_worlds[5];
int test_full_sweep(void);

/* A small GPT (L layers, 3 heads of 3 channels, context 8, micro-batch 2)
 * whose units no world size above 1 divides evenly. */
shs_train_config_t test_small_config(int world, int layers);

/* Parameter element `index` of unit `unit` after step `step` (0-based). */
float record_param(const run_record_t *rec, int step, int unit, size_t index);

#endif
