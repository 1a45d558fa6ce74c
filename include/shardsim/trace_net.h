/* trace_net.h - the time of a trace's calls under the network model
 * (net.h): each record priced by its communicator's size and nodes.
 * What it is not: the network model (net.h, src/net/).
 */
#ifndef SHARDSIM_TRACE_NET_H
#define SHARDSIM_TRACE_NET_H

#include "shardsim/net.h"
#include "shardsim/trace.h"

/* Seconds for record r of trace t (its communicator decides n and, by
 * global rank / gpus_per_node, on how many nodes its ranks sit). With
 * net->astra, ASTRA-sim's rules instead (algo unused; run
 * shs_astra_check_trace first: a call they cannot time gives NaN). */
double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r);

#endif
