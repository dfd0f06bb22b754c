/* bench/bench_l4_children.c - what a next-level task through a child Worker
 * costs: an L4 with two L3 children, thread- and process-hosted.
 *
 * Owns: the per-task cost of an L4 run of many next-level tasks, each one
 * trivial run (one empty sub task) on one of two L3 children taken in turn,
 * next to the same trivial graph run directly on an L3 (strata_worker_run),
 * measured in the same invocation (anchor column "L3"; informational ratio).
 * Must never: mix the L4's fixed cost per run into the per-task figure (many
 * tasks per L4 run), or compare figures measured in different invocations.
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/strata.h>

typedef struct child_ids {
    strata_callable empty;
} child_ids;
static child_ids g_child; /* the same in every child: registered first in each */

static int empty_task(const strata_task_view *args, void *user) {
    (void)args;
    (void)user;
    return 0;
}

/* The trivial graph: one empty sub task. */
static int trivial_graph(strata_orch *o, void *arg) {
    (void)arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_sub(o, g_child.empty, &a);
}

static int child_setup(strata_worker *w, void *user) {
    (void)user;
    return strata_worker_register_sub(w, "empty", empty_task, NULL, &g_child.empty);
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "strata: %s failed: %s: %s\n", what, strata_status_name(rc),
            strata_error_message());
    return rc;
}

/* ---- L3 directly ---------------------------------------------------------------------- */

static int l3_sample(strata_worker *w, int runs, double *us) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++) {
        int rc = strata_worker_run(w, trivial_graph, NULL);
        if (rc)
            return fail("strata_worker_run (L3)", rc);
    }
    *us = (double)(bench_now_ns() - t0) / 1e3 / runs;
    return 0;
}

/* ---- L4 over two children ---------------------------------------------------------------- */

typedef struct l4_side {
    strata_worker *w;
    int child[2];
    strata_callable graph;
    int ntasks;
} l4_side;

static int l4_orch(strata_orch *o, void *arg) {
    const l4_side *s = arg;
    for (int i = 0; i < s->ntasks; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_next_level(o, s->graph, &a, NULL, s->child[i % 2]));
    }
    return STRATA_OK;
}

static int l4_start(l4_side *s, strata_host_mode host, int ntasks) {
    memset(s, 0, sizeof *s);
    s->ntasks = ntasks;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.level = 4;
    cfg.sub_workers = 1;
    int rc = strata_worker_create(&cfg, &s->w);
    if (rc)
        return fail("strata_worker_create (L4)", rc);
    for (int k = 0; k < 2; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker.sub_workers = 1;
        cc.host = host;
        cc.setup = child_setup;
        if ((rc = strata_worker_add_child(s->w, &cc, &s->child[k])) != 0)
            return fail("strata_worker_add_child", rc);
    }
    if ((rc = strata_worker_register_orch(s->w, "trivial", trivial_graph, NULL, &s->graph)) != 0)
        return fail("strata_worker_register_orch", rc);
    if ((rc = strata_worker_init(s->w)) != 0)
        return fail("strata_worker_init (L4)", rc);
    return 0;
}

static int l4_sample(l4_side *s, int runs, double *us_per_task) {
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < runs; r++) {
        int rc = strata_worker_run(s->w, l4_orch, s);
        if (rc)
            return fail("strata_worker_run (L4)", rc);
    }
    *us_per_task = (double)(bench_now_ns() - t0) / 1e3 / runs / s->ntasks;
    return 0;
}

/* ---- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "per-task cost of a next-level task through a child "
                               "Worker (L4 -> L3), next to the L3 figure",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    int ntasks = opt.quick ? 16 : 128;
    int l3_runs = opt.quick ? 200 : 5000;
    int l4_runs = opt.quick ? 4 : 40;

    strata_worker *l3 = NULL;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    int rc = strata_worker_create(&cfg, &l3);
    if (!rc)
        rc = child_setup(l3, NULL);
    if (!rc)
        rc = strata_worker_init(l3);
    if (rc)
        return fail("the L3", rc), 1;

    static const strata_host_mode hosts[2] = {STRATA_HOST_PROCESS, STRATA_HOST_THREAD};
    static const char *const names[2] = {"per task (process child)", "per task (thread child)"};
    bench_series l4s[2], l3s[2];
    memset(l4s, 0, sizeof l4s);
    memset(l3s, 0, sizeof l3s);
    char why[2][96] = {"", ""};
    for (int h = 0; h < 2; h++) {
        l4_side s;
        if (l4_start(&s, hosts[h], ntasks)) {
            snprintf(why[h], sizeof why[h], "unavailable: %.70s", strata_error_message());
            strata_worker_destroy(s.w);
            continue;
        }
        double v;
        if (l4_sample(&s, 1, &v) == 0) /* warm-up */
            for (int r = 0; r < opt.reps; r++) {
                bench_settle();
                if (l4_sample(&s, l4_runs, &v))
                    break;
                bench_series_add(&l4s[h], v);
                bench_settle();
                if (l3_sample(l3, l3_runs, &v))
                    break;
                bench_series_add(&l3s[h], v);
            }
        strata_worker_destroy(s.w);
    }
    strata_worker_destroy(l3);

    bench_report report;
    bench_report_init(&report, &opt);
    bench_table *t = bench_report_table(
        &report,
        "L4 with two L3 children: %d next-level tasks per L4 run, each one run of one "
        "empty sub task on a child; L3 = that run directly on an L3 (us per run)",
        ntasks);
    for (int h = 0; h < 2; h++) {
        bench_row *row = bench_table_row(t, names[h], "us", &l4s[h], 0);
        if (why[h][0])
            row->strata = bench_unavailable(why[h]);
        bench_row_compare(row, "L3", l3s[h].n ? bench_measured(&l3s[h]) : bench_unavailable(why[h]),
                          0);
    }
    bench_table_print(t);
    if (bench_report_write_json(&report))
        return 1;
    bench_report_print_verdict(&report);
    return 0;
}
