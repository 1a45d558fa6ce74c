/* test_documents.c - documents, packing and padding (data.h): document
 * boundaries, pieces, position ids restarting per document, document ids,
 * ignored targets, padding, and the sampler as a pure function of the
 * global sequence index (the same global batch whatever the split into
 * world x micro-batch x accumulation). Expected sequences are built here
 * from the documents' strings, not by the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardsim/data.h"

/* Five documents, each ending with the separator but the last; the third
 * is the separator alone, the fifth is longer than T = 6. */
static const char *DOCS[] = {"ab\n", "cde\n", "\n", "fghij\n", "klmnopqrs"};
enum { NDOCS = 5, T = 6 };

static shs_corpus_t corpus(char *buf) {
    buf[0] = 0;
    for (int i = 0; i < NDOCS; i++) strcat(buf, DOCS[i]);
    return (shs_corpus_t){.bytes = (uint8_t *)buf, .len = strlen(buf), .source = "test"};
}

static void test_boundaries(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    shs_documents_t d;
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PAD, '\n', T), SHS_OK);
    size_t pad_start[] = {0, 3, 7, 8, 14, 23};
    assert_int_equal(d.num_docs, 5);
    assert_memory_equal(d.start, pad_start, sizeof pad_start);
    shs_documents_free(&d);
    /* pack: "fghij\n" is exactly T, "klmnopqrs" splits into "klmnop" + "qrs" */
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PACK, '\n', T), SHS_OK);
    size_t pack_start[] = {0, 3, 7, 8, 14, 20, 23};
    assert_int_equal(d.num_docs, 6);
    assert_memory_equal(d.start, pack_start, sizeof pack_start);
    shs_documents_free(&d);
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_STREAM, '\n', T), SHS_INVALID_ARG);
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PACK, '\n', 0), SHS_INVALID_ARG);
}

/* Packed: the pieces of the documents for T = 6, in corpus order. */
static const char *PIECES[] = {"ab\n", "cde\n", "\n", "fghij\n", "klmnop", "qrs"};
enum { NPIECES = 6 };

/* The packed sequence that starts at piece p0, built from the strings. */
static void pack_oracle(int p0, int32_t *tok, int32_t *tgt, int32_t *pos, int32_t *doc) {
    int t = 0;
    for (int k = 0; t < T; k++) {
        const char *s = PIECES[(p0 + k) % NPIECES];
        int len = (int)strlen(s);
        for (int j = 0; j < len && t < T; j++, t++) {
            tok[t] = (uint8_t)s[j];
            tgt[t] = j + 1 < len ? (uint8_t)s[j + 1] : SHS_IGNORE_INDEX;
            pos[t] = j;
            doc[t] = k;
        }
    }
}

static void test_pack(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    shs_documents_t d;
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PACK, '\n', T), SHS_OK);
    int seen[NPIECES] = {0};
    for (uint64_t g = 0; g < 200; g++) {
        int32_t tok[T], tgt[T], pos[T], doc[T];
        shs_documents_sequence(&d, &c, 7, g, T, tok, tgt, pos, doc);
        int match = -1;
        for (int p0 = 0; p0 < NPIECES; p0++) {
            int32_t et[T], eg[T], ep[T], ed[T];
            pack_oracle(p0, et, eg, ep, ed);
            if (!memcmp(tok, et, sizeof et)) {
                assert_memory_equal(tgt, eg, sizeof eg);
                assert_memory_equal(pos, ep, sizeof ep);
                assert_memory_equal(doc, ed, sizeof ed);
                match = p0;
                break;
            }
        }
        assert_true(match >= 0);
        seen[match]++;
        /* again: the same (seed, g) gives the same sequence */
        int32_t tok2[T];
        shs_documents_sequence(&d, &c, 7, g, T, tok2, tgt, NULL, NULL);
        assert_memory_equal(tok, tok2, sizeof tok);
    }
    for (int p = 0; p < NPIECES; p++) assert_true(seen[p] > 0); /* every piece starts some sequence */
    /* starting at "ab\n": ab\n cde -> targets b \n [ign] d e \n */
    int32_t et[T], eg[T], ep[T], ed[T];
    pack_oracle(0, et, eg, ep, ed);
    int32_t want_tgt[T] = {'b', '\n', SHS_IGNORE_INDEX, 'd', 'e', '\n'}, want_pos[T] = {0, 1, 2, 0, 1, 2};
    assert_memory_equal(eg, want_tgt, sizeof want_tgt);
    assert_memory_equal(ep, want_pos, sizeof want_pos);
    shs_documents_free(&d);
}

static void test_pad(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    shs_documents_t d;
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PAD, '\n', T), SHS_OK);
    int seen[NDOCS] = {0};
    for (uint64_t g = 0; g < 200; g++) {
        int32_t tok[T], tgt[T], pos[T], doc[T];
        shs_documents_sequence(&d, &c, 9, g, T, tok, tgt, pos, doc);
        int match = -1;
        for (int i = 0; i < NDOCS && match < 0; i++) {
            const char *s = DOCS[i];
            int len = (int)strlen(s), ok = 1;
            for (int t = 0; t < T; t++) {
                int32_t et = t < len ? (uint8_t)s[t] : '\n';
                int32_t eg = t + 1 < len ? (uint8_t)s[t + 1] : SHS_IGNORE_INDEX;
                ok &= tok[t] == et && tgt[t] == eg && pos[t] == t && doc[t] == 0;
            }
            if (ok) match = i;
        }
        assert_true(match >= 0);
        seen[match]++;
    }
    for (int i = 0; i < NDOCS; i++) assert_true(seen[i] > 0);
    /* the oracle above: the lone separator has no target at all, and
     * "klmnopqrs" is truncated to "klmnop" with its last target 'q' real */
    shs_documents_free(&d);
}

/* Step s's global batch in g order, assembled from the trainer's calls:
 * micro-step s*K + k, rank r, row b sits at ((k * N + r) * B + b). */
static void global_batch(const shs_corpus_t *c, const shs_documents_t *d, long s, int N, int B, int K,
                         int32_t *tok, int32_t *tgt, int32_t *pos, int32_t *doc) {
    for (int k = 0; k < K; k++)
        for (int r = 0; r < N; r++) {
            size_t o = (size_t)((k * N + r) * B) * T;
            shs_data_batch(c, d, 1337, s * K + k, r, N, B, T, tok + o, tgt + o, pos ? pos + o : NULL,
                           doc ? doc + o : NULL);
        }
}

static void test_global_batch_splits(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    enum { G = 8 };
    for (int mode = SHS_DATA_STREAM; mode <= SHS_DATA_PAD; mode++) {
        shs_documents_t d, *dp = NULL;
        if (mode != SHS_DATA_STREAM) {
            assert_int_equal(shs_documents_build(&d, &c, (shs_data_mode_t)mode, '\n', T), SHS_OK);
            dp = &d;
        }
        for (long s = 0; s < 3; s++) {
            int32_t a[4][G * T], g[4][G * T], p[4][G * T], q[4][G * T];
            const int split[3][3] = {{2, 4, 1}, {4, 2, 1}, {2, 2, 2}}; /* N, B, K */
            for (int i = 0; i < 3; i++)
                global_batch(&c, dp, s, split[i][0], split[i][1], split[i][2], a[i], g[i], dp ? p[i] : NULL,
                             dp ? q[i] : NULL);
            /* and one rank, one sequence per micro-batch, G micro-batches */
            global_batch(&c, dp, s, 1, 1, G, a[3], g[3], dp ? p[3] : NULL, dp ? q[3] : NULL);
            for (int i = 1; i < 4; i++) {
                assert_memory_equal(a[0], a[i], sizeof a[0]);
                assert_memory_equal(g[0], g[i], sizeof g[0]);
                if (dp) {
                    assert_memory_equal(p[0], p[i], sizeof p[0]);
                    assert_memory_equal(q[0], q[i], sizeof q[0]);
                }
            }
        }
        if (dp) shs_documents_free(dp);
    }
}

static void test_doc_sep_parse(void **state) {
    struct { const char *s; int v; } ok[] = {
        {"\\n", '\n'}, {"\\t", '\t'}, {"\\r", '\r'}, {"\\0", 0}, {"\\\\", '\\'}, {"\\'", '\''}, {"\\\"", '"'},
        {"\\x1e", 0x1e}, {"\\xF", 15}, {"10", 10}, {"0", 0}, {"255", 255}, {"0x1E", 30}, {"010", 10}, {"|", '|'},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint8_t b = 99;
        assert_int_equal(shs_doc_sep_parse(ok[i].s, &b), 0);
        assert_int_equal(b, ok[i].v);
    }
    const char *bad[] = {"", "256", "1000", "\\q", "\\x", "\\xg", "\\x123", "ab", "0x", "0x100", "\\nn", "-1", "1a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t b;
        assert_int_equal(shs_doc_sep_parse(bad[i], &b), -1);
    }
}

/* The corpus's documents before cutting: DOCS holds 5, one of them the
 * separator alone, one ("klmnopqrs", 9 bytes) longer than T = 6 ("fghij\n"
 * is exactly T: not cut); the same in both modes. A leading separator is an
 * empty document too. */
static void test_statistics(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    shs_documents_t d;
    for (int m = 0; m < 2; m++) {
        assert_int_equal(shs_documents_build(&d, &c, m ? SHS_DATA_PACK : SHS_DATA_PAD, '\n', T), SHS_OK);
        assert_int_equal(d.documents, 5);
        assert_int_equal(d.empty, 1);
        assert_int_equal(d.cut, 1);
        shs_documents_free(&d);
    }
    char lead[] = "\n\nab\n";
    shs_corpus_t l = {.bytes = (uint8_t *)lead, .len = 5, .source = "lead"};
    assert_int_equal(shs_documents_build(&d, &l, SHS_DATA_PAD, '\n', T), SHS_OK);
    assert_int_equal(d.documents, 3);
    assert_int_equal(d.empty, 2);
    assert_int_equal(d.cut, 0);
    shs_documents_free(&d);
}

/* A corpus without the separator byte would be one document: refused,
 * naming the corpus and the byte (0x09: "--doc-sep 9" is a byte value). */
static void test_no_separator_refused(void **state) {
    char text[] = "no tab 9 in here";
    shs_corpus_t c = {.bytes = (uint8_t *)text, .len = strlen(text), .source = "plain.txt"};
    shs_documents_t d;
    for (int m = 0; m < 2; m++) {
        assert_int_equal(shs_documents_build(&d, &c, m ? SHS_DATA_PACK : SHS_DATA_PAD, 9, T), SHS_INVALID_ARG);
        assert_non_null(strstr(shs_last_error(), "plain.txt"));
        assert_non_null(strstr(shs_last_error(), "0x09"));
        assert_null(d.start);
    }
}

/* shs_documents_num_targets counts what shs_documents_sequence writes (the
 * latter checked against the strings above); a corpus of separators alone
 * has no target anywhere. */
static void test_num_targets(void **state) {
    char buf[64];
    shs_corpus_t c = corpus(buf);
    shs_documents_t d;
    int32_t tok[T], tgt[T];
    for (int m = 0; m < 2; m++) {
        assert_int_equal(shs_documents_build(&d, &c, m ? SHS_DATA_PACK : SHS_DATA_PAD, '\n', T), SHS_OK);
        for (uint64_t g = 0; g < 64; g++) {
            shs_documents_sequence(&d, &c, 7, g, T, tok, tgt, NULL, NULL);
            int64_t want = 0;
            for (int t = 0; t < T; t++) want += tgt[t] != SHS_IGNORE_INDEX;
            assert_int_equal(shs_documents_num_targets(&d, 7, g, T), want);
        }
        shs_documents_free(&d);
    }
    char seps[] = "\n\n\n\n";
    shs_corpus_t s = {.bytes = (uint8_t *)seps, .len = 4, .source = "seps"};
    for (int m = 0; m < 2; m++) {
        assert_int_equal(shs_documents_build(&d, &s, m ? SHS_DATA_PACK : SHS_DATA_PAD, '\n', T), SHS_OK);
        for (uint64_t g = 0; g < 16; g++) assert_int_equal(shs_documents_num_targets(&d, 7, g, T), 0);
        shs_documents_free(&d);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries),          cmocka_unit_test(test_pack),
        cmocka_unit_test(test_pad),                 cmocka_unit_test(test_global_batch_splits),
        cmocka_unit_test(test_doc_sep_parse),       cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_no_separator_refused), cmocka_unit_test(test_num_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
