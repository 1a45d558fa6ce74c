/* checkpoint.c - sharded checkpoints: one file per rank with that rank's
 * shards, a text index written last, and resume at any world size, stage
 * and alignment by rebuilding every unit's full arrays on the host.
 * The format is described in README.md ("Checkpoints"). */
#include "shardsim/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardsim/durable.h"
#include "core/le_bytes.h"
#include "shardsim/shard.h"

#define INDEX_MAX_BYTES ((size_t)256 << 20)
#define CK_PATH 4400 /* dir (< 4096) + / + a file name (< 256) */

/* ---- CRC-32 ------------------------------------------------------------------ */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t shs_crc32(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* ---- names ------------------------------------------------------------------- */

static void rank_file_name(char *out, size_t len, int rank, int world, uint64_t gen) {
    snprintf(out, len, "rank-%05d-of-%05d.g%" PRIu64 ".bin", rank, world, gen);
}

/* Whether `name` is a rank file (or its temp file) of any save; its generation. */
static int parse_rank_file_name(const char *name, uint64_t *gen, int *is_tmp) {
    int r, w, n = 0;
    unsigned long long g;
    if (sscanf(name, "rank-%5d-of-%5d.g%llu.bin%n", &r, &w, &g, &n) != 3 || n == 0) return 0;
    if (name[n] == 0) *is_tmp = 0;
    else if (strcmp(name + n, ".tmp") == 0) *is_tmp = 1;
    else return 0;
    *gen = (uint64_t)g;
    return 1;
}

static int has_space(const char *s) { return !*s || strpbrk(s, " \t\r\n") != NULL; }

static void join(char *out, size_t len, const char *dir, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

/* ---- meta -------------------------------------------------------------------- */

void shs_checkpoint_meta_of(shs_trainer_t *t, shs_checkpoint_meta_t *m) {
    const shs_train_config_t *c = shs_trainer_config(t);
    memset(m, 0, sizeof *m);
    m->layout = shs_trainer_layout(t);
    if (c->model_file) snprintf(m->model, sizeof m->model, "netdesc context=%d", c->model.context);
    else
        snprintf(m->model, sizeof m->model, "gpt layers=%d heads=%d channels=%d context=%d", c->model.num_layers,
                 c->model.num_heads, c->model.channels, c->model.context);
    m->world_size = c->world_size;
    /* hybrid sharding: the first replica's G ranks hold one copy of every
     * shard, so the checkpoint is a G-rank one (the other replicas hold the
     * same bits, checked by --check ddp's replica comparison) */
    if ((c->strategy == SHS_HYBRID_SHARD || c->strategy == SHS_HYBRID_SHARD_ZERO2) && c->shard_group_size > 0)
        m->world_size = c->shard_group_size;
    m->shard_align = c->shard_align ? c->shard_align : 1;
    m->strategy = c->strategy;
    m->optim = c->optim;
    m->state_per_param = shs_optim_state_per_param(&c->optim);
    m->step = shs_trainer_steps_done(t);
    m->seed = c->seed;
    m->micro_batch = c->micro_batch;
    m->grad_accum = c->grad_accum > 1 ? c->grad_accum : 1;
    m->clip_norm = c->clip_norm > 0 ? c->clip_norm : 0.0f;
    m->norm_type = c->clip_norm > 0 ? (c->norm_type ? c->norm_type : 2) : 0; /* 0 means 2; -1 inf */
    m->param_dtype = c->param_dtype == 0 ? SHS_F32 : c->param_dtype;
    m->reduce_dtype = c->reduce_dtype == 0 ? m->param_dtype : c->reduce_dtype;
    /* GradScaler's defaults for the zeros (strategy.h) */
    m->scaler.init_scale = c->scaler.init_scale > 0 ? c->scaler.init_scale : 65536.0f;
    m->scaler.growth_factor = c->scaler.growth_factor > 0 ? c->scaler.growth_factor : 2.0f;
    m->scaler.backoff_factor = c->scaler.backoff_factor > 0 ? c->scaler.backoff_factor : 0.5f;
    m->scaler.growth_interval = c->scaler.growth_interval > 0 ? c->scaler.growth_interval : 2000;
    m->loss_scale = shs_trainer_loss_scale(t);
}

/* ---- writer ------------------------------------------------------------------ */

struct shs_checkpoint_writer {
    char dir[4096];
    const shs_checkpoint_meta_t *meta;
    uint64_t generation;
    size_t *shard_size;    /* per unit: S (elements), the same for every rank */
    uint64_t rank_bytes;   /* each rank file's size */
    uint32_t *crc;         /* per rank */
    int *written;          /* per rank */
};

static void writer_free(shs_checkpoint_writer_t *w) {
    if (!w) return;
    free(w->shard_size);
    free(w->crc);
    free(w->written);
    free(w);
}

/* The next generation: one past any rank file in dir (temp files of a
 * crashed save may be reused: they are truncated). */
static shs_status_t next_generation(const char *dir, uint64_t *gen) {
    DIR *d = opendir(dir);
    if (!d) return shs_set_error(SHS_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    uint64_t max = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t g;
        int tmp;
        if (parse_rank_file_name(e->d_name, &g, &tmp) && !tmp && g > max) max = g;
    }
    closedir(d);
    *gen = max + 1;
    return SHS_OK;
}

shs_status_t shs_checkpoint_writer_begin(shs_checkpoint_writer_t **out, const char *dir,
                                         const shs_checkpoint_meta_t *meta) {
    *out = NULL;
    const shs_layout_t *lo = meta->layout;
    if (meta->world_size < 1 || meta->world_size > 99999 || meta->shard_align < 1 || meta->state_per_param < 0 ||
        meta->state_per_param > 16 || meta->step < 0)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s: invalid world size, alignment, state or step", dir);
    if (!meta->model[0] || strchr(meta->model, '\n'))
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s: the model description is empty or has a line break", dir);
    for (int u = 0; u < lo->num_units; u++)
        if (has_space(lo->units[u].name))
            return shs_set_error(SHS_UNSUPPORTED, "checkpoint %s: unit name '%s' is empty or has spaces", dir,
                                 lo->units[u].name);
    for (int i = 0; i < lo->num_tensors; i++)
        if (has_space(lo->tensors[i].name))
            return shs_set_error(SHS_UNSUPPORTED, "checkpoint %s: tensor name '%s' is empty or has spaces", dir,
                                 lo->tensors[i].name);
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT || mkdir(dir, 0755) != 0)
            return shs_set_error(SHS_IO, "%s: cannot create the checkpoint directory: %s", dir, strerror(errno));
    } else if (!S_ISDIR(sb.st_mode)) {
        return shs_set_error(SHS_IO, "%s: exists and is not a directory", dir);
    }
    shs_checkpoint_writer_t *w = calloc(1, sizeof *w);
    if (!w) return shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot allocate the writer", dir);
    if (snprintf(w->dir, sizeof w->dir, "%s", dir) >= (int)sizeof w->dir - 64) {
        free(w);
        return shs_set_error(SHS_IO, "%s: path too long", dir);
    }
    w->meta = meta;
    w->shard_size = calloc((size_t)(lo->num_units ? lo->num_units : 1), sizeof *w->shard_size);
    w->crc = calloc((size_t)meta->world_size, sizeof *w->crc);
    w->written = calloc((size_t)meta->world_size, sizeof *w->written);
    if (!w->shard_size || !w->crc || !w->written) {
        writer_free(w);
        return shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot allocate the writer", dir);
    }
    w->rank_bytes = SHS_CHECKPOINT_HEADER_BYTES;
    for (int u = 0; u < lo->num_units; u++) {
        w->shard_size[u] = shs_shard_size(lo->units[u].numel, meta->world_size, meta->shard_align);
        w->rank_bytes += (uint64_t)w->shard_size[u] * (uint64_t)(1 + meta->state_per_param) * sizeof(float);
    }
    shs_status_t st = next_generation(dir, &w->generation);
    if (st != SHS_OK) {
        writer_free(w);
        return st;
    }
    *out = w;
    return SHS_OK;
}

/* Rank-file header: see README.md "Checkpoints". */
static void encode_header(unsigned char h[SHS_CHECKPOINT_HEADER_BYTES], const shs_checkpoint_meta_t *m, int rank,
                          uint64_t gen, uint64_t payload) {
    memset(h, 0, SHS_CHECKPOINT_HEADER_BYTES);
    memcpy(h, SHS_CHECKPOINT_MAGIC, 8);
    shs__put_le32(h + 8, SHS_CHECKPOINT_VERSION);
    shs__put_le32(h + 12, (uint32_t)rank);
    shs__put_le32(h + 16, (uint32_t)m->world_size);
    shs__put_le32(h + 20, (uint32_t)m->layout->num_units);
    shs__put_le32(h + 24, (uint32_t)m->state_per_param);
    shs__put_le32(h + 28, SHS_CHECKPOINT_HEADER_BYTES);
    shs__put_le64(h + 32, (uint64_t)m->step);
    shs__put_le64(h + 40, gen);
    shs__put_le64(h + 48, payload);
}

shs_status_t shs_checkpoint_write_rank(shs_checkpoint_writer_t *w, int rank, shs_strategy_t *s) {
    const shs_checkpoint_meta_t *m = w->meta;
    const shs_layout_t *lo = m->layout;
    if (rank < 0 || rank >= m->world_size)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint: rank %d outside world of %d", rank, m->world_size);
    int k = m->state_per_param;
    size_t max_s = 1;
    for (int u = 0; u < lo->num_units; u++)
        if (w->shard_size[u] > max_s) max_s = w->shard_size[u];
    float *buf = malloc(max_s * (size_t)(1 + k) * sizeof(float));
    if (!buf) return shs_set_error(SHS_HOST_OOM, "rank %d: cannot allocate the checkpoint buffer", rank);
    char name[128], path[CK_PATH];
    rank_file_name(name, sizeof name, rank, m->world_size, w->generation);
    join(path, sizeof path, w->dir, name);
    shs_dfile_t f;
    shs_status_t st = shs_dfile_open(&f, path);
    if (st != SHS_OK) {
        free(buf);
        return st;
    }
    unsigned char h[SHS_CHECKPOINT_HEADER_BYTES];
    encode_header(h, m, rank, w->generation, w->rank_bytes - SHS_CHECKPOINT_HEADER_BYTES);
    SHS_CHECK_GOTO(shs_dfile_write(&f, h, sizeof h), st, fail);
    for (int u = 0; u < lo->num_units; u++) {
        size_t S = w->shard_size[u], n = S * (size_t)(1 + k);
        if (!S) continue;
        SHS_CHECK_GOTO(shs_strategy_read_state(s, u, buf, k ? buf + S : NULL), st, fail);
        shs__f32_to_le(buf, n);
        SHS_CHECK_GOTO(shs_dfile_write(&f, buf, n * sizeof(float)), st, fail);
    }
    if (f.bytes != w->rank_bytes) {
        st = shs_set_error(SHS_INTERNAL, "%s: wrote %" PRIu64 " bytes, expected %" PRIu64, f.to.path, f.bytes, w->rank_bytes);
        goto fail;
    }
    uint32_t crc = f.crc;
    SHS_CHECK_GOTO(shs_dfile_commit(&f), st, done);
    w->crc[rank] = crc;
    w->written[rank] = 1;
    goto done;
fail:
    shs_dfile_discard(&f);
done:
    free(buf);
    return st;
}

/* Remove this save's rank files (final and temp). */
static void remove_generation(const char *dir, int world, uint64_t gen) {
    char name[128], path[CK_PATH];
    for (int r = 0; r < world; r++) {
        rank_file_name(name, sizeof name, r, world, gen);
        join(path, sizeof path, dir, name);
        unlink(path);
        strcat(path, ".tmp");
        unlink(path);
    }
}

void shs_checkpoint_writer_abort(shs_checkpoint_writer_t *w) {
    if (!w) return;
    remove_generation(w->dir, w->meta->world_size, w->generation);
    writer_free(w);
}

static void write_index(FILE *f, const shs_checkpoint_writer_t *w) {
    const shs_checkpoint_meta_t *m = w->meta;
    const shs_layout_t *lo = m->layout;
    fprintf(f, "shardsim-checkpoint %d\n", SHS_CHECKPOINT_VERSION);
    fprintf(f, "generation %" PRIu64 "\n", w->generation);
    fprintf(f, "model %s\n", m->model);
    fprintf(f, "step %ld\n", m->step);
    fprintf(f, "seed %" PRIu64 "\n", m->seed);
    fprintf(f, "world_size %d\n", m->world_size);
    fprintf(f, "shard_align %zu\n", m->shard_align);
    fprintf(f, "strategy %s\n", shs_strategy_name(m->strategy));
    fprintf(f, "micro_batch %d\n", m->micro_batch);
    fprintf(f, "grad_accum %d\n", m->grad_accum);
    fprintf(f, "clip_norm %.9g\n", (double)m->clip_norm);
    fprintf(f, "norm_type %d\n", m->norm_type);
    fprintf(f, "optimizer %s\n", shs_optim_name(m->optim.kind));
    fprintf(f, "lr %.9g\n", (double)m->optim.lr);
    fprintf(f, "beta1 %.9g\n", (double)m->optim.beta1);
    fprintf(f, "beta2 %.9g\n", (double)m->optim.beta2);
    fprintf(f, "eps %.9g\n", (double)m->optim.eps);
    fprintf(f, "momentum %.9g\n", (double)m->optim.momentum);
    fprintf(f, "weight_decay %.9g\n", (double)m->optim.weight_decay);
    fprintf(f, "state_per_param %d\n", m->state_per_param);
    fprintf(f, "param_dtype %s\n", shs_dtype_name(m->param_dtype));
    fprintf(f, "reduce_dtype %s\n", shs_dtype_name(m->reduce_dtype));
    fprintf(f, "loss_scaler %.9g %.9g %.9g %d\n", (double)m->scaler.init_scale, (double)m->scaler.growth_factor,
            (double)m->scaler.backoff_factor, m->scaler.growth_interval);
    fprintf(f, "loss_scale %.9g\n", (double)m->loss_scale.scale);
    fprintf(f, "loss_scale_good_steps %ld\n", m->loss_scale.good_steps);
    fprintf(f, "loss_scale_skipped_steps %ld\n", m->loss_scale.skipped_steps);
    fprintf(f, "units %d\n", lo->num_units);
    for (int u = 0; u < lo->num_units; u++) {
        const shs_unit_info_t *ui = &lo->units[u];
        fprintf(f, "unit %s %zu %d\n", ui->name, ui->numel, ui->num_tensors);
        for (int i = ui->first_tensor; i < ui->first_tensor + ui->num_tensors; i++) {
            const shs_tensor_info_t *ti = &lo->tensors[i];
            fprintf(f, "tensor %s %d %d %zu\n", ti->name, ti->rows, ti->cols, ti->offset);
        }
    }
    fprintf(f, "ranks %d\n", m->world_size);
    for (int r = 0; r < m->world_size; r++) {
        char name[128];
        rank_file_name(name, sizeof name, r, m->world_size, w->generation);
        fprintf(f, "rank %d %s %" PRIu64 " %08" PRIx32, r, name, w->rank_bytes, w->crc[r]);
        for (int u = 0; u < lo->num_units; u++) fprintf(f, " %zu", w->shard_size[u]);
        fprintf(f, "\n");
    }
}

/* After the new index is durable: remove other generations' rank files and
 * leftover temp files of crashed saves. Failures are harmless. */
static void remove_stale(const char *dir, uint64_t keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[CK_PATH];
    while ((e = readdir(d)) != NULL) {
        uint64_t g;
        int tmp;
        if (parse_rank_file_name(e->d_name, &g, &tmp) && (g != keep || tmp)) {
            join(path, sizeof path, dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

shs_status_t shs_checkpoint_writer_commit(shs_checkpoint_writer_t *w) {
    shs_status_t st = SHS_OK;
    char *text = NULL;
    size_t len = 0;
    for (int r = 0; r < w->meta->world_size; r++)
        if (!w->written[r]) {
            st = shs_set_error(SHS_INTERNAL, "checkpoint %s: rank %d did not write its file", w->dir, r);
            goto fail;
        }
    /* the rank files are durable (each commit synced the directory) before
     * the index names them */
    FILE *mf = open_memstream(&text, &len);
    if (!mf) {
        st = shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot build the index", w->dir);
        goto fail;
    }
    write_index(mf, w);
    if (fclose(mf) != 0 || !text) {
        st = shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot build the index", w->dir);
        goto fail;
    }
    char tail[32];
    snprintf(tail, sizeof tail, "crc32 %08" PRIx32 "\n", shs_crc32(0, text, len));
    char path[CK_PATH];
    join(path, sizeof path, w->dir, SHS_CHECKPOINT_INDEX);
    shs_dfile_t f;
    SHS_CHECK_GOTO(shs_dfile_open(&f, path), st, fail);
    if ((st = shs_dfile_write(&f, text, len)) != SHS_OK || (st = shs_dfile_write(&f, tail, strlen(tail))) != SHS_OK) {
        shs_dfile_discard(&f);
        goto fail;
    }
    /* once renamed, the new index is in place even if syncing its directory
     * failed (st): the files it names stay */
    if ((st = shs_dfile_commit(&f)) != SHS_OK && !f.to.replaced) goto fail;
    remove_stale(w->dir, w->generation);
    free(text);
    writer_free(w);
    return st;
fail:
    free(text);
    shs_checkpoint_writer_abort(w);
    return st;
}

typedef struct {
    shs_trainer_t *t;
    shs_checkpoint_writer_t *w;
    const shs_checkpoint_t *ck;
} job_arg_t;

static shs_status_t save_job(shs_rank_ctx_t *ctx, void *arg) {
    job_arg_t *a = arg;
    if (ctx->rank >= a->w->meta->world_size) return SHS_OK; /* a hybrid run's other replicas */
    return shs_checkpoint_write_rank(a->w, ctx->rank, shs_trainer_strategy(a->t, ctx->rank));
}

shs_status_t shs_checkpoint_save(shs_trainer_t *t, const char *dir) {
    shs_checkpoint_meta_t m;
    shs_checkpoint_meta_of(t, &m);
    job_arg_t a = {.t = t};
    SHS_CHECK(shs_checkpoint_writer_begin(&a.w, dir, &m));
    shs_status_t st = shs_trainer_run(t, save_job, &a);
    if (st != SHS_OK) {
        shs_checkpoint_writer_abort(a.w);
        return st;
    }
    return shs_checkpoint_writer_commit(a.w);
}

/* ---- reader ------------------------------------------------------------------ */

struct shs_checkpoint {
    char dir[4096];
    shs_checkpoint_meta_t meta;
    shs_layout_t layout;
    uint64_t generation;
    float *data;           /* per unit: params (numel) then state_per_param arrays (numel each) */
    size_t *unit_off;      /* per unit: start in data */
};

void shs_checkpoint_close(shs_checkpoint_t *ck) {
    if (!ck) return;
    shs_layout_free(&ck->layout);
    free(ck->data);
    free(ck->unit_off);
    free(ck);
}

const shs_checkpoint_meta_t *shs_checkpoint_meta(const shs_checkpoint_t *ck) { return &ck->meta; }
const float *shs_checkpoint_params(const shs_checkpoint_t *ck, int unit) { return ck->data + ck->unit_off[unit]; }
const float *shs_checkpoint_state(const shs_checkpoint_t *ck, int unit) {
    return ck->meta.state_per_param ? ck->data + ck->unit_off[unit] + ck->layout.units[unit].numel : NULL;
}

/* Line-by-line reading of the index (in place). */
typedef struct {
    char *p, *end;
    int line;
    const char *path;
} cursor_t;

static shs_status_t parse_err(const cursor_t *c, const char *what, const char *detail) {
    return shs_set_error(SHS_PARSE, "%s line %d: %s%s%s", c->path, c->line, what, detail ? ": " : "",
                         detail ? detail : "");
}

/* The next line, whose first word must be `key`; *rest gets what follows it. */
static shs_status_t expect_line(cursor_t *c, const char *key, char **rest) {
    if (c->p >= c->end) {
        c->line++;
        return parse_err(c, "the index ends early: expected", key);
    }
    char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    char *line = c->p;
    *nl = 0;
    c->p = nl + 1;
    c->line++;
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0 || (line[kl] != ' ' && line[kl] != 0)) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected '%s', found", key);
        return parse_err(c, msg, line);
    }
    *rest = line[kl] ? line + kl + 1 : line + kl;
    return SHS_OK;
}

static shs_status_t get_i64(cursor_t *c, const char *key, long long lo, long long hi, long long *out) {
    char *rest, *e;
    SHS_CHECK(expect_line(c, key, &rest));
    errno = 0;
    long long v = strtoll(rest, &e, 10);
    if (errno || e == rest || *e || v < lo || v > hi) return parse_err(c, "bad value of", key);
    *out = v;
    return SHS_OK;
}

static shs_status_t get_u64(cursor_t *c, const char *key, uint64_t *out) {
    char *rest, *e;
    SHS_CHECK(expect_line(c, key, &rest));
    errno = 0;
    unsigned long long v = strtoull(rest, &e, 10);
    if (errno || e == rest || *e || *rest == '-') return parse_err(c, "bad value of", key);
    *out = v;
    return SHS_OK;
}

static shs_status_t get_f32(cursor_t *c, const char *key, float *out) {
    char *rest, *e;
    SHS_CHECK(expect_line(c, key, &rest));
    errno = 0;
    float v = strtof(rest, &e);
    if (e == rest || *e) return parse_err(c, "bad value of", key);
    *out = v;
    return SHS_OK;
}

static shs_status_t get_word(cursor_t *c, const char *key, char *out, size_t outlen) {
    char *rest;
    SHS_CHECK(expect_line(c, key, &rest));
    if (!*rest || strlen(rest) >= outlen) return parse_err(c, "bad value of", key);
    snprintf(out, outlen, "%s", rest);
    return SHS_OK;
}

/* Strict parse of one unsigned field of a multi-field line. */
static int next_size(char **save, size_t *out) {
    char *tok = strtok_r(NULL, " ", save), *e;
    if (!tok || *tok == '-') return -1;
    errno = 0;
    unsigned long long v = strtoull(tok, &e, 10);
    if (errno || *e || v > (unsigned long long)SIZE_MAX / 64) return -1;
    *out = (size_t)v;
    return 0;
}

typedef struct {
    char file[128];
    uint64_t bytes;
    uint32_t crc;
    size_t *sizes;         /* per unit */
} rank_entry_t;

static shs_status_t read_whole(const char *path, unsigned char **out, size_t *len, size_t max) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return shs_set_error(SHS_IO, "%s: missing", path);
        return shs_set_error(SHS_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        close(fd);
        return shs_set_error(SHS_IO, "%s: not a regular file of at most %zu bytes", path, max);
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return shs_set_error(SHS_HOST_OOM, "%s: cannot allocate %zu bytes to read it", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int err = errno;
            close(fd);
            free(buf);
            return shs_set_error(SHS_IO, "%s: read failed: %s", path, k < 0 ? strerror(err) : "file shrank");
        }
        got += (size_t)k;
    }
    close(fd);
    *out = buf;
    *len = n;
    return SHS_OK;
}

static shs_status_t parse_index(shs_checkpoint_t *ck, char *text, size_t len, const char *path, rank_entry_t **ranks_out) {
    shs_checkpoint_meta_t *m = &ck->meta;
    *ranks_out = NULL;
    /* the last line is "crc32 XXXXXXXX" over every byte before it */
    if (len < 2 || text[len - 1] != '\n')
        return shs_set_error(SHS_PARSE, "%s: truncated (does not end with its checksum line)", path);
    size_t last = len - 1;
    while (last > 0 && text[last - 1] != '\n') last--;
    unsigned int want;
    char extra;
    text[len - 1] = 0;
    if (sscanf(text + last, "crc32 %8x%c", &want, &extra) != 1 || strlen(text + last) != 14)
        return shs_set_error(SHS_PARSE, "%s: truncated (the last line is not its checksum line)", path);
    uint32_t got = shs_crc32(0, text, last);
    if (got != want)
        return shs_set_error(SHS_PARSE, "%s: checksum mismatch: the index has crc32 %08" PRIx32 ", its last line says %08x "
                             "(corrupted or torn)", path, got, want);
    cursor_t c = {.p = text, .end = text + last, .line = 0, .path = path};
    long long v;
    char word[64];
    SHS_CHECK(get_i64(&c, "shardsim-checkpoint", 0, 1000000, &v));
    if (v != SHS_CHECKPOINT_VERSION)
        return shs_set_error(SHS_PARSE, "%s: format version %lld, this shardsim reads version %d", path, v,
                             SHS_CHECKPOINT_VERSION);
    SHS_CHECK(get_u64(&c, "generation", &ck->generation));
    SHS_CHECK(get_word(&c, "model", m->model, sizeof m->model));
    SHS_CHECK(get_i64(&c, "step", 0, LONG_MAX, &v));
    m->step = (long)v;
    SHS_CHECK(get_u64(&c, "seed", &m->seed));
    SHS_CHECK(get_i64(&c, "world_size", 1, 99999, &v));
    m->world_size = (int)v;
    SHS_CHECK(get_i64(&c, "shard_align", 1, 1LL << 40, &v));
    m->shard_align = (size_t)v;
    SHS_CHECK(get_word(&c, "strategy", word, sizeof word));
    if (shs_strategy_parse(word, &m->strategy)) return parse_err(&c, "unknown strategy", word);
    SHS_CHECK(get_i64(&c, "micro_batch", 1, 1 << 30, &v));
    m->micro_batch = (int)v;
    SHS_CHECK(get_i64(&c, "grad_accum", 1, 1 << 30, &v));
    m->grad_accum = (int)v;
    SHS_CHECK(get_f32(&c, "clip_norm", &m->clip_norm));
    SHS_CHECK(get_i64(&c, "norm_type", -1, 2, &v));
    m->norm_type = (int)v;
    SHS_CHECK(get_word(&c, "optimizer", word, sizeof word));
    if (shs_optim_parse(word, &m->optim.kind)) return parse_err(&c, "unknown optimizer", word);
    SHS_CHECK(get_f32(&c, "lr", &m->optim.lr));
    SHS_CHECK(get_f32(&c, "beta1", &m->optim.beta1));
    SHS_CHECK(get_f32(&c, "beta2", &m->optim.beta2));
    SHS_CHECK(get_f32(&c, "eps", &m->optim.eps));
    SHS_CHECK(get_f32(&c, "momentum", &m->optim.momentum));
    SHS_CHECK(get_f32(&c, "weight_decay", &m->optim.weight_decay));
    SHS_CHECK(get_i64(&c, "state_per_param", 0, 16, &v));
    m->state_per_param = (int)v;
    if (m->state_per_param != shs_optim_state_per_param(&m->optim))
        return parse_err(&c, "state_per_param disagrees with the optimizer", NULL);
    SHS_CHECK(get_word(&c, "param_dtype", word, sizeof word));
    if (shs_dtype_parse(word, &m->param_dtype)) return parse_err(&c, "unknown dtype", word);
    SHS_CHECK(get_word(&c, "reduce_dtype", word, sizeof word));
    if (shs_dtype_parse(word, &m->reduce_dtype)) return parse_err(&c, "unknown dtype", word);
    {
        char *rest;
        int n = 0;
        SHS_CHECK(expect_line(&c, "loss_scaler", &rest));
        if (sscanf(rest, "%f %f %f %d%n", &m->scaler.init_scale, &m->scaler.growth_factor, &m->scaler.backoff_factor,
                   &m->scaler.growth_interval, &n) != 4 || rest[n])
            return parse_err(&c, "malformed loss_scaler line", NULL);
    }
    SHS_CHECK(get_f32(&c, "loss_scale", &m->loss_scale.scale));
    SHS_CHECK(get_i64(&c, "loss_scale_good_steps", 0, LONG_MAX, &v));
    m->loss_scale.good_steps = (long)v;
    SHS_CHECK(get_i64(&c, "loss_scale_skipped_steps", 0, LONG_MAX, &v));
    m->loss_scale.skipped_steps = (long)v;

    long long nunits;
    SHS_CHECK(get_i64(&c, "units", 0, 1 << 24, &nunits));
    for (int u = 0; u < nunits; u++) {
        char *rest, *save, *name;
        size_t numel, ntens;
        SHS_CHECK(expect_line(&c, "unit", &rest));
        name = strtok_r(rest, " ", &save);
        if (!name || strlen(name) >= sizeof ck->layout.units[0].name || next_size(&save, &numel) ||
            next_size(&save, &ntens) || strtok_r(NULL, " ", &save) || ntens > (1u << 24))
            return parse_err(&c, "malformed unit line", NULL);
        SHS_CHECK(shs_layout_add_unit(&ck->layout, name));
        for (size_t i = 0; i < ntens; i++) {
            size_t rows, cols, off;
            SHS_CHECK(expect_line(&c, "tensor", &rest));
            name = strtok_r(rest, " ", &save);
            if (!name || strlen(name) >= sizeof ck->layout.tensors[0].name || next_size(&save, &rows) ||
                next_size(&save, &cols) || next_size(&save, &off) || strtok_r(NULL, " ", &save) || rows > INT32_MAX ||
                cols > INT32_MAX)
                return parse_err(&c, "malformed tensor line", NULL);
            SHS_CHECK(shs_layout_add_tensor(&ck->layout, name, (int)rows, (int)cols, SHS_INIT_ZEROS, 0));
            if (ck->layout.tensors[ck->layout.num_tensors - 1].offset != off)
                return parse_err(&c, "tensor offset does not follow from the shapes before it", name);
        }
        if (ck->layout.units[u].numel != numel)
            return parse_err(&c, "the unit's element count is not the sum of its tensors", ck->layout.units[u].name);
    }
    m->layout = &ck->layout;

    long long nranks;
    SHS_CHECK(get_i64(&c, "ranks", 1, 99999, &nranks));
    if (nranks != m->world_size) return parse_err(&c, "rank count differs from world_size", NULL);
    rank_entry_t *ranks = calloc((size_t)nranks, sizeof *ranks);
    size_t *sizes = calloc((size_t)nranks * (size_t)(nunits ? nunits : 1), sizeof *sizes);
    if (!ranks || !sizes) {
        free(ranks);
        free(sizes);
        return shs_set_error(SHS_HOST_OOM, "%s: cannot allocate the rank table", path);
    }
    *ranks_out = ranks;
    ranks[0].sizes = sizes; /* owns the block; see free_ranks */
    for (int r = 0; r < nranks; r++) {
        char *rest, *save, *tok, *e;
        size_t rr, bytes;
        ranks[r].sizes = sizes + (size_t)r * (size_t)(nunits ? nunits : 1);
        SHS_CHECK(expect_line(&c, "rank", &rest));
        tok = strtok_r(rest, " ", &save);
        if (!tok || sscanf(tok, "%zu", &rr) != 1 || rr != (size_t)r) return parse_err(&c, "ranks out of order", NULL);
        tok = strtok_r(NULL, " ", &save);
        if (!tok || strlen(tok) >= sizeof ranks[r].file || strchr(tok, '/') || tok[0] == '.')
            return parse_err(&c, "bad rank file name", tok);
        snprintf(ranks[r].file, sizeof ranks[r].file, "%s", tok);
        if (next_size(&save, &bytes)) return parse_err(&c, "bad byte size", NULL);
        ranks[r].bytes = bytes;
        tok = strtok_r(NULL, " ", &save);
        if (!tok || strlen(tok) != 8) return parse_err(&c, "bad crc32", NULL);
        unsigned long cv = strtoul(tok, &e, 16);
        if (*e) return parse_err(&c, "bad crc32", tok);
        ranks[r].crc = (uint32_t)cv;
        uint64_t expect = SHS_CHECKPOINT_HEADER_BYTES;
        for (int u = 0; u < nunits; u++) {
            if (next_size(&save, &ranks[r].sizes[u])) return parse_err(&c, "missing or bad shard size", NULL);
            expect += (uint64_t)ranks[r].sizes[u] * (uint64_t)(1 + m->state_per_param) * sizeof(float);
        }
        if (strtok_r(NULL, " ", &save)) return parse_err(&c, "extra fields on the rank line", NULL);
        if (expect != ranks[r].bytes) return parse_err(&c, "byte size disagrees with the shard sizes", NULL);
    }
    if (c.p != c.end) {
        c.line++;
        return parse_err(&c, "unexpected line after the rank table", NULL);
    }
    /* the shards of each unit, in rank order, must cover its elements */
    for (int u = 0; u < nunits; u++) {
        size_t cover = 0;
        for (int r = 0; r < nranks; r++) cover += ranks[r].sizes[u];
        if (cover < ck->layout.units[u].numel)
            return shs_set_error(SHS_PARSE, "%s: unit %s: the shards cover %zu of its %zu elements", path,
                                 ck->layout.units[u].name, cover, ck->layout.units[u].numel);
    }
    return SHS_OK;
}

static void free_ranks(rank_entry_t *ranks) {
    if (ranks) free(ranks[0].sizes);
    free(ranks);
}

/* Validate rank r's file and scatter its shards into ck->data. */
static shs_status_t load_rank_file(shs_checkpoint_t *ck, const rank_entry_t *ranks, int r) {
    const shs_checkpoint_meta_t *m = &ck->meta;
    const rank_entry_t *re = &ranks[r];
    char path[CK_PATH];
    join(path, sizeof path, ck->dir, re->file);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return shs_set_error(SHS_IO, "%s: %s (the index lists it for rank %d)", path,
                             errno == ENOENT ? "missing" : strerror(errno), r);
    if ((uint64_t)sb.st_size != re->bytes)
        return shs_set_error(SHS_PARSE, "%s: %lld bytes, the index says %" PRIu64 " (truncated or torn file)", path,
                             (long long)sb.st_size, re->bytes);
    unsigned char *buf;
    size_t len;
    SHS_CHECK(read_whole(path, &buf, &len, (size_t)re->bytes));
    shs_status_t st = SHS_OK;
    uint32_t crc = shs_crc32(0, buf, len);
    if (len != re->bytes) {
        st = shs_set_error(SHS_PARSE, "%s: %zu bytes, the index says %" PRIu64 " (truncated or torn file)", path, len,
                           re->bytes);
        goto done;
    }
    if (crc != re->crc) {
        st = shs_set_error(SHS_PARSE, "%s: checksum mismatch: crc32 %08" PRIx32 ", the index says %08" PRIx32
                           " (corrupted, or a file from another save)", path, crc, re->crc);
        goto done;
    }
    const unsigned char *h = buf;
    if (memcmp(h, SHS_CHECKPOINT_MAGIC, 8) != 0 || shs__get_le32(h + 8) != SHS_CHECKPOINT_VERSION ||
        shs__get_le32(h + 28) != SHS_CHECKPOINT_HEADER_BYTES) {
        st = shs_set_error(SHS_PARSE, "%s: not a shardsim rank file of version %d", path, SHS_CHECKPOINT_VERSION);
        goto done;
    }
    if (shs__get_le32(h + 12) != (uint32_t)r || shs__get_le32(h + 16) != (uint32_t)m->world_size ||
        shs__get_le32(h + 20) != (uint32_t)ck->layout.num_units ||
        shs__get_le32(h + 24) != (uint32_t)m->state_per_param || shs__get_le64(h + 32) != (uint64_t)m->step ||
        shs__get_le64(h + 40) != ck->generation ||
        shs__get_le64(h + 48) != re->bytes - SHS_CHECKPOINT_HEADER_BYTES) {
        st = shs_set_error(SHS_PARSE,
                           "%s: header says rank %" PRIu32 " of %" PRIu32 ", step %" PRIu64 ", generation %" PRIu64
                           "; the index expects rank %d of %d, step %ld, generation %" PRIu64,
                           path, shs__get_le32(h + 12), shs__get_le32(h + 16), shs__get_le64(h + 32),
                           shs__get_le64(h + 40), r, m->world_size, m->step, ck->generation);
        goto done;
    }
    size_t pos = SHS_CHECKPOINT_HEADER_BYTES;
    int k = m->state_per_param;
    for (int u = 0; u < ck->layout.num_units; u++) {
        size_t numel = ck->layout.units[u].numel, S = re->sizes[u], off = 0;
        for (int q = 0; q < r; q++) off += ranks[q].sizes[u];
        for (int j = 0; j <= k; j++) {
            float *dst = ck->data + ck->unit_off[u] + (size_t)j * numel;
            for (size_t i = 0; i < S; i++, pos += 4) {
                float x;
                memcpy(&x, buf + pos, 4);
                shs__f32_to_le(&x, 1);
                if (off + i < numel) {
                    dst[off + i] = x;
                } else if (shs__get_le32(buf + pos) != 0) {
                    st = shs_set_error(SHS_PARSE, "%s: unit %s: padding element %zu of %s is not zero", path,
                                       ck->layout.units[u].name, off + i, j == 0 ? "the parameters" : "the optimizer state");
                    goto done;
                }
            }
        }
    }
done:
    free(buf);
    return st;
}

shs_status_t shs_checkpoint_open(shs_checkpoint_t **out, const char *dir) {
    *out = NULL;
    shs_checkpoint_t *ck = calloc(1, sizeof *ck);
    if (!ck) return shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot allocate", dir);
    shs_layout_init(&ck->layout);
    snprintf(ck->dir, sizeof ck->dir, "%s", dir);
    char path[CK_PATH];
    join(path, sizeof path, dir, SHS_CHECKPOINT_INDEX);
    unsigned char *text = NULL;
    size_t len = 0;
    rank_entry_t *ranks = NULL;
    shs_status_t st;
    struct stat sb;
    int src = stat(dir, &sb);
    if (src != 0 || !S_ISDIR(sb.st_mode)) {
        const char *why = src != 0 ? (errno == ENOENT ? "it does not exist" : strerror(errno)) : "not a directory";
        st = shs_set_error(SHS_IO, "%s: not a checkpoint directory (%s)", dir, why);
        goto fail;
    }
    st = read_whole(path, &text, &len, INDEX_MAX_BYTES);
    if (st != SHS_OK) {
        if (strstr(shs_last_error(), ": missing"))
            st = shs_set_error(SHS_IO, "%s: missing: %s holds no complete checkpoint", path, dir);
        goto fail;
    }
    SHS_CHECK_GOTO(parse_index(ck, (char *)text, len, path, &ranks), st, fail);
    int k = ck->meta.state_per_param;
    ck->unit_off = calloc((size_t)(ck->layout.num_units ? ck->layout.num_units : 1), sizeof *ck->unit_off);
    size_t total = 0;
    for (int u = 0; u < ck->layout.num_units; u++) {
        ck->unit_off[u] = total;
        total += ck->layout.units[u].numel * (size_t)(1 + k);
    }
    ck->data = calloc(total ? total : 1, sizeof(float));
    if (!ck->unit_off || !ck->data) {
        st = shs_set_error(SHS_HOST_OOM, "checkpoint %s: cannot allocate %zu floats for the full state", dir, total);
        goto fail;
    }
    for (int r = 0; r < ck->meta.world_size; r++) SHS_CHECK_GOTO(load_rank_file(ck, ranks, r), st, fail);
    free(text);
    free_ranks(ranks);
    *out = ck;
    return SHS_OK;
fail:
    free(text);
    free_ranks(ranks);
    shs_checkpoint_close(ck);
    return st;
}

/* ---- resume ------------------------------------------------------------------ */

static int same_f32(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

shs_status_t shs_checkpoint_check_compatible(const shs_checkpoint_t *ck, const shs_checkpoint_meta_t *run) {
    const shs_checkpoint_meta_t *m = &ck->meta;
    const char *d = ck->dir;
    if (strcmp(m->model, run->model) != 0)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s holds model '%s'; this run is '%s'", d, m->model, run->model);
    const shs_layout_t *a = m->layout, *b = run->layout;
    if (a->num_units != b->num_units || a->num_tensors != b->num_tensors)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s: layout of %d units and %d tensors; this run has %d and %d", d,
                             a->num_units, a->num_tensors, b->num_units, b->num_tensors);
    for (int u = 0; u < a->num_units; u++)
        if (strcmp(a->units[u].name, b->units[u].name) != 0 || a->units[u].numel != b->units[u].numel ||
            a->units[u].num_tensors != b->units[u].num_tensors)
            return shs_set_error(SHS_INVALID_ARG,
                                 "checkpoint %s: unit %d is '%s' of %zu elements; this run's is '%s' of %zu", d, u,
                                 a->units[u].name, a->units[u].numel, b->units[u].name, b->units[u].numel);
    for (int i = 0; i < a->num_tensors; i++) {
        const shs_tensor_info_t *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) != 0 || x->rows != y->rows || x->cols != y->cols || x->offset != y->offset)
            return shs_set_error(SHS_INVALID_ARG,
                                 "checkpoint %s: tensor %d is %s (%d, %d) at %zu; this run's is %s (%d, %d) at %zu", d,
                                 i, x->name, x->rows, x->cols, x->offset, y->name, y->rows, y->cols, y->offset);
    }
    if (m->optim.kind != run->optim.kind)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with optimizer %s; this run uses %s", d,
                             shs_optim_name(m->optim.kind), shs_optim_name(run->optim.kind));
    static const struct {
        const char *name;
        size_t off;
    } hp[] = {{"lr", offsetof(shs_optim_config_t, lr)},
              {"beta1", offsetof(shs_optim_config_t, beta1)},
              {"beta2", offsetof(shs_optim_config_t, beta2)},
              {"eps", offsetof(shs_optim_config_t, eps)},
              {"momentum", offsetof(shs_optim_config_t, momentum)},
              {"weight_decay", offsetof(shs_optim_config_t, weight_decay)}};
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        float x, y;
        memcpy(&x, (const char *)&m->optim + hp[i].off, sizeof x);
        memcpy(&y, (const char *)&run->optim + hp[i].off, sizeof y);
        if (!same_f32(x, y))
            return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with %s %.9g; this run has %.9g", d,
                                 hp[i].name, (double)x, (double)y);
    }
    if (m->seed != run->seed)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s was saved with seed %" PRIu64 "; this run has %" PRIu64, d,
                             m->seed, run->seed);
    float ca = m->clip_norm > 0 ? m->clip_norm : 0.0f, cb = run->clip_norm > 0 ? run->clip_norm : 0.0f;
    if (!same_f32(ca, cb) || (ca > 0 && m->norm_type != run->norm_type))
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with gradient clipping max norm %.9g, norm type %d; this run has "
                             "%.9g, %d (0: off)", d, (double)ca, m->norm_type, (double)cb, run->norm_type);
    if (m->param_dtype != run->param_dtype || m->reduce_dtype != run->reduce_dtype)
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with param dtype %s, reduce dtype %s; this run has %s, %s", d,
                             shs_dtype_name(m->param_dtype), shs_dtype_name(m->reduce_dtype),
                             shs_dtype_name(run->param_dtype), shs_dtype_name(run->reduce_dtype));
    if (m->param_dtype == SHS_F16 &&
        (!same_f32(m->scaler.init_scale, run->scaler.init_scale) ||
         !same_f32(m->scaler.growth_factor, run->scaler.growth_factor) ||
         !same_f32(m->scaler.backoff_factor, run->scaler.backoff_factor) ||
         m->scaler.growth_interval != run->scaler.growth_interval))
        return shs_set_error(SHS_INVALID_ARG,
                             "checkpoint %s was saved with loss scaler (init %.9g, growth %.9g, backoff %.9g, interval "
                             "%d); this run has (%.9g, %.9g, %.9g, %d)", d, (double)m->scaler.init_scale,
                             (double)m->scaler.growth_factor, (double)m->scaler.backoff_factor,
                             m->scaler.growth_interval, (double)run->scaler.init_scale,
                             (double)run->scaler.growth_factor, (double)run->scaler.backoff_factor,
                             run->scaler.growth_interval);
    if (m->state_per_param != run->state_per_param)
        return shs_set_error(SHS_INVALID_ARG, "checkpoint %s has %d optimizer-state arrays; this run needs %d", d,
                             m->state_per_param, run->state_per_param);
    return SHS_OK;
}

shs_status_t shs_checkpoint_load_rank(const shs_checkpoint_t *ck, shs_strategy_t *s) {
    for (int u = 0; u < ck->layout.num_units; u++)
        SHS_CHECK(shs_strategy_load_state(s, u, shs_checkpoint_params(ck, u), shs_checkpoint_state(ck, u)));
    return SHS_OK;
}

static shs_status_t load_job(shs_rank_ctx_t *ctx, void *arg) {
    job_arg_t *a = arg;
    shs_strategy_t *s = shs_trainer_strategy(a->t, ctx->rank);
    if (shs_strategy_state_per_param(s) != a->ck->meta.state_per_param)
        return shs_set_error(SHS_INTERNAL, "rank %d: strategy keeps %d state arrays, the checkpoint %d", ctx->rank,
                             shs_strategy_state_per_param(s), a->ck->meta.state_per_param);
    return shs_checkpoint_load_rank(a->ck, s);
}

shs_status_t shs_checkpoint_resume(shs_trainer_t *t, const char *dir) {
    shs_checkpoint_t *ck;
    SHS_CHECK(shs_checkpoint_open(&ck, dir));
    shs_checkpoint_meta_t run;
    shs_checkpoint_meta_of(t, &run);
    shs_status_t st = shs_checkpoint_check_compatible(ck, &run);
    if (st == SHS_OK) {
        job_arg_t a = {.t = t, .ck = ck};
        st = shs_trainer_run(t, load_job, &a);
    }
    if (st == SHS_OK) st = shs_trainer_set_loss_scale(t, ck->meta.loss_scale);
    if (st == SHS_OK) shs_trainer_set_steps_done(t, ck->meta.step);
    shs_checkpoint_close(ck);
    return st;
}
