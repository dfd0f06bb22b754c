// label: concurrency
/* tests/unit/test_endpoint_capacity.c - next-level endpoints that hold more than one
 * task: the engine fills them up to their capacity with head-run work (a chip
 * prepares the second while the first executes), never beyond, and a group
 * needs room on every target. */
#include "test_support.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/endpoint.h"

/* A hand-driven endpoint: dispatches are recorded; the test completes them. */
typedef struct manual_ep {
    st_endpoint base;
    pthread_mutex_t mu; /* protects everything below */
    st_dispatch held[8];
    st_completion comp[8];
    int nheld;
    int max_held;
    int total;
} manual_ep;

static void manual_dispatch(st_endpoint *base, const st_dispatch *d) {
    manual_ep *ep = (manual_ep *)base;
    pthread_mutex_lock(&ep->mu);
    ep->held[ep->nheld++] = *d;
    if (ep->nheld > ep->max_held)
        ep->max_held = ep->nheld;
    ep->total++;
    pthread_mutex_unlock(&ep->mu);
}

static void manual_stop(st_endpoint *base) {
    (void)base;
}

static void manual_destroy(st_endpoint *base) {
    manual_ep *ep = (manual_ep *)base;
    pthread_mutex_destroy(&ep->mu);
    free(ep);
}

static const st_endpoint_ops manual_ops = {
    .dispatch = manual_dispatch,
    .stop = manual_stop,
    .destroy = manual_destroy,
};

static int held(manual_ep *ep) {
    pthread_mutex_lock(&ep->mu);
    int n = ep->nheld;
    pthread_mutex_unlock(&ep->mu);
    return n;
}

/* Wait (bounded, only to detect a hang) until the endpoint holds n tasks. */
static int held_eventually(manual_ep *ep, int n) {
    for (int i = 0; i < 100000 && held(ep) != n; i++)
        sched_yield();
    return held(ep);
}

/* Complete the oldest held task (from the test thread, like an endpoint thread). */
static void complete_oldest(manual_ep *ep) {
    pthread_mutex_lock(&ep->mu);
    assert_true(ep->nheld > 0);
    st_dispatch d = ep->held[0];
    memmove(ep->held, ep->held + 1, sizeof ep->held[0] * (size_t)(ep->nheld - 1));
    ep->nheld--;
    st_completion *c = &ep->comp[d.dispatch_id % 8];
    pthread_mutex_unlock(&ep->mu);
    st_endpoint_complete_with(&ep->base, c, &d, STRATA_OK, NULL);
}

typedef struct fixture {
    strata_worker *w;
    manual_ep *ep[2];
    strata_callable nl;
} fixture;

static fixture *make(int capacity0, int capacity1) {
    fixture *f = calloc(1, sizeof *f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    assert_ok(strata_worker_create(&cfg, &f->w));
    int caps[2] = {capacity0, capacity1};
    for (int i = 0; i < 2; i++) {
        manual_ep *ep = calloc(1, sizeof *ep);
        ep->base.ops = &manual_ops;
        ep->base.capacity = caps[i];
        snprintf(ep->base.label, sizeof ep->base.label, "%d (manual)", i);
        pthread_mutex_init(&ep->mu, NULL);
        int id;
        assert_ok(st_worker_add_endpoint(f->w, &ep->base, &id));
        assert_int_equal(id, i);
        f->ep[i] = ep;
    }
    assert_ok(st_register_next_level(f->w, "nl", NULL, NULL, NULL, &f->nl));
    assert_ok(strata_worker_init(f->w));
    return f;
}

static int orch_three_on_zero(strata_orch *o, void *arg) {
    fixture *f = arg;
    for (int i = 0; i < 3; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, 0));
    }
    return STRATA_OK;
}

static void an_endpoint_is_filled_up_to_its_capacity_and_no_further(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_three_on_zero, f, &h));
    assert_int_equal(held(f->ep[0]), 2); /* the second is staged behind the first */
    complete_oldest(f->ep[0]);
    assert_int_equal(held_eventually(f->ep[0], 2), 2); /* the third takes the freed place */
    complete_oldest(f->ep[0]);
    complete_oldest(f->ep[0]);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_int_equal(f->ep[0]->max_held, 2);
    assert_int_equal(f->ep[0]->total, 3);
    strata_run_release(h);
    strata_worker_destroy(f->w);
    free(f);
}

static int orch_single_then_group(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_task_args a, g[2];
    strata_args_init(&a);
    STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, 1)); /* fills worker 1 */
    int ids[2] = {0, 1};
    strata_args_init(&g[0]);
    strata_args_init(&g[1]);
    STRATA_TRY(strata_orch_submit_next_level_group(o, f->nl, g, NULL, ids, 2));
    strata_args_init(&a);
    STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, 0)); /* behind the group */
    return STRATA_OK;
}

static void a_group_needs_room_on_every_target(void **state) {
    (void)state;
    fixture *f = make(2, 1);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_single_then_group, f, &h));
    /* Worker 1 is full: the group waits and reserves worker 0 although it has
     * room, so the later single does not overtake the group there. */
    assert_int_equal(held(f->ep[1]), 1);
    assert_int_equal(held(f->ep[0]), 0);
    complete_oldest(f->ep[1]);
    assert_int_equal(held_eventually(f->ep[0], 2), 2); /* group member 0, then the single */
    assert_int_equal(held_eventually(f->ep[1], 1), 1); /* group member 1 */
    assert_int_equal(f->ep[0]->held[0].member, 0);
    assert_int_equal(f->ep[0]->held[0].ref, f->ep[1]->held[0].ref);
    complete_oldest(f->ep[0]);
    complete_oldest(f->ep[0]);
    complete_oldest(f->ep[1]);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    strata_worker_destroy(f->w);
    free(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_endpoint_is_filled_up_to_its_capacity_and_no_further),
        cmocka_unit_test(a_group_needs_room_on_every_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
