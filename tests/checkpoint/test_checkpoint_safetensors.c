/* test_checkpoint_safetensors.c - safetensors export read back by a reader
 * of the format written here (plus jansson's parser when built in),
 * zero-size tensors, and the command line's save, resume and export
 * options end to end. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
#endif

#include "shardsim/checkpoint.h"
#include "shardsim/safetensors.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"
#include "shardsim/world.h"
#include "harness.h"

#include "checkpoint_run.h"

/* ---- safetensors ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t len;
    uint64_t hlen;
    const char *header; /* NUL-terminated copy */
    const unsigned char *data;
} st_file_t;

/* The file as the format defines it: u64 LE header length, header, data. */
static void st_read(const char *path, st_file_t *f) {
    f->buf = slurp(path, &f->len);
    assert_true(f->len >= 8);
    const unsigned char *b = (const unsigned char *)f->buf;
    f->hlen = 0;
    for (int i = 7; i >= 0; i--) f->hlen = f->hlen << 8 | b[i];
    assert_true(8 + f->hlen <= f->len);
    char *h = malloc(f->hlen + 1);
    memcpy(h, f->buf + 8, f->hlen);
    h[f->hlen] = 0;
    f->header = h;
    f->data = b + 8 + f->hlen;
    assert_int_equal(h[0], '{');
}

/* Shape and byte offsets of tensor `name`, from the header text. */
static int st_find(const st_file_t *f, const char *name, long shape[2], int *ndim, uint64_t *begin, uint64_t *end) {
    char key[128];
    snprintf(key, sizeof key, "\"%s\":{\"dtype\":\"F32\",\"shape\":[", name);
    const char *p = strstr(f->header, key);
    if (!p) return 0;
    p += strlen(key);
    *ndim = 0;
    while (*p != ']') {
        char *e;
        shape[(*ndim)++] = strtol(p, &e, 10);
        p = *e == ',' ? e + 1 : e;
    }
    unsigned long long b, e2;
    if (sscanf(p, "],\"data_offsets\":[%llu,%llu]}", &b, &e2) != 2) return 0;
    *begin = b;
    *end = e2;
    return 1;
}
static void test_export_safetensors(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(3, SHS_ZERO3, 1);
    shs_trainer_t *t = make(&cfg);
    steps(t, 2, NULL);
    const char *path = tpath("model.safetensors");
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    if (shs_export_safetensors(t, p) != SHS_OK) fail_msg("export: %s", shs_last_error());
    float *params = params_of(t);
    const shs_layout_t *lo = shs_trainer_layout(t);
    st_file_t f;
    st_read(p, &f);
    assert_int_equal((8 + f.hlen) % 8, 0);
    assert_non_null(strstr(f.header, "\"__metadata__\":{\"format\":\"pt\",\"producer\":\"shardsim\""));
    assert_non_null(strstr(f.header, "\"step\":\"2\""));
    long shape[2];
    int ndim;
    uint64_t b, e, total = 0;
    /* hand-computed: wte (256, 16) first, 16384 bytes */
    assert_true(st_find(&f, "wte.weight", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 256);
    assert_int_equal(shape[1], 16);
    assert_int_equal(b, 0);
    assert_int_equal(e, 16384);
    assert_true(st_find(&f, "wpe.weight", shape, &ndim, &b, &e));
    assert_int_equal(b, 16384);
    assert_true(st_find(&f, "h.1.attn.c_attn.weight", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 48);
    assert_int_equal(shape[1], 16);
    assert_true(st_find(&f, "h.0.ln_1.bias", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 1);
    assert_int_equal(shape[0], 16);
    assert_false(st_find(&f, "wte", shape, &ndim, &b, &e));
    /* every tensor's data equals the trainer's parameters */
    size_t unit_base = 0;
    int prev_unit = 0;
    for (int i = 0; i < lo->num_tensors; i++) {
        const shs_tensor_info_t *ti = &lo->tensors[i];
        if (ti->unit != prev_unit) {
            unit_base += lo->units[prev_unit].numel;
            prev_unit = ti->unit;
        }
        char name[64];
        snprintf(name, sizeof name, "%s%s", ti->name, strchr(ti->name, '.') ? "" : ".weight");
        if (!st_find(&f, name, shape, &ndim, &b, &e)) fail_msg("tensor %s not in the header", name);
        assert_int_equal(e - b, ti->numel * 4);
        assert_true(8 + f.hlen + e <= f.len);
        assert_memory_equal(f.data + b, params + unit_base + ti->offset, ti->numel * 4);
        total += e - b;
    }
    assert_int_equal(8 + f.hlen + total, f.len); /* no holes, nothing after */
#ifdef SHS_HAVE_JANSSON
    json_error_t jerr;
    json_t *root = json_loads(f.header, 0, &jerr);
    if (!root) fail_msg("header is not JSON: %s", jerr.text);
    assert_int_equal(json_object_size(root), (size_t)lo->num_tensors + 1);
    json_t *wte = json_object_get(root, "wte.weight");
    assert_string_equal(json_string_value(json_object_get(wte, "dtype")), "F32");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(wte, "data_offsets"), 1)), 16384);
    json_decref(root);
#endif
    free((void *)f.header);
    free(f.buf);
    free(params);
    shs_trainer_destroy(t);
}

/* Zero-size tensors (shape with a 0, equal offsets) and vectors. */
static void test_safetensors_zero_size(void **state) {
    (void)state;
    shs_layout_t lo;
    shs_layout_init(&lo);
    assert_int_equal(shs_layout_add_unit(&lo, "u0"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&lo, "a", 2, 3, SHS_INIT_ZEROS, 0), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&lo, "empty", 0, 4, SHS_INIT_ZEROS, 0), SHS_OK);
    assert_int_equal(shs_layout_add_unit(&lo, "u1"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&lo, "v", 5, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&lo, "none", 0, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    float u0[6] = {1, 2, 3, 4, 5, 6}, u1[5] = {-1, -2, -3, -4, -5};
    const float *units[2] = {u0, u1};
    const char *p = tpath("zero.safetensors");
    char path[512];
    snprintf(path, sizeof path, "%s", p);
    assert_int_equal(shs_safetensors_write(path, &lo, units, NULL), SHS_OK);
    st_file_t f;
    st_read(path, &f);
    assert_null(strstr(f.header, "__metadata__"));
    long shape[2];
    int ndim;
    uint64_t b, e;
    assert_true(st_find(&f, "empty", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 2);
    assert_int_equal(shape[0], 0);
    assert_int_equal(shape[1], 4);
    assert_int_equal(b, 24);
    assert_int_equal(e, 24);
    assert_true(st_find(&f, "v", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 1);
    assert_int_equal(shape[0], 5);
    assert_int_equal(b, 24);
    assert_int_equal(e, 44);
    assert_memory_equal(f.data + b, u1, sizeof u1);
    assert_true(st_find(&f, "none", shape, &ndim, &b, &e));
    assert_int_equal(ndim, 1);
    assert_int_equal(shape[0], 0);
    assert_int_equal(b, 44);
    assert_int_equal(e, 44);
    assert_int_equal(8 + f.hlen + 44, f.len);
    free((void *)f.header);
    free(f.buf);
    /* a directory that does not exist: an error naming the path */
    assert_int_equal(shs_safetensors_write(tpath("no/such/dir.safetensors"), &lo, units, NULL), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "no/such/dir.safetensors"));
    shs_layout_free(&lo);
}

/* ---- the command line ---------------------------------------------------------- */

static test_proc_t proc;

static const test_proc_t *run_cli(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
                                  const char *a6, const char *a7) {
    char *argv[32];
    int n = 0;
    const char *fixed[] = {SHS_BIN_PATH, "train", "--layers", "2", "--channels", "16", "--context", "16",
                           "--micro-batch", "2", "--device-mem", "unlimited"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[n++] = (char *)fixed[i];
    const char *extra[] = {a1, a2, a3, a4, a5, a6, a7};
    for (int i = 0; i < 7 && extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    test_run_process(argv, 120.0, &proc);
    assert_false(proc.timed_out);
    return &proc;
}

/* The loss printed for the last step line. */
static void last_loss(const char *out, char *loss, size_t len) {
    const char *p = out, *q, *found = NULL;
    while ((q = strstr(p, "| loss ")) != NULL) {
        found = q + 7;
        p = found;
    }
    if (!found) fail_msg("no step line in:\n%s", out);
    snprintf(loss, len, "%.8s", found);
}

static void test_cli_save_resume_export(void **state) {
    (void)state;
    char ref[16], got[16], dir[512], st[512];
    snprintf(dir, sizeof dir, "%s", tpath("cli-ck"));
    snprintf(st, sizeof st, "%s", tpath("cli.safetensors"));
    const test_proc_t *p = run_cli("--world", "2", "--steps", "3", NULL, NULL, NULL);
    assert_int_equal(p->exit_code, 0);
    last_loss(p->out, ref, sizeof ref);
    p = run_cli("--world", "2", "--steps", "2", "--save", dir, NULL);
    if (p->exit_code != 0) fail_msg("save: %s", p->err);
    assert_non_null(strstr(p->out, "saved checkpoint"));
    p = run_cli("--strategy=ddp", "--world=2", "--steps=1", "--resume", dir, "--export-safetensors", st);
    if (p->exit_code != 0) fail_msg("resume: %s", p->err);
    assert_non_null(strstr(p->out, "resumed from"));
    last_loss(p->out, got, sizeof got);
    assert_string_equal(got, ref);
    st_file_t f;
    st_read(st, &f);
    assert_non_null(strstr(f.header, "\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[256,16]"));
    free((void *)f.header);
    free(f.buf);
    /* a damaged checkpoint: exit 1, one error line naming the file */
    truncate_by(rank_file(dir, 0, 2, 1), 1);
    p = run_cli("--world=2", "--steps=1", "--resume", dir, NULL, NULL, NULL);
    assert_int_equal(p->exit_code, 1);
    if (!strstr(p->err, "shardsim train: error: --resume: ") || !strstr(p->err, "rank-00000-of-00002.g1.bin") ||
        !strstr(p->err, "truncated"))
        fail_msg("stderr: %s", p->err);
    p = run_cli("--save-every", "2", NULL, NULL, NULL, NULL, NULL);
    assert_int_equal(p->exit_code, 2);
    assert_non_null(strstr(p->err, "--save-every needs --save DIR"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_safetensors),
        cmocka_unit_test(test_safetensors_zero_size),
        cmocka_unit_test(test_cli_save_resume_export),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
