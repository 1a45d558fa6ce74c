/* trace_net.h - time estimates for a trace's calls under an alpha-beta
 * network model.
 *
 * What it is: each call costs steps x (alpha + bytes per step / beta) for
 * its algorithm, with S the whole collective buffer (bytes, TOTAL scope),
 * n the communicator's size, alpha the link latency (s), beta the link
 * bandwidth (bytes/s):
 *   ring    all_reduce 2(n-1)(a + S/(n b)); all_gather, reduce_scatter,
 *           all_to_all, gather, scatter (n-1)(a + S/(n b)); broadcast,
 *           reduce (n-1)a + S/b (pipelined chain); barrier 2(n-1)a
 *   tree    all_reduce 2 d a + 2 S/b, broadcast / reduce d a + S/b with
 *           d = ceil(log2 n) (pipelined binary tree); barrier 2 d a; other
 *           ops as ring (NCCL has no tree for them)
 *   direct  every rank talks to every other at once over its one link:
 *           all_reduce 2(a + (n-1)S/(n b)); all_gather, reduce_scatter,
 *           all_to_all, gather, scatter a + (n-1)S/(n b); broadcast,
 *           reduce a + (n-1)S/b; barrier 2a
 *   send/recv a + bytes/b (each side); wait 0.
 * A communicator whose members sit on one node (global rank / gpus per
 * node) uses the intra-node alpha and beta, else the inter-node ones (the
 * slowest link bounds a ring). The figures busbw = algbw x 2(n-1)/n
 * (all_reduce), (n-1)/n (all_gather, reduce_scatter), 1 (others) are
 * nccl-tests'.
 * What it is not: a packet or congestion simulator (ASTRA-sim is); no
 * compute, so exposed time is not modeled.
 */
#ifndef SHARDSIM_TRACE_NET_H
#define SHARDSIM_TRACE_NET_H

#include "shardsim/trace.h"

typedef enum { SHS_ALGO_RING, SHS_ALGO_TREE, SHS_ALGO_DIRECT, SHS_NUM_ALGOS } shs_net_algo_t;
const char *shs_net_algo_name(shs_net_algo_t a);            /* "ring", "tree", "direct" */
int shs_net_algo_parse(const char *name, shs_net_algo_t *out); /* 0 ok, -1 unknown */

typedef struct {
    char name[128];
    int gpus_per_node;           /* ranks per node */
    double intra_bw, inter_bw;   /* bytes per second */
    double intra_lat, inter_lat; /* seconds */
} shs_net_t;

/* Presets: "hgx-h100" (8 GPUs per node, 400 GB/s and 936.25 ns as ASTRA-sim's
 * HGX-H100-validated; between nodes 50 GB/s, 5 us), "ring-50" (ASTRA-sim's
 * Ring_*npus: 50 GB/s, 500 ns, one node), "pcie" (8 per node, 25 GB/s, 2 us;
 * 12.5 GB/s, 10 us). GB = 1e9 bytes. Errors: SHS_INVALID_ARG (unknown name). */
shs_status_t shs_net_preset(const char *name, shs_net_t *out);
/* An ASTRA-sim analytical network YAML: `npus_count: [a, b]`, `bandwidth:
 * [GB/s, ...]`, `latency: [ns, ...]` (`topology` read and ignored):
 * dimension 1 is the node (gpus per node = its npus_count), dimension 2, if
 * any, the inter-node network. Errors: SHS_IO, SHS_PARSE (file:line). */
shs_status_t shs_net_load(const char *path, shs_net_t *out);

/* Seconds for one call on a communicator of n ranks, S bytes (TOTAL scope,
 * or the message for send/recv); `spans_nodes` picks inter-node links. */
double shs_net_time(const shs_net_t *net, shs_net_algo_t algo, shs_trace_op_t op, double S, int n, int spans_nodes);
/* nccl-tests' bus-bandwidth factor for op on n ranks. */
double shs_net_busbw_factor(shs_trace_op_t op, int n);
/* Seconds for record r of trace t (its communicator decides n and whether
 * it spans nodes). */
double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r);

#endif
