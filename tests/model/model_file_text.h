/* model_file_text.h - what the model-file tests share: a description parsed
 * from a string that must succeed, and two descriptions (sizes [8, 0, 24]
 * with a trailing Linear(4, 0); a tied embedding). Include after <cmocka.h>.
 * Not a test; included by the test_model_file_*.c programs only. */
#ifndef SHARDSIM_TEST_MODEL_FILE_TEXT_H
#define SHARDSIM_TEST_MODEL_FILE_TEXT_H

#include "shardsim/model_file.h"

static inline shs_model_file_t *parse_ok(const char *text) {
    shs_model_file_t *nd = NULL;
    shs_status_t st = shs_model_file_parse(&nd, text, "m.txt");
    if (st != SHS_OK) fail_msg("parse failed: %s\n--- text:\n%s", shs_last_error(), text);
    assert_non_null(nd);
    return nd;
}

/* A zero-size layout: sizes [8, 0, 24] in one unit, a trailing Linear(4, 0). */
static const char zero_size_text[] =
    "# parameters of sizes [8, 0, 24], then a trailing Linear(4, 0)\n"
    "unit body\n"
    "Linear 2 4 nobias            # 0.weight (4, 2): 8\n"
    "Linear 4 0 nobias unused     # 1.weight (0, 4): 0, inside rank 0's shard at N = 2\n"
    "Linear 4 6 nobias            # 2.weight (6, 4): 24\n"
    "unit tail\n"
    "Linear 4 0 unused            # 3.weight (0, 4), 3.bias (0)\n";

static const char tied_text[] =
    "unit embed\n"
    "Embedding 10 4 name=wte\n"
    "unit body replicated\n"
    "LayerNorm 4 name=ln_f\n"
    "Linear 4 4\n"
    "ReLU\n"
    "unit head\n"
    "Linear 4 10 nobias tied=wte   # GPT-2's LM head: logits = x wte^T\n";

#endif
