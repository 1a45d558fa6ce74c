/* loss_gpu_memory.c - the GPU run's loss memory (loss_gpu_memory.h). */
#include "model/loss_gpu_memory.h"

size_t shs__loss_gpu_bytes(size_t BT, size_t V, size_t a, shs_loss_kernel_t kernel) {
    size_t logits = BT * V;
    if (kernel == SHS_LOSS_FUSED) return 2 * a * logits + 4 * BT;
    size_t fwd = (a + 8) * logits, bwd = 12 * logits;
    return fwd > bwd ? fwd : bwd;
}
