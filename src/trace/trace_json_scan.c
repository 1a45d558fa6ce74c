/* trace_json_scan.c - a pull scanner over JSON text (see trace_json_scan.h),
 * the grammar of RFC 8259 section 2-7. */
#include "trace/trace_json_scan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_util.h"

#define MAX_DEPTH SHS__JS_MAX_DEPTH

void shs__js_init(shs__js_t *s, const char *name, const char *b, size_t n) {
    s->b = b;
    s->n = n;
    s->i = 0;
    s->name = name;
    s->depth = 0;
}

long shs__js_line(const shs__js_t *s, size_t at) {
    long line = 1;
    for (const char *p = s->b, *e = s->b + (at < s->n ? at : s->n); (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++)
        line++;
    return line;
}

shs_status_t shs__js_error(const shs__js_t *s, size_t at, const char *what) {
    if (at > s->n) at = s->n;
    size_t col = at;
    while (col > 0 && s->b[col - 1] != '\n') col--;
    return shs_set_error(SHS_PARSE, "%s:%ld:%zu: malformed JSON: %s", s->name, shs__js_line(s, at), at - col + 1, what);
}

static void blanks(shs__js_t *s) {
    while (s->i < s->n) {
        char c = s->b[s->i];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r') break;
        s->i++;
    }
}

shs__js_kind_t shs__js_peek(shs__js_t *s) {
    blanks(s);
    if (s->i >= s->n) return SHS__JS_NONE;
    switch (s->b[s->i]) {
    case '{': return SHS__JS_OBJECT;
    case '[': return SHS__JS_ARRAY;
    case '"': return SHS__JS_STRING;
    case 't': case 'f': return SHS__JS_BOOL;
    case 'n': return SHS__JS_NULL;
    default: return (s->b[s->i] == '-' || (s->b[s->i] >= '0' && s->b[s->i] <= '9')) ? SHS__JS_NUMBER : SHS__JS_NONE;
    }
}

/* 1 for the bytes a string's plain run stops at: '"', '\\' and controls. */
static const unsigned char stop[256] = {
    [0] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    ['"'] = 1, ['\\'] = 1};

static int hex4(const char *p) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The string at the position (at its '"'): span inside the quotes. */
static shs_status_t string(shs__js_t *s, shs__js_span_t *v) {
    size_t start = ++s->i;
    int esc = 0;
    for (;;) {
        while (s->i < s->n && !stop[(unsigned char)s->b[s->i]]) s->i++;
        if (s->i >= s->n) return shs__js_error(s, start - 1, "unterminated string");
        char c = s->b[s->i];
        if (c == '"') break;
        if (c != '\\') return shs__js_error(s, s->i, "control character in a string");
        esc = 1;
        if (s->i + 1 >= s->n) return shs__js_error(s, s->i, "unterminated string");
        char e = s->b[s->i + 1];
        if (e == 'u') {
            if (s->i + 6 > s->n || hex4(s->b + s->i + 2) < 0) return shs__js_error(s, s->i, "bad \\u escape");
            s->i += 6;
        } else if (strchr("\"\\/bfnrt", e) && e) {
            s->i += 2;
        } else {
            return shs__js_error(s, s->i, "bad escape in a string");
        }
    }
    *v = (shs__js_span_t){.at = start, .n = s->i - start, .kind = SHS__JS_STRING, .esc = esc};
    s->i++;
    return SHS_OK;
}

static shs_status_t number(shs__js_t *s, shs__js_span_t *v) {
    size_t start = s->i, i = s->i;
    const char *b = s->b;
#define DIGIT(k) ((k) < s->n && b[(k)] >= '0' && b[(k)] <= '9')
    if (i < s->n && b[i] == '-') i++;
    if (!DIGIT(i)) return shs__js_error(s, start, "bad number");
    if (b[i] == '0') i++;
    else while (DIGIT(i)) i++;
    if (i < s->n && b[i] == '.') {
        i++;
        if (!DIGIT(i)) return shs__js_error(s, start, "bad number");
        while (DIGIT(i)) i++;
    }
    if (i < s->n && (b[i] == 'e' || b[i] == 'E')) {
        i++;
        if (i < s->n && (b[i] == '+' || b[i] == '-')) i++;
        if (!DIGIT(i)) return shs__js_error(s, start, "bad number");
        while (DIGIT(i)) i++;
    }
#undef DIGIT
    *v = (shs__js_span_t){.at = start, .n = i - start, .kind = SHS__JS_NUMBER};
    s->i = i;
    return SHS_OK;
}

static shs_status_t word(shs__js_t *s, const char *w, shs__js_kind_t kind, shs__js_span_t *v) {
    size_t n = strlen(w);
    if (s->n - s->i < n || memcmp(s->b + s->i, w, n) != 0) return shs__js_error(s, s->i, "unexpected character");
    *v = (shs__js_span_t){.at = s->i, .n = n, .kind = kind};
    s->i += n;
    return SHS_OK;
}

static shs_status_t skip_at(shs__js_t *s, int depth);

/* The members (or elements) of the object (array) whose opener is at the position. */
static shs_status_t skip_container(shs__js_t *s, int depth) {
    int obj = s->b[s->i] == '{';
    char close = obj ? '}' : ']';
    if (depth >= MAX_DEPTH) return shs__js_error(s, s->i, "nested more than 512 deep");
    s->i++;
    blanks(s);
    if (s->i < s->n && s->b[s->i] == close) {
        s->i++;
        return SHS_OK;
    }
    for (;;) {
        if (obj) {
            shs__js_span_t k;
            blanks(s);
            if (s->i >= s->n || s->b[s->i] != '"') return shs__js_error(s, s->i, "want a member's key");
            SHS_CHECK(string(s, &k));
            blanks(s);
            if (s->i >= s->n || s->b[s->i] != ':') return shs__js_error(s, s->i, "want ':' after a key");
            s->i++;
        }
        SHS_CHECK(skip_at(s, depth + 1));
        blanks(s);
        if (s->i < s->n && s->b[s->i] == ',') { s->i++; continue; }
        if (s->i < s->n && s->b[s->i] == close) { s->i++; return SHS_OK; }
        return shs__js_error(s, s->i, obj ? "want ',' or '}'" : "want ',' or ']'");
    }
}

static shs_status_t skip_at(shs__js_t *s, int depth) {
    shs__js_span_t v;
    switch (shs__js_peek(s)) {
    case SHS__JS_OBJECT: case SHS__JS_ARRAY: return skip_container(s, depth);
    case SHS__JS_STRING: return string(s, &v);
    case SHS__JS_NUMBER: return number(s, &v);
    case SHS__JS_BOOL: return s->b[s->i] == 't' ? word(s, "true", SHS__JS_BOOL, &v) : word(s, "false", SHS__JS_BOOL, &v);
    case SHS__JS_NULL: return word(s, "null", SHS__JS_NULL, &v);
    default: return shs__js_error(s, s->i, s->i >= s->n ? "unexpected end of the input" : "want a value");
    }
}

shs_status_t shs__js_skip(shs__js_t *s) { return skip_at(s, s->depth); }

shs_status_t shs__js_value(shs__js_t *s, shs__js_span_t *v) {
    shs__js_kind_t k = shs__js_peek(s);
    if (k == SHS__JS_STRING) return string(s, v);
    if (k == SHS__JS_NUMBER) return number(s, v);
    size_t at = s->i;
    SHS_CHECK(skip_at(s, s->depth));
    *v = (shs__js_span_t){.at = at, .n = s->i - at, .kind = k};
    return SHS_OK;
}

shs_status_t shs__js_enter(shs__js_t *s, shs__js_kind_t kind) {
    if (shs__js_peek(s) != kind)
        return shs__js_error(s, s->i, kind == SHS__JS_OBJECT ? "want an object" : "want an array");
    if (s->depth >= MAX_DEPTH) return shs__js_error(s, s->i, "nested more than 512 deep");
    s->i++;
    s->seen[++s->depth] = 0;
    return SHS_OK;
}

/* Past a ',' (or nothing, first) to the next item, or past `close`: 1 an item, 0 the end. */
static int next_item(shs__js_t *s, char close, shs_status_t *st) {
    *st = SHS_OK;
    blanks(s);
    if (s->i < s->n && s->b[s->i] == close) {
        s->i++;
        s->depth--;
        return 0;
    }
    if (s->seen[s->depth]++) {
        if (s->i >= s->n || s->b[s->i] != ',') {
            *st = shs__js_error(s, s->i, close == '}' ? "want ',' or '}'" : "want ',' or ']'");
            return -1;
        }
        s->i++;
    }
    return 1;
}

int shs__js_member(shs__js_t *s, shs__js_span_t *key, shs_status_t *st) {
    int k = next_item(s, '}', st);
    if (k <= 0) return k;
    blanks(s);
    if (s->i >= s->n || s->b[s->i] != '"') {
        *st = shs__js_error(s, s->i, "want a member's key");
        return -1;
    }
    if ((*st = string(s, key)) != SHS_OK) return -1;
    blanks(s);
    if (s->i >= s->n || s->b[s->i] != ':') {
        *st = shs__js_error(s, s->i, "want ':' after a key");
        return -1;
    }
    s->i++;
    return 1;
}

int shs__js_element(shs__js_t *s, shs_status_t *st) { return next_item(s, ']', st); }

int shs__js_is(const shs__js_t *s, const shs__js_span_t *v, const char *lit) {
    size_t n = strlen(lit);
    return v->kind == SHS__JS_STRING && !v->esc && v->n == n && memcmp(s->b + v->at, lit, n) == 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int shs__js_str(const shs__js_t *s, const shs__js_span_t *v, char *out, size_t cap) {
    if (v->kind != SHS__JS_STRING || cap == 0) return -1;
    const char *p = s->b + v->at, *e = p + v->n;
    size_t k = 0;
    while (p < e) {
        char tmp[4];
        size_t m = 1;
        if (*p != '\\') {
            tmp[0] = *p++;
        } else {
            char c = p[1];
            if (c != 'u') {
                tmp[0] = c == 'b' ? '\b' : c == 'f' ? '\f' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : c;
                p += 2;
            } else { /* checked by string(): four hex digits follow */
                unsigned cp = (unsigned)hex4(p + 2);
                p += 6;
                if (cp >= 0xd800 && cp < 0xdc00 && e - p >= 6 && p[0] == '\\' && p[1] == 'u') { /* a surrogate pair */
                    int lo = hex4(p + 2);
                    if (lo >= 0xdc00 && lo < 0xe000) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
                        p += 6;
                    }
                }
                m = put_utf8(tmp, cp);
            }
        }
        if (k + m >= cap) return -1;
        memcpy(out + k, tmp, m);
        k += m;
    }
    out[k] = 0;
    return 0;
}

int shs__js_num(const shs__js_t *s, const shs__js_span_t *v, double *out) {
    if (v->kind != SHS__JS_NUMBER) return -1;
    if (shs__parse_double(s->b + v->at, v->n, out) == 0) return 0;
    char tmp[400];
    if (v->n >= sizeof tmp) return -1;
    memcpy(tmp, s->b + v->at, v->n);
    tmp[v->n] = 0;
    errno = 0;
    double d = strtod(tmp, NULL);
    if (errno == ERANGE && fabs(d) > 1) d = d > 0 ? INFINITY : -INFINITY; /* 1e999: out of any range checked later */
    *out = d;
    return 0;
}

int shs__js_int(const shs__js_t *s, const shs__js_span_t *v, int64_t *out) {
    if (v->kind != SHS__JS_NUMBER) return -1;
    const char *p = s->b + v->at;
    if (!memchr(p, '.', v->n) && !memchr(p, 'e', v->n) && !memchr(p, 'E', v->n))
        return shs__parse_i64(p, v->n, out);
    double d;
    if (shs__js_num(s, v, &d) || !isfinite(d) || d != floor(d) || fabs(d) > 9e15) return -1;
    *out = (int64_t)d;
    return 0;
}
