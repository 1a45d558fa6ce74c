/* replay_timing.h - the timing report of `shardsim replay --network`. */
#ifndef SHARDSIM_SIM_REPLAY_TIMING_H
#define SHARDSIM_SIM_REPLAY_TIMING_H

#include "shardsim/trace_net.h"

/* Print per-rank totals, per-op counts/bytes/time/algbw/busbw and the 10
 * most expensive calls under `algo`; with `compare`, per-op times under
 * ring, tree and direct side by side. */
void sim_print_timing(const shs_trace_t *t, const shs_net_t *net, shs_net_algo_t algo, int compare);

#endif
