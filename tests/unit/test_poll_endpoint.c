// label: concurrency
/* tests/unit/test_poll_endpoint.c - poll-driven next-level endpoints: the
 * scheduler thread calls their progress() while they hold work, delivers the
 * completions they report, and stops polling (sleeps) once nothing is in
 * flight. */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "core/endpoint.h"

/* A "device" that finishes each task on the third progress() call after its
 * dispatch. Everything below `mu` is protected by it. */
typedef struct poll_ep {
    st_endpoint base;
    pthread_mutex_t mu;
    int holding;
    int polls_left;
    st_dispatch held;
    st_completion comp;
    _Atomic int progress_calls;
    int completed;
} poll_ep;

static void poll_dispatch(st_endpoint *base, const st_dispatch *d) {
    poll_ep *ep = (poll_ep *)base;
    pthread_mutex_lock(&ep->mu);
    ep->held = *d;
    ep->holding = 1;
    ep->polls_left = 3;
    pthread_mutex_unlock(&ep->mu);
}

static int poll_progress(st_endpoint *base) {
    poll_ep *ep = (poll_ep *)base;
    atomic_fetch_add(&ep->progress_calls, 1);
    pthread_mutex_lock(&ep->mu);
    int done = ep->holding && --ep->polls_left == 0;
    st_dispatch d = ep->held;
    if (done) {
        ep->holding = 0;
        ep->completed++;
    }
    pthread_mutex_unlock(&ep->mu);
    if (done)
        st_endpoint_complete_with(base, &ep->comp, &d, STRATA_OK, NULL);
    return done;
}

static void poll_stop(st_endpoint *base) {
    (void)base;
}

static void poll_destroy(st_endpoint *base) {
    poll_ep *ep = (poll_ep *)base;
    pthread_mutex_destroy(&ep->mu);
    free(ep);
}

static const st_endpoint_ops poll_ops = {
    .dispatch = poll_dispatch,
    .progress = poll_progress,
    .stop = poll_stop,
    .destroy = poll_destroy,
};

typedef struct fixture {
    strata_worker *w;
    poll_ep *ep;
    int id;
    strata_callable nl;
    strata_buffer *buf;
} fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    assert_ok(strata_worker_create(&cfg, &f->w));
    f->ep = calloc(1, sizeof *f->ep);
    f->ep->base.ops = &poll_ops;
    snprintf(f->ep->base.label, sizeof f->ep->base.label, "poll");
    pthread_mutex_init(&f->ep->mu, NULL);
    assert_ok(st_worker_add_endpoint(f->w, &f->ep->base, &f->id));
    assert_ok(st_register_next_level(f->w, "nl", NULL, NULL, NULL, &f->nl));
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, 64, &f->buf));
    return f;
}

static void destroy(fixture *f) {
    strata_worker_destroy(f->w);
    strata_buffer_destroy(f->buf);
    free(f);
}

/* A chain of 5 tasks on the poll endpoint: each waits for the previous one. */
static int orch_chain(strata_orch *o, void *arg) {
    fixture *f = arg;
    strata_tensor t;
    int64_t n = 4;
    STRATA_TRY(strata_tensor_contiguous(f->buf, STRATA_I32, 1, &n, &t));
    for (int i = 0; i < 5; i++) {
        strata_task_args a;
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_INOUT));
        STRATA_TRY(strata_orch_submit_next_level(o, f->nl, &a, NULL, f->id));
    }
    return STRATA_OK;
}

static void the_scheduler_thread_drives_a_poll_endpoint(void **state) {
    (void)state;
    fixture *f = make();
    for (int r = 0; r < 3; r++)
        assert_ok(strata_worker_run(f->w, orch_chain, f));
    pthread_mutex_lock(&f->ep->mu);
    assert_int_equal(f->ep->completed, 15);
    pthread_mutex_unlock(&f->ep->mu);
    assert_true(atomic_load(&f->ep->progress_calls) >= 45); /* three polls per task */
    destroy(f);
}

static void polling_stops_when_nothing_is_in_flight(void **state) {
    (void)state;
    fixture *f = make();
    assert_ok(strata_worker_run(f->w, orch_chain, f));
    /* Let a poll round that was already under way end, then watch. */
    struct timespec settle = {0, 20000000};
    nanosleep(&settle, NULL);
    int before = atomic_load(&f->ep->progress_calls);
    struct timespec window = {0, 100000000};
    nanosleep(&window, NULL);
    assert_int_equal(atomic_load(&f->ep->progress_calls), before); /* asleep: no polls */
    assert_ok(strata_worker_run(f->w, orch_chain, f)); /* and woken by the next dispatch */
    assert_true(atomic_load(&f->ep->progress_calls) > before);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_scheduler_thread_drives_a_poll_endpoint),
        cmocka_unit_test(polling_stops_when_nothing_is_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
