/* trace_json.h - private helpers for the JSON trace readers (PyTorch ET,
 * Kineto, Flight Recorder): PyTorch's names for collectives and dtypes,
 * and jansson accessors that refuse wrong types.
 * What it is not: a JSON parser (jansson is). */
#ifndef SHARDSIM_TRACE_JSON_H
#define SHARDSIM_TRACE_JSON_H

#include "shardsim/trace_import.h"

/* PyTorch / c10d / NCCL-kernel collective names ("allreduce", "all_gather",
 * "_allgather_base", "reduce_scatter_tensor", "all_to_allv", "AllReduce",
 * "wait", ...) to an op; 0 ok, -1 unknown. Case-insensitive, '_' ignored. */
int shs__torch_coll_op(const char *name, shs_coll_op_t *op);
/* PyTorch dtype spellings ("Float", "float", "c10::BFloat16", "Half",
 * "long int", "Tensor(float)", "BFloat16", "Long", "Int", "torch.float8_e4m3fn",
 * "ComplexFloat", ...) to shardsim's dtype in *dtype (SHS_TRACE_NONE for a
 * torch dtype shardsim has none of, e.g. Short, Float8_*, Complex*) and the
 * element size in bytes in *size; 0 ok, -1 not a torch dtype name. */
int shs__torch_dtype(const char *name, int32_t *dtype, size_t *size);
/* A list of integers written as text, "[96, 224, 288]" (PyTorch's split
 * sizes and group ranks in Kineto args and execution-trace attrs; the
 * profiler writes "[a, b, ...]" after 30 entries): into malloc'd *v
 * (n entries, NULL for "[]"), *truncated set when it ended in "...".
 * 0 ok, -1 malformed (or a value outside [0, 2^50]). */
int shs__int_list(const char *s, int64_t **v, int *n, int *truncated);
/* An all_to_allv's v_bytes (trace.h) from one rank's split sizes: in[nin]
 * and out[nout] are rows of dim 0 sent to / received from each of the g
 * members (an empty list: an even split), in_elems / out_elems the
 * elements of its input / output, es the element size, self its position
 * in the group. 0 ok with *v_bytes; -1 with the reason in why[0..cap) when
 * the lists do not fit (a length other than g, rows that do not divide the
 * elements, self beyond g). */
int shs__a2av_bytes(const int64_t *in, int nin, const int64_t *out, int nout, int g, int self, uint64_t in_elems,
                    uint64_t out_elems, size_t es, uint64_t *v_bytes, char *why, size_t cap);
/* Parse a rank list given as a JSON array or a string "[0, 1, 2]" into
 * malloc'd *ranks (n entries). 0 ok, -1 malformed or out of range. */
struct json_t;
int shs__json_rank_list(struct json_t *v, int **ranks, int *n);

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>
/* Integer value of v (integer, or real with an integral value); 0 ok. */
int shs__json_int(const json_t *v, int64_t *out);
#endif

#endif
