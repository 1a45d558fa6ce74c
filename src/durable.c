/* durable.c - crash-safe file writes: temp file, fsync, rename, fsync dir. */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardsim/checkpoint.h"

/* The last step of a commit: the written temp file takes the name, or,
 * when an earlier step failed (st) or the rename does, is removed. */
static shs_status_t rename_or_remove(const char *tmp, const char *path, shs_status_t st) {
    if (st == SHS_OK && rename(tmp, path) != 0)
        st = shs_set_error(SHS_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (st != SHS_OK) unlink(tmp);
    return st;
}

shs_status_t shs__dfile_open(shs__dfile_t *f, const char *path) {
    f->fd = -1;
    f->crc = 0;
    f->bytes = 0;
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path ||
        snprintf(f->tmp, sizeof f->tmp, "%s.tmp", path) >= (int)sizeof f->tmp)
        return shs_set_error(SHS_IO, "%s: path too long", path);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) return shs_set_error(SHS_IO, "%s: cannot create: %s", f->tmp, strerror(errno));
    return SHS_OK;
}

shs_status_t shs__dfile_write(shs__dfile_t *f, const void *data, size_t n) {
    const unsigned char *p = data;
    f->crc = shs_crc32(f->crc, p, n);
    f->bytes += n;
    while (n > 0) {
        ssize_t k = write(f->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return shs_set_error(SHS_IO, "%s: write failed: %s", f->tmp, k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (size_t)k;
    }
    return SHS_OK;
}

shs_status_t shs__dfile_commit(shs__dfile_t *f) {
    shs_status_t st = SHS_OK;
    if (fsync(f->fd) != 0) st = shs_set_error(SHS_IO, "%s: fsync failed: %s", f->tmp, strerror(errno));
    if (close(f->fd) != 0 && st == SHS_OK) st = shs_set_error(SHS_IO, "%s: close failed: %s", f->tmp, strerror(errno));
    f->fd = -1;
    return rename_or_remove(f->tmp, f->path, st);
}

void shs__dfile_discard(shs__dfile_t *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    unlink(f->tmp);
}

shs_status_t shs__afile_open(shs__afile_t *f, const char *path, const char *mode) {
    f->fp = NULL;
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path ||
        snprintf(f->tmp, sizeof f->tmp, "%s.tmp", path) >= (int)sizeof f->tmp)
        return shs_set_error(SHS_IO, "%s: path too long", path);
    /* a device or pipe (/dev/stdout, a FIFO) is written in place: it holds
     * nothing to lose and cannot be renamed onto */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        f->tmp[0] = '\0';
        f->fp = fopen(path, mode);
        if (!f->fp) return shs_set_error(SHS_IO, "%s: cannot open: %s", path, strerror(errno));
        return SHS_OK;
    }
    f->fp = fopen(f->tmp, mode);
    if (!f->fp) return shs_set_error(SHS_IO, "%s: cannot create: %s (writing %s)", path, strerror(errno), f->tmp);
    return SHS_OK;
}

shs_status_t shs__afile_commit(shs__afile_t *f) {
    if (!f->fp) return shs_set_error(SHS_IO, "%s: not open", f->path);
    const int direct = f->tmp[0] == '\0';
    const char *name = direct ? f->path : f->tmp;
    shs_status_t st = SHS_OK;
    errno = 0;
    if (ferror(f->fp) || fflush(f->fp) != 0)
        st = shs_set_error(SHS_IO, "%s: write failed: %s", name, errno ? strerror(errno) : "stream error");
    else if (!direct && fsync(fileno(f->fp)) != 0)
        st = shs_set_error(SHS_IO, "%s: fsync failed: %s", name, strerror(errno));
    if (fclose(f->fp) != 0 && st == SHS_OK) st = shs_set_error(SHS_IO, "%s: close failed: %s", name, strerror(errno));
    f->fp = NULL;
    return direct ? st : rename_or_remove(f->tmp, f->path, st);
}

void shs__afile_discard(shs__afile_t *f) {
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
    if (f->tmp[0]) unlink(f->tmp);
}

shs_status_t shs__fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return shs_set_error(SHS_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* some file systems refuse fsync on directories; the rename is then as
     * durable as they make it */
    if (rc != 0 && err != EINVAL && err != ENOTSUP)
        return shs_set_error(SHS_IO, "%s: fsync of the directory failed: %s", dir, strerror(err));
    return SHS_OK;
}

void shs__dirname(const char *path, char *out, size_t outlen) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, outlen, ".");
    else if (slash == path) snprintf(out, outlen, "/");
    else snprintf(out, outlen, "%.*s", (int)(slash - path), path);
}

void shs__f32_to_le(float *x, size_t n) {
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    if (first == 1) return; /* little-endian host */
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        b = (b >> 24) | ((b >> 8) & 0xff00u) | ((b << 8) & 0xff0000u) | (b << 24);
        memcpy(&x[i], &b, 4);
    }
}
