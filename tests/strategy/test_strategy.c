/* test_strategy.c - what each stage holds and sends, per rank, against
 * closed forms computed here from the unit sizes (ZeRO paper §5 with
 * padding: Psi_u = numel of unit u, S_u = ceil(Psi_u / N)):
 *   params   DDP sum Psi_u      Z1, Z2 sum N S_u    Z3 sum S_u
 *   grads    DDP sum Psi_u      Z1 sum N S_u        Z2, Z3 sum S_u
 *   optim    2 floats per element held: DDP sum Psi_u, ZeRO sum S_u
 *   bytes    DDP all-reduce sum Psi_u; Z1, Z2 reduce-scatter + all-gather
 *            of sum N S_u; Z3 reduce-scatter sum N S_u and all-gather
 *            2 sum N S_u (forward and backward), the ZeRO paper's 2/2/3 Psi.
 * Hybrid sharding with one shard group of all N ranks (one replica) holds
 * and sends as ZeRO-3 (hybrid_shard) and ZeRO-2 (hybrid_shard_zero2).
 * Each step also all-reduces the 1-float loss. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "harness.h"
#include "shardsim/shard.h"
#include "shardsim/train.h"

#define N 3
#define STEPS 2

typedef struct {
    shs_mem_stats_t mem;
    shs_comm_stats_t comm;
} outcome_t;

static void run(shs_strategy_kind_t k, outcome_t *o, size_t bucket_bytes) {
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 3, .num_heads = 5, .channels = 5, .context = 11};
    cfg.world_size = N;
    cfg.micro_batch = 2;
    cfg.strategy.kind = k;
    cfg.strategy.bucket_bytes = bucket_bytes;
    cfg.strategy.backward_prefetch = SHS_PREFETCH_NONE; /* the closed forms below gather only on use */
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
    float loss;
    for (int s = 0; s < STEPS; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
    shs_trainer_mem_stats(t, 1, &o->mem);
    shs_trainer_comm_stats(t, 1, &o->comm);
    shs_trainer_destroy(t);
}

static void test_memory_and_bytes_by_stage(void **state) {
    (void)state;
    shs_gpt_config_t m = {.num_layers = 3, .num_heads = 5, .channels = 5, .context = 11};
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &m), SHS_OK);
    size_t psi = 0, padded = 0, shard = 0, max_block_padded = 0;
    for (int u = 0; u < lo.num_units; u++) {
        size_t n = lo.units[u].numel;
        psi += n;
        padded += shs_padded_numel(n, N, 1);
        shard += shs_shard_size(n, N, 1);
        if (u >= 1 && u <= m.num_layers) max_block_padded = shs_padded_numel(n, N, 1);
    }
    size_t emb_padded = shs_padded_numel(lo.units[0].numel, N, 1);
    assert_true(padded > psi); /* this model pads */
    const size_t F = sizeof(float);
    outcome_t o[SHS_NUM_STRATEGIES];
    for (int k = 0; k < SHS_NUM_STRATEGIES; k++) run((shs_strategy_kind_t)k, &o[k], 0);

    /* DDP, Z1, Z2, Z3, hybrid_shard (as Z3), hybrid_shard_zero2 (as Z2) */
    size_t want_params[SHS_NUM_STRATEGIES] = {psi, padded, padded, shard, shard, padded};
    size_t want_grads[SHS_NUM_STRATEGIES] = {psi, padded, shard, shard, shard, shard};
    size_t want_optim[SHS_NUM_STRATEGIES] = {2 * psi, 2 * shard, 2 * shard, 2 * shard, 2 * shard, 2 * shard};
    for (int k = 0; k < SHS_NUM_STRATEGIES; k++) {
        assert_int_equal(o[k].mem.peak[SHS_MEM_PARAMS], want_params[k] * F);
        assert_int_equal(o[k].mem.peak[SHS_MEM_GRADS], want_grads[k] * F);
        assert_int_equal(o[k].mem.peak[SHS_MEM_OPTIM], want_optim[k] * F);
        assert_int_equal(o[k].mem.peak[SHS_MEM_ACTIVATIONS], o[SHS_DDP].mem.peak[SHS_MEM_ACTIVATIONS]);
        assert_int_equal(o[k].mem.current[SHS_MEM_COMM], 0); /* transient buffers all freed */
    }
    /* ZeRO-2: the embedding's full gradient lives through the whole backward
     * (tied head first, lookup last), beside one block's at a time. */
    assert_int_equal(o[SHS_ZERO2].mem.peak[SHS_MEM_COMM], (emb_padded + max_block_padded) * F);
    assert_int_equal(o[SHS_HYBRID_SHARD_ZERO2].mem.peak[SHS_MEM_COMM], (emb_padded + max_block_padded) * F);
    /* ZeRO-3 adds the gathered parameters: the head's backward holds the
     * embedding's params and gradient; a block's backward holds the
     * embedding's gradient and the block's params and gradient. */
    size_t z3 = 2 * emb_padded > emb_padded + 2 * max_block_padded ? 2 * emb_padded : emb_padded + 2 * max_block_padded;
    assert_int_equal(o[SHS_ZERO3].mem.peak[SHS_MEM_COMM], z3 * F);
    assert_int_equal(o[SHS_HYBRID_SHARD].mem.peak[SHS_MEM_COMM], z3 * F);
    assert_int_equal(o[SHS_DDP].mem.peak[SHS_MEM_COMM], 0);
    assert_int_equal(o[SHS_ZERO1].mem.peak[SHS_MEM_COMM], 0);

    const uint64_t loss_bytes = STEPS * F;
    assert_int_equal(o[SHS_DDP].comm.bytes[SHS_OP_ALL_REDUCE], STEPS * psi * F + loss_bytes);
    assert_int_equal(o[SHS_DDP].comm.calls[SHS_OP_ALL_REDUCE], 2 * STEPS); /* one 25 MiB bucket + loss */
    assert_int_equal(o[SHS_DDP].comm.calls[SHS_OP_REDUCE_SCATTER] + o[SHS_DDP].comm.calls[SHS_OP_ALL_GATHER], 0);
    for (int k = SHS_ZERO1; k < SHS_NUM_STRATEGIES; k++) { /* one replica: no replica all-reduce */
        assert_int_equal(o[k].comm.bytes[SHS_OP_REDUCE_SCATTER], STEPS * padded * F);
        assert_int_equal(o[k].comm.calls[SHS_OP_REDUCE_SCATTER], STEPS * lo.num_units);
        assert_int_equal(o[k].comm.bytes[SHS_OP_ALL_REDUCE], loss_bytes);
    }
    assert_int_equal(o[SHS_ZERO1].comm.bytes[SHS_OP_ALL_GATHER], STEPS * padded * F);
    assert_int_equal(o[SHS_ZERO2].comm.bytes[SHS_OP_ALL_GATHER], STEPS * padded * F);
    assert_int_equal(o[SHS_ZERO3].comm.bytes[SHS_OP_ALL_GATHER], 2 * STEPS * padded * F);
    assert_int_equal(o[SHS_HYBRID_SHARD_ZERO2].comm.bytes[SHS_OP_ALL_GATHER], STEPS * padded * F);
    assert_int_equal(o[SHS_HYBRID_SHARD].comm.bytes[SHS_OP_ALL_GATHER], 2 * STEPS * padded * F);
    /* ring model: all-reduce sends 2(N-1)/N of the buffer, the others (N-1)/N */
    assert_int_equal(o[SHS_ZERO3].comm.bytes_sent[SHS_OP_ALL_GATHER], 2 * STEPS * padded * F * (N - 1) / N);
    shs_layout_free(&lo);
}

/* Small buckets split DDP's all-reduce without changing the bytes. */
static void test_ddp_buckets(void **state) {
    (void)state;
    outcome_t big, small;
    run(SHS_DDP, &big, 0);
    run(SHS_DDP, &small, 256);
    assert_int_equal(small.comm.bytes[SHS_OP_ALL_REDUCE], big.comm.bytes[SHS_OP_ALL_REDUCE]);
    assert_true(small.comm.calls[SHS_OP_ALL_REDUCE] > big.comm.calls[SHS_OP_ALL_REDUCE]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_and_bytes_by_stage),
        cmocka_unit_test(test_ddp_buckets),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
