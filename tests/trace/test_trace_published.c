/* test_trace_published.c - traces as projects publish them: a .tar.gz of
 * per-rank files (PARAM's et_replay/tests/inputs/dlrm_pytorch_et.tar.gz:
 * a directory entry "dlrm_pytorch_et/" then dlrm_eg_<r>.json; Chakra's
 * tests/data/1.0.2-chakra.0.0.4.tgz: pax headers with LIBARCHIVE.xattr
 * records and a macOS "._" resource file beside the trace) reads as the
 * directory of those files; a rank file of Chakra's converter
 * (src/converter/pytorch_converter.py: a METADATA node "## process_group:
 * init ##" whose inputs.values is the Python repr of PyTorch ET's group
 * list, GPU nodes with is_cpu_op false, comm_type, comm_size,
 * duration_micros and no start times) is timed on its group, not on a
 * world of one, with its durations kept; and a single rank's execution
 * trace gets its per-collective timing table. The archives are written
 * here in those layouts (POSIX ustar / pax headers, zlib) from the real
 * rank files in ../shared/traces. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C) || !defined(SHS_HAVE_ZLIB)
#error "test_trace_published needs jansson, protobuf-c and zlib (make deps); make test leaves it out otherwise"
#endif

#include "et_def.pb-c.h"
#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_comm_timeline.h"
#include "shardsim/trace_import.h"
#include "shardsim/trace_net.h"
#include "trace/trace_files.h"

/* ---- a tar writer (POSIX.1-2001 ustar header, pax 'x' records) ---------- */

typedef struct {
    char *b;
    size_t n, cap;
} tarbuf_t;

static void put(tarbuf_t *t, const void *p, size_t n) {
    if (t->n + n > t->cap) {
        t->cap = (t->n + n) * 2;
        t->b = realloc(t->b, t->cap);
        assert_non_null(t->b);
    }
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

/* A header of `type` for `name` of `size` bytes, then the data padded to 512. */
static void tar_entry(tarbuf_t *t, const char *name, char type, const void *data, size_t size) {
    unsigned char h[512] = {0};
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 7);
    memcpy(h + 108, "0000765", 7);
    memcpy(h + 116, "0000024", 7);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "14511716537", 11);
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memcpy(h + 148, "        ", 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    put(t, h, 512);
    if (size) {
        put(t, data, size);
        static const char zero[512];
        if (size % 512) put(t, zero, 512 - size % 512);
    }
}

/* A pax record "%d key=value\n" (its length counts itself). */
static void pax_record(char *out, size_t cap, const char *kv) {
    size_t body = strlen(kv) + 2, len = body + 1;
    while ((size_t)snprintf(NULL, 0, "%zu", len) + body != len) len++;
    snprintf(out, cap, "%zu %s\n", len, kv);
}

static const char *gz_file(const char *name, const tarbuf_t *t) {
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir, name);
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, t->b, (unsigned)t->n), (int)t->n);
    assert_int_equal(gzclose(g), Z_OK);
    return path;
}

/* PARAM's layout: a directory entry, then the 8 rank files; and Chakra's:
 * pax headers and a "._" file before the member. Each reads as the
 * directory of the same files. */
static void test_tar_gz_of_rank_files(void **state) {
    (void)state;
    char dir[1024], path[1100], name[128];
    snprintf(dir, sizeof dir, "%s/traces/pytorch-et/dlrm-8rank", test_shared_dir());
    tarbuf_t a = {0};
    tar_entry(&a, "dlrm_pytorch_et/", '5', NULL, 0);
    for (int r = 0; r < 8; r++) {
        size_t n;
        snprintf(path, sizeof path, "%s/dlrm_eg_%d.json", dir, (r + 2) % 8); /* archive order is not rank order */
        char *b = trace_slurp(path, &n);
        char pax[600], rec[300];
        snprintf(rec, sizeof rec, "LIBARCHIVE.xattr.com.apple.quarantine=MDA4MztnaXQ7ODg7");
        pax_record(pax, sizeof pax, rec);
        tar_entry(&a, "dlrm_pytorch_et/PaxHeader/x", 'x', pax, strlen(pax));
        snprintf(name, sizeof name, "dlrm_pytorch_et/._dlrm_eg_%d.json", (r + 2) % 8);
        tar_entry(&a, name, '0', "\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X", 16); /* AppleDouble: not a trace */
        snprintf(name, sizeof name, "dlrm_pytorch_et/dlrm_eg_%d.json", (r + 2) % 8);
        tar_entry(&a, name, '0', b, n);
        free(b);
    }
    static const char end[1024];
    put(&a, end, sizeof end);
    shs_trace_t *td = trace_load_ok(dir), *ta = trace_load_ok(gz_file("dlrm_pytorch_et.tar.gz", &a));
    size_t nd, na;
    char *xd = trace_as_text(td, &nd), *xa = trace_as_text(ta, &na);
    assert_int_equal(nd, na);
    assert_memory_equal(xd, xa, nd);
    assert_int_equal(ta->world, 8);
    free(xd);
    free(xa);
    shs_trace_free(td);
    shs_trace_free(ta);
    /* a member's name longer than the header's 100 bytes, given by a pax path record */
    tarbuf_t l = {0};
    char longname[300], pax[400], rec[340];
    memset(longname, 'd', 150);
    snprintf(longname + 150, sizeof longname - 150, "/rank0.json");
    snprintf(rec, sizeof rec, "path=%s", longname);
    pax_record(pax, sizeof pax, rec);
    size_t n;
    snprintf(path, sizeof path, "%s/traces/cases/kineto-2rank/rank0.json", SHS_SOURCE_DIR);
    char *b = trace_slurp(path, &n);
    tar_entry(&l, "PaxHeader/rank0", 'x', pax, strlen(pax));
    tar_entry(&l, "truncated-name", '0', b, n);
    free(b);
    put(&l, end, sizeof end);
    shs_trace_t *tl = trace_load_ok(gz_file("long.tgz", &l)), *plain = trace_load_ok(path);
    assert_int_equal(tl->ranks[0].n, plain->ranks[0].n); /* rank 0, from the pax path's file name */
    assert_true(tl->ranks[0].n > 0);
    shs_trace_free(plain);
    shs_trace_free(tl);
    free(l.b);
    /* damage: a header's checksum, a member cut short */
    a.b[512 * 3 + 148] ^= 1; /* the first pax header's chksum */
    shs_trace_t *t = NULL;
    const char *p = gz_file("bad.tar.gz", &a);
    assert_int_equal(shs_trace_load(&t, p, NULL), SHS_PARSE);
    if (!strstr(shs_last_error(), "tar header at byte 1536: bad checksum")) fail_msg("%s", shs_last_error());
    a.b[512 * 3 + 148] ^= 1;
    a.n = 512 * 12;
    p = gz_file("cut.tar.gz", &a);
    assert_int_equal(shs_trace_load(&t, p, NULL), SHS_PARSE);
    if (!strstr(shs_last_error(), "runs past the archive")) fail_msg("%s", shs_last_error());
    free(a.b);
}

/* ---- Chakra's converter ---------------------------------------------------- */

static size_t put_varint(unsigned char *b, size_t v) {
    size_t k = 0;
    do {
        b[k++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return k;
}

typedef struct {
    uint64_t id;
    const char *name;
    int type;
    int is_cpu_op;
    int comm_type;            /* < 0 none */
    int64_t comm_size;        /* < 0 none */
    const char *pg_name;      /* NULL none */
    uint64_t dur;             /* duration_micros */
    const char *values;       /* inputs.values, NULL none */
} xnode_t;

static const char *converter_file(const char *name, const xnode_t *nodes, int nn) {
    static unsigned char buf[1 << 14];
    size_t n = 0;
    ChakraProtoMsg__AttributeProto gma[2], *gmp[2];
    chakra_proto_msg__attribute_proto__init(&gma[0]);
    gma[0].name = (char *)"schema";
    gma[0].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
    gma[0].string_val = (char *)"1.0.2-chakra.0.0.4";
    chakra_proto_msg__attribute_proto__init(&gma[1]);
    gma[1].name = (char *)"pid";
    gma[1].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_UINT64_VAL;
    gma[1].uint64_val = 1234;
    gmp[0] = &gma[0];
    gmp[1] = &gma[1];
    ChakraProtoMsg__GlobalMetadata gm = CHAKRA_PROTO_MSG__GLOBAL_METADATA__INIT;
    gm.n_attr = 2;
    gm.attr = gmp;
    size_t l = chakra_proto_msg__global_metadata__get_packed_size(&gm);
    n += put_varint(buf + n, l);
    n += chakra_proto_msg__global_metadata__pack(&gm, buf + n);
    for (int i = 0; i < nn; i++) {
        ChakraProtoMsg__AttributeProto a[4], *ap[4];
        int na = 0;
        chakra_proto_msg__attribute_proto__init(&a[na]);
        a[na].name = (char *)"is_cpu_op";
        a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_BOOL_VAL;
        a[na].bool_val = nodes[i].is_cpu_op;
        ap[na] = &a[na], na++;
        if (nodes[i].comm_type >= 0) {
            chakra_proto_msg__attribute_proto__init(&a[na]);
            a[na].name = (char *)"comm_type";
            a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
            a[na].int64_val = nodes[i].comm_type;
            ap[na] = &a[na], na++;
            chakra_proto_msg__attribute_proto__init(&a[na]);
            a[na].name = (char *)"comm_size";
            a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_INT64_VAL;
            a[na].int64_val = nodes[i].comm_size;
            ap[na] = &a[na], na++;
        }
        if (nodes[i].pg_name) {
            chakra_proto_msg__attribute_proto__init(&a[na]);
            a[na].name = (char *)"pg_name";
            a[na].value_case = CHAKRA_PROTO_MSG__ATTRIBUTE_PROTO__VALUE_STRING_VAL;
            a[na].string_val = (char *)nodes[i].pg_name;
            ap[na] = &a[na], na++;
        }
        ChakraProtoMsg__IOInfo io = CHAKRA_PROTO_MSG__IOINFO__INIT;
        io.values = (char *)(nodes[i].values ? nodes[i].values : "[]");
        io.shapes = (char *)"[]";
        io.types = (char *)"[]";
        ChakraProtoMsg__Node nd = CHAKRA_PROTO_MSG__NODE__INIT;
        nd.id = nodes[i].id;
        nd.name = (char *)nodes[i].name;
        nd.type = (ChakraProtoMsg__NodeType)nodes[i].type;
        nd.duration_micros = nodes[i].dur;
        nd.inputs = &io;
        nd.n_attr = (size_t)na;
        nd.attr = ap;
        l = chakra_proto_msg__node__get_packed_size(&nd);
        assert_true(n + l + 5 < sizeof buf);
        n += put_varint(buf + n, l);
        n += chakra_proto_msg__node__pack(&nd, buf + n);
    }
    return test_tmp_write(name, buf, n);
}

/* The 1.0.2-chakra.0.0.4 ET's process_group:init input, as the converter
 * writes it (Python's str() of the node's input values). */
#define PG_INIT "['[{\"pg_name\": \"0\", \"backend_id\": 82149104, \"backend_config\": \"cuda:nccl\", \"ranks\": [], " \
                "\"group_size\": 2, \"group_count\": 1}]']"

/* Rank 0 of 2: a GPU GEMM of 30 us, the all_gather kernel (1 float per
 * rank, comm_size 4) of 12 us, another kernel of 8 us, a second all_gather
 * of 10 us; host nodes (is_cpu_op true) run beside the GPU and take no GPU
 * time. Laid end to end: calls at [30, 42] and [50, 60] us. On hgx-h100
 * each all_gather of 2 ranks costs 8.4 + 3.4 us + 4 B / 400e9 B/s (the
 * ring's (n-1)/n of the 8-byte whole): not 0, as on a world of one. */
static void test_chakra_converter_rank(void **state) {
    (void)state;
    enum { META = CHAKRA_PROTO_MSG__NODE_TYPE__METADATA_NODE, COMP = CHAKRA_PROTO_MSG__NODE_TYPE__COMP_NODE,
           COLL = CHAKRA_PROTO_MSG__NODE_TYPE__COMM_COLL_NODE };
    const xnode_t nodes[] = {
        {3, "## process_group:init ##", META, 1, -1, -1, NULL, 0, PG_INIT},
        {5, "aten::mm", COMP, 1, -1, -1, NULL, 50, NULL},
        {6, "sm80_xmma_gemm_f32f32_tn_n", COMP, 0, -1, -1, NULL, 30, NULL},
        {30, "record_param_comms", COLL, 1, -1, -1, NULL, 15, NULL},
        {31, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", COLL, 0, 2, 4, NULL, 12, NULL},
        {40, "void at::native::vectorized_elementwise_kernel", COMP, 0, -1, -1, NULL, 8, NULL},
        {45, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", COLL, 0, 2, 4, "0", 10, NULL},
    };
    shs_trace_t *t = trace_load_ok(converter_file("chakra.0.et", nodes, 7));
    assert_int_equal(t->world, 2);
    assert_int_equal(t->views, 1);
    assert_false(shs_trace_rank_traced(t, 1));
    assert_int_equal(t->ranks[0].n, 2);
    const shs_trace_rec_t *a = &t->ranks[0].recs[0], *b = &t->ranks[0].recs[1];
    assert_int_equal(t->comms[a->comm].size, 2);
    assert_true(fabs(a->t_start - 30e-6) < 1e-12 && fabs(a->t_end - 42e-6) < 1e-12);
    assert_true(fabs(b->t_start - 50e-6) < 1e-12 && fabs(b->t_end - 60e-6) < 1e-12);
    if (!strstr(t->note, "no start times")) fail_msg("note: '%s'", t->note);
    shs_net_t net;
    assert_int_equal(shs_net_preset("hgx-h100", &net), SHS_OK);
    double s = 8.4e-6 + 3.4e-6 + 4 / 400e9;
    assert_true(fabs(shs_net_rec_time(&net, SHS_ALGO_RING, t, a) - s) < 1e-15);
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 4), SHS_OK);
    assert_int_equal(rep.total, 0);
    shs_trace_report_free(&rep);
    shs_trace_free(t);
    /* a pg_name the file never declared is refused, naming the node */
    const xnode_t bad[] = {
        {3, "## process_group:init ##", META, 1, -1, -1, NULL, 0, PG_INIT},
        {9, "ncclDevKernel_AllReduce", COLL, 0, 0, 64, "7", 3, NULL},
    };
    shs_trace_t *x = NULL;
    assert_int_equal(shs_trace_load(&x, converter_file("chakra.1.et", bad, 2), NULL), SHS_PARSE);
    if (!strstr(shs_last_error(), "record 2 (node 9 'ncclDevKernel_AllReduce'): process group '7' is not declared"))
        fail_msg("%s", shs_last_error());
}

/* The 1.0.2-chakra ET is rank 0's view of a 2-rank group. Rank 1's view
 * of the same calls (its nodes' rank field 1) still gets the per-collective
 * table of replay --network: each all_gather counted once, on rank 1. */
static void test_single_view_timing_table(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/traces/pytorch-et/chakra-1.0.2/1.0.2-chakra.0.0.4.json", test_shared_dir());
    size_t n;
    char *b = trace_slurp(path, &n);
    const char *from = "82149104,0,\"all_gather\"", *to = "82149104,1,\"all_gather\"";
    int k = 0;
    for (char *p = b; (p = strstr(p, from)) != NULL; p += strlen(from), k++) memcpy(p, to, strlen(to));
    assert_int_equal(k, 10);
    const char *v = test_tmp_write("rank1.json", b, n);
    free(b);
    const test_proc_t *r = test_shardsim(60, "replay", v, "--network", "hgx-h100", "--check-only", NULL);
    assert_int_equal(r->exit_code, 0);
    const char *tab = strstr(r->out, "(per collective: each counted once)"), *row = tab ? strstr(tab, "\n  all_gather ") : NULL;
    unsigned calls = 0;
    if (!row || sscanf(row, " all_gather %u", &calls) != 1 || calls != 10) fail_msg("no all_gather row of 10 calls in:\n%s", r->out);
}

/* A rank file saved under another rank's name: ASTRA-sim's custom ring
 * all-reduce, rank 0's file (its sends go to comm_dst 1) named
 * custom_allreduce.1.et. Rank 1 then sends to itself: the diagnosis says
 * so, where, and why it may be, not only that a send went unreceived. */
static void test_self_send_named(void **state) {
    (void)state;
    char src[1024], dir[600], dst[700];
    snprintf(src, sizeof src, "%s/traces/chakra-et/custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et",
             test_shared_dir());
    snprintf(dir, sizeof dir, "%s/misnamed", test_tmpdir);
    snprintf(dst, sizeof dst, "%s/custom_allreduce.1.et", dir);
    size_t n;
    char *b = trace_slurp(src, &n);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(dst, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
    shs_trace_t *t = trace_load_ok(dir);
    shs_trace_report_t rep;
    assert_int_equal(shs_trace_check(t, &rep, 8), SHS_OK);
    int found = 0;
    for (size_t i = 0; i < rep.n; i++)
        found |= rep.issues[i].kind == SHS_ISSUE_UNMATCHED_SEND &&
                 strstr(rep.issues[i].text, "rank 1 sends to itself (record 1)") != NULL &&
                 strstr(rep.issues[i].text, "misnumbered") != NULL;
    if (!found) fail_msg("no self-send issue among %zu: %s", rep.n, rep.n ? rep.issues[rep.n - 1].text : "");
    shs_trace_report_free(&rep);
    shs_trace_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tar_gz_of_rank_files),
        cmocka_unit_test(test_chakra_converter_rank),
        cmocka_unit_test(test_single_view_timing_table),
        cmocka_unit_test(test_self_send_named),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
