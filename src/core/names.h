/* names.h - lookups in the name column an X-macro table generates (the
 * tables live in the public headers: SHS_REDOP_MAP, SHS_COLL_OP_MAP, ...).
 * What it is not: the tables themselves. */
#ifndef SHARDSIM_CORE_NAMES_H
#define SHARDSIM_CORE_NAMES_H

#include <string.h>

/* names[v] for 0 <= v < n, else `invalid`. */
static inline const char *shs__name_of(const char *const *names, int n, int v, const char *invalid) {
    return v >= 0 && v < n ? names[v] : invalid;
}

/* The index of `name` in names[0..n), or -1 (also for NULL). */
static inline int shs__name_find(const char *const *names, int n, const char *name) {
    if (!name) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

#endif
