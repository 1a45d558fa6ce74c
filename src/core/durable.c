/* durable.c - crash-safe file writes: where an output goes (one resolution
 * of the path for every writer), then temp file, fsync, rename, fsync dir;
 * or, for a device or FIFO, the bytes written in place. */
#include "shardsim/durable.h"
#include "core/le_bytes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardsim/checkpoint.h"

/* Symbolic links followed before a chain counts as a loop (Linux's limit). */
enum { MAX_LINK_HOPS = 40 };

/* "PATH" or, when a link chain led elsewhere, "PATH (-> TARGET)". */
static const char *shown(const char *path, const char *target, char *buf, size_t n) {
    if (!strcmp(path, target)) return path;
    snprintf(buf, n, "%s (-> %s)", path, target);
    return buf;
}

/* The path the link at `link` points to, relative targets taken from the
 * link's own directory. Errors: SHS_IO naming the link. */
static shs_status_t read_link(const char *link, char *out, size_t outlen) {
    char target[4096], dir[4096];
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return shs_set_error(SHS_IO, "%s: cannot read the symbolic link: %s", link, strerror(errno));
    if (n == 0) return shs_set_error(SHS_IO, "%s: symbolic link with an empty target", link);
    target[n] = '\0';
    shs_dirname(link, dir, sizeof dir);
    int len = target[0] == '/' || !strcmp(dir, ".") ? snprintf(out, outlen, "%s", target)
              : !strcmp(dir, "/")                   ? snprintf(out, outlen, "/%s", target)
                                                    : snprintf(out, outlen, "%s/%s", dir, target);
    if (len < 0 || (size_t)len >= outlen) return shs_set_error(SHS_IO, "%s: symbolic link target too long", link);
    return SHS_OK;
}

static const char *refused_kind(mode_t m) {
    if (S_ISDIR(m)) return "is a directory";
    if (S_ISBLK(m)) return "is a block device";
    if (S_ISSOCK(m)) return "is a socket";
    return "is not a regular file, character device or FIFO";
}

/* The name at the end of path's chain of symbolic links: the file to
 * replace, or a dangling link's missing target. Errors: SHS_IO. */
static shs_status_t link_chain_end(const char *path, char *cur, size_t n) {
    char next[4096], b[8300];
    snprintf(cur, n, "%s", path);
    for (int hops = 0;; hops++) {
        struct stat sb;
        if (lstat(cur, &sb) != 0) {
            if (errno == ENOENT) return SHS_OK;
            return shs_set_error(SHS_IO, "%s: cannot examine: %s", shown(path, cur, b, sizeof b), strerror(errno));
        }
        if (!S_ISLNK(sb.st_mode)) return SHS_OK;
        if (hops == MAX_LINK_HOPS)
            return shs_set_error(SHS_IO, "%s: more than %d symbolic links in a row (a loop?)", path, MAX_LINK_HOPS);
        SHS_CHECK(read_link(cur, next, sizeof next));
        snprintf(cur, n, "%s", next);
    }
}

shs_status_t shs_out_resolve(const char *path, shs_out_target_t *to) {
    char cur[4096], b[8300];
    to->path[0] = to->tmp[0] = '\0';
    to->in_place = to->fifo = 0;
    to->keep_mode = -1;
    to->replaced = 0;
    if (!path || !*path) return shs_set_error(SHS_IO, "empty output path");
    if (strlen(path) >= sizeof to->path) return shs_set_error(SHS_IO, "%s: path too long", path);
    /* what the kernel reaches through any links decides; the chain's text is
     * read only to find the name to replace (a magic link such as
     * /dev/stdout -> /proc/self/fd/1 -> pipe:[N] is never taken as a name) */
    struct stat sb, lsb;
    int exists = stat(path, &sb) == 0;
    if (!exists && errno == ELOOP)
        return shs_set_error(SHS_IO, "%s: more than %d symbolic links in a row (a loop?)", path, MAX_LINK_HOPS);
    if (!exists && errno != ENOENT) return shs_set_error(SHS_IO, "%s: cannot examine: %s", path, strerror(errno));
    if (exists && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) {
        snprintf(to->path, sizeof to->path, "%s", path); /* opened as given: the kernel follows the links */
        to->in_place = 1;
        to->fifo = S_ISFIFO(sb.st_mode);
        return SHS_OK;
    }
    if (exists && !S_ISREG(sb.st_mode))
        return shs_set_error(SHS_IO, "%s: %s; refusing to write over it", path, refused_kind(sb.st_mode));
    SHS_CHECK(link_chain_end(path, cur, sizeof cur));
    if (exists && (lstat(cur, &lsb) != 0 || lsb.st_dev != sb.st_dev || lsb.st_ino != sb.st_ino))
        return shs_set_error(SHS_IO, "%s: cannot find the file its links lead to", shown(path, cur, b, sizeof b));
    if (snprintf(to->tmp, sizeof to->tmp, "%s.tmp", cur) >= (int)sizeof to->tmp) {
        to->tmp[0] = '\0';
        return shs_set_error(SHS_IO, "%s: path too long", shown(path, cur, b, sizeof b));
    }
    snprintf(to->path, sizeof to->path, "%s", cur);
    char dir[4096];
    shs_dirname(cur, dir, sizeof dir);
    if (access(dir, W_OK | X_OK) != 0) {
        int err = errno;
        to->path[0] = to->tmp[0] = '\0';
        return shs_set_error(SHS_IO, "%s: cannot create: %s (directory %s)", shown(path, cur, b, sizeof b),
                             strerror(err), dir);
    }
    if (exists) to->keep_mode = (int)(sb.st_mode & 07777);
    return SHS_OK;
}

static int same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether the existing file os (an output's target) is input `in` or, for
 * a directory input, one of the files in it a directory load reads (names
 * not starting with '.'); the input's file named into hit. */
static int is_input(const struct stat *os, const char *in, char *hit, size_t n) {
    struct stat is;
    if (stat(in, &is) != 0) return 0;
    snprintf(hit, n, "%s", in);
    if (same_file(os, &is)) return 1;
    if (!S_ISDIR(is.st_mode)) return 0;
    DIR *d = opendir(in);
    if (!d) return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d))) {
        struct stat es;
        if (de->d_name[0] == '.') continue;
        snprintf(hit, n, "%s/%s", in, de->d_name);
        found = stat(hit, &es) == 0 && S_ISREG(es.st_mode) && same_file(os, &es);
    }
    closedir(d);
    return found;
}

/* The absolute, link-free spelling of path, which need not exist yet: its
 * directory resolved (realpath) and its last name appended, so that "x",
 * "./x" and "/abs/x" compare equal. 0 ok, -1 when the directory cannot be
 * resolved (the caller falls back to the path as given). */
static int canon_path(const char *path, char *out, size_t n) {
    char dir[PATH_MAX], rd[PATH_MAX];
    if (realpath(path, rd)) return snprintf(out, n, "%s", rd) < (int)n ? 0 : -1;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!realpath(dir, rd)) return -1;
    return snprintf(out, n, "%s/%s", strcmp(rd, "/") ? rd : "", base) < (int)n ? 0 : -1;
}

shs_status_t shs_out_check(const shs_out_named_t *outs, size_t nouts, const char *const *inputs, size_t ninputs) {
    typedef struct {
        shs_out_target_t to;
        struct stat sb;
        int exists;
        char canon[PATH_MAX]; /* canon_path of to.path, or to.path */
    } resolved_t;
    resolved_t *r = calloc(nouts ? nouts : 1, sizeof *r);
    if (!r) return shs_set_error(SHS_HOST_OOM, "out of memory checking %zu output paths", nouts);
    shs_status_t st = SHS_OK;
    char hit[8192], why[1024];
    for (size_t i = 0; i < nouts && st == SHS_OK; i++) {
        const shs_out_named_t *o = &outs[i];
        if (shs_out_resolve(o->path, &r[i].to) != SHS_OK) {
            snprintf(why, sizeof why, "%s", shs_last_error());
            st = shs_set_error(SHS_IO, "%s: %s", o->option, why);
            break;
        }
        r[i].exists = stat(r[i].to.path, &r[i].sb) == 0;
        if (canon_path(r[i].to.path, r[i].canon, sizeof r[i].canon) != 0)
            snprintf(r[i].canon, sizeof r[i].canon, "%s", r[i].to.path);
        for (size_t k = 0; k < ninputs && st == SHS_OK && !r[i].exists; k++) {
            /* a new file inside an input directory would be read as one of its files next time */
            char in[PATH_MAX];
            struct stat ib;
            size_t L;
            if (stat(inputs[k], &ib) != 0 || !S_ISDIR(ib.st_mode) || !realpath(inputs[k], in)) continue;
            L = strlen(in);
            if (strncmp(r[i].canon, in, L) == 0 && r[i].canon[L] == '/' && !strchr(r[i].canon + L + 1, '/'))
                st = shs_set_error(SHS_INVALID_ARG, "%s %s: is a new file in the input directory %s, which would then "
                                   "fail to read as one trace; write it elsewhere", o->option, o->path, inputs[k]);
        }
        for (size_t k = 0; k < ninputs && r[i].exists; k++)
            if (is_input(&r[i].sb, inputs[k], hit, sizeof hit)) {
                st = strcmp(hit, inputs[k]) == 0
                         ? shs_set_error(SHS_INVALID_ARG, "%s %s: is the input %s (the same file); refusing to overwrite it",
                                         o->option, o->path, inputs[k])
                         : shs_set_error(SHS_INVALID_ARG, "%s %s: is %s, a file of the input directory %s; refusing to "
                                         "overwrite it", o->option, o->path, hit, inputs[k]);
                break;
            }
        for (size_t j = 0; j < i && st == SHS_OK; j++) {
            int chr = r[i].to.in_place && !r[i].to.fifo; /* /dev/null, /dev/stdout: written in place, nothing replaced */
            int same = !strcmp(r[i].canon, r[j].canon) || (r[i].exists && r[j].exists && same_file(&r[i].sb, &r[j].sb));
            if (same && !chr)
                st = shs_set_error(SHS_INVALID_ARG, "%s %s and %s %s name one file (%s): one would replace the other; "
                                   "give each output its own path", outs[j].option, outs[j].path, o->option, o->path,
                                   r[i].to.path);
        }
    }
    free(r);
    return st;
}

shs_status_t shs_out_prefix_check(const char *option, const char *prefix) {
    if (!prefix || !*prefix) return shs_set_error(SHS_IO, "%s: empty prefix", option);
    struct stat sb;
    if (prefix[strlen(prefix) - 1] == '/')
        return shs_set_error(SHS_IO, "%s %s: ends in '/': a prefix P names files P.<n>..., not a directory (give "
                             "e.g. %sNAME)", option, prefix, prefix);
    if (stat(prefix, &sb) == 0 && !S_ISREG(sb.st_mode))
        return shs_set_error(SHS_IO, "%s %s: %s; a prefix P names new files P.<n>... beside it, so P must be a "
                             "file name, not %s", option, prefix,
                             S_ISDIR(sb.st_mode) ? "is a directory" : "is a device, FIFO or socket",
                             S_ISDIR(sb.st_mode) ? "a directory" : "a device or pipe");
    return SHS_OK;
}

/* The file the bytes go to now: the temp file, or the device. */
static const char *written(const shs_out_target_t *to) { return to->in_place ? to->path : to->tmp; }

/* Resolve path and open what is written: path.tmp (created or truncated,
 * never through a link), or the device or FIFO itself. */
static shs_status_t out_open(shs_out_target_t *to, const char *path, int *fd) {
    *fd = -1;
    SHS_CHECK(shs_out_resolve(path, to));
    if (to->in_place) {
        /* a FIFO opens without waiting: one with no reader is an error, not a hang */
        int fifo = to->fifo;
        *fd = open(to->path, O_WRONLY | O_CLOEXEC | O_NOCTTY | (fifo ? O_NONBLOCK : 0));
        if (*fd < 0 && fifo && errno == ENXIO)
            return shs_set_error(SHS_IO, "%s: a named pipe (FIFO) with no reader: start its reader first", to->path);
        if (*fd < 0) return shs_set_error(SHS_IO, "%s: cannot open: %s", to->path, strerror(errno));
        if (fifo && fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK) != 0) {
            close(*fd);
            *fd = -1;
            return shs_set_error(SHS_IO, "%s: cannot make the pipe blocking: %s", to->path, strerror(errno));
        }
        struct stat sb;
        if (fstat(*fd, &sb) != 0 || !(S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) {
            close(*fd);
            *fd = -1;
            return shs_set_error(SHS_IO, "%s: changed while it was being opened", to->path);
        }
        return SHS_OK;
    }
    *fd = open(to->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (*fd < 0) {
        shs_status_t st = shs_set_error(SHS_IO, "%s: cannot create: %s (writing %s)", to->path, strerror(errno), to->tmp);
        to->tmp[0] = '\0'; /* not ours: never removed */
        return st;
    }
    if (to->keep_mode >= 0) (void)fchmod(*fd, (mode_t)to->keep_mode); /* best effort: the file's own permissions */
    return SHS_OK;
}

/* The last step of a commit: the written temp file takes the name and the
 * directory is synced, or, when an earlier step failed (st) or the rename
 * does, the temp file is removed. A device or FIFO has nothing to rename. */
static shs_status_t out_finish(shs_out_target_t *to, shs_status_t st) {
    if (to->in_place) return st;
    if (st == SHS_OK && rename(to->tmp, to->path) != 0)
        st = shs_set_error(SHS_IO, "%s: cannot rename to %s: %s", to->tmp, to->path, strerror(errno));
    if (st != SHS_OK) {
        unlink(to->tmp);
        return st;
    }
    to->replaced = 1;
    char dir[4096];
    shs_dirname(to->path, dir, sizeof dir);
    return shs_fsync_dir(dir);
}

shs_status_t shs_dfile_open(shs_dfile_t *f, const char *path) {
    f->crc = 0;
    f->bytes = 0;
    return out_open(&f->to, path, &f->fd);
}

shs_status_t shs_dfile_write(shs_dfile_t *f, const void *data, size_t n) {
    const unsigned char *p = data;
    f->crc = shs_crc32(f->crc, p, n);
    f->bytes += n;
    while (n > 0) {
        ssize_t k = write(f->fd, p, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return shs_set_error(SHS_IO, "%s: write failed: %s", written(&f->to), k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (size_t)k;
    }
    return SHS_OK;
}

shs_status_t shs_dfile_commit(shs_dfile_t *f) {
    shs_status_t st = SHS_OK;
    const char *name = written(&f->to);
    if (!f->to.in_place && fsync(f->fd) != 0) st = shs_set_error(SHS_IO, "%s: fsync failed: %s", name, strerror(errno));
    if (close(f->fd) != 0 && st == SHS_OK) st = shs_set_error(SHS_IO, "%s: close failed: %s", name, strerror(errno));
    f->fd = -1;
    return out_finish(&f->to, st);
}

void shs_dfile_discard(shs_dfile_t *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (!f->to.in_place && f->to.tmp[0]) unlink(f->to.tmp);
}

/* The stream's writes go through here so the errno of a failed one is kept
 * (stdio forgets it; a later flush may have nothing left to fail with). */
static ssize_t afile_write(void *cookie, const char *buf, size_t size) {
    shs_afile_t *f = cookie;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(f->fd, buf + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!f->write_errno) f->write_errno = n < 0 ? errno : EIO;
            return done ? (ssize_t)done : 0; /* fopencookie: 0 reports the error */
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int afile_close(void *cookie) {
    shs_afile_t *f = cookie;
    return close(f->fd);
}

shs_status_t shs_afile_open(shs_afile_t *f, const char *path, const char *mode) {
    f->fp = NULL;
    f->write_errno = 0;
    int fd;
    SHS_CHECK(out_open(&f->to, path, &fd));
    f->fd = fd;
    cookie_io_functions_t io = {.read = NULL, .write = afile_write, .seek = NULL, .close = afile_close};
    f->fp = fopencookie(f, mode, io);
    if (!f->fp) {
        shs_status_t st = shs_set_error(SHS_IO, "%s: cannot open a stream: %s", written(&f->to), strerror(errno));
        close(fd);
        return out_finish(&f->to, st);
    }
    return SHS_OK;
}

/* Why a stream's earlier write failed, or NULL when none did: the errno
 * its write kept (afile_write), else `known` (the writer's errno text,
 * NULL when it has none). */
static const char *stream_error(shs_afile_t *f, const char *known) {
    if (!ferror(f->fp)) return NULL;
    if (f->write_errno) return strerror(f->write_errno);
    return known ? known : "stream error";
}

shs_status_t shs_afile_fail(shs_afile_t *f, const char *why) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", why ? why : "stream error"); /* why may be the last error's own text */
    const char *stream = f->fp ? stream_error(f, buf) : NULL;
    if (stream && stream != buf) snprintf(buf, sizeof buf, "%s", stream);
    char name[4096];
    snprintf(name, sizeof name, "%s", written(&f->to));
    shs_afile_discard(f);
    return shs_set_error(SHS_IO, "%s: write failed: %s", name, buf);
}

shs_status_t shs_afile_commit(shs_afile_t *f) {
    if (!f->fp) return shs_set_error(SHS_IO, "%s: not open", f->to.path);
    const char *name = written(&f->to);
    shs_status_t st = SHS_OK;
    const char *why = stream_error(f, NULL);
    errno = 0;
    if (why || fflush(f->fp) != 0)
        st = shs_set_error(SHS_IO, "%s: write failed: %s", name,
                           why ? why : f->write_errno ? strerror(f->write_errno) : errno ? strerror(errno) : "stream error");
    else if (!f->to.in_place && fsync(f->fd) != 0)
        st = shs_set_error(SHS_IO, "%s: fsync failed: %s", name, strerror(errno));
    if (fclose(f->fp) != 0 && st == SHS_OK) st = shs_set_error(SHS_IO, "%s: close failed: %s", name, strerror(errno));
    f->fp = NULL;
    return out_finish(&f->to, st);
}

void shs_afile_discard(shs_afile_t *f) {
    if (!f->fp) return;
    fclose(f->fp);
    f->fp = NULL;
    if (!f->to.in_place) unlink(f->to.tmp);
}

shs_status_t shs_fsync_dir(const char *dir) {
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

void shs_dirname(const char *path, char *out, size_t outlen) {
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
