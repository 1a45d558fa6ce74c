/* clock.h - the one monotonic clock every timing in shardsim reads
 * (CLOCK_MONOTONIC: immune to wall-clock jumps). */
#ifndef SHARDSIM_CLOCK_H
#define SHARDSIM_CLOCK_H

#include <time.h>

/* Seconds since an arbitrary fixed point, with nanosecond resolution. */
static inline double shs_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
