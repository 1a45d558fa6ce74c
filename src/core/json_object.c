/* json_object.c - the strict parse of a config file's JSON (json_object.h). */
#include "core/json_object.h"

#include <stdlib.h>

#include "trace/trace_util.h" /* shs__read_file */

#ifdef SHS_HAVE_JANSSON
shs_status_t shs__json_object_parse(const char *text, size_t len, const char *name, const char *what, json_t **root) {
    json_error_t jerr;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!*root) return shs_set_error(SHS_PARSE, "%s:%d: malformed JSON: %s", name, jerr.line, jerr.text);
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return shs_set_error(SHS_PARSE, "%s: want a JSON object of %s", name, what);
    }
    return SHS_OK;
}

shs_status_t shs__json_object_load(const char *path, const char *what, json_t **root) {
    char *buf;
    size_t len;
    *root = NULL;
    SHS_CHECK(shs__read_file(path, &buf, &len));
    shs_status_t st = shs__json_object_parse(buf, len, path, what, root);
    free(buf);
    return st;
}
#else
typedef int shs__json_object_unused; /* ISO C wants a translation unit to declare something */
#endif
