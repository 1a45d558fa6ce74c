/* test_model_file.c - models from model-description files (model_file.h).
 *
 * What it checks: every parse error's exact "file:line: what" text; that
 * garbage never crashes; layouts (tensors, offsets, shapes, names, units)
 * against hand counts; the whole model's gradient against central finite
 * differences through a test-local parameter source that also checks the
 * call protocol (grads_ready once per unit, after its last contribution);
 * and, through the trainer, ZeRO-1/2/3 against DDP bit for bit on the
 * layouts that break real systems (a tied embedding,
 * sim/models/tied_tiny.txt; sizes [8, 0, 24], sim/models/zero_size.txt).
 */
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

static shs_model_file_t *parse_ok(const char *text) {
    shs_model_file_t *nd = NULL;
    shs_status_t st = shs_model_file_parse(&nd, text, "m.txt");
    if (st != SHS_OK) fail_msg("parse failed: %s\n--- text:\n%s", shs_last_error(), text);
    assert_non_null(nd);
    return nd;
}

/* ---- parse errors ---------------------------------------------------------- */

static const struct {
    const char *text, *error;
} bad[] = {
    {"Conv2d 3 4\n", "m.txt:1: unknown layer 'Conv2d' (expected unit, Linear, LayerNorm, GELU, ReLU or Embedding)"},
    {"linear 3 4\n", "m.txt:1: unknown layer 'linear' (expected unit, Linear, LayerNorm, GELU, ReLU or Embedding)"},
    {"# a model\nLinear 4 8\n", "m.txt:2: Linear before any 'unit' line"},
    {"unit a\nLinear 4\n", "m.txt:2: Linear needs 2 sizes (in out), got 1"},
    {"unit a\nLinear 4 8 2\n", "m.txt:2: Linear needs 2 sizes (in out), got 3"},
    {"unit a\nLayerNorm\n", "m.txt:2: LayerNorm needs 1 size (C), got 0"},
    {"unit a\nLinear 4 4\nGELU 4\n", "m.txt:3: GELU takes no sizes, got 1"},
    {"unit a\nLinear 4 8x\n", "m.txt:2: Linear: out '8x' is not a whole number"},
    {"unit a\nLinear -4 8\n", "m.txt:2: Linear: in '-4' is not a whole number"},
    {"unit a\nLinear 4 99999999\n", "m.txt:2: Linear: out 99999999 is out of range 0..16777216"},
    {"unit a\nLinear 4 1234567890123\n", "m.txt:2: Linear: out 1234567890123 is out of range 0..16777216"},
    {"unit a\nLayerNorm 0\n", "m.txt:2: LayerNorm: C 0 is out of range 1..16777216"},
    {"unit a\nEmbedding 0 4\n", "m.txt:2: Embedding: V 0 is out of range 1..16777216"},
    {"unit a\nLinear 16777216 16777216\n",
     "m.txt:2: Linear 16777216 16777216: its weight would have 281474976710656 elements, more than 2147483647"},
    {"unit a\nLinear 4 8\nLayerNorm 6\n",
     "m.txt:3: LayerNorm expects input width 6, but the layer before it (line 2) outputs 8"},
    {"unit a\r\nLinear 4 8\r\n\r\nunit b\r\nLinear 6 2\r\n",
     "m.txt:5: Linear expects input width 6, but the layer before it (line 2) outputs 8"},
    {"unit a\nEmbedding 10 4\nLinear 4 10 tied=wte\n", "m.txt:3: tied=wte: no Embedding named 'wte' on an earlier line"},
    {"unit a\nLinear 4 10 tied=wte\nunit b\nEmbedding 10 4 name=wte unused\n",
     "m.txt:2: tied=wte: no Embedding named 'wte' on an earlier line"},
    {"unit a\nEmbedding 10 4 name=wte\nLinear 4 12 tied=wte\n",
     "m.txt:3: tied=wte: Linear 4 12 needs Embedding 12 4, but 'wte' (line 2) is Embedding 10 4"},
    {"unit a\nLinear 4 4 name=fc\nLinear 4 4 tied=fc\n", "m.txt:3: tied=fc: 'fc' (line 2) is a Linear, not an Embedding"},
    {"unit a\nLayerNorm 4 tied=x\n", "m.txt:2: unknown option 'tied=x' for LayerNorm (expected name=, unused)"},
    {"unit a\nLinear 4 4 biased\n",
     "m.txt:2: unknown option 'biased' for Linear (expected bias, nobias, name=, tied=, unused)"},
    {"unit a\nLinear 4 4 bias nobias\n", "m.txt:2: Linear: bias given twice (bias or nobias, once)"},
    {"unit a\nLinear 4 4 unused unused\nLinear 4 4\n", "m.txt:2: Linear: option 'unused' given twice"},
    {"unit a\nLinear 4 4 name=fc\nLinear 4 4 name=fc\n", "m.txt:3: name 'fc' is already used on line 2"},
    {"unit a\nLinear 4 4 name=2x\n",
     "m.txt:2: Linear: bad name '2x' (a letter or _, then letters, digits, _ . -; at most 32 characters)"},
    {"unit a\nLinear 4 4\nunit a\n", "m.txt:3: unit 'a' is already defined on line 1"},
    {"unit\n", "m.txt:1: unit needs a name"},
    {"unit 1abc\n", "m.txt:1: unit: bad name '1abc' (a letter or _, then letters, digits, _ . -; at most 31 characters)"},
    {"unit a shared\n", "m.txt:1: unknown option 'shared' for unit (expected replicated)"},
    {"", "m.txt: empty model (no layers)"},
    {"# only a comment\n\n   \n", "m.txt: empty model (no layers)"},
    {"unit a\nunit b\n", "m.txt: empty model (no layers)"},
    {"unit a\nLinear 4 4 unused\n", "m.txt: no layer is used in the forward pass (every layer is 'unused')"},
    {"unit a\nLinear 4 0\n", "m.txt:2: the last used layer outputs width 0; the loss needs at least 1 class"},
    {"unit a\nLinear 4 3\nLinear 3 0\nLinear 2 2 unused\n",
     "m.txt:3: the last used layer outputs width 0; the loss needs at least 1 class"},
    {"unit a\nGELU\nLinear 4 4\n",
     "m.txt:2: GELU cannot be the first used layer: its width is unknown (start with Linear, LayerNorm or Embedding)"},
    {"unit a\nLinear 4 4\nEmbedding 10 4\n",
     "m.txt:3: Embedding must be the first used layer (it reads the tokens); mark it 'unused' to declare it here"},
    {"\x01\x02\xff garbage\n", "m.txt:1: unknown layer '?\?\?' (expected unit, Linear, LayerNorm, GELU, ReLU or Embedding)"},
    {"unit a\nLinear 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1\n", "m.txt:2: too many words on one line (at most 16)"},
};

static void test_parse_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        shs_model_file_t *nd = (shs_model_file_t *)1;
        shs_status_t st = shs_model_file_parse(&nd, bad[i].text, "m.txt");
        if (st != SHS_PARSE || nd != NULL)
            fail_msg("case %zu: status %s (want PARSE), out %p\n  text: %s", i, shs_status_name(st), (void *)nd,
                     bad[i].text);
        if (strcmp(shs_last_error(), bad[i].error) != 0)
            fail_msg("case %zu:\n  got  '%s'\n  want '%s'", i, shs_last_error(), bad[i].error);
    }
    /* a line over the limit */
    char *text = malloc(2100);
    strcpy(text, "unit a\n");
    memset(text + 7, 'x', 2000);
    text[2007] = 0;
    shs_model_file_t *nd;
    assert_int_equal(shs_model_file_parse(&nd, text, "m.txt"), SHS_PARSE);
    assert_string_equal(shs_last_error(), "m.txt:2: line longer than 1024 characters");
    free(text);
}

static void test_load_errors(void **state) {
    (void)state;
    shs_model_file_t *nd = (shs_model_file_t *)1;
    assert_int_equal(shs_model_file_load(&nd, "/nonexistent/model.txt"), SHS_IO);
    assert_null(nd);
    assert_string_equal(shs_last_error(), "cannot open model file '/nonexistent/model.txt': No such file or directory");
    char path[] = "/tmp/shs_model_file_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char nul[] = "unit a\nLinear 4 4\0\n";
    assert_int_equal(write(fd, nul, sizeof nul - 1), (ssize_t)(sizeof nul - 1));
    close(fd);
    assert_int_equal(shs_model_file_load(&nd, path), SHS_PARSE);
    char want[256];
    snprintf(want, sizeof want, "%s: contains a NUL byte; not a model description", path);
    assert_string_equal(shs_last_error(), want);
    /* the same file without the NUL loads, and errors name the path */
    FILE *f = fopen(path, "w");
    fputs("unit a\nLinear 4 4\nReLU\nLayerNorm 3\n", f);
    fclose(f);
    assert_int_equal(shs_model_file_load(&nd, path), SHS_PARSE);
    snprintf(want, sizeof want, "%s:4: LayerNorm expects input width 3, but the layer before it (line 3) outputs 4",
             path);
    assert_string_equal(shs_last_error(), want);
    unlink(path);
}

/* ---- layouts ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    int unit;
    size_t offset, numel;
    int rows, cols;
    shs_init_kind_t init;
} want_tensor_t;

static void check_tensors(const shs_layout_t *lo, const want_tensor_t *w, int n) {
    assert_int_equal(lo->num_tensors, n);
    for (int i = 0; i < n; i++) {
        const shs_tensor_info_t *t = &lo->tensors[i];
        if (strcmp(t->name, w[i].name) != 0 || t->unit != w[i].unit || t->offset != w[i].offset ||
            t->numel != w[i].numel || t->rows != w[i].rows || t->cols != w[i].cols || t->init != w[i].init)
            fail_msg("tensor %d: got %s unit %d offset %zu numel %zu (%d,%d) init %d; want %s unit %d offset %zu "
                     "numel %zu (%d,%d) init %d", i, t->name, t->unit, t->offset, t->numel, t->rows, t->cols,
                     (int)t->init, w[i].name, w[i].unit, w[i].offset, w[i].numel, w[i].rows, w[i].cols, (int)w[i].init);
        if (t->init == SHS_INIT_NORMAL) assert_true(t->std == 0.02f);
    }
}

/* A zero-size layout: sizes [8, 0, 24] in one unit, a trailing Linear(4, 0). */
static const char zero_size_text[] =
    "# parameters of sizes [8, 0, 24], then a trailing Linear(4, 0)\n"
    "unit body\n"
    "Linear 2 4 nobias            # 0.weight (4, 2): 8\n"
    "Linear 4 0 nobias unused     # 1.weight (0, 4): 0, inside rank 0's shard at N = 2\n"
    "Linear 4 6 nobias            # 2.weight (6, 4): 24\n"
    "unit tail\n"
    "Linear 4 0 unused            # 3.weight (0, 4), 3.bias (0)\n";

static void test_layout_zero_size(void **state) {
    (void)state;
    shs_model_file_t *nd = parse_ok(zero_size_text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    assert_int_equal(lo.num_units, 2);
    assert_string_equal(lo.units[0].name, "body");
    assert_int_equal(lo.units[0].numel, 32);
    assert_int_equal(lo.units[0].first_tensor, 0);
    assert_int_equal(lo.units[0].num_tensors, 3);
    assert_int_equal(lo.units[1].numel, 0);
    assert_int_equal(lo.units[1].first_tensor, 3);
    assert_int_equal(lo.units[1].num_tensors, 2);
    assert_int_equal(lo.num_params, 32);
    const want_tensor_t w[] = {
        {"0.weight", 0, 0, 8, 4, 2, SHS_INIT_NORMAL}, {"1.weight", 0, 8, 0, 0, 4, SHS_INIT_NORMAL},
        {"2.weight", 0, 8, 24, 6, 4, SHS_INIT_NORMAL}, {"3.weight", 1, 0, 0, 0, 4, SHS_INIT_NORMAL},
        {"3.bias", 1, 0, 0, 0, 1, SHS_INIT_ZEROS},
    };
    check_tensors(&lo, w, 5);
    /* at N = 2 the shard size is 16: the empty tensor (offset 8) lies inside rank 0's shard */
    shs_shard_t s0 = shs_shard_of(32, 2, 0, 1);
    assert_true(s0.offset <= 8 && 8 < s0.offset + s0.size);
    shs_layout_free(&lo);
    shs_model_file_free(nd);
}

static const char tied_text[] =
    "unit embed\n"
    "Embedding 10 4 name=wte\n"
    "unit body replicated\n"
    "LayerNorm 4 name=ln_f\n"
    "Linear 4 4\n"
    "ReLU\n"
    "unit head\n"
    "Linear 4 10 nobias tied=wte   # GPT-2's LM head: logits = x wte^T\n";

static void test_layout_tied_named(void **state) {
    (void)state;
    shs_model_file_t *nd = parse_ok(tied_text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    assert_int_equal(lo.num_units, 3);
    assert_int_equal(lo.units[0].numel, 40);
    assert_int_equal(lo.units[0].replicated, 0);
    assert_int_equal(lo.units[1].numel, 4 + 4 + 16 + 4);
    assert_int_equal(lo.units[1].replicated, 1);
    assert_int_equal(lo.units[2].numel, 0);    /* the tied head holds no tensor */
    assert_int_equal(lo.units[2].num_tensors, 0);
    assert_int_equal(lo.num_params, 68);
    const want_tensor_t w[] = {
        {"wte.weight", 0, 0, 40, 10, 4, SHS_INIT_NORMAL}, {"ln_f.weight", 1, 0, 4, 4, 1, SHS_INIT_ONES},
        {"ln_f.bias", 1, 4, 4, 4, 1, SHS_INIT_ZEROS},     {"2.weight", 1, 8, 16, 4, 4, SHS_INIT_NORMAL},
        {"2.bias", 1, 24, 4, 4, 1, SHS_INIT_ZEROS},
    };
    check_tensors(&lo, w, 5);
    shs_layout_free(&lo);
    shs_model_file_free(nd);
}

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
    assert_int_equal(shs_model_forward(f->model, &f->src, f->tok, f->tgt, &loss), SHS_OK);
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

/* ---- equivalence through the trainer ------------------------------------- */

#define STEPS 3

typedef struct {
    float loss[STEPS];
    float *snap[STEPS];
    size_t len;
} run_record_t;

static void run(const shs_train_config_t *cfg, run_record_t *rec) {
    shs_trainer_t *t = NULL;
    shs_status_t st = shs_trainer_create(&t, cfg, &test_corpus);
    if (st != SHS_OK) fail_msg("trainer_create (%s): %s", shs_strategy_name(cfg->strategy.kind), shs_last_error());
    rec->len = shs_trainer_snapshot_len(t);
    for (int s = 0; s < STEPS; s++) {
        st = shs_trainer_step(t, &rec->loss[s]);
        if (st != SHS_OK) fail_msg("%s step %d: %s", shs_strategy_name(cfg->strategy.kind), s, shs_last_error());
        rec->snap[s] = malloc(rec->len * sizeof(float));
        assert_non_null(rec->snap[s]);
        assert_int_equal(shs_trainer_snapshot(t, rec->snap[s]), SHS_OK);
    }
    shs_trainer_destroy(t);
}

static void free_record(run_record_t *rec) {
    for (int s = 0; s < STEPS; s++) free(rec->snap[s]);
}

/* Real elements memcmp-equal unit by unit, padding +0.0 in both. */
static void assert_same_params(const shs_layout_t *lo, int n, size_t align, const float *ddp, const float *zero) {
    size_t base = 0;
    for (int u = 0; u < lo->num_units; u++) {
        size_t numel = lo->units[u].numel, padded = shs_padded_numel(numel, n, align);
        if (numel) assert_memory_equal(ddp + base, zero + base, numel * sizeof(float));
        for (size_t i = numel; i < padded; i++) {
            uint32_t a, b;
            memcpy(&a, ddp + base + i, 4);
            memcpy(&b, zero + base + i, 4);
            assert_int_equal(a, 0u);
            assert_int_equal(b, 0u);
        }
        base += padded;
    }
}

/* DDP first, then ZeRO-1/2/3 on the same config: losses and parameters bit
 * for bit after every step. Returns DDP's record (caller frees). */
static run_record_t check_equivalence(const shs_model_file_t *nd, shs_train_config_t cfg) {
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    cfg.model_file = nd;
    cfg.strategy.kind = SHS_DDP;
    size_t align = cfg.strategy.shard_align ? cfg.strategy.shard_align : 1;
    run_record_t ddp = {0};
    run(&cfg, &ddp);
    for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
        cfg.strategy.kind = (shs_strategy_kind_t)k;
        run_record_t z = {0};
        run(&cfg, &z);
        assert_int_equal(z.len, ddp.len);
        for (int s = 0; s < STEPS; s++) {
            if (memcmp(&ddp.loss[s], &z.loss[s], sizeof(float)) != 0)
                fail_msg("N=%d %s step %d: loss %.9g vs ddp %.9g", cfg.world_size, shs_strategy_name(cfg.strategy.kind), s,
                         (double)z.loss[s], (double)ddp.loss[s]);
            assert_same_params(&lo, cfg.world_size, align, ddp.snap[s], z.snap[s]);
        }
        free_record(&z);
    }
    assert_memory_not_equal(ddp.snap[0], ddp.snap[STEPS - 1], ddp.len * sizeof(float));
    shs_layout_free(&lo);
    return ddp;
}

static shs_train_config_t small_config(int world, shs_optim_kind_t opt) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.world_size = world;
    cfg.micro_batch = 2;
    cfg.model.context = 8;
    cfg.strategy.optim = shs_optim_default(opt);
    if (opt == SHS_OPTIM_SGD) cfg.strategy.optim.lr = 0.5f;
    cfg.timeout_ms = 20000;
    cfg.strategy.bucket_bytes = 64; /* several DDP buckets */
    return cfg;
}

/* A tied Embedding of 10 rows x 4 columns used for input lookup
 * and output logits, SGD, 3 steps, N = 2, 3, 4. With --shard-align 4 (one row)
 * the shards hold 5/5, 4/4/2 and 3/3/3/1 rows; without, 20/20, 14/14/12 and
 * 10/10/10/10 elements (rows cut in the middle). ZeRO-3 equals DDP bit for
 * bit, padding stays zero, and no row is left untrained. */
static void test_tied_embedding(void **state) {
    (void)state;
    static const char text[] =
        "unit embed\n"
        "Embedding 10 4 name=wte\n"
        "unit head\n"
        "Linear 4 10 nobias tied=wte\n";
    shs_model_file_t *nd = parse_ok(text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    float init[40];
    shs_layout_init_range(&lo, shs_train_default_config().strategy.seed, 0, 0, 40, init);
    static const int worlds[] = {2, 3, 4};
    static const int rows_last[] = {5, 2, 1}, rows_first[] = {5, 4, 3};
    for (int w = 0; w < 3; w++) {
        for (size_t align = 1; align <= 4; align += 3) {
            int N = worlds[w];
            if (align == 4) {
                assert_int_equal(shs_shard_size(40, N, 4), (size_t)rows_first[w] * 4);
                assert_int_equal(shs_shard_of(40, N, N - 1, 4).valid, (size_t)rows_last[w] * 4);
            }
            shs_train_config_t cfg = small_config(N, SHS_OPTIM_SGD);
            cfg.strategy.shard_align = align;
            run_record_t ddp = check_equivalence(nd, cfg);
            /* every row moved from its initial value (wte is unit 0, first in the snapshot) */
            for (int r = 0; r < 10; r++)
                if (memcmp(ddp.snap[STEPS - 1] + r * 4, init + r * 4, 16) == 0)
                    fail_msg("N=%d align %zu: row %d of wte is still at its initial value", N, align, r);
            free_record(&ddp);
        }
    }
    shs_layout_free(&lo);
    shs_model_file_free(nd);
}

/* Parameters of sizes [8, 0, 24] at N = 2 (the empty one inside
 * rank 0's shard) and a trailing Linear(4, 0): no crash, identical to DDP. */
static void test_zero_size_params(void **state) {
    (void)state;
    shs_model_file_t *nd = parse_ok(zero_size_text);
    for (int opt = 0; opt < 2; opt++) {
        run_record_t ddp = check_equivalence(nd, small_config(2, opt ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_model_file_free(nd);
}

/* Everything else at once: tiny units (numel < N), an empty unit, a
 * replicated unit, a unit holding only unused tensors, ReLU and GELU, an
 * untied Embedding, zero-width matmuls in the path; N = 3, 5 (and 2 with
 * --shard-align 4). */
static void test_mixed_layouts(void **state) {
    (void)state;
    static const char text[] =
        "unit emb\n"
        "Embedding 16 6\n"
        "unit blk\n"
        "Linear 6 12\n"
        "GELU\n"
        "Linear 12 6 name=proj\n"
        "ReLU\n"
        "unit tiny\n"
        "LayerNorm 1 unused        # 2 elements, fewer than N\n"
        "unit empty\n"
        "unit norm replicated\n"
        "LayerNorm 6\n"
        "unit narrow\n"
        "Linear 6 0\n"
        "Linear 0 3                # bias only\n"
        "Linear 3 5 name=head\n";
    shs_model_file_t *nd = parse_ok(text);
    static const int worlds[] = {3, 5};
    for (int w = 0; w < 2; w++) {
        run_record_t ddp = check_equivalence(nd, small_config(worlds[w], SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_train_config_t cfg = small_config(2, SHS_OPTIM_SGD);
    cfg.strategy.shard_align = 4;
    run_record_t ddp = check_equivalence(nd, cfg);
    free_record(&ddp);
    shs_model_file_free(nd);
}

/* Zero-size parameters at the start, in the middle and at the end of a
 * unit; the middle one exactly on the N = 2 shard boundary (offset 4 of 8);
 * and a unit of one 2-element tensor, so that at N = 3 and N = 5 the last
 * ranks own nothing but padding, and at N = 2 each owns one element. */
static void test_zero_size_positions(void **state) {
    (void)state;
    static const char text[] =
        "unit a\n"
        "Linear 4 0 unused          # 0 elements, at the start\n"
        "Linear 2 2 nobias name=p   # 4 elements: [0, 4)\n"
        "Linear 4 0 unused          # 0 elements at offset 4: the N = 2 shard boundary\n"
        "LayerNorm 2                # 4 elements: [4, 8)\n"
        "Linear 4 0 unused          # 0 elements, at the end\n"
        "unit b\n"
        "LayerNorm 1 unused         # 2 elements\n";
    shs_model_file_t *nd = parse_ok(text);
    shs_layout_t lo;
    assert_int_equal(shs_model_file_layout_create(&lo, nd), SHS_OK);
    assert_int_equal(lo.units[0].numel, 8);
    int zeros = 0;
    for (int i = lo.units[0].first_tensor; i < lo.units[0].first_tensor + lo.units[0].num_tensors; i++)
        if (lo.tensors[i].numel == 0) {
            zeros++;
            assert_true(lo.tensors[i].offset == 0 || lo.tensors[i].offset == 4 || lo.tensors[i].offset == 8);
        }
    assert_true(zeros >= 3);
    assert_int_equal(lo.units[1].numel, 2);
    shs_layout_free(&lo);
    static const int worlds[] = {2, 3, 5};
    for (int w = 0; w < 3; w++) {
        run_record_t ddp = check_equivalence(nd, small_config(worlds[w], w == 1 ? SHS_OPTIM_SGD : SHS_OPTIM_ADAMW));
        free_record(&ddp);
    }
    shs_model_file_free(nd);
}

/* The example files shipped in sim/models/ parse and train under the CLI,
 * --check ddp passing. */
static void test_cli_model_file(void **state) {
    (void)state;
    static const char *files[] = {"sim/models/tied_tiny.txt", "sim/models/zero_size.txt", "sim/models/mlp.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        shs_model_file_t *nd = NULL;
        if (shs_model_file_load(&nd, files[i]) != SHS_OK) fail_msg("%s", shs_last_error());
        shs_model_file_free(nd);
        char *argv[] = {SHS_BIN_PATH, "train", "--model-file", (char *)files[i], "--world", "3", "--steps", "2",
                        "--context", "8", "--check", "ddp", "--device-mem", "unlimited", NULL};
        test_proc_t *p = calloc(1, sizeof *p);
        test_run_process(argv, 60, p);
        if (p->exit_code != 0) fail_msg("%s: exit %d\n%s%s", files[i], p->exit_code, p->out, p->err);
        assert_non_null(strstr(p->out, "matched DDP bit for bit at all 2 steps"));
        free(p);
    }
    /* a bad file: one error line naming file and line, exit 1 */
    char path[] = "/tmp/shs_model_file_cli_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char bad_text[] = "unit a\nLinear 4 8\nLayerNorm 6\n";
    assert_int_equal(write(fd, bad_text, sizeof bad_text - 1), (ssize_t)(sizeof bad_text - 1));
    close(fd);
    char *argv[] = {SHS_BIN_PATH, "train", "--model-file", path, "--steps", "1", NULL};
    test_proc_t *p = calloc(1, sizeof *p);
    test_run_process(argv, 60, p);
    assert_int_equal(p->exit_code, 1);
    char want[256];
    snprintf(want, sizeof want,
             "shardsim train: error: %s:3: LayerNorm expects input width 6, but the layer before it (line 2) outputs 8\n", path);
    assert_string_equal(p->err, want);
    free(p);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_layout_zero_size),
        cmocka_unit_test(test_layout_tied_named),
        cmocka_unit_test(test_gradient_tied),
        cmocka_unit_test(test_gradient_relu_onehot),
        cmocka_unit_test(test_zero_width_path),
        cmocka_unit_test(test_tied_protocol_and_rows),
        cmocka_unit_test(test_garbage_never_crashes),
        cmocka_unit_test(test_tied_embedding),
        cmocka_unit_test(test_zero_size_params),
        cmocka_unit_test(test_mixed_layouts),
        cmocka_unit_test(test_zero_size_positions),
        cmocka_unit_test(test_cli_model_file),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
