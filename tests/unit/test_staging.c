// label: concurrency
/* tests/unit/test_staging.c - staging across runs on a thread-hosted chip:
 * the engine's side (core/dispatch.c: which tasks of the successor run are
 * dispatched early, staged) and the chip endpoint's (exec/chip_endpoint.c:
 * a staged task goes to the lane unactivated, is prepared early where the
 * chip allows, launches only once its run is the head), and the lane's order
 * (chip/run_lane.c: activated first, then dispatch id).
 *
 * Owns: a successor's chip task staged and prepared but not launched before
 * activation; a head-run task dispatched after a staged one running first
 * (hazard H1: these deadlock without the rule), also on a chip of depth 1
 * (no lane place for a staged task); diagnostics and sub tasks never staged;
 * a stale identity at activation poisoning the endpoint; a stop with a
 * staged successor, and a failed head with a cancelled successor (the staged
 * task completed exactly once, its preparation released).
 * Must never: assert on timing: the head run is held on the device by a
 * kernel that waits for a gate word the test opens, and every wait for a
 * state is a bounded poll of that state.
 */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chip/chip_internal.h"
#include "chip/chip_worker.h"
#include "chip/run_lane.h"
#include "exec/chip_endpoint.h"
#include "strata/sim.h"
#include "util/clock.h"

#define WAIT_NS (10 * TS_SEC)
#define NPROBES 8

typedef struct fixture {
    ts_worker t;
    uint32_t chip_depth;
    int chip; /* its worker id */
    strata_callable hold, probe;
    _Atomic uint32_t gate;         /* the hold kernel returns once this is set */
    _Atomic int prepared[NPROBES]; /* probe programs run (one per native prepare), by index */
    strata_buffer *buf;            /* host memory, for edges between chip tasks */
} fixture;

/* ---- programs -------------------------------------------------------------------------- */

static int hold_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t gate = strata_args_scalar(a, 0);
    return strata_program_launch(ctx, "hold_kernel", 1, &gate, 1);
}

static int probe_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    fixture *f = user;
    uint64_t i = strata_args_scalar(a, 0);
    if (i < NPROBES)
        atomic_fetch_add(&f->prepared[i], 1);
    return strata_program_launch(ctx, "empty_kernel", 1, NULL, 0);
}

/* ---- fixture ----------------------------------------------------------------------------- */

static void add_chip(strata_worker *w, void *ctx) {
    fixture *f = ctx;
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.pipeline_depth = f->chip_depth;
    assert_ok(strata_worker_add_chip(w, &cc, &f->chip));
}

static fixture *make(uint32_t chip_depth) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->chip_depth = chip_depth;
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 1;
    o.cfg.pipeline_depth = 2;
    o.buffers[0] = 256;
    o.before_init = add_chip;
    o.before_init_ctx = f;
    ts_worker_open(&f->t, &o);
    f->buf = f->t.buf[0];
    strata_chip_program_desc d = {.name = "hold", .fn = hold_program};
    assert_ok(strata_worker_register_chip_program(f->t.w, &d, &f->hold));
    d = (strata_chip_program_desc){.name = "probe", .fn = probe_program, .user = f};
    assert_ok(strata_worker_register_chip_program(f->t.w, &d, &f->probe));
    return f;
}

static void open_gate(fixture *f) {
    atomic_store_explicit(&f->gate, 1, memory_order_release);
}

static void destroy(fixture *f) {
    open_gate(f);
    ts_worker_close(&f->t);
    free(f);
}

static st_endpoint *chip_ep_of(fixture *f) {
    st_endpoint *ep = st_worker_next_endpoint(f->t.w, f->chip);
    assert_non_null(ep);
    return ep;
}

static st_run_lane *lane_of(fixture *f) {
    return st_chip_lane(((chip_ep *)chip_ep_of(f))->chip);
}

/* Every native run storage slot of the chip is EMPTY: whatever was prepared
 * was finalized (a second finalize would have poisoned the lane). */
static void assert_slots_empty(fixture *f) {
    st_chip_worker *cw = st_chip_worker_of(((chip_ep *)chip_ep_of(f))->chip);
    for (uint32_t i = 0; i < st_chip_worker_depth(cw); i++)
        assert_int_equal(st_chip_worker_slot_phase(cw, i), ST_NATIVE_EMPTY);
    assert_int_equal(st_lane_count(lane_of(f)), 0);
    assert_false(st_lane_poisoned(lane_of(f)));
}

/* The chip endpoint's record of a task of run `run_id`, or 0 if none. */
static int task_of_run(fixture *f, uint64_t run_id, st_chip_ep_task_info *out) {
    st_chip_ep_task_info info[CHIP_EP_TASKS];
    int n = st_chip_ep_tasks(chip_ep_of(f), info, CHIP_EP_TASKS);
    for (int i = 0; i < n && i < CHIP_EP_TASKS; i++)
        if (info[i].run_id == run_id) {
            *out = info[i];
            return 1;
        }
    return 0;
}

/* How many records of run_id the chip endpoint holds. */
static int tasks_of_run(fixture *f, uint64_t run_id) {
    st_chip_ep_task_info info[CHIP_EP_TASKS];
    int n = st_chip_ep_tasks(chip_ep_of(f), info, CHIP_EP_TASKS), k = 0;
    for (int i = 0; i < n && i < CHIP_EP_TASKS; i++)
        k += info[i].run_id == run_id;
    return k;
}

static void nap(void) {
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Poll (bounded) until run_id's task is at the endpoint and, if in_lane, in
 * the lane; and, if launched_too, until run `other` has a launched task. */
static st_chip_ep_task_info await_task(fixture *f, uint64_t run_id, int in_lane) {
    uint64_t deadline = st_deadline_after(WAIT_NS);
    st_chip_ep_task_info info;
    while (!task_of_run(f, run_id, &info) || (in_lane && !info.in_lane)) {
        assert_true(st_now_ns() < deadline);
        nap();
    }
    return info;
}

static void await_launched(fixture *f, uint64_t run_id) {
    uint64_t deadline = st_deadline_after(WAIT_NS);
    st_chip_ep_task_info info;
    while (!task_of_run(f, run_id, &info) || !info.launched) {
        assert_true(st_now_ns() < deadline);
        nap();
    }
}

/* ---- orchestration functions --------------------------------------------------------------- */

typedef struct graph {
    fixture *f;
    int with_second; /* the head: a second chip task after the held one (an edge through buf) */
    int gated_sub;   /* ... and between them a "gate" sub task (waits for ts_gate_open) */
    int two_probes;  /* the successor: a second, independent chip task (index 4) */
    int with_fail;   /* the head: a failing sub task */
    int probe_index;
    uint32_t flags; /* the probe task's call flags */
    int with_sub;   /* the successor: a counting sub task too */
    int fail_orch;  /* the successor's orchestration function fails after its submits */
} graph;

static int head_graph(strata_orch *o, void *arg) {
    graph *g = arg;
    fixture *f = g->f;
    strata_tensor t = ts_i32(f->buf, 0, 16, 1);
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)(uintptr_t)&f->gate));
    STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_OUT_EXISTING));
    STRATA_TRY(strata_orch_submit_next_level(o, f->hold, &a, NULL, f->chip));
    if (g->gated_sub) { /* reads what the held task wrote, writes what the second reads */
        strata_tensor u = ts_i32(f->buf, 16, 16, 1);
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_IN));
        STRATA_TRY(strata_args_add_tensor(&a, &u, STRATA_OUT_EXISTING));
        STRATA_TRY(strata_orch_submit_sub(o, f->t.gate, &a));
        t = u;
    }
    if (g->with_second) { /* ready only once the held task finished */
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_scalar(&a, 2));
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_IN));
        STRATA_TRY(strata_orch_submit_next_level(o, f->probe, &a, NULL, f->chip));
    }
    if (g->with_fail) {
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_scalar(&a, 1));
        STRATA_TRY(strata_orch_submit_sub(o, f->t.fail, &a));
    }
    return STRATA_OK;
}

static int successor_graph(strata_orch *o, void *arg) {
    graph *g = arg;
    fixture *f = g->f;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)g->probe_index));
    strata_call_config cfg = {.flags = g->flags};
    STRATA_TRY(strata_orch_submit_next_level(o, f->probe, &a, &cfg, f->chip));
    if (g->two_probes) {
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_scalar(&a, 4));
        STRATA_TRY(strata_orch_submit_next_level(o, f->probe, &a, &cfg, f->chip));
    }
    if (g->with_sub) {
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_sub(o, f->t.count, &a));
    }
    return g->fail_orch ? STRATA_EINVAL : STRATA_OK;
}

static strata_run *submit(fixture *f, strata_orch_fn fn, graph *g) {
    strata_run *h = NULL;
    assert_ok(strata_worker_submit(f->t.w, fn, g, &h));
    assert_non_null(h);
    return h;
}

static void assert_run_ok(strata_run *h) {
    int rc = strata_run_wait(h, WAIT_NS);
    if (rc != STRATA_OK)
        fail_msg("run %llu: %s: %s", (unsigned long long)strata_run_id(h), strata_status_name(rc),
                 strata_run_error(h));
}

/* ---- tests -------------------------------------------------------------------------------------
 */

static void a_successor_task_is_staged_prepared_and_not_launched_before_activation(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f}, gb = {.f = f, .probe_index = 1, .two_probes = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    await_launched(f, strata_run_id(a)); /* held on the device until the gate opens */
    st_chip_ep_task_info info = await_task(f, strata_run_id(b), 1);
    /* One staged task per endpoint and successor: the chip's third record
     * stays free for the head's later work. */
    assert_int_equal(tasks_of_run(f, strata_run_id(b)), 1);
    assert_int_equal(info.staged, 1);
    assert_int_equal(info.activated, 0);
    assert_int_equal(info.launched, 0); /* the acceptance word stays 0 until launch */
    assert_int_equal(info.disposition, STRATA_CHIP_NATIVE_PREPARED); /* behind a launched front */
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    assert_false(strata_run_done(b));
    open_gate(f);
    assert_run_ok(a);
    assert_run_ok(b);
    assert_int_equal(atomic_load(&f->prepared[1]), 1); /* launched as prepared, not again */
    assert_int_equal(atomic_load(&f->prepared[4]), 1);
    strata_run_release(a);
    strata_run_release(b);
    destroy(f);
}

/* Hazard H1: the head's second chip task is dispatched after the staged one
 * (it becomes ready only when the held task finished). Ordered by dispatch id
 * alone it would stand behind the staged task, which launches only once the
 * head run, which needs it, is done: a deadlock. */
static void a_head_task_dispatched_after_a_staged_one_runs_first(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f, .with_second = 1}, gb = {.f = f, .probe_index = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    st_chip_ep_task_info info = await_task(f, strata_run_id(b), 1);
    assert_int_equal(info.staged, 1);
    assert_int_equal(info.disposition, STRATA_CHIP_NATIVE_PREPARED);
    open_gate(f);
    assert_run_ok(a);
    assert_run_ok(b);
    assert_int_equal(atomic_load(&f->prepared[2]), 1);
    /* The staged task stood prepared at the front when the head's second
     * task came: it gave its preparation back (released once) and was
     * prepared again behind it. */
    assert_int_equal(st_lane_yields(lane_of(f)), 1);
    assert_int_equal(atomic_load(&f->prepared[1]), 2);
    assert_slots_empty(f);
    strata_run_release(a);
    strata_run_release(b);
    destroy(f);
}

/* A chip of depth 1 has one lane place: a staged task there would keep the
 * head's later task out of the lane for good. It waits at the endpoint. */
static void a_depth_one_chip_keeps_a_staged_task_out_of_its_only_place(void **state) {
    (void)state;
    fixture *f = make(1);
    graph ga = {.f = f, .with_second = 1, .gated_sub = 1}, gb = {.f = f, .probe_index = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    await_launched(f, strata_run_id(a));
    st_chip_ep_task_info info = await_task(f, strata_run_id(b), 0);
    assert_int_equal(info.staged, 1);
    assert_int_equal(info.in_lane, 0);
    open_gate(f); /* the held task finishes; the lane is empty until the sub task is done */
    uint64_t deadline = st_deadline_after(WAIT_NS);
    while (tasks_of_run(f, strata_run_id(a)) > 0) {
        assert_true(st_now_ns() < deadline);
        nap();
    }
    info = await_task(f, strata_run_id(b), 0);
    assert_int_equal(info.in_lane, 0); /* still kept out */
    assert_int_equal(atomic_load(&f->prepared[1]), 0);
    ts_gate_open(&f->t); /* now the head's second chip task becomes ready */
    assert_run_ok(a);
    assert_run_ok(b);
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    strata_run_release(a);
    strata_run_release(b);
    destroy(f);
}

static void diagnostics_and_sub_tasks_are_never_staged(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f};
    graph gb = {.f = f, .probe_index = 1, .flags = STRATA_CALL_DIAGNOSTICS, .with_sub = 1};
    strata_run *a = submit(f, head_graph, &ga);
    await_launched(f, strata_run_id(a));
    strata_run *b = submit(f, successor_graph, &gb); /* its submits ran dispatch passes */
    st_chip_ep_task_info info;
    assert_false(task_of_run(f, strata_run_id(b), &info));
    assert_int_equal(atomic_load(&f->t.counter), 0);
    assert_int_equal(atomic_load(&f->prepared[1]), 0);
    open_gate(f);
    assert_run_ok(a);
    assert_run_ok(b);
    assert_int_equal(atomic_load(&f->t.counter), 1);
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    strata_run_release(a);
    strata_run_release(b);
    destroy(f);
}

static void a_stale_identity_at_activation_poisons_the_endpoint(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f}, gb = {.f = f, .probe_index = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    await_task(f, strata_run_id(b), 1);
    /* The lane run no longer matches the record's dispatch (a stale holder). */
    chip_ep *ep = (chip_ep *)chip_ep_of(f);
    pthread_mutex_lock(&ep->drv.mu);
    for (int i = 0; i < CHIP_EP_TASKS; i++)
        if (ep->drv.tasks[i].state != CHIP_TASK_FREE &&
            ep->drv.tasks[i].d.run_id == strata_run_id(b))
            ep->drv.tasks[i].d.lease.generation += 100;
    pthread_mutex_unlock(&ep->drv.mu);
    open_gate(f);
    assert_run_ok(a);
    assert_int_equal(strata_run_wait(b, WAIT_NS), STRATA_EENDPOINT);
    assert_non_null(strstr(strata_run_error(b), "stale identity at activation"));
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    assert_slots_empty(f); /* its preparation was released, once */
    /* Later tasks are rejected with the poison. */
    graph gc = {.f = f, .probe_index = 3};
    strata_run *c = submit(f, successor_graph, &gc);
    assert_int_equal(strata_run_wait(c, WAIT_NS), STRATA_EENDPOINT);
    assert_non_null(strstr(strata_run_error(c), "poisoned"));
    assert_int_equal(atomic_load(&f->prepared[3]), 0);
    assert_false(st_lane_poisoned(lane_of(f))); /* the chip itself is fine */
    strata_run_release(a);
    strata_run_release(b);
    strata_run_release(c);
    destroy(f);
}

static void a_stop_with_a_staged_successor_releases_it_once(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f}, gb = {.f = f, .probe_index = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    await_task(f, strata_run_id(b), 1);
    st_endpoint *ep = chip_ep_of(f);
    ep->ops->stop(ep); /* as close does; the staged task's run never became the head */
    assert_int_equal(strata_run_wait(b, WAIT_NS), STRATA_EENDPOINT);
    assert_non_null(strstr(strata_run_error(b), "released unlaunched"));
    assert_false(strata_run_done(a)); /* the head's task still runs */
    open_gate(f);
    assert_run_ok(a);
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    assert_slots_empty(f);
    strata_run_release(a);
    strata_run_release(b);
    destroy(f);
}

static void a_failed_head_and_a_cancelled_successor_complete_the_staged_task_once(void **state) {
    (void)state;
    fixture *f = make(2);
    graph ga = {.f = f, .with_fail = 1}, gb = {.f = f, .probe_index = 1, .fail_orch = 1};
    strata_run *a = submit(f, head_graph, &ga);
    strata_run *b = submit(f, successor_graph, &gb);
    await_task(f, strata_run_id(b), 1); /* staged before its orchestration function failed */
    open_gate(f);
    assert_int_equal(strata_run_wait(a, WAIT_NS), STRATA_ETASK);
    assert_int_equal(strata_run_wait(b, WAIT_NS), STRATA_EINVAL);
    assert_non_null(strstr(strata_run_error(b), "orchestration function failed"));
    assert_int_equal(atomic_load(&f->prepared[1]), 1);
    assert_slots_empty(f);
    /* The worker goes on. */
    graph gc = {.f = f, .probe_index = 3};
    strata_run *c = submit(f, successor_graph, &gc);
    assert_run_ok(c);
    strata_run_release(a);
    strata_run_release(b);
    strata_run_release(c);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_successor_task_is_staged_prepared_and_not_launched_before_activation),
        cmocka_unit_test(a_head_task_dispatched_after_a_staged_one_runs_first),
        cmocka_unit_test(a_depth_one_chip_keeps_a_staged_task_out_of_its_only_place),
        cmocka_unit_test(diagnostics_and_sub_tasks_are_never_staged),
        cmocka_unit_test(a_stale_identity_at_activation_poisons_the_endpoint),
        cmocka_unit_test(a_stop_with_a_staged_successor_releases_it_once),
        cmocka_unit_test(a_failed_head_and_a_cancelled_successor_complete_the_staged_task_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
