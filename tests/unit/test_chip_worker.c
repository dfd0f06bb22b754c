/* tests/unit/test_chip_worker.c - the ChipWorker: lifecycle, the per-slot
 * native run state machine, epochs, the successor rule, launch failures and
 * the lease filter's preview/commit split (the filter itself: test_lease.c).
 *
 * Owns: assertions on ChipWorker behaviour against the scriptable fake
 * backend (and one real load failure). Never asserts timing.
 */
#include <string.h>

#include "test_support.h"

#include "chip/chip_worker.h"
#include "chip_fake_backend.h"

static const strata_task_args no_args;

static st_chip_worker *ready_worker(strata_backend_entry_fn entry) {
    fake_reset();
    st_chip_worker *cw = st_chip_worker_new();
    assert_non_null(cw);
    st_chip_worker_config cfg = {.entry = entry, .entry_label = "fake"};
    assert_ok(st_chip_worker_init(cw, &cfg));
    return cw;
}

static st_native_request req_for(uint32_t slot, uint64_t gen, uint64_t run_id, int leased) {
    st_native_request r = {.slot = slot, /* storage slot and lease slot alike */
                           .leased = leased,
                           .lease = {.slot = slot, .generation = gen},
                           .run_id = run_id,
                           .dispatch_id = run_id,
                           .args = &no_args};
    return r;
}

static st_native_token prepare_ok(st_chip_worker *cw, uint32_t slot, uint64_t gen) {
    st_native_request r = req_for(slot, gen, gen, 0);
    st_native_token t;
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    return t;
}

static void expect_error_contains(const char *needle) {
    if (!strstr(strata_error_message(), needle))
        fail_msg("expected '%s' in: %s", needle, strata_error_message());
}

/* ---- The state machine table ---------------------------------------------------------- */

static void state_machine_table_allows_only_the_named_transitions(void **state) {
    static const struct {
        st_native_phase from;
        st_native_event ev;
        st_native_phase to;
    } legal[] = {
        {ST_NATIVE_EMPTY, ST_NATIVE_BEGIN_PREPARE, ST_NATIVE_PREPARING},
        {ST_NATIVE_PREPARING, ST_NATIVE_PREPARE_OK, ST_NATIVE_PREPARED},
        {ST_NATIVE_PREPARING, ST_NATIVE_PREPARE_FAILED, ST_NATIVE_EMPTY},
        {ST_NATIVE_PREPARED, ST_NATIVE_LAUNCH_OK, ST_NATIVE_LAUNCHED},
        {ST_NATIVE_PREPARED, ST_NATIVE_LAUNCH_REAPED, ST_NATIVE_REAPED},
        {ST_NATIVE_LAUNCHED, ST_NATIVE_COMPLETED, ST_NATIVE_REAPED},
        {ST_NATIVE_PREPARED, ST_NATIVE_BEGIN_FINALIZE, ST_NATIVE_FINALIZING},
        {ST_NATIVE_LAUNCHED, ST_NATIVE_BEGIN_FINALIZE, ST_NATIVE_FINALIZING},
        {ST_NATIVE_REAPED, ST_NATIVE_BEGIN_FINALIZE, ST_NATIVE_FINALIZING},
        {ST_NATIVE_FINALIZING, ST_NATIVE_FINALIZED, ST_NATIVE_EMPTY},
    };
    int nlegal = (int)(sizeof legal / sizeof legal[0]);
    for (int p = ST_NATIVE_EMPTY; p <= ST_NATIVE_FINALIZING; p++)
        for (int e = ST_NATIVE_BEGIN_PREPARE; e <= ST_NATIVE_FINALIZED; e++) {
            st_native_phase expect = ST_NATIVE_INVALID;
            for (int i = 0; i < nlegal; i++)
                if (legal[i].from == (st_native_phase)p && legal[i].ev == (st_native_event)e)
                    expect = legal[i].to;
            if (st_native_next((st_native_phase)p, (st_native_event)e) != expect)
                fail_msg(
                    "transition %d from %s gave %s, expected %s", e,
                    st_native_phase_name((st_native_phase)p),
                    st_native_phase_name(st_native_next((st_native_phase)p, (st_native_event)e)),
                    st_native_phase_name(expect));
        }
}

/* ---- Lifecycle ------------------------------------------------------------------------ */

static void calls_before_init_are_refused(void **state) {
    st_chip_worker *cw = st_chip_worker_new();
    assert_int_equal(st_chip_worker_initialized(cw), 0);
    st_native_request r = req_for(0, 1, 1, 0);
    st_native_token t;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &r, &t, NULL));
    expect_error_contains("not initialized");
    void *p;
    assert_status(STRATA_ESTATE, st_cw_malloc(cw, 64, &p));
    expect_error_contains("not initialized");
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_EMPTY);
    st_chip_worker_free(cw);
}

static void finalize_is_terminal_and_idempotent(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    assert_ok(st_chip_worker_finalize(cw));
    assert_ok(st_chip_worker_finalize(cw));
    assert_int_equal(fake.closes, 1);
    st_chip_worker_config cfg = {.entry = fake_entry_capable, .entry_label = "fake"};
    assert_status(STRATA_ESTATE, st_chip_worker_init(cw, &cfg));
    expect_error_contains("finalized");
    st_native_request r = req_for(0, 1, 1, 0);
    st_native_token t;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &r, &t, NULL));
    expect_error_contains("finalized");
    st_chip_worker_free(cw);
}

static void failed_init_rolls_back_to_pristine(void **state) {
    fake_reset();
    st_chip_worker *cw = st_chip_worker_new();
    st_chip_worker_config bad = {.backend = "/nonexistent/libnothing.so"};
    assert_status(STRATA_EINVAL, st_chip_worker_init(cw, &bad));
    expect_error_contains("/nonexistent/libnothing.so");
    fake.open_rc = -1;
    st_chip_worker_config refused = {.entry = fake_entry_capable, .entry_label = "fake"};
    assert_status(STRATA_EDEVICE, st_chip_worker_init(cw, &refused));
    expect_error_contains("open refused");
    assert_int_equal(st_chip_worker_initialized(cw), 0);
    fake.open_rc = 0;
    assert_ok(st_chip_worker_init(cw, &refused)); /* pristine again: init works */
    assert_string_equal(st_chip_worker_label(cw), "chip fake:0");
    assert_status(STRATA_ESTATE, st_chip_worker_init(cw, &refused));
    expect_error_contains("already initialized");
    st_chip_worker_free(cw);
}

static void negative_device_id_and_depth_are_rejected(void **state) {
    fake_reset();
    st_chip_worker *cw = st_chip_worker_new();
    st_chip_worker_config cfg = {.entry = fake_entry_capable, .device_id = -1};
    assert_status(STRATA_EINVAL, st_chip_worker_init(cw, &cfg));
    expect_error_contains("negative");
    cfg.device_id = 0;
    cfg.max_depth = 3;
    assert_status(STRATA_EINVAL, st_chip_worker_init(cw, &cfg));
    cfg.max_depth = 1;
    assert_ok(st_chip_worker_init(cw, &cfg));
    assert_int_equal(st_chip_worker_depth(cw), 1);
    assert_int_equal(st_chip_worker_supports_successor(cw), 0); /* depth one never overlaps */
    st_chip_worker_free(cw);
}

/* ---- Native runs ------------------------------------------------------------------------ */

static void a_run_walks_the_slot_through_every_phase(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token t = prepare_ok(cw, 0, 1);
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_PREPARED);
    assert_ok(st_cw_launch(cw, &t));
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_LAUNCHED);
    int complete = 1;
    assert_ok(st_cw_poll(cw, &t, &complete));
    assert_int_equal(complete, 0);
    fake_complete(0);
    assert_ok(st_cw_poll(cw, &t, &complete));
    assert_int_equal(complete, 1);
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_REAPED);
    assert_ok(st_cw_wait(cw, &t, UINT64_MAX, &complete)); /* reaped: no device call */
    assert_int_equal(fake.waits, 0);
    assert_ok(st_cw_finalize(cw, &t));
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_EMPTY);
    st_chip_worker_free(cw);
}

static void stale_and_wrong_phase_tokens_are_refused(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token t = prepare_ok(cw, 0, 1);
    int complete;
    assert_status(STRATA_ESTALE, st_cw_poll(cw, &t, &complete));
    expect_error_contains("wrong phase");
    assert_ok(st_cw_launch(cw, &t));
    assert_status(STRATA_ESTALE, st_cw_launch(cw, &t));
    expect_error_contains("wrong phase");
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &t));
    assert_status(STRATA_ESTALE, st_cw_finalize(cw, &t));
    expect_error_contains("stale");
    st_native_token other = t;
    other.slot = 5;
    assert_status(STRATA_ESTALE, st_cw_launch(cw, &other));
    st_chip_worker_free(cw);
}

static void every_prepare_mints_a_new_epoch(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token a = prepare_ok(cw, 0, 3);
    assert_ok(st_cw_finalize(cw, &a));
    st_native_token b = prepare_ok(cw, 0, 3); /* same slot, same generation */
    assert_true(b.epoch > a.epoch);
    assert_status(STRATA_ESTALE, st_cw_launch(cw, &a)); /* the old token cannot touch it */
    expect_error_contains("run_epoch=");
    assert_ok(st_cw_finalize(cw, &b));
    st_chip_worker_free(cw);
}

static void epoch_counter_can_be_shared_between_chips(void **state) {
    fake_reset();
    _Atomic uint64_t epochs = 100;
    st_chip_worker *c1 = st_chip_worker_new(), *c2 = st_chip_worker_new();
    st_chip_worker_config cfg = {.entry = fake_entry_capable, .epochs = &epochs};
    assert_ok(st_chip_worker_init(c1, &cfg));
    cfg.device_id = 1;
    assert_ok(st_chip_worker_init(c2, &cfg));
    st_native_token a = prepare_ok(c1, 0, 1);
    st_native_token b = prepare_ok(c2, 0, 1);
    assert_int_equal(a.epoch, 101);
    assert_int_equal(b.epoch, 102);
    assert_ok(st_cw_finalize(c1, &a));
    assert_ok(st_cw_finalize(c2, &b));
    st_chip_worker_free(c1);
    st_chip_worker_free(c2);
}

static void a_slot_holds_one_unfinished_run(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token t = prepare_ok(cw, 0, 1);
    st_native_request r = req_for(0, 2, 2, 0);
    st_native_token u;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &r, &u, NULL));
    expect_error_contains("unfinished native run");
    expect_error_contains("slot=0");
    assert_ok(st_cw_finalize(cw, &t));
    st_chip_worker_free(cw);
}

static void a_successor_requires_a_launched_predecessor(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token a = prepare_ok(cw, 0, 1);
    st_native_request r = req_for(1, 1, 2, 0);
    st_native_token b;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &r, &b, NULL));
    expect_error_contains("active predecessor");
    expect_error_contains("slot=1");
    assert_ok(st_cw_launch(cw, &a));
    r.diagnostics = 1;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &r, &b, NULL));
    r.diagnostics = 0;
    assert_ok(st_cw_prepare(cw, &r, &b, NULL));
    assert_int_equal(st_chip_worker_slot_phase(cw, 1), ST_NATIVE_PREPARED);
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &a));
    assert_ok(st_cw_finalize(cw, &b));
    st_chip_worker_free(cw);
}

static void a_diagnostic_predecessor_permits_no_successor(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_request r = req_for(0, 1, 1, 0);
    r.diagnostics = 1;
    st_native_token a, b;
    assert_ok(st_cw_prepare(cw, &r, &a, NULL));
    assert_ok(st_cw_launch(cw, &a));
    st_native_request s = req_for(1, 1, 2, 0);
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &s, &b, NULL));
    expect_error_contains("active predecessor");
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &a));
    st_chip_worker_free(cw);
}

static void a_backend_without_concurrent_prepare_permits_no_successor(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_serial);
    st_native_token a = prepare_ok(cw, 0, 1);
    assert_ok(st_cw_launch(cw, &a));
    st_native_request s = req_for(1, 1, 2, 0);
    st_native_token b;
    assert_status(STRATA_ESTATE, st_cw_prepare(cw, &s, &b, NULL));
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &a));
    st_chip_worker_free(cw);
}

static void launch_failure_keeps_the_run_prepared_unless_the_device_reaped_it(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token t = prepare_ok(cw, 0, 1);
    fake.launch_rc = -6;
    assert_status(STRATA_EDEVICE, st_cw_launch(cw, &t));
    expect_error_contains("launch failed with code -6");
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_PREPARED);
    assert_ok(st_cw_launch(cw, &t)); /* still launchable */
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &t));

    t = prepare_ok(cw, 0, 2);
    fake.launch_rc = -6;
    fake.launch_reaps = 1;
    assert_status(STRATA_EDEVICE, st_cw_launch(cw, &t));
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_REAPED);
    assert_status(STRATA_EDEVICE, st_cw_finalize(cw, &t)); /* the launch code surfaces here */
    expect_error_contains("finalize failed with code -6");
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_EMPTY);
    st_chip_worker_free(cw);
}

static void finalize_reports_the_backend_code_with_identity(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_request r = req_for(1, 3, 7, 1);
    st_native_token t;
    fake.auto_complete = 1;
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_launch(cw, &t));
    fake.finalize_rc = -7;
    assert_status(STRATA_EDEVICE, st_cw_finalize(cw, &t));
    expect_error_contains("finalize failed with code -7");
    expect_error_contains("run_id=7");
    expect_error_contains("slot=1");
    expect_error_contains("generation=3");
    expect_error_contains("run_epoch=");
    assert_int_equal(st_chip_worker_slot_phase(cw, 1), ST_NATIVE_EMPTY);
    st_chip_worker_free(cw);
}

static void wait_blocks_in_the_device_until_complete(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token t = prepare_ok(cw, 0, 1);
    assert_ok(st_cw_launch(cw, &t));
    int complete = 1;
    assert_ok(st_cw_wait(cw, &t, 0, &complete)); /* deadline passed: not complete, run live */
    assert_int_equal(complete, 0);
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_LAUNCHED);
    fake_complete(0);
    assert_ok(st_cw_wait(cw, &t, UINT64_MAX, &complete));
    assert_int_equal(complete, 1);
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_REAPED);
    assert_ok(st_cw_finalize(cw, &t));
    st_chip_worker_free(cw);
}

static void finalize_of_the_worker_cleans_every_live_slot(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token a = prepare_ok(cw, 0, 1);
    assert_ok(st_cw_launch(cw, &a));
    prepare_ok(cw, 1, 1);
    assert_ok(st_chip_worker_finalize(cw));
    char buf[256];
    const char *trace = fake_trace(buf, sizeof buf);
    assert_non_null(strstr(trace, "finalize0"));
    assert_non_null(strstr(trace, "finalize1"));
    assert_int_equal(fake.closes, 1);
    st_chip_worker_free(cw);
}

/* ---- Generations ------------------------------------------------------------------------- */

static void leased_prepare_rejects_an_older_generation(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_request r = req_for(0, 3, 1, 1);
    st_native_token t;
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_finalize(cw, &t));
    r.lease.generation = 2;
    assert_status(STRATA_ESTALE, st_cw_prepare(cw, &r, &t, NULL));
    expect_error_contains("generation is stale");
    r.leased = 0; /* unleased (direct) runs bypass the filter */
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_finalize(cw, &t));
    st_chip_worker_free(cw);
}

/* The tasks of one engine run share its lease and may use either storage
 * slot, so the filter follows the lease's slot, not the storage slot. */
static void the_filter_follows_the_lease_slot_not_the_storage_slot(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_request r = req_for(0, 5, 1, 1); /* lease {0, 5} in storage slot 0 */
    st_native_token t;
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_finalize(cw, &t));
    r = req_for(1, 5, 2, 1); /* storage slot 1, an older generation of lease slot 0 */
    r.lease = (st_lease){.slot = 0, .generation = 4};
    assert_status(STRATA_ESTALE, st_cw_prepare(cw, &r, &t, NULL));
    expect_error_contains("lease slot 0");
    r.lease.generation = 5; /* the same lease again, in the other storage slot: admitted */
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_finalize(cw, &t));
    r.lease = (st_lease){.slot = 1, .generation = 1}; /* lease slot 1 saw nothing yet */
    assert_ok(st_cw_prepare(cw, &r, &t, NULL));
    assert_ok(st_cw_finalize(cw, &t));
    st_chip_worker_free(cw);
}

static void an_incompatible_prepare_spends_no_generation(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token a = prepare_ok(cw, 0, 1);
    assert_ok(st_cw_launch(cw, &a));
    fake.prepare_rc[1] = STRATA_BACKEND_EINCOMPATIBLE;
    st_native_request r = req_for(1, 5, 2, 1);
    st_native_token b;
    int incompatible = 0;
    assert_status(STRATA_EDEVICE, st_cw_prepare(cw, &r, &b, &incompatible));
    assert_int_equal(incompatible, 1);
    assert_int_equal(st_chip_worker_slot_phase(cw, 1), ST_NATIVE_EMPTY);
    /* 5 was never committed: 4 is not stale yet */
    assert_ok(st_chip_worker_commit_lease(cw, (st_lease){.slot = 1, .generation = 4}));
    assert_ok(st_cw_prepare(cw, &r, &b, &incompatible)); /* the same lease retries */
    assert_int_equal(incompatible, 0);
    fake_complete(0);
    assert_ok(st_cw_finalize(cw, &a));
    assert_ok(st_cw_finalize(cw, &b));
    st_chip_worker_free(cw);
}

/* A successor prepared while its predecessor's finalize is under way (the
 * lane prepares successors unlocked, so this is a race it can lose): the
 * prepare is refused as one that cannot overlap (incompatible set, nothing
 * spent), and the same run prepares as the front once the slot is empty.
 * Without the flag the lane failed the task ("requires an active
 * predecessor ... slot 0 is FINALIZING"). */
typedef struct racing_successor {
    st_chip_worker *cw;
    int rc, incompatible, calls;
    st_native_phase phase0;
} racing_successor;

static void prepare_successor_during_finalize(void *user, uint32_t slot) {
    racing_successor *rs = user;
    if (slot != 0 || rs->calls++)
        return;
    rs->phase0 = st_chip_worker_slot_phase(rs->cw, 0);
    st_native_request r = req_for(1, 7, 2, 1);
    st_native_token b;
    rs->rc = st_cw_prepare(rs->cw, &r, &b, &rs->incompatible);
}

static void a_successor_racing_its_predecessors_finalize_falls_back(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    st_native_token a = prepare_ok(cw, 0, 1);
    assert_ok(st_cw_launch(cw, &a));
    fake_complete(0);
    racing_successor rs = {.cw = cw};
    fake.finalize_hook = prepare_successor_during_finalize;
    fake.hook_user = &rs;
    assert_ok(st_cw_finalize(cw, &a));
    fake.finalize_hook = NULL;
    assert_int_equal(rs.calls, 1);
    assert_int_equal(rs.phase0, ST_NATIVE_FINALIZING);
    assert_int_equal(rs.rc, STRATA_ESTATE);
    assert_int_equal(rs.incompatible, 1);
    assert_int_equal(st_chip_worker_slot_phase(cw, 1), ST_NATIVE_EMPTY);
    st_native_request r = req_for(1, 7, 2, 1); /* generation 7 was not spent */
    st_native_token b;
    int incompatible = 0;
    assert_ok(st_cw_prepare(cw, &r, &b, &incompatible));
    assert_int_equal(incompatible, 0);
    assert_ok(st_cw_finalize(cw, &b));
    st_chip_worker_free(cw);
}

static void newer_generation(void *user, uint32_t slot, uint64_t generation) {
    st_chip_worker_commit_lease(user, (st_lease){.slot = slot, .generation = generation + 1});
}

static void commit_rechecks_the_generation_after_prepare(void **state) {
    st_chip_worker *cw = ready_worker(fake_entry_capable);
    fake.prepare_hook = newer_generation; /* a newer lease lands while prepare runs */
    fake.hook_user = cw;
    st_native_request r = req_for(0, 3, 1, 1);
    st_native_token t;
    assert_status(STRATA_ESTALE, st_cw_prepare(cw, &r, &t, NULL));
    expect_error_contains("became stale while prepare was in progress");
    assert_int_equal(st_chip_worker_slot_phase(cw, 0), ST_NATIVE_EMPTY);
    char buf[256];
    assert_string_equal(fake_trace(buf, sizeof buf), "prepare0,finalize0"); /* released */
    st_chip_worker_free(cw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(state_machine_table_allows_only_the_named_transitions),
        cmocka_unit_test(calls_before_init_are_refused),
        cmocka_unit_test(finalize_is_terminal_and_idempotent),
        cmocka_unit_test(failed_init_rolls_back_to_pristine),
        cmocka_unit_test(negative_device_id_and_depth_are_rejected),
        cmocka_unit_test(a_run_walks_the_slot_through_every_phase),
        cmocka_unit_test(stale_and_wrong_phase_tokens_are_refused),
        cmocka_unit_test(every_prepare_mints_a_new_epoch),
        cmocka_unit_test(epoch_counter_can_be_shared_between_chips),
        cmocka_unit_test(a_slot_holds_one_unfinished_run),
        cmocka_unit_test(a_successor_requires_a_launched_predecessor),
        cmocka_unit_test(a_diagnostic_predecessor_permits_no_successor),
        cmocka_unit_test(a_backend_without_concurrent_prepare_permits_no_successor),
        cmocka_unit_test(launch_failure_keeps_the_run_prepared_unless_the_device_reaped_it),
        cmocka_unit_test(finalize_reports_the_backend_code_with_identity),
        cmocka_unit_test(wait_blocks_in_the_device_until_complete),
        cmocka_unit_test(finalize_of_the_worker_cleans_every_live_slot),
        cmocka_unit_test(leased_prepare_rejects_an_older_generation),
        cmocka_unit_test(the_filter_follows_the_lease_slot_not_the_storage_slot),
        cmocka_unit_test(an_incompatible_prepare_spends_no_generation),
        cmocka_unit_test(a_successor_racing_its_predecessors_finalize_falls_back),
        cmocka_unit_test(commit_rechecks_the_generation_after_prepare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
