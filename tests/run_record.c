/* run_record.c - see run_record.h. */
#include "run_record.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"

void record_run(const shs_train_config_t *cfg, const shs_corpus_t *corpus, int steps, run_record_t *rec) {
    memset(rec, 0, sizeof *rec);
    assert_true(steps >= 1 && steps <= REC_MAX_STEPS);
    shs_trainer_t *t = NULL;
    if (shs_trainer_create(&t, cfg, corpus) != SHS_OK) fail_msg("trainer_create: %s", shs_last_error());
    rec->steps = steps;
    rec->len = shs_trainer_snapshot_len(t);
    rec->world_size = cfg->world_size;
    rec->align = cfg->strategy.shard_align ? cfg->strategy.shard_align : 1;
    const shs_layout_t *lo = shs_trainer_layout(t);
    shs_layout_init(&rec->layout);
    for (int u = 0; u < lo->num_units; u++) {
        assert_int_equal(shs_layout_add_unit(&rec->layout, lo->units[u].name), SHS_OK);
        rec->layout.units[u].numel = lo->units[u].numel;
    }
    for (int s = 0; s < steps; s++) {
        if (shs_trainer_step(t, &rec->loss[s]) != SHS_OK) fail_msg("step %d: %s", s + 1, shs_last_error());
        rec->norm[s] = shs_trainer_last_grad_norm(t);
        rec->snap[s] = malloc(rec->len * sizeof(float));
        assert_non_null(rec->snap[s]);
        assert_int_equal(shs_trainer_snapshot(t, rec->snap[s]), SHS_OK);
    }
    shs_trainer_destroy(t);
}

void free_record(run_record_t *rec) {
    for (int s = 0; s < rec->steps; s++) free(rec->snap[s]);
    shs_layout_free(&rec->layout);
}

/* Offset of unit `unit` in a snapshot. */
static size_t unit_base(const run_record_t *rec, int unit) {
    size_t base = 0;
    for (int u = 0; u < unit; u++) base += shs_padded_numel(rec->layout.units[u].numel, rec->world_size, rec->align);
    return base;
}

float record_param(const run_record_t *rec, int step, int unit, size_t index) {
    return rec->snap[step][unit_base(rec, unit) + index];
}

void assert_same_run(const run_record_t *ref, const run_record_t *got) {
    assert_int_equal(ref->steps, got->steps);
    assert_int_equal(ref->layout.num_units, got->layout.num_units);
    for (int s = 0; s < ref->steps; s++) {
        if (memcmp(&ref->loss[s], &got->loss[s], sizeof(float)))
            fail_msg("step %d: loss %.9g vs %.9g", s + 1, (double)ref->loss[s], (double)got->loss[s]);
        if (memcmp(&ref->norm[s], &got->norm[s], sizeof(float)))
            fail_msg("step %d: grad norm %.9g vs %.9g", s + 1, (double)ref->norm[s], (double)got->norm[s]);
        for (int u = 0; u < ref->layout.num_units; u++) {
            size_t numel = ref->layout.units[u].numel;
            const float *a = ref->snap[s] + unit_base(ref, u), *b = got->snap[s] + unit_base(got, u);
            if (memcmp(a, b, numel * sizeof(float))) {
                size_t i = 0;
                while (!memcmp(a + i, b + i, sizeof(float))) i++;
                fail_msg("step %d unit %d element %zu: %.9g vs %.9g", s + 1, u, i, (double)a[i], (double)b[i]);
            }
            size_t padded = shs_padded_numel(numel, got->world_size, got->align);
            for (size_t i = numel; i < padded; i++) {
                uint32_t bits;
                memcpy(&bits, b + i, 4);
                if (bits) fail_msg("step %d unit %d: padding element %zu is %#x", s + 1, u, i, bits);
            }
        }
    }
}

const int test_worlds[5] = {1, 2, 3, 5, 8};

int test_full_sweep(void) {
    const char *e = getenv("SHS_TEST_FULL");
    return e && *e && strcmp(e, "0") != 0;
}

shs_train_config_t test_small_config(int world, int layers) {
    shs_train_config_t c = shs_train_default_config();
    c.model = (shs_gpt_config_t){.num_layers = layers, .num_heads = 3, .channels = 9, .context = 8};
    c.world_size = world;
    c.micro_batch = 2;
    c.timeout_ms = 20000;
    c.strategy.bucket_bytes = 2048;
    return c;
}
