/* encoder_groups.c - the token grouping behind every backend's encoder
 * backward: positions sorted by (token, position) so that each embedding row
 * is summed by one thread in increasing position (device.h's order).
 * What it is not: the sums themselves (kernel_math.h, run by each backend).
 */
#include <stdlib.h>

#include "device/device_impl.h"

typedef struct { int32_t tok, pos; } tok_pos_t;

static int cmp_tok_pos(const void *x, const void *y) {
    const tok_pos_t *a = x, *b = y;
    if (a->tok != b->tok) return a->tok < b->tok ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

int shs__encoder_groups(const int32_t *tokens, int BT, int32_t *groups) {
    tok_pos_t *order = malloc(((size_t)BT + 1) * sizeof *order);
    SHS_ASSERT(order != NULL);
    for (int i = 0; i < BT; i++) {
        SHS_ASSERT(tokens[i] >= 0);
        order[i] = (tok_pos_t){tokens[i], i};
    }
    qsort(order, (size_t)BT, sizeof *order, cmp_tok_pos);
    int32_t *pos = groups, *group_start = groups + BT;
    int ngroups = 0;
    for (int i = 0; i < BT; i++) {
        pos[i] = order[i].pos;
        if (i == 0 || order[i].tok != order[i - 1].tok) group_start[ngroups++] = i;
    }
    group_start[ngroups] = BT;
    int32_t *group_tok = group_start + ngroups + 1;
    for (int g = 0; g < ngroups; g++) group_tok[g] = order[group_start[g]].tok;
    free(order);
    return ngroups;
}
