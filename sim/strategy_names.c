/* strategy_names.c - strategy names and the aliases other tools use (see
 * strategy_names.h). */
#include "strategy_names.h"

#include <string.h>

#include "args.h"

typedef struct {
    const char *name;
    shs_strategy_kind_t kind;
    int reshard;
    const char *maps;
} alias_t;

#define ALIAS_ROW(name, kind, reshard, maps) {name, kind, reshard, maps},
static const alias_t aliases[] = {SIM_STRATEGY_ALIASES(ALIAS_ROW)};
#undef ALIAS_ROW

int sim_strategy_lookup(const char *name, sim_strategy_name_t *out) {
    shs_strategy_kind_t k;
    if (shs_strategy_parse(name, &k) == 0) {
        *out = (sim_strategy_name_t){name, NULL, k, -1};
        return 0;
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].name) == 0) {
            *out = (sim_strategy_name_t){name, aliases[i].maps, aliases[i].kind, aliases[i].reshard};
            return 0;
        }
    return -1;
}

int sim_strategy_apply(const char *cmd, const sim_strategy_name_t *n, int reshard_given, shs_strategy_config_t *s) {
    s->kind = n->kind;
    if (n->reshard < 0) return -1;
    if (reshard_given >= 0 && reshard_given != n->reshard)
        return sim_usage_error(cmd, "--strategy %s %s; --reshard-after-forward %s contradicts it (give one of them)",
                               n->name, n->reshard ? "frees gathered parameters after forward"
                                                   : "keeps gathered parameters from forward to backward",
                               reshard_given ? "true" : "false");
    s->keep_after_forward = !n->reshard;
    return -1;
}

int sim_strategy_unknown(const char *cmd, const char *opt, const char *name) {
    return sim_usage_error(cmd, "%s: unknown strategy '%s': use ddp, zero1, zero2, zero3, hybrid_shard or "
                                "hybrid_shard_zero2, or another tool's name for one (FSDP's FULL_SHARD, SHARD_GRAD_OP, "
                                "NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2; FairScale's oss, sdp; DeepSpeed's stage "
                                "0-3; listed in --help)", opt, name);
}
