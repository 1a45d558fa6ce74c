/* ref_mpi_allreduce.c - the OpenMPI yardstick of the thread collectives: MPI_Allreduce
 * (f32, sum) timed over the same sizes as `shardsim bench`, printed in the
 * same nccl-tests columns, so shardsim's thread collectives can be set beside
 * a tuned shared-memory MPI on the same machine (`make bench-openmpi` runs it
 * with the settings the issue names: vader, single-copy off,
 * MALLOC_MMAP_MAX_=0).
 * What it is not: part of shardsim. It uses MPI's own reduction, whose order
 * MPI does not fix; only its speed is of interest here.
 * Usage: mpirun -np N ref_mpi_allreduce [min_bytes max_bytes factor seconds]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    double min_b = argc > 1 ? atof(argv[1]) : 1024, max_b = argc > 2 ? atof(argv[2]) : 64.0 * 1048576;
    double factor = argc > 3 ? atof(argv[3]) : 4, seconds = argc > 4 ? atof(argv[4]) : 0.2;
    if (factor <= 1) factor = 4;
    size_t max_elems = (size_t)(max_b / 4) + 1;
    float *send = calloc(max_elems, sizeof(float)), *recv = calloc(max_elems, sizeof(float));
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0)
        printf("# OpenMPI MPI_Allreduce  nranks %d\n# %12s %12s %5s %6s %10s %11s %11s\n", n, "size(B)", "count",
               "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
    for (double sz = min_b; sz <= max_b * 1.0000001; sz *= factor) {
        int count = (int)(sz / 4);
        if (count < 1) continue;
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double one = MPI_Wtime() - t0;
        MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        int iters = one > 0 ? (int)(seconds / one) : 1000;
        iters = iters < 3 ? 3 : iters > 10000 ? 10000 : iters;
        double best = 0;
        for (int round = 0; round < 2; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
            double t = (MPI_Wtime() - t0) / iters;
            if (round == 0 || t < best) best = t;
        }
        if (rank == 0) {
            double bytes = 4.0 * count, algbw = bytes / best / 1e9;
            printf("  %12.0f %12d %5s %6s %10.2f %11.3f %11.3f\n", bytes, count, "f32", "sum", best * 1e6, algbw,
                   algbw * 2.0 * (n - 1) / n);
            fflush(stdout);
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
