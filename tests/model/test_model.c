/* test_model.c - the GPT's forward and backward as a whole, independent of
 * any strategy: a plain parameter source (tests/plain_source.h) holds every
 * unit in device buffers. The analytic gradient of the mean loss is checked against
 * central finite differences; initialization against its definition. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "finite_diff.h"
#include "plain_source.h"
#include "shardsim/gpt.h"

typedef struct {
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *gpt;
    plain_source_t ps;
    int B;
    int32_t *tok, *tgt;
} fixture_t;

static void fixture_init(fixture_t *f, shs_gpt_config_t cfg, int B) {
    memset(f, 0, sizeof *f);
    assert_int_equal(shs_gpt_layout_create(&f->lo, &cfg), SHS_OK);
    assert_int_equal(shs_device_create_cpu(&f->dev, 0, SIZE_MAX, 1), SHS_OK);
    assert_int_equal(shs_gpt_create(&f->gpt, &f->lo, &cfg, f->dev, B, 0), SHS_OK);
    /* nonzero biases and non-unit LayerNorm weights exercise every term */
    plain_source_init(&f->ps, f->dev, &f->lo, 42, 0.05f);
    f->B = B;
    size_t bt = (size_t)B * (size_t)cfg.context;
    f->tok = malloc(bt * sizeof(int32_t));
    f->tgt = malloc(bt * sizeof(int32_t));
    for (size_t i = 0; i < bt; i++) {
        f->tok[i] = (int32_t)((i * 37 + 11) % 256);
        f->tgt[i] = (int32_t)((i * 53 + 7) % 256);
    }
}

static void fixture_free(fixture_t *f) {
    shs_model_destroy(f->gpt);
    plain_source_free(&f->ps);
    shs_device_destroy(f->dev);
    free(f->tok);
    free(f->tgt);
    shs_layout_free(&f->lo);
}

static float loss_at(fixture_t *f) {
    float loss;
    assert_int_equal(shs_model_forward(f->gpt, &f->ps.src, &(shs_batch_t){.tokens = f->tok, .targets = f->tgt}, &loss),
                     SHS_OK);
    plain_source_zero_grads(&f->ps);
    assert_int_equal(shs_model_backward(f->gpt, &f->ps.src, 1.0f), SHS_OK); /* releases the head's acquire */
    assert_int_equal(f->ps.grads_after_ready, 0); /* no accumulation after grads_ready */
    return loss;
}

static double loss_cb(void *f) { return loss_at(f); }

/* Finite differences of the mean loss for a sample of elements of every
 * tensor. Tolerance: |analytic - numeric| <= 2e-3 * max(|numeric|, 1e-2)
 * + 2e-4, set by the f32 rounding of the loss (~5e-7) over steps of 5e-3. */
static void test_gradient_matches_finite_differences(void **state) {
    (void)state;
    fixture_t f;
    fixture_init(&f, (shs_gpt_config_t){.num_layers = 2, .num_heads = 2, .channels = 8, .context = 6}, 2);
    loss_at(&f);
    assert_int_equal(f.ps.acquired, 0);
    for (int u = 0; u < f.lo.num_units; u++) assert_int_equal(f.ps.ready[u], 1);
    /* keep the analytic gradients */
    int U = f.lo.num_units;
    float *g[SHS_GPT_MAX_LAYERS + 2];
    for (int u = 0; u < U; u++) {
        size_t n = f.lo.units[u].numel;
        g[u] = malloc(n * 4);
        shs_memcpy_d2h(f.dev, g[u], f.ps.grads[u], n * 4);
    }
    int checked = 0;
    for (int ti = 0; ti < f.lo.num_tensors; ti++) {
        const shs_tensor_info_t *t = &f.lo.tensors[ti];
        for (size_t k = 0; k < 5 && k < t->numel; k++) {
            size_t e = t->offset + (k * 7919) % t->numel;
            double num = fd_derivative(f.dev, f.ps.params[t->unit] + e, loss_cb, &f), ana = g[t->unit][e];
            double tol = 2e-3 * fmax(fabs(num), 1e-2) + 2e-4;
            if (fabs(ana - num) > tol)
                fail_msg("%s[%zu]: analytic %.6g vs numeric %.6g", t->name, e - t->offset, ana, num);
            checked++;
        }
    }
    assert_true(checked > 50);
    for (int u = 0; u < U; u++) free(g[u]);
    fixture_free(&f);
}

/* The wte gradient sums the LM head's use and the embedding lookup's use:
 * a row of a byte that never occurs as an input still gets the head's part. */
static void test_tied_embedding_gradient_has_both_uses(void **state) {
    (void)state;
    fixture_t f;
    fixture_init(&f, (shs_gpt_config_t){.num_layers = 1, .num_heads = 1, .channels = 4, .context = 4}, 1);
    for (int i = 0; i < 4; i++) f.tok[i] = 3;      /* only byte 3 is an input */
    loss_at(&f);
    float row200[4];
    shs_memcpy_d2h(f.dev, row200, f.ps.grads[0] + 200 * 4, sizeof row200);
    int nz = 0;
    for (int c = 0; c < 4; c++) nz += row200[c] != 0.0f;
    assert_true(nz > 0); /* head only */
    fixture_free(&f);
}

/* Initialization per GPT-2: statistics and exact constants. */
static void test_init_follows_gpt2(void **state) {
    (void)state;
    shs_gpt_config_t cfg = {.num_layers = 4, .num_heads = 4, .channels = 64, .context = 32};
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &cfg), SHS_OK);
    /* parameter count: V*C + T*C + L*(12 C^2 + 13 C) + 2C */
    size_t C = 64, want = 256 * C + 32 * C + 4 * (12 * C * C + 13 * C) + 2 * C;
    assert_int_equal(lo.num_params, want);
    for (int ti = 0; ti < lo.num_tensors; ti++) {
        const shs_tensor_info_t *t = &lo.tensors[ti];
        float *v = malloc(t->numel * 4);
        shs_layout_init_range(&lo, 7, t->unit, t->offset, t->offset + t->numel, v);
        double s = 0, s2 = 0;
        for (size_t i = 0; i < t->numel; i++) { s += v[i]; s2 += (double)v[i] * v[i]; }
        double mean = s / (double)t->numel, sd = sqrt(s2 / (double)t->numel - mean * mean);
        if (strstr(t->name, "ln_") && strstr(t->name, "weight")) {
            for (size_t i = 0; i < t->numel; i++) assert_true(v[i] == 1.0f);
        } else if (strstr(t->name, "bias")) {
            for (size_t i = 0; i < t->numel; i++) assert_true(v[i] == 0.0f);
        } else {
            double want_sd = strstr(t->name, "c_proj.weight") ? 0.02 / sqrt(8.0) : 0.02;
            if (fabs(sd - want_sd) > 0.1 * want_sd || fabs(mean) > 0.1 * want_sd)
                fail_msg("%s: mean %g sd %g, want sd %g", t->name, mean, sd, want_sd);
        }
        /* any sub-range gives the same values (shards are generated independently) */
        if (t->numel > 10) {
            float part[5];
            shs_layout_init_range(&lo, 7, t->unit, t->offset + 3, t->offset + 8, part);
            assert_memory_equal(part, v + 3, sizeof part);
        }
        free(v);
    }
    /* padding past the unit is zero */
    float pad[3];
    shs_layout_init_range(&lo, 7, lo.num_units - 1, lo.units[lo.num_units - 1].numel, lo.units[lo.num_units - 1].numel + 3, pad);
    for (int i = 0; i < 3; i++) assert_true(pad[i] == 0.0f);
    shs_layout_free(&lo);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_follows_gpt2),
        cmocka_unit_test(test_gradient_matches_finite_differences),
        cmocka_unit_test(test_tied_embedding_gradient_has_both_uses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
