// label: concurrency
/* tests/unit/test_chip_endpoint_lease.c - a chip as a next-level child of an L3
 * worker (exec/chip_endpoint.c), on the scriptable fake backend.
 *
 * Owns: what the chip endpoint hands its chip: the lease a chip task reaches
 * the lane and the device with (its run's), and the chip programs it
 * registers for the worker's callables (once each, at first use).
 * Never asserts timing: the fake's device wait blocks until the test
 * completes the run.
 */
#include <string.h>
#include <time.h>

#include "test_support.h"

#include "chip/chip_internal.h"
#include "chip/run_lane.h"
#include "chip_fake_backend.h"
#include "core/run.h"
#include "exec/chip_endpoint.h"
#include "strata/chip.h"

#define MAX_PREPARES 16

/* What the device saw at each prepare, and a gate that holds the first
 * prepare until the test opens it (fake_mu protects both; fake_cv signals). */
static struct {
    int n;
    uint64_t generation[MAX_PREPARES];
    int hold_first; /* the first prepare waits until `open` */
    int open;
} seen;

static void record_prepare(void *user, uint32_t slot, uint64_t generation) {
    (void)user;
    (void)slot;
    pthread_mutex_lock(&fake_mu);
    if (seen.n < MAX_PREPARES)
        seen.generation[seen.n++] = generation;
    while (seen.hold_first && seen.n == 1 && !seen.open)
        pthread_cond_wait(&fake_cv, &fake_mu);
    pthread_mutex_unlock(&fake_mu);
}

static void open_gate(void) {
    pthread_mutex_lock(&fake_mu);
    seen.open = 1;
    pthread_cond_broadcast(&fake_cv);
    pthread_mutex_unlock(&fake_mu);
}

static int noop_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)ctx;
    (void)a;
    (void)user;
    return 0;
}

typedef struct fixture {
    strata_worker *w;
    int chip;
    strata_callable prog;
} fixture;

static void open_worker(fixture *f) {
    fake_reset();
    memset(&seen, 0, sizeof seen);
    fake.prepare_hook = record_prepare;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    wc.pipeline_depth = 2;
    assert_ok(strata_worker_create(&wc, &f->w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.backend = "fake";
    cc.backend_entry = fake_entry_capable;
    assert_ok(strata_worker_add_chip(f->w, &cc, &f->chip));
    strata_chip_program_desc d = {.name = "noop", .fn = noop_program};
    assert_ok(strata_worker_register_chip_program(f->w, &d, &f->prog));
    assert_ok(strata_worker_init(f->w));
}

static st_run_lane *lane_of(fixture *f) {
    chip_ep *ep = (chip_ep *)st_worker_next_endpoint(f->w, f->chip);
    assert_non_null(ep);
    assert_ptr_equal(ep->base.ops, &st_chip_ep_ops);
    return st_chip_lane(ep->chip);
}

static int orch_one_chip_task(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a;
    strata_args_init(&a);
    return strata_orch_submit_next_level(o, f->prog, &a, NULL, f->chip);
}

/* Until h's chip task waits in the device (h stays live meanwhile); fails
 * instead of hanging if h ended first (its task never reached the device). */
static void await_device_wait_of(strata_run *h) {
    for (int ms_waited = 0;; ms_waited++) {
        if (ms_waited > 20000) /* a broken build must fail here, not at CTest's timeout */
            fail_msg("run %llu's chip task never reached the device wait",
                     (unsigned long long)strata_run_id(h));
        pthread_mutex_lock(&fake_mu);
        int parked = fake.wait_entered;
        pthread_mutex_unlock(&fake_mu);
        if (parked)
            return;
        if (strata_run_done(h))
            fail_msg("run %llu ended before its chip task reached the device: %s",
                     (unsigned long long)strata_run_id(h), strata_run_error(h));
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static void set_auto_complete(void) {
    pthread_mutex_lock(&fake_mu);
    fake.auto_complete = 1;
    pthread_mutex_unlock(&fake_mu);
}

/* Runs 1 and 2 hold the two pipeline slots; run 3 takes slot 0 again with a
 * newer generation. Each chip task must reach the device with its run's
 * generation, and the lane's filter must then know slot 0's newest one. */
static void a_chip_task_reaches_the_device_under_its_runs_lease(void **state) {
    (void)state;
    fixture f;
    open_worker(&f);
    strata_run *h1, *h2, *h3;
    assert_ok(strata_worker_submit(f.w, orch_one_chip_task, &f, &h1));
    await_device_wait_of(h1); /* run 1's task is in the device: run 1 stays live */
    assert_ok(strata_worker_submit(f.w, orch_one_chip_task, &f, &h2));
    set_auto_complete(); /* run 2's task completes as it launches */
    fake_complete(0);
    assert_ok(strata_run_wait(h1, STRATA_WAIT_FOREVER));
    assert_ok(strata_run_wait(h2, STRATA_WAIT_FOREVER));
    assert_ok(strata_worker_submit(f.w, orch_one_chip_task, &f, &h3));
    assert_ok(strata_run_wait(h3, STRATA_WAIT_FOREVER));

    strata_run *runs[3] = {h1, h2, h3};
    assert_int_equal(h1->lease.slot, 0);
    assert_int_equal(h2->lease.slot, 1);
    assert_int_equal(h3->lease.slot, 0);
    pthread_mutex_lock(&fake_mu);
    int n = seen.n;
    uint64_t gens[MAX_PREPARES];
    memcpy(gens, seen.generation, sizeof gens);
    pthread_mutex_unlock(&fake_mu);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++)
        if (gens[i] != runs[i]->lease.generation)
            fail_msg("prepare %d saw generation %llu; its run %llu holds lease {slot %u, "
                     "generation %llu}",
                     i + 1, (unsigned long long)gens[i], (unsigned long long)runs[i]->id,
                     runs[i]->lease.slot, (unsigned long long)runs[i]->lease.generation);

    /* A holder of run 1's lease is stale now that run 3 holds slot 0. */
    st_lane_request req = {.program = 0, .program_name = "noop", .args = &(strata_task_args){0}};
    st_lane_run *stale = NULL;
    assert_status(STRATA_ESTALE,
                  st_lane_submit_leased(lane_of(&f), &req, h1->lease, 99, 99, 1, &stale));
    assert_null(stale);
    strata_run_release(h1);
    strata_run_release(h2);
    strata_run_release(h3);
    strata_worker_destroy(f.w);
}

/* Both tasks are dispatched before the chip prepares the first (the gate
 * holds it), so the endpoint thread puts the second into the lane before it
 * blocks in the device wait of the first. */
static int orch_two_chip_tasks(strata_orch *o, void *arg) {
    STRATA_TRY(orch_one_chip_task(o, arg));
    int rc = orch_one_chip_task(o, arg); /* dispatched before it returns: the chip has room */
    open_gate();
    return rc;
}

/* The chip holds two tasks of one run at once (its lane prepares the second
 * while the first executes): both go in under the run's one lease. */
static void two_tasks_of_one_run_share_its_lease_in_the_lane(void **state) {
    (void)state;
    fixture f;
    open_worker(&f);
    pthread_mutex_lock(&fake_mu);
    seen.hold_first = 1;
    pthread_mutex_unlock(&fake_mu);
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, orch_two_chip_tasks, &f, &h));
    await_device_wait_of(h); /* the thread waits for the first only after submitting both */
    assert_int_equal(st_lane_count(lane_of(&f)), 2);
    set_auto_complete();
    fake_complete(0);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    pthread_mutex_lock(&fake_mu);
    int n = seen.n;
    uint64_t g0 = seen.generation[0], g1 = seen.generation[1];
    pthread_mutex_unlock(&fake_mu);
    assert_int_equal(n, 2);
    assert_int_equal(g0, h->lease.generation);
    assert_int_equal(g1, h->lease.generation);
    strata_run_release(h);
    strata_worker_destroy(f.w);
}

/* ---- chip programs ------------------------------------------------------------------ */

typedef struct two_programs {
    fixture *f;
    strata_callable first, second;
} two_programs;

static int orch_second_then_first(strata_orch *o, void *arg) {
    two_programs *t = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_orch_submit_next_level(o, t->second, &a, NULL, t->f->chip));
    return strata_orch_submit_next_level(o, t->first, &a, NULL, t->f->chip);
}

/* A worker's chip program becomes a program of a chip the first time one of
 * its tasks arrives there, once; later tasks find it by the callable's id. */
static void a_chip_program_is_registered_on_the_chip_once_at_first_use(void **state) {
    (void)state;
    fixture f;
    open_worker(&f); /* "noop": callable 0 */
    set_auto_complete();
    two_programs t = {.f = &f, .first = f.prog};
    strata_callable pad;
    assert_ok(strata_worker_register_sub(f.w, "pad", ts_noop_sub, NULL, &pad));
    strata_chip_program_desc d = {.name = "second", .fn = noop_program};
    assert_ok(strata_worker_register_chip_program(f.w, &d, &t.second)); /* callable 2 */
    assert_int_equal(t.second, 2);
    assert_ok(strata_worker_run(f.w, orch_second_then_first, &t));
    assert_ok(strata_worker_run(f.w, orch_second_then_first, &t)); /* found, not registered */

    chip_ep *ep = (chip_ep *)st_worker_next_endpoint(f.w, f.chip);
    assert_int_equal(ep->drv.chip_program[t.second], 0 + 1); /* first to arrive: chip program 0 */
    assert_int_equal(ep->drv.chip_program[t.first], 1 + 1);
    assert_int_equal(ep->drv.chip_program[pad], 0); /* never on this chip */
    uint32_t backend_id;
    char name[STRATA_PROGRAM_NAME_MAX];
    assert_ok(st_chip_program_info(ep->chip, 0, &backend_id, name, sizeof name));
    assert_string_equal(name, "second");
    assert_ok(st_chip_program_info(ep->chip, 1, &backend_id, name, sizeof name));
    assert_string_equal(name, "noop");
    assert_status(STRATA_EINVAL, st_chip_program_info(ep->chip, 2, &backend_id, name, sizeof name));
    strata_worker_destroy(f.w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_chip_task_reaches_the_device_under_its_runs_lease),
        cmocka_unit_test(two_tasks_of_one_run_share_its_lease_in_the_lane),
        cmocka_unit_test(a_chip_program_is_registered_on_the_chip_once_at_first_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
