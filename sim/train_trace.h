/* train_trace.h - `shardsim train --trace DIR`: a recorder for the trainer
 * to hook on every rank's world communicator before its strategy splits it
 * (so hybrid sharding's shard and replica groups are recorded too), and the
 * trace written at the end.
 * What it is not: the recorder (src/trace/trace_record.c). */
#ifndef SHARDSIM_SIM_TRAIN_TRACE_H
#define SHARDSIM_SIM_TRAIN_TRACE_H

#include "shardsim/trace_record.h"
#include "shardsim/train.h"

/* Create a recorder for cfg's world_size ranks and set cfg->trace to it:
 * the trainer then made from cfg records every collective of every rank
 * from its start. Errors as shs_trace_recorder_create. */
shs_status_t sim_trace_start(shs_train_config_t *cfg, shs_trace_recorder_t **rec);
/* Build the trace and write DIR/rank<k>.trace; prints one line. Frees rec. */
shs_status_t sim_trace_finish(shs_trace_recorder_t *rec, const char *dir);

#endif
