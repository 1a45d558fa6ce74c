/* json_object.h - a configuration file's JSON text parsed as shardsim's
 * readers of config files want it (jansson).
 *
 * What it is: one place for the strict parse every config reader does
 * (ASTRA-sim system JSON, Hugging Face config.json, DeepSpeed ds_config):
 * duplicate keys refused (JSON_REJECT_DUPLICATES, as a later duplicate
 * would silently win in Python's json), a malformed text named by line,
 * and a root that must be an object.
 * What it is not: a reader of any one format's keys, or of traces (the
 * trace importers parse with their own position names).
 */
#ifndef SHARDSIM_CORE_JSON_OBJECT_H
#define SHARDSIM_CORE_JSON_OBJECT_H

#include <stddef.h>

#include "shardsim/status.h"

#ifdef SHS_HAVE_JANSSON
#include <jansson.h>

/* Parse `len` bytes of `text`, named `name` in errors, into *root (a new
 * reference: json_decref it). `what` says what the object holds, for the
 * error when the root is not an object ("system keys", "config keys").
 * Errors: SHS_PARSE "NAME:LINE: malformed JSON: ..." (duplicates included)
 * or "NAME: want a JSON object of WHAT"; *root is NULL then. */
shs_status_t shs__json_object_parse(const char *text, size_t len, const char *name, const char *what, json_t **root);
/* Read the regular file `path` (shs__read_file: FIFOs, devices and
 * directories refused by kind) and parse it as above, naming it by path.
 * Errors: SHS_IO, SHS_HOST_OOM, and those of shs__json_object_parse. */
shs_status_t shs__json_object_load(const char *path, const char *what, json_t **root);
#endif

#endif
