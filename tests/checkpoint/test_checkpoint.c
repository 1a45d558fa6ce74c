/* test_checkpoint.c - sharded checkpoints and safetensors export.
 * References are independent of the code under test: an uninterrupted run
 * (losses and parameters memcmp-equal after resuming through other world
 * sizes, stages and alignments), hand-computed sizes, values planted by the
 * test, the standard CRC-32 check value, and a reader of the index and of
 * safetensors files written here (plus jansson's parser when built in).
 * Training at different world sizes is not bit-identical (each rank sums its
 * own micro-batch first), so a continuation at N' is compared with an
 * uninterrupted run at N' after routing the state through other sizes. */
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

static char tmpdir[256];
static shs_corpus_t corpus;

static int setup(void **state) {
    (void)state;
    shs_corpus_builtin(&corpus);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/shardsim-ckpt-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name) {
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static shs_train_config_t small_config(int world, shs_strategy_kind_t kind, size_t align) {
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

static shs_trainer_t *make(const shs_train_config_t *cfg) {
    shs_trainer_t *t = NULL;
    if (shs_trainer_create(&t, cfg, &corpus) != SHS_OK) fail_msg("trainer_create: %s", shs_last_error());
    return t;
}

static void steps(shs_trainer_t *t, int n, float *losses) {
    for (int s = 0; s < n; s++) {
        float l;
        if (shs_trainer_step(t, &l) != SHS_OK) fail_msg("step: %s", shs_last_error());
        if (losses) losses[s] = l;
    }
}

/* The real (unpadded) parameters, unit after unit: comparable across N and E. */
static float *params_of(shs_trainer_t *t) {
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

static void save_ok(shs_trainer_t *t, const char *dir) {
    if (shs_checkpoint_save(t, dir) != SHS_OK) fail_msg("save %s: %s", dir, shs_last_error());
}
static void resume_ok(shs_trainer_t *t, const char *dir) {
    if (shs_checkpoint_resume(t, dir) != SHS_OK) fail_msg("resume %s: %s", dir, shs_last_error());
}

static char *slurp(const char *path, size_t *len) {
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

/* ---- CRC-32 ------------------------------------------------------------------ */

static void test_crc32_check_value(void **state) {
    (void)state;
    assert_int_equal(shs_crc32(0, "123456789", 9), 0xCBF43926u); /* the CRC-32/ISO-HDLC check value */
    assert_int_equal(shs_crc32(shs_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    assert_int_equal(shs_crc32(0, "", 0), 0u);
}

/* ---- resume: bit-identical continuation --------------------------------------- */

typedef struct {
    int world;
    shs_strategy_kind_t kind;
    size_t align;
} hop_t;

/* Uninterrupted: `total` steps at `last`. Checkpointed: `first` steps at
 * hops[0]'s world, saved, loaded and saved again at each middle hop without
 * training, then loaded at `last`, which trains the remaining steps. Losses
 * and real parameters must be memcmp-equal, and after each load the state
 * must equal the saved run's parameters. */
static shs_train_config_t hop_config(const shs_train_config_t *tmpl, hop_t h) {
    shs_train_config_t c = *tmpl;
    c.world_size = h.world;
    c.strategy.kind = h.kind;
    c.strategy.shard_align = h.align;
    return c;
}

static void check_chain(const shs_train_config_t *tmpl, int first, int total, const hop_t *hops, int nhops, hop_t last) {
    shs_train_config_t rc = hop_config(tmpl, last);
    shs_trainer_t *ref = make(&rc);
    float ref_loss[16];
    steps(ref, total, ref_loss);
    float *ref_params = params_of(ref);
    shs_trainer_destroy(ref);

    shs_train_config_t c0 = hop_config(tmpl, hops[0]);
    shs_trainer_t *t = make(&c0);
    float loss[16];
    steps(t, first, loss);
    assert_memory_equal(loss, ref_loss, (size_t)first * sizeof(float)); /* same N: the same run so far */
    float *saved = params_of(t);
    shs_loss_scale_state_t scale = shs_trainer_loss_scale(t);
    char dir[64];
    snprintf(dir, sizeof dir, "chain-%d", 0);
    save_ok(t, tpath(dir));
    shs_trainer_destroy(t);
    const shs_layout_t *lo = NULL;
    for (int h = 1; h <= nhops; h++) {
        hop_t hp = h < nhops ? hops[h] : last;
        shs_train_config_t c = hop_config(tmpl, hp);
        t = make(&c);
        resume_ok(t, tpath(dir));
        assert_int_equal(shs_trainer_steps_done(t), first);
        shs_loss_scale_state_t now_scale = shs_trainer_loss_scale(t);
        assert_memory_equal(&now_scale.scale, &scale.scale, sizeof(float));
        assert_int_equal(now_scale.good_steps, scale.good_steps);
        assert_int_equal(now_scale.skipped_steps, scale.skipped_steps);
        lo = shs_trainer_layout(t);
        float *now = params_of(t);
        assert_memory_equal(now, saved, lo->num_params * sizeof(float));
        free(now);
        if (h == nhops) break;
        snprintf(dir, sizeof dir, "chain-%d", h);
        save_ok(t, tpath(dir));
        shs_trainer_destroy(t);
    }
    steps(t, total - first, loss);
    assert_memory_equal(loss, ref_loss + first, (size_t)(total - first) * sizeof(float));
    float *end = params_of(t);
    assert_memory_equal(end, ref_params, shs_trainer_layout(t)->num_params * sizeof(float));
    free(end);
    shs_trainer_destroy(t);
    free(saved);
    free(ref_params);
}

/* 4 steps ZeRO-3 at N=4, resumed at N=4 under DDP and ZeRO-2 with E=8 for 3
 * more: equal to 7 uninterrupted steps. */
static void test_resume_same_world_other_stage(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    hop_t z3[] = {{4, SHS_ZERO3, 1}};
    check_chain(&c, 4, 7, z3, 1, (hop_t){4, SHS_DDP, 1});
    check_chain(&c, 4, 7, z3, 1, (hop_t){4, SHS_ZERO2, 8});
}

/* Saved at N=3 (ZeRO-3), resharded through N=4 (DDP), N=2 (ZeRO-3, E=8) and
 * N=5 (ZeRO-1), continued at N=3 under ZeRO-1: equal to 7 uninterrupted
 * ZeRO-1 steps at N=3. */
static void test_resume_through_other_world_sizes(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    hop_t hops[] = {{3, SHS_ZERO3, 1}, {4, SHS_DDP, 1}, {2, SHS_ZERO3, 8}, {5, SHS_ZERO1, 1}};
    check_chain(&c, 4, 7, hops, 4, (hop_t){3, SHS_ZERO1, 1});
}

/* SGD with momentum (one state array) and plain SGD (none). */
static void test_resume_sgd(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    c.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    c.strategy.optim.lr = 0.05f;
    c.strategy.optim.momentum = 0.9f;
    c.strategy.optim.weight_decay = 0.01f;
    hop_t hops[] = {{2, SHS_DDP, 1}, {5, SHS_ZERO3, 4}};
    check_chain(&c, 3, 5, hops, 2, (hop_t){2, SHS_ZERO2, 1});
    c.strategy.optim.momentum = 0;
    check_chain(&c, 2, 4, hops, 2, (hop_t){2, SHS_ZERO3, 1});
}

/* fp16 compute with dynamic loss scaling (growth every 2 good steps, so the
 * scale moves within the test) and bf16 with gradient accumulation and
 * clipping: the scaler state and the step travel with the checkpoint. */
static void test_resume_mixed_precision(void **state) {
    (void)state;
    shs_train_config_t c = small_config(1, SHS_DDP, 1);
    c.strategy.param_dtype = SHS_F16;
    c.strategy.scaler = (shs_loss_scaler_config_t){.init_scale = 1024.0f, .growth_interval = 2};
    hop_t hops[] = {{2, SHS_ZERO3, 1}, {3, SHS_ZERO2, 1}};
    check_chain(&c, 3, 6, hops, 2, (hop_t){2, SHS_ZERO1, 1});
    c = small_config(1, SHS_DDP, 1);
    c.strategy.param_dtype = SHS_BF16;
    c.strategy.reduce_dtype = SHS_F32;
    c.grad_accum = 2;
    c.strategy.clip_norm = 0.5f;
    c.strategy.norm_type = 2;
    hop_t h2[] = {{3, SHS_ZERO2, 1}, {1, SHS_ZERO3, 1}};
    check_chain(&c, 2, 4, h2, 2, (hop_t){3, SHS_ZERO3, 4});
}

/* ---- a 57-element model at N=2 (shards of unequal size) ------------------------ */

typedef struct {
    shs_layout_t lo;
    shs_strategy_t *s[8];
    size_t align;
    shs_checkpoint_writer_t *w;
    const shs_checkpoint_t *ck;
} small_world_t;

static shs_status_t create_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_strategy_config_t sc = {.kind = SHS_ZERO3, .optim = shs_optim_default(SHS_OPTIM_ADAMW), .seed = 7,
                                .shard_align = sw->align};
    return shs_strategy_create(&sw->s[ctx->rank], &sc, &sw->lo, ctx->dev, ctx->comm);
}
static shs_status_t plant_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    float p[57], st[2 * 57];
    for (int i = 0; i < 57; i++) {
        p[i] = (float)(i + 1);
        st[i] = 1000.0f + (float)i;
        st[57 + i] = 2000.0f + (float)i;
    }
    return shs_strategy_load_state(sw->s[ctx->rank], 0, p, st);
}
static shs_status_t write_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    return shs_checkpoint_write_rank(sw->w, ctx->rank, sw->s[ctx->rank]);
}
static shs_status_t load_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    return shs_checkpoint_load_rank(sw->ck, sw->s[ctx->rank]);
}
/* Each rank's shard after loading holds the planted values at its range. */
static shs_status_t verify_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_shard_t sh = shs_shard_of(57, ctx->world_size, ctx->rank, sw->align);
    float p[64], st[128];
    SHS_CHECK(shs_strategy_read_state(sw->s[ctx->rank], 0, p, st));
    for (size_t i = 0; i < sh.size; i++) {
        size_t g = sh.offset + i;
        float want = g < 57 ? (float)(g + 1) : 0.0f, m = g < 57 ? 1000.0f + (float)g : 0.0f,
              v = g < 57 ? 2000.0f + (float)g : 0.0f;
        if (p[i] != want || st[i] != m || st[sh.size + i] != v)
            return shs_set_error(SHS_INTERNAL, "rank %d element %zu: %g %g %g", ctx->rank, g, (double)p[i],
                                 (double)st[i], (double)st[sh.size + i]);
    }
    return SHS_OK;
}
static shs_status_t destroy_job(shs_rank_ctx_t *ctx, void *arg) {
    small_world_t *sw = arg;
    shs_strategy_destroy(sw->s[ctx->rank]);
    return SHS_OK;
}

static shs_world_t *small_world(int n) {
    shs_world_t *w;
    shs_world_config_t wc = {.world_size = n, .device_mem = SIZE_MAX, .timeout_ms = 20000, .name = "world"};
    assert_int_equal(shs_world_create(&w, &wc), SHS_OK);
    return w;
}

static void check_57(size_t align, size_t want_shard, const char *name) {
    small_world_t sw = {.align = align};
    shs_layout_init(&sw.lo);
    assert_int_equal(shs_layout_add_unit(&sw.lo, "only"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw.lo, "w", 8, 7, SHS_INIT_NORMAL, 0.02f), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw.lo, "b", 1, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    assert_int_equal(sw.lo.num_params, 57);
    shs_world_t *w = small_world(2);
    assert_int_equal(shs_world_run(w, create_job, &sw), SHS_OK);
    assert_int_equal(shs_world_run(w, plant_job, &sw), SHS_OK);
    shs_checkpoint_meta_t m = {.layout = &sw.lo, .world_size = 2, .shard_align = align, .strategy = SHS_ZERO3,
                               .optim = shs_optim_default(SHS_OPTIM_ADAMW), .state_per_param = 2, .step = 9,
                               .seed = 7, .micro_batch = 1, .grad_accum = 1, .loss_scale = {.scale = 1.0f}};
    snprintf(m.model, sizeof m.model, "test 57");
    const char *dir = tpath(name);
    assert_int_equal(shs_checkpoint_writer_begin(&sw.w, dir, &m), SHS_OK);
    assert_int_equal(shs_world_run(w, write_job, &sw), SHS_OK);
    if (shs_checkpoint_writer_commit(sw.w) != SHS_OK) fail_msg("commit: %s", shs_last_error());
    shs_world_run(w, destroy_job, &sw);
    shs_world_destroy(w);

    /* the index, read here: each rank's shard size, and file bytes =
     * 64 header + S * 3 arrays * 4 bytes */
    char path[600], want[128];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    char *idx = slurp(path, NULL);
    for (int r = 0; r < 2; r++) {
        snprintf(want, sizeof want, "rank %d rank-%05d-of-00002.g1.bin %zu ", r, r, 64 + want_shard * 3 * 4);
        char *line = strstr(idx, want);
        if (!line) fail_msg("no '%s' in\n%s", want, idx);
        char *nl = strchr(line, '\n');
        snprintf(want, sizeof want, " %zu", want_shard);
        assert_memory_equal(nl - strlen(want), want, strlen(want)); /* the unit's shard size ends the line */
        struct stat sb;
        snprintf(path, sizeof path, "%s/rank-%05d-of-00002.g1.bin", dir, r);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal((size_t)sb.st_size, 64 + want_shard * 3 * 4);
    }
    assert_non_null(strstr(idx, "\nunit only 57 2\ntensor w 8 7 0\ntensor b 1 1 56\n"));
    free(idx);

    shs_checkpoint_t *ck;
    if (shs_checkpoint_open(&ck, dir) != SHS_OK) fail_msg("open: %s", shs_last_error());
    assert_int_equal(shs_checkpoint_meta(ck)->layout->units[0].numel, 57);
    assert_int_equal(shs_checkpoint_meta(ck)->step, 9);
    const float *p = shs_checkpoint_params(ck, 0), *st = shs_checkpoint_state(ck, 0);
    for (int i = 0; i < 57; i++) {
        assert_true(p[i] == (float)(i + 1));
        assert_true(st[i] == 1000.0f + (float)i);
        assert_true(st[57 + i] == 2000.0f + (float)i);
    }
    /* into 3 ranks (S = 19, no padding) and back out, values where planted */
    small_world_t sw3 = {.align = 1, .ck = ck};
    shs_layout_init(&sw3.lo);
    assert_int_equal(shs_layout_add_unit(&sw3.lo, "only"), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw3.lo, "w", 8, 7, SHS_INIT_NORMAL, 0.02f), SHS_OK);
    assert_int_equal(shs_layout_add_tensor(&sw3.lo, "b", 1, 1, SHS_INIT_ZEROS, 0), SHS_OK);
    w = small_world(3);
    assert_int_equal(shs_world_run(w, create_job, &sw3), SHS_OK);
    assert_int_equal(shs_world_run(w, load_job, &sw3), SHS_OK);
    if (shs_world_run(w, verify_job, &sw3) != SHS_OK) fail_msg("%s", shs_last_error());
    shs_world_run(w, destroy_job, &sw3);
    shs_world_destroy(w);
    shs_checkpoint_close(ck);
    shs_layout_free(&sw.lo);
    shs_layout_free(&sw3.lo);
}

static void test_bug_case_57_elements(void **state) {
    (void)state;
    check_57(6, 30, "c57-e6"); /* ceil(57/2) = 29 -> 30 with E = 6: padded to 60 */
    check_57(1, 29, "c57-e1"); /* padded to 58 */
}

/* ---- refusals ------------------------------------------------------------------ */

static void copy_dir(const char *from, const char *to) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    assert_int_equal(system(cmd), 0);
}

/* The name of rank r's file in dir (generation 1 unless stated). */
static const char *rank_file(const char *dir, int r, int n, int gen) {
    static char p[600];
    snprintf(p, sizeof p, "%s/rank-%05d-of-%05d.g%d.bin", dir, r, n, gen);
    return p;
}

static void flip_byte(const char *path, long at) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
    int c = fgetc(f);
    fseek(f, -1, SEEK_CUR);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void truncate_by(const char *path, long bytes) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - bytes), 0);
}

/* Resume into a fresh trainer must fail with `needle` in the error, and
 * leave its parameters and step count as they were. */
static void expect_refused(const shs_train_config_t *cfg, const char *dir, const char *needle, const char *needle2) {
    shs_trainer_t *t = make(cfg);
    steps(t, 1, NULL);
    float *before = params_of(t);
    shs_status_t st = shs_checkpoint_resume(t, dir);
    const char *err = shs_last_error();
    if (st == SHS_OK || !strstr(err, needle) || (needle2 && !strstr(err, needle2)))
        fail_msg("resume %s: expected an error with '%s' and '%s', got %s: %s", dir, needle, needle2 ? needle2 : "",
                 shs_status_name(st), err);
    assert_int_equal(shs_trainer_steps_done(t), 1);
    float *after = params_of(t);
    assert_memory_equal(before, after, shs_trainer_layout(t)->num_params * sizeof(float));
    free(before);
    free(after);
    shs_trainer_destroy(t);
}

static void test_refuses_bad_checkpoints(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(2, SHS_ZERO3, 1);
    shs_trainer_t *t = make(&cfg);
    steps(t, 2, NULL);
    const char *good = tpath("good");
    char good_s[512];
    snprintf(good_s, sizeof good_s, "%s", good);
    save_ok(t, good_s);
    shs_trainer_destroy(t);
    shs_train_config_t other = small_config(3, SHS_ZERO1, 1);
    char d[512];

    snprintf(d, sizeof d, "%s", tpath("missing-rank"));
    copy_dir(good_s, d);
    assert_int_equal(unlink(rank_file(d, 1, 2, 1)), 0);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "missing");

    snprintf(d, sizeof d, "%s", tpath("truncated-rank"));
    copy_dir(good_s, d);
    truncate_by(rank_file(d, 0, 2, 1), 4);
    expect_refused(&other, d, rank_file(d, 0, 2, 1), "truncated");

    snprintf(d, sizeof d, "%s", tpath("corrupt-rank"));
    copy_dir(good_s, d);
    flip_byte(rank_file(d, 1, 2, 1), 1000);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "checksum mismatch");

    snprintf(d, sizeof d, "%s", tpath("corrupt-index"));
    copy_dir(good_s, d);
    char ip[600];
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    flip_byte(ip, 40);
    expect_refused(&other, d, ip, "checksum mismatch");

    snprintf(d, sizeof d, "%s", tpath("truncated-index"));
    copy_dir(good_s, d);
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    truncate_by(ip, 30);
    expect_refused(&other, d, ip, "truncated");

    snprintf(d, sizeof d, "%s", tpath("no-index"));
    copy_dir(good_s, d);
    snprintf(ip, sizeof ip, "%s/index.txt", d);
    assert_int_equal(unlink(ip), 0);
    expect_refused(&other, d, ip, "missing");

    expect_refused(&other, tpath("does-not-exist"), "does-not-exist", "not a checkpoint directory");

    /* a rank file from another save (same size, valid header, other data) */
    shs_trainer_t *t2 = make(&cfg);
    steps(t2, 3, NULL);
    save_ok(t2, tpath("later"));
    shs_trainer_destroy(t2);
    snprintf(d, sizeof d, "%s", tpath("mixed"));
    copy_dir(good_s, d);
    char cmd[1400], later[600];
    snprintf(later, sizeof later, "%s", rank_file(tpath("later"), 1, 2, 1));
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", later, rank_file(d, 1, 2, 1));
    assert_int_equal(system(cmd), 0);
    expect_refused(&other, d, rank_file(d, 1, 2, 1), "checksum mismatch");

    /* mismatches with the run */
    shs_train_config_t bad = other;
    bad.model.num_layers = 3;
    expect_refused(&bad, good_s, "holds model 'gpt layers=2 heads=4 channels=16 context=16'", "layers=3");
    bad = other;
    bad.model.context = 8;
    expect_refused(&bad, good_s, "context=16", "context=8");
    bad = other;
    bad.strategy.optim = shs_optim_default(SHS_OPTIM_SGD);
    expect_refused(&bad, good_s, "saved with optimizer adamw; this run uses sgd", NULL);
    bad = other;
    bad.strategy.optim.lr = 2e-3f;
    expect_refused(&bad, good_s, "lr 0.00100000005; this run has 0.00200000009", NULL);
    bad = other;
    bad.strategy.seed = 1;
    expect_refused(&bad, good_s, "seed 1337; this run has 1", NULL);
    bad = other;
    bad.strategy.clip_norm = 1.0f;
    bad.strategy.norm_type = 2;
    expect_refused(&bad, good_s, "gradient clipping", NULL);
    bad = other;
    bad.strategy.param_dtype = SHS_BF16;
    expect_refused(&bad, good_s, "param dtype f32, reduce dtype f32; this run has bf16, bf16", NULL);

    /* and the good one loads, at another size and stage */
    t = make(&other);
    resume_ok(t, good_s);
    assert_int_equal(shs_trainer_steps_done(t), 2);
    shs_trainer_destroy(t);
}

/* ---- saving over a checkpoint; a failed save keeps the previous one ------------ */

static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strstr(e->d_name, needle) != NULL;
    closedir(d);
    return n;
}

static void test_failed_save_keeps_previous(void **state) {
    (void)state;
    shs_train_config_t cfg = small_config(2, SHS_ZERO2, 1);
    shs_trainer_t *t = make(&cfg);
    steps(t, 2, NULL);
    float *at2 = params_of(t);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tpath("resave"));
    save_ok(t, dir);
    steps(t, 1, NULL);

    /* rank 1's temp file of the next save cannot be created */
    char blocker[700];
    snprintf(blocker, sizeof blocker, "%s.tmp", rank_file(dir, 1, 2, 2));
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_not_equal(shs_checkpoint_save(t, dir), SHS_OK);
    if (!strstr(shs_last_error(), blocker)) fail_msg("error does not name %s: %s", blocker, shs_last_error());
    assert_int_equal(count_files(dir, ".g2.bin"), 1); /* only the blocker; rank 0's new file was removed */
    assert_int_equal(count_files(dir, ".g1.bin"), 2);

    shs_train_config_t c3 = small_config(3, SHS_DDP, 1);
    shs_trainer_t *r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 2);
    float *got = params_of(r);
    assert_memory_equal(got, at2, shs_trainer_layout(r)->num_params * sizeof(float));
    free(got);
    shs_trainer_destroy(r);
    assert_int_equal(rmdir(blocker), 0);

    /* every rank file written, but the index cannot be: the new files go */
    snprintf(blocker, sizeof blocker, "%s/index.txt.tmp", dir);
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_not_equal(shs_checkpoint_save(t, dir), SHS_OK);
    if (!strstr(shs_last_error(), blocker)) fail_msg("error does not name %s: %s", blocker, shs_last_error());
    assert_int_equal(count_files(dir, ".g2.bin"), 0);
    assert_int_equal(count_files(dir, ".g1.bin"), 2);
    r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 2);
    shs_trainer_destroy(r);
    assert_int_equal(rmdir(blocker), 0);

    /* the blockers gone, saving over the checkpoint works and replaces it */
    float *at3 = params_of(t);
    save_ok(t, dir);
    assert_int_equal(count_files(dir, ".g1.bin"), 0);
    assert_int_equal(count_files(dir, ".g2.bin"), 2);
    assert_int_equal(count_files(dir, ".tmp"), 0);
    r = make(&c3);
    resume_ok(r, dir);
    assert_int_equal(shs_trainer_steps_done(r), 3);
    got = params_of(r);
    assert_memory_equal(got, at3, shs_trainer_layout(r)->num_params * sizeof(float));
    free(got);
    shs_trainer_destroy(r);
    shs_trainer_destroy(t);
    free(at2);
    free(at3);

    /* a path that is a file cannot hold a checkpoint */
    FILE *f = fopen(tpath("plainfile"), "w");
    fclose(f);
    t = make(&cfg);
    assert_int_equal(shs_checkpoint_save(t, tpath("plainfile")), SHS_IO);
    assert_non_null(strstr(shs_last_error(), "not a directory"));
    shs_trainer_destroy(t);
}

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

/* A hybrid-sharded run (G = 2 ranks per group, 2 replicas) saves one copy
 * of each shard (a 2-rank checkpoint). Resumed into the same configuration
 * it continues bit for bit like the uninterrupted run; resumed at another
 * world size and stage it has every parameter as saved. */
static void test_hybrid_save_resume(void **state) {
    shs_train_config_t h = small_config(4, SHS_HYBRID_SHARD, 1);
    h.strategy.shard_group_size = 2;
    shs_trainer_t *t = make(&h);
    steps(t, 3, NULL);
    save_ok(t, tpath("hybrid"));
    float *saved = params_of(t);
    /* uninterrupted vs resumed into the same hybrid configuration: the same
     * bits (parameters and optimizer state came back whole) */
    float la[2], lb[2];
    steps(t, 2, la);
    shs_trainer_t *th = make(&h);
    resume_ok(th, tpath("hybrid"));
    steps(th, 2, lb);
    assert_memory_equal(la, lb, sizeof la);
    float *pa = params_of(t), *pb = params_of(th);
    assert_memory_equal(pa, pb, shs_trainer_layout(t)->num_params * sizeof(float));
    free(pa);
    free(pb);
    shs_trainer_destroy(th);
    shs_trainer_destroy(t);
    /* the index says 2 ranks, two rank files */
    assert_int_equal(count_files(tpath("hybrid"), "-of-00002."), 2);
    shs_train_config_t z = small_config(3, SHS_ZERO3, 1);
    shs_trainer_t *r = make(&z);
    resume_ok(r, tpath("hybrid"));
    float *loaded = params_of(r);
    assert_memory_equal(saved, loaded, shs_trainer_layout(r)->num_params * sizeof(float));
    assert_int_equal(shs_trainer_steps_done(r), 3);
    free(saved);
    free(loaded);
    shs_trainer_destroy(r);
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
        cmocka_unit_test(test_crc32_check_value),
        cmocka_unit_test(test_resume_same_world_other_stage),
        cmocka_unit_test(test_resume_through_other_world_sizes),
        cmocka_unit_test(test_resume_sgd),
        cmocka_unit_test(test_resume_mixed_precision),
        cmocka_unit_test(test_bug_case_57_elements),
        cmocka_unit_test(test_refuses_bad_checkpoints),
        cmocka_unit_test(test_failed_save_keeps_previous),
        cmocka_unit_test(test_hybrid_save_resume),
        cmocka_unit_test(test_export_safetensors),
        cmocka_unit_test(test_safetensors_zero_size),
        cmocka_unit_test(test_cli_save_resume_export),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
