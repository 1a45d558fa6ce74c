/* trace_util.c - helpers shared by the trace readers (see trace_util.h). */
#include "trace/trace_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "shardsim/features.h"
#include "shardsim/trace.h"


const char *shs__file_kind(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

shs_status_t shs__open_regular(const char *path, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return shs_set_error(SHS_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return shs_set_error(SHS_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return shs_set_error(SHS_IO, "%s: is %s, not a regular file", path, shs__file_kind((unsigned)st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return shs_set_error(SHS_IO, "%s: cannot open: %s", path, strerror(e));
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return SHS_OK;
}

shs_status_t shs__read_file(const char *path, char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    SHS_CHECK(shs__open_regular(path, &fd, &size));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return shs_set_error(SHS_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (size > SHS__TRACE_MAX_FILE) {
        fclose(f);
        return shs_set_error(SHS_IO, "%s: %lld bytes is larger than the %zu-byte limit for a trace file", path,
                             (long long)size, SHS__TRACE_MAX_FILE);
    }
    size_t n = (size_t)size;
    char *b = malloc(n + 1);
    if (!b) {
        fclose(f);
        return shs_set_error(SHS_HOST_OOM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
#ifdef MADV_HUGEPAGE
    /* a large file's buffer in huge pages where the kernel offers them on
     * request: far fewer page faults while reading it in (advice only) */
    if (n >= ((size_t)4 << 20)) {
        uintptr_t lo = ((uintptr_t)b + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)b + n) & ~(uintptr_t)4095;
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    size_t got = fread(b, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        free(b);
        return shs_set_error(SHS_IO, "%s: read error", path);
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return SHS_OK;
}

/* 1 + the digit value of '0'-'9', 'a'-'f', 'A'-'F'; 0 for every other byte. */
static const unsigned char hex_digit1[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
    ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
    ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16};

static int hexval(char c) { return (int)hex_digit1[(unsigned char)c] - 1; }

int shs__parse_u64(const char *s, size_t n, int hex_ok, uint64_t *out) {
    unsigned base = 10;
    if (hex_ok == 2) base = 16;
    if (hex_ok && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        n -= 2;
    }
    if (n == 0 || n > 40) return -1;
    uint64_t v = 0;
    if (n <= (base == 16 ? 16u : 19u)) { /* too few digits to overflow: no check per digit */
        for (size_t i = 0; i < n; i++) {
            int d = base == 16 ? hexval(s[i]) : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);
            if (d < 0) return -1;
            v = v * base + (uint64_t)d;
        }
        *out = v;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int d = base == 16 ? hexval(s[i]) : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);
        if (d < 0) return -1;
        if (v > (UINT64_MAX - (uint64_t)d) / base) return -1;
        v = v * base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

int shs__parse_i64(const char *s, size_t n, int64_t *out) {
    int neg = n > 0 && s[0] == '-';
    uint64_t u;
    if (shs__parse_u64(s + neg, n - (size_t)neg, 0, &u) != 0) return -1;
    if (u > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return 0;
}

/* Plain decimals "123" or "123.456" with at most 15 digits (the times the
 * text format writes) take Clinger's fast path: the digits as an integer m
 * < 2^53 and 10^k (k <= 22) are exact doubles, so m / 10^k is one correctly
 * rounded division, the same double strtod returns. Anything else goes
 * through strtod. */
static int fast_decimal(const char *s, size_t n, double *out) {
    static const double p10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15};
    uint64_t m = 0;
    size_t i = 0, digits = 0, frac = 0;
    int dot = 0;
    if (n == 0 || s[0] == '.') return -1;
    for (; i < n; i++) {
        if (s[i] >= '0' && s[i] <= '9') {
            m = m * 10 + (uint64_t)(s[i] - '0');
            digits++;
            frac += (size_t)dot;
        } else if (s[i] == '.' && !dot && i + 1 < n) {
            dot = 1;
        } else {
            return -1;
        }
        if (digits > 15) return -1;
    }
    *out = frac ? (double)m / p10[frac] : (double)m;
    return 0;
}

int shs__parse_double(const char *s, size_t n, double *out) {
    if (fast_decimal(s, n, out) == 0) return 0;
    char tmp[64];
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (*end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int shs__trace_time(double v, double unit_s, double *s) {
    if (!isfinite(v) || v < 0 || v > SHS_TRACE_MAX_TIME_S / unit_s) return -1;
    *s = v * unit_s;
    if (*s > SHS_TRACE_MAX_TIME_S) return -1; /* rounding at the bound */
    return 0;
}

/* Bit i set when p[i] is a blank (space, tab, CR), for i < n <= 64; bits from n on set (the
 * line ends there as at a blank). SSE2 (every x86-64) compares 16 bytes at
 * a time; elsewhere byte by byte. */
static uint64_t blank_bits(const char *p, size_t n) {
    uint64_t m = 0;
#ifdef __SSE2__
    char pad[64];
    if (n < 64) {
        memset(pad, ' ', sizeof pad);
        memcpy(pad, p, n);
        p = pad;
    }
    const __m128i sp = _mm_set1_epi8(' '), tab = _mm_set1_epi8('\t'), cr = _mm_set1_epi8('\r');
    for (int b = 0; b < 4; b++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * b));
        __m128i e = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, sp), _mm_cmpeq_epi8(x, tab)), _mm_cmpeq_epi8(x, cr));
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(e) << (16 * b);
    }
#else
    for (size_t i = 0; i < n; i++) m |= (uint64_t)(p[i] == ' ' || p[i] == '\t' || p[i] == '\r') << i;
    if (n < 64) m |= ~(uint64_t)0 << n;
#endif
    return m;
}

/* Tokens are found 64 bytes at a time from the bitmap of blanks: a token
 * starts where a non-blank follows a blank (or the line's start) and ends
 * at the next blank (or the line's end). */
int shs__tokens(const char *line, size_t len, shs__tok_t *toks, int max) {
    int k = 0, open = 0;  /* open: a token runs into the next block, from `from` */
    size_t from = 0;
    for (size_t base = 0; base < len; base += 64) {
        size_t n = len - base < 64 ? len - base : 64;
        uint64_t bl = blank_bits(line + base, n), in = ~bl, carry = (uint64_t)open;
        uint64_t starts = in & ~((in << 1) | carry), ends = bl & ((in << 1) | carry);
        for (;;) {
            if (!open) {
                if (!starts) break;
                from = base + (size_t)__builtin_ctzll(starts);
                starts &= starts - 1;
                open = 1;
            }
            if (!ends) break;
            size_t to = base + (size_t)__builtin_ctzll(ends);
            ends &= ends - 1;
            open = 0;
            if (k == max) return max + 1;
            toks[k++] = (shs__tok_t){line + from, to - from};
        }
    }
    if (open) {
        if (k == max) return max + 1;
        toks[k++] = (shs__tok_t){line + from, len - from};
    }
    return k;
}

char *shs__tok_copy(shs__tok_t t, char *buf, size_t cap) {
    size_t n = t.n < cap - 1 ? t.n : cap - 1;
    memcpy(buf, t.s, n);
    buf[n] = 0;
    return buf;
}

int shs__rank_from_name(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    long v = -1;
    for (const char *p = base; *p;) {
        if (*p >= '0' && *p <= '9') {
            long x = 0;
            while (*p >= '0' && *p <= '9') {
                if (x < 100000000) x = x * 10 + (*p - '0');
                p++;
            }
            v = x;
        } else {
            p++;
        }
    }
    return v > 65535 ? -1 : (int)v;
}
