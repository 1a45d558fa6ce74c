/* durable.h - crash-safe file writes: where an output goes
 * (shs_out_resolve), then NAME.tmp, fsync, rename to NAME, fsync the
 * directory. Used by checkpoints
 * (checkpoint_write.c), the safetensors export, and (through the stdio form,
 * shs_afile_*) every report and trace the program writes: a failed or
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
    int fifo;              /* 1: in place and a FIFO (opened without waiting: no reader is an error) */
    int keep_mode;         /* an existing file's permission bits, -1 for a new one */
    int replaced;          /* 1 once path.tmp has taken the name (the commit renamed it) */
} shs_out_target_t;

/* Resolve path by the policy above, without writing anything. Errors:
 * SHS_IO naming the path (and the link's target) and why: "is a
 * directory", "is a block device", "is a socket", a link loop (more than
 * 40 links), a directory that is missing or not writable. */
shs_status_t shs_out_resolve(const char *path, shs_out_target_t *to);

/* One output a command writes: the option that names it and its path. */
typedef struct {
    const char *option;    /* "--export-text", for messages */
    const char *path;
} shs_out_named_t;

/* Before anything is written, refuse outputs that would destroy an input or
 * each other:
 *   an output that is an input: the file the output path reaches (through
 *     links) is the input file (same st_dev and st_ino), or, for a directory
 *     input, a file in that directory (one a directory load reads);
 *   two outputs on one file: the same target after shs_out_resolve (the
 *     same path string), or the same existing file (st_dev, st_ino);
 *     character devices (/dev/null, /dev/stdout) excepted: written in
 *     place, neither replaces the other.
 * Each output is also resolved (shs_out_resolve), so one that can never be
 * written (a directory, a missing directory) is refused here too.
 * inputs may be NULL when ninputs is 0. Errors: SHS_IO naming the option(s),
 * the path(s) and the input. */
shs_status_t shs_out_check(const shs_out_named_t *outs, size_t nouts, const char *const *inputs, size_t ninputs);

/* Check a prefix P of output files P.<something> (the Chakra export's
 * P.<rank>.et): refused when empty, when it ends in '/' (the files would be
 * hidden .<rank> files in that directory), or when P itself exists and is a
 * directory, device, FIFO or socket (P.0.et would be created beside
 * /dev/full as a regular file). Errors: SHS_IO naming option and prefix. */
shs_status_t shs_out_prefix_check(const char *option, const char *prefix);

typedef struct {
    int fd;                /* -1 when closed */
    shs_out_target_t to;  /* where the bytes go */
    uint32_t crc;          /* CRC-32 of the bytes written so far */
    uint64_t bytes;        /* bytes written so far */
} shs_dfile_t;

/* Resolve path (shs_out_resolve) and create (truncate) path.tmp, or open
 * the device. Errors: SHS_IO naming the path. */
shs_status_t shs_dfile_open(shs_dfile_t *f, const char *path);
/* Append n bytes (all of them, retrying short writes). Errors: SHS_IO
 * naming the file written. */
shs_status_t shs_dfile_write(shs_dfile_t *f, const void *data, size_t n);
/* fsync, close, rename path.tmp to the target and fsync its directory (a
 * device: close). On an error before the rename the temp file is removed;
 * a failed directory sync after it leaves the new file in place
 * (f->to.replaced). Errors: SHS_IO. */
shs_status_t shs_dfile_commit(shs_dfile_t *f);
/* Close and remove path.tmp (after a failure; never fails). */
void shs_dfile_discard(shs_dfile_t *f);
/* fsync a directory so renames in it are durable. Errors: SHS_IO. */
shs_status_t shs_fsync_dir(const char *dir);
/* The directory part of a path ("." when there is none) into out. */
void shs_dirname(const char *path, char *out, size_t outlen);

/* The same as a stdio stream, for text writers: fp is open on path.tmp
 * (or on the device). */
typedef struct {
    FILE *fp;              /* NULL when closed */
    shs_out_target_t to;  /* where the bytes go */
    int fd;                /* the stream's file descriptor */
    int write_errno;       /* the errno of the stream's first failed write, 0 none (the reason
                            * shs_afile_commit and shs_afile_fail give, whenever it happened) */
} shs_afile_t;

/* Resolve path (shs_out_resolve) and open a stream on path.tmp or the
 * device (mode "w" or "wb"). Errors: SHS_IO naming the path. */
shs_status_t shs_afile_open(shs_afile_t *f, const char *path, const char *mode);
/* Check the stream for earlier write errors, flush, fsync, close, rename
 * path.tmp to the target and fsync its directory (a device: flush and
 * close). On any error path.tmp is removed and the target is untouched.
 * Errors: SHS_IO naming the file and the reason. */
shs_status_t shs_afile_commit(shs_afile_t *f);
/* Close and remove path.tmp (after a failure; never fails; no-op when
 * already closed). */
void shs_afile_discard(shs_afile_t *f);
/* After a writer failed: discard (as shs_afile_discard) and return SHS_IO
 * "PATH: write failed: REASON", REASON the stream's own error (the errno
 * text of its failed write, e.g. "No space left on device", when the
 * stream still can tell) or else `why`, the writer's errno text ("stream
 * error" when NULL). */
shs_status_t shs_afile_fail(shs_afile_t *f, const char *why);

#endif
