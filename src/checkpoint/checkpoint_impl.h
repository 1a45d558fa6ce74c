/* checkpoint_impl.h - private to src/checkpoint/: the opened checkpoint's
 * state (read by checkpoint_read.c, used by resume in checkpoint.c) and the
 * path helper the writer and the reader share.
 * What it is not: the format (README.md "Checkpoints").
 */
#ifndef SHARDSIM_CHECKPOINT_IMPL_H
#define SHARDSIM_CHECKPOINT_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "shardsim/checkpoint.h"

#define CK_PATH 4400 /* dir (< 4096) + / + a file name (< 256) */

struct shs_checkpoint {
    char dir[4096];
    shs_checkpoint_meta_t meta;
    shs_layout_t layout;
    uint64_t generation;
    float *data;           /* per unit: params (numel) then state_per_param arrays (numel each) */
    size_t *unit_off;      /* per unit: start in data */
};

/* The argument of the save and resume jobs that run on every rank. */
typedef struct {
    shs_trainer_t *t;
    shs_checkpoint_writer_t *w;
    const shs_checkpoint_t *ck;
} shs__ck_job_arg_t;

/* A config's SHS_DTYPE_DEFAULT resolved (strategy.h): param f32, reduce the param dtype. */
static inline void shs__ck_resolve_dtypes(shs_dtype_t param, shs_dtype_t reduce, shs_dtype_t *param_out,
                                          shs_dtype_t *reduce_out) {
    *param_out = param == SHS_DTYPE_DEFAULT ? SHS_F32 : param;
    *reduce_out = reduce == SHS_DTYPE_DEFAULT ? *param_out : reduce;
}

static inline void shs__ck_join(char *out, size_t len, const char *dir, const char *name) {
    snprintf(out, len, "%s/%s", dir, name);
}

#endif
