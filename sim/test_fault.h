/* test_fault.h - faults the test suite plants in `shardsim train`, read
 * from the environment and never from the product's options:
 *   SHS_TEST_FAULT=mismatch:RANK  before step 1 that rank issues an
 *                                 all-reduce of a different count: every rank
 *                                 must fail with the mismatch message
 *   SHS_TEST_FAULT=stall:RANK     before step 1 that rank sleeps past 3x the
 *                                 timeout: the others time out naming it
 * Only with --backend mpi (tests/comm/test_mpi.c uses them). Unset: no fault.
 * What it is not: the user's planted fault --inject-bitflip (a product
 * option, README) or the library's fault injection. */
#ifndef SHARDSIM_SIM_TEST_FAULT_H
#define SHARDSIM_SIM_TEST_FAULT_H

#include "shardsim/comm.h"

typedef enum { SIM_FAULT_NONE, SIM_FAULT_MISMATCH, SIM_FAULT_STALL } sim_fault_kind_t;

typedef struct {
    sim_fault_kind_t kind;
    int rank;
} sim_test_fault_t;

/* Read SHS_TEST_FAULT into *f. Returns -1 to go on, or SIM_EXIT_USAGE after
 * a usage error of cmd naming the variable (a malformed value, a rank
 * outside 0..SHS_MAX_WORLD-1, or a fault without --backend mpi: mpi 0). */
int sim_test_fault_read(const char *cmd, int mpi, sim_test_fault_t *f);

/* Plant f on this process's rank `rank` of world (timeout_ms: the
 * collective timeout, <= 0 the default). SHS_OK when nothing failed here. */
shs_status_t sim_test_fault_plant(const sim_test_fault_t *f, int rank, shs_comm_t *world, int timeout_ms);

#endif
