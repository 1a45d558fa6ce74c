/* carver.c - carving an allocation into buffers (carver.h). */
#include "model/carver.h"

void shs__carve(shs__carver_t *k, void *ptr, size_t n, size_t es) {
    if (es != k->es) return;
    void **p = ptr;
    *p = n && k->base ? k->base + k->cur : NULL;
    k->cur += n * es;
}
