/* batch.c - what a micro-batch's arrays say about themselves (model.h):
 * the count of targets that take a loss.
 * What it is not: a data loader (data.h) or a model. */
#include "shardsim/model.h"

int64_t shs_batch_num_targets(const shs_batch_t *batch, size_t bt) {
    int64_t n = 0;
    for (size_t i = 0; i < bt; i++) n += batch->targets[i] != SHS_IGNORE_INDEX;
    return n;
}
