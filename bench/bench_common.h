/* bench/bench_common.h - the harness every benchmark shares.
 *
 * Owns: command-line options (--reps, --json, --quick, --workers), clocks,
 * sample statistics (median, min), the least-squares fit, the result table
 * printer and the JSON writer.
 * Must never: know what is being measured, call strata, or decide a verdict
 * other than comparing a figure with the target it was given.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_REPS 1000
#define BENCH_DEFAULT_REPS 7
#define BENCH_MIN_REPS 5 /* fewer is allowed but flagged as a smoke run */
#define BENCH_MAX_WORKERS 64

/* ---- Options ---------------------------------------------------------------- */

typedef struct bench_options {
    int reps;              /* repetitions each median is taken over */
    int workers;           /* worker threads for strata and every anchor */
    int quick;             /* CI smoke run: small sizes, short windows */
    const char *json_path; /* --json FILE, or NULL */
    const char *only;      /* --only NAME: measure just this runtime (for profiling), or NULL */
    const char *program;   /* argv[0], for messages */
} bench_options;

/* Parse the common options. Returns 0 to go on, 1 when --help was printed
 * (exit 0), -1 on a bad option (message printed; exit 2). */
int bench_parse_args(int argc, char **argv, const char *what, bench_options *out);

/* Whether runtime `name` ("strata", "starpu", "libgomp") is to be measured. */
int bench_wants(const bench_options *opt, const char *name);

/* ---- Clocks ----------------------------------------------------------------- */

uint64_t bench_now_ns(void);
/* User + system CPU seconds consumed by the whole process so far. */
double bench_process_cpu_s(void);
/* Sleep for the given seconds, resuming after signals. */
void bench_sleep_s(double seconds);
/* Called before each runtime's sample: sleeps in 5 ms slices until the
 * process is quiet (the previous runtime's threads finished their
 * spin-before-sleep and left the cores), at most 200 ms. */
void bench_settle(void);

/* ---- Samples and statistics ------------------------------------------------- */

/* Repeated measurements of one figure (one sample per repetition). */
typedef struct bench_series {
    int n;
    double v[BENCH_MAX_REPS];
} bench_series;

typedef struct bench_stats {
    int n;
    double median;
    double min;
    double max;
} bench_stats;

void bench_series_add(bench_series *s, double value);
bench_stats bench_series_stats(const bench_series *s);

/* Least-squares y = intercept + slope * x; r2 is the coefficient of determination. */
void bench_linear_fit(const double *x, const double *y, int n, double *intercept, double *slope,
                      double *r2);

/* ---- Result tables ---------------------------------------------------------- */

#define BENCH_MAX_ANCHORS 3
#define BENCH_MAX_ROWS 32
#define BENCH_MAX_TABLES 8

/* One figure: measured (median/min of samples), quoted from a document, or
 * unavailable (note says why, e.g. the anchor is not installed). */
typedef enum bench_value_kind {
    BENCH_UNAVAILABLE = 0,
    BENCH_MEASURED,
    BENCH_QUOTED
} bench_value_kind;

typedef struct bench_value {
    bench_value_kind kind;
    bench_stats stats; /* stats.median is the figure; for QUOTED only median is set */
    char note[96];     /* why a figure is unavailable */
} bench_value;

/* strata compared with one anchor: ratio = strata / anchor. target_ratio > 0
 * is the ratio strata must stay at or under; 0 means informational only. */
typedef struct bench_compare {
    char anchor[24];
    bench_value value;
    double target_ratio;
} bench_compare;

typedef struct bench_row {
    char metric[48];
    char unit[12];
    bench_value strata;
    double target_max; /* absolute bound on strata's median; 0 = none */
    int ncompare;
    bench_compare compare[BENCH_MAX_ANCHORS];
} bench_row;

typedef struct bench_table {
    char title[160];
    int smoke; /* made by a --quick run: targets are shown, not judged */
    int nrows;
    bench_row rows[BENCH_MAX_ROWS];
} bench_table;

/* Every table one benchmark produced, for printing and the JSON file. */
typedef struct bench_report {
    const bench_options *opt;
    int ntables;
    bench_table tables[BENCH_MAX_TABLES];
} bench_report;

void bench_report_init(bench_report *r, const bench_options *opt);
/* A new table (NULL when BENCH_MAX_TABLES are used; callers size their reports). */
bench_table *bench_report_table(bench_report *r, const char *title_fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A new row; strata's value is set from samples (MEASURED, or UNAVAILABLE
 * when there are none, i.e. strata was skipped with --only). */
bench_row *bench_table_row(bench_table *t, const char *metric, const char *unit,
                           const bench_series *strata, double target_max);

/* MEASURED from samples; UNAVAILABLE ("skipped (--only)") without any. */
bench_value bench_measured(const bench_series *s);
/* A figure computed from measurements (e.g. a fit): `median` is the figure,
 * `min` the same computation on the least disturbed samples. */
bench_value bench_derived(double median, double min, int n);
bench_value bench_quoted(double figure);
bench_value bench_unavailable(const char *why);
void bench_row_compare(bench_row *row, const char *anchor, bench_value value, double target_ratio);

/* Print one table to stdout. */
void bench_table_print(const bench_table *t);
/* Write every row as a JSON array to opt->json_path (if set). 0 or -1. */
int bench_report_write_json(const bench_report *r);

/* Number of rows whose strata figure misses an absolute or ratio target. */
int bench_report_misses(const bench_report *r);
/* "targets missed: N", or for a --quick run that its targets are not judged. */
void bench_report_print_verdict(const bench_report *r);

/* ---- StarPU anchor ------------------------------------------------------------ */

/* Shown in an anchor's column when the benchmark was built without StarPU. */
#define BENCH_STARPU_MISSING "starpu: not installed (apt-get install libstarpu-dev)"

#if BENCH_HAVE_STARPU
/* Start StarPU with ncpus CPU workers and no accelerators, then pause it:
 * StarPU's idle workers busy-poll, which would steal the cores from whatever
 * is measured next. Resume around each StarPU measurement. 0, or -1 with a
 * reason in why. */
int bench_starpu_start(int ncpus, char *why, size_t len);
void bench_starpu_stop(void);
/* Name of the scheduling policy StarPU chose ("?" if unknown). */
const char *bench_starpu_sched_name(void);
#endif

#endif /* BENCH_COMMON_H */
