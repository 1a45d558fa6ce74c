/* test_features_hybrid_prefetch.c - hybrid sharding (shapes equal to
 * ZeRO or DDP bit for bit, a bad group size refused), prefetch and
 * reshard-after-forward (bit-identical to DDP; the order of calls and the
 * peak they change, read from a recorded trace), and CPU offload (equal to
 * DDP; the memory it moves, and the stage it refuses). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shardsim/shard.h"
#include "shardsim/trace.h"
#include "shardsim/trace_record.h"
#include "shardsim/train.h"
#include "harness.h"
#include "run_record.h"

#include "features_run.h"

/* Hybrid sharding, shapes (G ranks per shard group, R replicas): with one
 * replica it is ZeRO-3 / ZeRO-2 and with G = 1 it is DDP, bit for bit. */
static void test_hybrid_exact_shapes(void **state) {
    static const int shapes[][2] = {{4, 1}, {1, 4}, {3, 1}, {1, 1}, {8, 1}, {1, 5}, {5, 1}};
    for (int k = 0; k < (full_sweep() ? 7 : 4); k++)
        for (int kind = SHS_HYBRID_SHARD; kind <= SHS_HYBRID_SHARD_ZERO2; kind++) {
            shs_train_config_t cfg = small_config(shapes[k][0] * shapes[k][1]);
            cfg.strategy.shard_group_size = shapes[k][0];
            cfg.strategy.clip_norm = 0.05f;
            cfg.strategy.kind = SHS_DDP;
            run_record_t ddp, h;
            record_run(&cfg, &test_corpus, 2, &ddp);
            cfg.strategy.kind = (shs_strategy_kind_t)kind;
            record_run(&cfg, &test_corpus, 2, &h);
            assert_same_run(&ddp, &h);
            free_record(&ddp);
            free_record(&h);
        }
}

/* Shapes (2, 2) and (2, 3): a sum of group sums is not DDP's rank-order sum,
 * so results drift by rounding, but every replica stays bit-identical, the
 * loss stays within rounding of DDP's, and the gathers stay in the group
 * (all-gather buffers are G-way: a G/N share of ZeRO-3's bytes). */
static void test_hybrid_replicated_shapes(void **state) {
    static const int shapes[][2] = {{2, 2}, {2, 3}, {4, 2}, {2, 4}};
    for (int k = 0; k < (full_sweep() ? 4 : 2); k++) {
        int G = shapes[k][0], N = G * shapes[k][1];
        shs_train_config_t cfg = small_config(N);
        cfg.strategy.shard_group_size = G;
        run_record_t ddp;
        cfg.strategy.kind = SHS_DDP;
        record_run(&cfg, &test_corpus, 3, &ddp);
        for (int kind = SHS_HYBRID_SHARD; kind <= SHS_HYBRID_SHARD_ZERO2; kind++) {
            cfg.strategy.kind = (shs_strategy_kind_t)kind;
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
            float *snap = malloc(shs_trainer_snapshot_len(t) * sizeof(float));
            for (int s = 0; s < 3; s++) {
                float loss;
                assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
                assert_true(fabsf(loss - ddp.loss[s]) <= 1e-5f * ddp.loss[s]);
                assert_int_equal(shs_trainer_snapshot(t, snap), SHS_OK);
                shs_replica_diff_t rd;
                assert_int_equal(shs_trainer_check_replicas(t, snap, &rd), 1);
            }
            shs_comm_stats_t cs;
            shs_trainer_comm_stats(t, 0, &cs);
            if (kind == SHS_HYBRID_SHARD) {
                /* 3 steps x (forward + backward gathers of every unit but the
                 * head's reuse): compare with ZeRO-3 on the same world */
                shs_train_config_t z = cfg;
                z.strategy.kind = SHS_ZERO3;
                shs_trainer_t *tz;
                assert_int_equal(shs_trainer_create(&tz, &z, &test_corpus), SHS_OK);
                float loss;
                for (int s = 0; s < 3; s++) assert_int_equal(shs_trainer_step(tz, &loss), SHS_OK);
                shs_comm_stats_t zs;
                shs_trainer_comm_stats(tz, 0, &zs);
                assert_int_equal(cs.calls[SHS_OP_ALL_GATHER], zs.calls[SHS_OP_ALL_GATHER]);
                assert_true(cs.bytes[SHS_OP_ALL_GATHER] < zs.bytes[SHS_OP_ALL_GATHER]);
                shs_trainer_destroy(tz);
            }
            free(snap);
            shs_trainer_destroy(t);
        }
        free_record(&ddp);
    }
}

/* A shard group size that does not divide the world is refused. */
static void test_hybrid_bad_group_size(void **state) {
    shs_train_config_t cfg = small_config(4);
    cfg.strategy.kind = SHS_HYBRID_SHARD;
    cfg.strategy.shard_group_size = 3;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "shard group size 3 must divide the world size 4"));
}

/* FSDP's reshard/prefetch knobs: every freed
 * communication buffer is filled with NaN, and with prefetch on or off,
 * resharding after forward or not, the results equal DDP's (so no stale
 * buffer is read and no NaN leaks). */
static void test_prefetch_and_reshard_match_ddp(void **state) {
    typedef struct { int keep, fwd, limit; shs_prefetch_t bwd; } knobs_t;
    static const knobs_t knobs[] = {
        {0, 0, 0, SHS_PREFETCH_NONE}, {0, 0, 0, SHS_PREFETCH_PRE}, {0, 0, 0, SHS_PREFETCH_POST},
        {0, 1, 0, SHS_PREFETCH_PRE},  {1, 1, 1, SHS_PREFETCH_POST}, {1, 0, 0, SHS_PREFETCH_NONE},
    };
    static const int nw[] = {2, 3, 5, 1, 8};
    for (int w = 0; w < (full_sweep() ? 5 : 3); w++) {
        shs_train_config_t cfg = small_config(nw[w]);
        cfg.poison_freed = 1;
        cfg.grad_accum = 2;
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp;
        record_run(&cfg, &test_corpus, 2, &ddp);
        for (int k = 0; k < 6; k++)
            for (int prec = 0; prec < 2; prec++) {
                cfg.strategy.kind = SHS_ZERO3;
                cfg.strategy.keep_after_forward = knobs[k].keep;
                cfg.strategy.forward_prefetch = knobs[k].fwd;
                cfg.strategy.limit_all_gathers = knobs[k].limit;
                cfg.strategy.backward_prefetch = knobs[k].bwd;
                cfg.strategy.param_dtype = prec ? SHS_BF16 : SHS_F32;
                run_record_t z;
                if (prec) { /* the reference with the same precision */
                    shs_train_config_t d = cfg;
                    d.strategy.kind = SHS_DDP;
                    run_record_t dd;
                    record_run(&d, &test_corpus, 2, &dd);
                    record_run(&cfg, &test_corpus, 2, &z);
                    assert_same_run(&dd, &z);
                    free_record(&dd);
                } else {
                    record_run(&cfg, &test_corpus, 2, &z);
                    assert_same_run(&ddp, &z);
                }
                free_record(&z);
            }
        free_record(&ddp);
    }
}

/* The knobs do what they say: keeping gathered units from forward to
 * backward saves the backward all-gathers and raises the peak of gathered
 * memory; prefetching raises the peak without changing the gather count. */
static void test_prefetch_changes_order_and_peak(void **state) {
    typedef struct { int keep; shs_prefetch_t bwd; } knobs_t;
    static const knobs_t knobs[] = {{0, SHS_PREFETCH_NONE}, {0, SHS_PREFETCH_PRE}, {1, SHS_PREFETCH_NONE}};
    uint64_t gathers[3];
    size_t peak[3];
    for (int k = 0; k < 3; k++) {
        shs_train_config_t cfg = small_config(2);
        cfg.model.num_layers = 4;
        cfg.strategy.kind = SHS_ZERO3;
        cfg.strategy.keep_after_forward = knobs[k].keep;
        cfg.strategy.backward_prefetch = knobs[k].bwd;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t cs;
        shs_trainer_comm_stats(t, 0, &cs);
        uint64_t first = cs.calls[SHS_OP_ALL_GATHER];
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_trainer_comm_stats(t, 0, &cs);
        cs.calls[SHS_OP_ALL_GATHER] -= first; /* the second step's: prefetch by recorded order */
        shs_mem_stats_t ms;
        shs_trainer_mem_stats(t, 0, &ms);
        gathers[k] = cs.calls[SHS_OP_ALL_GATHER];
        peak[k] = ms.peak[SHS_MEM_COMM];
        shs_trainer_destroy(t);
    }
    /* 6 units: forward gathers embed, 4 blocks, lnf, and embed again for the
     * head (kept into backward); backward gathers lnf and the 4 blocks */
    assert_int_equal(gathers[0], 7 + 5);
    assert_int_equal(gathers[1], gathers[0]);
    assert_int_equal(gathers[2], 6); /* kept: each unit once */
    assert_true(peak[1] > peak[0]);
    assert_true(peak[2] > peak[1]);
}

/* FSDP2's reshard_after_forward=R: after forward each rank keeps 1/R of a
 * unit and backward all-gathers it within R consecutive ranks. The values
 * are DDP's bit for bit (f32 and bf16, freed buffers poisoned); the
 * backward all-gathers leave the 4-rank shard group for 2-rank groups, so
 * rank 0 sends 3/4 of a gather over the shard group and 1/2 of one over
 * its pair (ring, nccl-tests convention). Resharded gathers: backward's
 * of the two blocks and lnf, and forward's second gather of the tied
 * embedding (the LM head: FSDP2 gathers a resharded unit from its
 * post-forward shards whichever pass needs it), B = 4 x the padded sizes
 * of every unit in bytes (f32), so the bytes sent drop by (3/4 - 1/2) B;
 * a reshard size that does not divide the shard group is refused. */
static void test_reshard_to_smaller_groups(void **state) {
    for (int prec = 0; prec < 2; prec++) {
        shs_train_config_t cfg = small_config(4);
        cfg.poison_freed = 1;
        cfg.strategy.param_dtype = prec ? SHS_BF16 : SHS_F32;
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp, z;
        record_run(&cfg, &test_corpus, 2, &ddp);
        cfg.strategy.kind = SHS_ZERO3;
        cfg.strategy.reshard_after_forward_size = 2;
        record_run(&cfg, &test_corpus, 2, &z);
        assert_same_run(&ddp, &z);
        free_record(&ddp);
        free_record(&z);
    }
    uint64_t sent[2], bytes[2], calls[2];
    for (int r = 0; r < 2; r++) {
        shs_train_config_t cfg = small_config(4);
        cfg.strategy.kind = SHS_ZERO3;
        cfg.strategy.backward_prefetch = SHS_PREFETCH_NONE;
        cfg.strategy.reshard_after_forward_size = r ? 2 : 0;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        shs_comm_stats_t cs;
        shs_trainer_comm_stats(t, 0, &cs);
        sent[r] = cs.bytes_sent[SHS_OP_ALL_GATHER];
        bytes[r] = cs.bytes[SHS_OP_ALL_GATHER];
        calls[r] = cs.calls[SHS_OP_ALL_GATHER];
        shs_trainer_destroy(t);
    }
    assert_int_equal(calls[0], calls[1]); /* the same gathers, in smaller groups */
    assert_int_equal(bytes[0], bytes[1]); /* of the same buffers */
    shs_train_config_t lc = small_config(4);
    shs_layout_t lo;
    assert_int_equal(shs_gpt_layout_create(&lo, &lc.model), SHS_OK);
    uint64_t B = 0;
    for (int u = 0; u < lo.num_units; u++) B += 4 * shs_padded_numel(lo.units[u].numel, 4, 1);
    shs_layout_free(&lo);
    assert_int_equal(sent[0] - sent[1], B * 3 / 4 - B / 2);
    shs_train_config_t cfg = small_config(4);
    cfg.strategy.kind = SHS_ZERO3;
    cfg.strategy.reshard_after_forward_size = 3;
    shs_trainer_t *t;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "reshard_after_forward 3 must be a positive divisor of the shard group's 4"));
}

/* Rank 0's position of the last call `op` marked `marker` in a trace. */
static long last_call(const shs_trace_t *t, shs_coll_op_t op, const char *marker) {
    long at = -1;
    for (size_t i = 0; i < t->ranks[0].n; i++) {
        const shs_trace_rec_t *x = &t->ranks[0].recs[i];
        if (x->op == op && !strcmp(shs_trace_str(t, x->marker), marker)) at = (long)i;
    }
    return at;
}

/* The order itself, from a recording of the second step's backward: without
 * prefetch block2's all-gather follows block3's reduce-scatter; with
 * backward prefetch (pre or post, FSDP's BACKWARD_PRE / BACKWARD_POST) it is
 * issued before it; forward prefetch does not change that, nor gather any
 * unit twice in one forward. */
static void test_prefetch_order_in_trace(void **state) {
    static const shs_prefetch_t modes[] = {SHS_PREFETCH_NONE, SHS_PREFETCH_PRE, SHS_PREFETCH_POST};
    for (int m = 0; m < 3; m++)
        for (int fwd = 0; fwd < 2; fwd++) {
            shs_train_config_t cfg = small_config(2);
            cfg.model.num_layers = 4;
            cfg.strategy.kind = SHS_ZERO3;
            cfg.strategy.backward_prefetch = modes[m];
            cfg.strategy.forward_prefetch = fwd;
            shs_trace_recorder_t *rec;
            assert_int_equal(shs_trace_recorder_create(&rec, 2), SHS_OK);
            cfg.trace = rec;
            shs_trainer_t *t;
            assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
            float loss;
            for (int step = 0; step < 2; step++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
            shs_trainer_destroy(t);
            shs_trace_t *tr;
            assert_int_equal(shs_trace_recorder_finish(rec, &tr), SHS_OK);
            shs_trace_recorder_free(rec);
            long ag2 = last_call(tr, SHS_OP_ALL_GATHER, "bwd/block2");
            long rs3 = last_call(tr, SHS_OP_REDUCE_SCATTER, "bwd/block3");
            assert_true(ag2 >= 0 && rs3 >= 0);
            if (modes[m] == SHS_PREFETCH_NONE) assert_true(ag2 > rs3);
            else assert_true(ag2 < rs3);
            /* every forward gathers block0 once, prefetch or not: the tied
             * head's second use of the embedding must not prefetch what
             * followed its first (block0, already done) */
            int b0 = 0;
            for (size_t i = 0; i < tr->ranks[0].n; i++)
                b0 += tr->ranks[0].recs[i].op == SHS_OP_ALL_GATHER &&
                      !strcmp(shs_trace_str(tr, tr->ranks[0].recs[i].marker), "fwd/block0");
            assert_int_equal(b0, 2);
            shs_trace_free(tr);
        }
}

/* CPU offload of the optimizer (every stage) and of the parameters
 * (ZeRO-3, hybrid_shard) equals DDP without offload, bit for bit, also with
 * fp16 loss scaling, clipping and gradient accumulation (ZeRO-2 + 4
 * accumulation steps + optimizer offload included). */
static void test_offload_matches_ddp(void **state) {
    for (int w = 0; w < NWORLDS; w++) {
        shs_train_config_t cfg = small_config(test_worlds[w]);
        cfg.grad_accum = test_worlds[w] == 3 ? 4 : 2;
        cfg.strategy.clip_norm = 0.05f;
        if (test_worlds[w] == 5) {
            cfg.strategy.param_dtype = SHS_F16;
            cfg.strategy.scaler.init_scale = 1024.0f;
        }
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp;
        record_run(&cfg, &test_corpus, 2, &ddp);
        for (int k = SHS_DDP; k <= SHS_HYBRID_SHARD; k++)
            for (int off = SHS_OFFLOAD_OPTIMIZER; off <= SHS_OFFLOAD_PARAMS; off++) {
                if (off == SHS_OFFLOAD_PARAMS && k != SHS_ZERO3 && k != SHS_HYBRID_SHARD) continue;
                shs_train_config_t c = cfg;
                c.strategy.kind = (shs_strategy_kind_t)k;
                c.strategy.offload = (shs_offload_t)off;
                run_record_t z;
                record_run(&c, &test_corpus, 2, &z);
                assert_same_run(&ddp, &z);
                free_record(&z);
            }
        free_record(&ddp);
    }
}

/* Accounting: with the optimizer offloaded the device holds no optimizer
 * state; the host holds 2 S (AdamW) and the master copy S per unit; each
 * step copies each rank's updated range (its valid shard elements) down and
 * up once. With parameters offloaded the device holds no parameters. */
static void test_offload_accounting(void **state) {
    shs_train_config_t cfg = small_config(3);
    cfg.strategy.kind = SHS_ZERO3;
    for (int off = SHS_OFFLOAD_OPTIMIZER; off <= SHS_OFFLOAD_PARAMS; off++) {
        cfg.strategy.offload = (shs_offload_t)off;
        shs_trainer_t *t;
        assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_OK);
        float loss;
        for (int s = 0; s < 2; s++) assert_int_equal(shs_trainer_step(t, &loss), SHS_OK);
        const shs_layout_t *lo = shs_trainer_layout(t);
        size_t shard = 0, valid = 0;
        for (int u = 0; u < lo->num_units; u++) {
            shs_shard_t sh = shs_shard_of(lo->units[u].numel, 3, 1, 1);
            shard += sh.size;
            valid += sh.valid;
        }
        shs_mem_stats_t dm, hm;
        uint64_t h2d, d2h;
        shs_trainer_mem_stats(t, 1, &dm);
        shs_strategy_offload_stats(shs_trainer_strategy(t, 1), &h2d, &d2h, &hm);
        assert_int_equal(dm.peak[SHS_MEM_OPTIM], 0);
        assert_int_equal(hm.peak[SHS_MEM_OPTIM], 2 * shard * sizeof(float));
        assert_int_equal(hm.peak[SHS_MEM_GRADS], shard * sizeof(float));
        assert_int_equal(d2h, 2 * valid * sizeof(float));
        if (off == SHS_OFFLOAD_OPTIMIZER) {
            assert_int_equal(dm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_int_equal(hm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_int_equal(h2d, 2 * valid * sizeof(float));
        } else {
            assert_int_equal(dm.peak[SHS_MEM_PARAMS], 0);
            assert_int_equal(hm.peak[SHS_MEM_PARAMS], shard * sizeof(float));
            assert_true(h2d > 0); /* shards staged in before each all-gather */
        }
        shs_trainer_destroy(t);
    }
    cfg.strategy.kind = SHS_ZERO2;
    cfg.strategy.offload = SHS_OFFLOAD_PARAMS;
    shs_trainer_t *t = NULL;
    assert_int_equal(shs_trainer_create(&t, &cfg, &test_corpus), SHS_INVALID_ARG);
    assert_non_null(strstr(shs_last_error(), "needs sharded parameters"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_exact_shapes),
        cmocka_unit_test(test_hybrid_replicated_shapes),
        cmocka_unit_test(test_hybrid_bad_group_size),
        cmocka_unit_test(test_prefetch_and_reshard_match_ddp),
        cmocka_unit_test(test_prefetch_changes_order_and_peak),
        cmocka_unit_test(test_reshard_to_smaller_groups),
        cmocka_unit_test(test_prefetch_order_in_trace),
        cmocka_unit_test(test_offload_matches_ddp),
        cmocka_unit_test(test_offload_accounting),
    };
    return cmocka_run_group_tests(tests, test_corpus_setup, test_corpus_teardown);
}
