/* safetensors.h - export of full (unsharded) weights as a safetensors file.
 *
 * What it is: a writer of the safetensors format (Hugging Face): 8 bytes
 * little-endian u64 = header length H; H bytes of JSON, padded with spaces to
 * a multiple of 8; then the tensors' data, back to back, little-endian.
 * The JSON maps each tensor name to {"dtype":"F32","shape":[...],
 * "data_offsets":[begin,end]} (bytes, relative to the data start), plus a
 * "__metadata__" object of string values. Tensors keep the layout's names
 * (GPT-2's "h.0.attn.c_attn.weight", ...), except "wte" and "wpe", which
 * become "wte.weight" and "wpe.weight" as in HF GPT2Model's state_dict.
 * Shapes are the layout's (rows, cols), vectors (cols == 1) 1-D; a
 * zero-size tensor has a 0 in its shape and begin == end. Weights are stored
 * as (out, in) like nn.Linear; HF GPT-2's Conv1D keeps the transpose.
 * The file is written crash-safe (temp, fsync, rename).
 * What it is not: a reader, or an exporter of optimizer state.
 */
#ifndef SHARDSIM_SAFETENSORS_H
#define SHARDSIM_SAFETENSORS_H

#include "shardsim/layout.h"
#include "shardsim/status.h"
#include "shardsim/train.h"

/* Write `path` from `units[u]` (unit u's numel real elements, no padding)
 * for every unit of `lo`. `metadata`: NULL, or NULL-terminated key, value,
 * key, value, ... strings for "__metadata__". Errors: SHS_IO naming the
 * path and the reason; SHS_INVALID_ARG for duplicate tensor names;
 * SHS_HOST_OOM. */
shs_status_t shs_safetensors_write(const char *path, const shs_layout_t *lo, const float *const *units,
                                   const char *const *metadata);

/* The trainer's current parameters (gathered as by shs_trainer_snapshot) to
 * `path`, with metadata format "pt", producer "shardsim" and the step.
 * Errors as shs_safetensors_write, and a rank's snapshot error. */
shs_status_t shs_export_safetensors(shs_trainer_t *t, const char *path);

/* The safetensors name of a layout tensor ("wte" -> "wte.weight", "wpe" ->
 * "wpe.weight", others unchanged) into out (outlen bytes). */
void shs_safetensors_name(const char *layout_name, char *out, size_t outlen);

#endif
