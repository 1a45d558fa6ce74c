/* safetensors.c - full weights as a safetensors file (header length, JSON
 * header written by hand, little-endian f32 data), crash-safe. */
#include "shardsim/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardsim/durable.h"
#include "core/le_bytes.h"
#include "shardsim/checkpoint.h"
#include "shardsim/shard.h"

void shs_safetensors_name(const char *layout_name, char *out, size_t outlen) {
    if (strcmp(layout_name, "wte") == 0 || strcmp(layout_name, "wpe") == 0)
        snprintf(out, outlen, "%s.weight", layout_name);
    else
        snprintf(out, outlen, "%s", layout_name);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

shs_status_t shs_safetensors_write(const char *path, const shs_layout_t *lo, const float *const *units,
                                   const char *const *metadata) {
    char name[sizeof lo->tensors[0].name + 8], other[sizeof name];
    for (int i = 0; i < lo->num_tensors; i++) {
        shs_safetensors_name(lo->tensors[i].name, name, sizeof name);
        for (int j = 0; j < i; j++) {
            shs_safetensors_name(lo->tensors[j].name, other, sizeof other);
            if (strcmp(name, other) == 0)
                return shs_set_error(SHS_INVALID_ARG, "%s: two tensors are named '%s'", path, name);
        }
    }
    char *json = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&json, &len);
    if (!mf) return shs_set_error(SHS_HOST_OOM, "%s: cannot build the header", path);
    fputc('{', mf);
    int first = 1;
    if (metadata && metadata[0]) {
        fputs("\"__metadata__\":{", mf);
        for (int k = 0; metadata[k] && metadata[k + 1]; k += 2) {
            if (k) fputc(',', mf);
            json_string(mf, metadata[k]);
            fputc(':', mf);
            json_string(mf, metadata[k + 1]);
        }
        fputc('}', mf);
        first = 0;
    }
    uint64_t pos = 0;
    for (int i = 0; i < lo->num_tensors; i++) {
        const shs_tensor_info_t *ti = &lo->tensors[i];
        uint64_t bytes = (uint64_t)ti->numel * sizeof(float);
        if (!first) fputc(',', mf);
        first = 0;
        shs_safetensors_name(ti->name, name, sizeof name);
        json_string(mf, name);
        if (ti->cols == 1) fprintf(mf, ":{\"dtype\":\"F32\",\"shape\":[%d]", ti->rows);
        else fprintf(mf, ":{\"dtype\":\"F32\",\"shape\":[%d,%d]", ti->rows, ti->cols);
        fprintf(mf, ",\"data_offsets\":[%llu,%llu]}", (unsigned long long)pos, (unsigned long long)(pos + bytes));
        pos += bytes;
    }
    fputc('}', mf);
    /* pad with spaces so the data starts 8-byte aligned */
    while ((ftell(mf) + 8) % 8 != 0) fputc(' ', mf);
    if (fclose(mf) != 0 || !json) {
        free(json);
        return shs_set_error(SHS_HOST_OOM, "%s: cannot build the header", path);
    }

    shs_dfile_t f;
    shs_status_t st = shs_dfile_open(&f, path);
    if (st != SHS_OK) {
        free(json);
        return st;
    }
    enum { CHUNK = 16384 };
    float *buf = malloc(CHUNK * sizeof(float));
    unsigned char hlen[8];
    shs__put_le64(hlen, (uint64_t)len);
    if (!buf) {
        st = shs_set_error(SHS_HOST_OOM, "%s: cannot allocate the write buffer", path);
        goto fail;
    }
    SHS_CHECK_GOTO(shs_dfile_write(&f, hlen, sizeof hlen), st, fail);
    SHS_CHECK_GOTO(shs_dfile_write(&f, json, len), st, fail);
    for (int i = 0; i < lo->num_tensors; i++) {
        const shs_tensor_info_t *ti = &lo->tensors[i];
        const float *src = units[ti->unit] + ti->offset;
        for (size_t done = 0; done < ti->numel; done += CHUNK) {
            size_t n = ti->numel - done < CHUNK ? ti->numel - done : CHUNK;
            memcpy(buf, src + done, n * sizeof(float));
            shs__f32_to_le(buf, n);
            SHS_CHECK_GOTO(shs_dfile_write(&f, buf, n * sizeof(float)), st, fail);
        }
    }
    free(buf);
    free(json);
    return shs_dfile_commit(&f); /* renamed and its directory synced */
fail:
    shs_dfile_discard(&f);
    free(buf);
    free(json);
    return st;
}

shs_status_t shs_export_safetensors(shs_trainer_t *t, const char *path) {
    const shs_layout_t *lo = shs_trainer_layout(t);
    const shs_train_config_t *cfg = shs_trainer_config(t);
    size_t len = shs_trainer_snapshot_len(t);
    float *snap = malloc((len ? len : 1) * sizeof(float));
    const float **units = malloc((size_t)(lo->num_units ? lo->num_units : 1) * sizeof *units);
    shs_status_t st;
    if (!snap || !units) {
        st = shs_set_error(SHS_HOST_OOM, "%s: cannot allocate the parameters to export", path);
        goto done;
    }
    SHS_CHECK_GOTO(shs_trainer_snapshot(t, snap), st, done);
    size_t base = 0;
    for (int u = 0; u < lo->num_units; u++) {
        units[u] = snap + base;
        base += shs_padded_numel(lo->units[u].numel, cfg->world_size, cfg->strategy.shard_align ? cfg->strategy.shard_align : 1);
    }
    shs_checkpoint_meta_t m;
    shs_checkpoint_meta_of(t, &m);
    char step[32];
    snprintf(step, sizeof step, "%ld", m.step);
    const char *meta[] = {"format", "pt", "producer", "shardsim", "model", m.model, "step", step, NULL};
    st = shs_safetensors_write(path, lo, units, meta);
done:
    free(snap);
    free(units);
    return st;
}
