/* trace_json_scan.h - a pull scanner over JSON text (RFC 8259) in a buffer:
 * objects and arrays are walked member by member, values the reader wants
 * are returned as spans of the buffer (decoded on request), every other
 * value is skipped, checked but never built. A reader of a large trace
 * (Kineto's millions of events) so keeps the file and what it takes from
 * it, not a tree of the whole document (jansson's DOM took 9x the file).
 * Errors name the input, its line and column. Strings' bytes are not
 * checked as UTF-8 (the readers compare them with ASCII names).
 * What it is not: a JSON writer, or a DOM (jansson is, for small files). */
#ifndef SHARDSIM_TRACE_JSON_SCAN_H
#define SHARDSIM_TRACE_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"

typedef enum { SHS__JS_NONE, SHS__JS_OBJECT, SHS__JS_ARRAY, SHS__JS_STRING, SHS__JS_NUMBER, SHS__JS_BOOL,
               SHS__JS_NULL } shs__js_kind_t;

/* A value's text: buf[at .. at + n), its kind; for a string the span is
 * inside the quotes and `esc` says whether it holds escapes. */
typedef struct {
    size_t at, n;
    shs__js_kind_t kind;
    int esc;
} shs__js_span_t;

#define SHS__JS_MAX_DEPTH 512

typedef struct {
    const char *b;
    size_t n, i;        /* buffer, length, position */
    const char *name;   /* for errors */
    int depth;          /* containers entered (shs__js_enter) and not left */
    int seen[SHS__JS_MAX_DEPTH + 1]; /* per entered container: items read so far */
} shs__js_t;

/* The scanner over b[0..n) (b[n] need not be NUL). */
void shs__js_init(shs__js_t *s, const char *name, const char *b, size_t n);
/* The kind of the value at the position (blanks skipped); SHS__JS_NONE
 * with the error set when none starts there. */
shs__js_kind_t shs__js_peek(shs__js_t *s);
/* Skip the value at the position, checking its syntax (nesting at most
 * 512 deep). Errors: SHS_PARSE "name:line:col: malformed JSON: ...". */
shs_status_t shs__js_skip(shs__js_t *s);
/* The value at the position as a span (an object or array: its whole
 * text, checked); the position moves past it. */
shs_status_t shs__js_value(shs__js_t *s, shs__js_span_t *v);
/* Enter the object (or array) at the position. Errors: not one. */
shs_status_t shs__js_enter(shs__js_t *s, shs__js_kind_t kind);
/* The next member of the object entered last: 1 with its key's span (the
 * position at its value, which the caller must read or skip), 0 at its
 * end (the position past '}'). -1 on error. */
int shs__js_member(shs__js_t *s, shs__js_span_t *key, shs_status_t *st);
/* The next element of the array entered last: 1 (position at it), 0 at
 * its end, -1 on error. */
int shs__js_element(shs__js_t *s, shs_status_t *st);
/* Whether a key's (or string's) span equals the C string (no escapes). */
int shs__js_is(const shs__js_t *s, const shs__js_span_t *v, const char *lit);
/* A string span decoded (escapes, \u sequences as UTF-8) into out[0..cap),
 * NUL-terminated; -1 when not a string or longer than cap - 1. */
int shs__js_str(const shs__js_t *s, const shs__js_span_t *v, char *out, size_t cap);
/* A number span's value (strtod over its text); -1 when not a number. */
int shs__js_num(const shs__js_t *s, const shs__js_span_t *v, double *out);
/* A number span as an integer: an integer literal, or a real with an
 * integral value up to 9e15 (as jansson readers took them); -1 otherwise. */
int shs__js_int(const shs__js_t *s, const shs__js_span_t *v, int64_t *out);
/* The 1-based line of offset `at`. */
long shs__js_line(const shs__js_t *s, size_t at);
/* SHS_PARSE "name:line:col: malformed JSON: what" at offset `at`. */
shs_status_t shs__js_error(const shs__js_t *s, size_t at, const char *what);

#endif
