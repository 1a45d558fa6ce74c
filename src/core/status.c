/* status.c - status names/messages and the thread-local last-error string. */
#include "shardsim/status.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *shs_strerror(shs_status_t s) {
    switch (s) {
#define SHS_STATUS_MSG(name, msg) case SHS_##name: return msg;
        SHS_STATUS_MAP(SHS_STATUS_MSG)
#undef SHS_STATUS_MSG
    default: return "unknown status";
    }
}

const char *shs_status_name(shs_status_t s) {
    switch (s) {
#define SHS_STATUS_NAME(name, msg) case SHS_##name: return #name;
        SHS_STATUS_MAP(SHS_STATUS_NAME)
#undef SHS_STATUS_NAME
    default: return "UNKNOWN";
    }
}

const char *shs_last_error(void) { return last_error; }

/* Both format into a copy first: callers wrap the previous error by passing
 * shs_last_error() itself as an argument, and vsnprintf onto its own source
 * is undefined. */
shs_status_t shs_set_error(shs_status_t s, const char *fmt, ...) {
    char buf[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(last_error, buf, sizeof buf);
    return s;
}

void shs_set_last_error_text(const char *text) {
    char buf[sizeof last_error];
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    memcpy(last_error, buf, sizeof buf);
}

_Noreturn void shs__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "shardsim: assertion failed: %s (%s:%d)\n", expr, file, line);
    fflush(stderr);
    abort();
}
