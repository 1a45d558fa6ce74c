/* train_options.h - the options of `shardsim train`: its option table
 * (args.h), --help, and the checks between options, into train_opts_t.
 * What it is not: the run (cmd_train.c). */
#ifndef SHARDSIM_SIM_TRAIN_OPTIONS_H
#define SHARDSIM_SIM_TRAIN_OPTIONS_H

#include "test_fault.h"
#include "shardsim/ds_config.h"
#include "shardsim/hf_config.h"
#include "shardsim/train.h"

typedef struct {
    shs_train_config_t cfg;
    const char *data_path;
    const char *model_file;   /* --model-file: a described model instead of the GPT */
    const char *hf_config;    /* --hf-config: a Hugging Face config.json (shape in cfg: arch, llama / model) */
    shs_hf_config_t hf;       /* its contents (torch_dtype, not_applied: for the header) */
    long steps;
    int check_ddp;
    long inject_bitflip;   /* step after which to flip a parameter bit (0: never) */
    int device_mem_given;
    const char *save_dir, *resume_dir, *export_path; /* checkpoint.h, safetensors.h */
    long save_every;       /* also save after every this many steps (0: only at the end) */
    const char *trace_dir; /* --trace: record every collective of every rank */
    const char *metrics_path; /* --metrics: a JSON line per step (train_metrics.h) */
    const char *timeline_path; /* --memory-timeline: SVG of rank 0's memory over the last step */
    int backend_mpi;       /* --backend mpi: this process is one rank of the MPI job */
    int world_given;
    int loss_bits;         /* --loss-bits: also print each loss as its f32 bits */
    double progress_s;     /* --progress: speak on stderr when a phase runs longer (0: never) */
    const char *strategy_alias; /* --strategy given as another tool's name (strategy_names.h), else NULL */
    const char *ds_path;   /* --ds-config (NULL: none): ds, ds_src valid */
    shs_ds_config_t ds;
    shs_ds_source_t ds_src[SHS_DS_NUM_SETTINGS];
    sim_test_fault_t fault;   /* SHS_TEST_FAULT: the test suite's planted fault (test_fault.h) */
} train_opts_t;

/* Parse argv (argv[0] "train") into o. Returns -1 to continue, or an exit
 * code (--help: 0; a usage error: 2). Under --backend mpi the world size is
 * the job's: sim_train_check_shard_group then checks it. */
int sim_train_parse_args(int argc, char **argv, train_opts_t *o);

/* Hybrid sharding's group size must divide the world size: a usage error
 * (exit 2) with the sizes named; -1 when fine. */
int sim_train_check_shard_group(const shs_train_config_t *c);

#endif
