/* train_trace.c - the --trace option of `shardsim train` (see train_trace.h). */
#include "train_trace.h"

#include <stdio.h>

static shs_status_t attach_job(shs_rank_ctx_t *ctx, void *arg) {
    return shs_trace_recorder_attach(arg, ctx->comm, ctx->rank, NULL);
}

shs_status_t sim_trace_start(shs_trainer_t *t, shs_trace_recorder_t **rec) {
    SHS_CHECK(shs_trace_recorder_create(rec, shs_trainer_world_size(t)));
    shs_status_t st = shs_trainer_run(t, attach_job, *rec);
    if (st != SHS_OK) {
        shs_trace_recorder_free(*rec);
        *rec = NULL;
    }
    return st;
}

shs_status_t sim_trace_finish(shs_trace_recorder_t *rec, const char *dir) {
    shs_trace_t *t;
    shs_status_t st = shs_trace_recorder_finish(rec, &t);
    shs_trace_recorder_free(rec);
    if (st != SHS_OK) return st;
    st = shs_trace_write_dir(t, dir);
    if (st == SHS_OK)
        printf("trace: %zu collectives of %d ranks written to %s/rank<k>.trace (shardsim replay %s)\n",
               shs_trace_num_records(t), t->world, dir, dir);
    shs_trace_free(t);
    return st;
}
