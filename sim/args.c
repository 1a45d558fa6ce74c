/* args.c - the command line's shared parsing and error lines (see args.h). */
#include "args.h"
#include "commands.h"
#include "help_examples.h"
#include "shardsim/units.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sim_parse_int(const char *s, long min, long max, long *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || (errno && errno != ERANGE)) {
        snprintf(err, errlen, "'%s' is not an integer", s);
        return -1;
    }
    if (errno == ERANGE) {
        snprintf(err, errlen, "%s is out of range %ld..%ld", s, min, max);
        return -1;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%ld is out of range %ld..%ld", v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int sim_parse_float(const char *s, double min, double max, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v)) {
        snprintf(err, errlen, "'%s' is not a number", s);
        return -1;
    }
    if (v < min || v > max) {
        snprintf(err, errlen, "%g is out of range %g..%g", v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int sim_parse_wrap(const char *s, size_t *min_params, char *err, size_t errlen) {
    long n;
    char why[200];
    if (!strcmp(s, "block")) {
        *min_params = 0;
        return 0;
    }
    if (strncmp(s, "size:", 5)) {
        snprintf(err, errlen, "must be block or size:N, not %s", s);
        return -1;
    }
    if (sim_parse_int(s + 5, 1, 1L << 40, &n, why, sizeof why)) {
        snprintf(err, errlen, "size:N: %s", why);
        return -1;
    }
    *min_params = (size_t)n;
    return 0;
}

/* The length of the UTF-8 sequence at s that shows as a character (U+00A0
 * and above, well formed: no overlong form, no surrogate), else 0. */
static size_t utf8_char_len(const unsigned char *s) {
    unsigned c = s[0], cp, min;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf) n = 2, min = 0xa0; /* below U+00A0: C1 controls */
    else if (c >= 0xe0 && c <= 0xef) n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, min = 0x10000;
    else return 0;
    cp = c & (0x3fu >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : n;
}

/* msg with every byte that does not show as a character (controls, DEL,
 * invalid UTF-8) written as \xHH. Returns a malloc'd string (NULL: none). */
static char *escaped(const char *msg) {
    size_t n = strlen(msg);
    char *out = malloc(4 * n + 1), *o = out;
    if (!out) return NULL;
    const unsigned char *s = (const unsigned char *)msg;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] >= 0x20 && s[i] < 0x7f ? 1 : utf8_char_len(s + i);
        if (len == 0) {
            o += sprintf(o, "\\x%02x", s[i]);
            i++;
        } else {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        }
    }
    *o = 0;
    return out;
}

/* the start of the UTF-8 character that holds byte i of s (i moved back
 * over continuation bytes) */
static size_t char_start(const char *s, size_t i) {
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80) i--;
    return i;
}

/* Write msg (escaped) to f with each run of more than SIM_SHOWN_RUN bytes
 * without a space shortened to its start and end, and at most
 * SIM_SHOWN_MAX bytes in all. */
static void put_shown(FILE *f, const char *msg) {
    char *e = escaped(msg);
    const char *s = e ? e : "(no memory to show the message)";
    size_t n = strlen(s), shown = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && s[j] != ' ') j++;
        if (j == i) j++; /* a space */
        size_t run = j - i, head = run, tail = 0;
        if (run > SIM_SHOWN_RUN) {
            head = char_start(s, i + SIM_SHOWN_RUN * 5 / 8) - i;
            tail = j - char_start(s, j - SIM_SHOWN_RUN / 4);
        }
        if (shown + head + tail > SIM_SHOWN_MAX) {
            fprintf(f, "%s[... %zu bytes not shown]", i > 0 && s[i - 1] != ' ' ? " " : "", n - i);
            break;
        }
        fwrite(s + i, 1, head, f);
        if (tail) fprintf(f, "[... %zu bytes not shown ...]%.*s", run - head - tail, (int)tail, s + j - tail);
        shown += head + tail;
        i = j;
    }
    free(e);
}

static void vreport(const char *cmd, const char *kind, const char *fmt, va_list ap, const char *tail) {
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    fprintf(stderr, "shardsim%s%s: %s: ", cmd ? " " : "", cmd ? cmd : "", kind);
    put_shown(stderr, msg ? msg : fmt);
    fprintf(stderr, "%s\n", tail);
    free(msg);
}

void sim_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, "error", fmt, ap, "");
    va_end(ap);
}

void sim_note(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, "note", fmt, ap, "");
    va_end(ap);
}

int sim_usage_error(const char *cmd, const char *fmt, ...) {
    char tail[96];
    snprintf(tail, sizeof tail, " (see 'shardsim %s --help')", cmd);
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, "error", fmt, ap, tail);
    va_end(ap);
    return SIM_EXIT_USAGE;
}

int sim_bool_word(const char *s) {
    static const char *const words[] = {"true", "1", "yes", "false", "0", "no"};
    for (int k = 0; k < 6; k++)
        if (strcmp(s, words[k]) == 0) return k < 3;
    return -1;
}

sim_args_t sim_args_start(const char *cmd, int argc, char **argv) {
    sim_args_t a = {.cmd = cmd, .argc = argc, .argv = argv, .i = 0};
    return a;
}

/* "--x", "-o": an option; "-", "-1", "-.5": a value */
static int is_option(const char *s) {
    return s[0] == '-' && s[1] && s[1] != '.' && (s[1] < '0' || s[1] > '9');
}

int sim_args_next(sim_args_t *a) {
    if (++a->i >= a->argc) return -1;
    const char *arg = a->argv[a->i];
    a->eq = NULL;
    a->name[0] = 0;
    if (!is_option(arg)) return 0;
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    snprintf(a->name, sizeof a->name, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
    if (eq) a->eq = eq + 1;
    return 1;
}

int sim_args_value(sim_args_t *a, const char **val) {
    if (a->eq) {
        *val = a->eq;
        return -1;
    }
    if (a->i + 1 >= a->argc)
        return sim_usage_error(a->cmd, "option %s needs a value", a->name);
    const char *next = a->argv[a->i + 1];
    if (is_option(next))
        return sim_usage_error(a->cmd, "option %s needs a value, not the option '%s' (write %s=VALUE for a value "
                               "that starts with '-')", a->name, next, a->name);
    *val = next;
    a->i++;
    return -1;
}

int sim_args_bool(sim_args_t *a, int *val) {
    int v;
    if (a->eq) {
        if ((v = sim_bool_word(a->eq)) < 0)
            return sim_usage_error(a->cmd, "option %s takes true or false, or no value for true (got '%s')", a->name,
                                   a->eq);
        *val = v;
        return -1;
    }
    if (a->i + 1 < a->argc && (v = sim_bool_word(a->argv[a->i + 1])) >= 0) {
        *val = v;
        a->i++;
        return -1;
    }
    *val = 1;
    a->after_bare_bool = a->i + 1; /* what follows is the next argument */
    return -1;
}

int sim_args_unexpected(const sim_args_t *a) {
    const char *arg = a->argv[a->i];
    if (a->i == a->after_bare_bool) {
        return sim_usage_error(a->cmd, "unexpected argument '%s' after %s, which takes true or false, or no value "
                               "for true", arg, a->argv[a->i - 1]);
    }
    return sim_usage_error(a->cmd, "unexpected argument '%s'", arg);
}

int sim_args_unknown(const sim_args_t *a) {
    return sim_usage_error(a->cmd, "unknown option '%s'", a->name);
}

int sim_list_check(const char *cmd, const char *opt, const char *list) {
    size_t n = strlen(list);
    if (n == 0) return sim_usage_error(cmd, "%s: the list is empty", opt);
    if (list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,"))
        return sim_usage_error(cmd, "%s: empty entry in '%s' (a comma-separated list: A,B,...)", opt, list);
    return -1;
}

int sim_list_next(const char **p, char *item, size_t n) {
    if (!**p) return 0;
    const char *e = strchr(*p, ',');
    size_t len = e ? (size_t)(e - *p) : strlen(*p);
    snprintf(item, n, "%.*s", (int)len, *p);
    *p = e ? e + 1 : *p + len;
    return 1;
}

int sim_finish_output(const char *cmd, int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        sim_error(cmd, "cannot write the output: %s", errno ? strerror(errno) : "stream error");
        clearerr(stdout);
        if (rc == SIM_EXIT_OK) rc = SIM_EXIT_ERROR;
    }
    return rc;
}

/* ---- the option table ---- */

#define HELP_COLUMN 24 /* where the help text starts: 2 + the widest usual "NAME ARG" + 1 */

void sim_opts_help(FILE *f, const sim_command_t *c) {
    fputs(c->usage, f);
    for (int id = 0; id <= c->n; id++) {
        const sim_opt_t help_row = {"--help", "-h", SIM_OPT_BOOL, 0, 0, 0, 0, NULL, "this text"};
        const sim_opt_t *r = id < c->n ? &c->table[id] : &help_row;
        if (!r->name) continue;
        char left[96];
        const char *arg = r->type == SIM_OPT_BOOL ? (id < c->n ? "[true|false]" : NULL) : r->arg;
        snprintf(left, sizeof left, "%s%s%s%s%s", r->alias ? r->alias : "", r->alias ? ", " : "", r->name,
                 arg ? " " : "", arg ? arg : "");
        int width = fprintf(f, "  %s", left);
        if (width >= HELP_COLUMN - 1) { /* a long NAME ARG: its help starts on the next line */
            fputc('\n', f);
            width = 0;
        }
        const char *h = r->help;
        for (;;) {
            const char *nl = strchr(h, '\n');
            int len = nl ? (int)(nl - h) : (int)strlen(h);
            fprintf(f, "%*s%.*s", width < HELP_COLUMN ? HELP_COLUMN - width : 1, "", len, h);
            if (!nl) break;
            fputc('\n', f);
            width = 0;
            h = nl + 1;
        }
        const char *d = id < c->n && c->defaults ? c->defaults[id] : NULL;
        fprintf(f, "%s%s%s\n", d ? " (default " : "", d ? d : "", d ? ")" : "");
    }
    sim_help_examples(f, c->cmd);
}

/* Check val against row r into o's slot id. -1 to go on, else an exit code. */
static int opt_value(const char *cmd, const sim_opt_t *r, int id, const char *val, sim_opts_t *o) {
    char err[256];
    long iv;
    double fv;
    switch (r->type) {
    case SIM_OPT_INT:
        if (sim_parse_int(val, (long)r->lo, (long)r->hi, &iv, err, sizeof err))
            return sim_usage_error(cmd, "%s: %s", r->name, err);
        o->num[id] = (double)iv;
        break;
    case SIM_OPT_F32:
    case SIM_OPT_FLOAT:
        if (sim_parse_float(val, r->lo, r->hi, &fv, err, sizeof err) || (r->hi_open && fv >= r->hi)) {
            char e2[128];
            double any;
            /* a number out of a half-open range: that range's notation, whichever end it misses */
            if (r->hi_open && !sim_parse_float(val, -HUGE_VAL, HUGE_VAL, &any, e2, sizeof e2))
                return sim_usage_error(cmd, "%s: %s is out of range [%g, %g)", r->name, val, r->lo, r->hi);
            return sim_usage_error(cmd, "%s: %s", r->name, err);
        }
        if (r->type == SIM_OPT_F32 && fv != 0.0 && (float)fv == 0.0f)
            return sim_usage_error(cmd, "%s: %g is below the smallest f32 (about 1.4e-45)", r->name, fv);
        o->num[id] = fv;
        break;
    case SIM_OPT_SIZE:
        if (shs_parse_bytes(val, &o->bytes[id], err, sizeof err)) return sim_usage_error(cmd, "%s: %s", r->name, err);
        break;
    case SIM_OPT_STR:
    case SIM_OPT_BOOL:
        break;
    }
    o->str[id] = val;
    o->given[id] = 1;
    return -1;
}

int sim_opts_parse(const sim_command_t *c, int argc, char **argv, sim_opts_t *o) {
    memset(o, 0, sizeof *o);
    sim_args_t a = sim_args_start(c->cmd, argc, argv);
    int kind, rc;
    while ((kind = sim_args_next(&a)) >= 0) {
        if (kind == 0) {
            if (!c->each) return sim_args_unexpected(&a);
            if ((rc = c->each(c->ctx, &a, -1, o)) >= 0) return rc;
            continue;
        }
        if (strcmp(a.name, "-h") == 0 || strcmp(a.name, "--help") == 0) {
            sim_opts_help(stdout, c);
            return SIM_EXIT_OK;
        }
        int id = -1;
        for (int k = 0; k < c->n && id < 0; k++)
            if (c->table[k].name &&
                (strcmp(a.name, c->table[k].name) == 0 || (c->table[k].alias && strcmp(a.name, c->table[k].alias) == 0)))
                id = k;
        if (id < 0) return sim_args_unknown(&a);
        const sim_opt_t *r = &c->table[id];
        if (o->given[id] && !r->repeat) return sim_usage_error(c->cmd, "option %s is given twice: give it once", r->name);
        if (r->type == SIM_OPT_BOOL) {
            int v;
            if ((rc = sim_args_bool(&a, &v)) >= 0) return rc;
            o->given[id] = 1;
            o->num[id] = v;
        } else {
            const char *val;
            if ((rc = sim_args_value(&a, &val)) >= 0) return rc;
            if ((rc = opt_value(c->cmd, r, id, val, o)) >= 0) return rc;
        }
        if (r->repeat && c->each && (rc = c->each(c->ctx, &a, id, o)) >= 0) return rc;
    }
    return -1;
}
