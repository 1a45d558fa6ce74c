/* test_model_file_parse.c - models from model-description files
 * (model_file.h), as text: every parse error's exact "file:line: what"
 * text; load errors; layouts (tensors, offsets, shapes, names, units)
 * against hand counts. Not gradients (test_model_file_grad.c) nor training
 * (test_model_file_train.c). */
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
#include "harness.h"

#include "model_file_text.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_layout_zero_size),
        cmocka_unit_test(test_layout_tied_named),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
