/* tests/unit/test_trace_child_times.c - times a child process hands back
 * with a result are bounded before the trace uses them: a start before the
 * task's dispatch, an end past the parent's clock or before the start is
 * dropped (the bar falls back to the parent's dispatch-to-completion times,
 * "measured": false) and counted in otherData.times_rejected, and a result
 * frame refused by its identity check lends the task none of its times.
 *
 * Owns: a next-level process child of the test's own kind that writes the
 * times it is told to (exec/process_endpoint.h, st_proc_task_times).
 * Must never: assert durations: only which bars were measured and the count.
 * Forks processes: not a concurrency (TSan) test.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "exec/process_endpoint.h"
#include "test_support.h"
#include "util/stamp.h"

enum { HONEST, END_IN_FUTURE, START_BEFORE_DISPATCH, END_BEFORE_START, BAD_IDENTITY, NMODES };

/* Runs in the child: scalar 0 says which times it reports. */
static void lying_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                       const st_callable_info *ci) {
    (void)self;
    (void)ci;
    uint64_t t0 = st_stamp(), t1 = st_stamp() + 1; /* as a child stamps (util/stamp.h) */
    switch (args->nscalars > 0 ? args->scalars[0] : HONEST) {
    case END_IN_FUTURE:
        t1 = t0 + 3600 * TS_SEC;
        break;
    case START_BEFORE_DISPATCH:
        t0 = 1;
        break;
    case END_BEFORE_START:
        t1 = t0 - 1;
        break;
    case BAD_IDENTITY: /* honest times on a frame answered as another dispatch */
        st_mbox_task(m, frame)->trailer.dispatch_id += 100;
        break;
    default:
        break;
    }
    st_proc_task_times(m, frame, t0, t1);
    st_proc_task_finish(m, frame, STRATA_OK, NULL);
}

static int plain_init(void *arg, void **self) {
    (void)arg;
    *self = NULL;
    return STRATA_OK;
}

static void quiet_shutdown(void *self, st_mbox *m) {
    (void)self;
    (void)m;
}

static const st_proc_kind lying_kind = {.name = "lying",
                                        .frames = 1,
                                        .init = plain_init,
                                        .task = lying_task,
                                        .shutdown = quiet_shutdown};

typedef struct job {
    strata_callable fn;
    int worker_id;
    uint64_t mode;
} job;

static int orch_one(strata_orch *o, void *arg) {
    job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, j->mode));
    return strata_orch_submit_next_level(o, j->fn, &a, NULL, j->worker_id);
}

static void child_times_out_of_bounds_are_dropped_and_counted(void **state) {
    (void)state;
    char path[256], here[512], cmd[2048];
    snprintf(path, sizeof path, "/tmp/strata-test-trace-%ld-child-times.json", (long)getpid());
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_THREAD;
    cfg.trace_path = path;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    st_proc_ep_config pc = {.kind = &lying_kind,
                            .worker_id = -1,
                            .spin_ns = 1000,
                            .startup_timeout_ns = 30 * TS_SEC,
                            .timed = 1};
    snprintf(pc.label, sizeof pc.label, "L3 child 0");
    st_proc_ep *p;
    assert_ok(st_proc_ep_create(w, &pc, &p));
    job j = {0};
    assert_ok(st_worker_add_endpoint(w, st_proc_ep_endpoint(p), &j.worker_id));
    assert_ok(st_register_next_level(w, "lying", NULL, NULL, NULL, &j.fn));
    assert_ok(strata_worker_init(w));
    for (j.mode = 0; j.mode < NMODES; j.mode++) /* run mode + 1 holds mode's task */
        assert_int_equal(strata_worker_run(w, orch_one, &j),
                         j.mode == BAD_IDENTITY ? STRATA_EENDPOINT : STRATA_OK);
    strata_worker_destroy(w);
    snprintf(here, sizeof here, "%s", __FILE__);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/../support/trace_check.py %s %d >/dev/null && "
             "/usr/bin/python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); "
             "t=sorted((e['args']['run'],e['args']['measured']) for e in d['traceEvents'] "
             "if e.get('cat')=='task'); "
             "got=(t,d['otherData']['times_rejected']); "
             "want=([(1,True),(2,False),(3,False),(4,False),(5,False)],3); "
             "sys.exit(0 if got==want else print(got) or 3)\" %s",
             dirname(here), path, NMODES, path);
    assert_int_equal(system(cmd), 0);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(child_times_out_of_bounds_are_dropped_and_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
