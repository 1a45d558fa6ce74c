/* test_trace_mutations.c - every importer on damaged copies of a valid
 * small input of its format: the empty file, truncations at several
 * points, bytes flipped (a fixed-seed generator: the same mutants every
 * run), each number replaced by a huge one (2^64, 2^63 - 1, 1e300) and by
 * a negative one (-1). Each mutant must either import into a trace that
 * holds no garbage (ranks inside the world, sizes and times inside the
 * trace model's limits) or be refused with an error that names the file
 * and a position in it (line, record, node, entry, byte); never crash
 * (the sanitizer builds run this too). Needs jansson and protobuf-c (the
 * JSON and Chakra readers): without either it does not compile, and `make
 * test` leaves it out and says so. What it is not: a fuzzer (make fuzz). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/trace_check.h"
#include "shardsim/trace_import.h"
#if !defined(SHS_HAVE_JANSSON) || !defined(SHS_HAVE_PROTOBUF_C)
#error "test_trace_mutations needs jansson and protobuf-c (make deps); make test leaves it out otherwise"
#endif

typedef struct {
    shs_trace_format_t fmt;
    const char *src;    /* the valid input: relative to the source tree, or "shared:" + ../shared path */
    const char *ext;    /* the mutants' file name ending */
    int text;           /* numbers are decimal text (not protobuf varints) */
    int first_dim;      /* ASTRA-sim HYBRID_DATA_MODEL: NPUs of the network's first dimension (0: none) */
} fmt_case_t;

static const fmt_case_t cases[] = {
    {SHS_TFMT_SHARDSIM, "fuzz/seeds/shardsim/p2p-and-subcomm.trace", "trace", 1, 0},
    {SHS_TFMT_NCCL, "fuzz/seeds/nccl/two-ranks.log", "log", 1, 0},
    {SHS_TFMT_PYTORCH_ET, "fuzz/seeds/pytorch_et/named-1.0.2.json", "json", 1, 0},
    {SHS_TFMT_PYTORCH_ET, "fuzz/seeds/pytorch_et/positional-1.0.1.json", "json", 1, 0},
    {SHS_TFMT_CHAKRA, "fuzz/seeds/chakra/ddp-rank1.et", "et", 0, 0},
    {SHS_TFMT_CHAKRA, "shared:traces/chakra-et/custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et", "et", 0, 0},
    {SHS_TFMT_ASTRA, "shared:traces/astra-sim/text-workloads/MLP_HybridParallel_Data_Model.txt", "txt", 1, 4},
    {SHS_TFMT_KINETO, "traces/cases/kineto-2rank/rank0.json", "json", 1, 0},
    {SHS_TFMT_KINETO, "traces/cases/kineto-hta-2rank/rank0.json", "json", 1, 0},
    {SHS_TFMT_KINETO, "traces/cases/kineto-old-2rank/rank0.json", "json", 1, 0},
    {SHS_TFMT_FLIGHT, "traces/cases/flight-2rank-hang/rank0.json", "json", 1, 0},
};

static char *read_src(const char *src, size_t *n) {
    char path[1024];
    if (!strncmp(src, "shared:", 7)) snprintf(path, sizeof path, "%s/%s", test_shared_dir(), src + 7);
    else snprintf(path, sizeof path, "%s/%s", SHS_SOURCE_DIR, src);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    static char tmp[1 << 20];
    *n = fread(tmp, 1, sizeof tmp, f);
    fclose(f);
    assert_true(*n > 0 && *n < sizeof tmp);
    char *b = malloc(*n + 1);
    assert_non_null(b);
    memcpy(b, tmp, *n);
    b[*n] = 0;
    return b;
}

/* Words that place an error inside the file. A whole-file statement
 * (empty file, no "nodes" array, ...) names what is missing instead. */
static int names_position(const char *msg, const char *path) {
    const char *p = strstr(msg, path);
    if (!p) return 0;
    const char *after = p + strlen(path);
    if (after[0] == ':' && after[1] >= '0' && after[1] <= '9') return 1; /* file:line */
    static const char *const where[] = {"line ", "record ", "node ", "entries[", "traceEvents[", "byte ",
                                        "layer ", "nodes[", "distributedInfo.", "top-level \"", "truncated", "empty", "no trace", "no \"", "has no ",
                                        "not a JSON object", "names no ", "without a ", "metadata"};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++)
        if (strstr(after, where[k])) return 1;
    return 0;
}

/* A loaded trace holds nothing the model refuses: checked field by field. */
static void assert_sane(const shs_trace_t *t, const char *what) {
    if (t->world < 1 || t->world > SHS_TRACE_MAX_WORLD) fail_msg("%s: accepted a world of %d ranks", what, t->world);
    for (int r = 0; r < t->world; r++)
        for (size_t i = 0; i < t->ranks[r].n; i++) {
            const shs_trace_rec_t *x = &t->ranks[r].recs[i];
            if (x->rank != r || x->comm < 0 || x->comm >= t->ncomms || x->bytes > SHS_TRACE_MAX_BYTES ||
                x->count > SHS_TRACE_MAX_BYTES || !(x->t_start <= SHS_TRACE_MAX_TIME_S) ||
                !(x->t_end <= SHS_TRACE_MAX_TIME_S) || (x->t_start >= 0 && x->t_end >= 0 && x->t_end < x->t_start) ||
                shs_trace_comm_local(t, x->comm, r) < 0)
                fail_msg("%s: accepted garbage in rank %d record %zu (rank %d comm %d bytes %llu count %llu t %g..%g)",
                         what, r, i, x->rank, x->comm, (unsigned long long)x->bytes, (unsigned long long)x->count,
                         x->t_start, x->t_end);
        }
}

typedef struct {
    int loaded, refused;
} tally_t;

/* Load one mutant as `fmt`: a clean import, or a refusal naming the file and a position. */
static void try_mutant(const fmt_case_t *c, const char *label, const char *buf, size_t n, tally_t *tl) {
    char name[128];
    snprintf(name, sizeof name, "mut-%s.%s", label, c->ext);
    const char *path = test_tmp_write(name, buf, n);
    char keep[700];
    snprintf(keep, sizeof keep, "%s", path);
    shs_trace_load_opts_t o = {.format = c->fmt, .first_dim = c->first_dim};
    shs_trace_t *t = NULL;
    shs_status_t st = shs_trace_load(&t, keep, &o);
    if (st == SHS_OK) {
        char what[900];
        snprintf(what, sizeof what, "%s (%s, from %s)", keep, label, c->src);
        assert_sane(t, what);
        shs_trace_report_t rep;
        if (shs_trace_check(t, &rep, 4) == SHS_OK) shs_trace_report_free(&rep);
        shs_trace_free(t);
        tl->loaded++;
        return;
    }
    assert_null(t);
    if (!names_position(shs_last_error(), keep))
        fail_msg("%s (from %s): refused without the file and a position: %s", label, c->src, shs_last_error());
    tl->refused++;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void mutate_case(const fmt_case_t *c, size_t ci) {
    size_t n;
    char *src = read_src(c->src, &n);
    char *m = malloc(n + 64);
    assert_non_null(m);
    char label[64];
    tally_t tl = {0, 0};
    /* the original imports */
    snprintf(label, sizeof label, "%zu-orig", ci);
    try_mutant(c, label, src, n, &tl);
    assert_int_equal(tl.loaded, 1);
    /* empty */
    snprintf(label, sizeof label, "%zu-empty", ci);
    try_mutant(c, label, "", 0, &tl);
    /* truncated at k/8 of the length, and one byte short */
    for (int k = 1; k <= 8; k++) {
        size_t cut = k < 8 ? n * (size_t)k / 8 : n - 1;
        snprintf(label, sizeof label, "%zu-cut%zu", ci, cut);
        try_mutant(c, label, src, cut, &tl);
    }
    /* 1 to 4 bytes flipped, 48 mutants from a fixed seed */
    uint64_t seed = 0x5eed0000u + ci;
    for (int k = 0; k < 48; k++) {
        memcpy(m, src, n);
        int flips = 1 + (int)(lcg(&seed) % 4);
        for (int f = 0; f < flips; f++) m[lcg(&seed) % n] ^= (char)(1 + lcg(&seed) % 255);
        snprintf(label, sizeof label, "%zu-flip%d", ci, k);
        try_mutant(c, label, m, n, &tl);
    }
    if (c->text) {
        /* each of the first 64 numbers replaced by huge and negative values */
        static const char *const repl[] = {"18446744073709551616", "9223372036854775807", "1e300", "-1", "0"};
        int nums = 0;
        for (size_t i = 0; i < n && nums < 64; i++) {
            if (!(src[i] >= '0' && src[i] <= '9') || (i > 0 && ((src[i - 1] >= '0' && src[i - 1] <= '9') ||
                                                               src[i - 1] == '.' || src[i - 1] == 'x')))
                continue;
            size_t j = i;
            while (j < n && src[j] >= '0' && src[j] <= '9') j++;
            for (size_t r = 0; r < sizeof repl / sizeof repl[0]; r++) {
                size_t rl = strlen(repl[r]);
                char *b = malloc(n + rl + 1);
                assert_non_null(b);
                memcpy(b, src, i);
                memcpy(b + i, repl[r], rl);
                memcpy(b + i + rl, src + j, n - j);
                snprintf(label, sizeof label, "%zu-num%d-%zu", ci, nums, r);
                try_mutant(c, label, b, i + rl + n - j, &tl);
                free(b);
            }
            nums++;
            i = j;
        }
        assert_true(nums > 3);
    } else {
        /* protobuf: a varint widened to the largest 64-bit value at 24 offsets */
        static const unsigned char big[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
        for (int k = 0; k < 24; k++) {
            size_t at = 1 + lcg(&seed) % (n - 1);
            memcpy(m, src, at);
            memcpy(m + at, big, sizeof big);
            size_t rest = n - at > 1 ? n - at - 1 : 0; /* the big varint replaces one byte */
            memcpy(m + at + sizeof big, src + at + 1, rest);
            snprintf(label, sizeof label, "%zu-varint%d", ci, k);
            try_mutant(c, label, m, at + sizeof big + rest, &tl);
        }
    }
    /* the empty file and the shortest cut cannot be a full trace of these formats */
    assert_true(tl.refused >= 2);
    print_message("  %-11s %-70s %3d imported, %3d refused\n", shs_trace_format_name(c->fmt), c->src, tl.loaded,
                  tl.refused);
    free(m);
    free(src);
}

static void test_mutations_shardsim(void **state) { (void)state; mutate_case(&cases[0], 0); }
static void test_mutations_nccl(void **state) { (void)state; mutate_case(&cases[1], 1); }
static void test_mutations_pytorch_et(void **state) {
    (void)state;
    mutate_case(&cases[2], 2);
    mutate_case(&cases[3], 3);
}
static void test_mutations_chakra(void **state) {
    (void)state;
    mutate_case(&cases[4], 4);
    mutate_case(&cases[5], 5);
}
static void test_mutations_astra(void **state) { (void)state; mutate_case(&cases[6], 6); }
static void test_mutations_kineto(void **state) {
    (void)state;
    mutate_case(&cases[7], 7);
    mutate_case(&cases[8], 8);
    mutate_case(&cases[9], 9);
}
static void test_mutations_flight(void **state) { (void)state; mutate_case(&cases[10], 10); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutations_shardsim), cmocka_unit_test(test_mutations_nccl),
        cmocka_unit_test(test_mutations_pytorch_et), cmocka_unit_test(test_mutations_chakra),
        cmocka_unit_test(test_mutations_astra), cmocka_unit_test(test_mutations_kineto),
        cmocka_unit_test(test_mutations_flight),
    };
    return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
