/* comm_mpi.h - the "mpi" communicator backend: one rank per process, ranks
 * are the processes of an MPI job (mpirun), each with a CPU device.
 *
 * What it is: the collectives of comm.h over MPI, with the same fixed
 * reduction order (rank order, or ring order when set) as the thread
 * backend, so a job gives the same bits on threads and on processes. MPI's
 * own reductions (MPI_Allreduce, MPI_Reduce_scatter) promise no order of
 * combination (the standard only asks that the same order be used for the
 * same arguments, and implementations switch algorithm by message size and
 * process count), so this backend never calls them: every reducing
 * collective is data movement (MPI_Alltoallv, MPI_Allgatherv, MPI_Gather)
 * followed by shardsim's ordered local reduction (comm_reduce.c).
 * What it is not: a model of the network, or a way to run several ranks in
 * one process (use the thread backend for that).
 *
 * Checks and failures, as comm.h specifies for every backend: before each
 * collective the ranks exchange a descriptor (op, count, dtype, reduce op,
 * root, reduce order, sequence number) with nonblocking point-to-point
 * messages; a difference makes every rank return SHS_MISMATCH naming both
 * calls; a rank that does not arrive within the timeout makes the waiting
 * ranks return SHS_TIMEOUT naming the missing ranks and the last call seen
 * from each; shs_comm_abort() sends its reason to every other rank, whose
 * waits return SHS_ABORTED with it. Every wait is a polling loop
 * (MPI_Test*), never a blocking MPI call without a deadline.
 * After any such failure the communicator is unusable, and since MPI cannot
 * cancel the collectives left half done in other processes, a program that
 * got an error should print it and call shs_mpi_abort(): MPI_Abort ends every
 * process of the job (a process still computing, or waiting for the one
 * that failed, never hangs).
 *
 * Every function exists in every build; without MPI (mpicc not found at
 * build time) they return SHS_UNSUPPORTED and shs_mpi_available() is 0.
 * Call from one thread (MPI_THREAD_FUNNELED).
 */
#ifndef SHARDSIM_COMM_MPI_H
#define SHARDSIM_COMM_MPI_H

#include "shardsim/comm.h"

/* 1 when shardsim was built with MPI, else 0. */
int shs_mpi_available(void);

/* MPI_Init_thread (FUNNELED) unless MPI is already initialized.
 * Errors: SHS_UNSUPPORTED (built without MPI), SHS_SYSTEM. */
shs_status_t shs_mpi_init(int *argc, char ***argv);
/* MPI_Finalize, if shs_mpi_init initialized MPI. Every communicator must
 * have been destroyed. */
void shs_mpi_finalize(void);
/* Print nothing, end every process of the job with exit code `code`
 * (MPI_Abort on MPI_COMM_WORLD). Without MPI (or before init): exit(code). */
_Noreturn void shs_mpi_abort(int code);

/* This process's rank in MPI_COMM_WORLD and the job's size (0 and 1 before
 * init or without MPI). */
int shs_mpi_world_rank(void);
int shs_mpi_world_size(void);

/* A communicator over every process of the job (a duplicate of
 * MPI_COMM_WORLD, so several are independent); collective: every process
 * calls it, in the same order. `timeout_ms` <= 0: SHS_COMM_DEFAULT_TIMEOUT_MS;
 * `name` NULL: "world". Rank and size are the process's MPI rank and the job
 * size. Destroy with shs_comm_destroy() before shs_mpi_finalize().
 * Errors: SHS_UNSUPPORTED (built without MPI, or MPI not initialized),
 * SHS_HOST_OOM, SHS_SYSTEM. */
shs_status_t shs_comm_mpi_create(shs_comm_t **comm, int timeout_ms, const char *name);

#endif
