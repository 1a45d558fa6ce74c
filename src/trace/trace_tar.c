/* trace_tar.c - the members of a tar archive in memory (see trace_tar.h).
 * Layout (POSIX.1-2001 ustar, pax extended headers; GNU tar's magic and
 * its 'L' long-name entries): 512-byte headers, each member's data padded
 * to a multiple of 512. Header fields used: name[100] at 0, size[12] at
 * 124 (octal, or GNU's base-256 when its first byte has the high bit),
 * chksum[8] at 148, typeflag at 156, magic[6] at 257, prefix[155] at 345
 * (ustar: the path is prefix "/" name). */
#include "trace/trace_tar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 512

/* An octal field (blank or NUL terminated, leading blanks); -1 malformed. */
static int octal(const unsigned char *f, size_t n, uint64_t *out) {
    if (f[0] & 0x80) { /* GNU base-256: big-endian, the flag bit cleared */
        uint64_t v = f[0] & 0x3f;
        for (size_t i = 1; i < n; i++) {
            if (v >> 55) return -1;
            v = v << 8 | f[i];
        }
        *out = v;
        return 0;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ') i++;
    uint64_t v = 0;
    int digits = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 60) return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    if (i < n && f[i] != ' ' && f[i] != 0) return -1;
    for (size_t j = i; !digits && j < n; j++) /* no digits: only an empty field (blanks, NULs) is 0 */
        if (f[j] != ' ' && f[j] != 0) return -1;
    *out = v;
    return 0;
}

static int checksum_ok(const unsigned char *h) {
    uint64_t want, sum = 0;
    if (octal(h + 148, 8, &want)) return 0;
    for (int i = 0; i < BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return sum == want;
}

int shs__is_tar(const char *buf, size_t len) {
    const unsigned char *h = (const unsigned char *)buf;
    return len >= BLOCK && memcmp(h + 257, "ustar", 5) == 0 && checksum_ok(h);
}

static int zero_block(const unsigned char *h) {
    for (int i = 0; i < BLOCK; i++)
        if (h[i]) return 0;
    return 1;
}

/* A NUL-terminated copy of a fixed field. */
static char *field(const unsigned char *f, size_t n) {
    size_t k = 0;
    while (k < n && f[k]) k++;
    char *s = malloc(k + 1);
    if (s) {
        memcpy(s, f, k);
        s[k] = 0;
    }
    return s;
}

/* The "path" record of a pax extended header ("%d path=%s\n" records). */
static char *pax_path(const char *d, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t len = 0, j = i;
        while (j < n && d[j] >= '0' && d[j] <= '9') len = len * 10 + (size_t)(d[j++] - '0');
        if (j >= n || d[j] != ' ' || len == 0 || len > n - i) return NULL;
        const char *kv = d + j + 1, *end = d + i + len - 1; /* the record ends in '\n' */
        if (end - kv > 5 && memcmp(kv, "path=", 5) == 0) {
            size_t m = (size_t)(end - kv - 5);
            char *s = malloc(m + 1);
            if (s) {
                memcpy(s, kv + 5, m);
                s[m] = 0;
            }
            return s;
        }
        i += len;
    }
    return NULL;
}

shs_status_t shs__tar_members(const char *name, const char *buf, size_t len, shs__tar_member_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    shs__tar_member_t *m = NULL;
    size_t cap = 0, k = 0, at = 0;
    char *next_name = NULL; /* from a pax 'x' or GNU 'L' entry, for the next member */
    shs_status_t st = SHS_OK;
    while (at + BLOCK <= len) {
        const unsigned char *h = (const unsigned char *)buf + at;
        if (zero_block(h)) break; /* the end of the archive */
        uint64_t size;
        if (!checksum_ok(h)) { st = shs_set_error(SHS_PARSE, "%s: tar header at byte %zu: bad checksum", name, at); break; }
        if (octal(h + 124, 12, &size) || size > len - at - BLOCK) {
            st = shs_set_error(SHS_PARSE, "%s: tar header at byte %zu: member size is no octal number or runs past the "
                               "archive's %zu bytes (truncated?)", name, at, len);
            break;
        }
        char type = (char)h[156];
        size_t data = at + BLOCK;
        at = data + (size_t)((size + BLOCK - 1) / BLOCK * BLOCK);
        if (type == 'x' || type == 'L') { /* the next member's name */
            free(next_name);
            next_name = type == 'x' ? pax_path(buf + data, (size_t)size) : field((const unsigned char *)buf + data, (size_t)size);
            continue;
        }
        if (type != '0' && type != 0 && type != '7') { /* not a regular file: directory, link, pax global, ... */
            free(next_name);
            next_name = NULL;
            continue;
        }
        char *path = next_name;
        next_name = NULL;
        if (!path) {
            char *nm = field(h, 100), *pre = memcmp(h + 257, "ustar\0", 6) == 0 ? field(h + 345, 155) : NULL;
            if (nm && pre && *pre && (path = malloc(strlen(pre) + strlen(nm) + 2)) != NULL)
                sprintf(path, "%s/%s", pre, nm);
            else if (nm) path = nm, nm = NULL;
            free(nm);
            free(pre);
        }
        if (!path) { st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", name); break; }
        if (k == cap) {
            cap = cap ? 2 * cap : 16;
            shs__tar_member_t *nm2 = realloc(m, cap * sizeof *nm2);
            if (!nm2) {
                free(path);
                st = shs_set_error(SHS_HOST_OOM, "%s: out of memory", name);
                break;
            }
            m = nm2;
        }
        m[k++] = (shs__tar_member_t){path, data, (size_t)size};
    }
    free(next_name);
    if (st != SHS_OK) {
        shs__tar_members_free(m, k);
        return st;
    }
    *out = m;
    *n = k;
    return SHS_OK;
}

void shs__tar_members_free(shs__tar_member_t *m, size_t n) {
    for (size_t i = 0; i < n; i++) free(m[i].name);
    free(m);
}
