/* args.h - the command line's shared pieces: strict parsing of integers and
 * floats (byte sizes: units.h), one reader of options and their values used
 * by every command (NAME VALUE, NAME=VALUE, booleans bare or with a word),
 * lists, and the one error format "shardsim COMMAND: error: ...".
 * Each parse_* returns 0 on success, -1 with a message in err. */
#ifndef SHARDSIM_SIM_ARGS_H
#define SHARDSIM_SIM_ARGS_H

#include <stddef.h>
#include <stdio.h>

int sim_parse_int(const char *s, long min, long max, long *out, char *err, size_t errlen);
int sim_parse_float(const char *s, double min, double max, double *out, char *err, size_t errlen);
/* --wrap (train, compare): "block" (*min_params 0: one unit per block) or
 * "size:N", N >= 1 (FSDP size_based_auto_wrap_policy, min_num_params N). */
int sim_parse_wrap(const char *s, size_t *min_params, char *err, size_t errlen);

/* Print "shardsim CMD: error: MESSAGE" (printf format) to stderr: the one
 * error line of every command. cmd NULL: "shardsim: error: ..." (no command
 * known yet). MESSAGE is shown safe for a terminal and short, whatever the
 * user gave or a file held: a byte that is no printable character (a
 * control, DEL, invalid UTF-8; valid UTF-8 stays) as \xHH; a run of more
 * than SIM_SHOWN_RUN bytes without a space as its first 5/8 and last 1/4
 * around "[... N bytes not shown ...]"; at most SIM_SHOWN_MAX bytes in all
 * (then "[... N bytes not shown]"). */
#define SIM_SHOWN_RUN 256
#define SIM_SHOWN_MAX 2048
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

/* ---- the option table: one row per option, one parser and one --help for
 * every command. A command lists its rows (shared ones from options.h) in
 * an array indexed by its own option ids; sim_opts_parse checks every value
 * against its row (type, range) with errors naming the option, and the
 * command then applies sim_opts_t in an order of its own choosing. */

typedef enum {
    SIM_OPT_INT,    /* integer in [lo, hi] */
    SIM_OPT_F32,    /* number in [lo, hi] (hi excluded with hi_open) that must not vanish as an f32 */
    SIM_OPT_FLOAT,  /* number in [lo, hi] (hi excluded with hi_open) */
    SIM_OPT_SIZE,   /* a byte size, e.g. 80GiB (units.h) */
    SIM_OPT_STR,    /* text, checked by the command (keywords, paths) */
    SIM_OPT_BOOL    /* bare (true), or NAME=WORD / NAME WORD (sim_args_bool) */
} sim_opt_type_t;

typedef struct {
    const char *name;    /* "--world" */
    const char *alias;   /* a short form ("-o"), or NULL */
    sim_opt_type_t type;
    double lo, hi;       /* inclusive range of INT, F32, FLOAT */
    int hi_open;         /* F32, FLOAT: hi itself excluded */
    int repeat;          /* every occurrence goes to the command's callback (lists of runs) */
    const char *arg;     /* the value's name in --help ("N", "SIZE"); BOOL rows show [true|false] */
    const char *help;    /* --help text; '\n' continues on an indented line */
} sim_opt_t;

#define SIM_MAX_OPTIONS 96

/* The parsed options, indexed like the command's table. */
typedef struct {
    int given[SIM_MAX_OPTIONS];
    double num[SIM_MAX_OPTIONS];      /* INT, F32, FLOAT, BOOL (0 or 1) */
    size_t bytes[SIM_MAX_OPTIONS];    /* SIZE */
    const char *str[SIM_MAX_OPTIONS]; /* the value's text (every type but BOOL) */
} sim_opts_t;

typedef struct {
    const char *cmd;               /* "train", for messages */
    const char *usage;             /* --help text before the options */
    const sim_opt_t *table;        /* rows; a row without a name is skipped */
    int n;
    const char *const *defaults;   /* NULL, or per row the default shown in --help (NULL: none) */
    /* Optional: a positional argument (id -1, a->argv[a->i]) or an occurrence
     * of a repeat row (its id, its checked value in opts). Returns -1 to go
     * on, else an exit code. NULL: positional arguments are refused. */
    int (*each)(void *ctx, sim_args_t *a, int id, const sim_opts_t *opts);
    void *ctx;
} sim_command_t;

/* Parse argv (argv[0] the command) into *o. -h/--help prints the help
 * (sim_opts_help) and returns SIM_EXIT_OK. An option given twice (by its
 * name or alias) is a usage error unless its row repeats: the last value
 * silently winning hides a typo in a long command line. Returns -1 to go
 * on, or the exit code after a usage error "shardsim CMD: error: NAME: ..." */
int sim_opts_parse(const sim_command_t *c, int argc, char **argv, sim_opts_t *o);

/* The --help text: c->usage, then one line (or more) per row, NAME ARG and
 * its help, with " (default D)" where c->defaults has D; then -h, --help;
 * then the command's examples (help_examples.h). */
void sim_opts_help(FILE *f, const sim_command_t *c);

/* Flush stdout; if it failed (a full disk, a closed pipe) print "cannot write
 * the output" once (the stream's error is cleared after) and return
 * SIM_EXIT_ERROR in place of SIM_EXIT_OK; other codes pass through. cmd as
 * sim_error's. */
int sim_finish_output(const char *cmd, int rc);

#endif
