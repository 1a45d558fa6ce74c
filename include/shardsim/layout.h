/* layout.h - how a model's parameters are laid out as flat parameters.
 *
 * What it is: the list of named tensors (shape, initialization) grouped into
 * wrap units, each unit one flat parameter: its tensors concatenated in order
 * (FSDP's FlatParameter). Sharding (shard.h) and strategies (strategy.h) see
 * only this; models (model.h) add the math. Initial values are generated
 * from a counter-based RNG keyed by (seed, tensor index, element index), so a
 * rank can produce exactly the elements it owns.
 * What it is not: the math of any model (gpt.h, model_file.h) or sharding.
 */
#ifndef SHARDSIM_LAYOUT_H
#define SHARDSIM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "shardsim/status.h"

typedef enum { SHS_INIT_NORMAL, SHS_INIT_ZEROS, SHS_INIT_ONES } shs_init_kind_t;

typedef struct {
    char name[64];        /* e.g. GPT-2's "h.3.attn.c_attn.weight", Llama's "model.layers.3.mlp.up_proj.weight" */
    int unit;             /* wrap unit holding it */
    size_t offset;        /* first element within the unit's flat parameter */
    size_t numel;         /* rows * cols; may be 0 */
    int rows, cols;       /* shape (rows, cols); cols == 1 for vectors */
    shs_init_kind_t init;
    float std;            /* for SHS_INIT_NORMAL */
} shs_tensor_info_t;

typedef struct {
    char name[32];        /* e.g. "embed", "block0", "lnf" */
    size_t numel;         /* real elements of the flat parameter (no padding); may be 0 */
    int first_tensor, num_tensors;
    int replicated;       /* kept whole on every rank, never sharded (strategy.h) */
} shs_unit_info_t;

typedef struct {
    int num_units;
    shs_unit_info_t *units;
    int num_tensors;
    shs_tensor_info_t *tensors;
    size_t num_params;    /* sum of unit numel */
    int cap_units, cap_tensors; /* allocated lengths */
} shs_layout_t;

/* An empty layout (no allocation yet). */
void shs_layout_init(shs_layout_t *lo);
void shs_layout_free(shs_layout_t *lo);
/* Append a unit; later tensors go into it. Errors: SHS_HOST_OOM. */
shs_status_t shs_layout_add_unit(shs_layout_t *lo, const char *name);
/* Append a (rows, cols) tensor to the last unit (rows, cols >= 0; a unit
 * must exist). Names longer than the field are cut. Errors: SHS_HOST_OOM,
 * SHS_INVALID_ARG. */
shs_status_t shs_layout_add_tensor(shs_layout_t *lo, const char *name, int rows, int cols, shs_init_kind_t init,
                                   float std);

/* Tensor containing element `index` of unit `unit`'s flat parameter, or -1
 * for padding (index >= the unit's numel). Zero-size tensors hold nothing. */
int shs_layout_tensor_at(const shs_layout_t *lo, int unit, size_t index);

/* Write initial values of elements [begin, end) of unit `unit`'s flat
 * parameter to host memory `out` (end - begin floats); elements at or past
 * the unit's numel (padding) are 0. Each value depends only on (seed, tensor,
 * element index), never on which rank asks or how the unit is sharded. */
void shs_layout_init_range(const shs_layout_t *lo, uint64_t seed, int unit, size_t begin, size_t end, float *out);

#endif
