/* model_file.h - user-defined models from a model-description file.
 *
 * What it is: a parser for a small text format that lists layers (Linear,
 * LayerNorm, GELU, ReLU, Embedding) with wrap-unit boundaries and weight
 * tying, the parameter layout it implies (layout.h), and a model (model.h)
 * that runs it. Users reproduce their own model's parameter layout with it;
 * tests build odd layouts (zero-size and tiny tensors, tied weights) with it.
 * The format is documented in README.md ("Model-description files").
 * What it is not: a general graph language; layers run in sequence.
 */
#ifndef SHARDSIM_MODEL_FILE_H
#define SHARDSIM_MODEL_FILE_H

#include "shardsim/device.h"
#include "shardsim/layout.h"
#include "shardsim/model.h"
#include "shardsim/status.h"

typedef struct shs_model_file shs_model_file_t;

/* Parse a description from a file / from text (`source` names it in
 * errors). Errors: SHS_IO (file); SHS_PARSE with the text
 * "source:line: what is wrong" ("source: what" for the whole file: empty,
 * no used layer, over 1 MiB, a NUL byte); SHS_HOST_OOM. Free with
 * shs_model_file_free. */
shs_status_t shs_model_file_load(shs_model_file_t **out, const char *path);
shs_status_t shs_model_file_parse(shs_model_file_t **out, const char *text, const char *source);
void shs_model_file_free(shs_model_file_t *nd);

/* The parameter layout the description implies. Errors: SHS_HOST_OOM. */
shs_status_t shs_model_file_layout_create(shs_layout_t *layout, const shs_model_file_t *nd);

/* The model on `dev` for micro-batches of B sequences of T positions;
 * `layout` from shs_model_file_layout_create(nd); nd and layout must outlive
 * it. Input per position (tokens are bytes): an Embedding(V, C) first looks
 * up row token % V; any other first layer of width `in` gets the one-hot
 * vector of token % in. Loss: mean softmax cross-entropy of the last used
 * layer's K outputs against target % K. Activations are on the device
 * (category ACTIVATIONS). forward acquires each unit that has parameters,
 * in order, and the Embedding's unit again around a tied Linear; backward
 * visits every unit (unused and empty ones too) in reverse: acquire_grads,
 * its layers, then grads_ready exactly once (a tied Embedding's unit is
 * also acquired by the tied Linear, and reports ready after both uses).
 * Errors: SHS_OUT_OF_MEMORY, SHS_INVALID_ARG (a layout of another
 * description, B or T < 1, activations over 2^31 elements). */
shs_status_t shs_model_file_model_create(shs_model_t **out, const shs_model_file_t *nd, const shs_layout_t *layout,
                                      shs_device_t *dev, int B, int T);

#endif
