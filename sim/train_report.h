/* train_report.h - what `shardsim train` prints on stdout: the header (the
 * world, the model, the data, the optimizer, what --ds-config and the
 * documents set), the resume and check lines, one line per step, and the
 * summary (peak memory per rank, communication, the check's verdict).
 * What it is not: the run (train_run.h); errors go to stderr through
 * args.h's sim_error. */
#ifndef SHARDSIM_SIM_TRAIN_REPORT_H
#define SHARDSIM_SIM_TRAIN_REPORT_H

#include "train_run.h"

/* The header: "shardsim train: N ranks (...), strategy S, model ... in U
 * units", then the lines of --hf-config, the data and optimizer, the
 * activation options, --ds-config and the documents (each when it applies). */
void sim_train_print_header(const sim_train_run_t *r);
/* "  resumed from DIR after step S: steps S+1..S+steps" */
void sim_train_print_resumed(const sim_train_run_t *r);
/* "  check: DDP on the same data, ..." (exact or drift) */
void sim_train_print_check_intro(const sim_train_run_t *r);

/* A step's line, in three parts: its start (step, loss, time, tokens/s,
 * loss bits, loss scale, grad norm); the check's part
 * (sim_train_print_check_step, with --check ddp); its end (" | eta S s").
 * index: the step's 0-based index in this run. */
void sim_train_print_step(const sim_train_run_t *r, const sim_train_step_t *s);
/* status SHS_NOT_EQUAL: the line ends naming what differs and the check's
 * failure goes to stderr; another error: the line ends; else the drift or
 * "bit-identical". */
void sim_train_print_check_step(const sim_train_run_t *r, shs_status_t status, const shs_check_step_t *cs);
void sim_train_print_step_end(const sim_train_run_t *r, long index, double run_start);

/* After the steps: "mean step time" (when a step ran), then the summary,
 * the MPI note and the check's verdict. loss: the last step's. */
void sim_train_print_mean_step(const sim_train_run_t *r, double total_seconds);
void sim_train_print_summary(const sim_train_run_t *r, float loss);

#endif
