/*
 * sqz/options.h - options declared as data: one table of sqz_opt rows (name, type, range,
 * default, where the value is stored, help) drives parsing, defaults, errors and help text,
 * both for the parts of a pass SPEC ("int4:gptq:g128:damp=0.02") and for a command line
 * ("--calib-samples 16"). Nothing is parsed by hand elsewhere, so nothing goes undocumented.
 *
 *   typedef struct { int method; double damp; } my_opts;
 *   static const sqz_opt rows[] = {
 *       {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(my_opts, method),
 *        .flags = SQZ_OPT_BARE, .choices = "rtn|gptq", .def = "rtn", .help = "the method"},
 *       {.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(my_opts, damp),
 *        .min = 0, .max = 10, .def = "0.01", .help = "GPTQ's relative damping"},
 *   };
 *   my_opts o; uint64_t given;
 *   sqz_opts_defaults(rows, 2, &o);
 *   if (sqz_opts_parse_spec(rows, 2, "gptq:damp=0.05", "SPEC", &o, &given) != SQZ_OK) ...
 *
 * SPEC syntax: parts separated by ':'. "name=value" sets the option `name`; a bare word sets
 * the SQZ_OPT_BARE choice option that lists it (or a FLAG option of that name); the first
 * part may be the value of the table's SQZ_OPT_POSITIONAL option (a first part that is a
 * number goes to a numeric positional even where a choice lists it as a word: "4:8"). Every option may be given
 * once. Errors (SQZ_ERR_INVALID_ARG) name the SPEC, the part and what is allowed.
 *
 * Command lines: "--name VALUE", "--name=VALUE", "-s VALUE" (short_name), "--flag"; every
 * word not starting with '-' fills the next SQZ_OPT_POSITIONAL row. A positional row with a
 * short_name may also be given as "-s VALUE" or "--name VALUE" (llama.cpp's "-m MODEL").
 * SQZ_OPT_REPEAT options may be given more than once (each value goes through `set`, in order).
 */
#ifndef SQZ_OPTIONS_H
#define SQZ_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sqz_opt_type {
    SQZ_OPT_FLAG = 0,   /* bool: set to true when given (no value) */
    SQZ_OPT_INT = 1,    /* int64_t in [min, max] */
    SQZ_OPT_FLOAT = 2,  /* double in [min, max]; the range excludes min when SQZ_OPT_OPEN_MIN */
    SQZ_OPT_STRING = 3, /* const char *: borrowed from the parsed text (argv or the stage's SPEC copy) */
    SQZ_OPT_CHOICE = 4, /* int: values[i] (or i) of the chosen word of choices ("a|b|c") */
    SQZ_OPT_LIST = 5,   /* sqz_opt_list: integers and ranges "3,4,7-9" in [min, max], sorted, each once */
} sqz_opt_type;

#define SQZ_OPT_LIST_MAX 256
/* The value of a LIST option. */
typedef struct sqz_opt_list {
    int32_t v[SQZ_OPT_LIST_MAX]; /* v[0..n), increasing */
    int n;
} sqz_opt_list;

#define SQZ_OPT_BARE 0x1u       /* SPEC: a choice may be written alone ("gptq") */
#define SQZ_OPT_POSITIONAL 0x2u /* SPEC: the first part; command line: a word without '-' */
#define SQZ_OPT_REQUIRED 0x4u   /* must be given */
#define SQZ_OPT_REPEAT 0x8u     /* command line: may be given several times (needs `set`) */
#define SQZ_OPT_OPEN_MIN 0x10u  /* FLOAT: min itself is not allowed */
/* Command line, STRING rows naming paths: what the command reads and what it writes. The CLI
 * refuses an output that is, or would replace, an input, and two outputs that collide. */
#define SQZ_OPT_INPUT 0x20u      /* a file (or directory) the command reads */
#define SQZ_OPT_OUTPUT 0x40u     /* a file the command writes (replaced atomically) */
#define SQZ_OPT_OUTPUT_DIR 0x80u /* with SQZ_OPT_OUTPUT: may be a directory (an HF checkpoint) */
/* Command line: another tool's spelling that this command does not take (llama.cpp's
 * "--kl-divergence-base", "-ngl"). `name` is the whole word with its dashes; the parser refuses
 * it with "unknown option 'WORD' (HELP)", so `help` says what to write instead; the help text
 * lists it. Such rows store nothing (type FLAG, offset 0). */
#define SQZ_OPT_REFUSE 0x100u

#define SQZ_OPT_MAX 64          /* rows per table (the `given` bitmask) */

struct sqz_opt;
/* A custom setter: called instead of storing, with the value's text (NULL for a FLAG). It
 * returns SQZ_OK or an error with the message set (SQZ_ERROR). */
typedef sqz_status (*sqz_opt_set_fn)(void *dst, const struct sqz_opt *o, const char *value);

typedef struct sqz_opt {
    const char *name;     /* "damp" (SPEC "damp=0.02"; command line "--damp 0.02") */
    sqz_opt_type type;
    size_t offset;        /* where the value is stored in the options struct (offsetof) */
    unsigned flags;       /* SQZ_OPT_* */
    double min, max;      /* INT / FLOAT range (both 0: unbounded) */
    const char *choices;  /* CHOICE: "minmax|percentile|entropy|dynamic" */
    const int *values;    /* CHOICE: the value stored for each word; NULL: its index */
    const char *def;      /* default as text (applied by sqz_opts_defaults, shown by help); NULL: none */
    const char *metavar;  /* "N", "FILE", "SPEC"; NULL: from the type */
    const char *help;     /* one line */
    const char *alias;    /* another accepted name ("text" for "calib"), or NULL */
    char short_name;      /* command line "-o"; 0 for none */
    sqz_opt_set_fn set;   /* custom setter, or NULL to store the value at offset */
} sqz_opt;

/* Stores every row's default (rows without `def` are left as they are). Errors only for a
 * table whose default does not parse (a programming error, SQZ_ERR_INVALID_ARG). */
SQZ_API sqz_status sqz_opts_defaults(const sqz_opt *t, int n, void *dst);

/* The row named `name` (or whose alias it is), or NULL. */
SQZ_API const sqz_opt *sqz_opts_find(const sqz_opt *t, int n, const char *name);

/* Parses `value` for row o and stores it in dst (or calls o->set). `what` names the value in
 * the error message ("SPEC 'int4:g96'", "--seed"). Errors: SQZ_ERR_INVALID_ARG naming the
 * value and what is allowed. */
SQZ_API sqz_status sqz_opt_set(const sqz_opt *o, void *dst, const char *value, const char *what);

/* The one parser of lists: text "3,4,7-9" (integers and ranges A-B, comma-separated) into *out,
 * every value in [min, max], sorted. `what` starts the messages. Errors: SQZ_ERR_INVALID_ARG for an
 * empty or malformed item ("WHAT: bad item '7-' (integers and ranges such as 3,4 or 2-5 in [0, 65535])"),
 * a value listed twice ("WHAT: 3 listed twice"), more than SQZ_OPT_LIST_MAX values. */
SQZ_API sqz_status sqz_opt_list_parse(const char *text, double min, double max, const char *what, sqz_opt_list *out);

/* Parses a SPEC (syntax above) into dst, which holds the defaults already. *given (may be
 * NULL) receives bit i for every row i given. `label` starts the error messages ("SPEC",
 * "--drop-layers"). String values point into an internal copy of the SPEC that lives until
 * the next call on this thread: callers keep the SPEC text themselves and parse again if
 * they keep strings (sqz_stage does). Errors: SQZ_ERR_INVALID_ARG naming the part. */
SQZ_API sqz_status sqz_opts_parse_spec(const sqz_opt *t, int n, const char *spec, const char *label, void *dst,
                                       uint64_t *given);

/* One table of a command's options with the struct it fills; a command line may be parsed
 * against several (the calibration options and a command's own). */
typedef struct sqz_opt_group {
    const char *title;    /* heading in the help ("calibration"); NULL for the command's own */
    const sqz_opt *opts;
    int n;
    void *dst;
} sqz_opt_group;

/* Parses argv[1..argc) (argv[0] is the command name) against the groups: applies each
 * group's defaults first, then every option and positional word. Errors: SQZ_ERR_INVALID_ARG
 * with a message ("unknown option '--frob'", "unknown option '--chunk' (did you mean --chunks?)"
 * when a name of the groups is within a few edits, "unknown option '-ngl' (HELP)" for an
 * SQZ_OPT_REFUSE row, "missing value for --calib", "bad --seed 'x'
 * (an integer in [0, 9223372036854775807])", "no MODEL given"). given[g] (may be NULL) gets
 * the bits of the rows of group g that were given. */
SQZ_API sqz_status sqz_opts_parse_argv(const sqz_opt_group *g, int ng, int argc, char **argv, uint64_t *given);

/* Calls fn(user, group, row, value) for every option and positional word of argv[1..argc)
 * in order, as sqz_opts_parse_argv assigns them (value NULL for a FLAG). For a command line
 * that parsed: words that do not parse are skipped. */
typedef void (*sqz_opt_visit_fn)(void *user, int group, const sqz_opt *o, const char *value);
SQZ_API void sqz_opts_argv_each(const sqz_opt_group *g, int ng, int argc, char **argv, sqz_opt_visit_fn fn,
                                void *user);

/* One factor of a size that derives from options: {"--calib-samples", 1000000}, {"d_model",
 * 64}, {"bytes per float", 4}. */
typedef struct sqz_size_term {
    const char *name;
    int64_t value; /* negative counts as 0 */
} sqz_size_term;

/* The one check of a size derived from options, done before anything of that size is
 * allocated: SQZ_OK when the product of the terms (overflow-checked) is at most `limit`
 * bytes, else SQZ_ERR_INVALID_ARG with "WHAT: --calib-samples 1000000 x --calib-ctx 512 x
 * d_model 64 x bytes per float 4 = 131.1 GB, more than LIMIT_NAME (16.8 GB)". */
SQZ_API sqz_status sqz_opts_check_size(const char *what, const sqz_size_term *t, int n, uint64_t limit,
                                       const char *limit_name);

/* Help text for a command line: one line per option, "  --name METAVAR  help (default X)",
 * grouped under the groups' titles, choices and ranges spelled out. Returns a malloc'd string
 * (caller frees) or NULL on out of memory. */
SQZ_API char *sqz_opts_help_argv(const sqz_opt_group *g, int ng);

/* Help text for the parts of a SPEC: "  name=VALUE" / "  a | b | c" per row, with defaults.
 * `indent` spaces start each line. malloc'd (caller frees), NULL on out of memory. */
SQZ_API char *sqz_opts_help_spec(const sqz_opt *t, int n, int indent);

#ifdef __cplusplus
}
#endif
#endif
