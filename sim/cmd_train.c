/* cmd_train.c - `shardsim train`: the main job. Trains the GPT on a world of
 * simulated GPUs under one strategy, prints loss and time per step and a
 * summary of memory and communication; with --check ddp it runs DDP on the
 * same data in the same process and compares every parameter bit for bit
 * after every step.
 * What it is not: the training loop itself (src/train.c).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "shardsim/train.h"
#include "shardsim/units.h"
#include "shardsim/world.h"

typedef struct {
    shs_train_config_t cfg;
    const char *data_path;
    long steps;
    int check_ddp;
    long inject_bitflip;   /* step after which to flip a parameter bit (0: never) */
    int device_mem_given;
} train_opts_t;

static void train_usage(FILE *f) {
    shs_train_config_t d = shs_train_default_config();
    fprintf(f,
            "usage: shardsim train [options]\n"
            "\n"
            "Train a GPT-2-style model (byte vocabulary) on N simulated GPUs (threads).\n"
            "\n"
            "  --world N              ranks (simulated GPUs), 1..%d (default %d)\n"
            "  --strategy S           ddp | zero1 | zero2 | zero3 (default %s)\n"
            "  --data PATH            training text (default: built-in corpus)\n"
            "  --steps N              training steps (default 50)\n"
            "  --check ddp            also run DDP on the same data; compare loss and every\n"
            "                         parameter bit for bit after each step (exit 3 on a difference)\n"
            "  --layers L             transformer blocks (default %d)\n"
            "  --heads NH             attention heads, must divide channels (default %d)\n"
            "  --channels C           model width (default %d)\n"
            "  --context T            sequence length (default %d)\n"
            "  --micro-batch B        sequences per rank per step (default %d)\n"
            "  --optimizer O          adamw | sgd (default adamw)\n"
            "  --lr X                 learning rate (default 1e-3)\n"
            "  --weight-decay X       (default: 0.01 adamw, 0 sgd)\n"
            "  --beta1 X, --beta2 X, --eps X   AdamW (defaults 0.9, 0.999, 1e-8)\n"
            "  --momentum X           SGD momentum (default 0)\n"
            "  --seed N               initialization and data order (default %llu)\n"
            "  --device-mem SIZE      memory per simulated GPU, e.g. 80GiB, 512MiB\n"
            "                         (default: this machine's RAM x 0.75 shared by the ranks)\n"
            "  --bucket-mb X          DDP gradient bucket size in MiB (default 25)\n"
            "  --timeout SEC          collective timeout (default %d)\n"
            "  --inject-bitflip STEP  after step STEP flip the lowest bit of the last wte element\n"
            "                         in the checked run (shows what --check reports)\n"
            "  -h, --help             this text\n",
            SHS_MAX_WORLD, d.world_size, shs_strategy_name(d.strategy), d.model.num_layers, d.model.num_heads,
            d.model.channels, d.model.context, d.micro_batch, (unsigned long long)d.seed,
            SHS_COMM_DEFAULT_TIMEOUT_MS / 1000);
}

static int usage_error(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "shardsim: error: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see 'shardsim train --help')\n");
    return SIM_EXIT_USAGE;
}

/* Parse argv into o. Returns -1 to continue, or an exit code. */
static int parse_train_args(int argc, char **argv, train_opts_t *o) {
    char err[256];
    int wd_given = 0;
    double wd = 0;
    o->cfg = shs_train_default_config();
    o->steps = 50;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            train_usage(stdout);
            return SIM_EXIT_OK;
        }
        if (strncmp(arg, "--", 2) != 0) return usage_error("unexpected argument '%s'%s", arg, "");
        char name[64];
        const char *val = NULL, *eq = strchr(arg, '=');
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
            if (i + 1 < argc) val = argv[i + 1];
        }
        if (!val) return usage_error("option %s needs a value%s", name, "");
        long iv;
        double fv;
        int bad = 0;
        shs_train_config_t *c = &o->cfg;
#define INT_OPT(opt, lo, hi, dst) \
    else if (strcmp(name, opt) == 0) { if (sim_parse_int(val, lo, hi, &iv, err, sizeof err)) bad = 1; else dst = iv; }
#define FLT_OPT(opt, lo, hi, dst) \
    else if (strcmp(name, opt) == 0) { if (sim_parse_float(val, lo, hi, &fv, err, sizeof err)) bad = 1; else dst = (float)fv; }
        if (0) {}
        INT_OPT("--world", 1, SHS_MAX_WORLD, c->world_size)
        INT_OPT("--steps", 0, 100000000, o->steps)
        INT_OPT("--inject-bitflip", 1, 100000000, o->inject_bitflip)
        INT_OPT("--layers", 1, SHS_GPT_MAX_LAYERS, c->model.num_layers)
        INT_OPT("--heads", 1, 65536, c->model.num_heads)
        INT_OPT("--channels", 1, 65536, c->model.channels)
        INT_OPT("--context", 1, 65536, c->model.context)
        INT_OPT("--micro-batch", 1, 65536, c->micro_batch)
        FLT_OPT("--lr", 0, 1e6, c->optim.lr)
        FLT_OPT("--beta1", 0, 1, c->optim.beta1)
        FLT_OPT("--beta2", 0, 1, c->optim.beta2)
        FLT_OPT("--eps", 0, 1, c->optim.eps)
        FLT_OPT("--momentum", 0, 1, c->optim.momentum)
        else if (strcmp(name, "--seed") == 0) {
            if (sim_parse_int(val, 0, LONG_MAX, &iv, err, sizeof err)) bad = 1;
            else c->seed = (uint64_t)iv;
        } else if (strcmp(name, "--weight-decay") == 0) {
            if (sim_parse_float(val, 0, 1e6, &wd, err, sizeof err)) bad = 1;
            else wd_given = 1;
        } else if (strcmp(name, "--timeout") == 0) {
            if (sim_parse_float(val, 0.001, 86400, &fv, err, sizeof err)) bad = 1;
            else c->timeout_ms = (int)ceil(fv * 1000.0);
        } else if (strcmp(name, "--bucket-mb") == 0) {
            if (sim_parse_float(val, 0.001, 1048576, &fv, err, sizeof err)) bad = 1;
            else c->bucket_bytes = (size_t)(fv * 1048576.0);
        } else if (strcmp(name, "--device-mem") == 0) {
            if (shs_parse_bytes(val, &c->device_mem, err, sizeof err)) bad = 1;
            else o->device_mem_given = 1;
        } else if (strcmp(name, "--strategy") == 0) {
            if (shs_strategy_parse(val, &c->strategy))
                return usage_error("unknown strategy '%s'%s: use ddp, zero1, zero2 or zero3", val, "");
        } else if (strcmp(name, "--optimizer") == 0) {
            shs_optim_kind_t k;
            if (shs_optim_parse(val, &k)) return usage_error("unknown optimizer '%s'%s: use adamw or sgd", val, "");
            float lr = c->optim.lr;
            c->optim = shs_optim_default(k);
            c->optim.lr = lr;
        } else if (strcmp(name, "--data") == 0) {
            o->data_path = val;
        } else if (strcmp(name, "--check") == 0) {
            if (strcmp(val, "ddp") != 0) return usage_error("--check takes 'ddp' (got '%s')%s", val, "");
            o->check_ddp = 1;
        } else {
            return usage_error("unknown option '%s'%s", name, "");
        }
#undef INT_OPT
#undef FLT_OPT
        if (bad) return usage_error("%s: %s", name, err);
        if (!eq) i++;
    }
    if (wd_given) o->cfg.optim.weight_decay = (float)wd;
    if (o->cfg.model.channels % o->cfg.model.num_heads != 0) {
        char h[16], c[16];
        snprintf(h, sizeof h, "%d", o->cfg.model.num_heads);
        snprintf(c, sizeof c, "%d", o->cfg.model.channels);
        return usage_error("--heads %s must divide --channels %s", h, c);
    }
    return -1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_summary(const shs_trainer_t *t, float final_loss, long steps) {
    int n = shs_trainer_world_size(t);
    char b[32];
    printf("\nsummary\n  final loss %.6f after %ld steps\n", final_loss, steps);
    printf("  peak device memory per rank (MiB)\n    %-6s", "rank");
    for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11s", shs_mem_category_name((shs_mem_category_t)c));
    printf(" %11s\n", "total");
    int shown = n <= 16 ? n : 8;
    for (int r = 0; r < n; r++) {
        if (r == shown && r < n - 1) {
            printf("    ... (%d more ranks)\n", n - shown - 1);
            r = n - 1;
        }
        shs_mem_stats_t m;
        shs_trainer_mem_stats(t, r, &m);
        printf("    %-6d", r);
        for (int c = 0; c < SHS_MEM_NUM_CATEGORIES; c++) printf(" %11.3f", (double)m.peak[c] / 1048576.0);
        printf(" %11.3f\n", (double)m.total_peak / 1048576.0);
    }
    shs_comm_stats_t cs, sum = {0};
    for (int r = 0; r < n; r++) {
        shs_trainer_comm_stats(t, r, &cs);
        for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
            sum.calls[op] += cs.calls[op];
            sum.bytes[op] += cs.bytes[op];
            sum.bytes_sent[op] += cs.bytes_sent[op];
        }
    }
    printf("  communication per rank over the run (bytes sent: ring algorithm, as nccl-tests busbw)\n");
    printf("    %-16s %8s %14s %14s\n", "collective", "calls", "buffer", "sent/rank");
    for (int op = 0; op < SHS_NUM_COLL_OPS; op++) {
        if (!sum.calls[op]) continue;
        char b2[32];
        printf("    %-16s %8llu %14s %14s\n", shs_coll_op_name((shs_coll_op_t)op),
               (unsigned long long)(sum.calls[op] / (uint64_t)n), shs_format_bytes(b, sizeof b, (double)sum.bytes[op] / n),
               shs_format_bytes(b2, sizeof b2, (double)sum.bytes_sent[op] / n));
    }
}

static void report_error(const char *what) {
    fprintf(stderr, "shardsim: error: %s%s%s\n", what ? what : "", what ? ": " : "", shs_last_error());
}

int sim_cmd_train(int argc, char **argv) {
    train_opts_t o = {0};
    int rc = parse_train_args(argc, argv, &o);
    if (rc >= 0) return rc;
    shs_train_config_t *cfg = &o.cfg;

    if (!o.device_mem_given) {
        /* Simulated devices live in host RAM: share 3/4 of it, so an oversized
         * model or world fails with a clean out-of-memory error naming the rank. */
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (ram > 0) cfg->device_mem = (size_t)(ram * 0.75 / cfg->world_size);
    }

    shs_corpus_t corpus;
    if (o.data_path) {
        if (shs_corpus_load(&corpus, o.data_path) != SHS_OK) {
            report_error(NULL);
            return SIM_EXIT_ERROR;
        }
    } else {
        shs_corpus_builtin(&corpus);
    }

    shs_trainer_t *main_run = NULL, *ref_run = NULL;
    float *snap_a = NULL, *snap_b = NULL;
    int exit_code = SIM_EXIT_ERROR;
    char b1[32], b2[32];

    if (shs_trainer_create(&main_run, cfg, &corpus) != SHS_OK) {
        report_error(NULL);
        if (!o.device_mem_given && strstr(shs_last_error(), "out of device memory"))
            fprintf(stderr, "shardsim: note: the %d simulated devices share this machine's RAM (%s each); "
                            "use a smaller --world or model, or set --device-mem\n",
                    cfg->world_size, shs_format_bytes(b1, sizeof b1, (double)cfg->device_mem));
        goto done;
    }
    const shs_gpt_layout_t *lo = shs_trainer_layout(main_run);
    printf("shardsim train: %d ranks (cpu), strategy %s, model L=%d C=%d NH=%d T=%d, %.3fM params in %d units\n",
           cfg->world_size, shs_strategy_name(cfg->strategy), cfg->model.num_layers, cfg->model.channels,
           cfg->model.num_heads, cfg->model.context, (double)lo->num_params / 1e6, lo->num_units);
    printf("  data %s (%s), micro-batch %d x %d tokens per rank, %s lr %g, seed %llu, device memory %s per rank\n",
           corpus.source, shs_format_bytes(b1, sizeof b1, (double)corpus.len), cfg->micro_batch, cfg->model.context,
           shs_optim_name(cfg->optim.kind), (double)cfg->optim.lr, (unsigned long long)cfg->seed,
           cfg->device_mem == SIZE_MAX ? "unlimited" : shs_format_bytes(b2, sizeof b2, (double)cfg->device_mem));
    if (o.check_ddp) {
        shs_train_config_t rc_cfg = *cfg;
        rc_cfg.strategy = SHS_DDP;
        if (shs_trainer_create(&ref_run, &rc_cfg, &corpus) != SHS_OK) {
            report_error("reference DDP run");
            goto done;
        }
        size_t len = shs_trainer_snapshot_len(main_run);
        snap_a = malloc(len * sizeof(float));
        snap_b = malloc(len * sizeof(float));
        if (!snap_a || !snap_b) {
            fprintf(stderr, "shardsim: error: out of host memory for --check snapshots\n");
            goto done;
        }
        printf("  check: DDP on the same data, loss and all %zu parameters compared bit for bit each step\n",
               (size_t)lo->num_params);
    }
    fflush(stdout);

    float loss = NAN;
    double total_time = 0;
    long tokens_per_step = (long)cfg->world_size * cfg->micro_batch * cfg->model.context;
    double run_start = now_s();
    for (long step = 0; step < o.steps; step++) {
        double t0 = now_s();
        if (shs_trainer_step(main_run, &loss) != SHS_OK) {
            char what[64];
            snprintf(what, sizeof what, "step %ld", step + 1);
            report_error(what);
            goto done;
        }
        double dt = now_s() - t0;
        total_time += dt;
        printf("step %*ld/%ld | loss %.6f | %8.1f ms | %7.0f tok/s", (int)snprintf(NULL, 0, "%ld", o.steps), step + 1,
               o.steps, (double)loss, dt * 1e3, (double)tokens_per_step / dt);
        if (o.inject_bitflip == step + 1) {
            size_t last_wte = lo->tensors[0].numel - 1;
            if (shs_trainer_flip_param_bit(main_run, 0, last_wte) != SHS_OK) {
                printf("\n");
                report_error("bit flip");
                goto done;
            }
        }
        if (ref_run) {
            float ref_loss;
            shs_param_diff_t diff;
            if (shs_trainer_step(ref_run, &ref_loss) != SHS_OK) {
                printf("\n");
                report_error("reference DDP run");
                goto done;
            }
            if (shs_trainer_snapshot(main_run, snap_a) != SHS_OK || shs_trainer_snapshot(ref_run, snap_b) != SHS_OK) {
                printf("\n");
                report_error("snapshot");
                goto done;
            }
            if (memcmp(&loss, &ref_loss, sizeof loss) != 0) {
                printf(" | ddp check: LOSS DIFFERS\n");
                fprintf(stderr, "shardsim: check failed at step %ld: loss %.9g (%s) != %.9g (ddp)\n", step + 1,
                        (double)loss, shs_strategy_name(cfg->strategy), (double)ref_loss);
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            if (!shs_compare_snapshots(lo, cfg->world_size, snap_a, snap_b, &diff)) {
                printf(" | ddp check: PARAMETERS DIFFER\n");
                char where[160];
                if (diff.tensor >= 0) {
                    const shs_tensor_info_t *ti = &lo->tensors[diff.tensor];
                    snprintf(where, sizeof where, "tensor %s, element %zu (row %zu, col %zu)", ti->name, diff.index,
                             diff.index / (size_t)ti->cols, diff.index % (size_t)ti->cols);
                } else {
                    snprintf(where, sizeof where, "padding element %zu (must stay 0)", diff.index);
                }
                fprintf(stderr, "shardsim: check failed at step %ld: first difference in unit %s, %s: %.9g (%s) != %.9g (ddp)\n",
                        step + 1, lo->units[diff.unit].name, where, (double)diff.a, shs_strategy_name(cfg->strategy),
                        (double)diff.b);
                exit_code = SIM_EXIT_NOT_EQUAL;
                goto done;
            }
            printf(" | ddp check: bit-identical");
        }
        printf(" | eta %.0f s\n", (now_s() - run_start) / (double)(step + 1) * (double)(o.steps - step - 1));
        fflush(stdout);
    }
    if (o.steps > 0)
        printf("mean step time %.1f ms\n", total_time / (double)o.steps * 1e3);
    print_summary(main_run, loss, o.steps);
    if (ref_run) printf("check: %s matched DDP bit for bit at all %ld steps\n", shs_strategy_name(cfg->strategy), o.steps);
    exit_code = SIM_EXIT_OK;
done:
    fflush(stdout);
    shs_trainer_destroy(ref_run);
    shs_trainer_destroy(main_run);
    free(snap_a);
    free(snap_b);
    shs_corpus_free(&corpus);
    return exit_code;
}
