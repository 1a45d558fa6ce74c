/* trace_astra.c - import ASTRA-sim 1.0 text workloads.
 *
 * Format (ASTRA-sim 1.0, inputs/workload/ASTRA-sim-1.0): line 1 the
 * parallelism (DATA, MODEL, HYBRID_*, MICRO, ...; first word read), line 2
 * the layer count L, then L lines
 *   name reserved fwd_comp fwd_type fwd_bytes ig_comp ig_type ig_bytes wg_comp wg_type wg_bytes update_delay
 * with comm types NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL and
 * sizes in bytes. ASTRA-sim 1.0 hands a size to Sys::generate_<collective>
 * unchanged (Layer::issue_*_comm), as it does a Chakra comm_size, so both
 * mean one rank's input: the buffer for all-reduce, one rank's part for
 * all-gather (its Ring: final = size x N), the whole input for
 * reduce-scatter, a rank's whole send buffer for all-to-all (size / N to
 * each peer): shs_trace_input_scope() of the op. One training iteration is
 * expanded onto N ranks (in->world, default 8), all in one "world"
 * communicator: forward comms layer 0..L-1 (marker fwd/<layer>), then for
 * layers L-1..0 the input-gradient and weight-gradient comms
 * (bwd-ig/<layer>, bwd-wg/<layer>). Compute times are not kept.
 * What it is not: a reader of the newer Chakra-based workloads (trace_chakra.c),
 * or of model-parallel groups (HYBRID comms all go to the world here).
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "trace/trace_util.h"

#define ASTRA_DEFAULT_WORLD 8
#define ASTRA_MAX_RECORDS ((uint64_t)100000000)

static shs_status_t perr(const shs_trace_input_t *in, long line, const char *fmt, const char *arg) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    return shs_set_error(SHS_PARSE, "%s:%ld: %s", in->name, line, msg);
}

static int comm_type(shs__tok_t t, shs_coll_op_t *op, int *none) {
    *none = 0;
    if (shs__tok_is(t, "NONE")) { *none = 1; return 0; }
    if (shs__tok_is(t, "ALLREDUCE")) *op = SHS_OP_ALL_REDUCE;
    else if (shs__tok_is(t, "ALLGATHER")) *op = SHS_OP_ALL_GATHER;
    else if (shs__tok_is(t, "REDUCESCATTER")) *op = SHS_OP_REDUCE_SCATTER;
    else if (shs__tok_is(t, "ALLTOALL")) *op = SHS_OP_ALL_TO_ALL;
    else return -1;
    return 0;
}

typedef struct {
    char name[64];
    shs_coll_op_t op[3];
    int none[3];
    uint64_t bytes[3];
} layer_t;

shs_status_t shs_trace_import_astra(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "astra");
    int world = in->world > 0 ? in->world : ASTRA_DEFAULT_WORLD;
    long lineno = 0, want = -1, got = 0;
    layer_t *layers = NULL;
    shs_status_t st = SHS_OK;
    char buf[64];
    for (size_t i = 0; i < in->len && st == SHS_OK;) {
        size_t j = i;
        while (j < in->len && in->buf[j] != '\n') j++;
        lineno++;
        shs__tok_t tk[16];
        int nt = shs__tokens(in->buf + i, j - i, tk, 15);
        i = j + 1;
        if (nt == 0) continue;
        if (lineno == 1) continue; /* parallelism kind */
        if (want < 0) {
            uint64_t v;
            if (nt != 1 || shs__parse_u64(tk[0].s, tk[0].n, 0, &v) || v > 1000000)
                return perr(in, lineno, "line 2 must be the layer count (0..1000000)%s", NULL);
            want = (long)v;
            if (!(layers = calloc(v ? v : 1, sizeof *layers))) return shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
            continue;
        }
        if (got == want) { st = perr(in, lineno, "more layer lines than the declared count%s", NULL); break; }
        if (nt != 12) { st = perr(in, lineno, "a layer line has 12 fields (name -1 fwd_comp fwd_type fwd_bytes ig_comp ig_type ig_bytes wg_comp wg_type wg_bytes delay)%s", NULL); break; }
        layer_t *L = &layers[got];
        shs__tok_copy(tk[0], L->name, sizeof L->name);
        for (int k = 0; k < 3 && st == SHS_OK; k++) {
            uint64_t comp, b;
            if (shs__parse_u64(tk[2 + 3 * k].s, tk[2 + 3 * k].n, 0, &comp)) {
                int64_t neg;
                if (shs__parse_i64(tk[2 + 3 * k].s, tk[2 + 3 * k].n, &neg) || neg < -1) st = perr(in, lineno, "bad compute time '%s'", shs__tok_copy(tk[2 + 3 * k], buf, sizeof buf));
            }
            if (st != SHS_OK) break;
            if (comm_type(tk[3 + 3 * k], &L->op[k], &L->none[k])) { st = perr(in, lineno, "unknown comm type '%s'", shs__tok_copy(tk[3 + 3 * k], buf, sizeof buf)); break; }
            if (shs__parse_u64(tk[4 + 3 * k].s, tk[4 + 3 * k].n, 0, &b) || b > SHS_TRACE_MAX_BYTES) { st = perr(in, lineno, "bad or absurd comm size '%s' (bytes)", shs__tok_copy(tk[4 + 3 * k], buf, sizeof buf)); break; }
            L->bytes[k] = b;
        }
        got++;
    }
    if (st == SHS_OK && want < 0) st = perr(in, lineno, "truncated: no layer count%s", NULL);
    if (st == SHS_OK && got != want) {
        char m[96];
        snprintf(m, sizeof m, "truncated: %ld of %ld layer lines", got, want);
        st = perr(in, lineno, "%s", m);
    }
    if (st == SHS_OK && (uint64_t)world * (uint64_t)want * 3 > ASTRA_MAX_RECORDS)
        st = shs_set_error(SHS_INVALID_ARG, "%s: %d ranks x %ld layers is too large to expand", in->name, world, want);
    int wc = -1;
    if (st == SHS_OK && shs_trace_add_comm(t, "world", world, NULL, &wc) != SHS_OK) st = SHS_INVALID_ARG;
    for (int r = 0; r < world && st == SHS_OK; r++) {
        /* forward, then backward in reverse layer order: input gradient, weight gradient */
        for (long pass = 0; pass < 3 * want && st == SHS_OK; pass++) {
            long l;
            int k;
            if (pass < want) { l = pass; k = 0; }
            else { l = want - 1 - (pass - want) / 2; k = 1 + (int)((pass - want) % 2); }
            const layer_t *L = &layers[l];
            if (L->none[k]) continue;
            shs_trace_rec_t rec = shs_trace_rec_init();
            char m[96];
            snprintf(m, sizeof m, "%s/%s", k == 0 ? "fwd" : k == 1 ? "bwd-ig" : "bwd-wg", L->name);
            rec.rank = r;
            rec.comm = wc;
            rec.op = L->op[k];
            rec.bytes = L->bytes[k];
            rec.scope = shs_trace_input_scope(rec.op);
            if (rec.op != SHS_OP_ALL_GATHER && rec.op != SHS_OP_ALL_TO_ALL) rec.redop = SHS_SUM;
            rec.marker = shs_trace_intern(t, m);
            if (rec.marker == UINT32_MAX) st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", in->name);
            else if (shs_trace_append(t, &rec) != SHS_OK)
                st = shs_set_error(SHS_PARSE, "%s: layer %s: %s", in->name, L->name, shs_last_error());
        }
    }
    free(layers);
    return st;
}
