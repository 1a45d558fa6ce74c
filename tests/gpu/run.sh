#!/usr/bin/env bash
# tests/gpu/run.sh - build shardsim with the CUDA backend and run every GPU
# test (make test-gpu) plus a short `shardsim train --backend cuda --check ddp`
# and, with mpirun, `--backend mpi-nccl` over as many processes as GPUs.
# Needs nvcc (on PATH or /usr/local/cuda/bin) and a CUDA GPU; meant to finish
# in well under 5 minutes on one GPU. BUILDROOT defaults to build/gpu.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILDROOT=${BUILDROOT:-build/gpu}
JOBS=$(nproc 2>/dev/null || echo 4)
start=$(date +%s)
make -j"$JOBS" BUILDROOT="$BUILDROOT" all
make -j"$JOBS" BUILDROOT="$BUILDROOT" build-gpu-tests
make BUILDROOT="$BUILDROOT" test-gpu
echo "== shardsim train --backend cuda --check ddp (zero3, world 4, one GPU)"
"$BUILDROOT"/shardsim train --backend cuda --world 4 --strategy zero3 --check ddp --steps 5
# NCCL across processes, bootstrapped over MPI: one process per GPU (NCCL
# refuses two ranks on one GPU), so as many processes as GPUs, at most 8.
if command -v mpirun >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
    np=$(( gpus > 8 ? 8 : gpus ))
    if [ "$np" -ge 1 ]; then
        echo "== mpirun -np $np shardsim train --backend mpi-nccl --check ddp (zero3, one GPU per process)"
        root=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root || true)
        mpirun $root --oversubscribe --bind-to none -np "$np" \
            "$BUILDROOT"/shardsim train --backend mpi-nccl --strategy zero3 --check ddp --steps 5
    fi
fi
echo "GPU tests done in $(( $(date +%s) - start )) s"
