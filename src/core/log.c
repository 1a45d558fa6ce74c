/* log.c - the levelled log of log.h: the environment read once, the filter,
 * and one formatted line per call.
 * What it is not: error detail (status.c). */
#include "shardsim/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"

#define ALL_SUBSYS ((1u << SHS_LOG_NUM_SUBSYS) - 1)

atomic_uint shs__log_mask[SHS_LOG_NUM_LEVELS] = {0, ALL_SUBSYS, ALL_SUBSYS, ALL_SUBSYS};

#define NAME_COL(id, name) name,
static const char *const level_names[] = {SHS_LOG_LEVEL_MAP(NAME_COL)};
static const char *const subsys_names[] = {SHS_LOG_SUBSYS_MAP(NAME_COL)};
#undef NAME_COL

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static _Atomic(FILE *) stream;
static _Thread_local int log_rank = -1;

/* The subsystem mask a comma list names; -1 with the bad word in `bad`. */
static long parse_subsys(const char *list, char *bad, size_t badlen) {
    if (!list || !*list) return ALL_SUBSYS;
    int invert = list[0] == '^';
    unsigned mask = 0;
    char word[32];
    for (const char *p = list + invert; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word - 1 ? n : sizeof word - 1), p);
        int k = shs__name_find(subsys_names, SHS_LOG_NUM_SUBSYS, word);
        if (strcmp(word, "ALL") == 0) mask = ALL_SUBSYS;
        else if (k >= 0) mask |= 1u << k;
        else {
            snprintf(bad, badlen, "%.*s", (int)n, p);
            return -1;
        }
        p += n + (p[n] == ',');
    }
    return invert ? ALL_SUBSYS & ~mask : mask;
}

static shs_status_t apply(const char *level, const char *subsys) {
    int lv = level && *level ? shs__name_find(level_names, SHS_LOG_NUM_LEVELS, level) : SHS_LOG_NONE;
    if (lv < 0)
        return shs_set_error(SHS_INVALID_ARG, "SHS_DEBUG=%s: unknown level (NONE, WARN, INFO or TRACE)", level);
    char bad[64];
    long mask = parse_subsys(subsys, bad, sizeof bad);
    if (mask < 0)
        return shs_set_error(SHS_INVALID_ARG, "SHS_DEBUG_SUBSYS=%s: unknown subsystem '%s' (ALL, comm, strategy, trace, "
                             "checkpoint, device, train; ^ first to exclude)", subsys, bad);
    /* WARN lines print whatever the subsystem filter (as NCCL's) */
    for (int l = SHS_LOG_WARN; l < SHS_LOG_NUM_LEVELS; l++)
        atomic_store_explicit(&shs__log_mask[l], l > lv ? 0u : l == SHS_LOG_WARN ? ALL_SUBSYS : (unsigned)mask,
                              memory_order_relaxed);
    return SHS_OK;
}

static void read_env(void) {
    const char *lv = getenv("SHS_DEBUG"), *ss = getenv("SHS_DEBUG_SUBSYS");
    if (apply(lv, ss) != SHS_OK) {
        fprintf(stderr, "shardsim: warning: %s; logging stays off\n", shs_last_error());
        apply(NULL, NULL);
    }
}

shs_status_t shs_log_configure(const char *level, const char *subsys) {
    pthread_once(&env_once, read_env); /* so that a later first SHS_LOG does not overwrite this */
    return apply(level, subsys);
}

int shs_log_enabled(shs_log_level_t level, unsigned subsys) {
    pthread_once(&env_once, read_env);
    if ((int)level <= SHS_LOG_NONE || level >= SHS_LOG_NUM_LEVELS) return 0;
    return (atomic_load_explicit(&shs__log_mask[level], memory_order_relaxed) & subsys) != 0;
}

void shs_log_set_rank(int rank) { log_rank = rank; }
void shs_log_set_stream(FILE *f) { atomic_store(&stream, f); }

void shs__log(shs_log_level_t level, int subsys_bit, const char *file, int line, const char *fmt, ...) {
    if (!shs_log_enabled(level, 1u << subsys_bit)) return; /* the first call reads the environment */
    char msg[1024], rank[16] = "-";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (log_rank >= 0) snprintf(rank, sizeof rank, "%d", log_rank);
    FILE *f = atomic_load(&stream);
    /* one fprintf per line: stdio locks the stream, so ranks' lines never interleave */
    fprintf(f ? f : stderr, "[rank %s] shardsim %s %s %s:%d: %s\n", rank, level_names[level],
            subsys_names[subsys_bit], file, line, msg);
}
