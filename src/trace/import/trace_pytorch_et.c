/* trace_pytorch_et.c - import PyTorch Execution Trace JSON (one file per
 * rank), the input of PARAM's et_replay and of Chakra's converter.
 *
 * Read: the "nodes" array (sorted by id = execution order). Fields, as
 * PyTorch's execution_trace_observer writes them and PARAM's et_replay
 * (commsTraceParser) reads them:
 *   "## process_group:init ##"  inputs[0] is a JSON string: a list of
 *       {pg_name, backend_id, ranks, group_size}; ranks [] means 0..size-1.
 *   "record_param_comms"  named attrs when present (collective_name,
 *       in_msg_nelems, out_msg_nelems, dtype, pg_name, pg_size /
 *       group_size; a "rank" attr is read too), else positional inputs, the
 *       arguments of RECORD_PARAM_COMMS: [tensors, seq, pg (backend id),
 *       rank, collective name, in_splits, out_splits, world size], or for
 *       wait/barrier [seq, pg, rank, name, ...]. Tensors are [id, storage,
 *       offset, numel, itemsize, device]; input_types give the dtype.
 * Inputs are "inputs": [...] (schema 1.0.1) or "inputs": {"values": [...],
 * "types": [...]} (1.0.2+); attrs are "attrs": [{name, type, value}].
 * Sizes: in_msg_nelems (else the input tensors' numel) x itemsize, the
 * node's input: one rank's part for all_gather, the whole input for
 * reduce_scatter, the whole send buffer for all_to_all(v) (et_replay
 * allocates an input of in_msg_nelems and splits it among the ranks)
 * (shs_trace_input_scope()).
 * Ranks: the rank field is group-local and maps through the group's rank
 * list to a global rank. ProcessGroupNCCL records opts.rootRank in it for
 * broadcast, reduce, gather and scatter: there it is the (group-local)
 * root, not the issuing rank. A file is one process's view (t->views):
 * every other collective must name the same rank, which is the file's;
 * rooted collectives, waits (PyTorch writes 0 there) and nodes without a
 * rank take it; a file of rooted collectives only takes the device index
 * of its tensors ("cuda:1"), else the file name's number. Members of a
 * group that no file traced are left out of the analysis
 * (shs_trace_rank_traced). Groups without a declaration are the identity
 * group "world". The default group (pg_name "0") declares the world size:
 * a group member or a record's rank beyond it is refused. A rank a node
 * gives must be one (0..SHS_TRACE_MAX_WORLD-1; -1 is refused, not
 * replaced). Tensor itemsizes must be 1, 2, 4 or 8 and agree with the
 * dtype the node names.
 * A call's src_line is its node's index in "nodes" + 1 (diagnoses name
 * it as nodes[index] and the node id the errors name).
 * What it is not: a reader of compute nodes or of tensor data.
 */
#include <stdlib.h>
#include <string.h>

#include "shardsim/trace_import.h"
#include "shardsim/features.h"
#include "trace/trace_json.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

typedef struct {
    char name[64];
    int64_t backend_id;
    int *ranks;           /* NULL: identity */
    int size;
    int comm;             /* trace comm index, -1 until used */
} pg_t;

typedef struct {
    const shs_trace_input_t *in;
    shs_trace_t *t;
    pg_t *pgs;
    int npgs;
    int world;            /* size of the default group "0" once declared, else 0 */
} et_t;

static shs_status_t nerr(const et_t *e, int64_t id, const char *what) {
    return shs_set_error(SHS_PARSE, "%s: node %lld: %s", e->in->name, (long long)id, what);
}

static json_t *node_values(json_t *node) {
    json_t *in = json_object_get(node, "inputs");
    if (json_is_object(in)) return json_object_get(in, "values");
    return in;
}

static json_t *node_types(json_t *node) {
    json_t *in = json_object_get(node, "inputs");
    if (json_is_object(in)) return json_object_get(in, "types");
    return json_object_get(node, "input_types");
}

/* A named attribute: "attrs": [{name, value}] or a top-level key. */
static json_t *attr(json_t *node, const char *name) {
    json_t *a = json_object_get(node, "attrs");
    size_t i;
    json_t *x;
    if (json_is_array(a))
        json_array_foreach(a, i, x) {
            json_t *n = json_object_get(x, "name");
            if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) return json_object_get(x, "value");
        }
    return json_object_get(node, name);
}

static shs_status_t read_pgs(et_t *e, json_t *node, int64_t id) {
    json_t *vals = node_values(node);
    json_t *s = json_is_array(vals) ? json_array_get(vals, 0) : NULL;
    if (!json_is_string(s)) return nerr(e, id, "process_group:init without its JSON string input");
    json_t *list = json_loads(json_string_value(s), 0, NULL);
    if (!json_is_array(list)) {
        json_decref(list);
        return nerr(e, id, "process_group:init input is not a JSON list");
    }
    size_t i;
    json_t *pg;
    shs_status_t st = SHS_OK;
    json_array_foreach(list, i, pg) {
        pg_t p = {.comm = -1};
        json_t *nm = json_object_get(pg, "pg_name"), *gs = json_object_get(pg, "group_size");
        int64_t v;
        if (json_is_string(nm)) snprintf(p.name, sizeof p.name, "%s", json_string_value(nm));
        else if (nm && !shs__json_int(nm, &v)) snprintf(p.name, sizeof p.name, "%lld", (long long)v);
        if (!shs__json_int(json_object_get(pg, "backend_id"), &v)) p.backend_id = v;
        int *ranks = NULL, n = 0;
        if (json_object_get(pg, "ranks") && shs__json_rank_list(json_object_get(pg, "ranks"), &ranks, &n)) {
            st = nerr(e, id, "process group 'ranks' is not a list of ranks in range");
            break;
        }
        if (gs && (shs__json_int(gs, &v) || v < 1 || v > SHS_TRACE_MAX_WORLD)) {
            free(ranks);
            st = nerr(e, id, "process group 'group_size' out of range");
            break;
        }
        p.size = n > 0 ? n : gs ? (int)v : 0;
        if (n > 0) p.ranks = ranks;
        else free(ranks);
        if (p.size < 1) { free(p.ranks); continue; } /* size unknown: treated as the identity world */
        pg_t *np = realloc(e->pgs, (size_t)(e->npgs + 1) * sizeof *np);
        if (!np) { free(p.ranks); st = shs_set_error(SHS_HOST_OOM, "out of memory"); break; }
        e->pgs = np;
        e->pgs[e->npgs++] = p;
    }
    json_decref(list);
    /* the default group (pg_name "0") declares the world: every group's ranks lie in it */
    for (int k = 0; k < e->npgs && st == SHS_OK; k++)
        if (strcmp(e->pgs[k].name, "0") == 0) e->world = e->pgs[k].size;
    for (int k = 0; k < e->npgs && st == SHS_OK && e->world > 0; k++)
        for (int q = 0; e->pgs[k].ranks && q < e->pgs[k].size; q++)
            if (e->pgs[k].ranks[q] >= e->world) {
                char m[192];
                snprintf(m, sizeof m, "process group '%s' names rank %d, beyond the world of %d ranks (the default "
                         "group '0')", e->pgs[k].name, e->pgs[k].ranks[q], e->world);
                st = nerr(e, id, m);
                break;
            }
    return st;
}

static pg_t *find_pg(et_t *e, const char *name, int64_t backend_id) {
    for (int i = 0; i < e->npgs; i++)
        if ((name && strcmp(e->pgs[i].name, name) == 0) || (!name && backend_id && e->pgs[i].backend_id == backend_id))
            return &e->pgs[i];
    return NULL;
}

/* Sum of numel and the item size of a tensor or (nested) list of tensors
 * ([id, storage, offset, numel, itemsize, device]). 0 ok; -1 malformed or
 * absurd with the reason in why[0..cap). An itemsize is the element size
 * of a dtype shardsim has (1, 2, 4 or 8 bytes): 0 or any other is refused,
 * not taken as 1. */
static int tensor_numel(json_t *v, uint64_t *numel, int64_t *itemsize, int depth, char *why, size_t cap) {
    if (!json_is_array(v) || depth > 4) {
        snprintf(why, cap, "is not a tensor descriptor or a list of them");
        return -1;
    }
    size_t n = json_array_size(v);
    if (n == 6 && json_is_integer(json_array_get(v, 0)) && json_is_string(json_array_get(v, 5))) {
        int64_t ne, is;
        if (shs__json_int(json_array_get(v, 3), &ne) || shs__json_int(json_array_get(v, 4), &is)) {
            snprintf(why, cap, "tensor numel or itemsize is not an integer");
            return -1;
        }
        if (ne < 0 || (uint64_t)ne > SHS_TRACE_MAX_BYTES) {
            snprintf(why, cap, "tensor numel %lld is negative or absurd", (long long)ne);
            return -1;
        }
        if (is != 1 && is != 2 && is != 4 && is != 8) {
            snprintf(why, cap, "tensor itemsize %lld is not an element size (1, 2, 4 or 8 bytes)", (long long)is);
            return -1;
        }
        *numel += (uint64_t)ne;
        *itemsize = is;
        if (*numel > SHS_TRACE_MAX_BYTES) {
            snprintf(why, cap, "tensors of %llu elements in all: absurd", (unsigned long long)*numel);
            return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (tensor_numel(json_array_get(v, i), numel, itemsize, depth + 1, why, cap)) return -1;
    return 0;
}

/* The device index of the first tensor descriptor in v ("cuda:1" -> 1), or -1. */
static int tensor_device(json_t *v, int depth) {
    if (!json_is_array(v) || depth > 4) return -1;
    size_t n = json_array_size(v);
    if (n == 6 && json_is_integer(json_array_get(v, 0)) && json_is_string(json_array_get(v, 5))) {
        const char *d = json_string_value(json_array_get(v, 5)), *c = strchr(d, ':');
        if (strncmp(d, "cuda", 4) != 0 || !c) return -1;
        char *end;
        long k = strtol(c + 1, &end, 10);
        return *end || end == c + 1 || k < 0 || k >= SHS_TRACE_MAX_WORLD ? -1 : (int)k;
    }
    for (size_t i = 0; i < n; i++) {
        int k = tensor_device(json_array_get(v, i), depth + 1);
        if (k >= 0) return k;
    }
    return -1;
}

static int is_rooted(shs_coll_op_t op) {
    return op == SHS_OP_BROADCAST || op == SHS_OP_REDUCE || op == SHS_OP_GATHER || op == SHS_OP_SCATTER;
}

static int itemsize_dtype(int64_t is, shs_dtype_t *d) {
    switch (is) {
    case 1: *d = SHS_U8; return 0;
    case 2: *d = SHS_BF16; return 0; /* ambiguous with f16; types say which when present */
    case 4: *d = SHS_F32; return 0;
    case 8: *d = SHS_F64; return 0;
    default: return -1;
    }
}

/* A split-size list: a JSON array of integers (positional inputs) or a
 * string "[a, b]" (attrs); 0 absent, 1 read, -1 malformed. */
static int split_list(json_t *v, int64_t **out, int *n) {
    *out = NULL;
    *n = 0;
    if (!v) return 0;
    int cut = 0;
    if (json_is_string(v)) return shs__int_list(json_string_value(v), out, n, &cut) || cut ? -1 : 1;
    if (!json_is_array(v) || json_array_size(v) > SHS_TRACE_MAX_WORLD) return -1;
    size_t k = json_array_size(v);
    if (!k) return 1;
    if (!(*out = malloc(k * sizeof **out))) return -1;
    for (size_t i = 0; i < k; i++) {
        int64_t x;
        if (shs__json_int(json_array_get(v, i), &x) || x < 0 || (uint64_t)x > SHS_TRACE_MAX_BYTES) {
            free(*out);
            *out = NULL;
            return -1;
        }
        (*out)[i] = x;
    }
    *n = (int)k;
    return 1;
}

/* An all_to_allv's v_bytes from its split sizes: attrs in_split_size /
 * out_split_size, else the positional inputs after the name. */
static int comm_is_world(const shs_trace_t *t, int comm) { return strcmp(t->comms[comm].name, "world") == 0; }

static shs_status_t split_bytes(et_t *e, json_t *node, json_t *vals, int base, int64_t id, int comm, int self,
                                uint64_t in_n, uint64_t out_n, size_t es, uint64_t *v) {
    int g = e->t->comms[comm].size;
    json_t *ai = attr(node, "in_split_size"), *ao = attr(node, "out_split_size");
    if (!ai && !ao && json_is_array(vals) && json_array_size(vals) > (size_t)base + 5) {
        ai = json_array_get(vals, (size_t)base + 4);
        ao = json_array_get(vals, (size_t)base + 5);
    }
    int64_t *a, *b;
    int na, nb;
    int ka = split_list(ai, &a, &na), kb = split_list(ao, &b, &nb);
    shs_status_t st = SHS_OK;
    char why[160], m[220];
    *v = 0;
    int want = na > nb ? na : nb; /* the default group's size is learnt file by file: the lists give it */
    if (ka < 0 || kb < 0) st = nerr(e, id, "all_to_allv split sizes are not lists of sizes");
    else if (want > g && comm_is_world(e->t, comm) && shs_trace_grow_identity_comm(e->t, "world", want, NULL) == SHS_OK)
        g = want;
    if (st != SHS_OK) {
    } else if ((na || nb) && shs__a2av_bytes(a, na, b, nb, g, self, in_n, out_n, es, v, why, sizeof why)) {
        snprintf(m, sizeof m, "all_to_allv split sizes: %s", why);
        st = nerr(e, id, m);
    }
    free(a);
    free(b);
    return st;
}

/* One record_param_comms node into *out. Its rank is left -1 where the node
 * does not say which rank issued it (rooted collectives carry the root
 * there); *dev gets the device index of its tensors, or -1. */
static shs_status_t comm_node(et_t *e, json_t *node, int64_t id, shs_trace_rec_t *out, int *dev) {
    json_t *vals = node_values(node), *types = node_types(node);
    json_t *nm = attr(node, "collective_name");
    int positional_short = json_is_array(vals) && json_is_integer(json_array_get(vals, 0));
    /* positional: [tensors, seq, pg, rank, name, ...] or [seq, pg, rank, name, ...] */
    int base = positional_short ? 0 : 1;
    if (!json_is_string(nm) && json_is_array(vals)) nm = json_array_get(vals, (size_t)base + 3);
    if (!json_is_string(nm)) return nerr(e, id, "record_param_comms without a collective name (attr or input)");
    shs_trace_rec_t r = shs_trace_rec_init();
    if (shs__torch_coll_op(json_string_value(nm), &r.op)) {
        char m[128];
        snprintf(m, sizeof m, "unknown collective '%.60s'", json_string_value(nm));
        return nerr(e, id, m);
    }
    if (shs_coll_op_is_p2p(r.op)) return nerr(e, id, "send/recv in an execution trace: peer ranks are not recorded");
    /* group: named pg_name, else positional pg handle */
    json_t *pgn = attr(node, "pg_name");
    pg_t *pg = NULL;
    int64_t v;
    if (json_is_string(pgn)) pg = find_pg(e, json_string_value(pgn), 0);
    else if (json_is_array(vals) && !shs__json_int(json_array_get(vals, (size_t)base + 1), &v) && v) pg = find_pg(e, NULL, v);
    /* rank (group-local) */
    /* a rank the node gives (attr, or an integer in its positional slot)
     * must be one: a negative one is garbage, not "the file's rank" */
    int64_t local = -1;
    int has_rank = 0;
    json_t *rk = attr(node, "rank");
    if (rk && shs__json_int(rk, &local)) return nerr(e, id, "'rank' is not an integer");
    if (rk) has_rank = 1;
    else if (json_is_array(vals) && !shs__json_int(json_array_get(vals, (size_t)base + 2), &local)) has_rank = 1;
    if (has_rank && (local < 0 || local >= SHS_TRACE_MAX_WORLD)) {
        char m[128];
        snprintf(m, sizeof m, "rank %lld is negative or beyond %d ranks", (long long)local, SHS_TRACE_MAX_WORLD);
        return nerr(e, id, m);
    }
    int64_t gsize = 0;
    json_t *gs = attr(node, "group_size");
    if (!gs) gs = attr(node, "pg_size");
    if (gs && (shs__json_int(gs, &gsize) || gsize < 0 || gsize > SHS_TRACE_MAX_WORLD)) return nerr(e, id, "bad group size");
    if (!gs && json_is_array(vals) && json_array_size(vals) > (size_t)base + 6 &&
        !shs__json_int(json_array_get(vals, (size_t)base + 6), &v) && v > 0 && v <= SHS_TRACE_MAX_WORLD)
        gsize = v;
    /* a rooted collective's rank field is its root (PyTorch records
     * opts.rootRank there), group-local; the issuing rank is the file's */
    int rooted = is_rooted(r.op), global = -1;
    *dev = tensor_device(json_is_array(vals) && !positional_short ? json_array_get(vals, 0) : NULL, 0);
    if (rooted) {
        int64_t gs_known = pg ? pg->size : gsize;
        if (has_rank && gs_known > 0 && local >= gs_known) {
            char m[128];
            snprintf(m, sizeof m, "root %lld outside its process group of %lld ranks", (long long)local, (long long)gs_known);
            return nerr(e, id, m);
        }
        r.root = has_rank ? (int32_t)local : 0;
    } else if (pg && pg->ranks) {
        if (local < 0 || local >= pg->size) return nerr(e, id, "rank outside its process group");
        global = pg->ranks[local];
    } else if (has_rank) {
        global = (int)local;
    }
    if (e->world > 0 && global >= e->world) {
        char m[160];
        snprintf(m, sizeof m, "rank %d beyond the world of %d ranks declared by process_group:init (the default group '0')",
                 global, e->world);
        return nerr(e, id, m);
    }
    r.rank = global;
    int reach = global > (int)r.root ? global : (int)r.root; /* the highest group-local rank the node names */
    if (pg && pg->ranks) {
        if (pg->comm < 0) {
            char cname[80];
            snprintf(cname, sizeof cname, "pg%s", pg->name);
            if (shs_trace_add_comm(e->t, cname, pg->size, pg->ranks, &pg->comm) != SHS_OK) return nerr(e, id, shs_last_error());
        }
        r.comm = pg->comm;
    } else {
        int size = pg ? pg->size : (int)gsize;
        if (size <= reach) size = reach + 1;
        if (shs_trace_grow_identity_comm(e->t, "world", size, &r.comm) != SHS_OK) return nerr(e, id, shs_last_error());
    }
    if (r.op != SHS_OP_WAIT && r.op != SHS_OP_BARRIER) {
        uint64_t in_n = 0, out_n = 0;
        int64_t is = 0, x;
        json_t *a_in = attr(node, "in_msg_nelems"), *a_out = attr(node, "out_msg_nelems"), *a_dt = attr(node, "dtype");
        if (a_in) {
            if (shs__json_int(a_in, &x) || x < 0 || (uint64_t)x > SHS_TRACE_MAX_BYTES) return nerr(e, id, "in_msg_nelems negative or absurd");
            in_n = (uint64_t)x;
            if (a_out && (shs__json_int(a_out, &x) || x < 0 || (uint64_t)x > SHS_TRACE_MAX_BYTES)) return nerr(e, id, "out_msg_nelems negative or absurd");
            out_n = a_out ? (uint64_t)x : in_n;
        } else if (json_is_array(vals) && !positional_short) {
            char why[128], m[192];
            if (tensor_numel(json_array_get(vals, 0), &in_n, &is, 0, why, sizeof why)) {
                snprintf(m, sizeof m, "input tensor: %s", why);
                return nerr(e, id, m);
            }
            json_t *outs = json_object_get(node, "outputs");
            if (json_is_object(outs)) outs = json_object_get(outs, "values");
            int64_t is2 = 0;
            if (json_is_array(outs) && json_array_size(outs) > 0 &&
                tensor_numel(json_array_get(outs, 0), &out_n, &is2, 0, why, sizeof why)) {
                snprintf(m, sizeof m, "output tensor: %s", why);
                return nerr(e, id, m);
            }
        }
        size_t es = 0;
        const char *ty0 = json_is_array(types) ? json_string_value(json_array_get(types, 0)) : NULL, *dn = NULL;
        shs_dtype_t d;
        char m[192];
        if (json_is_string(a_dt)) {
            dn = json_string_value(a_dt);
            if (shs__torch_dtype(dn, &r.dtype, &es)) {
                snprintf(m, sizeof m, "dtype '%.60s' is not a torch dtype", dn);
                return nerr(e, id, m);
            }
        } else if (ty0 && !shs__torch_dtype(ty0, &r.dtype, &es)) {
            dn = ty0;
        } else if (ty0 && strstr(ty0, "Tensor(")) {
            snprintf(m, sizeof m, "input type '%.60s' has no torch dtype", ty0);
            return nerr(e, id, m);
        } else if (is && !itemsize_dtype(is, &d)) {
            r.dtype = d;
            es = (size_t)is;
        }
        if (is && es && es != (size_t)is) {
            snprintf(m, sizeof m, "dtype %.60s (%zu bytes) but the tensor's itemsize is %lld",
                     r.dtype != SHS_TRACE_NONE ? shs_dtype_name((shs_dtype_t)r.dtype) : dn ? dn : "?", es,
                     (long long)is);
            return nerr(e, id, m);
        }
        if (!es) es = 1; /* no dtype given: elements counted as bytes */
        r.count = r.op == SHS_OP_REDUCE_SCATTER && out_n ? out_n : in_n;
        r.bytes = in_n * es;
        if (r.op == SHS_OP_ALL_TO_ALLV && has_rank)
            SHS_CHECK(split_bytes(e, node, vals, base, id, r.comm, (int)local, in_n, out_n, es, &r.v_bytes));
        r.scope = shs_trace_input_scope(r.op);
        if (r.op == SHS_OP_ALL_REDUCE || r.op == SHS_OP_REDUCE_SCATTER || r.op == SHS_OP_REDUCE) r.redop = SHS_SUM;
    }
    *out = r;
    return SHS_OK;
}

static int cmp_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

shs_status_t shs_trace_import_pytorch_et(shs_trace_t *t, const shs_trace_input_t *in) {
    snprintf(t->format, sizeof t->format, "pytorch-et");
    json_error_t jerr;
    json_t *root = json_loadb(in->buf, in->len, 0, &jerr);
    if (!root) return shs_set_error(SHS_PARSE, "%s:%d: malformed JSON: %s", in->name, jerr.line, jerr.text);
    et_t e = {.in = in, .t = t};
    shs_status_t st = SHS_OK;
    json_t *nodes = json_object_get(root, "nodes");
    int64_t (*order)[2] = NULL; /* (id, index) of communication nodes */
    size_t norder = 0;
    shs_trace_rec_t *recs = NULL;
    if (!json_is_array(nodes)) {
        st = shs_set_error(SHS_PARSE, "%s: not a PyTorch execution trace (no \"nodes\" array)", in->name);
        goto out;
    }
    order = malloc((json_array_size(nodes) + 1) * sizeof *order);
    if (!order) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); goto out; }
    size_t i;
    json_t *n;
    json_array_foreach(nodes, i, n) {
        json_t *nm = json_object_get(n, "name");
        int64_t id;
        if (!json_is_object(n) || !json_is_string(nm)) { st = shs_set_error(SHS_PARSE, "%s: nodes[%zu]: not an object with a name", in->name, i); goto out; }
        if (shs__json_int(json_object_get(n, "id"), &id)) { st = shs_set_error(SHS_PARSE, "%s: nodes[%zu]: no integer id", in->name, i); goto out; }
        const char *s = json_string_value(nm);
        if (strcmp(s, "## process_group:init ##") == 0) {
            if ((st = read_pgs(&e, n, id)) != SHS_OK) goto out;
        } else if (strcmp(s, "record_param_comms") == 0) {
            order[norder][0] = id;
            order[norder++][1] = (int64_t)i;
        }
    }
    qsort(order, norder, sizeof *order, cmp_id);
    /* waits carry no usable rank (PyTorch writes 0) and rooted collectives
     * their root: they take the file's rank, which the other collectives
     * tell, else the device of the tensors (cuda:N), else the file name */
    recs = malloc((norder ? norder : 1) * sizeof *recs);
    if (!recs) { st = shs_set_error(SHS_HOST_OOM, "out of memory"); goto out; }
    t->views = 1; /* one process's view: the group's other members were not traced here */
    int file_rank = -1, dev_rank = -1;
    size_t first = 0;
    for (size_t k = 0; k < norder && st == SHS_OK; k++) {
        int dev = -1;
        st = comm_node(&e, json_array_get(nodes, (size_t)order[k][1]), order[k][0], &recs[k], &dev);
        recs[k].src_line = order[k][1] + 1; /* nodes[i], from 1 (0 is "unknown") */
        if (st == SHS_OK && dev_rank < 0) dev_rank = dev;
        if (st != SHS_OK || recs[k].op == SHS_OP_WAIT || recs[k].rank < 0) continue;
        if (file_rank < 0) {
            file_rank = recs[k].rank;
            first = k;
        } else if (recs[k].rank != file_rank) { /* an execution trace is one process's */
            st = shs_set_error(SHS_PARSE, "%s: node %lld: rank %d, but node %lld says rank %d (an execution trace "
                               "is one rank's)", in->name, (long long)order[k][0], recs[k].rank,
                               (long long)order[first][0], file_rank);
        }
    }
    if (file_rank < 0) file_rank = dev_rank >= 0 ? dev_rank : in->rank >= 0 ? in->rank : 0;
    if (st == SHS_OK && norder > 0 && e.world > 0 && file_rank >= e.world)
        st = shs_set_error(SHS_PARSE, "%s: rank %d (from the file name) is beyond the world of %d ranks declared by "
                           "process_group:init", in->name, file_rank, e.world);
    for (size_t k = 0; k < norder && st == SHS_OK; k++) {
        if (recs[k].op == SHS_OP_WAIT) {
            recs[k].rank = file_rank;
            st = shs_trace_grow_identity_comm(t, "world", file_rank + 1, &recs[k].comm);
            if (st != SHS_OK) break;
        } else if (recs[k].rank < 0) {
            recs[k].rank = file_rank;
            if (strcmp(t->comms[recs[k].comm].name, "world") == 0 &&
                (st = shs_trace_grow_identity_comm(t, "world", file_rank + 1, NULL)) != SHS_OK)
                break;
        }
        if (shs_trace_append(t, &recs[k]) != SHS_OK)
            st = shs_set_error(SHS_PARSE, "%s: node %lld: %s", in->name, (long long)order[k][0], shs_last_error());
    }
out:
    free(order);
    free(recs);
    for (int k = 0; k < e.npgs; k++) free(e.pgs[k].ranks);
    free(e.pgs);
    json_decref(root);
    return st;
}

#else

shs_status_t shs_trace_import_pytorch_et(shs_trace_t *t, const shs_trace_input_t *in) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: PyTorch ET is JSON: reading it %s", in->name,
                         shs_feature_missing(SHS_FEATURE_JANSSON));
}

#endif
