/* units.c - byte sizes with units: parsing and rendering (units.h). */
#include "shardsim/units.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int shs_parse_bytes(const char *s, size_t *out, char *err, size_t errlen) {
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1},          {"B", 1},          {"K", 0x1p10},   {"KiB", 0x1p10}, {"M", 0x1p20},
        {"MiB", 0x1p20},  {"G", 0x1p30},     {"GiB", 0x1p30}, {"T", 0x1p40},   {"TiB", 0x1p40},
        {"KB", 1e3},      {"MB", 1e6},       {"GB", 1e9},     {"TB", 1e12},
    };
    if (strcasecmp(s, "unlimited") == 0) {
        *out = SIZE_MAX;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0) {
        snprintf(err, errlen, "'%s' is not a size (e.g. 80GiB, 512MiB)", s);
        return -1;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) != 0) continue;
        double bytes = v * units[i].mult;
        if (bytes >= 0x1p63) {
            snprintf(err, errlen, "size '%s' is too large", s);
            return -1;
        }
        *out = (size_t)bytes;
        return 0;
    }
    snprintf(err, errlen, "'%s' has an unknown unit (use B, K/KiB, M/MiB, G/GiB, T/TiB: powers of 1024; "
             "KB, MB, GB, TB: powers of 1000; case matters)", s);
    return -1;
}

const char *shs_format_bytes(char *buf, size_t n, double bytes) {
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (bytes >= 1024.0 && i < 5) { bytes /= 1024.0; i++; }
    if (i == 0) snprintf(buf, n, "%.0f B", bytes);
    else snprintf(buf, n, "%.2f %s", bytes, u[i]);
    return buf;
}
