#!/usr/bin/env bash
# tests/gpu/run.sh - build shardsim with the CUDA backend and run every GPU
# test (make test-gpu) plus a short `shardsim train --backend cuda --check ddp`.
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
echo "GPU tests done in $(( $(date +%s) - start )) s"
