/* model_file_impl.h - private to src/model/: a parsed model-description
 * file (layers, wrap units, tying), shared by the parser
 * (model_file_parse.c) and the layout and model it implies (model_file.c).
 * What it is not: the format (README.md, "Model-description files").
 */
#ifndef SHARDSIM_MODEL_FILE_IMPL_H
#define SHARDSIM_MODEL_FILE_IMPL_H

#include "shardsim/model_file.h"

#define ND_MAX_DIM 16777216        /* any size on a layer line */
#define ND_MAX_LINE 1024           /* characters per line */
#define ND_MAX_LAYERS 65536
#define ND_MAX_FILE ((size_t)1 << 20)
#define ND_NAME_MAX 32             /* layer and unit names, characters */

typedef enum { ND_LINEAR, ND_LAYERNORM, ND_GELU, ND_RELU, ND_EMBEDDING } nd_kind_t;

typedef struct {
    nd_kind_t kind;
    int line;
    int unit;
    int size[2];            /* Linear (in, out); LayerNorm (C); Embedding (V, C) */
    int bias;               /* Linear has its own bias (out) */
    int used;               /* runs in the forward pass */
    int tied;               /* Linear: index of the Embedding whose weight it uses, else -1 */
    int user_named;
    char name[ND_NAME_MAX + 1];  /* user name, or the layer's index as in nn.Sequential */
    int in_w, out_w;        /* widths in the forward pass (used layers) */
    int weight, bias_t;     /* layout tensor indices of its own tensors, -1 if none */
} nd_layer_t;

typedef struct {
    char name[ND_NAME_MAX];
    int line;
    int replicated;
    int first_layer, num_layers;
    int fwd_params;         /* its parameters are read in the forward pass */
    int bwd_params;         /* ... and in the backward pass */
} nd_unit_t;

struct shs_model_file {
    char source[256];
    nd_layer_t *layers;
    int num_layers, cap_layers;
    nd_unit_t *units;
    int num_units, cap_units;
    int num_tensors;
    int first_used, last_used;   /* layer indices */
    int in_w;                    /* width of the input vector when the first used layer is not an Embedding */
    int out_w;                   /* K */
    int max_w;                   /* widest activation */
};

#endif
