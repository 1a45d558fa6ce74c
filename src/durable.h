/* durable.h - crash-safe file writes (internal): where an output goes
 * (shs__out_resolve), then NAME.tmp, fsync, rename to NAME, fsync the
 * directory; plus little-endian helpers. Used by checkpoints
 * (checkpoint.c), the safetensors export, and (through the stdio form,
 * shs__afile_*) every report and trace the program writes: a failed or
 * interrupted write leaves an earlier NAME whole. */
#ifndef SHARDSIM_DURABLE_H
#define SHARDSIM_DURABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "shardsim/status.h"

/* Where an output path's bytes go. One policy for both writers below:
 *   missing or a regular file   written to path.tmp beside it, fsynced,
 *                               renamed over it, the directory fsynced
 *                               (the file keeps its permission bits);
 *   a symbolic link             followed to the end of its chain (relative
 *                               targets from the link's directory; a
 *                               dangling link's target is created) and that
 *                               target replaced as above: the link stays;
 *   a character device or FIFO  (/dev/stdout, /dev/null, a pipe) opened and
 *                               written in place, never renamed or removed;
 *                               a failed write, flush or close is an error;
 *   a directory, block device,  refused before anything is written.
 *   socket, anything else
 * A file to replace needs a writable directory, checked here, so a refused
 * output leaves nothing behind. */
typedef struct {
    char path[4096];       /* the final target: the given path or its link chain's end */
    char tmp[4096];        /* path.tmp; "" when written in place or nothing is ours to remove */
    int in_place;          /* 1: a character device or FIFO, written as it is */
    int keep_mode;         /* an existing file's permission bits, -1 for a new one */
    int replaced;          /* 1 once path.tmp has taken the name (the commit renamed it) */
} shs__out_target_t;

/* Resolve path by the policy above, without writing anything. Errors:
 * SHS_IO naming the path (and the link's target) and why: "is a
 * directory", "is a block device", "is a socket", a link loop (more than
 * 40 links), a directory that is missing or not writable. */
shs_status_t shs__out_resolve(const char *path, shs__out_target_t *to);

typedef struct {
    int fd;                /* -1 when closed */
    shs__out_target_t to;  /* where the bytes go */
    uint32_t crc;          /* CRC-32 of the bytes written so far */
    uint64_t bytes;        /* bytes written so far */
} shs__dfile_t;

/* Resolve path (shs__out_resolve) and create (truncate) path.tmp, or open
 * the device. Errors: SHS_IO naming the path. */
shs_status_t shs__dfile_open(shs__dfile_t *f, const char *path);
/* Append n bytes (all of them, retrying short writes). Errors: SHS_IO
 * naming the file written. */
shs_status_t shs__dfile_write(shs__dfile_t *f, const void *data, size_t n);
/* fsync, close, rename path.tmp to the target and fsync its directory (a
 * device: close). On an error before the rename the temp file is removed;
 * a failed directory sync after it leaves the new file in place
 * (f->to.replaced). Errors: SHS_IO. */
shs_status_t shs__dfile_commit(shs__dfile_t *f);
/* Close and remove path.tmp (after a failure; never fails). */
void shs__dfile_discard(shs__dfile_t *f);
/* fsync a directory so renames in it are durable. Errors: SHS_IO. */
shs_status_t shs__fsync_dir(const char *dir);
/* The directory part of a path ("." when there is none) into out. */
void shs__dirname(const char *path, char *out, size_t outlen);

/* The same as a stdio stream, for text writers: fp is open on path.tmp
 * (or on the device). */
typedef struct {
    FILE *fp;              /* NULL when closed */
    shs__out_target_t to;  /* where the bytes go */
} shs__afile_t;

/* Resolve path (shs__out_resolve) and open a stream on path.tmp or the
 * device (mode "w" or "wb"). Errors: SHS_IO naming the path. */
shs_status_t shs__afile_open(shs__afile_t *f, const char *path, const char *mode);
/* Check the stream for earlier write errors, flush, fsync, close, rename
 * path.tmp to the target and fsync its directory (a device: flush and
 * close). On any error path.tmp is removed and the target is untouched.
 * Errors: SHS_IO naming the file and the reason. */
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
