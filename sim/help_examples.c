/* help_examples.c - the examples of every command's --help (see
 * help_examples.h). Each must run as written and finish in seconds. */
#include "help_examples.h"

#include <string.h>

typedef struct {
    const char *cmd;    /* NULL: the program's usage */
    const char *args;   /* after "shardsim " */
    const char *what;
} example_t;

static const example_t examples[] = {
    {NULL, "train --check ddp --steps 3", "train ZeRO-3 on 4 simulated GPUs, each step checked against DDP bit for bit"},
    {NULL, "compare --model gpt3-175b --world 1024", "every strategy's memory, traffic and step time for GPT-3 at 1024 GPUs"},
    {NULL, "train --help", "a command's options and examples"},
    {"train", "train --check ddp --steps 3", "ZeRO-3 (the default) on 4 simulated GPUs; every step's loss and parameters\n"
                                            "compared with DDP's bit for bit"},
    {"train", "train --world 2 --strategy SHARD_GRAD_OP --param-dtype bf16 --steps 3 --metrics steps.jsonl",
     "FSDP's name for zero3 keeping parameters from forward to backward, bf16\n"
     "parameters, a JSON line per step in steps.jsonl"},
    {"train", "train --world 3 --strategy 2 --grad-accum 2 --clip-grad-norm 1 --steps 2",
     "DeepSpeed's stage 2 (zero2), two micro-batches per step, gradients clipped\n"
     "at norm 1 as torch's clip_grad_norm_"},
    {"compare", "compare --model gpt3-175b --world 1024", "every strategy for GPT-3 175B at 1024 ranks: memory per rank, bytes, step time"},
    {"compare", "compare --model llama3-8b --world 64 --strategies zero2,zero3 --format csv",
     "two strategies for Llama 3 8B as CSV"},
    {"replay", "replay traces/recorded/zero3", "check a recorded ZeRO-3 run (4 rank files) for deadlocks and mismatches,\n"
                                               "then replay it on simulated GPUs"},
    {"bench", "bench --only coll --op all_reduce --world 4 --max-bytes 1M --seconds 0.05",
     "all-reduce over 4 threads up to 1 MiB, 0.05 s a row, beside this machine's memcpy"},
};

void sim_help_examples(FILE *f, const char *cmd) {
    int any = 0;
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        const example_t *e = &examples[i];
        if (cmd ? !e->cmd || strcmp(cmd, e->cmd) : e->cmd != NULL) continue;
        fprintf(f, "%s  shardsim %s\n", any++ ? "" : "\nexamples:\n", e->args);
        for (const char *w = e->what; *w;) {
            size_t len = strcspn(w, "\n");
            fprintf(f, "      %.*s\n", (int)len, w);
            w += len + (w[len] == '\n');
        }
    }
}
