/* cmd_compare.c - `shardsim compare`: every data-parallel strategy for one
 * model at one scale, measured by running the real strategy and model code
 * on the meta backend (meta_run.h), beside the ZeRO paper's closed forms
 * and a step-time estimate (estimate.h). Text table, JSON or CSV; optional
 * SVG of each strategy's memory over one step (compare_plot.c).
 * What it is not: its parts (compare.h: the options, the rows, the output).
 */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "compare.h"
#include "compare_plot.h"
#include "shardsim/durable.h"

int sim_cmd_compare(int argc, char **argv) {
    sim_compare_job_t job;
    int rc = sim_compare_parse(argc, argv, &job);
    if (rc >= 0) return rc;
    sim_compare_row_t *rows = NULL;
    int nrows = 0;
    if ((rc = sim_compare_run(&job, &rows, &nrows)) != SIM_EXIT_OK) goto out;
    /* --output is written whole or not at all (temp file, then rename) */
    shs_afile_t af = {0};
    if (job.output && shs_afile_open(&af, job.output, "w") != SHS_OK) {
        sim_error("compare", "%s", shs_last_error());
        rc = SIM_EXIT_ERROR;
        goto out;
    }
    rc = sim_compare_print(job.output ? af.fp : stdout, &job, rows, nrows);
    if (job.output) {
        if (rc != SIM_EXIT_OK) {
            shs_afile_discard(&af);
        } else if (shs_afile_commit(&af) != SHS_OK) {
            sim_error("compare", "%s", shs_last_error());
            rc = SIM_EXIT_ERROR;
        }
    }
    if (job.plot) {
        sim_plot_row_t *pr = calloc(nrows > 0 ? (size_t)nrows : 1, sizeof *pr);
        for (int i = 0; pr && i < nrows; i++) pr[i] = (sim_plot_row_t){rows[i].name, rows[i].worst, job.device_mem, 1};
        if (!pr || sim_compare_plot(job.plot, job.model_name, pr, nrows) != 0) {
            if (pr) sim_error("compare", "%s", shs_last_error()); /* it names the file */
            else sim_error("compare", "%s: out of memory", job.plot);
            rc = SIM_EXIT_ERROR;
        }
        free(pr);
    }
out:
    sim_compare_free(rows, nrows);
    return rc;
}
