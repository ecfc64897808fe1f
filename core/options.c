/*
 * core/options.c - options declared as data (sqz/options.h): defaults, one value, a SPEC, a
 * command line, and the help text of both, all from the same sqz_opt rows.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/internal.h"
#include "sqz/options.h"

/* ---- choices ------------------------------------------------------------------------- */

/* Index of `word` in the '|'-separated list, or -1. Case does not matter: llama.cpp spells
 * its types Q4_K_M, sqz q4_k_m, and no list holds two words that differ only in case. */
static int choice_index(const char *choices, const char *word) {
    const size_t wn = strlen(word);
    int i = 0;
    for (const char *p = choices; p && *p; i++) {
        const char *e = strchr(p, '|');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == wn && !strncasecmp(p, word, n)) return i;
        if (!e) break;
        p = e + 1;
    }
    return -1;
}

/* "a, b or c" of a choice list, into buf. */
static const char *choice_words(const char *choices, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (const char *p = choices; p && *p && k + 1 < cap;) {
        const char *e = strchr(p, '|');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *sep = k == 0 ? "" : e ? ", " : " or ";
        int w = snprintf(buf + k, cap - k, "%s%.*s", sep, (int)n, p);
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
        if (!e) break;
        p = e + 1;
    }
    return buf;
}

/* ---- one value --------------------------------------------------------------------------- */

static bool ranged(const sqz_opt *o) { return o->min != 0 || o->max != 0; }

/* An INT bound as an integer: (double)INT64_MAX is 2^63, which "%.0f" would print. */
static long long int_bound(double v) {
    return v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775807.0 ? INT64_MIN : (long long)v;
}

static const char *range_text(const sqz_opt *o, char *buf, size_t cap) {
    if (o->type == SQZ_OPT_INT)
        snprintf(buf, cap, "an integer in [%lld, %lld]", int_bound(o->min), int_bound(o->max));
    else
        snprintf(buf, cap, "a number in %c%g, %g]", (o->flags & SQZ_OPT_OPEN_MIN) ? '(' : '[', o->min, o->max);
    return buf;
}

static sqz_status set_int(const sqz_opt *o, void *dst, const char *v, const char *what) {
    char *end, r[96];
    errno = 0;
    long long x = strtoll(v, &end, 10);
    const bool ok = !errno && end != v && !*end && (!ranged(o) || ((double)x >= o->min && (double)x <= o->max));
    SQZ_RETURN_IF(!ok, SQZ_ERR_INVALID_ARG, "%s: bad %s '%s' (%s)", what, o->name, v,
                  ranged(o) ? range_text(o, r, sizeof r) : "an integer");
    memcpy((char *)dst + o->offset, &(int64_t){x}, sizeof(int64_t));
    return SQZ_OK;
}

static sqz_status set_float(const sqz_opt *o, void *dst, const char *v, const char *what) {
    char *end, r[96];
    errno = 0;
    double x = strtod(v, &end);
    bool ok = !errno && end != v && !*end && isfinite(x);
    if (ok && ranged(o)) ok = ((o->flags & SQZ_OPT_OPEN_MIN) ? x > o->min : x >= o->min) && x <= o->max;
    SQZ_RETURN_IF(!ok, SQZ_ERR_INVALID_ARG, "%s: bad %s '%s' (%s)", what, o->name, v,
                  ranged(o) ? range_text(o, r, sizeof r) : "a number");
    memcpy((char *)dst + o->offset, &x, sizeof x);
    return SQZ_OK;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One item "N" or "A-B" (len bytes at p) appended to out. */
static sqz_status list_item(const char *p, size_t len, double min, double max, const char *what, sqz_opt_list *out) {
    char buf[32], *end;
    SQZ_RETURN_IF(len == 0 || len >= sizeof buf, SQZ_ERR_INVALID_ARG,
                  "%s: empty or too long item (integers and ranges such as 3,4 or 2-5 in [%g, %g])", what, min, max);
    memcpy(buf, p, len);
    buf[len] = 0;
    errno = 0;
    const long long lo = strtoll(buf, &end, 10);
    long long hi = lo;
    if (*end == '-' && end != buf) hi = strtoll(end + 1, &end, 10);
    SQZ_RETURN_IF(errno || *end || !isdigit((unsigned char)buf[0]) || (double)lo < min || hi < lo || (double)hi > max,
                  SQZ_ERR_INVALID_ARG, "%s: bad item '%s' (integers and ranges such as 3,4 or 2-5 in [%g, %g])", what,
                  buf, min, max);
    for (long long v = lo; v <= hi; v++) {
        SQZ_RETURN_IF(out->n >= SQZ_OPT_LIST_MAX, SQZ_ERR_INVALID_ARG, "%s: more than %d values", what,
                      SQZ_OPT_LIST_MAX);
        out->v[out->n++] = (int32_t)v;
    }
    return SQZ_OK;
}

sqz_status sqz_opt_list_parse(const char *text, double min, double max, const char *what, sqz_opt_list *out) {
    memset(out, 0, sizeof *out);
    SQZ_RETURN_IF(min < INT32_MIN || max > INT32_MAX || min > max, SQZ_ERR_INVALID_ARG, "%s: bad list range", what);
    for (const char *p = text ? text : ""; p;) {
        const char *e = strchr(p, ',');
        SQZ_TRY(list_item(p, e ? (size_t)(e - p) : strlen(p), min, max, what, out));
        p = e ? e + 1 : NULL;
    }
    qsort(out->v, (size_t)out->n, sizeof out->v[0], cmp_i32);
    for (int i = 1; i < out->n; i++)
        SQZ_RETURN_IF(out->v[i] == out->v[i - 1], SQZ_ERR_INVALID_ARG, "%s: %d listed twice", what, (int)out->v[i]);
    return SQZ_OK;
}

sqz_status sqz_opt_set(const sqz_opt *o, void *dst, const char *value, const char *what) {
    if (o->set) return o->set(dst, o, value);
    char w[256];
    switch (o->type) {
    case SQZ_OPT_FLAG: memcpy((char *)dst + o->offset, &(bool){true}, sizeof(bool)); return SQZ_OK;
    case SQZ_OPT_INT: return set_int(o, dst, value, what);
    case SQZ_OPT_FLOAT: return set_float(o, dst, value, what);
    case SQZ_OPT_STRING:
        SQZ_RETURN_IF(!value || !*value, SQZ_ERR_INVALID_ARG, "%s: empty %s", what, o->name);
        memcpy((char *)dst + o->offset, &value, sizeof value);
        return SQZ_OK;
    case SQZ_OPT_LIST:
        return sqz_opt_list_parse(value, o->min, o->max, what, (sqz_opt_list *)(void *)((char *)dst + o->offset));
    case SQZ_OPT_CHOICE: {
        const int i = choice_index(o->choices, value ? value : "");
        SQZ_RETURN_IF(i < 0, SQZ_ERR_INVALID_ARG, "%s: unknown %s '%s' (%s)", what, o->name, value ? value : "",
                      choice_words(o->choices, w, sizeof w));
        const int v = o->values ? o->values[i] : i;
        memcpy((char *)dst + o->offset, &v, sizeof v);
        return SQZ_OK;
    }
    }
    return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "option '%s': unknown type", o->name);
}

sqz_status sqz_opts_defaults(const sqz_opt *t, int n, void *dst) {
    for (int i = 0; i < n; i++) {
        if (!t[i].def || t[i].set) continue;
        if (t[i].type == SQZ_OPT_FLAG) {
            memcpy((char *)dst + t[i].offset, &(bool){!strcmp(t[i].def, "true")}, sizeof(bool));
            continue;
        }
        if (sqz_opt_set(&t[i], dst, t[i].def, "default") != SQZ_OK)
            return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "option '%s': default '%s' does not parse", t[i].name, t[i].def);
    }
    return SQZ_OK;
}

const sqz_opt *sqz_opts_find(const sqz_opt *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name) || (t[i].alias && !strcmp(t[i].alias, name))) return &t[i];
    return NULL;
}

/* ---- SPEC ------------------------------------------------------------------------------- */

/* Everything a SPEC accepts, for the "unknown part" message. */
static const char *spec_allowed(const sqz_opt *t, int n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k + 1 < cap; i++) {
        if (t[i].flags & SQZ_OPT_POSITIONAL) continue;
        int w;
        if (t[i].type == SQZ_OPT_CHOICE && (t[i].flags & SQZ_OPT_BARE))
            w = snprintf(buf + k, cap - k, "%s%s: %s", k ? "; " : "", t[i].name, t[i].choices);
        else if (t[i].type == SQZ_OPT_FLAG)
            w = snprintf(buf + k, cap - k, "%s%s", k ? "; " : "", t[i].name);
        else
            w = snprintf(buf + k, cap - k, "%s%s=%s", k ? "; " : "", t[i].name,
                         t[i].metavar ? t[i].metavar : t[i].type == SQZ_OPT_CHOICE ? t[i].choices : "X");
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w;
    }
    return buf;
}

/* Which row a bare word sets: a BARE choice listing it, or a FLAG of that name. */
static int bare_row(const sqz_opt *t, int n, const char *word) {
    for (int i = 0; i < n; i++) {
        if (t[i].type == SQZ_OPT_CHOICE && (t[i].flags & SQZ_OPT_BARE) && choice_index(t[i].choices, word) >= 0)
            return i;
        if (t[i].type == SQZ_OPT_FLAG && !strcmp(t[i].name, word)) return i;
    }
    return -1;
}

static _Thread_local char spec_copy[1024];

static sqz_status spec_part(const sqz_opt *t, int n, char *part, bool first, const char *what, void *dst,
                            uint64_t *given, const char **prev) {
    char allowed[768], whole[sizeof spec_copy + 96];
    snprintf(whole, sizeof whole, "%s: part '%s'", what, part);
    int row = -1;
    const char *value = part;
    char *eq = strchr(part, '=');
    if (eq) {
        *eq = 0;
        value = eq + 1;
        const sqz_opt *o = sqz_opts_find(t, n, part);
        row = o ? (int)(o - t) : -1;
        SQZ_RETURN_IF(row < 0 || (t[row].flags & SQZ_OPT_POSITIONAL) || t[row].type == SQZ_OPT_FLAG,
                      SQZ_ERR_INVALID_ARG, "%s: unknown part '%s=%s' (%s)", what, part, value,
                      spec_allowed(t, n, allowed, sizeof allowed));
    } else if (first) {
        /* a numeric positional takes a first part that is a number ("4:8": N of N:M, before the
         * bare word 4 of M); otherwise bare words come first */
        int pos = -1;
        for (int i = 0; i < n && pos < 0; i++)
            if (t[i].flags & SQZ_OPT_POSITIONAL) pos = i;
        char *end = NULL;
        const bool number = pos >= 0 && (t[pos].type == SQZ_OPT_FLOAT || t[pos].type == SQZ_OPT_INT) &&
                            (strtod(part, &end), end != part && !*end);
        row = number ? pos : bare_row(t, n, part);
        if (row < 0) row = pos;
    } else {
        row = bare_row(t, n, part);
    }
    SQZ_RETURN_IF(row < 0, SQZ_ERR_INVALID_ARG, "%s: unknown part '%s' (%s)", what, part,
                  spec_allowed(t, n, allowed, sizeof allowed));
    SQZ_RETURN_IF(*given & (1ull << row), SQZ_ERR_INVALID_ARG, "%s: %s given twice ('%s' and '%s')", what,
                  t[row].name, prev[row], value);
    prev[row] = value;
    *given |= 1ull << row;
    return sqz_opt_set(&t[row], dst, value, eq ? whole : what);
}

sqz_status sqz_opts_parse_spec(const sqz_opt *t, int n, const char *spec, const char *label, void *dst,
                               uint64_t *given_out) {
    SQZ_RETURN_IF(n > SQZ_OPT_MAX, SQZ_ERR_INVALID_ARG, "%s: option table of %d rows", label, n);
    char what[sizeof spec_copy + 64];
    snprintf(what, sizeof what, "%s '%s'", label, spec ? spec : "");
    SQZ_RETURN_IF(!spec || !*spec, SQZ_ERR_INVALID_ARG, "%s is empty", label);
    SQZ_RETURN_IF(strlen(spec) >= sizeof spec_copy, SQZ_ERR_INVALID_ARG, "%s '%.40s...' is too long", label, spec);
    memcpy(spec_copy, spec, strlen(spec) + 1);
    uint64_t given = 0;
    const char *prev[SQZ_OPT_MAX] = {0};
    bool first = true;
    for (char *p = spec_copy; p;) {
        char *e = strchr(p, ':');
        if (e) *e = 0;
        SQZ_RETURN_IF(!*p, SQZ_ERR_INVALID_ARG, "%s: empty part", what);
        SQZ_TRY(spec_part(t, n, p, first, what, dst, &given, prev));
        first = false;
        p = e ? e + 1 : NULL;
    }
    for (int i = 0; i < n; i++)
        SQZ_RETURN_IF((t[i].flags & SQZ_OPT_REQUIRED) && !(given & (1ull << i)), SQZ_ERR_INVALID_ARG,
                      "%s: no %s given", what, t[i].name);
    if (given_out) *given_out = given;
    return SQZ_OK;
}

/* ---- command lines ------------------------------------------------------------------------ */

/* Does command-line word `arg` ("--name", "-s", without "=value") name row o? Refused rows
 * match their whole spelling; positional rows match only where they have a short_name. */
static bool argv_names(const sqz_opt *o, const char *arg) {
    if (o->flags & SQZ_OPT_REFUSE) return !strcmp(arg, o->name);
    if ((o->flags & SQZ_OPT_POSITIONAL) && !o->short_name) return false;
    if (arg[1] == '-') return !strcmp(arg + 2, o->name) || (o->alias && !strcmp(arg + 2, o->alias));
    return o->short_name && arg[1] == o->short_name && !arg[2];
}

static const sqz_opt *argv_find(const sqz_opt_group *g, int ng, const char *arg, int *gi) {
    for (int k = 0; k < ng; k++) {
        for (int i = 0; i < g[k].n; i++) {
            if (argv_names(&g[k].opts[i], arg)) {
                *gi = k;
                return &g[k].opts[i];
            }
        }
    }
    return NULL;
}

/* Levenshtein distance of a and b, or a large number past 63 characters. */
static int edit_distance(const char *a, const char *b) {
    const size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return 1000;
    int row[64];
    for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            const int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            row[j] = best < up + 1 ? best : up + 1;
            if (row[j - 1] + 1 < row[j]) row[j] = row[j - 1] + 1;
            diag = up;
        }
    }
    return row[nb];
}

/* " (did you mean --NAME?)" for the option name closest to "--word" (at most 2 edits, and
 * fewer than half of the word), or "". */
static const char *did_you_mean(const sqz_opt_group *g, int ng, const char *arg, char *buf, size_t cap) {
    buf[0] = 0;
    if (arg[0] != '-' || arg[1] != '-') return buf;
    const char *w = arg + 2, *best = NULL;
    int bd = 1000;
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const sqz_opt *o = &g[k].opts[i];
            if ((o->flags & SQZ_OPT_REFUSE) || ((o->flags & SQZ_OPT_POSITIONAL) && !o->short_name)) continue;
            const char *names[2] = {o->name, o->alias};
            for (int a = 0; a < 2; a++) {
                const int d = names[a] ? edit_distance(w, names[a]) : 1000;
                if (d < bd) {
                    bd = d;
                    best = names[a];
                }
            }
        }
    if (best && bd <= 2 && 2 * bd < (int)strlen(w)) snprintf(buf, cap, " (did you mean --%s?)", best);
    return buf;
}

static sqz_status argv_positional(const sqz_opt_group *g, int ng, const char *word, uint64_t *given) {
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const sqz_opt *o = &g[k].opts[i];
            if (!(o->flags & SQZ_OPT_POSITIONAL) || (given[k] & (1ull << i))) continue;
            given[k] |= 1ull << i;
            return sqz_opt_set(o, g[k].dst, word, o->metavar ? o->metavar : o->name);
        }
    return SQZ_ERROR(SQZ_ERR_INVALID_ARG, "unexpected argument '%s'", word);
}

static sqz_status argv_option(const sqz_opt_group *g, int ng, int argc, char **argv, int *i, uint64_t *given) {
    char name[128];
    const char *arg = argv[*i], *value = NULL, *eq = strchr(arg, '=');
    if (eq && arg[1] == '-') { /* --name=value */
        snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
        arg = name;
        value = eq + 1;
    }
    int k = 0;
    char hint[160];
    const sqz_opt *o = argv_find(g, ng, arg, &k);
    SQZ_RETURN_IF(!o, SQZ_ERR_INVALID_ARG, "unknown option '%s'%s", argv[*i], did_you_mean(g, ng, arg, hint, sizeof hint));
    SQZ_RETURN_IF(o->flags & SQZ_OPT_REFUSE, SQZ_ERR_INVALID_ARG, "unknown option '%s' (%s)", arg, o->help);
    const uint64_t bit = 1ull << (o - g[k].opts);
    SQZ_RETURN_IF((given[k] & bit) && !(o->flags & SQZ_OPT_REPEAT), SQZ_ERR_INVALID_ARG, "%s given twice", arg);
    given[k] |= bit;
    if (o->type == SQZ_OPT_FLAG) {
        SQZ_RETURN_IF(value, SQZ_ERR_INVALID_ARG, "%s takes no value", arg);
        return sqz_opt_set(o, g[k].dst, NULL, arg);
    }
    if (!value) {
        SQZ_RETURN_IF(*i + 1 >= argc, SQZ_ERR_INVALID_ARG, "missing value for %s", arg);
        value = argv[++*i];
    }
    return sqz_opt_set(o, g[k].dst, value, arg);
}

sqz_status sqz_opts_parse_argv(const sqz_opt_group *g, int ng, int argc, char **argv, uint64_t *given_out) {
    uint64_t given[16] = {0};
    SQZ_RETURN_IF(ng > 16, SQZ_ERR_INVALID_ARG, "command line: %d option groups", ng);
    for (int k = 0; k < ng; k++) SQZ_TRY(sqz_opts_defaults(g[k].opts, g[k].n, g[k].dst));
    bool words_only = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!words_only && !strcmp(a, "--")) words_only = true;
        else if (!words_only && a[0] == '-' && a[1]) SQZ_TRY(argv_option(g, ng, argc, argv, &i, given));
        else SQZ_TRY(argv_positional(g, ng, a, given));
    }
    for (int k = 0; k < ng; k++)
        for (int i = 0; i < g[k].n; i++) {
            const sqz_opt *o = &g[k].opts[i];
            SQZ_RETURN_IF((o->flags & SQZ_OPT_REQUIRED) && !(given[k] & (1ull << i)), SQZ_ERR_INVALID_ARG,
                          (o->flags & SQZ_OPT_POSITIONAL) ? "no %s given" : "no --%s given",
                          (o->flags & SQZ_OPT_POSITIONAL) && o->metavar ? o->metavar : o->name);
        }
    if (given_out) memcpy(given_out, given, (size_t)ng * sizeof *given);
    return SQZ_OK;
}

void sqz_opts_argv_each(const sqz_opt_group *g, int ng, int argc, char **argv, sqz_opt_visit_fn fn, void *user) {
    uint64_t used[16] = {0};
    bool words_only = false;
    for (int i = 1; i < argc && ng <= 16; i++) {
        const char *a = argv[i];
        if (!words_only && !strcmp(a, "--")) {
            words_only = true;
        } else if (!words_only && a[0] == '-' && a[1]) {
            char name[128];
            const char *arg = a, *value = NULL, *eq = strchr(a, '=');
            if (eq && a[1] == '-') {
                snprintf(name, sizeof name, "%.*s", (int)(eq - a), a);
                arg = name;
                value = eq + 1;
            }
            int k = 0;
            const sqz_opt *o = argv_find(g, ng, arg, &k);
            if (!o) continue;
            if (o->flags & SQZ_OPT_POSITIONAL) used[k] |= 1ull << (o - g[k].opts);
            if (o->type != SQZ_OPT_FLAG && !value) value = i + 1 < argc ? argv[++i] : NULL;
            if (o->type == SQZ_OPT_FLAG || value) fn(user, k, o, value);
        } else {
            for (int k = 0, done = 0; k < ng && !done; k++)
                for (int r = 0; r < g[k].n && !done; r++)
                    if ((g[k].opts[r].flags & SQZ_OPT_POSITIONAL) && !(used[k] & (1ull << r))) {
                        used[k] |= 1ull << r;
                        fn(user, k, &g[k].opts[r], a);
                        done = 1;
                    }
        }
    }
}

/* ---- sizes derived from options ---------------------------------------------------------- */

/* "131.1 GB" */
static const char *bytes_text(uint64_t b, char *buf, size_t cap) {
    const double v = (double)b;
    if (v >= 1e9) snprintf(buf, cap, "%.1f GB", v / 1e9);
    else if (v >= 1e6) snprintf(buf, cap, "%.1f MB", v / 1e6);
    else snprintf(buf, cap, "%llu bytes", (unsigned long long)b);
    return buf;
}

sqz_status sqz_opts_check_size(const char *what, const sqz_size_term *t, int n, uint64_t limit,
                               const char *limit_name) {
    char expr[512] = "", lim[32], got[32];
    size_t k = 0;
    uint64_t prod = 1;
    bool overflow = false;
    for (int i = 0; i < n; i++) {
        const uint64_t v = t[i].value > 0 ? (uint64_t)t[i].value : 0;
        overflow = overflow || __builtin_mul_overflow(prod, v, &prod);
        int w = snprintf(expr + k, sizeof expr - k, "%s%s %lld", i ? " x " : "", t[i].name, (long long)t[i].value);
        if (w > 0 && (size_t)w < sizeof expr - k) k += (size_t)w;
    }
    SQZ_RETURN_IF(overflow || prod > limit, SQZ_ERR_INVALID_ARG, "%s: %s = %s, more than %s (%s)", what, expr,
                  overflow ? "more than 2^64" : bytes_text(prod, got, sizeof got), limit_name,
                  bytes_text(limit, lim, sizeof lim));
    return SQZ_OK;
}

/* ---- help -------------------------------------------------------------------------------- */

/* The help text built in b (core/bytebuf.c), NULL when empty or out of memory. */
static char *sb_done(sqz__bytebuf *b) {
    char *s = b->p ? sqz__bytebuf_str(b) : NULL;
    if (!s) free(b->p);
    return s;
}

/* Command-line help: the text of each option starts at column HELP_COL; lines are at most
 * HELP_WIDTH characters long where the words allow. */
enum { HELP_COL = 28, HELP_WIDTH = 100 };

/* Appends the words of text at column `col`, going on at column `col` on the next line
 * before a word that would end past `width`. */
static void sb_wrap(sqz__bytebuf *b, const char *text, int col, int width) {
    int at = col;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        const int n = (int)strcspn(p, " ");
        if (!n) break;
        if (at > col && at + 1 + n > width) {
            sqz__bytebuf_printf(b, "\n%*s", col, "");
            at = col;
        } else if (at > col) {
            sqz__bytebuf_printf(b, " ");
            at++;
        }
        sqz__bytebuf_printf(b, "%.*s", n, p);
        at += n;
        p += n;
    }
}

/* " (default X; range)" after an option's help. */
static void help_tail(sqz__bytebuf *b, const sqz_opt *o) {
    char r[96];
    const bool has_range = (o->type == SQZ_OPT_INT || o->type == SQZ_OPT_FLOAT) && ranged(o);
    if (!o->def && !has_range && !(o->flags & SQZ_OPT_REQUIRED)) return;
    sqz__bytebuf_printf(b, " (");
    if (o->flags & SQZ_OPT_REQUIRED) sqz__bytebuf_printf(b, "required%s", o->def || has_range ? "; " : "");
    if (o->def && o->type != SQZ_OPT_FLAG) sqz__bytebuf_printf(b, "default %s%s", o->def, has_range ? "; " : "");
    if (has_range) sqz__bytebuf_printf(b, "%s", range_text(o, r, sizeof r));
    sqz__bytebuf_printf(b, ")");
}

static const char *type_metavar(const sqz_opt *o) {
    if (o->metavar) return o->metavar;
    switch (o->type) {
    case SQZ_OPT_INT: return "N";
    case SQZ_OPT_FLOAT: return "X";
    case SQZ_OPT_CHOICE: return o->choices;
    case SQZ_OPT_LIST: return "LIST";
    default: return "VALUE";
    }
}

/* One option of a command line's help: "  -o, --output OUT  help (default X; range)". */
static void help_row(sqz__bytebuf *b, const sqz_opt *o) {
    char left[160];
    const char *s = o->short_name ? "-" : "", *sep = o->short_name ? ", " : "";
    const char sn = o->short_name ? o->short_name : ' ';
    if (o->flags & SQZ_OPT_REFUSE) snprintf(left, sizeof left, "%s", o->name);
    else if (o->flags & SQZ_OPT_POSITIONAL && o->short_name)
        snprintf(left, sizeof left, "%s (or -%c, --%s %s)", type_metavar(o), o->short_name, o->name, type_metavar(o));
    else if (o->flags & SQZ_OPT_POSITIONAL) snprintf(left, sizeof left, "%s", type_metavar(o));
    else if (o->type == SQZ_OPT_FLAG) snprintf(left, sizeof left, "%s%c%s--%s", s, sn, sep, o->name);
    else snprintf(left, sizeof left, "%s%c%s--%s %s", s, sn, sep, o->name, type_metavar(o));
    const char *l = left[0] == ' ' ? left + 1 : left;
    sqz__bytebuf_printf(b, "  %-*s", HELP_COL - 2, l);
    if (strlen(l) >= HELP_COL - 2) sqz__bytebuf_printf(b, "\n%*s", HELP_COL, "");
    sqz__bytebuf d = {0};
    sqz__bytebuf_printf(&d, "%s", o->help ? o->help : "");
    help_tail(&d, o);
    if (o->alias) sqz__bytebuf_printf(&d, "; also --%s", o->alias);
    if (o->flags & SQZ_OPT_REPEAT) sqz__bytebuf_printf(&d, "; may be repeated");
    if (d.oom) b->oom = true;
    else if (d.p) sb_wrap(b, (const char *)d.p, HELP_COL, HELP_WIDTH);
    free(d.p);
    sqz__bytebuf_printf(b, "\n");
}

char *sqz_opts_help_argv(const sqz_opt_group *g, int ng) {
    sqz__bytebuf b = {0};
    for (int k = 0; k < ng; k++) {
        if (g[k].title) sqz__bytebuf_printf(&b, "\n%s:\n", g[k].title);
        for (int i = 0; i < g[k].n; i++) help_row(&b, &g[k].opts[i]);
    }
    return sb_done(&b);
}

char *sqz_opts_help_spec(const sqz_opt *t, int n, int indent) {
    sqz__bytebuf b = {0};
    const int col = indent + 18;
    for (int i = 0; i < n; i++) {
        const sqz_opt *o = &t[i];
        char left[256];
        if (o->flags & SQZ_OPT_POSITIONAL) snprintf(left, sizeof left, "%s (first)", o->name);
        else if (o->type == SQZ_OPT_CHOICE && (o->flags & SQZ_OPT_BARE)) snprintf(left, sizeof left, "%s", o->name);
        else if (o->type == SQZ_OPT_FLAG) snprintf(left, sizeof left, "%s", o->name);
        else snprintf(left, sizeof left, "%s=%s", o->name, type_metavar(o));
        sqz__bytebuf_printf(&b, "%*s%-18s", indent, "", left);
        if (strlen(left) >= 18) sqz__bytebuf_printf(&b, "\n%*s", col, "");
        sqz__bytebuf d = {0};
        if (o->type == SQZ_OPT_CHOICE) sqz__bytebuf_printf(&d, "%s%s", o->choices, o->help ? ": " : "");
        sqz__bytebuf_printf(&d, "%s", o->help ? o->help : "");
        help_tail(&d, o);
        if (d.oom) b.oom = true;
        else if (d.p) sb_wrap(&b, (const char *)d.p, col, HELP_WIDTH);
        free(d.p);
        sqz__bytebuf_printf(&b, "\n");
    }
    return sb_done(&b);
}
