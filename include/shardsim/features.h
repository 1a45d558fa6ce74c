/* features.h - the optional libraries a build may lack, and the one message
 * that says what to install when a feature needs one of them. Every path
 * that refuses for a missing library (JSON output and importers, Chakra,
 * MPI, CUDA, gzip inputs) takes its words from here, so the package names live in one
 * table (features.c). */
#ifndef SHARDSIM_FEATURES_H
#define SHARDSIM_FEATURES_H

typedef enum {
    SHS_FEATURE_JANSSON,    /* JSON: bench/compare --format json, PyTorch ET, Kineto, Flight Recorder, Perfetto */
    SHS_FEATURE_PROTOBUF_C, /* Chakra ET import and export */
    SHS_FEATURE_MPI,        /* train --backend mpi | mpi-nccl */
    SHS_FEATURE_CUDA,       /* --backend cuda | cuda-nccl | mpi-nccl */
    SHS_FEATURE_ZLIB,       /* gzip-compressed trace inputs (.json.gz, ...) */
    SHS_NUM_FEATURES
} shs_feature_t;

/* 1 when this build has the library, else 0. */
int shs_feature_available(shs_feature_t f);

/* What a refusal says after naming the feature, e.g. for jansson
 * "needs libjansson-dev: jansson is not part of this build; run make deps,
 * then make" (Debian package names first). A static string; "" for an
 * unknown f. */
const char *shs_feature_missing(shs_feature_t f);

#endif
