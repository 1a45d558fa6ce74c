/* status.h - result codes and per-thread error detail for every shardsim call.
 *
 * What it is: one X-macro table that generates the status enum, the names and
 * the short messages (in the manner of libuv's UV_ERRNO_MAP), plus a
 * thread-local "last error" string with the detail of the most recent failure
 * on the calling thread. Since a simulated rank is a thread, that string is the
 * rank's last error (like ncclGetLastError()).
 * What it is not: a logging facility.
 */
#ifndef SHARDSIM_STATUS_H
#define SHARDSIM_STATUS_H

#include <stdio.h>

#define SHS_STATUS_MAP(X)                                                        \
    X(OK,           "success")                                                   \
    X(INVALID_ARG,  "invalid argument")                                          \
    X(OUT_OF_MEMORY,"out of device memory")                                      \
    X(HOST_OOM,     "out of host memory")                                        \
    X(MISMATCH,     "collective mismatch across ranks")                          \
    X(TIMEOUT,      "collective timed out waiting for ranks")                    \
    X(ABORTED,      "communicator aborted")                                      \
    X(IO,           "input/output error")                                        \
    X(PARSE,        "malformed input")                                           \
    X(NOT_EQUAL,    "results are not bit-identical")                             \
    X(UNSUPPORTED,  "unsupported operation")                                     \
    X(SYSTEM,       "system call failed")                                        \
    X(INTERNAL,     "internal error")

typedef enum {
#define SHS_STATUS_ENUM(name, msg) SHS_##name,
    SHS_STATUS_MAP(SHS_STATUS_ENUM)
#undef SHS_STATUS_ENUM
    SHS_STATUS_COUNT
} shs_status_t;

/* Short fixed message for a status, e.g. "collective timed out waiting for ranks". */
const char *shs_strerror(shs_status_t s);
/* Enum name without prefix, e.g. "TIMEOUT". */
const char *shs_status_name(shs_status_t s);

/* Detail of the last failure recorded on the calling thread (rank), e.g.
 * "rank 2: all_reduce seq 7 on comm 'world': timed out after 2.000 s waiting for ranks [3]".
 * Never NULL; "" when nothing failed yet. Valid until the next failing call on this thread. */
const char *shs_last_error(void);

/* Record a failure on the calling thread and return `s` (printf-style
 * detail; an argument may be shs_last_error() itself, to wrap it). */
shs_status_t shs_set_error(shs_status_t s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Replace the calling thread's last-error text (used to carry a rank's error to the main thread). */
void shs_set_last_error_text(const char *text);

/* Always-on assertion for programming errors (never compiled out): prints the
 * expression with file:line and aborts. Runtime failures return a status instead. */
#define SHS_ASSERT(cond)                                                             \
    do {                                                                             \
        if (!(cond)) shs__assert_fail(#cond, __FILE__, __LINE__);                    \
    } while (0)
_Noreturn void shs__assert_fail(const char *expr, const char *file, int line);

/* Propagate a failing status upward (NCCL's NCCLCHECK idiom). */
#define SHS_CHECK(call)                                                              \
    do {                                                                             \
        shs_status_t shs__s = (call);                                                \
        if (shs__s != SHS_OK) return shs__s;                                         \
    } while (0)

/* Same, but jump to a cleanup label with the status stored in `var`. */
#define SHS_CHECK_GOTO(call, var, label)                                             \
    do {                                                                             \
        (var) = (call);                                                              \
        if ((var) != SHS_OK) goto label;                                             \
    } while (0)

#endif
