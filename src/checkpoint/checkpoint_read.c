/* checkpoint_read.c - opening a checkpoint: the index parsed line by line
 * with file:line errors, every rank file checked (size, CRC) and each unit's
 * full arrays rebuilt on the host from the shards (README.md "Checkpoints").
 * What it is not: the writer (checkpoint_write.c) or resume (checkpoint.c). */
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

#define INDEX_MAX_BYTES ((size_t)256 << 20)

/* ---- reader ------------------------------------------------------------------ */

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
    /* without waiting: opening a FIFO for reading would block until a
     * writer came; it is refused below like any file that is not regular */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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
    if (v < SHS_CHECKPOINT_MIN_VERSION || v > SHS_CHECKPOINT_VERSION)
        return shs_set_error(SHS_PARSE, "%s: format version %lld, this shardsim reads versions %d to %d", path, v,
                             SHS_CHECKPOINT_MIN_VERSION, SHS_CHECKPOINT_VERSION);
    const long long version = v;
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
    m->loss_scale.last_overflow_iter = -1; /* version 1: torch's GradScaler, no DeepSpeed state */
    if (version >= 2) {
        char *rest, kind[32];
        int n = 0;
        SHS_CHECK(expect_line(&c, "loss_scaler_kind", &rest));
        if (sscanf(rest, "%31s %d %d %f%n", kind, &m->scaler.hysteresis, &m->scaler.consecutive_hysteresis,
                   &m->scaler.min_scale, &n) != 4 || rest[n] || shs_scaler_parse(kind, &m->scaler.kind) ||
            m->scaler.hysteresis < 0 || (m->scaler.consecutive_hysteresis & ~1) || !(m->scaler.min_scale >= 0))
            return parse_err(&c, "malformed loss_scaler_kind line", NULL);
        SHS_CHECK(expect_line(&c, "loss_scale_deepspeed", &rest));
        if (sscanf(rest, "%ld %ld %d%n", &m->loss_scale.iter, &m->loss_scale.last_overflow_iter,
                   &m->loss_scale.hysteresis, &n) != 3 || rest[n] || m->loss_scale.iter < 0 ||
            m->loss_scale.hysteresis < 0 ||
            (m->scaler.kind == SHS_SCALER_DEEPSPEED && /* an overflow's iteration precedes the count */
             (m->loss_scale.last_overflow_iter < -1 || m->loss_scale.last_overflow_iter >= m->loss_scale.iter)))
            return parse_err(&c, "malformed loss_scale_deepspeed line", NULL);
    }
    if (version >= 3) {
        char *rest, kind[32];
        int n = 0;
        SHS_CHECK(expect_line(&c, "lr_schedule", &rest));
        if (sscanf(rest, "%31s %ld%n", kind, &m->lr_steps, &n) != 2 || rest[n] ||
            shs_lr_schedule_parse(kind, &m->lr_schedule) || m->lr_steps < 0 || m->lr_steps > m->step)
            return parse_err(&c, "malformed lr_schedule line", NULL);
        m->lr_schedule_known = 1;
        SHS_CHECK(get_i64(&c, "bias_correction", 0, 1, &v));
        m->optim.no_bias_correction = !v;
    } else { /* saved under a constant lr: every step not skipped was applied */
        m->lr_schedule = SHS_LR_CONSTANT;
        m->lr_steps = m->step - m->loss_scale.skipped_steps > 0 ? m->step - m->loss_scale.skipped_steps : 0;
    }

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
    shs__ck_join(path, sizeof path, ck->dir, re->file);
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
    if (memcmp(h, SHS_CHECKPOINT_MAGIC, 8) != 0 || shs__get_le32(h + 8) != SHS_CHECKPOINT_RANK_FILE_VERSION ||
        shs__get_le32(h + 28) != SHS_CHECKPOINT_HEADER_BYTES) {
        st = shs_set_error(SHS_PARSE, "%s: not a shardsim rank file of version %d", path,
                           SHS_CHECKPOINT_RANK_FILE_VERSION);
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
    shs__ck_join(path, sizeof path, dir, SHS_CHECKPOINT_INDEX);
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
    SHS_LOG(INFO, CHECKPOINT, "opened %s: step %ld, %d ranks, strategy %s", dir, (long)ck->meta.step,
            ck->meta.world_size, shs_strategy_name(ck->meta.strategy));
    *out = ck;
    return SHS_OK;
fail:
    free(text);
    free_ranks(ranks);
    shs_checkpoint_close(ck);
    return st;
}
