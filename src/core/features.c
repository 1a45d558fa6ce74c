/* features.c - the table of optional libraries and their Debian packages
 * (features.h). */
#include "shardsim/features.h"

/* X(id, library, Debian packages, how to get them) */
#define SHS_FEATURE_MAP(X)                                                                                   \
    X(JANSSON, "jansson", "libjansson-dev", "run make deps, then make")                                      \
    X(PROTOBUF_C, "protobuf-c", "libprotobuf-c-dev and protobuf-c-compiler", "run make deps, then make")      \
    X(MPI, "OpenMPI", "libopenmpi-dev and openmpi-bin", "run make deps, then make")                          \
    X(CUDA, "the CUDA backend", "the CUDA toolkit's nvcc (Debian: nvidia-cuda-toolkit)",                     \
      "install it (nvcc on PATH or in /usr/local/cuda/bin), then make without NVCC= or SAN=")                 \
    X(ZLIB, "zlib", "zlib1g-dev", "run make deps, then make")

static const char *const missing[SHS_NUM_FEATURES] = {
#define SHS_FEATURE_TEXT(id, lib, pkgs, how) [SHS_FEATURE_##id] = "needs " pkgs ": " lib " is not part of this build; " how,
    SHS_FEATURE_MAP(SHS_FEATURE_TEXT)
#undef SHS_FEATURE_TEXT
};

int shs_feature_available(shs_feature_t f) {
    switch (f) {
#ifdef SHS_HAVE_JANSSON
    case SHS_FEATURE_JANSSON: return 1;
#endif
#ifdef SHS_HAVE_PROTOBUF_C
    case SHS_FEATURE_PROTOBUF_C: return 1;
#endif
#ifdef SHS_HAVE_MPI
    case SHS_FEATURE_MPI: return 1;
#endif
#ifdef SHS_HAVE_CUDA
    case SHS_FEATURE_CUDA: return 1;
#endif
#ifdef SHS_HAVE_ZLIB
    case SHS_FEATURE_ZLIB: return 1;
#endif
    default: return 0;
    }
}

const char *shs_feature_missing(shs_feature_t f) {
    return (unsigned)f < SHS_NUM_FEATURES ? missing[f] : "";
}
