/* compare_plot.h - `shardsim compare --plot`: an SVG of one rank's device
 * memory over one training step, one panel per compared strategy. */
#ifndef SHARDSIM_SIM_COMPARE_PLOT_H
#define SHARDSIM_SIM_COMPARE_PLOT_H

#include <stddef.h>

#include "shardsim/meta_run.h"

typedef struct {
    const char *name;                       /* panel title, e.g. "zero3+ckpt" */
    const shs_meta_rank_result_t *rank;     /* its timeline (segments) */
    size_t device_mem;                      /* drawn as a dashed line when in range */
    int gpu_ledger;                         /* draw the modelled GPU run's ledger (device.h; compare),
                                             * 0 this process's (train) */
} sim_plot_row_t;

/* Write the SVG to `path`, whole or not at all (a temp file renamed onto
 * path; an earlier file there survives a failure). Returns 0, or -1 when the
 * file cannot be written, with shs_last_error() naming the path and why. */
int sim_compare_plot(const char *path, const char *title, const sim_plot_row_t *rows, int nrows);

#endif
