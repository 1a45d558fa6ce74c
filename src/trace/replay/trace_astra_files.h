/* trace_astra_files.h - what ASTRA-sim's timing (trace_astra_model.c)
 * shares with its file readers (trace_astra_files.c), private to them.
 * What it is not: the public model (shardsim/trace_astra_model.h). */
#ifndef SHARDSIM_TRACE_ASTRA_FILES_H
#define SHARDSIM_TRACE_ASTRA_FILES_H

#include "shardsim/trace_astra_model.h"

/* The system JSON's key of each collective's implementation list. */
extern const char *const shs__astra_coll_keys[SHS_ASTRA_NUM_COLLS];

#endif
