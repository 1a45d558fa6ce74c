/* args.c - strict value parsing for the command line (see args.h). */
#include "args.h"
#include "commands.h"

#include <errno.h>
#include <math.h>
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

int sim_usage_error(const char *cmd, const char *msg, const char *arg) {
    fprintf(stderr, "shardsim: error: %s%s%s (see 'shardsim %s --help')\n", msg, arg ? " " : "", arg ? arg : "", cmd);
    return SIM_EXIT_USAGE;
}

int sim_finish_output(int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "shardsim: error: cannot write the output: %s\n", errno ? strerror(errno) : "stream error");
        clearerr(stdout);
        if (rc == SIM_EXIT_OK) rc = SIM_EXIT_ERROR;
    }
    return rc;
}
