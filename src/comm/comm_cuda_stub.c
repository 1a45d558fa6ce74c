/* comm_cuda_stub.c - the CUDA communicators' entry points (comm_cuda.h) in a
 * build without the CUDA backend (the Makefile found no nvcc, or SAN= is
 * set): each says so and fails with SHS_UNSUPPORTED, so callers need no
 * #ifdef. With SHS_HAVE_CUDA this file is empty and src/comm/cuda/ provides
 * the real ones.
 * What it is not: the device's stubs (src/device/cuda_stub.c).
 */
#ifndef SHS_HAVE_CUDA
#include <stddef.h>

#include "shardsim/comm_cuda.h"
#include "shardsim/features.h"

#define NO_CUDA "shardsim was built without the CUDA backend, which %s", shs_feature_missing(SHS_FEATURE_CUDA)

shs_status_t shs_comm_id_create_cuda_local(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    (void)nranks, (void)timeout_ms, (void)name;
    if (id) *id = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}

shs_status_t shs_comm_init_rank_cuda(shs_comm_t **comm, shs_comm_id_t *id, int rank, shs_device_t *dev) {
    (void)id, (void)rank, (void)dev;
    if (comm) *comm = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}

shs_status_t shs_comm_id_create_nccl(shs_comm_id_t **id, int nranks, int timeout_ms, const char *name) {
    (void)nranks, (void)timeout_ms, (void)name;
    if (id) *id = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}
shs_status_t shs_comm_init_all_cuda(shs_comm_t **comms, shs_comm_id_t *id, shs_device_t *const *devs, int n) {
    (void)id, (void)devs;
    for (int r = 0; comms && r < n; r++) comms[r] = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}

shs_status_t shs_comm_nccl_create_mpi(shs_comm_t **comm, shs_comm_t *host, shs_device_t *dev) {
    (void)host, (void)dev;
    if (comm) *comm = NULL;
    return shs_set_error(SHS_UNSUPPORTED, NO_CUDA);
}
#else
typedef int shs__comm_cuda_stub_unused; /* ISO C forbids an empty translation unit */
#endif
