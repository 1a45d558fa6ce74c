/* comm_meta.h - the meta backend's communicator and its extras: collectives that
 * are counted and move nothing, for one representative rank.
 *
 * What it is: a communicator handle that believes it is rank `rank` of
 * `nranks` while no other rank exists. Every collective, send and receive
 * passes the argument checks of comm.c, takes a sequence number (sends and
 * receives per peer), is counted in the handle's shs_comm_stats_t (calls and
 * bytes by op, exactly as on the thread backend) and returns SHS_OK at once
 * without reading or writing any buffer.
 * Because data-parallel ranks are symmetric, the one handle reproduces what
 * each real rank would count, so a world of 1024 ranks costs one thread.
 * Splits (shs_comm_split) need to know what the absent ranks pass: a color
 * function gives, for the k-th split on the handle (k from 0), every parent
 * rank's color and key; the child is again a meta communicator, ranked by
 * (key, parent rank) among the ranks of this rank's color, as ncclCommSplit.
 * The device side (shs_device_create_meta) is declared in device.h.
 * What it is not: a check of cross-rank consistency (there is only one rank)
 * or a network time model (compare's time model prices the counted calls).
 */
#ifndef SHARDSIM_COMM_META_H
#define SHARDSIM_COMM_META_H

#include <stddef.h>

#include "shardsim/comm.h"
#include "shardsim/device.h"

/* The color and key that parent rank `rank` passes in split number
 * `split_index` (0 for the handle's first split). Returns the color, or
 * SHS_SPLIT_NOCOLOR; sets *key. */
typedef int (*shs_meta_color_fn)(void *user, int split_index, int rank, int *key);

/* A meta communicator: rank `rank` (0 <= rank < nranks) of `nranks`, named
 * `name` (copied; NULL -> "world"). `color_fn` (may be NULL: every split then
 * fails with SHS_UNSUPPORTED) and `user` serve splits; children get none.
 * Errors: SHS_INVALID_ARG, SHS_HOST_OOM. */
shs_status_t shs_comm_create_meta(shs_comm_t **out, int nranks, int rank, const char *name,
                                  shs_meta_color_fn color_fn, void *user);
/* Whether `comm` is a meta communicator. */
int shs_comm_is_meta(const shs_comm_t *comm);
/* For a meta communicator made by a split: which split of its parent (0 for
 * the first); -1 for one made by shs_comm_create_meta or another backend.
 * A split child reports its calls to its parent's recorder. */
int shs_comm_meta_split_index(const shs_comm_t *comm);


#endif
