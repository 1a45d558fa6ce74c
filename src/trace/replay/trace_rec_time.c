/* trace_rec_time.c - the alpha-beta time of one trace record (trace_net.h):
 * its communicator's size and nodes, its bytes.
 * What it is not: the network model (src/net/).
 */
#include "shardsim/trace_net.h"

#include "trace/trace_util.h"

/* Nodes that the sorted-or-not global ranks sit on (rank / gpus_per_node). */
static int count_nodes(const int *ranks, int n, int gpus_per_node) {
    int nodes = n > 0, sorted = 1;
    for (int k = 1; k < n && sorted; k++) sorted = ranks[k] / gpus_per_node >= ranks[k - 1] / gpus_per_node;
    for (int k = 1; k < n; k++) {
        int node = ranks[k] / gpus_per_node, seen = 0;
        if (sorted) seen = node == ranks[k - 1] / gpus_per_node;
        else
            for (int j = 0; j < k && !seen; j++) seen = ranks[j] / gpus_per_node == node;
        nodes += !seen;
    }
    return nodes;
}

double shs_net_rec_time(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, const shs_trace_rec_t *r) {
    if (net->astra) return shs_astra_rec_time(&net->anet, &net->asys, t, r);
    const shs_trace_comm_t *cm = &t->comms[r->comm];
    int p2p = shs_coll_op_is_p2p(r->op);
    int nodes = p2p ? 1 + (r->rank / net->gpus_per_node != r->peer / net->gpus_per_node)
                    : count_nodes(cm->ranks, cm->size, net->gpus_per_node);
    double S = (double)shs_trace_rec_bytes(t, r, p2p ? SHS_BYTES_PER_RANK : SHS_BYTES_TOTAL);
    return shs_net_time(net, algo, r->op, S, cm->size, nodes);
}
