/* tests/unit/test_slot.c - the task window: generations, the free list,
 * stale references and the task state machine. */
#include "test_support.h"

#include "core/slot.h"
#include "core/ready_queue.h"

static void take_until_full_then_null(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 8));
    st_slot *taken[8];
    for (int i = 0; i < 8; i++) {
        taken[i] = st_slots_take(&st);
        assert_non_null(taken[i]);
        assert_int_equal(st_slot_state(taken[i]), ST_BUILDING);
        for (int k = 0; k < i; k++)
            assert_ptr_not_equal(taken[k], taken[i]);
    }
    assert_null(st_slots_take(&st)); /* the window is full */
    st_slots_destroy(&st);
}

static void recycle_advances_generation_and_stales_refs(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 4));
    st_slot *s = st_slots_take(&st);
    uint64_t ref = st_ref_of(s);
    assert_ptr_equal(st_slots_get(&st, ref), s);
    st_slot_transition(s, ST_T_PUBLISH_READY);
    st_slot_transition(s, ST_T_DISPATCH);
    st_slot_transition(s, ST_T_SUCCEED);
    st_slot_transition(s, ST_T_CONSUME);
    st_slots_recycle(&st, s);
    assert_int_equal(st_slot_state(s), ST_FREE);
    assert_null(st_slots_get(&st, ref)); /* the old reference is stale */
    st_slot *again = st_slots_take(&st);
    assert_ptr_equal(again, s); /* LIFO free list reuses the warm slot */
    assert_int_not_equal(st_ref_of(again), ref);
    assert_ptr_equal(st_slots_get(&st, st_ref_of(again)), again);
    st_slots_destroy(&st);
}

static void references_are_never_zero_and_out_of_range_is_stale(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 4));
    for (int i = 0; i < 4; i++)
        assert_int_not_equal(st_ref_of(st_slots_take(&st)), 0);
    assert_null(st_slots_get(&st, 0));
    assert_null(st_slots_get(&st, 99));
    assert_null(st_slots_get(&st, (uint64_t)7 << 32 | 1)); /* wrong generation */
    st_slots_destroy(&st);
}

static void fail_claim_only_from_unstarted_states(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 8));
    /* BUILDING, PENDING and READY are claimable; the claim reports the prior state. */
    st_slot *b = st_slots_take(&st);
    assert_int_equal(st_slot_fail_claim(b), ST_BUILDING);
    assert_int_equal(st_slot_state(b), ST_FAILED);
    st_slot *p = st_slots_take(&st);
    st_slot_transition(p, ST_T_PUBLISH_WAIT);
    assert_int_equal(st_slot_fail_claim(p), ST_PENDING);
    st_slot *r = st_slots_take(&st);
    st_slot_transition(r, ST_T_PUBLISH_READY);
    assert_int_equal(st_slot_fail_claim(r), ST_READY);
    /* RUNNING belongs to its worker; terminal states are not claimable either. */
    st_slot *run = st_slots_take(&st);
    st_slot_transition(run, ST_T_PUBLISH_READY);
    assert_true(st_slot_dispatch_claim(run));
    assert_int_equal(st_slot_fail_claim(run), ST_STATE_COUNT);
    assert_int_equal(st_slot_state(run), ST_RUNNING);
    st_slot_transition(run, ST_T_SUCCEED);
    assert_int_equal(st_slot_fail_claim(run), ST_STATE_COUNT);
    assert_int_equal(st_slot_fail_claim(b), ST_STATE_COUNT); /* already failed */
    st_slots_destroy(&st);
}

static void dispatch_claim_requires_ready(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 4));
    st_slot *s = st_slots_take(&st);
    assert_false(st_slot_dispatch_claim(s)); /* never claims a BUILDING slot */
    st_slot_transition(s, ST_T_PUBLISH_WAIT);
    assert_false(st_slot_dispatch_claim(s));
    st_slot_transition(s, ST_T_RELEASED);
    assert_true(st_slot_dispatch_claim(s));
    assert_false(st_slot_dispatch_claim(s)); /* exactly once */
    st_slots_destroy(&st);
}

static void alloc_slots_complete_without_running(void **state) {
    (void)state;
    st_slot_store st;
    assert_ok(st_slots_init(&st, 2));
    st_slot *s = st_slots_take(&st);
    st_slot_transition(s, ST_T_ALLOC_DONE);
    assert_true(st_state_terminal(st_slot_state(s)));
    st_slot_transition(s, ST_T_CONSUME);
    assert_int_equal(st_slot_state(s), ST_CONSUMED);
    st_slots_destroy(&st);
}

static void state_names_cover_every_state(void **state) {
    (void)state;
    for (int s = 0; s < ST_STATE_COUNT; s++)
        assert_string_not_equal(st_state_name((st_task_state)s), "?");
    assert_string_equal(st_state_name(ST_STATE_COUNT), "?");
}

static void reflist_grows_past_inline_storage(void **state) {
    (void)state;
    st_reflist l;
    st_reflist_init(&l);
    for (uint64_t i = 1; i <= 1000; i++)
        assert_ok(st_reflist_push(&l, i));
    assert_int_equal(l.n, 1000);
    for (uint64_t i = 0; i < 1000; i++)
        assert_int_equal(l.v[i], i + 1);
    st_reflist_free(&l);
    assert_int_equal(l.n, 0);
}

static void ready_queue_is_fifo_across_growth_and_wrap(void **state) {
    (void)state;
    st_ready_queue q = {0};
    uint64_t next_in = 1, next_out = 1;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 37; i++)
            assert_ok(st_rq_push(&q, next_in++));
        for (int i = 0; i < 30; i++) {
            assert_false(st_rq_empty(&q));
            assert_int_equal(st_rq_front(&q), next_out++);
            st_rq_pop(&q);
        }
    }
    while (!st_rq_empty(&q)) {
        assert_int_equal(st_rq_front(&q), next_out++);
        st_rq_pop(&q);
    }
    assert_int_equal(next_in, next_out);
    st_rq_free(&q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(take_until_full_then_null),
        cmocka_unit_test(recycle_advances_generation_and_stales_refs),
        cmocka_unit_test(references_are_never_zero_and_out_of_range_is_stale),
        cmocka_unit_test(fail_claim_only_from_unstarted_states),
        cmocka_unit_test(dispatch_claim_requires_ready),
        cmocka_unit_test(alloc_slots_complete_without_running),
        cmocka_unit_test(state_names_cover_every_state),
        cmocka_unit_test(reflist_grows_past_inline_storage),
        cmocka_unit_test(ready_queue_is_fifo_across_growth_and_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
