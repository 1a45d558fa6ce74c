/* checkpoint_run.h - what the checkpoint tests share: a temporary folder
 * made by the group setup and removed by its teardown, the built-in corpus,
 * a small training configuration, steps, a rank's parameters gathered on the
 * host, save and resume that must succeed, a file read whole, a rank's file
 * name, a file cut short and the files of a folder counted. Include after
 * <cmocka.h>. Not a test; included by the test_checkpoint_*.c programs only. */
#ifndef SHARDSIM_TEST_CHECKPOINT_RUN_H
#define SHARDSIM_TEST_CHECKPOINT_RUN_H

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

#include "shardsim/checkpoint.h"
#include "shardsim/train.h"
#include "harness.h"

static char tmpdir[256];
static shs_corpus_t corpus;

static inline int setup(void **state) {
    (void)state;
    shs_corpus_builtin(&corpus);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/shardsim-ckpt-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}
static inline int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline const char *tpath(const char *name) {
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static inline shs_train_config_t small_config(int world, shs_strategy_kind_t kind, size_t align) {
    shs_train_config_t c = shs_train_default_config();
    c.model = (shs_gpt_config_t){.num_layers = 2, .num_heads = 4, .channels = 16, .context = 16};
    c.world_size = world;
    c.micro_batch = 2;
    c.strategy.kind = kind;
    c.strategy.shard_align = align;
    c.timeout_ms = 20000;
    c.strategy.bucket_bytes = 4096;
    return c;
}

static inline shs_trainer_t *make(const shs_train_config_t *cfg) {
    shs_trainer_t *t = NULL;
    if (shs_trainer_create(&t, cfg, &corpus) != SHS_OK) fail_msg("trainer_create: %s", shs_last_error());
    return t;
}

static inline void steps(shs_trainer_t *t, int n, float *losses) {
    for (int s = 0; s < n; s++) {
        float l;
        if (shs_trainer_step(t, &l) != SHS_OK) fail_msg("step: %s", shs_last_error());
        if (losses) losses[s] = l;
    }
}

/* The real (unpadded) parameters, unit after unit: comparable across N and E. */
static inline float *params_of(shs_trainer_t *t) {
    const shs_layout_t *lo = shs_trainer_layout(t);
    const shs_train_config_t *c = shs_trainer_config(t);
    float *snap = malloc(shs_trainer_snapshot_len(t) * sizeof(float)), *out = malloc(lo->num_params * sizeof(float));
    assert_non_null(snap);
    assert_non_null(out);
    assert_int_equal(shs_trainer_snapshot(t, snap), SHS_OK);
    size_t base = 0, o = 0;
    for (int u = 0; u < lo->num_units; u++) {
        memcpy(out + o, snap + base, lo->units[u].numel * sizeof(float));
        o += lo->units[u].numel;
        base += shs_padded_numel(lo->units[u].numel, c->world_size, c->strategy.shard_align ? c->strategy.shard_align : 1);
    }
    free(snap);
    return out;
}

static inline void save_ok(shs_trainer_t *t, const char *dir) {
    if (shs_checkpoint_save(t, dir) != SHS_OK) fail_msg("save %s: %s", dir, shs_last_error());
}
static inline void resume_ok(shs_trainer_t *t, const char *dir) {
    if (shs_checkpoint_resume(t, dir) != SHS_OK) fail_msg("resume %s: %s", dir, shs_last_error());
}

static inline char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return b;
}

/* The name of rank r's file in dir (generation 1 unless stated). */
static inline const char *rank_file(const char *dir, int r, int n, int gen) {
    static char p[600];
    snprintf(p, sizeof p, "%s/rank-%05d-of-%05d.g%d.bin", dir, r, n, gen);
    return p;
}

static inline void truncate_by(const char *path, long bytes) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - bytes), 0);
}
static inline int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

#endif
