/* train_trace.c - the --trace option of `shardsim train` (see train_trace.h). */
#include "train_trace.h"

#include <stdio.h>

shs_status_t sim_trace_start(shs_train_config_t *cfg, shs_trace_recorder_t **rec) {
    SHS_CHECK(shs_trace_recorder_create(rec, cfg->world_size));
    cfg->trace = *rec;
    return SHS_OK;
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
