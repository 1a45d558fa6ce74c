/* train_metrics.h - `shardsim train --metrics FILE.jsonl`: one JSON object
 * per step, one per line, the figures trainers log per step (torchtitan's
 * metrics, the HF Trainer's log history, DeepSpeed's monitor):
 *   {"step": 3, "loss": 4.834337, "grad_norm": 1.2345678, "lr": 0.001,
 *    "loss_scale": 65536, "step_skipped": false, "tokens": 1024,
 *    "seconds": 0.127, "tokens_per_s": 8061.2,
 *    "device_mem_bytes": 14680064, "device_mem_peak_bytes": 20712448}
 *   step          numbered from the first run (after --resume, the checkpoint's steps + 1 ...)
 *   loss          the step's global mean loss (f32, in the fewest digits that read back as the same bits)
 *   grad_norm     the global gradient norm clipped against (f32), null without --clip-grad-norm
 *                 (shardsim computes it only to clip: it costs a collective) or on a skipped step
 *   lr            the learning rate the step's update applied (f32, after --lr-schedule), null for a
 *                 skipped step (no update; the schedule does not advance)
 *   loss_scale    the loss scale after the step (--param-dtype f16), else null
 *   step_skipped  the step overflowed and was skipped (f16 loss scaling), else false
 *   tokens        tokens of the global batch (world x micro-batch x context x grad-accum)
 *   seconds       wall-clock time of the step; tokens_per_s = tokens / seconds (machine-dependent)
 *   device_mem_bytes, device_mem_peak_bytes
 *                 the simulated device memory in use after the step and its peak since the run
 *                 began (torch.cuda.max_memory_allocated without a reset), bytes, the largest
 *                 over this process's ranks (all of them on threads, its own under MPI)
 * Written durably (durable.h): the lines go to FILE.tmp as the steps end,
 * which takes the name FILE when the run ends. After a failure the steps
 * that completed are kept the same way (whole lines only: a line cut by a
 * failed write is removed); a run that fails before its first step leaves
 * an earlier FILE whole. A FIFO or device (/dev/stdout) is written in place,
 * line by line. Under --backend mpi, rank 0's process writes it.
 * What it is not: the step line on stdout (train_report.c). */
#ifndef SHARDSIM_SIM_TRAIN_METRICS_H
#define SHARDSIM_SIM_TRAIN_METRICS_H

#include <stdint.h>

#include "shardsim/durable.h"
#include "shardsim/status.h"
#include "shardsim/train.h"

typedef struct {
    shs_dfile_t f;
    int open;
    uint64_t whole;    /* bytes of the complete lines written */
    long lines;
} sim_train_metrics_t;

/* One step's figures (the caller's, so that this file needs no trainer). */
typedef struct {
    long step;
    float loss, grad_norm, lr, loss_scale; /* grad_norm < 0: none; lr NaN: none; loss_scale <= 0: no scaling */
    int skipped;
    long tokens;
    double seconds;
    size_t mem_bytes, mem_peak_bytes;
} sim_train_metrics_row_t;

/* Create FILE.tmp (or open the device). Errors: SHS_IO naming the path. */
shs_status_t sim_train_metrics_open(sim_train_metrics_t *m, const char *path);
/* Append one line. Errors: SHS_IO naming the file; a partly written line
 * is cut off the file before returning. */
shs_status_t sim_train_metrics_write(sim_train_metrics_t *m, const sim_train_metrics_row_t *row);
/* Give FILE its lines (rename) when the run succeeded or wrote a line,
 * else discard FILE.tmp. Errors: SHS_IO (the commit's). Never open: SHS_OK. */
shs_status_t sim_train_metrics_close(sim_train_metrics_t *m, int succeeded);

#endif
