/* test_fault.c - the test suite's planted faults (see test_fault.h). */
#include "test_fault.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "commands.h"
#include "shardsim/world.h"

int sim_test_fault_read(const char *cmd, int mpi, sim_test_fault_t *f) {
    f->kind = SIM_FAULT_NONE;
    f->rank = -1;
    const char *v = getenv("SHS_TEST_FAULT");
    if (!v || !*v) return -1;
    static const struct {
        const char *prefix;
        sim_fault_kind_t kind;
    } kinds[] = {{"mismatch:", SIM_FAULT_MISMATCH}, {"stall:", SIM_FAULT_STALL}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = strlen(kinds[k].prefix);
        if (strncmp(v, kinds[k].prefix, n) != 0) continue;
        char err[128];
        long rank;
        if (sim_parse_int(v + n, 0, SHS_MAX_WORLD - 1, &rank, err, sizeof err))
            return sim_usage_error(cmd, "SHS_TEST_FAULT=%s: rank %s", v, err);
        if (!mpi) return sim_usage_error(cmd, "SHS_TEST_FAULT=%s needs --backend mpi", v);
        f->kind = kinds[k].kind;
        f->rank = (int)rank;
        return -1;
    }
    return sim_usage_error(cmd, "SHS_TEST_FAULT=%s: want mismatch:RANK or stall:RANK", v);
}

shs_status_t sim_test_fault_plant(const sim_test_fault_t *f, int rank, shs_comm_t *world, int timeout_ms) {
    if (f->kind == SIM_FAULT_MISMATCH) {
        float probe[2] = {0, 0};
        return shs_all_reduce(probe, probe, rank == f->rank ? 2 : 1, SHS_F32, SHS_SUM, world);
    }
    if (f->kind == SIM_FAULT_STALL && rank == f->rank) {
        /* never arrive in time; the others time out and MPI_Abort ends this one */
        double timeout_s = (timeout_ms > 0 ? timeout_ms : SHS_COMM_DEFAULT_TIMEOUT_MS) / 1000.0;
        struct timespec ts = {(time_t)(3 * timeout_s) + 10, 0};
        while (nanosleep(&ts, &ts) != 0) {}
    }
    return SHS_OK;
}
