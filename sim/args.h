/* args.h - the command line's shared pieces: strict parsing of integers and
 * floats (byte sizes: units.h), one reader of options and their values used
 * by every command (NAME VALUE, NAME=VALUE, booleans bare or with a word),
 * lists, and the one error format "shardsim COMMAND: error: ...".
 * Each parse_* returns 0 on success, -1 with a message in err. */
#ifndef SHARDSIM_SIM_ARGS_H
#define SHARDSIM_SIM_ARGS_H

#include <stddef.h>

int sim_parse_int(const char *s, long min, long max, long *out, char *err, size_t errlen);
int sim_parse_float(const char *s, double min, double max, double *out, char *err, size_t errlen);
/* --wrap (train, compare): "block" (*min_params 0: one unit per block) or
 * "size:N", N >= 1 (FSDP size_based_auto_wrap_policy, min_num_params N). */
int sim_parse_wrap(const char *s, size_t *min_params, char *err, size_t errlen);

/* Print "shardsim CMD: error: MESSAGE" (printf format) to stderr: the one
 * error line of every command. cmd NULL: "shardsim: error: ..." (no command
 * known yet). */
void sim_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a hint that follows an error: "shardsim CMD: note: ...". */
void sim_note(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A usage error: sim_error's line ending in " (see 'shardsim CMD --help')";
 * returns SIM_EXIT_USAGE. */
int sim_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A boolean word: true, 1, yes -> 1; false, 0, no -> 0; anything else -1. */
int sim_bool_word(const char *s);

/* Walks argv for one command. At each option argument, name holds the
 * option (the text before any '='), eq the text after '=' (NULL if none). */
typedef struct {
    const char *cmd;       /* the command, for messages */
    int argc;
    char **argv;
    int i;                 /* the current argument */
    char name[64];
    const char *eq;
    int after_bare_bool;   /* index right after a boolean option that took no word (0: none) */
} sim_args_t;

sim_args_t sim_args_start(const char *cmd, int argc, char **argv);
/* Step to the next argument: 1 an option (name, eq set), 0 a positional
 * argument (argv[i]), -1 at the end. */
int sim_args_next(sim_args_t *a);
/* The current option's value: its text after '=', else the next argument
 * (consumed). A next argument that is itself an option ("--x", "-o"; not
 * "-1") is not a value: NAME=VALUE passes such a value. Returns -1 to go on,
 * or prints "option NAME needs a value" and returns SIM_EXIT_USAGE. */
int sim_args_value(sim_args_t *a, const char **val);
/* A boolean option: bare (true), NAME=WORD, or NAME WORD with a word of
 * sim_bool_word; a next argument that is no such word is left for the next
 * step. Returns -1 to go on, or SIM_EXIT_USAGE after an error for NAME=other. */
int sim_args_bool(sim_args_t *a, int *val);
/* Usage errors for the current argument: a positional the command does not
 * take (naming the boolean option before it, when one took no word), and an
 * option it does not know. */
int sim_args_unexpected(const sim_args_t *a);
int sim_args_unknown(const sim_args_t *a);

/* A comma-separated list option's value: refuses an empty list and empty
 * entries ("a,,b", "a,", ",a") with a usage error naming opt, else -1.
 * sim_list_next() then yields each entry into item (at most n-1 chars;
 * longer entries are truncated): 1 while entries remain, 0 at the end. */
int sim_list_check(const char *cmd, const char *opt, const char *list);
int sim_list_next(const char **p, char *item, size_t n);

/* Flush stdout; if it failed (a full disk, a closed pipe) print "cannot write
 * the output" once (the stream's error is cleared after) and return
 * SIM_EXIT_ERROR in place of SIM_EXIT_OK; other codes pass through. cmd as
 * sim_error's. */
int sim_finish_output(const char *cmd, int rc);

#endif
