/* train_metrics.c - the --metrics JSON lines (see train_metrics.h). */
#include "train_metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

shs_status_t sim_train_metrics_open(sim_train_metrics_t *m, const char *path) {
    memset(m, 0, sizeof *m);
    m->f.fd = -1;
    SHS_CHECK(shs_dfile_open(&m->f, path));
    m->open = 1;
    return SHS_OK;
}

/* an f32 in the fewest significant digits (at most 9) that read back as
 * the same float: 0.001f is "0.001", not "0.00100000005"; or null */
static const char *f32_json(char *buf, size_t n, float v, int present) {
    if (!present || !isfinite(v)) return "null";
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

shs_status_t sim_train_metrics_write(sim_train_metrics_t *m, const sim_train_metrics_row_t *row) {
    char line[1024], loss[32], norm[32], lr[32], scale[32];
    int len = snprintf(line, sizeof line,
                       "{\"step\": %ld, \"loss\": %s, \"grad_norm\": %s, \"lr\": %s, \"loss_scale\": %s, "
                       "\"step_skipped\": %s, \"tokens\": %ld, \"seconds\": %.6f, \"tokens_per_s\": %.1f, "
                       "\"device_mem_bytes\": %zu, \"device_mem_peak_bytes\": %zu}\n",
                       row->step, f32_json(loss, sizeof loss, row->loss, 1),
                       f32_json(norm, sizeof norm, row->grad_norm, row->grad_norm >= 0),
                       f32_json(lr, sizeof lr, row->lr, 1), f32_json(scale, sizeof scale, row->loss_scale, row->loss_scale > 0),
                       row->skipped ? "true" : "false", row->tokens, row->seconds,
                       row->seconds > 0 ? (double)row->tokens / row->seconds : 0.0, row->mem_bytes, row->mem_peak_bytes);
    shs_status_t st = shs_dfile_write(&m->f, line, (size_t)len);
    if (st != SHS_OK) {
        /* whole lines only: cut what part of this one reached the file */
        if (!m->f.to.in_place && ftruncate(m->f.fd, (off_t)m->whole) != 0)
            return shs_set_error(SHS_IO, "%s; and the partial line could not be cut off: %s", shs_last_error(),
                                 strerror(errno));
        return st;
    }
    m->whole += (uint64_t)len;
    m->lines++;
    return SHS_OK;
}

shs_status_t sim_train_metrics_close(sim_train_metrics_t *m, int succeeded) {
    if (!m->open) return SHS_OK;
    m->open = 0;
    if (succeeded || m->lines > 0) return shs_dfile_commit(&m->f);
    shs_dfile_discard(&m->f);
    return SHS_OK;
}
