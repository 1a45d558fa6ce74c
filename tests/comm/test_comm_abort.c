/* test_comm_abort.c - a collective that fails partway must not return while
 * a peer can still touch the returning rank's buffers.
 *
 * Stress trials on the thread backend: all_gather, reduce_scatter and
 * all_reduce (rank and ring order, out of place and in place) at staged,
 * direct and streamed sizes (the thresholds of comm_impl.h), N = 2..8. Every
 * rank allocates fresh buffers for each call and poisons (memset) and frees
 * them the moment the call returns, so a peer still copying into or out of
 * them is a use-after-free: ASan (make SAN=address) reports it as such, TSan
 * (SAN=thread) as a race with free, a plain build crashes at worst. The
 * failures come from
 *   - abort: a watchdog thread calls shs_comm_abort() at a random moment;
 *   - timeout: a short timeout expires because one rank arrives late or
 *     never, or because it is so short (1-3 ms) that it fires while the
 *     ranks are still moving data (they start each such call together, so
 *     the entry barrier completes and the wait that times out is the exit
 *     barrier's, for a rank still copying).
 * Every rank must return SHS_OK with exact data, or SHS_ABORTED (abort
 * trials: naming the watchdog's reason) or SHS_TIMEOUT / SHS_ABORTED
 * (timeout trials), nothing else, and no crash.
 * What it is not: a test of the data paths (test_comm_collectives.c) or of the timeout's
 * text (test_comm_errors.c's timeout tests).
 *
 * Reproducing: each trial has its own fixed seed, printed when the trial
 * fails, also from a crash or a sanitizer report (signal handler and
 * sanitizer death callback). SHS_ABORT_SEED=<seed> runs only that trial;
 * SHS_ABORT_TRIALS=<n> sets the number of trials of each kind.
 * Also: shardsim train with a 1 ms timeout ends with a clear error or
 * succeeds, never crashes or hangs, 10 runs. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "comm/comm_impl.h" /* the algorithm thresholds */
#include "harness.h"
#include "shardsim/comm.h"
#include "thread_world.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#include <sanitizer/common_interface_defs.h>
#else
#define SANITIZED 0
#endif

#define MAX_RANKS 8
#define MAX_CALLS 3
#define LONG_TIMEOUT_MS 20000 /* abort trials: only reached if the test is broken */
/* Trials of each kind (plain build; a third of it under a sanitizer). */
#define ABORT_TRIALS 240
#define TIMEOUT_TRIALS 120
#define ABORT_SEED_BASE UINT64_C(0xab0000)
#define TIMEOUT_SEED_BASE UINT64_C(0x710000)

typedef enum { OP_AG, OP_RS, OP_AR, NUM_OPS } op_t;
typedef enum { SIZE_STAGED, SIZE_DIRECT, SIZE_STREAMED } size_class_t;
typedef enum { FAIL_ABORT, FAIL_NEVER, FAIL_LATE, FAIL_TIGHT } fail_mode_t;

static const char *const op_names[NUM_OPS] = {"all_gather", "reduce_scatter", "all_reduce"};
static const char *const size_names[] = {"staged", "direct", "streamed"};
static const char *const mode_names[] = {"abort", "never", "late", "tight-timeout"};

/* One trial, drawn from its seed. */
typedef struct {
    uint64_t seed;
    int n, calls, in_place, timeout_ms;
    op_t op;
    shs_reduce_order_t order;
    size_class_t size;
    size_t count;                /* NCCL's count: AG sendcount, RS recvcount, AR count */
    fail_mode_t mode;
    int odd_rank;                /* abort: whose handle the watchdog aborts; never/late: the rank */
    int odd_call;                /* never/late: before which call */
    long delay_us;               /* abort: watchdog delay; late: the rank's sleep */
    pthread_barrier_t start;     /* tight: all ranks start each call together */
    /* results, each rank writes only its own row */
    shs_status_t status[MAX_RANKS][MAX_CALLS];
    int called[MAX_RANKS];       /* calls the rank made */
    char error[MAX_RANKS][512];  /* first error text of the rank */
    char bad[MAX_RANKS][256];    /* first wrong result of the rank, "" if none */
} trial_t;

/* The trial being run, for the crash and sanitizer reports. */
static char current_trial[512];

static void write_current(void) {
    static const char head[] = "\ntest_comm_abort: crashed in ";
    ssize_t w = write(2, head, sizeof head - 1);
    w = write(2, current_trial, strlen(current_trial));
    w = write(2, "\n", 1);
    (void)w;
}

#ifdef __SANITIZE_THREAD__
/* stop at the first race, so the death callback names its trial */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "halt_on_error=1"; }
#endif

#if !SANITIZED
static void on_crash(int sig) {
    write_current();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

static void install_crash_reports(void) {
#if SANITIZED
    __sanitizer_set_death_callback(write_current);
#else
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
    signal(SIGABRT, on_crash);
#endif
}

/* splitmix64 */
static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n) { return next_rand(s) % n; }

/* Rank j's element i: a small integer, so every sum over <= 8 ranks is exact
 * in f32 in any order. */
static float value(int j, size_t i) { return (float)((j * 7 + i * 3) % 11); }

/* The smallest count of `op` at n ranks in size class `cls` by comm_impl.h's
 * thresholds: direct (past staging; for all_reduce past the staged
 * one-shot) or streamed (output of all ranks past STREAM_MIN). */
static size_t min_count(op_t op, int n, size_class_t cls) {
    size_t es = sizeof(float), un = (size_t)n;
    if (cls == SIZE_DIRECT) {
        switch (op) {
        case OP_AG: return SHS__STAGE_BYTES / es + 1;
        case OP_RS: return SHS__STAGE_BYTES / es / un + 1;
        default: {
            size_t a = SHS__STAGE_BYTES / es, b = SHS__ONE_SHOT_MAX_BYTES / es / un;
            return (a < b ? a : b) + 1;
        }
        }
    }
    switch (op) { /* streamed */
    case OP_AG: return SHS__STREAM_MIN_BYTES / es / (un * un) + 1;
    case OP_RS: return SHS__STREAM_MIN_BYTES / es / un + 1;
    default: return SHS__STREAM_MIN_BYTES / es / un + 1;
    }
}

static void draw_trial(trial_t *t, uint64_t seed, int timeout_kind) {
    memset(t, 0, sizeof *t);
    t->seed = seed;
    uint64_t s = seed;
    t->n = 2 + (int)below(&s, MAX_RANKS - 1);
    t->op = (op_t)below(&s, NUM_OPS);
    t->order = t->op != OP_AG && below(&s, 2) ? SHS_REDUCE_ORDER_RING : SHS_REDUCE_ORDER_RANK;
    t->in_place = (int)below(&s, 2);
    uint64_t c = below(&s, 20); /* 30% staged, 60% direct, 10% streamed */
    t->size = c < 6 ? SIZE_STAGED : c < 18 ? SIZE_DIRECT : SIZE_STREAMED;
    if (t->size == SIZE_STAGED) {
        size_t lo = 1, hi = min_count(t->op, t->n, SIZE_DIRECT) - 1;
        t->count = lo + below(&s, hi);
    } else {
        t->count = min_count(t->op, t->n, t->size) + below(&s, 4096);
    }
    t->calls = t->size == SIZE_STREAMED ? 1 : 1 + (int)below(&s, MAX_CALLS);
    if (!timeout_kind) {
        t->mode = FAIL_ABORT;
        t->timeout_ms = LONG_TIMEOUT_MS;
        t->odd_rank = (int)below(&s, (uint64_t)t->n);
        /* from "before the first call" to "after the last" at each size */
        long span = t->size == SIZE_STAGED ? 300 : t->size == SIZE_DIRECT ? 3000 : 30000;
        t->delay_us = below(&s, 8) == 0 ? 0 : (long)below(&s, (uint64_t)span * (uint64_t)t->calls);
        return;
    }
    t->mode = (fail_mode_t)(FAIL_NEVER + below(&s, 3));
    t->odd_rank = (int)below(&s, (uint64_t)t->n);
    t->odd_call = (int)below(&s, (uint64_t)t->calls);
    if (t->mode == FAIL_TIGHT) {
        t->timeout_ms = 1 + (int)below(&s, 3);
        /* long data phases (half streamed), so it fires inside them */
        t->size = below(&s, 2) ? SIZE_STREAMED : SIZE_DIRECT;
        t->count = min_count(t->op, t->n, t->size) + below(&s, 4096);
        if (t->size == SIZE_STREAMED) t->calls = 1, t->odd_call = 0;
    } else {
        t->timeout_ms = 5 + (int)below(&s, 10);
        /* late: 0.5x to 1.5x the timeout */
        t->delay_us = (long)t->timeout_ms * 500 + (long)below(&s, (uint64_t)t->timeout_ms * 1000);
    }
}

static void describe(const trial_t *t, char *buf, size_t size) {
    snprintf(buf, size,
             "trial seed %#llx (rerun: SHS_ABORT_SEED=%#llx): %s n=%d %s count=%zu (%s)%s%s calls=%d "
             "timeout=%d ms odd rank %d call %d delay %ld us",
             (unsigned long long)t->seed, (unsigned long long)t->seed, mode_names[t->mode], t->n, op_names[t->op],
             t->count, size_names[t->size], t->order == SHS_REDUCE_ORDER_RING ? " ring" : "",
             t->in_place ? " in-place" : "", t->calls, t->timeout_ms, t->odd_rank, t->odd_call, t->delay_us);
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

typedef struct {
    shs_comm_t *comm;
    long delay_us;
} watchdog_t;

static void *watchdog_main(void *p) {
    watchdog_t *w = p;
    if (w->delay_us) sleep_us(w->delay_us);
    shs_comm_abort(w->comm, "watchdog fired");
    return NULL;
}

/* A call's buffer. Under a sanitizer from malloc, whose use after free it
 * reports; in a plain build mapped for this call alone and unmapped after
 * it, so a late access faults (or, if the pages were mapped again
 * meanwhile, corrupts another call's data, which its check may catch). */
static float *buf_alloc(size_t n) {
    if (SANITIZED) return malloc(n * sizeof(float));
    void *p = mmap(NULL, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void buf_free(float *p, size_t n) {
    if (!p) return;
    memset(p, 0xa5, n * sizeof(float)); /* poison first */
    if (SANITIZED) free(p);
    else munmap(p, n * sizeof(float));
}

/* One call of the trial's op on fresh buffers, checked on success, then the
 * buffers are poisoned and freed at once. */
static shs_status_t one_call(tw_rank_t *r, trial_t *t, int call) {
    int n = t->n, me = r->rank;
    size_t count = t->count, send_n, recv_n;
    switch (t->op) {
    case OP_AG: send_n = count, recv_n = (size_t)n * count; break;
    case OP_RS: send_n = (size_t)n * count, recv_n = count; break;
    default: send_n = recv_n = count; break;
    }
    /* a[0], a[1]: the allocations (a[1] NULL in place); in place, send is
     * block `me` of recv (AG), recv itself (AR), or recv is block `me` of
     * send (RS) */
    size_t a_n[2] = {recv_n, send_n};
    if (t->in_place && t->op == OP_RS) a_n[0] = send_n;
    float *a[2] = {buf_alloc(a_n[0]), t->in_place ? NULL : buf_alloc(a_n[1])};
    int oom = !a[0] || (!t->in_place && !a[1]);
    float *send = a[1], *recv = a[0];
    if (t->in_place && t->op == OP_AG) send = a[0] + (size_t)me * count;
    if (t->in_place && t->op == OP_AR) send = a[0];
    if (t->in_place && t->op == OP_RS) send = a[0], recv = a[0] + (size_t)me * count;
    for (size_t i = 0; !oom && i < send_n; i++) send[i] = value(me, i);
    if (t->mode == FAIL_TIGHT) pthread_barrier_wait(&t->start);

    shs_status_t s = SHS_HOST_OOM;
    if (!oom) {
        switch (t->op) {
        case OP_AG: s = shs_all_gather(send, recv, count, SHS_F32, r->comm); break;
        case OP_RS: s = shs_reduce_scatter(send, recv, count, SHS_F32, SHS_SUM, r->comm); break;
        default: s = shs_all_reduce(send, recv, count, SHS_F32, SHS_SUM, r->comm); break;
        }
    }
    if (s != SHS_OK && !t->error[me][0]) snprintf(t->error[me], sizeof t->error[me], "%s", shs_last_error());
    for (size_t i = 0; s == SHS_OK && i < recv_n && !t->bad[me][0]; i++) {
        float want = 0;
        if (t->op == OP_AG) want = value((int)(i / count), i % count);
        else
            for (int j = 0; j < n; j++) want += value(j, t->op == OP_RS ? (size_t)me * count + i : i);
        if (recv[i] != want)
            snprintf(t->bad[me], sizeof t->bad[me], "call %d: element %zu is %g, want %g", call, i, recv[i], want);
    }
    /* poison, then free: a peer still touching them is now a use-after-free */
    for (int k = 0; k < 2; k++) buf_free(a[k], a_n[k]);
    return s;
}

static shs_status_t rank_trial(tw_rank_t *r) {
    trial_t *t = r->arg;
    int me = r->rank;
    shs_comm_set_reduce_order(r->comm, t->order);
    pthread_t dog;
    watchdog_t w = {r->comm, t->delay_us};
    int has_dog = t->mode == FAIL_ABORT && me == t->odd_rank;
    if (has_dog && pthread_create(&dog, NULL, watchdog_main, &w) != 0) {
        has_dog = 0;
        shs_comm_abort(r->comm, "watchdog fired"); /* no thread: abort now */
    }
    shs_status_t last = SHS_OK;
    for (int c = 0; c < t->calls; c++) {
        if (t->mode != FAIL_ABORT && me == t->odd_rank && c == t->odd_call) {
            if (t->mode == FAIL_NEVER) break;
            if (t->mode == FAIL_LATE) sleep_us(t->delay_us);
        }
        t->status[me][c] = last = one_call(r, t, c);
        t->called[me] = c + 1;
    }
    if (has_dog) pthread_join(dog, NULL);
    return last;
}

/* Outcome counts over a test's trials. */
typedef struct {
    int ok, aborted, timed_out;
} tally_t;

/* Runs one trial; fails the test (printing the trial) if a rank returned
 * anything but SHS_OK with exact data or the failures its kind allows. */
static void run_trial(uint64_t seed, int timeout_kind, tally_t *tally) {
    trial_t *t = malloc(sizeof *t);
    assert_non_null(t);
    draw_trial(t, seed, timeout_kind);
    describe(t, current_trial, sizeof current_trial);
    assert_int_equal(pthread_barrier_init(&t->start, NULL, (unsigned)t->n), 0);
    free(tw_run(t->n, t->timeout_ms, rank_trial, t));
    pthread_barrier_destroy(&t->start);
    int bad = 0;
    for (int r = 0; r < t->n; r++) {
        int expect_calls = t->calls;
        if (t->mode == FAIL_NEVER && r == t->odd_rank) expect_calls = t->odd_call;
        if (t->called[r] != expect_calls) {
            print_error("rank %d made %d calls, want %d\n", r, t->called[r], expect_calls);
            bad = 1;
        }
        if (t->bad[r][0]) {
            print_error("rank %d: wrong result with SHS_OK: %s\n", r, t->bad[r]);
            bad = 1;
        }
        for (int c = 0; c < t->called[r]; c++) {
            shs_status_t s = t->status[r][c];
            int allowed = s == SHS_OK || s == SHS_ABORTED || (timeout_kind && s == SHS_TIMEOUT);
            if (!allowed) {
                print_error("rank %d call %d returned %s: %s\n", r, c, shs_status_name(s), t->error[r]);
                bad = 1;
            }
            tally->ok += s == SHS_OK;
            tally->aborted += s == SHS_ABORTED;
            tally->timed_out += s == SHS_TIMEOUT;
        }
        /* the first failure's text names its cause */
        const char *want = timeout_kind ? "timed out" : "aborted by rank";
        if (t->error[r][0] && !strstr(t->error[r], want)) {
            print_error("rank %d: '%s' not in: %s\n", r, want, t->error[r]);
            bad = 1;
        }
    }
    /* a rank that never came makes the others fail */
    if (t->mode == FAIL_NEVER)
        for (int r = 0; r < t->n; r++)
            if (r != t->odd_rank && t->status[r][t->odd_call] == SHS_OK) {
                print_error("rank %d: call %d succeeded without rank %d\n", r, t->odd_call, t->odd_rank);
                bad = 1;
            }
    if (bad) fail_msg("%s", current_trial);
    free(t);
}

/* SHS_ABORT_TRIALS, else the default (a third of it under a sanitizer). */
static int trial_count(int dflt) {
    const char *e = getenv("SHS_ABORT_TRIALS");
    if (e && atoi(e) > 0) return atoi(e);
    return SANITIZED ? dflt / 3 : dflt;
}

/* Runs the trials of one kind: seeds base, base+1, ..., or only SHS_ABORT_SEED
 * when it is one of this kind's. */
static tally_t run_trials(uint64_t base, int dflt, int timeout_kind) {
    install_crash_reports(); /* over cmocka's handlers, which cannot report the trial */
    tally_t tally = {0, 0, 0};
    const char *only = getenv("SHS_ABORT_SEED");
    int trials = trial_count(dflt);
    if (only) {
        uint64_t seed = strtoull(only, NULL, 0);
        if (seed - base < (uint64_t)trials) run_trial(seed, timeout_kind, &tally);
        return tally;
    }
    for (int i = 0; i < trials; i++) run_trial(base + (uint64_t)i, timeout_kind, &tally);
    return tally;
}

static void test_abort_from_watchdog(void **state) {
    (void)state;
    tally_t t = run_trials(ABORT_SEED_BASE, ABORT_TRIALS, 0);
    print_message("abort trials: %d calls ok, %d aborted\n", t.ok, t.aborted);
    if (!getenv("SHS_ABORT_SEED")) { /* the watchdog's moments cover both outcomes */
        assert_true(t.ok > 0);
        assert_true(t.aborted > 0);
    }
}

static void test_timeout_late_or_missing_rank(void **state) {
    (void)state;
    tally_t t = run_trials(TIMEOUT_SEED_BASE, TIMEOUT_TRIALS, 1);
    print_message("timeout trials: %d calls ok, %d timed out, %d aborted\n", t.ok, t.timed_out, t.aborted);
    if (!getenv("SHS_ABORT_SEED")) assert_true(t.timed_out > 0);
}

/* shardsim train under a 1 ms collective timeout: it may finish (then exit
 * 0) or time out, and then exit 1 with one error line naming the timeout;
 * never a crash, a hang or another exit code. */
static void test_train_tiny_timeout(void **state) {
    (void)state;
    if (getenv("SHS_ABORT_SEED")) return;
    int failed = 0;
    for (int i = 0; i < 10; i++) {
        snprintf(current_trial, sizeof current_trial, "shardsim train --timeout 0.001 --steps 2, run %d", i);
        const test_proc_t *p = test_shardsim(120.0, "train", "--timeout", "0.001", "--steps", "2", NULL);
        if (p->exit_code == 0) continue;
        failed++;
        if (p->exit_code != 1 || !strstr(p->err, "shardsim train: error: ") ||
            (!strstr(p->err, "timed out") && !strstr(p->err, "failed earlier")))
            fail_msg("run %d: exit %d, stderr:\n%s", i, p->exit_code, p->err);
    }
    print_message("train --timeout 0.001: %d of 10 runs timed out\n", failed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abort_from_watchdog),
        cmocka_unit_test(test_timeout_late_or_missing_rank),
        cmocka_unit_test(test_train_tiny_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
