/* args.h - strict parsing of command-line values: integers and floats
 * (byte sizes: units.h). Each returns 0 on success, -1 with a message in err.
 * Also the usage-error line the commands print for bad arguments. */
#ifndef SHARDSIM_SIM_ARGS_H
#define SHARDSIM_SIM_ARGS_H

#include <stddef.h>

int sim_parse_int(const char *s, long min, long max, long *out, char *err, size_t errlen);
int sim_parse_float(const char *s, double min, double max, double *out, char *err, size_t errlen);

/* Print "shardsim: error: MSG[ ARG] (see 'shardsim CMD --help')" to stderr;
 * returns SIM_EXIT_USAGE. arg may be NULL. */
int sim_usage_error(const char *cmd, const char *msg, const char *arg);

#endif
