/* carver.h - private to src/model/: one device allocation carved into a
 * model's buffers, in passes of one element size at a time (4, then 2,
 * then 1 byte), so that every buffer is aligned to its element without
 * padding. Run once with base NULL to count the bytes, allocate, run again
 * with the allocation. What it is not: an allocator (device.h). */
#ifndef SHARDSIM_MODEL_CARVER_H
#define SHARDSIM_MODEL_CARVER_H

#include <stddef.h>

typedef struct {
    char *base;                         /* NULL: count only */
    size_t cur;                         /* bytes so far */
    size_t es;                          /* this pass's element size */
} shs__carver_t;

/* In the pass of element size es: *(void **)ptr = the next n * es bytes
 * (NULL when n is 0 or base is NULL), counted into cur. Other passes: nothing. */
void shs__carve(shs__carver_t *k, void *ptr, size_t n, size_t es);

#endif
