/* checkpoint_write.c - saving a sharded checkpoint: each rank writes its
 * shards to a rank file of a new generation, then the index is written last
 * and older generations removed (README.md "Checkpoints").
 * What it is not: the reader (checkpoint_read.c). */
#include "shardsim/checkpoint.h"
#include "shardsim/log.h"

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

#include "checkpoint/checkpoint_impl.h"
#include "shardsim/durable.h"
#include "core/le_bytes.h"
#include "shardsim/shard.h"

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
    shs__put_le32(h + 8, SHS_CHECKPOINT_RANK_FILE_VERSION);
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
    shs__ck_join(path, sizeof path, w->dir, name);
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
        shs__ck_join(path, sizeof path, dir, name);
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
    shs_dtype_t pd, rd;
    shs__ck_resolve_dtypes(m->param_dtype, m->reduce_dtype, &pd, &rd);
    fprintf(f, "param_dtype %s\n", shs_dtype_name(pd));
    fprintf(f, "reduce_dtype %s\n", shs_dtype_name(rd));
    fprintf(f, "loss_scaler %.9g %.9g %.9g %d\n", (double)m->scaler.init_scale, (double)m->scaler.growth_factor,
            (double)m->scaler.backoff_factor, m->scaler.growth_interval);
    fprintf(f, "loss_scale %.9g\n", (double)m->loss_scale.scale);
    fprintf(f, "loss_scale_good_steps %ld\n", m->loss_scale.good_steps);
    fprintf(f, "loss_scale_skipped_steps %ld\n", m->loss_scale.skipped_steps);
    fprintf(f, "loss_scaler_kind %s %d %d %.9g\n", shs_scaler_name(m->scaler.kind), m->scaler.hysteresis,
            m->scaler.consecutive_hysteresis, (double)m->scaler.min_scale);
    fprintf(f, "loss_scale_deepspeed %ld %ld %d\n", m->loss_scale.iter, m->loss_scale.last_overflow_iter,
            m->loss_scale.hysteresis);
    fprintf(f, "lr_schedule %s %ld\n", shs_lr_schedule_name(m->lr_schedule), m->lr_steps);
    fprintf(f, "bias_correction %d\n", !m->optim.no_bias_correction);
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
            shs__ck_join(path, sizeof path, dir, e->d_name);
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
    shs__ck_join(path, sizeof path, w->dir, SHS_CHECKPOINT_INDEX);
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
    SHS_LOG(INFO, CHECKPOINT, "saved %s: generation %llu, step %ld, %d ranks", w->dir,
            (unsigned long long)w->generation, (long)w->meta->step, w->meta->world_size);
    free(text);
    writer_free(w);
    return st;
fail:
    free(text);
    shs_checkpoint_writer_abort(w);
    return st;
}

static shs_status_t save_job(shs_rank_ctx_t *ctx, void *arg) {
    shs__ck_job_arg_t *a = arg;
    if (ctx->rank >= a->w->meta->world_size) return SHS_OK; /* a hybrid run's other replicas */
    return shs_checkpoint_write_rank(a->w, ctx->rank, shs_trainer_strategy(a->t, ctx->rank));
}

shs_status_t shs_checkpoint_save(shs_trainer_t *t, const char *dir) {
    shs_checkpoint_meta_t m;
    shs_checkpoint_meta_of(t, &m);
    shs__ck_job_arg_t a = {.t = t};
    SHS_CHECK(shs_checkpoint_writer_begin(&a.w, dir, &m));
    shs_status_t st = shs_trainer_run(t, save_job, &a);
    if (st != SHS_OK) {
        shs_checkpoint_writer_abort(a.w);
        return st;
    }
    return shs_checkpoint_writer_commit(a.w);
}
