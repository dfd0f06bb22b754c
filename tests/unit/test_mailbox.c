// label: concurrency
/* tests/unit/test_mailbox.c - the mailbox contract (ipc/mailbox.h).
 *
 * Owns: the frame layout as offsets and sizes (pinned here as well as by the
 * static asserts of mailbox.c), the publication discipline across a fork (a
 * child writes the payload, then the state; the parent acquires the state
 * and finds the whole payload, round after round), the CAS rules between
 * states, the error text (cut with "...", read back NUL-terminated even when
 * the peer left no NUL), what task_prepare writes, clears and leaves (the
 * error text, the tail's control words), and the identity checks, one field
 * at a time, each naming the field and values.
 * Must never: assert timing; wait without a bound (a lost publication fails
 * the child, which the parent sees in its exit status). Forks: no TSan label.
 */
#include <stdio.h>
#include <string.h>

#include "test_support.h"

#include "ipc/child_process.h"
#include "ipc/mailbox.h"
#include "ipc/shm_region.h"
#include "util/clock.h"
#include "util/digest.h"

#define BOUND (10 * TS_SEC)
#define ROUNDS 3000

static void the_layout_is_the_wire_contract(void **state) {
    (void)state;
    assert_int_equal(sizeof(st_mbox_frame), 65536);
    assert_int_equal(sizeof(st_mbox), 3 * 65536);
    assert_int_equal(ST_MBOX_REGION_BYTES, 3 * 65536);
    /* head line 0: the state, the status and the identity */
    assert_int_equal(offsetof(st_mbox_frame, state), 0);
    assert_int_equal(offsetof(st_mbox_frame, status), 4);
    assert_int_equal(offsetof(st_mbox_frame, payload_bytes), 8);
    assert_int_equal(offsetof(st_mbox_frame, member), 12);
    assert_int_equal(offsetof(st_mbox_frame, protocol), 16);
    assert_int_equal(offsetof(st_mbox_frame, trailer), 24);
    /* head line 1: the rest of a task, the doorbells */
    assert_int_equal(offsetof(st_mbox_frame, lease), 64);
    assert_int_equal(offsetof(st_mbox_frame, cfg), 80);
    assert_int_equal(offsetof(st_mbox_frame, disposition), 88);
    assert_int_equal(offsetof(st_mbox_frame, accepted), 92);
    assert_int_equal(offsetof(st_mbox_frame, digest), 96);
    assert_int_equal(offsetof(st_mbox_frame, child_bell), 112);
    assert_int_equal(offsetof(st_mbox_frame, parent_bell), 120);
    assert_int_equal(offsetof(st_mbox_frame, payload), 128);
    assert_int_equal(ST_MBOX_ARGS_CAP, 65536 - 128 - 576);
    /* tail: the error text, the control words, the sticky shutdown word */
    assert_int_equal(offsetof(st_mbox_frame, error), 65536 - 576);
    assert_int_equal(offsetof(st_mbox_frame, command), 65536 - 64);
    assert_int_equal(offsetof(st_mbox_frame, arg0), 65536 - 56);
    assert_int_equal(offsetof(st_mbox_frame, arg1), 65536 - 48);
    assert_int_equal(offsetof(st_mbox_frame, result), 65536 - 40);
    assert_int_equal(offsetof(st_mbox_frame, shutdown), 65536 - 32);
    assert_int_equal(offsetof(st_mbox_frame, taken), 65536 - 28); /* the child's own tail word */
    assert_int_equal(sizeof(st_mbox_trailer), 40);
    assert_int_equal(offsetof(st_mbox_trailer, dispatch_id), 32);
    /* the numbering of states is part of the contract */
    assert_int_equal(ST_MBOX_TASK_READY, 1);
    assert_int_equal(ST_MBOX_SHUTDOWN, 3);
    assert_int_equal(ST_MBOX_PREPARE_READY, 12);
    assert_int_equal(ST_MBOX_STATE_COUNT, 13);
}

static void init_resets_every_frame(void **state) {
    (void)state;
    st_shm r;
    assert_ok(st_shm_create("mailbox test", sizeof(st_mbox), &r));
    st_mbox *m = r.base;
    memset(m, 0x5a, sizeof *m);
    st_mbox_init(m);
    for (uint32_t i = 0; i < ST_MBOX_FRAMES; i++) {
        assert_int_equal(st_mbox_state_of(&m->frames[i]), ST_MBOX_IDLE);
        assert_int_equal(m->frames[i].protocol, ST_MBOX_PROTOCOL);
        assert_int_equal(atomic_load(&m->frames[i].accepted), 0);
        assert_int_equal(atomic_load(&m->frames[i].shutdown), 0);
        assert_int_equal(atomic_load(&m->frames[i].disposition), ST_MBOX_DISP_NONE);
        assert_int_equal(m->frames[i].error[0], 0);
    }
    assert_ptr_equal(st_mbox_control(m), &m->frames[0]);
    assert_ptr_equal(st_mbox_task(m, 1), &m->frames[2]);
    assert_int_equal(atomic_load(&st_mbox_control(m)->child_bell.value), 0);
    st_shm_destroy(&r);
}

/* ---- publication across a fork ---- */

static uint8_t pattern(uint32_t round, uint32_t i) {
    return (uint8_t)(round * 131u + i * 7u + (i >> 8));
}
static uint32_t round_bytes(uint32_t round) {
    return 64u + (round * 4099u) % (ST_MBOX_ARGS_CAP - 64u);
}

/* Wait (bounded) until f's state is `want`, parking on bell between checks. */
static int await_state(st_mbox_frame *f, st_event *bell, uint32_t want) {
    uint64_t deadline = st_deadline_after(BOUND);
    for (;;) {
        uint32_t seen = atomic_load(&bell->value);
        if (st_mbox_state_of(f) == want)
            return 0;
        if (st_mbox_wait_bell(bell, seen, 20000, deadline) < 0 && st_mbox_state_of(f) != want)
            return -1;
    }
}

static int writer_child(void *arg) {
    st_mbox *m = arg;
    st_mbox_frame *f = st_mbox_task(m, 0), *ctl = st_mbox_control(m);
    for (uint32_t r = 0; r < ROUNDS; r++) {
        if (await_state(f, &ctl->child_bell, ST_MBOX_IDLE) != 0)
            return 10;
        uint32_t n = round_bytes(r);
        for (uint32_t i = 0; i < n; i++)
            f->payload[i] = pattern(r, i);
        f->payload_bytes = n;
        f->result = r;
        st_mbox_publish(f, ST_MBOX_TASK_DONE); /* after every payload byte */
        st_mbox_ring(&ctl->parent_bell);
    }
    return 0;
}

static void a_published_payload_is_whole_when_its_state_is_seen(void **state) {
    (void)state;
    st_shm r;
    assert_ok(st_shm_create("mailbox test", sizeof(st_mbox), &r));
    st_mbox *m = r.base;
    st_mbox_init(m);
    st_mbox_frame *f = st_mbox_task(m, 0), *ctl = st_mbox_control(m);
    st_child c;
    assert_ok(st_child_spawn(&c, "writer", writer_child, m));
    uint32_t bad_rounds = 0, lost = 0;
    for (uint32_t rd = 0; rd < ROUNDS && !lost; rd++) {
        if (await_state(f, &ctl->parent_bell, ST_MBOX_TASK_DONE) != 0) {
            lost = 1;
            break;
        }
        uint32_t n = f->payload_bytes;
        int bad = f->result != rd || n != round_bytes(rd);
        for (uint32_t i = 0; !bad && i < n; i++)
            bad = f->payload[i] != pattern(rd, i);
        bad_rounds += (uint32_t)bad;
        memset(f->payload, 0, n); /* a stale byte would show next round */
        st_mbox_publish(f, ST_MBOX_IDLE);
        st_mbox_ring(&ctl->child_bell);
    }
    assert_int_equal(st_child_reap(&c, st_deadline_after(BOUND)), 1);
    assert_string_equal(c.why, "exited with status 0");
    assert_int_equal(lost, 0);
    assert_int_equal(bad_rounds, 0);
    st_shm_destroy(&r);
}

/* ---- CAS rules ---- */

static void cas_moves_only_from_the_expected_state(void **state) {
    (void)state;
    static st_mbox m; /* 192 KiB: not on the stack */
    st_mbox_init(&m);
    st_mbox_frame *f = st_mbox_task(&m, 0);
    st_mbox_publish(f, ST_MBOX_PREPARE_READY);
    /* the parent activates before the child staged it */
    assert_true(st_mbox_cas(f, ST_MBOX_PREPARE_READY, ST_MBOX_TASK_READY));
    assert_int_equal(st_mbox_state_of(f), ST_MBOX_TASK_READY);
    assert_false(st_mbox_cas(f, ST_MBOX_PREPARE_READY, ST_MBOX_TASK_READY)); /* moved already */
    assert_false(st_mbox_cas(f, ST_MBOX_FRAME_STAGED, ST_MBOX_ACTIVATE));
    assert_int_equal(st_mbox_state_of(f), ST_MBOX_TASK_READY);
    /* the child staged first: the parent's PREPARE_READY CAS loses, ACTIVATE wins */
    st_mbox_publish(f, ST_MBOX_PREPARE_READY);
    st_mbox_publish(f, ST_MBOX_FRAME_STAGED);
    assert_false(st_mbox_cas(f, ST_MBOX_PREPARE_READY, ST_MBOX_TASK_READY));
    assert_true(st_mbox_cas(f, ST_MBOX_FRAME_STAGED, ST_MBOX_ACTIVATE));
    assert_int_equal(st_mbox_state_of(f), ST_MBOX_ACTIVATE);
    /* a finished task is never activated */
    st_mbox_publish(f, ST_MBOX_TASK_FAILED);
    assert_false(st_mbox_cas(f, ST_MBOX_FRAME_STAGED, ST_MBOX_ACTIVATE));
    assert_int_equal(st_mbox_state_of(f), ST_MBOX_TASK_FAILED);
}

/* ---- error text ---- */

static void error_text_is_cut_with_a_marker_and_read_back_terminated(void **state) {
    (void)state;
    static st_mbox m;
    st_mbox_init(&m);
    st_mbox_frame *f = st_mbox_task(&m, 1);
    char longer[2000];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    st_mbox_set_error(f, STRATA_EENDPOINT, "sub 1: %s", longer);
    assert_int_equal(f->status, STRATA_EENDPOINT);
    assert_int_equal(strlen(f->error), ST_MBOX_ERR_BYTES - 1);
    assert_memory_equal(f->error, "sub 1: aaa", 10);
    assert_string_equal(f->error + ST_MBOX_ERR_BYTES - 4, "...");
    char out[ST_MBOX_ERR_BYTES], small[16];
    st_mbox_get_error(f, out, sizeof out);
    assert_string_equal(out, f->error);
    st_mbox_get_error(f, small, sizeof small);
    assert_string_equal(small, "sub 1: aaaaaaaa");
    /* a peer that died mid-write may leave no NUL */
    memset(f->error, 'x', sizeof f->error);
    st_mbox_get_error(f, out, sizeof out);
    assert_int_equal(strlen(out), ST_MBOX_ERR_BYTES - 1);
    st_mbox_set_error(f, STRATA_EINVAL, "short %d", 7);
    st_mbox_get_error(f, out, sizeof out);
    assert_string_equal(out, "short 7");
}

/* ---- identity ---- */

static const st_mbox_trailer good_trailer = {
    .protocol = ST_MBOX_PROTOCOL, .run_id = 7, .lease_slot = 1, .generation = 42, .dispatch_id = 9};

static void prepare(st_mbox_frame *f) {
    st_lease lease = {.slot = 1, .generation = 42};
    strata_call_config cfg = {.block_dim = 4, .flags = 0};
    st_digest d = st_digest_callable(1, "kernel");
    st_mbox_task_prepare(f, &good_trailer, &lease, &cfg, 3, d.bytes);
}

static void task_prepare_writes_the_identity_and_clears_the_result(void **state) {
    (void)state;
    static st_mbox m;
    st_mbox_init(&m);
    st_mbox_frame *f = st_mbox_task(&m, 0);
    st_mbox_set_error(f, STRATA_EENDPOINT, "left from the last task");
    atomic_store(&f->accepted, 1);
    atomic_store(&f->disposition, ST_MBOX_DISP_NATIVE_PREPARED);
    assert_int_equal(f->command, ST_MBOX_CMD_NONE); /* a task frame's control words: 0 from init */
    assert_int_equal(f->arg0 | f->arg1 | f->result, 0);
    f->result = 5; /* ... and the tail is never written by a task's publication */
    prepare(f);
    assert_int_equal(f->result, 5);
    assert_int_equal(f->status, STRATA_OK);
    /* the text stays: it is read only after a failure, which writes it first */
    assert_string_equal(f->error, "left from the last task");
    assert_int_equal(atomic_load(&f->accepted), 0);
    assert_int_equal(atomic_load(&f->disposition), ST_MBOX_DISP_NONE);
    assert_int_equal(f->member, 3);
    assert_int_equal(f->cfg.block_dim, 4);
    assert_int_equal(f->lease.generation, 42);
    assert_memory_equal(&f->trailer, &good_trailer, sizeof good_trailer);
    st_digest d = st_digest_callable(1, "kernel");
    assert_memory_equal(f->digest, d.bytes, ST_MBOX_DIGEST_BYTES);
    assert_ok(st_mbox_check_frame(f, "sub 1"));
    assert_ok(st_mbox_check_identity(f, &good_trailer, "sub 1"));
}

typedef struct bad_frame {
    void (*spoil)(st_mbox_frame *f);
    int status;
    const char *needle;
} bad_frame;

static void spoil_protocol(st_mbox_frame *f) {
    f->protocol = 2;
}
static void spoil_trailer_protocol(st_mbox_frame *f) {
    f->trailer.protocol = 4;
}
static void spoil_run_zero(st_mbox_frame *f) {
    f->trailer.run_id = 0;
}
static void spoil_slot_range(st_mbox_frame *f) {
    f->trailer.lease_slot = 2;
    f->lease.slot = 2;
}
static void spoil_generation_zero(st_mbox_frame *f) {
    f->trailer.generation = 0;
    f->lease.generation = 0;
}
static void spoil_dispatch_zero(st_mbox_frame *f) {
    f->trailer.dispatch_id = 0;
}
static void spoil_lease_mismatch(st_mbox_frame *f) {
    f->lease.generation = 41;
}

static void the_frame_check_names_the_broken_field(void **state) {
    (void)state;
    static st_mbox m;
    const bad_frame cases[] = {
        {spoil_protocol, STRATA_EENDPOINT, "protocol version 2 in the frame, expected 3"},
        {spoil_trailer_protocol, STRATA_EENDPOINT, "protocol version 4 in the trailer"},
        {spoil_run_zero, STRATA_EENDPOINT, "run_id 0"},
        {spoil_slot_range, STRATA_EENDPOINT, "lease_slot 2"},
        {spoil_generation_zero, STRATA_EENDPOINT, "generation 0"},
        {spoil_dispatch_zero, STRATA_EENDPOINT, "dispatch_id 0"},
        {spoil_lease_mismatch, STRATA_EENDPOINT, "generation 41"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_mbox_init(&m);
        st_mbox_frame *f = st_mbox_task(&m, 0);
        prepare(f);
        cases[i].spoil(f);
        assert_fails(cases[i].status, cases[i].needle, st_mbox_check_frame(f, "chip 2"));
        assert_message_mentions("chip 2");
        assert_fails(cases[i].status, cases[i].needle,
                     st_mbox_check_identity(f, &good_trailer, "chip 2"));
    }
}

static void the_identity_check_names_the_stale_field(void **state) {
    (void)state;
    static st_mbox m;
    st_mbox_init(&m);
    st_mbox_frame *f = st_mbox_task(&m, 0);
    prepare(f);
    st_mbox_trailer e = good_trailer;
    e.run_id = 8;
    assert_fails(STRATA_ESTALE, "run_id 7, expected 8", st_mbox_check_identity(f, &e, "sub 1"));
    assert_message_mentions("sub 1");
    e = good_trailer;
    e.lease_slot = 0;
    assert_fails(STRATA_ESTALE, "lease_slot 1, expected 0", st_mbox_check_identity(f, &e, "sub 1"));
    e = good_trailer;
    e.generation = 43;
    assert_fails(STRATA_ESTALE, "generation 42, expected 43",
                 st_mbox_check_identity(f, &e, "sub 1"));
    e = good_trailer;
    e.dispatch_id = 10;
    assert_fails(STRATA_ESTALE, "dispatch_id 9, expected 10",
                 st_mbox_check_identity(f, &e, "sub 1"));
    /* the protocol an expectation carries is not compared: the frame's is */
    e = good_trailer;
    e.protocol = 0;
    assert_ok(st_mbox_check_identity(f, &e, "sub 1"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_layout_is_the_wire_contract),
        cmocka_unit_test(init_resets_every_frame),
        cmocka_unit_test(a_published_payload_is_whole_when_its_state_is_seen),
        cmocka_unit_test(cas_moves_only_from_the_expected_state),
        cmocka_unit_test(error_text_is_cut_with_a_marker_and_read_back_terminated),
        cmocka_unit_test(task_prepare_writes_the_identity_and_clears_the_result),
        cmocka_unit_test(the_frame_check_names_the_broken_field),
        cmocka_unit_test(the_identity_check_names_the_stale_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
