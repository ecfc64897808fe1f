/* tests/unit/test_options.c - options declared as data (core/options.c): defaults, SPEC
 * parsing, command-line parsing, the error messages and the help text, on small tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "test_util.h"

/* ---- a SPEC table: "int4:gptq:g=64:damp=0.05:act-order" ---- */
typedef struct spec_opts {
    const char *fmt, *label;
    int method;
    int64_t g;
    double damp;
    bool act_order;
} spec_opts;

static const int method_values[] = {10, 20, 30};

static const sqz_opt spec_rows[] = {
    {.name = "fmt", .type = SQZ_OPT_STRING, .offset = offsetof(spec_opts, fmt),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .help = "the format"},
    {.name = "method", .type = SQZ_OPT_CHOICE, .offset = offsetof(spec_opts, method), .flags = SQZ_OPT_BARE,
     .choices = "rtn|gptq|awq", .values = method_values, .def = "rtn", .help = "the method"},
    {.name = "g", .type = SQZ_OPT_INT, .offset = offsetof(spec_opts, g), .min = 1, .max = 4096, .def = "128",
     .help = "group size"},
    {.name = "damp", .type = SQZ_OPT_FLOAT, .offset = offsetof(spec_opts, damp), .flags = SQZ_OPT_OPEN_MIN,
     .min = 0, .max = 1, .def = "0.01", .help = "relative damping"},
    {.name = "act-order", .type = SQZ_OPT_FLAG, .offset = offsetof(spec_opts, act_order), .help = "by |diag H|"},
    {.name = "name", .type = SQZ_OPT_STRING, .offset = offsetof(spec_opts, label), .alias = "label",
     .help = "a label"},
};
enum { N_SPEC = (int)(sizeof spec_rows / sizeof spec_rows[0]) };

/* Parses a SPEC from the defaults; returns the status, the options in *o. */
static sqz_status spec(const char *text, spec_opts *o, uint64_t *given) {
    memset(o, 0, sizeof *o);
    assert_int_equal(sqz_opts_defaults(spec_rows, N_SPEC, o), SQZ_OK);
    return sqz_opts_parse_spec(spec_rows, N_SPEC, text, "SPEC", o, given);
}

/* Asserts that the last error contains every one of the NULL-terminated strings. */
static void error_has(const char *first, ...) {
    const char *msg = sqz_last_error();
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *))
        if (!strstr(msg, s)) fail_msg("error '%s' lacks '%s'", msg, s);
    va_end(ap);
}

static void test_spec_defaults(void **state) {
    (void)state;
    spec_opts o;
    uint64_t given = 0;
    assert_int_equal(spec("int4", &o, &given), SQZ_OK);
    assert_string_equal(o.fmt, "int4");
    assert_int_equal(o.method, 10);
    assert_int_equal(o.g, 128);
    assert_true(fabs(o.damp - 0.01) < 1e-15);
    assert_false(o.act_order);
    assert_null(o.label);
    assert_int_equal(given, 1);
}

static void test_spec_all_parts(void **state) {
    (void)state;
    spec_opts o;
    uint64_t given = 0;
    assert_int_equal(spec("int4:gptq:g=64:damp=0.05:act-order:label=x", &o, &given), SQZ_OK);
    assert_string_equal(o.fmt, "int4");
    assert_int_equal(o.method, 20);
    assert_int_equal(o.g, 64);
    assert_true(fabs(o.damp - 0.05) < 1e-15);
    assert_true(o.act_order);
    assert_string_equal(o.label, "x");
    assert_int_equal(given, 0x3f);
    assert_int_equal(spec("int4:method=awq", &o, NULL), SQZ_OK); /* a choice by name=value, with values */
    assert_int_equal(o.method, 30);
}

static void test_spec_ranges(void **state) {
    (void)state;
    spec_opts o;
    assert_int_equal(spec("int4:g=0", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("SPEC 'int4:g=0'", "bad g '0'", "an integer in [1, 4096]", NULL);
    assert_int_equal(spec("int4:g=4097", &o, NULL), SQZ_ERR_INVALID_ARG);
    assert_int_equal(spec("int4:g=12x", &o, NULL), SQZ_ERR_INVALID_ARG);
    assert_int_equal(spec("int4:g=4096", &o, NULL), SQZ_OK);
    assert_int_equal(spec("int4:damp=0", &o, NULL), SQZ_ERR_INVALID_ARG); /* open minimum */
    error_has("bad damp '0'", "a number in (0, 1]", NULL);
    assert_int_equal(spec("int4:damp=1e-9", &o, NULL), SQZ_OK);
    assert_int_equal(spec("int4:damp=1", &o, NULL), SQZ_OK);
    assert_int_equal(spec("int4:damp=1.5", &o, NULL), SQZ_ERR_INVALID_ARG);
    assert_int_equal(spec("int4:damp=nan", &o, NULL), SQZ_ERR_INVALID_ARG);
    assert_int_equal(spec("int4:damp=", &o, NULL), SQZ_ERR_INVALID_ARG);
}

static void test_spec_unknown_parts(void **state) {
    (void)state;
    spec_opts o;
    assert_int_equal(spec("int4:frob", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown part 'frob'", "method: rtn|gptq|awq", "g=", "damp=", "act-order", "name=", NULL);
    assert_int_equal(spec("int4:frob=1", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown part 'frob=1'", "method: rtn|gptq|awq", NULL);
    assert_int_equal(spec("int4:method=frob", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown method 'frob'", "rtn, gptq or awq", NULL);
    assert_int_equal(spec("int4:act-order=1", &o, NULL), SQZ_ERR_INVALID_ARG); /* a flag takes no value */
    assert_int_equal(spec("int4:fmt=int8", &o, NULL), SQZ_ERR_INVALID_ARG);    /* the positional has no name= */
    assert_int_equal(spec("int4::g=64", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("empty part", NULL);
    assert_int_equal(spec("", &o, NULL), SQZ_ERR_INVALID_ARG);
    assert_int_equal(spec(NULL, &o, NULL), SQZ_ERR_INVALID_ARG);
}

static void test_spec_bare_positional_twice(void **state) {
    (void)state;
    spec_opts o;
    assert_int_equal(spec("int4:awq", &o, NULL), SQZ_OK);
    assert_int_equal(o.method, 30);
    /* A bare word first sets its choice; the required positional is then missing. */
    assert_int_equal(spec("gptq", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("no fmt given", NULL);
    assert_int_equal(spec("int4:gptq:awq", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("method given twice ('gptq' and 'awq')", NULL);
    assert_int_equal(spec("int4:g=64:g=32", &o, NULL), SQZ_ERR_INVALID_ARG);
    error_has("g given twice ('64' and '32')", NULL);
    assert_int_equal(spec("int4:name=a:label=b", &o, NULL), SQZ_ERR_INVALID_ARG); /* alias is the same row */
}

static void test_defaults_and_find(void **state) {
    (void)state;
    static const sqz_opt bad[] = {{.name = "n", .type = SQZ_OPT_INT, .min = 1, .max = 9, .def = "10"}};
    int64_t n = 0;
    assert_int_equal(sqz_opts_defaults(bad, 1, &n), SQZ_ERR_INVALID_ARG);
    assert_ptr_equal(sqz_opts_find(spec_rows, N_SPEC, "label"), &spec_rows[5]);
    assert_ptr_equal(sqz_opts_find(spec_rows, N_SPEC, "damp"), &spec_rows[3]);
    assert_null(sqz_opts_find(spec_rows, N_SPEC, "frob"));
}

/* ---- a command line: two groups, short names, an alias, a REPEAT option ---- */
typedef struct cmd_opts {
    const char *model, *out, *text, *keep[4];
    int n_keep, to;
    int64_t count;
    double temp;
    bool json;
} cmd_opts;

typedef struct calib_opts {
    int64_t seed;
} calib_opts;

static sqz_status add_keep(void *dst, const sqz_opt *o, const char *value) {
    (void)o;
    cmd_opts *c = dst;
    SQZ_RETURN_IF(c->n_keep == 4, SQZ_ERR_INVALID_ARG, "--keep: at most 4 (not '%s')", value);
    c->keep[c->n_keep++] = value;
    return SQZ_OK;
}

static const int to_values[] = {2, 1, 1};

static const sqz_opt cmd_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(cmd_opts, model),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .metavar = "MODEL", .help = "the checkpoint"},
    {.name = "output", .type = SQZ_OPT_STRING, .offset = offsetof(cmd_opts, out), .flags = SQZ_OPT_REQUIRED,
     .metavar = "OUT", .short_name = 'o', .help = "where to write"},
    {.name = "calib", .type = SQZ_OPT_STRING, .offset = offsetof(cmd_opts, text), .metavar = "FILE",
     .alias = "text", .help = "calibration text"},
    {.name = "count", .type = SQZ_OPT_INT, .offset = offsetof(cmd_opts, count), .min = 1, .max = 10, .def = "3",
     .short_name = 'n', .help = "how many"},
    {.name = "temp", .type = SQZ_OPT_FLOAT, .offset = offsetof(cmd_opts, temp), .min = 0, .max = 2, .def = "1",
     .help = "a temperature with a long help text that goes on and on, past the end of the line, "
             "to see that the help wraps it between words and indents what follows"},
    {.name = "to", .type = SQZ_OPT_CHOICE, .offset = offsetof(cmd_opts, to), .choices = "gguf|safetensors|hf",
     .values = to_values, .help = "output format"},
    {.name = "json", .type = SQZ_OPT_FLAG, .offset = offsetof(cmd_opts, json), .help = "print JSON"},
    {.name = "keep", .type = SQZ_OPT_STRING, .flags = SQZ_OPT_REPEAT, .metavar = "NAME", .set = add_keep,
     .help = "keep NAME float"},
};
static const sqz_opt calib_rows[] = {
    {.name = "seed", .type = SQZ_OPT_INT, .offset = offsetof(calib_opts, seed), .min = 0, .max = (double)INT64_MAX,
     .def = "1234", .help = "the seed"},
};

/* Parses a NULL-terminated command line into *c and *k (presets: to -1). */
static sqz_status cmd(cmd_opts *c, calib_opts *k, uint64_t given[2], ...) {
    char *argv[32] = {"cmd"};
    int argc = 1;
    va_list ap;
    va_start(ap, given);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 32;) argv[argc++] = a;
    va_end(ap);
    memset(c, 0, sizeof *c);
    memset(k, 0, sizeof *k);
    c->to = -1;
    const sqz_opt_group g[] = {{NULL, cmd_rows, (int)(sizeof cmd_rows / sizeof cmd_rows[0]), c},
                               {"calibration", calib_rows, 1, k}};
    return sqz_opts_parse_argv(g, 2, argc, argv, given);
}

static void test_argv_everything(void **state) {
    (void)state;
    cmd_opts c;
    calib_opts k;
    uint64_t given[2] = {0, 0};
    assert_int_equal(cmd(&c, &k, given, "m.bin", "-o", "out", "--text=a.txt", "-n", "5", "--temp", "0.5", "--to",
                         "hf", "--json", "--keep", "a", "--keep=b", "--seed", "7", NULL),
                     SQZ_OK);
    assert_string_equal(c.model, "m.bin");
    assert_string_equal(c.out, "out");
    assert_string_equal(c.text, "a.txt");
    assert_int_equal(c.count, 5);
    assert_true(fabs(c.temp - 0.5) < 1e-15);
    assert_int_equal(c.to, 1);
    assert_true(c.json);
    assert_int_equal(c.n_keep, 2);
    assert_string_equal(c.keep[0], "a");
    assert_string_equal(c.keep[1], "b");
    assert_int_equal(k.seed, 7);
    assert_int_equal(given[0], 0xff);
    assert_int_equal(given[1], 1);
}

static void test_argv_defaults(void **state) {
    (void)state;
    cmd_opts c;
    calib_opts k;
    uint64_t given[2] = {0, 0};
    assert_int_equal(cmd(&c, &k, given, "--output", "x", "m", NULL), SQZ_OK);
    assert_string_equal(c.model, "m");
    assert_int_equal(c.count, 3);
    assert_true(fabs(c.temp - 1.0) < 1e-15);
    assert_int_equal(c.to, -1); /* no default: left as it was */
    assert_false(c.json);
    assert_null(c.text);
    assert_int_equal(c.n_keep, 0);
    assert_int_equal(k.seed, 1234);
    assert_int_equal(given[0], 0x3);
    assert_int_equal(given[1], 0);
    /* "--" ends the options: what follows is positional even with a leading '-' */
    assert_int_equal(cmd(&c, &k, given, "-o", "x", "--", "-m.bin", NULL), SQZ_OK);
    assert_string_equal(c.model, "-m.bin");
    /* "-" alone is a word (stdin by convention) */
    assert_int_equal(cmd(&c, &k, given, "-o", "x", "-", NULL), SQZ_OK);
    assert_string_equal(c.model, "-");
}

static void test_argv_errors(void **state) {
    (void)state;
    cmd_opts c;
    calib_opts k;
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--frob", NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown option '--frob'", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "-x", NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown option '-x'", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--frob=1", NULL), SQZ_ERR_INVALID_ARG);
    error_has("unknown option '--frob=1'", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", NULL), SQZ_ERR_INVALID_ARG);
    error_has("missing value for -o", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--seed", NULL), SQZ_ERR_INVALID_ARG);
    error_has("missing value for --seed", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "a", "--output", "b", NULL), SQZ_ERR_INVALID_ARG);
    error_has("given twice", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--calib", "a", "--text", "b", NULL), SQZ_ERR_INVALID_ARG);
    error_has("--text given twice", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", NULL), SQZ_ERR_INVALID_ARG);
    error_has("no --output given", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "-o", "x", NULL), SQZ_ERR_INVALID_ARG);
    error_has("no MODEL given", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "n", "-o", "x", NULL), SQZ_ERR_INVALID_ARG);
    error_has("unexpected argument 'n'", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--json=yes", NULL), SQZ_ERR_INVALID_ARG);
    error_has("--json takes no value", NULL);
}

static void test_argv_values(void **state) {
    (void)state;
    cmd_opts c;
    calib_opts k;
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "-n", "11", NULL), SQZ_ERR_INVALID_ARG);
    error_has("-n", "'11'", "an integer in [1, 10]", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--count=0", NULL), SQZ_ERR_INVALID_ARG);
    error_has("--count", "'0'", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--temp", "-1", NULL), SQZ_ERR_INVALID_ARG); /* a value */
    error_has("--temp", "'-1'", "a number in [0, 2]", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--to", "frob", NULL), SQZ_ERR_INVALID_ARG);
    error_has("--to", "unknown to 'frob'", "gguf, safetensors or hf", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--seed", "-1", NULL), SQZ_ERR_INVALID_ARG);
    error_has("an integer in [0, 9223372036854775807]", NULL);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--seed", "9223372036854775807", NULL), SQZ_OK);
    assert_true(k.seed == INT64_MAX);
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "", NULL), SQZ_ERR_INVALID_ARG); /* empty string */
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--to", "gguf", NULL), SQZ_OK);
    assert_int_equal(c.to, 2);
}

static void test_argv_repeat_setter(void **state) {
    (void)state;
    cmd_opts c;
    calib_opts k;
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--keep", "a", "--keep", "b", "--keep", "c", "--keep", "d",
                         NULL),
                     SQZ_OK);
    assert_int_equal(c.n_keep, 4);
    assert_string_equal(c.keep[3], "d");
    assert_int_equal(cmd(&c, &k, NULL, "m", "-o", "x", "--keep", "a", "--keep", "b", "--keep", "c", "--keep", "d",
                         "--keep", "e", NULL),
                     SQZ_ERR_INVALID_ARG);
    error_has("at most 4 (not 'e')", NULL);
}

static void test_help(void **state) {
    (void)state;
    const sqz_opt_group g[] = {{NULL, cmd_rows, (int)(sizeof cmd_rows / sizeof cmd_rows[0]), NULL},
                               {"calibration", calib_rows, 1, NULL}};
    char *h = sqz_opts_help_argv(g, 2);
    assert_non_null(h);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < g[k].n; i++) {
            const sqz_opt *o = &g[k].opts[i];
            char want[64];
            snprintf(want, sizeof want, (o->flags & SQZ_OPT_POSITIONAL) ? "%s" : "--%s",
                     (o->flags & SQZ_OPT_POSITIONAL) ? o->metavar : o->name);
            if (!strstr(h, want)) fail_msg("help lacks '%s':\n%s", want, h);
            if (o->help && strncmp(o->help, "a temperature", 13) && !strstr(h, o->help))
                fail_msg("help lacks '%s':\n%s", o->help, h);
        }
    static const char *const parts[] = {"MODEL", "-o, --output OUT", "(required)", "also --text",
                                        "-n, --count N", "(default 3; an integer in [1, 10])",
                                        "--to gguf|safetensors|hf", "may be repeated", "\ncalibration:\n",
                                        "(default 1234; an integer in [0, 9223372036854775807])"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(h, parts[i])) fail_msg("help lacks '%s':\n%s", parts[i], h);
    /* Lines of at most 100 characters; the long help goes on indented to its column. */
    for (const char *p = h; *p;) {
        const size_t n = strcspn(p, "\n");
        if (n > 100) fail_msg("help line of %zu characters:\n%.*s", n, (int)n, p);
        p += n + (p[n] == '\n');
    }
    assert_non_null(strstr(h, "\n                            "));
    free(h);

    char *s = sqz_opts_help_spec(spec_rows, N_SPEC, 2);
    assert_non_null(s);
    for (int i = 0; i < N_SPEC; i++)
        if (!strstr(s, spec_rows[i].name) || !strstr(s, spec_rows[i].help))
            fail_msg("SPEC help lacks '%s':\n%s", spec_rows[i].name, s);
    assert_non_null(strstr(s, "rtn|gptq|awq"));
    assert_non_null(strstr(s, "g=N"));
    free(s);
}

/* llama.cpp's spellings: a positional with a short name ("-m MODEL", "--model MODEL"), a refused
 * row (its help is the reason), did-you-mean within two edits. */
typedef struct spell_opts {
    const char *model, *text;
    int64_t chunks;
} spell_opts;
static const sqz_opt spell_rows[] = {
    {.name = "model", .type = SQZ_OPT_STRING, .offset = offsetof(spell_opts, model),
     .flags = SQZ_OPT_POSITIONAL | SQZ_OPT_REQUIRED, .short_name = 'm', .metavar = "MODEL"},
    {.name = "text", .type = SQZ_OPT_STRING, .offset = offsetof(spell_opts, text), .short_name = 'f', .alias = "file"},
    {.name = "chunks", .type = SQZ_OPT_INT, .offset = offsetof(spell_opts, chunks)},
    {.name = "-ngl", .type = SQZ_OPT_FLAG, .flags = SQZ_OPT_REFUSE, .help = "llama.cpp's; sqz: none"},
};

static sqz_status spell_parse(spell_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    const sqz_opt_group g = {NULL, spell_rows, 4, o};
    return sqz_opts_parse_argv(&g, 1, argc, argv, NULL);
}

static void test_argv_llamacpp_spellings(void **state) {
    (void)state;
    spell_opts o;
    char *a1[] = {"x", "-m", "M", "-f", "T"};
    assert_int_equal(spell_parse(&o, 5, a1), SQZ_OK);
    assert_string_equal(o.model, "M");
    assert_string_equal(o.text, "T");
    char *a2[] = {"x", "--file", "T", "--model", "M"};
    assert_int_equal(spell_parse(&o, 5, a2), SQZ_OK);
    assert_string_equal(o.model, "M");
    char *a3[] = {"x", "-m", "M", "N"};
    assert_int_equal(spell_parse(&o, 4, a3), SQZ_ERR_INVALID_ARG);
    assert_string_equal(sqz_last_error(), "unexpected argument 'N'");
    char *a4[] = {"x", "M", "-ngl", "99"};
    assert_int_equal(spell_parse(&o, 4, a4), SQZ_ERR_INVALID_ARG);
    assert_string_equal(sqz_last_error(), "unknown option '-ngl' (llama.cpp's; sqz: none)");
    char *a5[] = {"x", "M", "--chunk", "2"};
    assert_int_equal(spell_parse(&o, 4, a5), SQZ_ERR_INVALID_ARG);
    assert_string_equal(sqz_last_error(), "unknown option '--chunk' (did you mean --chunks?)");
    char *a6[] = {"x", "M", "--ngl"}; /* a refused row is never suggested; nothing else is close */
    assert_int_equal(spell_parse(&o, 3, a6), SQZ_ERR_INVALID_ARG);
    assert_string_equal(sqz_last_error(), "unknown option '--ngl'");
    const sqz_opt_group g = {NULL, spell_rows, 4, NULL};
    char *help = sqz_opts_help_argv(&g, 1);
    assert_non_null(help);
    assert_non_null(strstr(help, "MODEL (or -m, --model MODEL)"));
    assert_non_null(strstr(help, "  -ngl "));
    assert_non_null(strstr(help, "llama.cpp's; sqz: none"));
    free(help);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_defaults),      cmocka_unit_test(test_spec_all_parts),
        cmocka_unit_test(test_spec_ranges),        cmocka_unit_test(test_spec_unknown_parts),
        cmocka_unit_test(test_spec_bare_positional_twice), cmocka_unit_test(test_defaults_and_find),
        cmocka_unit_test(test_argv_everything),    cmocka_unit_test(test_argv_defaults),
        cmocka_unit_test(test_argv_errors),        cmocka_unit_test(test_argv_values),
        cmocka_unit_test(test_argv_repeat_setter), cmocka_unit_test(test_help),
        cmocka_unit_test(test_argv_llamacpp_spellings),
    };
    return sqz_test_run(tests, NULL, NULL);
}
