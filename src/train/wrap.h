/* wrap.h - size-based wrapping (FSDP's size_based_auto_wrap_policy): the
 * model's units (logical: embed, block0..L-1, lnf; or the Llama's embed,
 * layer0..L-1, norm, lm_head) grouped into the
 * strategy's flat parameters (physical), and the parameter source
 * decorator that maps the model's calls onto them. Internal.
 * What it is not: the strategy (it sees only the physical layout) or the
 * model (it sees only the logical one).
 */
#ifndef SHARDSIM_TRAIN_WRAP_H
#define SHARDSIM_TRAIN_WRAP_H

#include <stddef.h>

#include "shardsim/layout.h"
#include "shardsim/param_source.h"
#include "shardsim/strategy.h"

typedef struct {
    int num_logical, num_physical;
    int *phys_of;            /* (num_logical) logical -> physical */
    size_t *offset_of;       /* (num_logical) first element inside its physical unit */
    int *first, *last;       /* (num_physical) lowest and highest logical member */
} shs__wrap_map_t;

/* Build the physical layout `phys` (initialized here; free with
 * shs_layout_free) from a decoder's logical layout `lo`: its blocks (units
 * 1..num_blocks: the GPT's blocks, the Llama's decoder layers) grouped
 * greedily until a group holds >= min_params (> 0) elements; the embedding,
 * the final norm and any unit after it (the Llama's untied head) stay units
 * of their own, tensors keep their order (so initialization is the same).
 * Errors: SHS_HOST_OOM. */
shs_status_t shs__wrap_build(const shs_layout_t *lo, int num_blocks, size_t min_params, shs_layout_t *phys,
                             shs__wrap_map_t *w);
void shs__wrap_free(shs__wrap_map_t *w);

/* The decorator in front of the strategy's source: the model calls with
 * logical units; a group's first member in the pass's order (`*phase`)
 * acquires the physical unit and its last releases it (in backward the
 * lowest member's grads_ready completes the group). Single-member units
 * pass straight through. */
typedef struct {
    shs_param_decorator_t base;  /* first */
    const shs__wrap_map_t *w;
    const shs_phase_t *phase;    /* the pass being run, owned by the step loop */
    const float **held_params;   /* (num_physical) */
    float **held_grads;          /* (num_physical) */
} shs__wrap_source_t;

/* *out: the source to give the model. Free with shs__wrap_source_free.
 * Errors: SHS_HOST_OOM. */
shs_status_t shs__wrap_source(shs__wrap_source_t *ws, shs_param_source_t *inner, const shs__wrap_map_t *w,
                              const shs_phase_t *phase, shs_param_source_t **out);
void shs__wrap_source_free(shs__wrap_source_t *ws);

#endif
