/* durable.h - crash-safe file writes (internal): write NAME.tmp, fsync it,
 * rename it to NAME, fsync the directory; plus little-endian helpers.
 * Used by checkpoints (checkpoint.c), the safetensors export, and (through
 * the stdio form, shs__afile_*) every report and trace the program writes:
 * a failed or interrupted write leaves an earlier NAME whole. */
#ifndef SHARDSIM_DURABLE_H
#define SHARDSIM_DURABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shardsim/status.h"

typedef struct {
    int fd;                /* -1 when closed */
    char tmp[4096];        /* NAME.tmp */
    char path[4096];       /* NAME */
    uint32_t crc;          /* CRC-32 of the bytes written so far */
    uint64_t bytes;        /* bytes written so far */
} shs__dfile_t;

/* Create (truncate) path.tmp for writing. Errors: SHS_IO naming the path. */
shs_status_t shs__dfile_open(shs__dfile_t *f, const char *path);
/* Append n bytes (all of them, retrying short writes). Errors: SHS_IO. */
shs_status_t shs__dfile_write(shs__dfile_t *f, const void *data, size_t n);
/* fsync, close and rename path.tmp to path (the directory is not synced).
 * On error the temp file is removed. Errors: SHS_IO. */
shs_status_t shs__dfile_commit(shs__dfile_t *f);
/* Close and remove path.tmp (after a failure; never fails). */
void shs__dfile_discard(shs__dfile_t *f);
/* fsync a directory so renames in it are durable. Errors: SHS_IO. */
shs_status_t shs__fsync_dir(const char *dir);
/* The directory part of a path ("." when there is none) into out. */
void shs__dirname(const char *path, char *out, size_t outlen);

/* The same as a stdio stream, for text writers: fp is open on path.tmp. */
typedef struct {
    FILE *fp;              /* NULL when closed */
    char tmp[4096];        /* NAME.tmp */
    char path[4096];       /* NAME */
} shs__afile_t;

/* Open a stream on path.tmp (mode "w" or "wb"). Errors: SHS_IO naming the
 * path (cannot create, path too long). */
shs_status_t shs__afile_open(shs__afile_t *f, const char *path, const char *mode);
/* Check the stream for earlier write errors, flush, fsync, close, and
 * rename path.tmp to path. On any error path.tmp is removed and path is
 * untouched. Errors: SHS_IO naming the path and the reason. */
shs_status_t shs__afile_commit(shs__afile_t *f);
/* Close and remove path.tmp (after a failure; never fails; no-op when
 * already closed). */
void shs__afile_discard(shs__afile_t *f);

/* Little-endian encoding, whatever the host. */
static inline void shs__put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline void shs__put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t shs__get_le32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static inline uint64_t shs__get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
/* n floats from host order to little-endian bytes in place (no-op on
 * little-endian hosts); its own inverse. */
void shs__f32_to_le(float *x, size_t n);

#endif
