/* test_loss_norm.c - the loss over documents with ignored targets (padding,
 * document ends): --loss-norm global-tokens is bit-identical to DDP under
 * every ZeRO stage and the same up to reduction order for every split of
 * one global batch into world x micro-batch x accumulation; per-micro-batch
 * and global-tokens each equal their closed form, with the micro-batches'
 * loss means m_i and counts n_i obtained independently (m_i from world-1
 * runs that do not move the parameters, n_i counted in the data), and they
 * differ when the micro-batches hold unequal numbers of real targets. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

/* Documents of 1 to 13 bytes, each ending with '\n': against context 8,
 * some fill a sequence, some are mostly padding. */
static char docs_text[4096];
static shs_corpus_t docs;

static int docs_setup(void **state) {
    const char *words = "abcdefghijklmnopqrstuvwxyz";
    size_t n = 0;
    uint64_t x = 12345;
    for (int d = 0; d < 120; d++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int len = (int)((x >> 33) % 13);
        for (int i = 0; i < len; i++) docs_text[n++] = words[(x >> (i % 20)) % 26];
        docs_text[n++] = '\n';
    }
    docs = (shs_corpus_t){.bytes = (uint8_t *)docs_text, .len = n, .source = "test documents"};
    return 0;
}

static shs_train_config_t padded_config(int world, int B, int K) {
    shs_train_config_t c = test_small_config(world, 2);
    c.micro_batch = B;
    c.grad_accum = K;
    c.data_mode = SHS_DATA_PAD;
    c.doc_sep = '\n';
    return c;
}

static void test_default_norm(void **state) {
    shs_train_config_t c = test_small_config(2, 1);
    assert_int_equal(shs_train_loss_norm(&c), SHS_LOSS_NORM_PER_MICRO_BATCH);
    c.data_mode = SHS_DATA_PAD;
    assert_int_equal(shs_train_loss_norm(&c), SHS_LOSS_NORM_GLOBAL_TOKENS);
    c.loss_norm = SHS_LOSS_NORM_PER_MICRO_BATCH;
    assert_int_equal(shs_train_loss_norm(&c), SHS_LOSS_NORM_PER_MICRO_BATCH);
}

/* The GPT has no per-document attention: --pack is refused by name. */
static void test_pack_refused_for_gpt(void **state) {
    shs_train_config_t c = padded_config(2, 2, 1);
    c.data_mode = SHS_DATA_PACK;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &c, &docs), SHS_INVALID_ARG);
    assert_null(t);
    assert_non_null(strstr(shs_last_error(), "--pack"));
    assert_non_null(strstr(shs_last_error(), "Llama"));
}

/* global-tokens (the default with documents): every ZeRO stage bit for bit
 * DDP's, losses and parameters at every step, with accumulation. */
static void test_global_tokens_stages_match_ddp(void **state) {
    const int worlds[] = {2, 3};
    for (int w = 0; w < 2; w++) {
        shs_train_config_t c = padded_config(worlds[w], 2, 2);
        c.strategy.kind = SHS_DDP;
        run_record_t ddp;
        record_run(&c, &docs, 3, &ddp);
        for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
            c.strategy.kind = (shs_strategy_kind_t)k;
            run_record_t z;
            record_run(&c, &docs, 3, &z);
            assert_same_run(&ddp, &z);
            free_record(&z);
        }
        c.loss_norm = SHS_LOSS_NORM_GLOBAL_TOKENS; /* the default said explicitly: the same run */
        run_record_t e;
        record_run(&c, &docs, 3, &e);
        assert_same_run(&ddp, &e);
        free_record(&e);
        assert_true(memcmp(ddp.snap[0], ddp.snap[2], ddp.len * sizeof(float)) != 0);
        free_record(&ddp);
    }
}

/* One global batch of 8 sequences split four ways: the same loss (1e-5
 * relative: f32 sums in another order) and the same parameters (the
 * difference under 1e-4 of the update's norm). */
static void test_global_tokens_splits_agree(void **state) {
    const int split[4][3] = {{2, 4, 1}, {4, 2, 1}, {2, 2, 2}, {1, 2, 4}}; /* N, B, K */
    run_record_t rec[4], init;
    for (int i = 0; i < 4; i++) {
        shs_train_config_t c = padded_config(split[i][0], split[i][1], split[i][2]);
        c.strategy.kind = SHS_ZERO3;
        c.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
        c.strategy.optim.lr = 0.5f;
        record_run(&c, &docs, 3, &rec[i]);
        if (!i) {
            c.strategy.optim.lr = 0.0f;
            record_run(&c, &docs, 1, &init);
        }
    }
    for (int i = 1; i < 4; i++)
        for (int s = 0; s < 3; s++) {
            float a = rec[0].loss[s], b = rec[i].loss[s];
            if (!(fabsf(a - b) <= 1e-5f * fabsf(a)))
                fail_msg("split %d step %d: loss %.9g vs %.9g", i, s + 1, (double)b, (double)a);
            double dd = 0, upd = 0;
            for (int u = 0; u < rec[0].layout.num_units; u++)
                for (size_t e = 0; e < rec[0].layout.units[u].numel; e++) {
                    double pa = record_param(&rec[0], s, u, e), pb = record_param(&rec[i], s, u, e);
                    double p0 = record_param(&init, 0, u, e);
                    dd += (pa - pb) * (pa - pb);
                    upd += (pa - p0) * (pa - p0);
                }
            if (!(sqrt(dd) <= 1e-4 * sqrt(upd)) || upd == 0)
                fail_msg("split %d step %d: |params - reference| = %g, |update| = %g", i, s + 1, sqrt(dd), sqrt(upd));
        }
    for (int i = 0; i < 4; i++) free_record(&rec[i]);
    free_record(&init);
}

/* World 2, micro-batch 2, accumulation 2: micro-batch (k, r) of step 1 holds
 * global sequences (2k + r) * 2 + {0, 1}, which a world-1 run with
 * micro-batch 2 reads at its step 2k + r + 1. */
static void test_closed_forms(void **state) {
    enum { M = 4, B = 2, T = 8 };
    shs_train_config_t one = padded_config(1, B, 1);
    one.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    one.strategy.optim.lr = 0.0f; /* the parameters stay the initial ones: m_i at step i + 1 */
    one.loss_norm = SHS_LOSS_NORM_PER_MICRO_BATCH;
    run_record_t r1;
    record_run(&one, &docs, M, &r1);
    shs_documents_t d;
    assert_int_equal(shs_documents_build(&d, &docs, SHS_DATA_PAD, '\n', T), SHS_OK);
    double m[M], n[M], per_micro = 0, sum = 0, count = 0;
    for (int i = 0; i < M; i++) {
        int32_t tok[B * T], tgt[B * T];
        shs_data_batch(&docs, &d, one.strategy.seed, i, 0, 1, B, T, tok, tgt, NULL, NULL);
        n[i] = 0;
        for (int j = 0; j < B * T; j++) n[i] += tgt[j] != SHS_IGNORE_INDEX;
        m[i] = r1.loss[i];
        per_micro += m[i] / M;
        sum += m[i] * n[i];
        count += n[i];
    }
    shs_documents_free(&d);
    free_record(&r1);
    double global = sum / count;
    int unequal = 0;
    for (int i = 1; i < M; i++) unequal |= n[i] != n[0];
    assert_true(unequal); /* else both forms agree */

    shs_train_config_t c = padded_config(2, B, 2);
    c.strategy.kind = SHS_ZERO2;
    run_record_t a, b;
    c.loss_norm = SHS_LOSS_NORM_PER_MICRO_BATCH;
    record_run(&c, &docs, 1, &a);
    c.loss_norm = SHS_LOSS_NORM_GLOBAL_TOKENS;
    record_run(&c, &docs, 1, &b);
    /* the reported losses are f32 sums of a few f32 terms (and products
     * with counts): a few ulps, far below 1e-6 relative */
    const double tol = 1e-6;
    if (!(fabs(a.loss[0] - per_micro) <= tol * per_micro))
        fail_msg("per-micro-batch loss %.9g, closed form %.9g", (double)a.loss[0], per_micro);
    if (!(fabs(b.loss[0] - global) <= tol * global))
        fail_msg("global-tokens loss %.9g, closed form %.9g", (double)b.loss[0], global);
    /* they differ by what the closed forms say, far above the tolerance
     * (here about 7e-4 relative: the random model's token losses are
     * close to log 256 everywhere; the counts are 7, 6, 2 and 15) */
    assert_true(fabs(per_micro - global) > 100 * tol * global);
    if (!(fabs((a.loss[0] - b.loss[0]) - (per_micro - global)) <= 2 * tol * global))
        fail_msg("difference %.9g, closed forms' %.9g", (double)(a.loss[0] - b.loss[0]), per_micro - global);
    /* and so do the parameters after the step */
    assert_true(memcmp(a.snap[0], b.snap[0], a.len * sizeof(float)) != 0);
    free_record(&a);
    free_record(&b);
}

/* A global batch of separators alone has no real target: its loss is 0/0.
 * Under global-tokens (the default with documents) the step is refused by
 * number, not reported as loss 0. */
static void test_no_targets_global(void **state) {
    static char seps[64];
    memset(seps, '\n', sizeof seps);
    shs_corpus_t c = {.bytes = (uint8_t *)seps, .len = sizeof seps, .source = "separators"};
    shs_train_config_t cfg = padded_config(2, 2, 2);
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &c), SHS_OK);
    float loss;
    assert_int_equal(shs_trainer_step(t, &loss), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "step 1: the global batch has no target tokens"));
    shs_trainer_destroy(t);
}

/* Under per-micro-batch, the first micro-batch (in accumulation order, then
 * rank) without a real target is refused by step, rank and micro-batch,
 * suggesting global-tokens; the steps before it run. The expected step,
 * rank and micro-batch are found here from the data (shs_data_batch). */
static void test_no_targets_per_micro_batch(void **state) {
    static char text[400];
    size_t n = 0;
    while (n + 5 <= sizeof text) { /* "\n" alone, then "abc\n": every second document is empty */
        memcpy(text + n, "\nabc\n", 5);
        n += 5;
    }
    shs_corpus_t c = {.bytes = (uint8_t *)text, .len = n, .source = "half empty"};
    enum { N = 2, B = 1, K = 2 };
    shs_train_config_t cfg = padded_config(N, B, K);
    cfg.loss_norm = SHS_LOSS_NORM_PER_MICRO_BATCH;
    shs_documents_t d;
    assert_int_equal(shs_documents_build(&d, &c, SHS_DATA_PAD, '\n', cfg.model.context), SHS_OK);
    int T = cfg.model.context;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    long bad_step = -1;
    int bad_rank = -1, bad_k = -1;
    for (long s = 0; s < 50 && bad_step < 0; s++)
        for (int k = 0; k < K && bad_step < 0; k++)
            for (int r = 0; r < N && bad_step < 0; r++) {
                shs_data_batch(&c, &d, cfg.strategy.seed, s * K + k, r, N, B, T, tok, tgt, NULL, NULL);
                int real = 0;
                for (int t = 0; t < T; t++) real += tgt[t] != SHS_IGNORE_INDEX;
                if (!real) bad_step = s, bad_rank = r, bad_k = k;
            }
    free(tok);
    free(tgt);
    shs_documents_free(&d);
    assert_true(bad_step >= 0);
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &c), SHS_OK);
    float loss;
    for (long s = 0; s < bad_step; s++) {
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        assert_true(isfinite(loss) && loss > 0);
    }
    assert_int_equal(shs_trainer_step(t, &loss), SHS_INVALID_ARG);
    char want[96];
    snprintf(want, sizeof want, "step %ld: rank %d's micro-batch %d ", bad_step + 1, bad_rank, bad_k);
    assert_non_null(strstr(shs_last_error(), want));
    assert_non_null(strstr(shs_last_error(), "global-tokens"));
    shs_trainer_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_norm),
        cmocka_unit_test(test_pack_refused_for_gpt),
        cmocka_unit_test(test_global_tokens_stages_match_ddp),
        cmocka_unit_test(test_global_tokens_splits_agree),
        cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_no_targets_global),
        cmocka_unit_test(test_no_targets_per_micro_batch),
    };
    return cmocka_run_group_tests(tests, docs_setup, NULL);
}
