/* trace_export_chakra.c - Chakra ET export through protobuf-c (see trace_export_chakra.h).
 * What it is not: a reader (trace_chakra.c). */
#include "shardsim/trace_export_chakra.h"
#include "shardsim/features.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/durable.h"

#ifdef SHS_HAVE_PROTOBUF_C
#include "et_def.pb-c.h"

typedef ChakraProtoMsg__AttributeProto attr_t;

static void attr_int(attr_t *a, const char *name, int64_t v) {
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
    a->int64_val = v;
}

static void attr_bool(attr_t *a, const char *name, int v) {
    chakra_proto_msg__attribute_proto__init(a);
    a->name = (char *)name;
    a->value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL;
    a->bool_val = v;
}

/* varint32 length, then the packed message */
static int put_msg(FILE *f, const ProtobufCMessage *m) {
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t hdr[5], *buf = malloc(n ? n : 1);
    if (!buf || n > UINT32_MAX) { free(buf); return -1; }
    size_t k = 0;
    uint32_t v = (uint32_t)n;
    do {
        hdr[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    protobuf_c_message_pack(m, buf);
    int ok = fwrite(hdr, 1, k, f) == k && fwrite(buf, 1, n, f) == n;
    free(buf);
    return ok ? 0 : -1;
}

static int chakra_comm_type(shs_coll_op_t op) {
    switch (op) {
    case SHS_OP_ALL_REDUCE: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_REDUCE;
    case SHS_OP_REDUCE: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE;
    case SHS_OP_ALL_GATHER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_GATHER;
    case SHS_OP_GATHER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__GATHER;
    case SHS_OP_SCATTER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__SCATTER;
    case SHS_OP_BROADCAST: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BROADCAST;
    case SHS_OP_ALL_TO_ALL: case SHS_OP_ALL_TO_ALLV: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__ALL_TO_ALL;
    case SHS_OP_REDUCE_SCATTER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__REDUCE_SCATTER;
    case SHS_OP_BARRIER: return CHAKRA_PROTO_MSG__COLLECTIVE_COMM_TYPE__BARRIER;
    default: return -1;
    }
}

static shs_status_t write_rank(const shs_trace_t *t, int r, const char *path) {
    shs_afile_t af; /* written whole or not at all */
    SHS_CHECK(shs_afile_open(&af, path, "wb"));
    FILE *f = af.fp;
    int bad = 0;
    ChakraProtoMsg__GlobalMetadata gm;
    chakra_proto_msg__global_metadata__init(&gm);
    gm.version = "0.0.4";
    bad |= put_msg(f, &gm.base);
    uint64_t id = 0;
    for (size_t i = 0; i < t->ranks[r].n && !bad; i++) {
        const shs_trace_rec_t *x = &t->ranks[r].recs[i];
        if (x->op == SHS_OP_WAIT) continue;
        ChakraProtoMsg__Node n;
        chakra_proto_msg__node__init(&n);
        attr_t a[4];
        attr_t *ap[4] = {&a[0], &a[1], &a[2], &a[3]};
        char name[96];
        const char *m = shs_trace_str(t, x->marker);
        snprintf(name, sizeof name, "%s%s%s", shs_coll_op_name(x->op), *m ? ":" : "", m);
        n.id = id;
        n.name = name;
        uint64_t dep = id - 1;
        if (id > 0) { n.n_data_deps = 1; n.data_deps = &dep; }
        if (shs_coll_op_is_p2p(x->op)) {
            int send = x->op == SHS_OP_SEND;
            n.type = send ? CHAKRA_PROTO_MSG__NODE_TYPE__COMM_SEND_NODE : CHAKRA_PROTO_MSG__NODE_TYPE__COMM_RECV_NODE;
            attr_int(&a[0], send ? "comm_dst" : "comm_src", x->peer);
            attr_int(&a[1], "comm_tag", x->tag < 0 ? 0 : x->tag);
        } else {
            n.type = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE;
            attr_int(&a[0], "comm_type", chakra_comm_type(x->op));
            attr_bool(&a[1], "is_cpu_op", 0);
        }
        /* comm_size: bytes of one rank's input (trace_chakra.c reads it back the same way) */
        attr_int(&a[2], "comm_size", (int64_t)shs_trace_rec_bytes(t, x, shs_trace_input_scope(x->op)));
        n.n_attr = 3;
        n.attr = ap;
        if (x->t_start >= 0) {
            n.start_time_micros = (uint64_t)(x->t_start * 1e6);
            n.duration_micros = x->t_end > x->t_start ? (uint64_t)((x->t_end - x->t_start) * 1e6) : 0;
        }
        bad |= put_msg(f, &n.base);
        id++;
    }
    if (bad) return shs_afile_fail(&af, NULL);
    return shs_afile_commit(&af);
}

shs_status_t shs_trace_export_chakra(const shs_trace_t *t, const char *prefix) {
    if (t->ncomms > 1)
        return shs_set_error(SHS_UNSUPPORTED, "Chakra export: the trace has %d communicators; only one (the world) can "
                                              "be written", t->ncomms);
    if (t->ncomms == 1 && t->comms[0].size != t->world)
        return shs_set_error(SHS_UNSUPPORTED, "Chakra export: communicator '%s' is not the whole world", t->comms[0].name);
    SHS_CHECK(shs_out_prefix_check("Chakra export", prefix));
    for (int r = 0; r < t->world; r++) {
        char path[4096];
        shs_trace_chakra_path(path, sizeof path, prefix, r);
        SHS_CHECK(write_rank(t, r, path));
    }
    return SHS_OK;
}

#else

shs_status_t shs_trace_export_chakra(const shs_trace_t *t, const char *prefix) {
    (void)t;
    return shs_set_error(SHS_UNSUPPORTED, "%s: Chakra export %s", prefix, shs_feature_missing(SHS_FEATURE_PROTOBUF_C));
}

#endif

void shs_trace_chakra_path(char *buf, size_t n, const char *prefix, int rank) {
    snprintf(buf, n, "%s.%d.et", prefix, rank);
}
