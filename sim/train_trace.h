/* train_trace.h - `shardsim train --trace DIR`: hook a recorder on every
 * rank's world communicator, and write the trace at the end.
 * What it is not: the recorder (src/trace_record.c). */
#ifndef SHARDSIM_SIM_TRAIN_TRACE_H
#define SHARDSIM_SIM_TRAIN_TRACE_H

#include "shardsim/trace_record.h"
#include "shardsim/train.h"

/* Create a recorder for the trainer's ranks and attach it to each rank's
 * world communicator. Errors as shs_trace_recorder_attach. */
shs_status_t sim_trace_start(shs_trainer_t *t, shs_trace_recorder_t **rec);
/* Build the trace and write DIR/rank<k>.trace; prints one line. Frees rec. */
shs_status_t sim_trace_finish(shs_trace_recorder_t *rec, const char *dir);

#endif
