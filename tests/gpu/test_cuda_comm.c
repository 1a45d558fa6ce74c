/* test_cuda_comm.c - the CUDA communicators and training on CUDA devices
 * (needs a GPU; `make test-gpu`).
 *   - device-local collectives on one GPU against closed-form values
 *     (rank r's element i is r + 1 + i/2, exact in f32, f16, bf16 and i64):
 *     all_gather, reduce_scatter, all_reduce (sum, avg, max, prod; in and out
 *     of place), broadcast, reduce, barrier, split, ring order, the fixed
 *     order's (1e8, 1, -1e8) at N = 3, and host buffers (staged);
 *   - DDP vs ZeRO-1/2/3 at world sizes 2, 3, 4 on one GPU: losses and every
 *     parameter bit for bit after every step (device-local communicator);
 *   - the main job (`shardsim train` defaults: L=4 C=128 NH=4 T=64, world 4,
 *     zero3, AdamW, seed 1337) on Tiny Shakespeare, CPU vs CUDA: each step's
 *     loss within 1e-3 relative. Not bit-exact by design: attention and
 *     softmax call expf and GELU tanhf, whose CUDA versions differ from
 *     glibc's by an ulp or two (kernels.cu), and training amplifies that
 *     slowly; 1e-3 is two orders above what 5 steps drift, and far below a
 *     wrong kernel (a wrong gradient moves the loss by 1e-2 or more);
 *   - NCCL (one GPU per rank): at N = min(GPUs, 4), zero3 equals the
 *     device-local run bit for bit (same kernels, same reduction order);
 *   - sends and receives (nccl-tests' sendrecv: to r+1, from r-1, one
 *     group) and all-to-all on device memory, device-local at N = 1..5 and
 *     NCCL at N = min(GPUs, 4), bit for bit against the closed form of what
 *     the sender wrote; device-local also from host memory.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpu_common.h"
#include "harness.h"
#include "run_record.h"
#include "shardsim/comm_cuda.h"
#include "shardsim/world.h"

/* ---- collectives -------------------------------------------------------------- */

#define COUNT 1001 /* per-rank block: odd, so chunks are uneven */

typedef struct {
    int failed[64];
    char why[64][256];
} coll_result_t;

#define EXPECT(r, cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            res->failed[(r)] = 1;                                                                  \
            snprintf(res->why[(r)], sizeof res->why[(r)], __VA_ARGS__);                            \
            return SHS_INTERNAL;                                                                   \
        }                                                                                          \
    } while (0)
#define CHECK(r, call) EXPECT(r, (call) == SHS_OK, "%s: %s", #call, shs_last_error())

static float val(int r, size_t i) { return (float)(r + 1) + 0.5f * (float)(i % 64); }

static shs_status_t coll_job(shs_rank_ctx_t *ctx, void *arg) {
    coll_result_t *res = arg;
    int r = ctx->rank, n = ctx->world_size;
    shs_device_t *d = ctx->dev;
    size_t total = (size_t)n * COUNT;
    float *h = malloc(total * sizeof(float)), *out = malloc(total * sizeof(float));
    EXPECT(r, h && out, "host memory");
    for (size_t i = 0; i < total; i++) h[i] = val(r, i);
    float *send = NULL, *recv = NULL;
    CHECK(r, shs_device_alloc(d, (void **)&send, total * sizeof(float), SHS_MEM_COMM, "send"));
    CHECK(r, shs_device_alloc(d, (void **)&recv, total * sizeof(float), SHS_MEM_COMM, "recv"));
    float sum_r = (float)(n * (n + 1) / 2); /* sum over ranks of (r + 1) */

    /* all_reduce sum, out of place: n(n+1)/2 + n * (i%64)/2 */
    CHECK(r, shs_memcpy_h2d(d, send, h, total * sizeof(float)));
    CHECK(r, shs_all_reduce(send, recv, total, SHS_F32, SHS_SUM, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, recv, total * sizeof(float)));
    for (size_t i = 0; i < total; i++)
        EXPECT(r, out[i] == sum_r + (float)n * 0.5f * (float)(i % 64), "all_reduce sum [%zu] = %g", i, out[i]);
    /* avg, in place: comm.h's (NCCL's) pre-multiplied sum, every rank's
     * value times the f32 1/N, the products added in rank order */
    CHECK(r, shs_all_reduce(send, send, total, SHS_F32, SHS_AVG, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, send, total * sizeof(float)));
    const float inv_n = (float)(1.0 / n);
    for (size_t i = 0; i < total; i++) {
        float want = val(0, i) * inv_n;
        for (int j = 1; j < n; j++) want += val(j, i) * inv_n;
        EXPECT(r, out[i] == want, "all_reduce avg [%zu] = %.9g, want %.9g", i, out[i], want);
    }
    /* max */
    CHECK(r, shs_memcpy_h2d(d, send, h, total * sizeof(float)));
    CHECK(r, shs_all_reduce(send, recv, COUNT, SHS_F32, SHS_MAX, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, recv, COUNT * sizeof(float)));
    for (size_t i = 0; i < COUNT; i++) EXPECT(r, out[i] == val(n - 1, i), "all_reduce max [%zu] = %g", i, out[i]);
    /* reduce_scatter sum, in place: block r of everyone */
    CHECK(r, shs_reduce_scatter(send, send + (size_t)r * COUNT, COUNT, SHS_F32, SHS_SUM, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, send + (size_t)r * COUNT, COUNT * sizeof(float)));
    for (size_t i = 0; i < COUNT; i++) {
        size_t gi = (size_t)r * COUNT + i;
        EXPECT(r, out[i] == sum_r + (float)n * 0.5f * (float)(gi % 64), "reduce_scatter [%zu] = %g", i, out[i]);
    }
    /* all_gather, out of place: block j = rank j's values */
    CHECK(r, shs_memcpy_h2d(d, send, h, COUNT * sizeof(float)));
    CHECK(r, shs_all_gather(send, recv, COUNT, SHS_F32, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, recv, total * sizeof(float)));
    for (size_t i = 0; i < total; i++)
        EXPECT(r, out[i] == val((int)(i / COUNT), i % COUNT), "all_gather [%zu] = %g", i, out[i]);
    /* broadcast from the last rank, reduce (prod) to rank 0 */
    CHECK(r, shs_memcpy_h2d(d, send, h, COUNT * sizeof(float)));
    CHECK(r, shs_broadcast(send, recv, COUNT, SHS_F32, n - 1, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, recv, COUNT * sizeof(float)));
    for (size_t i = 0; i < COUNT; i++) EXPECT(r, out[i] == val(n - 1, i), "broadcast [%zu] = %g", i, out[i]);
    CHECK(r, shs_reduce(send, recv, 64, SHS_F32, SHS_PROD, 0, ctx->comm));
    if (r == 0) {
        CHECK(r, shs_memcpy_d2h(d, out, recv, 64 * sizeof(float)));
        for (size_t i = 0; i < 64; i++) {
            float p = val(0, i);
            for (int j = 1; j < n; j++) p *= val(j, i);
            EXPECT(r, out[i] == p, "reduce prod [%zu] = %g, want %g", i, out[i], p);
        }
    }
    CHECK(r, shs_barrier(ctx->comm));
    /* bf16 sum: every partial sum (at most 15 + 5 * 3.5, halves) is exact in bf16's 8 bits */
    uint16_t hb[64], ob[64];
    for (int i = 0; i < 64; i++) hb[i] = shs_f32_to_bf16(val(r, (size_t)(i % 8)));
    CHECK(r, shs_memcpy_h2d(d, send, hb, sizeof hb));
    CHECK(r, shs_all_reduce(send, send, 64, SHS_BF16, SHS_SUM, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, ob, send, sizeof ob));
    for (int i = 0; i < 64; i++)
        EXPECT(r, shs_bf16_to_f32(ob[i]) == sum_r + (float)n * 0.5f * (float)(i % 8), "bf16 sum [%d]", i);
    /* the fixed order at N = 3: ((1e8 + 1) + -1e8) = 0 in f32 */
    if (n == 3) {
        float x = r == 0 ? 1e8f : r == 1 ? 1.0f : -1e8f, y;
        CHECK(r, shs_memcpy_h2d(d, send, &x, sizeof x));
        CHECK(r, shs_all_reduce(send, send, 1, SHS_F32, SHS_SUM, ctx->comm));
        CHECK(r, shs_memcpy_d2h(d, &y, send, sizeof y));
        EXPECT(r, y == 0.0f, "rank order (1e8 + 1) - 1e8 gave %g", y);
        /* ring order on 3 elements: element c is chunk c, its chain starts at rank c+1:
         * (1 - 1e8) + 1e8 = 0, (-1e8 + 1e8) + 1 = 1, (1e8 + 1) - 1e8 = 0 */
        shs_comm_set_reduce_order(ctx->comm, SHS_REDUCE_ORDER_RING);
        float v3[3] = {x, x, x}, o3[3];
        CHECK(r, shs_memcpy_h2d(d, send, v3, sizeof v3));
        CHECK(r, shs_all_reduce(send, recv, 3, SHS_F32, SHS_SUM, ctx->comm));
        CHECK(r, shs_memcpy_d2h(d, o3, recv, sizeof o3));
        EXPECT(r, o3[0] == 0.0f && o3[1] == 1.0f && o3[2] == 0.0f,
               "ring order gave %g %g %g, want 0 1 0 (chains 1,2,0 / 2,0,1 / 0,1,2)", o3[0], o3[1], o3[2]);
        shs_comm_set_reduce_order(ctx->comm, SHS_REDUCE_ORDER_RANK);
    }
    /* host buffers are staged: an int64 all_reduce on host memory (as the norm accumulator under offload) */
    int64_t words[4] = {r, 1, (int64_t)1 << 40, -r};
    CHECK(r, shs_all_reduce(words, words, 4, SHS_I64, SHS_SUM, ctx->comm));
    EXPECT(r, words[0] == n * (n - 1) / 2 && words[1] == n && words[2] == ((int64_t)n << 40) && words[3] == -words[0],
           "host i64 all_reduce");
    /* split: even and odd ranks */
    shs_comm_t *half = NULL;
    CHECK(r, shs_comm_split(ctx->comm, r % 2, r, &half));
    EXPECT(r, half != NULL, "split gave no communicator");
    float one = 1.0f, cnt;
    CHECK(r, shs_memcpy_h2d(d, send, &one, sizeof one));
    CHECK(r, shs_all_reduce(send, send, 1, SHS_F32, SHS_SUM, half));
    CHECK(r, shs_memcpy_d2h(d, &cnt, send, sizeof cnt));
    EXPECT(r, cnt == (float)((n - r % 2 + 1) / 2), "split all_reduce counted %g ranks", cnt);
    shs_comm_destroy(half);
    shs_device_free(d, send);
    shs_device_free(d, recv);
    free(h);
    free(out);
    return SHS_OK;
}

static void test_collectives_device_local(void **state) {
    (void)state;
    for (int n = 1; n <= 5; n++) {
        shs_world_t *w = NULL;
        shs_world_config_t wc = {.world_size = n, .device_mem = SIZE_MAX, .timeout_ms = 60000, .name = "gpu",
                                 .backend = SHS_WORLD_CUDA};
        if (shs_world_create(&w, &wc) != SHS_OK) fail_msg("world of %d on one GPU: %s", n, shs_last_error());
        coll_result_t res = {0};
        shs_status_t st = shs_world_run(w, coll_job, &res);
        for (int r = 0; r < n; r++)
            if (res.failed[r]) fprintf(stderr, "N=%d rank %d: %s\n", n, r, res.why[r]);
        if (st != SHS_OK) fprintf(stderr, "N=%d: %s\n", n, shs_last_error());
        assert_int_equal(st, SHS_OK);
        shs_world_destroy(w);
    }
}

/* ---- sends and receives ------------------------------------------------------------ */

/* Element i of what rank s sends to rank d. */
static float p2p_val(int s, int d, size_t i) { return (float)(s * 64 + d) + 0.25f * (float)(i % 1024); }

static shs_status_t p2p_job(shs_rank_ctx_t *ctx, void *arg) {
    coll_result_t *res = arg;
    int r = ctx->rank, n = ctx->world_size, next = (r + 1) % n, prev = (r - 1 + n) % n;
    shs_device_t *d = ctx->dev;
    size_t total = (size_t)n * COUNT;
    float *h = malloc(total * sizeof(float)), *out = malloc(total * sizeof(float)), *send = NULL, *recv = NULL;
    EXPECT(r, h && out, "host memory");
    CHECK(r, shs_device_alloc(d, (void **)&send, total * sizeof(float), SHS_MEM_COMM, "send"));
    CHECK(r, shs_device_alloc(d, (void **)&recv, total * sizeof(float), SHS_MEM_COMM, "recv"));
    /* sendrecv */
    for (size_t i = 0; i < COUNT; i++) h[i] = p2p_val(r, next, i);
    CHECK(r, shs_memcpy_h2d(d, send, h, COUNT * sizeof(float)));
    CHECK(r, shs_group_start());
    CHECK(r, shs_send(send, COUNT, SHS_F32, next, ctx->comm));
    CHECK(r, shs_recv(recv, COUNT, SHS_F32, prev, ctx->comm));
    CHECK(r, shs_group_end());
    CHECK(r, shs_memcpy_d2h(d, out, recv, COUNT * sizeof(float)));
    for (size_t i = 0; i < COUNT; i++) EXPECT(r, out[i] == p2p_val(prev, r, i), "sendrecv [%zu] = %g", i, out[i]);
    /* all_to_all: block j to rank j */
    for (size_t i = 0; i < total; i++) h[i] = p2p_val(r, (int)(i / COUNT), i % COUNT);
    CHECK(r, shs_memcpy_h2d(d, send, h, total * sizeof(float)));
    CHECK(r, shs_all_to_all(send, recv, COUNT, SHS_F32, ctx->comm));
    CHECK(r, shs_memcpy_d2h(d, out, recv, total * sizeof(float)));
    for (size_t i = 0; i < total; i++)
        EXPECT(r, out[i] == p2p_val((int)(i / COUNT), r, i % COUNT), "all_to_all [%zu] = %g", i, out[i]);
    /* host memory on the device-local communicator (NCCL moves device memory only) */
    if (!ctx->user) {
        float hs[8], hr[8] = {0};
        for (int i = 0; i < 8; i++) hs[i] = p2p_val(r, next, (size_t)i);
        CHECK(r, shs_group_start());
        CHECK(r, shs_send(hs, 8, SHS_F32, next, ctx->comm));
        CHECK(r, shs_recv(hr, 8, SHS_F32, prev, ctx->comm));
        CHECK(r, shs_group_end());
        for (int i = 0; i < 8; i++) EXPECT(r, hr[i] == p2p_val(prev, r, (size_t)i), "host sendrecv [%d] = %g", i, hr[i]);
    }
    shs_device_free(d, send);
    shs_device_free(d, recv);
    free(h);
    free(out);
    return SHS_OK;
}

static void p2p_on(shs_world_backend_t backend, int n) {
    shs_world_t *w = NULL;
    shs_world_config_t wc = {.world_size = n, .device_mem = SIZE_MAX, .timeout_ms = 60000, .name = "gpu",
                             .backend = backend};
    if (shs_world_create(&w, &wc) != SHS_OK) fail_msg("world of %d: %s", n, shs_last_error());
    for (int r = 0; r < n; r++) shs_world_rank(w, r)->user = backend == SHS_WORLD_CUDA_NCCL ? (void *)w : NULL;
    coll_result_t res = {0};
    shs_status_t st = shs_world_run(w, p2p_job, &res);
    for (int r = 0; r < n; r++)
        if (res.failed[r]) fprintf(stderr, "N=%d rank %d: %s\n", n, r, res.why[r]);
    if (st != SHS_OK) fprintf(stderr, "N=%d: %s\n", n, shs_last_error());
    assert_int_equal(st, SHS_OK);
    shs_world_destroy(w);
}

static void test_p2p_device_local_and_nccl(void **state) {
    (void)state;
    for (int n = 1; n <= 5; n++) p2p_on(SHS_WORLD_CUDA, n);
    int gpus = 0;
    assert_int_equal(shs_cuda_device_count(&gpus), SHS_OK);
    shs_comm_id_t *probe = NULL;
    if (shs_comm_id_create_nccl(&probe, 1, 0, "probe") != SHS_OK) {
        printf("  NCCL not built in: %s (device-local only)\n", shs_last_error());
        return;
    }
    shs_comm_id_release(probe);
    p2p_on(SHS_WORLD_CUDA_NCCL, gpus < 4 ? gpus : 4);
}

/* ---- training ------------------------------------------------------------------- */

#define STEPS 3

static void equivalence_on_gpu(shs_gpt_config_t model) {
    static const int worlds[] = {2, 3, 4};
    for (size_t wi = 0; wi < 3; wi++) {
        shs_train_config_t cfg = shs_train_default_config();
        cfg.model = model;
        cfg.world_size = worlds[wi];
        cfg.micro_batch = 2;
        cfg.timeout_ms = 60000;
        cfg.strategy.bucket_bytes = 4096;
        cfg.backend = SHS_WORLD_CUDA;
        cfg.strategy.kind = SHS_DDP;
        run_record_t ddp = {0};
        record_run(&cfg, &test_corpus, STEPS, &ddp);
        for (int k = SHS_ZERO1; k <= SHS_ZERO3; k++) {
            cfg.strategy.kind = (shs_strategy_kind_t)k;
            run_record_t z = {0};
            record_run(&cfg, &test_corpus, STEPS, &z);
            assert_same_run(&ddp, &z);
            free_record(&z);
        }
        assert_true(ddp.loss[STEPS - 1] < ddp.loss[0]);
        free_record(&ddp);
    }
}

/* Unit sizes not divisible by 2, 3 or 4: every stage pads (test_equivalence.c's model). */
static void test_ddp_vs_zero_padded_units(void **state) {
    (void)state;
    equivalence_on_gpu((shs_gpt_config_t){.num_layers = 2, .num_heads = 7, .channels = 7, .context = 13});
}

static void test_ddp_vs_zero_wider(void **state) {
    (void)state;
    equivalence_on_gpu((shs_gpt_config_t){.num_layers = 2, .num_heads = 4, .channels = 32, .context = 24});
}

#define JOB_STEPS 5

static void test_main_job_cpu_vs_cuda(void **state) {
    (void)state;
    shs_train_config_t cfg = shs_train_default_config(); /* `shardsim train`'s defaults */
    run_record_t on_cpu = {0}, on_gpu = {0};
    record_run(&cfg, &test_corpus, JOB_STEPS, &on_cpu);
    cfg.backend = SHS_WORLD_CUDA;
    record_run(&cfg, &test_corpus, JOB_STEPS, &on_gpu);
    for (int s = 0; s < JOB_STEPS; s++) {
        double rel = fabs((double)on_gpu.loss[s] - on_cpu.loss[s]) / fabs((double)on_cpu.loss[s]);
        printf("  step %d: loss cpu %.7f cuda %.7f (relative difference %.2e)\n", s + 1, (double)on_cpu.loss[s],
               (double)on_gpu.loss[s], rel);
        assert_true(rel <= 1e-3);
    }
    assert_true(on_gpu.loss[JOB_STEPS - 1] < on_gpu.loss[0]);
    free_record(&on_cpu);
    free_record(&on_gpu);
}

static void test_nccl_matches_device_local(void **state) {
    (void)state;
    int gpus = 0;
    assert_int_equal(shs_cuda_device_count(&gpus), SHS_OK);
    shs_comm_id_t *probe = NULL;
    if (shs_comm_id_create_nccl(&probe, 1, 0, "probe") != SHS_OK) {
        printf("  NCCL not built in: %s (skipped)\n", shs_last_error());
        return;
    }
    shs_comm_id_release(probe);
    shs_train_config_t cfg = shs_train_default_config();
    cfg.model = (shs_gpt_config_t){.num_layers = 2, .num_heads = 4, .channels = 32, .context = 24};
    cfg.world_size = gpus < 4 ? gpus : 4;
    cfg.micro_batch = 2;
    cfg.strategy.kind = SHS_ZERO3;
    cfg.backend = SHS_WORLD_CUDA;
    run_record_t local = {0}, nccl = {0};
    record_run(&cfg, &test_corpus, STEPS, &local);
    cfg.backend = SHS_WORLD_CUDA_NCCL;
    record_run(&cfg, &test_corpus, STEPS, &nccl);
    printf("  NCCL at world %d (%d GPU%s): ", cfg.world_size, gpus, gpus == 1 ? "" : "s");
    assert_same_run(&local, &nccl);
    printf("bit-identical to the device-local run\n");
    free_record(&local);
    free_record(&nccl);
}

static int setup(void **state) {
    gpu_require_device();
    return test_corpus_setup(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_device_local),
        cmocka_unit_test(test_p2p_device_local_and_nccl),
        cmocka_unit_test(test_ddp_vs_zero_padded_units),
        cmocka_unit_test(test_ddp_vs_zero_wider),
        cmocka_unit_test(test_main_job_cpu_vs_cuda),
        cmocka_unit_test(test_nccl_matches_device_local),
    };
    return cmocka_run_group_tests(tests, setup, test_corpus_teardown);
}
