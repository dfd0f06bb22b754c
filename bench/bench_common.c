/* bench/bench_common.c - the harness every benchmark shares.
 *
 * Owns: option parsing, clocks, statistics, the table printer and the JSON
 * writer declared in bench_common.h.
 * Must never: call strata or an anchor; a benchmark hands it numbers only.
 */
#include "bench_common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#if BENCH_HAVE_STARPU
#include <starpu.h>
#endif

/* ---- Options ---------------------------------------------------------------- */

static void print_usage(const char *program, const char *what) {
    printf("usage: %s [--reps N] [--workers N] [--quick] [--json FILE] [--only NAME]\n"
           "%s\n"
           "  --reps N     repetitions each median is taken over (default %d; >= %d for a\n"
           "               reportable figure)\n"
           "  --workers N  worker threads for strata and every anchor (default 2)\n"
           "  --quick      CI smoke run: small sizes and short windows\n"
           "  --json FILE  also write the rows as one JSON array to FILE\n"
           "  --only NAME  measure only strata, starpu or libgomp (for profiling one\n"
           "               runtime with perf; the others' columns read n/a)\n",
           program, what, BENCH_DEFAULT_REPS, BENCH_MIN_REPS);
}

/* Parse a positive int option value in [1, max]; -1 with a message otherwise. */
static int parse_count(const char *opt, const char *text, int max, int *out) {
    char *end = NULL;
    errno = 0;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || errno || *end || v < 1 || v > max) {
        fprintf(stderr, "%s needs an integer between 1 and %d (got '%s')\n", opt, max,
                text ? text : "nothing");
        return -1;
    }
    *out = (int)v;
    return 0;
}

int bench_parse_args(int argc, char **argv, const char *what, bench_options *out) {
    int reps_given = 0;
    memset(out, 0, sizeof *out);
    out->reps = BENCH_DEFAULT_REPS;
    out->workers = 2;
    out->program = argc > 0 ? argv[0] : "bench";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(out->program, what);
            return 1;
        } else if (!strcmp(a, "--quick")) {
            out->quick = 1;
        } else if (!strcmp(a, "--reps")) {
            if (parse_count(a, next, BENCH_MAX_REPS, &out->reps))
                return -1;
            reps_given = 1;
            i++;
        } else if (!strcmp(a, "--workers")) {
            if (parse_count(a, next, BENCH_MAX_WORKERS, &out->workers))
                return -1;
            i++;
        } else if (!strcmp(a, "--only")) {
            if (!next ||
                (strcmp(next, "strata") && strcmp(next, "starpu") && strcmp(next, "libgomp"))) {
                fprintf(stderr, "--only needs strata, starpu or libgomp\n");
                return -1;
            }
            out->only = next;
            i++;
        } else if (!strcmp(a, "--json")) {
            if (!next) {
                fprintf(stderr, "--json needs a file name\n");
                return -1;
            }
            out->json_path = next;
            i++;
        } else {
            fprintf(stderr, "unknown option '%s' (try --help)\n", a);
            return -1;
        }
    }
    /* A smoke run still takes a median: the minimum reportable count. */
    if (out->quick && !reps_given)
        out->reps = BENCH_MIN_REPS;
    if (out->reps < BENCH_MIN_REPS)
        fprintf(stderr, "note: --reps %d < %d: figures are a smoke test, not a measurement\n",
                out->reps, BENCH_MIN_REPS);
    return 0;
}

int bench_wants(const bench_options *opt, const char *name) {
    return !opt->only || !strcmp(opt->only, name);
}

/* ---- Clocks ----------------------------------------------------------------- */

uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double bench_process_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void bench_sleep_s(double seconds) {
    struct timespec left;
    left.tv_sec = (time_t)seconds;
    left.tv_nsec = (long)((seconds - (double)left.tv_sec) * 1e9);
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

/* Quiet: the other threads used under 5% of a core over a 5 ms slice. The
 * longest spin seen here is libgomp's after a parallel region: about 9 ms of
 * CPU (bench_idle_cpu), longer than a fixed 5 ms pause, so the next runtime's
 * sample started with one of two cores taken. */
#define SETTLE_SLICE_S 0.005
#define SETTLE_QUIET_CPU_S (0.05 * SETTLE_SLICE_S)
#define SETTLE_MAX_SLICES 40

void bench_settle(void) {
    for (int i = 0; i < SETTLE_MAX_SLICES; i++) {
        double cpu0 = bench_process_cpu_s();
        bench_sleep_s(SETTLE_SLICE_S);
        if (bench_process_cpu_s() - cpu0 < SETTLE_QUIET_CPU_S)
            return;
    }
}

/* ---- Statistics ------------------------------------------------------------- */

void bench_series_add(bench_series *s, double value) {
    if (s->n < BENCH_MAX_REPS)
        s->v[s->n++] = value;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stats bench_series_stats(const bench_series *s) {
    bench_stats st = {0, NAN, NAN, NAN};
    if (s->n == 0)
        return st;
    double sorted[BENCH_MAX_REPS];
    memcpy(sorted, s->v, (size_t)s->n * sizeof sorted[0]);
    qsort(sorted, (size_t)s->n, sizeof sorted[0], compare_doubles);
    st.n = s->n;
    st.min = sorted[0];
    st.max = sorted[s->n - 1];
    st.median = s->n % 2 ? sorted[s->n / 2] : 0.5 * (sorted[s->n / 2 - 1] + sorted[s->n / 2]);
    return st;
}

void bench_linear_fit(const double *x, const double *y, int n, double *intercept, double *slope,
                      double *r2) {
    double sx = 0, sy = 0;
    for (int i = 0; i < n; i++) {
        sx += x[i];
        sy += y[i];
    }
    double mx = sx / n, my = sy / n, sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < n; i++) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    *slope = sxx > 0 ? sxy / sxx : 0;
    *intercept = my - *slope * mx;
    *r2 = sxx > 0 && syy > 0 ? (sxy * sxy) / (sxx * syy) : 1.0;
}

/* ---- Tables ----------------------------------------------------------------- */

void bench_report_init(bench_report *r, const bench_options *opt) {
    memset(r, 0, sizeof *r);
    r->opt = opt;
}

bench_table *bench_report_table(bench_report *r, const char *title_fmt, ...) {
    if (r->ntables >= BENCH_MAX_TABLES)
        return NULL;
    bench_table *t = &r->tables[r->ntables++];
    memset(t, 0, sizeof *t);
    t->smoke = r->opt->quick;
    va_list ap;
    va_start(ap, title_fmt);
    vsnprintf(t->title, sizeof t->title, title_fmt, ap);
    va_end(ap);
    return t;
}

bench_value bench_measured(const bench_series *s) {
    if (s->n == 0)
        return bench_unavailable("skipped (--only)");
    bench_value v;
    memset(&v, 0, sizeof v);
    v.kind = BENCH_MEASURED;
    v.stats = bench_series_stats(s);
    return v;
}

bench_value bench_derived(double median, double min, int n) {
    bench_value v;
    memset(&v, 0, sizeof v);
    v.kind = BENCH_MEASURED;
    v.stats.n = n;
    v.stats.median = median;
    v.stats.min = v.stats.max = min;
    return v;
}

bench_value bench_quoted(double figure) {
    bench_value v;
    memset(&v, 0, sizeof v);
    v.kind = BENCH_QUOTED;
    v.stats.n = 1;
    v.stats.median = v.stats.min = v.stats.max = figure;
    return v;
}

bench_value bench_unavailable(const char *why) {
    bench_value v;
    memset(&v, 0, sizeof v);
    v.kind = BENCH_UNAVAILABLE;
    v.stats.median = v.stats.min = v.stats.max = NAN;
    snprintf(v.note, sizeof v.note, "%s", why);
    return v;
}

bench_row *bench_table_row(bench_table *t, const char *metric, const char *unit,
                           const bench_series *strata, double target_max) {
    if (t->nrows >= BENCH_MAX_ROWS)
        return NULL;
    bench_row *row = &t->rows[t->nrows++];
    memset(row, 0, sizeof *row);
    snprintf(row->metric, sizeof row->metric, "%s", metric);
    snprintf(row->unit, sizeof row->unit, "%s", unit);
    row->strata = bench_measured(strata);
    row->target_max = target_max;
    return row;
}

void bench_row_compare(bench_row *row, const char *anchor, bench_value value, double target_ratio) {
    if (row->ncompare >= BENCH_MAX_ANCHORS)
        return;
    bench_compare *c = &row->compare[row->ncompare++];
    snprintf(c->anchor, sizeof c->anchor, "%s", anchor);
    c->value = value;
    c->target_ratio = target_ratio;
}

static int has_figure(const bench_value *v) {
    return v->kind != BENCH_UNAVAILABLE && isfinite(v->stats.median);
}

/* strata / anchor, or NAN when either side has no figure or the anchor is 0. */
static double compare_ratio(const bench_row *row, const bench_compare *c) {
    if (!has_figure(&row->strata) || !has_figure(&c->value) || c->value.stats.median <= 0)
        return NAN;
    return row->strata.stats.median / c->value.stats.median;
}

/* Verdicts: -1 no target, 1 met, 0 missed (a missing figure counts as
 * missed), VERDICT_SMOKE not judged (a --quick run's sizes are too small for
 * a reportable figure). */
#define VERDICT_SMOKE -2

static int ratio_verdict(const bench_table *t, const bench_row *row, const bench_compare *c) {
    if (c->target_ratio <= 0)
        return -1;
    if (t->smoke)
        return VERDICT_SMOKE;
    double r = compare_ratio(row, c);
    if (c->value.kind == BENCH_UNAVAILABLE)
        return -1; /* nothing to compare with: reported, not judged */
    return isfinite(r) && r <= c->target_ratio;
}

static int absolute_verdict(const bench_table *t, const bench_row *row) {
    if (row->target_max <= 0)
        return -1;
    if (t->smoke)
        return VERDICT_SMOKE;
    return has_figure(&row->strata) && row->strata.stats.median <= row->target_max;
}

static const char *verdict_text(int v) {
    return v == VERDICT_SMOKE ? "smoke" : v < 0 ? "" : v ? "ok" : "MISS";
}

/* "median (min)" of a value, or its note, into buf. */
static void format_value(const bench_value *v, char *buf, size_t len) {
    switch (v->kind) {
    case BENCH_MEASURED:
        snprintf(buf, len, "%.3f (%.3f)", v->stats.median, v->stats.min);
        break;
    case BENCH_QUOTED:
        snprintf(buf, len, "%.3f (doc)", v->stats.median);
        break;
    case BENCH_UNAVAILABLE:
    default:
        snprintf(buf, len, "n/a");
        break;
    }
}

static void print_header(const bench_table *t) {
    int ncompare = 0;
    for (int i = 0; i < t->nrows; i++)
        if (t->rows[i].ncompare > ncompare)
            ncompare = t->rows[i].ncompare;
    printf("%-30s %-8s %-20s %-13s", "metric", "unit", "strata med (min)", "target");
    for (int k = 0; k < ncompare; k++) {
        const char *name = "anchor";
        for (int i = 0; i < t->nrows; i++)
            if (k < t->rows[i].ncompare) {
                name = t->rows[i].compare[k].anchor;
                break;
            }
        char head[48];
        snprintf(head, sizeof head, "%s med (min)", name);
        printf(" | %-20s %-7s %-12s", head, "ratio", "target");
    }
    printf("\n");
}

static void print_row(const bench_table *t, const bench_row *row) {
    char value[48], target[32];
    format_value(&row->strata, value, sizeof value);
    if (row->target_max > 0)
        snprintf(target, sizeof target, "<=%g %s", row->target_max,
                 verdict_text(absolute_verdict(t, row)));
    else
        snprintf(target, sizeof target, "-");
    printf("%-30s %-8s %-20s %-13s", row->metric, row->unit, value, target);
    for (int k = 0; k < row->ncompare; k++) {
        const bench_compare *c = &row->compare[k];
        double r = compare_ratio(row, c);
        char ratio[16];
        format_value(&c->value, value, sizeof value);
        if (isfinite(r))
            snprintf(ratio, sizeof ratio, "%.2f", r);
        else
            snprintf(ratio, sizeof ratio, "-");
        if (c->target_ratio > 0)
            snprintf(target, sizeof target, "<=%.2f %s", c->target_ratio,
                     verdict_text(ratio_verdict(t, row, c)));
        else
            snprintf(target, sizeof target, "-");
        printf(" | %-20s %-7s %-12s", value, ratio, target);
    }
    printf("\n");
}

/* Notes of unavailable anchors, printed once under the table. */
static void print_notes(const bench_table *t) {
    for (int i = 0; i < t->nrows; i++)
        for (int k = 0; k < t->rows[i].ncompare; k++) {
            const bench_compare *c = &t->rows[i].compare[k];
            if (c->value.kind != BENCH_UNAVAILABLE)
                continue;
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                for (int m = 0; m < t->rows[j].ncompare; m++)
                    seen |= !strcmp(t->rows[j].compare[m].anchor, c->anchor) &&
                            t->rows[j].compare[m].value.kind == BENCH_UNAVAILABLE;
            size_t len = strlen(c->anchor);
            int named = !strncmp(c->value.note, c->anchor, len) && c->value.note[len] == ':';
            if (!seen)
                printf("  %s%s%s\n", named ? "" : c->anchor, named ? "" : ": ", c->value.note);
        }
}

void bench_table_print(const bench_table *t) {
    printf("\n== %s ==\n", t->title);
    print_header(t);
    for (int i = 0; i < t->nrows; i++)
        print_row(t, &t->rows[i]);
    print_notes(t);
    fflush(stdout);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

static void json_verdict(FILE *f, int v) {
    fprintf(f, "%s", v < 0 ? "null" : v ? "true" : "false"); /* null: no target, or smoke */
}

static const char *kind_name(bench_value_kind k) {
    return k == BENCH_MEASURED ? "measured" : k == BENCH_QUOTED ? "quoted" : "unavailable";
}

/* The fields every object of a row carries. */
static void json_row_common(FILE *f, const bench_report *r, const bench_table *t,
                            const bench_row *row) {
    fprintf(f, "{\"metric\": ");
    json_string(f, row->metric);
    fprintf(f, ", \"unit\": ");
    json_string(f, row->unit);
    fprintf(f, ", \"strata\": ");
    json_number(f, row->strata.stats.median);
    fprintf(f, ", \"strata_min\": ");
    json_number(f, row->strata.stats.min);
    fprintf(f, ", \"target_max\": ");
    json_number(f, row->target_max > 0 ? row->target_max : NAN);
    fprintf(f, ", \"target_max_met\": ");
    json_verdict(f, absolute_verdict(t, row));
    fprintf(f, ", \"reps\": %d, \"workers\": %d, \"quick\": %s, \"table\": ", r->opt->reps,
            r->opt->workers, r->opt->quick ? "true" : "false");
    json_string(f, t->title);
}

static void json_compare(FILE *f, const bench_table *t, const bench_row *row,
                         const bench_compare *c) {
    fprintf(f, ", ");
    json_string(f, c->anchor);
    fprintf(f, ": ");
    json_number(f, c->value.stats.median);
    fprintf(f, ", \"anchor\": ");
    json_string(f, c->anchor);
    fprintf(f, ", \"anchor_kind\": \"%s\", \"anchor_min\": ", kind_name(c->value.kind));
    json_number(f, c->value.stats.min);
    fprintf(f, ", \"ratio\": ");
    json_number(f, compare_ratio(row, c));
    fprintf(f, ", \"target_ratio\": ");
    json_number(f, c->target_ratio > 0 ? c->target_ratio : NAN);
    fprintf(f, ", \"target_ratio_met\": ");
    json_verdict(f, ratio_verdict(t, row, c));
    if (c->value.kind == BENCH_UNAVAILABLE) {
        fprintf(f, ", \"note\": ");
        json_string(f, c->value.note);
    }
}

int bench_report_write_json(const bench_report *r) {
    if (!r->opt->json_path)
        return 0;
    FILE *f = fopen(r->opt->json_path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s: %s\n", r->opt->json_path, strerror(errno));
        return -1;
    }
    int first = 1;
    fprintf(f, "[");
    for (int i = 0; i < r->ntables; i++) {
        const bench_table *t = &r->tables[i];
        for (int j = 0; j < t->nrows; j++) {
            const bench_row *row = &t->rows[j];
            /* One object per (metric, anchor) pair; a row without anchors gives one. */
            int objects = row->ncompare ? row->ncompare : 1;
            for (int k = 0; k < objects; k++) {
                fprintf(f, "%s\n  ", first ? "" : ",");
                first = 0;
                json_row_common(f, r, t, row);
                if (row->ncompare)
                    json_compare(f, t, row, &row->compare[k]);
                fprintf(f, "}");
            }
        }
    }
    fprintf(f, "\n]\n");
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "writing %s failed\n", r->opt->json_path);
        return -1;
    }
    return 0;
}

int bench_report_misses(const bench_report *r) {
    int misses = 0;
    for (int i = 0; i < r->ntables; i++)
        for (int j = 0; j < r->tables[i].nrows; j++) {
            const bench_row *row = &r->tables[i].rows[j];
            misses += absolute_verdict(&r->tables[i], row) == 0;
            for (int k = 0; k < row->ncompare; k++)
                misses += ratio_verdict(&r->tables[i], row, &row->compare[k]) == 0;
        }
    return misses;
}

void bench_report_print_verdict(const bench_report *r) {
    if (r->opt->quick)
        printf("targets not judged: --quick is a smoke run (sizes too small for a reportable "
               "figure)\n");
    else
        printf("targets missed: %d\n", bench_report_misses(r));
}

/* ---- StarPU anchor ------------------------------------------------------------ */

#if BENCH_HAVE_STARPU
int bench_starpu_start(int ncpus, char *why, size_t len) {
    char count[16];
    snprintf(count, sizeof count, "%d", ncpus);
    /* The same worker count as strata, whatever the caller's environment says. */
    setenv("STARPU_NCPU", count, 1);
    setenv("STARPU_SILENT", "1", 0);
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = ncpus;
    conf.ncuda = 0;
    conf.nopencl = 0;
    int rc = starpu_init(&conf);
    if (rc != 0) {
        snprintf(why, len, "starpu_init failed (%d)", rc);
        return -1;
    }
    if ((int)starpu_cpu_worker_get_count() != ncpus) {
        snprintf(why, len, "StarPU started %u CPU workers instead of %d",
                 starpu_cpu_worker_get_count(), ncpus);
        starpu_shutdown();
        return -1;
    }
    starpu_pause();
    return 0;
}

void bench_starpu_stop(void) {
    starpu_resume();
    starpu_shutdown();
}

const char *bench_starpu_sched_name(void) {
    struct starpu_sched_policy *p = starpu_sched_ctx_get_sched_policy(0);
    return p && p->policy_name ? p->policy_name : "?";
}
#endif
