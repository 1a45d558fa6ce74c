/* trace_net.h - the time of a trace's calls under the network model
 * (net.h): each record priced by its communicator's size and nodes.
 * What it is not: the network model (net.h, src/net/).
 */
#ifndef SHARDSIM_TRACE_NET_H
#define SHARDSIM_TRACE_NET_H

#include "shardsim/net.h"
#include "shardsim/trace.h"

/* Seconds for record r of trace t (its communicator decides n and, by
 * global rank / gpus_per_node, on how many nodes its ranks sit). An
 * all_to_allv with split sizes (r->v_bytes) moves v_bytes through this
 * rank: it is priced as the all_to_all whose (n-1)/n share is v_bytes.
 * With net->astra, ASTRA-sim's rules instead (algo unused; run
 * shs_astra_check_trace first: a call they cannot time gives NaN). */
double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r);

/* Whether some all_to_allv of t has split sizes (v_bytes): its members'
 * record times differ, and a call lasts as long as its busiest rank's. */
int shs_trace_has_uneven_calls(const shs_trace_t *t);
/* The time of the call each record takes part in: out[k] for rank r's
 * record i, k = the records of ranks 0..r-1 + i (a malloc'd array the
 * caller frees): the largest of its members' record times at its
 * communicator and sequence number (only an uneven all_to_allv's members
 * differ), a p2p or wait record's own time.
 * Errors: SHS_HOST_OOM. */
shs_status_t shs_net_call_times(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, double **out);

#endif
