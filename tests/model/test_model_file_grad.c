/* test_model_file_grad.c - a model-description file's whole-model
 * gradient against central finite differences, through a test-local
 * parameter source that also checks the call protocol (grads_ready once per
 * unit, after its last contribution): a tied embedding, ReLU on one-hot
 * inputs, a zero-width path; and random garbage, which parses or fails
 * with a message and never crashes forward or backward. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shardsim/model_file.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "finite_diff.h"
#include "harness.h"

#include "model_file_text.h"

/* ---- a test-local parameter source that checks the call protocol -------- */

typedef struct {
    shs_device_t *dev;
    const shs_layout_t *lo;
    float **params, **grads;   /* NULL for empty units: the model must cope */
    int *ready;                /* grads_ready calls per unit in this backward */
    int *grads_acq;            /* acquire_grads calls per unit */
    int *fwd_acq;              /* acquire_params per unit during forward */
    int acquired;              /* outstanding param acquires */
    int in_backward;
    char failure[256];         /* first protocol violation */
} plain_source_t;

static void ps_fail(plain_source_t *s, const char *what, int unit) {
    if (!s->failure[0]) snprintf(s->failure, sizeof s->failure, "%s (unit %d)", what, unit);
}
static shs_status_t ps_acquire(void *self, int unit, const float **p) {
    plain_source_t *s = self;
    if (unit < 0 || unit >= s->lo->num_units) ps_fail(s, "acquire_params of a unit out of range", unit);
    s->acquired++;
    if (!s->in_backward) s->fwd_acq[unit]++;
    *p = s->params[unit];
    return SHS_OK;
}
static shs_status_t ps_release(void *self, int unit) {
    plain_source_t *s = self;
    if (s->acquired <= 0) ps_fail(s, "release_params without acquire", unit);
    s->acquired--;
    return SHS_OK;
}
static shs_status_t ps_grads(void *self, int unit, float **g) {
    plain_source_t *s = self;
    if (!s->in_backward) ps_fail(s, "acquire_grads in forward", unit);
    if (s->ready[unit]) ps_fail(s, "acquire_grads after grads_ready", unit);
    s->grads_acq[unit]++;
    *g = s->grads[unit];
    return SHS_OK;
}
static shs_status_t ps_ready(void *self, int unit) {
    plain_source_t *s = self;
    if (!s->grads_acq[unit]) ps_fail(s, "grads_ready without acquire_grads", unit);
    if (s->ready[unit]) ps_fail(s, "grads_ready twice", unit);
    s->ready[unit]++;
    return SHS_OK;
}

typedef struct {
    shs_model_file_t *nd;
    shs_layout_t lo;
    shs_device_t *dev;
    shs_model_t *model;
    plain_source_t ps;
    shs_param_source_t src;
    int B, T;
    int32_t *tok, *tgt;
} fixture_t;

static void fixture_init(fixture_t *f, const char *text, int B, int T, float perturb) {
    memset(f, 0, sizeof *f);
    f->nd = parse_ok(text);
    assert_int_equal(shs_model_file_layout_create(&f->lo, f->nd), SHS_OK);
    assert_int_equal(shs_device_create_cpu(&f->dev, 0, SIZE_MAX, 1), SHS_OK);
    assert_int_equal(shs_model_file_model_create(&f->model, f->nd, &f->lo, f->dev, B, T), SHS_OK);
    size_t U = (size_t)f->lo.num_units;
    f->ps = (plain_source_t){.dev = f->dev, .lo = &f->lo, .params = calloc(U, sizeof(float *)),
                             .grads = calloc(U, sizeof(float *)), .ready = calloc(U, sizeof(int)),
                             .grads_acq = calloc(U, sizeof(int)), .fwd_acq = calloc(U, sizeof(int))};
    for (size_t u = 0; u < U; u++) {
        size_t n = f->lo.units[u].numel;
        if (!n) continue;
        float *host = malloc(n * sizeof(float));
        shs_layout_init_range(&f->lo, 42, (int)u, 0, n, host);
        /* nonzero biases and non-unit LayerNorm weights exercise every term */
        for (size_t i = 0; i < n; i++) host[i] += perturb * (float)sin(0.7 * (double)i + (double)u);
        assert_int_equal(shs_device_alloc(f->dev, (void **)&f->ps.params[u], n * 4, SHS_MEM_PARAMS, NULL), SHS_OK);
        assert_int_equal(shs_device_alloc(f->dev, (void **)&f->ps.grads[u], n * 4, SHS_MEM_GRADS, NULL), SHS_OK);
        shs_memcpy_h2d(f->dev, f->ps.params[u], host, n * 4);
        free(host);
    }
    f->src = (shs_param_source_t){&f->ps, ps_acquire, ps_release, ps_grads, ps_ready};
    f->B = B, f->T = T;
    size_t bt = (size_t)B * (size_t)T;
    f->tok = malloc(bt * sizeof(int32_t));
    f->tgt = malloc(bt * sizeof(int32_t));
    for (size_t i = 0; i < bt; i++) {
        f->tok[i] = (int32_t)((i * 37 + 11) % 256);
        f->tgt[i] = (int32_t)((i * 53 + 7) % 256);
    }
}

static void fixture_free(fixture_t *f) {
    shs_model_destroy(f->model);
    shs_device_destroy(f->dev);
    free(f->ps.params);
    free(f->ps.grads);
    free(f->ps.ready);
    free(f->ps.grads_acq);
    free(f->ps.fwd_acq);
    free(f->tok);
    free(f->tgt);
    shs_layout_free(&f->lo);
    shs_model_file_free(f->nd);
}

/* One forward and backward (dloss 1) into zeroed gradients, checking the protocol. */
static float loss_at(fixture_t *f) {
    plain_source_t *s = &f->ps;
    int U = f->lo.num_units;
    float loss;
    memset(s->fwd_acq, 0, (size_t)U * sizeof(int));
    s->in_backward = 0;
    assert_int_equal(shs_model_forward(f->model, &f->src, &(shs_batch_t){.tokens = f->tok, .targets = f->tgt}, &loss), SHS_OK);
    if (s->acquired != 0) fail_msg("forward left %d parameter acquires outstanding", s->acquired);
    for (int u = 0; u < U; u++)
        if (s->grads[u]) shs_memset(f->dev, s->grads[u], 0, f->lo.units[u].numel * 4);
    memset(s->ready, 0, (size_t)U * sizeof(int));
    memset(s->grads_acq, 0, (size_t)U * sizeof(int));
    s->in_backward = 1;
    assert_int_equal(shs_model_backward(f->model, &f->src, 1.0f), SHS_OK);
    s->in_backward = 0;
    if (s->failure[0]) fail_msg("parameter source protocol: %s", s->failure);
    if (s->acquired != 0) fail_msg("backward left %d parameter acquires outstanding", s->acquired);
    for (int u = 0; u < U; u++)
        if (s->ready[u] != 1) fail_msg("unit %d: grads_ready called %d times (want 1)", u, s->ready[u]);
    return loss;
}

static double loss_cb(void *f) { return loss_at(f); }

/* Every element of every tensor: |analytic - numeric| <= 2e-3 max(|numeric|, 1e-2) + 2e-4
 * (the f32 rounding of the loss over steps of 5e-3, as in test_model.c). */
static void check_gradient(const char *text, int B, int T, float perturb) {
    fixture_t f;
    fixture_init(&f, text, B, T, perturb);
    loss_at(&f);
    int U = f.lo.num_units;
    float **g = calloc((size_t)U, sizeof *g);
    for (int u = 0; u < U; u++) {
        size_t n = f.lo.units[u].numel;
        g[u] = malloc(n * 4 + 4);
        if (n) shs_memcpy_d2h(f.dev, g[u], f.ps.grads[u], n * 4);
    }
    double max_num = 0;
    int checked = 0;
    for (int ti = 0; ti < f.lo.num_tensors; ti++) {
        const shs_tensor_info_t *t = &f.lo.tensors[ti];
        for (size_t e = t->offset; e < t->offset + t->numel; e++) {
            double num = fd_derivative(f.dev, f.ps.params[t->unit] + e, loss_cb, &f), ana = g[t->unit][e];
            double tol = 2e-3 * fmax(fabs(num), 1e-2) + 2e-4;
            if (fabs(ana - num) > tol)
                fail_msg("%s[%zu]: analytic %.6g vs numeric %.6g", t->name, e - t->offset, ana, num);
            max_num = fmax(max_num, fabs(num));
            checked++;
        }
    }
    assert_true(checked > 20);
    assert_true(max_num > 1e-2); /* not vacuous */
    for (int u = 0; u < U; u++) free(g[u]);
    free(g);
    fixture_free(&f);
}

/* Tied Embedding used at both ends, LayerNorm, GELU, Linear with and without bias. */
static const char grad_tied_text[] =
    "unit embed\n"
    "Embedding 7 5 name=wte\n"
    "unit block\n"
    "LayerNorm 5\n"
    "Linear 5 6\n"
    "GELU\n"
    "Linear 6 5 nobias\n"
    "unit head\n"
    "LayerNorm 5 name=ln_f\n"
    "Linear 5 7 tied=wte\n";

static void test_gradient_tied(void **state) {
    (void)state;
    check_gradient(grad_tied_text, 2, 3, 0.05f);
}

/* One-hot input, ReLU, an empty unit, a trailing unused Linear(4, 0). The
 * parameters are perturbed by up to 0.5 so that ReLU's inputs lie far from
 * its kink compared with the difference steps (5e-3, 1e-2). */
static const char grad_relu_text[] =
    "unit a\n"
    "Linear 6 8\n"
    "ReLU\n"
    "LayerNorm 8\n"
    "Linear 8 5\n"
    "unit empty\n"
    "unit b\n"
    "Linear 5 4 name=out\n"
    "Linear 4 0 unused\n";

static void test_gradient_relu_onehot(void **state) {
    (void)state;
    check_gradient(grad_relu_text, 2, 4, 0.5f);
}

static const char zero_path_text[] =
    "unit a\n"
    "Linear 3 5 name=fc1\n"
    "unit b\n"
    "Linear 5 0\n"
    "Linear 0 3\n"
    "GELU\n"
    "Linear 3 4\n";

/* The forward runs matmuls with OC = 0 and C = 0: fc1 gets an exact zero
 * gradient (nothing flows through width 0), the constant bias of Linear(0,3)
 * a finite-difference-checked one. */
static void test_zero_width_path(void **state) {
    (void)state;
    check_gradient(zero_path_text, 1, 3, 0.05f);
    fixture_t f;
    fixture_init(&f, zero_path_text, 1, 3, 0.05f);
    loss_at(&f);
    float gfc1[20];
    shs_memcpy_d2h(f.dev, gfc1, f.ps.grads[0], sizeof gfc1);
    for (int i = 0; i < 20; i++) assert_true(gfc1[i] == 0.0f);
    fixture_free(&f);
}

/* The tied Embedding's unit: acquired twice in forward (lookup and head),
 * its gradient reported once, after the lookup's contribution. */
static void test_tied_protocol_and_rows(void **state) {
    (void)state;
    fixture_t f;
    fixture_init(&f, tied_text, 1, 4, 0.0f);
    for (int i = 0; i < 4; i++) f.tok[i] = 3;      /* only row 3 is an input */
    loss_at(&f);
    assert_int_equal(f.ps.fwd_acq[0], 2);
    assert_int_equal(f.ps.fwd_acq[1], 1);
    assert_int_equal(f.ps.fwd_acq[2], 0);          /* the head's unit has no tensor of its own */
    assert_int_equal(f.ps.grads_acq[0], 2);        /* head, then lookup */
    /* every row gets the head's gradient; row 3 also the lookup's */
    float gw[40];
    shs_memcpy_d2h(f.dev, gw, f.ps.grads[0], sizeof gw);
    for (int r = 0; r < 10; r++) {
        int nz = 0;
        for (int c = 0; c < 4; c++) nz += gw[r * 4 + c] != 0.0f;
        if (!nz) fail_msg("row %d of wte got no gradient", r);
    }
    fixture_free(&f);
}

/* Random texts, line by line: unit lines, layer lines with sizes that often
 * (not always) chain, options right and wrong, raw bytes. Every one parses
 * or fails with SHS_PARSE and a "m.txt" message; those that parse build a
 * layout and run forward and backward through the protocol-checking source. */
static uint64_t fz;
static unsigned fz_next(unsigned n) {
    fz = fz * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((fz >> 33) % n);
}

static void fuzz_text(char *text, size_t cap) {
    static const char *kinds_[] = {"Linear", "LayerNorm", "GELU", "ReLU", "Embedding"};
    static const char *opts[] = {"bias", "nobias", "unused", "name=e", "name=f", "tied=e", "tied=f", "tied=0",
                                 "replicated", "x=", "=", "#", "\xff\x01", "bias bias", "99999999999", "-1"};
    size_t len = 0;
    int width = 1 + (int)fz_next(4), nl = 1 + (int)fz_next(8);
    text[0] = 0;
    for (int l = 0; l < nl; l++) {
        char line[160];
        int n = 0, k = l == 0 && fz_next(10) ? 0 : (int)fz_next(20);
        if (k < 3) n = snprintf(line, sizeof line, "unit u%u%s", fz_next(3), fz_next(4) ? "" : " replicated");
        else if (k == 3) n = snprintf(line, sizeof line, "%s", opts[fz_next(16)]);
        else if (k == 4) n = snprintf(line, sizeof line, "# comment");
        else {
            const char *kind = kinds_[fz_next(5)];
            int a = fz_next(4) ? width : (int)fz_next(5), b = (int)fz_next(6);
            if (!strcmp(kind, "Linear")) n = snprintf(line, sizeof line, "Linear %d %d", a, b), width = b;
            else if (!strcmp(kind, "LayerNorm")) n = snprintf(line, sizeof line, "LayerNorm %d", a);
            else if (!strcmp(kind, "Embedding")) n = snprintf(line, sizeof line, "Embedding %d %d", b + 1, a), width = a;
            else n = snprintf(line, sizeof line, "%s", kind);
            for (unsigned o = fz_next(3); o > 0 && n < 100; o--) n += snprintf(line + n, sizeof line - (size_t)n, " %s", opts[fz_next(16)]);
        }
        if (len + (size_t)n + 2 >= cap) break;
        memcpy(text + len, line, (size_t)n);
        len += (size_t)n;
        text[len++] = '\n';
        text[len] = 0;
    }
}

static void test_garbage_never_crashes(void **state) {
    (void)state;
    fz = 12345;
    char text[1024];
    int parsed = 0;
    for (int it = 0; it < 4000; it++) {
        fuzz_text(text, sizeof text);
        shs_model_file_t *nd = NULL;
        shs_status_t st = shs_model_file_parse(&nd, text, "m.txt");
        if (st != SHS_OK) {
            if (st != SHS_PARSE || nd || strncmp(shs_last_error(), "m.txt", 5) != 0)
                fail_msg("status %s, error '%s' for:\n%s", shs_status_name(st), shs_last_error(), text);
            continue;
        }
        parsed++;
        shs_model_file_free(nd);
        fixture_t f;
        fixture_init(&f, text, 2, 2, 0.0f);
        float loss = loss_at(&f);
        if (!isfinite(loss)) fail_msg("loss %g for:\n%s", (double)loss, text);
        fixture_free(&f);
    }
    if (parsed < 100) fail_msg("only %d of 4000 texts parsed: the fuzzing barely reaches the model", parsed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_tied),
        cmocka_unit_test(test_gradient_relu_onehot),
        cmocka_unit_test(test_zero_width_path),
        cmocka_unit_test(test_tied_protocol_and_rows),
        cmocka_unit_test(test_garbage_never_crashes),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
