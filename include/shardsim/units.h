/* units.h - byte sizes with units, for options, configs and reports.
 * What it is not: a general formatting library. */
#ifndef SHARDSIM_UNITS_H
#define SHARDSIM_UNITS_H

#include <stddef.h>

/* Parse "80GiB", "512MiB", "4K" (K/M/G/T and KiB.. are binary), "1GB"
 * (KB/MB/GB/TB are decimal), "1000" or "1000B" (bytes), or "unlimited"
 * (SIZE_MAX). Returns 0, or -1 with a message naming the input in err. */
int shs_parse_bytes(const char *s, size_t *out, char *err, size_t errlen);
/* Render bytes as "512 B", "1.50 GiB" into buf (n bytes); returns buf. */
const char *shs_format_bytes(char *buf, size_t n, double bytes);

#endif
