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
