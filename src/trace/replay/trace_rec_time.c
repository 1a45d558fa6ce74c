/* trace_rec_time.c - the alpha-beta time of one trace record (trace_net.h):
 * its communicator's size and nodes, its bytes.
 * What it is not: the network model (src/net/).
 */
#include "shardsim/trace_net.h"

#include <stdlib.h>

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
    if (r->op == SHS_OP_ALL_TO_ALLV && r->v_bytes && cm->size > 1) /* the (n-1)/n share the model moves is v_bytes */
        S = (double)r->v_bytes * cm->size / (cm->size - 1);
    return shs_net_time(net, algo, r->op, S, cm->size, nodes);
}

int shs_trace_has_uneven_calls(const shs_trace_t *t) {
    for (int g = 0; g < t->world; g++)
        for (size_t i = 0; i < t->ranks[g].n; i++)
            if (t->ranks[g].recs[i].op == SHS_OP_ALL_TO_ALLV && t->ranks[g].recs[i].v_bytes) return 1;
    return 0;
}

typedef struct {
    int32_t comm;
    int64_t seq;
    size_t k;     /* the record's index into the flat array */
} member_t;

static int cmp_member(const void *a, const void *b) {
    const member_t *x = a, *y = b;
    if (x->comm != y->comm) return x->comm < y->comm ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

shs_status_t shs_net_call_times(const shs_net_t *net, shs_net_algo_t algo, const shs_trace_t *t, double **out) {
    size_t total = shs_trace_num_records(t), na = 0, k = 0;
    double *tm = malloc((total ? total : 1) * sizeof *tm);
    if (!tm) return shs_set_error(SHS_HOST_OOM, "call times: out of memory for %zu records", total);
    for (int g = 0; g < t->world; g++)
        for (size_t i = 0; i < t->ranks[g].n; i++) {
            const shs_trace_rec_t *r = &t->ranks[g].recs[i];
            tm[k++] = shs_net_rec_time(net, algo, t, r);
            na += r->op == SHS_OP_ALL_TO_ALLV;
        }
    /* the members of an all_to_allv: grouped by (comm, seq), each given the group's longest time */
    member_t *m = na ? malloc(na * sizeof *m) : NULL;
    if (na && !m) {
        free(tm);
        return shs_set_error(SHS_HOST_OOM, "call times: out of memory for %zu all_to_allv records", na);
    }
    size_t j = 0;
    k = 0;
    for (int g = 0; g < t->world && na; g++)
        for (size_t i = 0; i < t->ranks[g].n; i++, k++)
            if (t->ranks[g].recs[i].op == SHS_OP_ALL_TO_ALLV)
                m[j++] = (member_t){t->ranks[g].recs[i].comm, t->ranks[g].recs[i].seq, k};
    if (na) qsort(m, na, sizeof *m, cmp_member);
    for (size_t a = 0; a < na;) {
        size_t b = a;
        double most = 0;
        while (b < na && m[b].comm == m[a].comm && m[b].seq == m[a].seq) {
            if (tm[m[b].k] > most) most = tm[m[b].k];
            b++;
        }
        for (size_t c = a; c < b; c++) tm[m[c].k] = most;
        a = b;
    }
    free(m);
    *out = tm;
    return SHS_OK;
}
