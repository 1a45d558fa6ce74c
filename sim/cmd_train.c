/* cmd_train.c - `shardsim train`: the main job. Trains the GPT on a world of
 * simulated GPUs under one strategy, prints loss and time per step and a
 * summary of memory and communication; with --check ddp it prints the
 * verdict of the reference DDP run after every step (check.h).
 * This file is the order of things: parse (train_options.c), run
 * (train_run.c), print (train_report.c).
 * What it is not: the training loop (src/train/train.c) or the check
 * (src/train/check.c). */
#include <math.h>
#include <stdio.h>

#include "commands.h"
#include "train_options.h"
#include "train_report.h"
#include "train_run.h"
#include "shardsim/clock.h"

/* Set up, train o->steps steps, write the outputs and the summary. Returns
 * the exit code; sim_train_run_end releases what was set up either way. */
static int train(sim_train_run_t *r) {
    int rc;
    if ((rc = sim_train_run_setup(r)) >= 0) return rc;
    sim_train_print_header(r);
    if ((rc = sim_train_run_resume(r)) >= 0) return rc;
    if ((rc = sim_train_run_checker(r)) >= 0) return rc;
    fflush(stdout);
    if ((rc = sim_train_run_ready(r)) >= 0) return rc;

    const train_opts_t *o = r->o;
    sim_train_step_t s = {.loss = NAN};
    double total_time = 0;
    double run_start = shs_now_seconds();
    for (long index = 0; index < o->steps; index++) {
        if ((rc = sim_train_run_step(r, index, &s)) >= 0) return rc;
        total_time += s.seconds;
        sim_train_print_step(r, &s);
        if ((rc = sim_train_run_metrics(r, &s)) >= 0) return rc;
        if ((rc = sim_train_run_bitflip(r, s.step)) >= 0) return rc;
        if ((rc = sim_train_run_check(r, &s)) >= 0) return rc;
        sim_train_print_step_end(r, index, run_start);
        if (o->save_every && s.step % o->save_every == 0 && index + 1 < o->steps &&
            (rc = sim_train_run_save(r, o->save_dir, "--save-every")) >= 0)
            return rc;
    }
    sim_train_print_mean_step(r, total_time);
    if ((rc = sim_train_run_outputs(r)) >= 0) return rc;
    sim_train_print_summary(r, s.loss);
    return SIM_EXIT_OK;
}

int sim_cmd_train(int argc, char **argv) {
    train_opts_t o = {0};
    int rc = sim_train_parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    sim_train_run_t run;
    if ((rc = sim_train_run_begin(&run, &o)) >= 0) return rc;
    return sim_train_run_end(&run, train(&run));
}
