/* args.h - strict parsing of command-line values: integers and floats
 * (byte sizes: units.h). Each returns 0 on success, -1 with a message in err.
 * Also the usage-error line the commands print for bad arguments, and the
 * check that a command's report reached stdout. */
#ifndef SHARDSIM_SIM_ARGS_H
#define SHARDSIM_SIM_ARGS_H

#include <stddef.h>

int sim_parse_int(const char *s, long min, long max, long *out, char *err, size_t errlen);
int sim_parse_float(const char *s, double min, double max, double *out, char *err, size_t errlen);

/* Print "shardsim: error: MSG[ ARG] (see 'shardsim CMD --help')" to stderr;
 * returns SIM_EXIT_USAGE. arg may be NULL. */
int sim_usage_error(const char *cmd, const char *msg, const char *arg);

/* Flush stdout; if it failed (a full disk, a closed pipe) print "cannot write
 * the output" once (the stream's error is cleared after) and return
 * SIM_EXIT_ERROR in place of SIM_EXIT_OK; other codes pass through. */
int sim_finish_output(int rc);

#endif
