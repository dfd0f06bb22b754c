// label: concurrency
/* tests/unit/test_capacity.c - what may change while a submit waits for
 * capacity, and that the submit sees it.
 *
 * A submit that finds the task window or a heap ring full drops the engine
 * lock to wait. Meanwhile the run may fail (its poisoned tasks are consumed
 * and their slots recycled) and runtime memory the task names may be
 * reclaimed. The named hook ST_HOOK_CAPACITY_WAIT fires just before the lock
 * is dropped, so each test makes the change happen exactly inside the wait:
 * the order of events is decided by the test, not by timing. */
#include "test_support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hooks.h"

#define NGATES 8
#define GATE_GIVE_UP_S 20 /* a broken test must not hang CI */

enum { GATE_T0, GATE_T1, GATE_T3, GATE_A, GATE_F };

typedef struct fixture {
    strata_worker *w;
    strata_callable gated, probe;
    strata_buffer *x, *y, *z;
    pthread_mutex_t mu; /* protects open[] */
    pthread_cond_t cv;
    int open[NGATES];
    int open_in_wait; /* the gate the capacity hook opens (-1: none) */
    int waits_seen;   /* capacity waits the hook saw */
    _Atomic int probe_ran;
    int submit_rc;    /* of the submit that waited */
    strata_tensor rt; /* runtime memory of the reclaim test */
} fixture;

static void gate_open(fixture *f, int g) {
    pthread_mutex_lock(&f->mu);
    f->open[g] = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* scalar 0: gate to wait for; scalar 1: 1 = fail once through the gate. */
static int gated_fn(const strata_task_view *a, void *u) {
    fixture *f = u;
    int g = (int)strata_args_scalar(a, 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += GATE_GIVE_UP_S;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    while (!f->open[g] && rc == 0)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &until);
    pthread_mutex_unlock(&f->mu);
    if (rc != 0) {
        strata_task_set_error("gate %d never opened", g);
        return 1;
    }
    if (strata_args_scalar(a, 1)) {
        strata_task_set_error("T0 fails on purpose");
        return 1;
    }
    return 0;
}

static int probe_fn(const strata_task_view *a, void *u) {
    (void)a;
    fixture *f = u;
    atomic_store(&f->probe_ran, 1); /* it must never run: its run failed before it was built */
    return 0;
}

/* Runs on the submitting thread with the engine lock held, just before a
 * capacity wait drops it. */
static void on_capacity_wait(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    fixture *f = ctx;
    f->waits_seen++;
    if (f->open_in_wait >= 0) {
        gate_open(f, f->open_in_wait);
        f->open_in_wait = -1;
    }
}

static fixture *make(uint32_t window, uint64_t heap_ring_bytes) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->open_in_wait = -1;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 3;
    cfg.task_window = window;
    if (heap_ring_bytes)
        cfg.heap_ring_bytes = heap_ring_bytes;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "gated", gated_fn, f, &f->gated));
    assert_ok(strata_worker_register_sub(f->w, "probe", probe_fn, f, &f->probe));
    st_worker_set_hook(f->w, ST_HOOK_CAPACITY_WAIT, on_capacity_wait, f);
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, 64, &f->x));
    assert_ok(strata_buffer_create(f->w, 64, &f->y));
    assert_ok(strata_buffer_create(f->w, 64, &f->z));
    return f;
}

static void destroy(fixture *f) {
    for (int g = 0; g < NGATES; g++)
        gate_open(f, g);
    strata_buffer_destroy(f->x);
    strata_buffer_destroy(f->y);
    strata_buffer_destroy(f->z);
    strata_worker_destroy(f->w);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static strata_tensor whole(strata_buffer *b) {
    int64_t n = 64;
    strata_tensor t;
    assert_ok(strata_tensor_contiguous(b, STRATA_U8, 1, &n, &t));
    return t;
}

/* Submit a gated task: INOUT on each given buffer, plus an OUT tensor of
 * `out_bytes` runtime memory if non-zero. */
static int submit_gated(strata_orch *o, fixture *f, int gate, int fail, strata_buffer *b1,
                        strata_buffer *b2, int64_t out_bytes) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor t1 = whole(b1);
    STRATA_TRY(strata_args_add_tensor(&a, &t1, STRATA_INOUT));
    if (b2) {
        strata_tensor t2 = whole(b2);
        STRATA_TRY(strata_args_add_tensor(&a, &t2, STRATA_INOUT));
    }
    if (out_bytes) {
        strata_tensor r = {0};
        r.rank = 1;
        r.dtype = STRATA_U8;
        r.shape[0] = out_bytes;
        STRATA_TRY(strata_args_add_tensor(&a, &r, STRATA_OUT));
    }
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)gate));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)fail));
    return strata_orch_submit_sub(o, f->gated, &a);
}

/* The probe writes Y (and takes runtime memory if out_bytes). */
static int submit_probe(strata_orch *o, fixture *f, int64_t out_bytes) {
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor ty = whole(f->y);
    STRATA_TRY(strata_args_add_tensor(&a, &ty, STRATA_INOUT));
    if (out_bytes) {
        strata_tensor r = {0};
        r.rank = 1;
        r.dtype = STRATA_U8;
        r.shape[0] = out_bytes;
        STRATA_TRY(strata_args_add_tensor(&a, &r, STRATA_OUT));
    }
    return strata_orch_submit_sub(o, f->probe, &a);
}

/* ---- the task window is full ------------------------------------------------ */

/* T0 INOUT X fails; T1 INOUT Y runs on; T2 INOUT X+Y is poisoned by T0;
 * T3 INOUT Z fills the window of 4; the probe (INOUT Y) waits for a slot.
 * Inside that wait T0 fails, T0 and T2 are consumed and their slots freed. */
static int orch_window_full(strata_orch *o, void *arg) {
    fixture *f = arg;
    STRATA_TRY(submit_gated(o, f, GATE_T0, 1, f->x, NULL, 0));
    STRATA_TRY(submit_gated(o, f, GATE_T1, 0, f->y, NULL, 0));
    STRATA_TRY(submit_gated(o, f, GATE_T0, 0, f->x, f->y, 0)); /* T2: never runs */
    STRATA_TRY(submit_gated(o, f, GATE_T3, 0, f->z, NULL, 0));
    f->open_in_wait = GATE_T0;
    f->submit_rc = submit_probe(o, f, 0);
    gate_open(f, GATE_T1);
    gate_open(f, GATE_T3);
    return STRATA_OK;
}

static void submit_after_slot_wait_sees_the_failure(void **state) {
    (void)state;
    fixture *f = make(4, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_window_full, f, &h));
    assert_true(f->waits_seen >= 1); /* the probe's submit really waited */
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    /* The run failed while the submit waited: it fails fast with the run's
     * error instead of getting a task with no edge to T1. */
    assert_status(STRATA_ETASK, f->submit_rc);
    assert_int_equal(atomic_load(&f->probe_ran), 0);
    assert_non_null(strstr(strata_run_error(h), "T0 fails on purpose"));
    strata_run_release(h);
    destroy(f);
}

/* ---- a heap ring is full ---------------------------------------------------- */

#define RING 4096
#define PIECE 3072 /* two of these never fit one ring together */

/* As above, but T0 holds runtime memory (released with T0) and the probe
 * waits for heap space in the same ring (both in an inner scope). */
static int orch_heap_full(strata_orch *o, void *arg) {
    fixture *f = arg;
    STRATA_TRY(strata_orch_scope_begin(o));
    STRATA_TRY(submit_gated(o, f, GATE_T0, 1, f->x, NULL, PIECE));
    STRATA_TRY(strata_orch_scope_end(o));
    STRATA_TRY(submit_gated(o, f, GATE_T1, 0, f->y, NULL, 0));
    STRATA_TRY(submit_gated(o, f, GATE_T0, 0, f->x, f->y, 0)); /* T2: never runs */
    STRATA_TRY(strata_orch_scope_begin(o));
    f->open_in_wait = GATE_T0;
    f->submit_rc = submit_probe(o, f, PIECE);
    STRATA_TRY(strata_orch_scope_end(o));
    gate_open(f, GATE_T1);
    return STRATA_OK;
}

static void submit_after_heap_wait_sees_the_failure(void **state) {
    (void)state;
    fixture *f = make(4096, RING);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_heap_full, f, &h));
    assert_true(f->waits_seen >= 1);
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_status(STRATA_ETASK, f->submit_rc);
    assert_int_equal(atomic_load(&f->probe_ran), 0);
    strata_run_release(h);
    destroy(f);
}

/* ---- runtime memory reclaimed during the wait ------------------------------- */

/* A task in an inner scope writes runtime memory R; the scope ends, so R
 * lives only as long as that task. Three tasks fill the window; a task
 * reading R waits for a slot; inside the wait R's writer finishes and R is
 * reclaimed. The reader must be refused (ESTALE), not wired to nothing. */
static int orch_reclaimed(strata_orch *o, void *arg) {
    fixture *f = arg;
    STRATA_TRY(strata_orch_scope_begin(o));
    strata_task_args a;
    strata_args_init(&a);
    strata_tensor r = {0};
    r.rank = 1;
    r.dtype = STRATA_U8;
    r.shape[0] = 256;
    STRATA_TRY(strata_args_add_tensor(&a, &r, STRATA_OUT));
    STRATA_TRY(strata_args_add_scalar(&a, GATE_A));
    STRATA_TRY(strata_args_add_scalar(&a, 0));
    STRATA_TRY(strata_orch_submit_sub(o, f->gated, &a));
    f->rt = a.tensors[0]; /* the view of R written back by the submit */
    STRATA_TRY(strata_orch_scope_end(o));
    STRATA_TRY(submit_gated(o, f, GATE_F, 0, f->x, NULL, 0));
    STRATA_TRY(submit_gated(o, f, GATE_F, 0, f->y, NULL, 0));
    STRATA_TRY(submit_gated(o, f, GATE_F, 0, f->z, NULL, 0));
    strata_task_args b;
    strata_args_init(&b);
    STRATA_TRY(strata_args_add_tensor(&b, &f->rt, STRATA_IN));
    f->open_in_wait = GATE_A;
    f->submit_rc = strata_orch_submit_sub(o, f->probe, &b);
    gate_open(f, GATE_F);
    return STRATA_OK;
}

static void runtime_memory_reclaimed_during_a_wait_is_stale(void **state) {
    (void)state;
    fixture *f = make(4, 0);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_reclaimed, f, &h));
    assert_true(f->waits_seen >= 1);
    assert_status(STRATA_ESTALE, f->submit_rc);
    assert_int_equal(atomic_load(&f->probe_ran), 0);
    /* The refusal leaves the run alone (nothing was taken). */
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    destroy(f);
}

/* ---- strata_orch_alloc waits for heap space ---------------------------------- */

/* T0 (failing) holds runtime memory; an alloc in the same ring waits for it;
 * inside the wait T0 fails and is consumed. The alloc must fail fast. */
static int orch_alloc_waits(strata_orch *o, void *arg) {
    fixture *f = arg;
    STRATA_TRY(strata_orch_scope_begin(o));
    STRATA_TRY(submit_gated(o, f, GATE_T0, 1, f->x, NULL, PIECE));
    STRATA_TRY(strata_orch_scope_end(o));
    STRATA_TRY(strata_orch_scope_begin(o));
    f->open_in_wait = GATE_T0;
    int64_t n = PIECE;
    strata_tensor t;
    f->submit_rc = strata_orch_alloc(o, 1, &n, STRATA_U8, &t);
    STRATA_TRY(strata_orch_scope_end(o));
    return STRATA_OK;
}

static void alloc_after_heap_wait_sees_the_failure(void **state) {
    (void)state;
    fixture *f = make(4096, RING);
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_alloc_waits, f, &h));
    assert_true(f->waits_seen >= 1);
    assert_status(STRATA_ETASK, strata_run_wait(h, STRATA_WAIT_FOREVER));
    assert_status(STRATA_ETASK, f->submit_rc);
    strata_run_release(h);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(submit_after_slot_wait_sees_the_failure),
        cmocka_unit_test(submit_after_heap_wait_sees_the_failure),
        cmocka_unit_test(runtime_memory_reclaimed_during_a_wait_is_stale),
        cmocka_unit_test(alloc_after_heap_wait_sees_the_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
