// label: concurrency
/* tests/unit/test_run_lane.c - the ChipRunLane, behaviour by behaviour.
 *
 * Owns: one test per lane behaviour of the chip-level reference (§14 of
 * upstream-chip-level.md) plus the admission rejections, abandon, poison of
 * queued runs, drain/close, concurrent waiters and the front finishing
 * while its successor is being prepared (the lane unlocked meanwhile). Runs against the
 * scriptable fake backend, so every assertion is on the exact sequence of
 * device calls ("prepare0,launch0,..."), never on timing.
 */
#include <pthread.h>
#include <string.h>

#include "test_support.h"

#include "chip/run_lane.h"
#include "chip_fake_backend.h"
#include "util/clock.h"

typedef struct fixture {
    st_chip_worker *cw;
    st_run_lane *lane;
} fixture;

static const strata_task_args no_args;

static void open_lane(fixture *f, strata_backend_entry_fn entry) {
    fake_reset();
    f->cw = st_chip_worker_new();
    assert_non_null(f->cw);
    st_chip_worker_config cfg = {.entry = entry, .entry_label = "fake"};
    assert_ok(st_chip_worker_init(f->cw, &cfg));
    assert_ok(st_lane_create(f->cw, &f->lane));
}

static void close_lane(fixture *f) {
    st_lane_release(f->lane);
    st_chip_worker_free(f->cw);
}

static st_lane_request request(const strata_call_config *cfg, _Atomic uint32_t *accepted) {
    st_lane_request r = {.program = 0,
                         .program_name = "prog",
                         .args = &no_args,
                         .cfg = cfg,
                         .accepted = accepted,
                         .accepted_value = 7};
    return r;
}

static st_lane_run *leased(fixture *f, uint32_t slot, uint64_t gen, uint64_t id, int activated,
                           const strata_call_config *cfg, _Atomic uint32_t *accepted) {
    st_lane_request r = request(cfg, accepted);
    st_lease lease = {.slot = slot, .generation = gen};
    st_lane_run *run = NULL;
    assert_ok(st_lane_submit_leased(f->lane, &r, lease, id, id, activated, &run));
    assert_non_null(run);
    return run;
}

static st_lane_run *direct(fixture *f) {
    st_lane_request r = request(NULL, NULL);
    st_lane_run *run = NULL;
    assert_ok(st_lane_submit_direct(f->lane, &r, &run));
    assert_non_null(run);
    return run;
}

static void expect_trace(const char *expected) {
    char buf[2048];
    assert_string_equal(fake_trace(buf, sizeof buf), expected);
}

static int fake_count(const int *field) {
    pthread_mutex_lock(&fake_mu);
    int v = *field;
    pthread_mutex_unlock(&fake_mu);
    return v;
}

static void set_auto_complete(void) {
    pthread_mutex_lock(&fake_mu);
    fake.auto_complete = 1;
    pthread_mutex_unlock(&fake_mu);
}

static void wait_ok(st_lane_run *r) {
    assert_ok(st_lane_wait(r, UINT64_MAX));
}

/* Completes slot[i] once i+1 device waits have parked, in order. */
typedef struct completer {
    pthread_t thread;
    int n;
    uint32_t slots[4];
} completer;

static void *completer_main(void *p) {
    completer *c = p;
    for (int i = 0; i < c->n; i++) {
        fake_await_waiters(i + 1);
        fake_complete(c->slots[i]);
    }
    return NULL;
}

static void start_completer(completer *c, int n, const uint32_t *slots) {
    c->n = n;
    memcpy(c->slots, slots, (size_t)n * sizeof slots[0]);
    assert_int_equal(pthread_create(&c->thread, NULL, completer_main, c), 0);
}

static void join_completer(completer *c) {
    pthread_join(c->thread, NULL);
}

/* ---- §14: the lane behaviours ---------------------------------------------------------- */

static void owns_fifo_preparation_and_launch(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    _Atomic uint32_t acc_a = 0, acc_b = 0;
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, &acc_a);
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, &acc_b);
    expect_trace("prepare0,launch0,prepare1");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_NATIVE_PREPARED);
    assert_int_equal(atomic_load(&acc_a), 7);
    assert_int_equal(atomic_load(&acc_b), 0); /* prepared, not launched: no acceptance */

    assert_ok(st_lane_activate(b));
    assert_int_equal(st_lane_run_launched(b), 0); /* the front still runs */
    fake_complete(0);
    assert_int_equal(st_lane_done(b), 0); /* drives a: finalize0, then b launches */
    expect_trace("prepare0,launch0,prepare1,finalize0,launch1");
    assert_int_equal(atomic_load(&acc_b), 7);
    assert_int_equal(st_lane_run_launched(b), 1);

    fake_complete(1);
    wait_ok(b);
    wait_ok(a);
    expect_trace("prepare0,launch0,prepare1,finalize0,launch1,finalize1");
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void validation_only_successor_prepares_after_promotion(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    strata_call_config diag = {.flags = STRATA_CALL_DIAGNOSTICS};
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 1, &diag, NULL);
    expect_trace("prepare0,launch0");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_VALIDATED_ONLY);
    fake_complete(0);
    assert_int_equal(st_lane_done(b), 0);
    expect_trace("prepare0,launch0,finalize0,prepare1,launch1");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_NATIVE_PREPARED);
    fake_complete(1);
    wait_ok(b);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void diagnostic_predecessor_blocks_early_prepare(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    strata_call_config diag = {.flags = STRATA_CALL_DIAGNOSTICS};
    st_lane_run *a = leased(&f, 0, 1, 1, 1, &diag, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 1, NULL, NULL);
    expect_trace("prepare0,launch0");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_VALIDATED_ONLY);
    set_auto_complete();
    fake_complete(0);
    wait_ok(b);
    expect_trace("prepare0,launch0,finalize0,prepare1,launch1,finalize1");
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void incompatible_successor_retries_after_predecessor_fence(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.prepare_rc[1] = STRATA_BACKEND_EINCOMPATIBLE;
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 1, NULL, NULL);
    expect_trace("prepare0,launch0,refuse1");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_VALIDATED_ONLY);
    assert_int_equal(st_lane_run_phase(b), ST_LANE_QUEUED); /* not failed: depth one */
    fake_complete(0);
    assert_int_equal(st_lane_done(b), 0);
    /* prepared again, with the same lease generation, after a's finalize */
    expect_trace("prepare0,launch0,refuse1,finalize0,prepare1,launch1");
    fake_complete(1);
    wait_ok(b);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void earlier_active_dispatch_orders_before_staged_successor(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL); /* staged, not activated */
    expect_trace("");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_VALIDATED_ONLY);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL); /* lower dispatch id: new front */
    /* the lane picks the storage: b took slot 0 first, so a runs in slot 1 */
    assert_int_equal(st_lane_run_slot(b), 0);
    assert_int_equal(st_lane_run_slot(a), 1);
    expect_trace("prepare1,launch1,prepare0");
    assert_int_equal(st_lane_run_launched(a), 1);
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_NATIVE_PREPARED);
    set_auto_complete();
    fake_complete(1);
    assert_ok(st_lane_activate(b));
    wait_ok(b);
    wait_ok(a);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void accepts_current_lease_generation_and_rejects_older_one(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    set_auto_complete();
    st_lane_run *a = leased(&f, 0, 5, 1, 1, NULL, NULL);
    wait_ok(a);
    st_lane_run *again = leased(&f, 0, 5, 2, 1, NULL, NULL); /* same generation: fine */
    wait_ok(again);
    st_lane_request r = request(NULL, NULL);
    st_lane_run *old = NULL;
    st_lease lease = {.slot = 0, .generation = 4};
    assert_status(STRATA_ESTALE, st_lane_submit_leased(f.lane, &r, lease, 3, 3, 1, &old));
    assert_null(old);
    assert_non_null(strstr(strata_error_message(), "stale"));
    assert_int_equal(st_lane_count(f.lane), 0);
    st_lane_run_release(a);
    st_lane_run_release(again);
    close_lane(&f);
}

static void activate_stops_at_the_launch_fence_before_polling(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 0, NULL, NULL);
    expect_trace(""); /* a lone unactivated run is only validated */
    assert_ok(st_lane_activate(a));
    expect_trace("prepare0,launch0");
    assert_int_equal(fake_count(&fake.polls), 0);
    assert_int_equal(st_lane_done(a), 0);
    assert_int_equal(fake_count(&fake.polls), 1);
    fake_complete(0);
    wait_ok(a);
    st_lane_run_release(a);
    close_lane(&f);
}

static void direct_generation_does_not_consume_the_first_pipeline_lease(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    set_auto_complete();
    st_lane_run *d = direct(&f);
    wait_ok(d);
    st_lane_run *l = leased(&f, 0, 1, 1, 1, NULL, NULL); /* generation 1 on slot 0 still fresh */
    wait_ok(l);
    st_lane_run_release(d);
    st_lane_run_release(l);
    close_lane(&f);
}

static void direct_capacity_two_prepares_successor_and_backpressures_third(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r1 = direct(&f);
    st_lane_run *r2 = direct(&f);
    expect_trace("prepare0,launch0,prepare1");
    assert_int_equal(st_lane_run_slot(r2), 1);
    assert_int_equal(st_lane_run_disposition(r2), STRATA_CHIP_NATIVE_PREPARED);
    completer c;
    start_completer(&c, 1, (uint32_t[]){0});
    st_lane_run *r3 = direct(&f); /* blocks in the device wait of r1 */
    join_completer(&c);
    expect_trace("prepare0,launch0,prepare1,wait0,finalize0,launch1,prepare0");
    assert_int_equal(st_lane_run_slot(r3), 0);
    assert_int_equal(st_lane_run_disposition(r3), STRATA_CHIP_NATIVE_PREPARED);
    assert_int_equal(st_lane_run_launched(r3), 0);
    set_auto_complete();
    fake_complete(1);
    wait_ok(r3);
    wait_ok(r2);
    wait_ok(r1);
    st_lane_run_release(r1);
    st_lane_run_release(r2);
    st_lane_run_release(r3);
    close_lane(&f);
}

static void direct_incompatible_successor_retries_after_predecessor_fence(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.prepare_rc[1] = STRATA_BACKEND_EINCOMPATIBLE;
    st_lane_run *r1 = direct(&f);
    st_lane_run *r2 = direct(&f);
    expect_trace("prepare0,launch0,refuse1");
    assert_int_equal(st_lane_run_disposition(r2), STRATA_CHIP_VALIDATED_ONLY);
    fake_complete(0);
    set_auto_complete();
    wait_ok(r2);
    expect_trace("prepare0,launch0,refuse1,finalize0,prepare1,launch1,finalize1");
    st_lane_run_release(r1);
    st_lane_run_release(r2);
    close_lane(&f);
}

static void direct_runtime_without_concurrent_prepare_retains_depth_one(void **state) {
    fixture f;
    open_lane(&f, fake_entry_serial);
    st_lane_run *r1 = direct(&f);
    completer c;
    start_completer(&c, 1, (uint32_t[]){0});
    st_lane_run *r2 = direct(&f); /* drains r1 first */
    join_completer(&c);
    expect_trace("prepare0,launch0,wait0,finalize0,prepare0,launch0");
    assert_int_equal(st_lane_run_slot(r2), 0);
    set_auto_complete();
    fake_complete(0);
    wait_ok(r2);
    char buf[512];
    assert_null(strstr(fake_trace(buf, sizeof buf), "prepare1"));
    st_lane_run_release(r1);
    st_lane_run_release(r2);
    close_lane(&f);
}

static void prepare_failure_is_terminal_without_poisoning_the_lane(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.prepare_rc[0] = -5;
    st_lane_run *r = direct(&f); /* accepted; the failure surfaces at wait */
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "prepare failed with code -5"));
    assert_non_null(strstr(strata_error_message(), "run_id=1"));
    assert_int_equal(st_lane_poisoned(f.lane), 0);
    set_auto_complete();
    st_lane_run *next = direct(&f);
    wait_ok(next);
    st_lane_run_release(r);
    st_lane_run_release(next);
    close_lane(&f);
}

static void reclaimed_launch_failure_does_not_poison_the_lane(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.launch_rc = -6;
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "launch failed with code -6"));
    expect_trace("prepare0,badlaunch0,finalize0");
    assert_int_equal(st_lane_run_launched(r), 0);
    assert_int_equal(st_lane_poisoned(f.lane), 0);
    set_auto_complete();
    st_lane_run *next = direct(&f);
    wait_ok(next);
    st_lane_run_release(r);
    st_lane_run_release(next);
    close_lane(&f);
}

static void reaped_launch_failure_reports_at_finalize_and_poisons(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.launch_rc = -6;
    fake.launch_reaps = 1; /* the device says something ran: the run is reaped */
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "launch failed with code -6"));
    assert_int_equal(st_lane_poisoned(f.lane), 1); /* its finalize reported the launch code */
    st_lane_run_release(r);
    close_lane(&f);
}

static void expired_wait_leaves_the_run_live(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r = direct(&f);
    assert_status(STRATA_ETIMEDOUT, st_lane_wait(r, st_now_ns()));
    assert_int_equal(st_lane_run_phase(r), ST_LANE_LAUNCHED);
    assert_status(STRATA_ETIMEDOUT, st_lane_wait(r, st_deadline_after(2000000)));
    assert_int_equal(st_lane_run_phase(r), ST_LANE_LAUNCHED);
    fake_complete(0);
    wait_ok(r);
    st_lane_run_release(r);
    close_lane(&f);
}

static void unbounded_wait_blocks_instead_of_polling(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r = direct(&f);
    completer c;
    start_completer(&c, 1, (uint32_t[]){0});
    wait_ok(r);
    join_completer(&c);
    assert_in_range(fake_count(&fake.polls), 0, 1);
    assert_int_equal(fake_count(&fake.waits), 1);
    st_lane_run_release(r);
    close_lane(&f);
}

static void finalize_failure_poisons_admission_and_close_reports_it(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    set_auto_complete();
    fake.finalize_rc = -7;
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "finalize failed with code -7"));
    assert_int_equal(st_lane_poisoned(f.lane), 1);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *later = NULL;
    assert_status(STRATA_EPOISONED, st_lane_submit_direct(f.lane, &req, &later));
    assert_non_null(strstr(strata_error_message(), "code -7"));
    st_lease lease = {.slot = 1, .generation = 1};
    assert_status(STRATA_EPOISONED, st_lane_submit_leased(f.lane, &req, lease, 9, 9, 1, &later));
    assert_status(STRATA_EPOISONED, st_lane_close(f.lane));
    assert_status(STRATA_EPOISONED, st_lane_close(f.lane)); /* idempotent, reports every time */
    st_lane_run_release(r);
    close_lane(&f);
}

static void poll_failure_reports_the_terminal_native_error(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.poll_rc = -1;
    fake.finalize_rc = 507015;
    st_lane_run *r = direct(&f);
    assert_int_equal(st_lane_done(r), 1);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "finalize failed with code 507015"));
    assert_int_equal(st_lane_poisoned(f.lane), 1);
    assert_status(STRATA_EPOISONED, st_lane_close(f.lane));
    st_lane_run_release(r);
    close_lane(&f);
}

static void poll_failure_with_clean_finalize_reports_the_poll(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.poll_rc = -1;
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "poll failed with code -1"));
    assert_int_equal(st_lane_poisoned(f.lane), 1);
    st_lane_run_release(r);
    close_lane(&f);
}

static void wait_failure_poisons_the_lane(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.wait_rc = -9;
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "wait failed with code -9"));
    assert_int_equal(st_lane_poisoned(f.lane), 1);
    st_lane_run_release(r);
    close_lane(&f);
}

static void close_drains_and_rejects_new_submissions(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r = direct(&f);
    completer c;
    start_completer(&c, 1, (uint32_t[]){0});
    assert_ok(st_lane_close(f.lane));
    join_completer(&c);
    assert_int_equal(st_lane_run_phase(r), ST_LANE_TERMINAL);
    assert_ok(st_lane_run_status(r));
    expect_trace("prepare0,launch0,wait0,finalize0");
    st_lane_request req = request(NULL, NULL);
    st_lane_run *later = NULL;
    assert_status(STRATA_ECLOSED, st_lane_submit_direct(f.lane, &req, &later));
    assert_ok(st_lane_close(f.lane));
    wait_ok(r); /* the handle stays readable */
    st_lane_run_release(r);
    close_lane(&f);
}

/* ---- Admission ------------------------------------------------------------------------ */

static void leased_submit_rejects_an_invalid_lease(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *r = NULL;
    st_lease gen0 = {.slot = 0, .generation = 0};
    st_lease slot2 = {.slot = 2, .generation = 1};
    st_lease reserved = {.slot = 0, .reserved = 1, .generation = 1};
    assert_status(STRATA_EINVAL, st_lane_submit_leased(f.lane, &req, gen0, 1, 1, 1, &r));
    assert_non_null(strstr(strata_error_message(), "invalid pipeline lease"));
    assert_status(STRATA_EINVAL, st_lane_submit_leased(f.lane, &req, slot2, 1, 1, 1, &r));
    assert_status(STRATA_EINVAL, st_lane_submit_leased(f.lane, &req, reserved, 1, 1, 1, &r));
    assert_null(r);
    assert_int_equal(st_lane_count(f.lane), 0);
    close_lane(&f);
}

static void leased_submit_rejects_duplicate_identity(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 4, 0, NULL, NULL);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *r = NULL;
    st_lease other = {.slot = 1, .generation = 1};
    assert_status(STRATA_EINVAL, st_lane_submit_leased(f.lane, &req, other, 4, 5, 0, &r));
    assert_non_null(strstr(strata_error_message(), "duplicate"));
    assert_status(STRATA_EINVAL, st_lane_submit_leased(f.lane, &req, other, 6, 4, 0, &r));
    assert_int_equal(st_lane_count(f.lane), 1);
    st_lane_run_release(a);
    close_lane(&f);
}

/* The tasks of one engine run share its lease: both may be in the lane at
 * once, each in its own storage slot; a third run never enters. */
static void leased_submit_admits_two_runs_of_one_lease_and_rejects_a_third(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 0, NULL, NULL);
    st_lane_run *b = leased(&f, 0, 1, 2, 0, NULL, NULL); /* the same lease */
    assert_int_equal(st_lane_run_slot(a), 0);
    assert_int_equal(st_lane_run_slot(b), 1);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *r = NULL;
    st_lease other = {.slot = 1, .generation = 1};
    assert_status(STRATA_ECAPACITY, st_lane_submit_leased(f.lane, &req, other, 3, 3, 0, &r));
    assert_non_null(strstr(strata_error_message(), "capacity exceeded"));
    assert_null(r);
    assert_int_equal(st_lane_count(f.lane), 2); /* never blocks, never enqueues a third */
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

/* A chip of depth one holds one native run: a second leased run is refused
 * until the first is gone, whatever its lease. */
static void leased_submit_at_depth_one_holds_one_run(void **state) {
    fixture f;
    fake_reset();
    f.cw = st_chip_worker_new();
    assert_non_null(f.cw);
    st_chip_worker_config cfg = {
        .entry = fake_entry_capable, .entry_label = "fake", .max_depth = 1};
    assert_ok(st_chip_worker_init(f.cw, &cfg));
    assert_ok(st_lane_create(f.cw, &f.lane));
    set_auto_complete();
    st_lane_run *a = leased(&f, 0, 1, 1, 0, NULL, NULL);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *r = NULL;
    st_lease same = {.slot = 0, .generation = 1};
    assert_status(STRATA_ECAPACITY, st_lane_submit_leased(f.lane, &req, same, 2, 2, 0, &r));
    assert_null(r);
    assert_ok(st_lane_activate(a));
    wait_ok(a);
    st_lane_run *b = leased(&f, 0, 1, 2, 1, NULL, NULL); /* room again */
    wait_ok(b);
    assert_int_equal(st_lane_run_slot(b), 0);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void leased_submit_cannot_reorder_before_a_launched_front(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 5, 1, NULL, NULL);
    assert_int_equal(st_lane_run_launched(a), 1);
    st_lane_request req = request(NULL, NULL);
    st_lane_run *r = NULL;
    st_lease lease = {.slot = 1, .generation = 1};
    assert_status(STRATA_ESTATE, st_lane_submit_leased(f.lane, &req, lease, 3, 3, 1, &r));
    assert_non_null(strstr(strata_error_message(), "cannot reorder"));
    fake_complete(0);
    wait_ok(a);
    st_lane_run_release(a);
    close_lane(&f);
}

static void early_prepare_requires_a_launched_front(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 0, NULL, NULL); /* front, not activated */
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL); /* not activated either */
    expect_trace("");
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_VALIDATED_ONLY);
    assert_int_equal(st_lane_done(b), 0); /* nothing may launch */
    expect_trace("");
    assert_ok(st_lane_activate(a));
    expect_trace("prepare0,launch0,prepare1");
    set_auto_complete();
    fake_complete(0);
    assert_ok(st_lane_activate(b));
    wait_ok(b);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

/* ---- Activated first, then dispatch id (hazard H1) ------------------------------------- */

static void an_activated_run_goes_ahead_of_an_unactivated_one_with_a_lower_id(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    _Atomic uint32_t acc_b = 0;
    st_lane_run *b = leased(&f, 1, 1, 1, 0, NULL, &acc_b); /* staged successor, dispatch 1 */
    st_lane_run *a = leased(&f, 0, 1, 2, 1, NULL, NULL);   /* the head's task, dispatch 2 */
    /* a runs first although it was dispatched later; b is prepared behind it */
    expect_trace("prepare1,launch1,prepare0");
    assert_int_equal(st_lane_run_launched(a), 1);
    assert_int_equal(st_lane_run_launched(b), 0);
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_NATIVE_PREPARED);
    fake_complete(1);
    wait_ok(a); /* with dispatch-id order this waited for b, which waits for a's run */
    assert_int_equal(st_lane_run_launched(b), 0);
    assert_int_equal(atomic_load(&acc_b), 0); /* the acceptance word stays 0 until launch */
    set_auto_complete();
    assert_ok(st_lane_activate(b));
    wait_ok(b);
    assert_int_equal(atomic_load(&acc_b), 7);
    expect_trace("prepare1,launch1,prepare0,finalize1,launch0,finalize0");
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void activation_moves_a_run_ahead_of_unactivated_ones(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 0, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL);
    assert_ok(st_lane_activate(b)); /* b is the head's now: it passes a */
    expect_trace("prepare1,launch1,prepare0");
    assert_int_equal(st_lane_run_launched(b), 1);
    assert_int_equal(st_lane_run_launched(a), 0);
    set_auto_complete();
    fake_complete(1);
    wait_ok(b);
    assert_ok(st_lane_activate(a));
    wait_ok(a);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void an_unactivated_run_yields_its_preparation_to_an_activated_one(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL); /* head task */
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL); /* staged, prepared early */
    expect_trace("prepare0,launch0,prepare1");
    fake_complete(0);
    wait_ok(a); /* b is the front now, prepared, never activated */
    assert_int_equal(st_lane_run_phase(b), ST_LANE_PREPARED);
    /* The head's next task: it must run before b, and the device takes no
     * second preparation beside one that is not launched, so b gives its
     * preparation back (finalized once) and is prepared again behind c. */
    st_lane_run *c = leased(&f, 0, 1, 3, 1, NULL, NULL);
    expect_trace("prepare0,launch0,prepare1,finalize0,finalize1,prepare0,launch0,prepare1");
    assert_int_equal(st_lane_yields(f.lane), 1);
    assert_int_equal(st_lane_run_launched(c), 1);
    assert_int_equal(st_lane_run_launched(b), 0);
    assert_int_equal(st_lane_run_disposition(b), STRATA_CHIP_NATIVE_PREPARED);
    set_auto_complete();
    fake_complete(0);
    wait_ok(c);
    assert_ok(st_lane_activate(b));
    wait_ok(b);
    expect_trace("prepare0,launch0,prepare1,finalize0,finalize1,prepare0,launch0,prepare1,"
                 "finalize0,launch1,finalize1");
    assert_false(st_lane_poisoned(f.lane));
    st_lane_run_release(a);
    st_lane_run_release(b);
    st_lane_run_release(c);
    close_lane(&f);
}

/* ---- Abandon, poison, drain ----------------------------------------------------------- */

static void abandon_is_refused_for_a_launched_run(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = direct(&f);
    assert_status(STRATA_ESTATE, st_lane_abandon(a));
    assert_non_null(strstr(strata_error_message(), "cannot abandon a launched run"));
    fake_complete(0);
    wait_ok(a);
    assert_ok(st_lane_abandon(a)); /* terminal: nothing to do */
    st_lane_run_release(a);
    close_lane(&f);
}

static void abandon_finalizes_a_prepared_successor_once(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL);
    expect_trace("prepare0,launch0,prepare1");
    assert_ok(st_lane_abandon(b));
    expect_trace("prepare0,launch0,prepare1,finalize1");
    assert_int_equal(st_lane_run_status(b), STRATA_ECANCELED);
    assert_int_equal(st_lane_count(f.lane), 1);
    assert_ok(st_lane_abandon(b));
    fake_complete(0);
    wait_ok(a);
    expect_trace("prepare0,launch0,prepare1,finalize1,finalize0");
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void error_is_re_reported_on_every_wait(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    fake.prepare_rc[0] = -5;
    st_lane_run *r = direct(&f);
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    char first[512];
    snprintf(first, sizeof first, "%s", strata_error_message());
    assert_ok(st_lane_drain(f.lane)); /* overwrites nothing of the run */
    assert_status(STRATA_EDEVICE, st_lane_wait(r, UINT64_MAX));
    assert_string_equal(strata_error_message(), first);
    assert_string_equal(st_lane_run_error(r), first);
    assert_status(STRATA_EDEVICE, st_lane_activate(r)); /* activating a failed run reports it */
    st_lane_run_release(r);
    close_lane(&f);
}

static void poisoned_lane_fails_queued_runs_without_launching_them(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 1, NULL, NULL);
    fake.finalize_rc = -7;
    fake_complete(0);
    assert_status(STRATA_EPOISONED, st_lane_wait(b, UINT64_MAX));
    assert_non_null(strstr(strata_error_message(), "poisoned"));
    assert_non_null(strstr(strata_error_message(), "code -7"));
    expect_trace("prepare0,launch0,prepare1,finalize0,finalize1"); /* b never launched */
    assert_int_equal(st_lane_run_launched(b), 0);
    assert_status(STRATA_EDEVICE, st_lane_wait(a, UINT64_MAX));
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

static void drain_finishes_every_run_and_keeps_the_lane_open(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r1 = direct(&f);
    st_lane_run *r2 = direct(&f);
    completer c;
    start_completer(&c, 2, (uint32_t[]){0, 1});
    assert_ok(st_lane_drain(f.lane));
    join_completer(&c);
    assert_int_equal(st_lane_count(f.lane), 0);
    assert_ok(st_lane_run_status(r1));
    assert_ok(st_lane_run_status(r2));
    set_auto_complete();
    st_lane_run *r3 = direct(&f); /* still open */
    wait_ok(r3);
    st_lane_run_release(r1);
    st_lane_run_release(r2);
    st_lane_run_release(r3);
    close_lane(&f);
}

static void close_drops_unactivated_runs_with_an_error(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    st_lane_run *b = leased(&f, 1, 1, 2, 0, NULL, NULL); /* prepared, never activated */
    completer c;
    start_completer(&c, 1, (uint32_t[]){0});
    assert_ok(st_lane_close(f.lane));
    join_completer(&c);
    expect_trace("prepare0,launch0,prepare1,wait0,finalize0,finalize1");
    assert_ok(st_lane_run_status(a));
    assert_int_equal(st_lane_run_status(b), STRATA_ECANCELED);
    assert_int_equal(st_lane_run_launched(b), 0);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

/* ---- Concurrency ------------------------------------------------------------------------ */

static void waiting_on_a_successor_blocks_on_each_run_once(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *a = direct(&f);
    st_lane_run *b = direct(&f);
    completer c;
    start_completer(&c, 2, (uint32_t[]){0, 1});
    wait_ok(b);
    join_completer(&c);
    expect_trace("prepare0,launch0,prepare1,wait0,finalize0,launch1,wait1,finalize1");
    assert_in_range(fake_count(&fake.polls), 0, 2); /* at most one poll per run */
    wait_ok(a);
    st_lane_run_release(a);
    st_lane_run_release(b);
    close_lane(&f);
}

typedef struct waiter {
    pthread_t thread;
    st_lane_run *run;
    int rc;
} waiter;

static void *waiter_main(void *p) {
    waiter *w = p;
    w->rc = st_lane_wait(w->run, UINT64_MAX);
    return NULL;
}

static void concurrent_waiters_share_one_device_wait(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    st_lane_run *r = direct(&f);
    waiter w1 = {.run = r}, w2 = {.run = r};
    assert_int_equal(pthread_create(&w1.thread, NULL, waiter_main, &w1), 0);
    fake_await_waiters(1); /* w1 is blocked in the device */
    int polls = fake_count(&fake.polls);
    assert_int_equal(st_lane_done(r), 0);
    assert_int_equal(fake_count(&fake.polls), polls); /* nobody polls a run in a device wait */
    assert_int_equal(pthread_create(&w2.thread, NULL, waiter_main, &w2), 0);
    fake_complete(0);
    pthread_join(w1.thread, NULL);
    pthread_join(w2.thread, NULL);
    assert_ok(w1.rc);
    assert_ok(w2.rc);
    assert_int_equal(fake_count(&fake.waits), 1);
    st_lane_run_release(r);
    close_lane(&f);
}

/* A gate the successor's prepare blocks on (the fake backend's prepare hook,
 * slot 1 only), with a bound so a lane that cannot make progress meanwhile
 * fails the test instead of hanging it. */
typedef struct prepare_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open, timed_out;
} prepare_gate;

static void gate_hook(void *user, uint32_t slot, uint64_t generation) {
    (void)generation;
    prepare_gate *g = user;
    if (slot != 1)
        return;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    uint64_t until = st_now_ns() + 5 * TS_SEC;
    while (!g->open && !g->timed_out) {
        struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                              .tv_nsec = (long)(until % 1000000000ull)};
        if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) != 0 && !g->open)
            g->timed_out = 1;
    }
    pthread_mutex_unlock(&g->mu);
}

typedef struct submitter {
    pthread_t thread;
    fixture *f;
    st_lane_run *run;
} submitter;

static void *submit_successor_main(void *p) {
    submitter *s = p;
    st_lane_request r = request(NULL, NULL);
    st_lane_run *run = NULL;
    int rc = st_lane_submit_leased(s->f->lane, &r, (st_lease){.slot = 1, .generation = 1}, 2, 2, 0,
                                   &run);
    s->run = rc == STRATA_OK ? run : NULL;
    return NULL;
}

/* The successor's early prepare drops the lane lock: the front is finished
 * (finalized) and its successor activated meanwhile; the preparing thread
 * launches it when its prepare ends. */
static void the_front_finishes_while_its_successor_is_prepared(void **state) {
    fixture f;
    open_lane(&f, fake_entry_capable);
    prepare_gate g = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the bound is st_now_ns() based */
    pthread_cond_init(&g.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&fake_mu);
    fake.prepare_hook = gate_hook;
    fake.hook_user = &g;
    pthread_mutex_unlock(&fake_mu);
    st_lane_run *a = leased(&f, 0, 1, 1, 1, NULL, NULL);
    submitter sub = {.f = &f};
    assert_int_equal(pthread_create(&sub.thread, NULL, submit_successor_main, &sub), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.entered)
        pthread_cond_wait(&g.cv, &g.mu); /* the successor's prepare is in the backend */
    pthread_mutex_unlock(&g.mu);

    fake_complete(0);
    wait_ok(a); /* the front finishes while the successor's prepare is still blocked */
    expect_trace("prepare0,launch0,finalize0");
    pthread_mutex_lock(&g.mu);
    assert_false(g.timed_out);
    pthread_mutex_unlock(&g.mu);

    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(sub.thread, NULL);
    assert_non_null(sub.run);
    expect_trace("prepare0,launch0,finalize0,prepare1");
    assert_int_equal(st_lane_run_disposition(sub.run), STRATA_CHIP_NATIVE_PREPARED);
    assert_int_equal(st_lane_run_launched(sub.run), 0); /* never before its activation */
    assert_ok(st_lane_activate(sub.run));
    expect_trace("prepare0,launch0,finalize0,prepare1,launch1");
    fake_complete(1);
    wait_ok(sub.run);
    st_lane_run_release(a);
    st_lane_run_release(sub.run);
    close_lane(&f);
    pthread_cond_destroy(&g.cv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(owns_fifo_preparation_and_launch),
        cmocka_unit_test(validation_only_successor_prepares_after_promotion),
        cmocka_unit_test(diagnostic_predecessor_blocks_early_prepare),
        cmocka_unit_test(incompatible_successor_retries_after_predecessor_fence),
        cmocka_unit_test(earlier_active_dispatch_orders_before_staged_successor),
        cmocka_unit_test(accepts_current_lease_generation_and_rejects_older_one),
        cmocka_unit_test(activate_stops_at_the_launch_fence_before_polling),
        cmocka_unit_test(direct_generation_does_not_consume_the_first_pipeline_lease),
        cmocka_unit_test(direct_capacity_two_prepares_successor_and_backpressures_third),
        cmocka_unit_test(direct_incompatible_successor_retries_after_predecessor_fence),
        cmocka_unit_test(direct_runtime_without_concurrent_prepare_retains_depth_one),
        cmocka_unit_test(prepare_failure_is_terminal_without_poisoning_the_lane),
        cmocka_unit_test(reclaimed_launch_failure_does_not_poison_the_lane),
        cmocka_unit_test(reaped_launch_failure_reports_at_finalize_and_poisons),
        cmocka_unit_test(expired_wait_leaves_the_run_live),
        cmocka_unit_test(unbounded_wait_blocks_instead_of_polling),
        cmocka_unit_test(finalize_failure_poisons_admission_and_close_reports_it),
        cmocka_unit_test(poll_failure_reports_the_terminal_native_error),
        cmocka_unit_test(poll_failure_with_clean_finalize_reports_the_poll),
        cmocka_unit_test(wait_failure_poisons_the_lane),
        cmocka_unit_test(close_drains_and_rejects_new_submissions),
        cmocka_unit_test(leased_submit_rejects_an_invalid_lease),
        cmocka_unit_test(leased_submit_rejects_duplicate_identity),
        cmocka_unit_test(leased_submit_admits_two_runs_of_one_lease_and_rejects_a_third),
        cmocka_unit_test(leased_submit_at_depth_one_holds_one_run),
        cmocka_unit_test(leased_submit_cannot_reorder_before_a_launched_front),
        cmocka_unit_test(early_prepare_requires_a_launched_front),
        cmocka_unit_test(an_activated_run_goes_ahead_of_an_unactivated_one_with_a_lower_id),
        cmocka_unit_test(activation_moves_a_run_ahead_of_unactivated_ones),
        cmocka_unit_test(an_unactivated_run_yields_its_preparation_to_an_activated_one),
        cmocka_unit_test(abandon_is_refused_for_a_launched_run),
        cmocka_unit_test(abandon_finalizes_a_prepared_successor_once),
        cmocka_unit_test(error_is_re_reported_on_every_wait),
        cmocka_unit_test(poisoned_lane_fails_queued_runs_without_launching_them),
        cmocka_unit_test(drain_finishes_every_run_and_keeps_the_lane_open),
        cmocka_unit_test(close_drops_unactivated_runs_with_an_error),
        cmocka_unit_test(waiting_on_a_successor_blocks_on_each_run_once),
        cmocka_unit_test(concurrent_waiters_share_one_device_wait),
        cmocka_unit_test(the_front_finishes_while_its_successor_is_prepared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
