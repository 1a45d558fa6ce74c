/* args.c - the command line's shared parsing and error lines (see args.h). */
#include "args.h"
#include "commands.h"

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

static void vreport(const char *cmd, const char *kind, const char *fmt, va_list ap, const char *tail) {
    fprintf(stderr, "shardsim%s%s: %s: ", cmd ? " " : "", cmd ? cmd : "", kind);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "%s\n", tail);
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
