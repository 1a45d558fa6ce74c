/* compare.h - `shardsim compare` in three parts: the command line read into
 * a job (compare_parse.c), one meta run per table row with its closed forms
 * and step-time estimate (compare_run.c), the table / CSV / JSON
 * (compare_print.c); cmd_compare.c runs them in turn.
 * What it is not: the meta backend or the time model (src/).
 */
#ifndef SHARDSIM_SIM_COMPARE_H
#define SHARDSIM_SIM_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shardsim/ds_config.h"
#include "shardsim/estimate.h"
#include "shardsim/gpu_memory.h"
#include "shardsim/meta_run.h"

/* What the command line asked for. */
typedef struct {
    shs_meta_config_t base;      /* the job every row varies (strategy, recompute, offload) */
    char model_name[768];        /* for the header */
    shs_hw_t hw;                 /* the GPU and its network */
    size_t device_mem;           /* bytes per GPU for the "fits" column (gmp.board_bytes) */
    shs_gpu_mem_preset_t gmp;    /* the board's memory and a run's fixed costs (gpu_memory.h) */
    int board_given;             /* --device-mem replaced the preset's board memory */
    shs_framework_t framework;   /* --framework, or --ds-config's DeepSpeed; DEFAULT: each row's */
    int grad_accum_dtype_given, reduce_dtype_given; /* else PyTorch rows take f32 (compare_run.c) */
    double eff;                  /* --efficiency; 0: the GPU's */
    shs_net_algo_t algo;         /* --algo; SHS_NUM_ALGOS: auto */
    shs_nccl_proto_t proto;      /* --proto; SHS_NUM_PROTOS: auto */
    const char *format, *plot, *output, *strategies; /* strategies NULL: all */
    int variants_all;            /* 1: plain, +ckpt, +offload, +ckpt+offload per strategy */
    int zero_paper;              /* --accounting zero-paper */
    int ds_rows;                 /* --ds-config without --variants: one row, the config's offload */
    const shs_ds_config_t *ds;   /* --ds-config, or NULL */
    shs_ds_source_t ds_src[SHS_DS_NUM_SETTINGS];
    shs_recompute_t recompute;   /* what the checkpointing variants recompute */
} sim_compare_job_t;

/* One row of the table: a strategy and variant, its meta run and figures. */
typedef struct {
    char name[48];
    shs_strategy_kind_t kind;
    int ckpt;
    shs_offload_t offload;
    shs_meta_config_t cfg;
    shs_meta_result_t res;
    const shs_meta_rank_result_t *worst;
    shs_gpu_states_t form;       /* the framework's model states, closed form (gpu_memory.h) */
    shs_framework_t framework;   /* whose GPU run the row's memory models (resolved) */
    shs_gpu_mem_report_t gm;     /* allocated, reserved, fixed and total on the board */
    shs_zero_states_t paper, paper_measured; /* the ZeRO paper's categories: its forms, and measured */
    double paper_total, paper_sent;
    uint64_t sent[SHS_NUM_COLL_OPS], sent_total, calls;
    shs_step_estimate_t est;
    double recompute_flops, hfu; /* FLOPs the recompute adds (measured: against the same run keeping
                                  * every activation) and hardware FLOP utilisation counting them */
    char notes[640];
    int fits;
} sim_compare_row_t;

/* Read argv into *job. Returns -1 to go on, else the exit code (usage
 * errors 2, having said why). */
int sim_compare_parse(int argc, char **argv, sim_compare_job_t *job);
/* Run every selected row (*rows allocated; free with sim_compare_free).
 * Returns SIM_EXIT_OK or an exit code, having said why. */
int sim_compare_run(const sim_compare_job_t *job, sim_compare_row_t **rows, int *nrows);
void sim_compare_free(sim_compare_row_t *rows, int nrows);
/* The rows as a text table, CSV or JSON (job->format) on `out`. Returns an exit code. */
/* The suffix a checkpointing row's name carries for tc's recompute policy:
 * +ckpt (full), +sel (Megatron's selective), +sac-op, +sac-N (torchtitan). */
void sim_compare_ckpt_suffix(char *buf, size_t n, const shs_train_config_t *tc);
int sim_compare_print(FILE *out, const sim_compare_job_t *job, const sim_compare_row_t *rows, int nrows);

#endif
