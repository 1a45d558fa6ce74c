/* train_run.h - one `shardsim train` run and its phases, in the order
 * cmd_train.c calls them: begin (the MPI job, the devices' memory, the
 * model file and the data), set up (the trace recorder and the trainer),
 * resume, the reference DDP run of --check, one step at a time, the outputs
 * written at the end, and the end (every resource released, MPI aborted
 * after a failure so no process waits).
 * What it is not: the options (train_options.h), what is printed
 * (train_report.h) or the training loop (src/train/train.c). */
#ifndef SHARDSIM_SIM_TRAIN_RUN_H
#define SHARDSIM_SIM_TRAIN_RUN_H

#include "progress.h"
#include "train_metrics.h"
#include "train_options.h"
#include "shardsim/check.h"
#include "shardsim/model_file.h"
#include "shardsim/trace_record.h"
#include "shardsim/train.h"

/* --backend mpi: the communicators of this process's rank (comm_mpi.h). */
typedef struct {
    shs_comm_t *world;     /* the trained run */
    shs_comm_t *ref;       /* --check ddp: the DDP run's own world */
    shs_comm_t *check;     /* --check ddp: merging snapshots and verdicts across processes */
    int rank;
} sim_mpi_job_t;

typedef struct {
    train_opts_t *o;
    shs_train_config_t *cfg;        /* &o->cfg */
    sim_mpi_job_t mpi;
    shs_model_file_t *model_file;   /* --model-file (NULL: none); outlives the trainers */
    shs_corpus_t corpus;
    shs_trainer_t *main_run;
    shs_checker_t *checker;         /* --check ddp */
    const char *drift_why;          /* --check ddp on a run not exact by design: why (else NULL) */
    shs_check_drift_t worst;        /* that run's largest drift so far */
    shs_trace_recorder_t *trace_rec;
    sim_progress_t *pg;
    long first, last;               /* this run's steps are first+1..last (numbered from the checkpoint's) */
    int first_rank, local_count;    /* this process's ranks: all of them on threads, its own under MPI */
    sim_train_metrics_t metrics;    /* --metrics (metrics.open: being written) */
} sim_train_run_t;

/* One step's results, for its line (train_report.h). */
typedef struct {
    long step;            /* numbered from the first run */
    float loss;
    double seconds;       /* wall-clock time of the step */
} sim_train_step_t;

/* The steps before the trainer: join the MPI job, fail early without a
 * GPU under a CUDA backend, size the simulated devices, load --model-file
 * and --data. Returns -1 to go on (r->o is o), or an exit code after the
 * error, everything released (an MPI job is aborted where it was before). */
int sim_train_run_begin(sim_train_run_t *r, train_opts_t *o);

/* The progress watcher, the --trace recorder, the trainer. Returns -1 to
 * go on, else an exit code after the error (a note when the simulated
 * devices ran out of this machine's RAM). */
int sim_train_run_setup(sim_train_run_t *r);

/* --resume: load the checkpoint (the line saying so is the caller's);
 * then this run's first and last step; --inject-bitflip must fall in
 * them. -1 or an exit code after the error. */
int sim_train_run_resume(sim_train_run_t *r);

/* --check ddp: the reference DDP run, resumed alike. -1 or an exit code. */
int sim_train_run_checker(sim_train_run_t *r);

/* Plant SHS_TEST_FAULT, find this process's ranks, open --metrics (rank 0's
 * process under MPI). -1 or an exit code. */
int sim_train_run_ready(sim_train_run_t *r);

/* Step index (0-based in this run): train it and time it into *s. A failed
 * or diverged step is reported; -1 to go on, else an exit code. */
int sim_train_run_step(sim_train_run_t *r, long index, sim_train_step_t *s);

/* --metrics: step s's line. -1 or an exit code after the error. */
int sim_train_run_metrics(sim_train_run_t *r, const sim_train_step_t *s);

/* --inject-bitflip at this step: flip the bit. -1 or an exit code after
 * ending the step's line and reporting the error. */
int sim_train_run_bitflip(sim_train_run_t *r, long step);

/* --check ddp: compare step s with the reference run and end its line
 * (train_report.h). -1 or an exit code (3: a difference). */
int sim_train_run_check(sim_train_run_t *r, const sim_train_step_t *s);

/* Save a checkpoint into dir and say so; what names the option in an
 * error. -1 or an exit code after the error. */
int sim_train_run_save(sim_train_run_t *r, const char *dir, const char *what);

/* What the run writes at its end: --save, --export-safetensors, --trace,
 * --memory-timeline, each with its line. -1 or an exit code. */
int sim_train_run_outputs(sim_train_run_t *r);

/* Stop the watcher, give --metrics its name (after a failure too, with
 * the steps that completed), flush stdout (a lost report fails the run),
 * abort the MPI job after a failure, release everything. Returns the exit
 * code. */
int sim_train_run_end(sim_train_run_t *r, int exit_code);

/* Tokens of one step's global batch: world x micro-batch x context x grad-accum. */
long sim_train_tokens_per_step(const shs_train_config_t *cfg);

/* "what: LAST_ERROR" (what NULL: the last error alone) as train's error line. */
void sim_train_report_error(const char *what);

#endif
