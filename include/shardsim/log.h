/* log.h - levelled logging switched by the environment, in the manner of
 * NCCL's NCCL_DEBUG / NCCL_DEBUG_SUBSYS.
 *
 * What it is: SHS_DEBUG=WARN|INFO|TRACE (each level includes the ones
 * before it; unset or NONE: off) and SHS_DEBUG_SUBSYS=comm,strategy,...
 * (the subsystems whose INFO and TRACE lines print; ALL, the default, is
 * every one; a leading ^ prints all but those listed), read once, at the
 * first SHS_LOG. Each line goes to stderr (never stdout), as
 *   [rank 2] shardsim TRACE comm src/comm/comm.c:301: all_reduce seq 7 ...
 * with the calling thread's rank ("-" before shs_log_set_rank).
 * An SHS_LOG that is off costs one load and one branch.
 * What it is not: error reporting (status.h: shs_set_error, shs_last_error).
 */
#ifndef SHARDSIM_LOG_H
#define SHARDSIM_LOG_H

#include <stdatomic.h>
#include <stdio.h>

#include "shardsim/status.h"

/* Levels, one row each: enum suffix, name (as SHS_DEBUG takes it). */
#define SHS_LOG_LEVEL_MAP(X) X(NONE, "NONE") X(WARN, "WARN") X(INFO, "INFO") X(TRACE, "TRACE")
typedef enum {
#define SHS_LOG_LEVEL_ENUM(id, name) SHS_LOG_##id,
    SHS_LOG_LEVEL_MAP(SHS_LOG_LEVEL_ENUM)
#undef SHS_LOG_LEVEL_ENUM
    SHS_LOG_NUM_LEVELS
} shs_log_level_t;

/* Subsystems, one row each: enum suffix, name (as SHS_DEBUG_SUBSYS takes it). */
#define SHS_LOG_SUBSYS_MAP(X)                                                    \
    X(COMM, "comm")             /* communicators and each collective call */     \
    X(STRATEGY, "strategy")     /* unit gathers and releases */                  \
    X(TRACE, "trace")           /* trace recording, import, replay */            \
    X(CHECKPOINT, "checkpoint") /* checkpoint save and load */                   \
    X(DEVICE, "device")         /* device memory */                              \
    X(TRAIN, "train")           /* the step loop */
typedef enum {
#define SHS_LOG_SUBSYS_ENUM(id, name) SHS_LOGSYS_##id##_BIT,
    SHS_LOG_SUBSYS_MAP(SHS_LOG_SUBSYS_ENUM)
#undef SHS_LOG_SUBSYS_ENUM
    SHS_LOG_NUM_SUBSYS
} shs_log_subsys_bit_t;
#define SHS_LOGSYS(id) (1u << SHS_LOGSYS_##id##_BIT)

/* Print one line when `level` is on for subsystem `subsys` (a row of
 * SHS_LOG_SUBSYS_MAP: COMM, STRATEGY, ...); printf-style. */
#define SHS_LOG(level, subsys, ...)                                                                      \
    do {                                                                                                 \
        if (atomic_load_explicit(&shs__log_mask[SHS_LOG_##level], memory_order_relaxed) & SHS_LOGSYS(subsys)) \
            shs__log(SHS_LOG_##level, SHS_LOGSYS_##subsys##_BIT, __FILE__, __LINE__, __VA_ARGS__);       \
    } while (0)

/* Set the filter from the two variables' values (NULL: unset), replacing
 * what the environment said. Errors: SHS_INVALID_ARG naming the variable and
 * the unknown word (the filter is then left unchanged). */
shs_status_t shs_log_configure(const char *level, const char *subsys);
/* 1 when SHS_LOG(level, subsys) would print (subsys: SHS_LOGSYS(COMM), ...). */
int shs_log_enabled(shs_log_level_t level, unsigned subsys);
/* The rank printed on the calling thread's lines (-1: "-"). */
void shs_log_set_rank(int rank);
/* Where lines go (NULL: stderr). For tests. */
void shs_log_set_stream(FILE *f);

/* Internal to SHS_LOG: per level, the subsystems that print (all bits set
 * until the environment is read, so the first call reads it). */
extern atomic_uint shs__log_mask[SHS_LOG_NUM_LEVELS];
void shs__log(shs_log_level_t level, int subsys_bit, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
