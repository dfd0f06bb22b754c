// label: concurrency
/* tests/unit/test_dependencies.c - dependency inference end to end through a
 * real Worker: read-after-write, write-after-write, write-after-read,
 * concurrent readers, partial and strided overlaps, NO_DEP, runtime memory
 * for OUT tensors, intermediates from strata_orch_alloc, group tasks, and
 * the per-run reset of the dependency map.
 *
 * Owns: the observable ordering contract of DESIGN §5.2.
 * Must never: assert wall-clock magnitudes. Ordering is recorded with a
 * shared atomic clock inside task bodies; "no edge" is proved either by a
 * rendezvous (two tasks wait for each other, bounded at 5 s so a missing
 * overlap fails instead of hanging) or by reading the consumer's wired
 * producers through the engine's test hook and slot store.
 */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "core/hooks.h"
#include "util/clock.h"

#define SEC 1000000000ull
#define MAX_TASKS 64
#define MEET_TIMEOUT (5 * SEC)
#define HOLD_TIMEOUT (10 * SEC)
#define ELEMS 256 /* I32 elements per buffer (a 16 x 16 matrix) */
#define PRESET 7  /* what the test writes into x before a run */

/* Task flags (scalar 1). */
enum { F_HOLD = 1, F_MEET = 2 };

/* Scalars every task carries: 0 = task id (index into spans), 1 = flags.
 * fill writes value_of(id) into every element of tensor 0. */
static int32_t value_of(uint64_t id) {
    return 100 + (int32_t)id;
}

typedef struct span {
    _Atomic uint64_t start, end; /* ticks of the shared clock; 0 = not yet */
} span;

typedef struct fx {
    strata_worker *w;
    strata_callable fill, copy, add1, mark;
    _Atomic uint64_t clock;
    span spans[MAX_TASKS];
    _Atomic int gate;     /* HOLD tasks wait until it opens */
    _Atomic int met;      /* MEET tasks that arrived */
    _Atomic int timeouts; /* bounded waits that expired (a failure) */
    uint64_t refs[MAX_TASKS];
    int nrefs; /* task references in submit order (ST_HOOK_AFTER_WIRING) */
    strata_buffer *x, *y, *z;
    /* results of checks made inside orchestration functions */
    int submit_rc[MAX_TASKS];
    int nsubmits;
    strata_tensor written_back;
} fx;

/* ---- task bodies ---------------------------------------------------------- */

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void hold(fx *f) {
    uint64_t deadline = st_deadline_after(HOLD_TIMEOUT);
    while (!atomic_load(&f->gate)) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->timeouts, 1);
            return;
        }
        sleep_us(100);
    }
}

/* Wait until two MEET tasks are inside their bodies at the same time. */
static void meet(fx *f) {
    atomic_fetch_add(&f->met, 1);
    uint64_t deadline = st_deadline_after(MEET_TIMEOUT);
    while (atomic_load(&f->met) < 2) {
        if (st_now_ns() >= deadline) {
            atomic_fetch_add(&f->timeouts, 1);
            return;
        }
        sleep_us(50);
    }
}

static uint64_t enter(fx *f, const strata_task_view *a) {
    uint64_t id = strata_args_scalar(a, 0), flags = strata_args_scalar(a, 1);
    atomic_store(&f->spans[id].start, atomic_fetch_add(&f->clock, 1) + 1);
    if (flags & F_MEET)
        meet(f);
    if (flags & F_HOLD)
        hold(f);
    return id;
}

static void leave(fx *f, uint64_t id) {
    atomic_store(&f->spans[id].end, atomic_fetch_add(&f->clock, 1) + 1);
}

/* Element i (row-major order over the view's shape) of an I32 view. */
static int32_t *elem(const strata_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int k = t->rank - 1; k >= 0; k--) {
        off += (i % t->shape[k]) * t->strides[k];
        i /= t->shape[k];
    }
    return (int32_t *)strata_tensor_data(t) + off;
}

static int fill_fn(const strata_task_view *a, void *user) {
    fx *f = user;
    uint64_t id = enter(f, a);
    const strata_tensor *t = strata_args_tensor(a, 0);
    for (int64_t i = 0; i < strata_tensor_numel(t); i++)
        *elem(t, i) = value_of(id);
    leave(f, id);
    return 0;
}

static int copy_fn(const strata_task_view *a, void *user) {
    fx *f = user;
    uint64_t id = enter(f, a);
    const strata_tensor *src = strata_args_tensor(a, 0), *dst = strata_args_tensor(a, 1);
    for (int64_t i = 0; i < strata_tensor_numel(src); i++)
        *elem(dst, i) = *elem(src, i);
    leave(f, id);
    return 0;
}

static int add1_fn(const strata_task_view *a, void *user) {
    fx *f = user;
    uint64_t id = enter(f, a);
    const strata_tensor *t = strata_args_tensor(a, 0);
    for (int64_t i = 0; i < strata_tensor_numel(t); i++)
        *elem(t, i) += 1;
    leave(f, id);
    return 0;
}

/* Touches no data: for tags whose accesses are deliberately unordered. */
static int mark_fn(const strata_task_view *a, void *user) {
    fx *f = user;
    leave(f, enter(f, a));
    return 0;
}

/* ---- fixture ------------------------------------------------------------------ */

static void capture_ref(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w;
    (void)at;
    fx *f = ctx;
    if (f->nrefs < MAX_TASKS)
        f->refs[f->nrefs++] = ref;
}

static fx *make(uint32_t subs, uint32_t depth) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = subs;
    cfg.pipeline_depth = depth;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "fill", fill_fn, f, &f->fill));
    assert_ok(strata_worker_register_sub(f->w, "copy", copy_fn, f, &f->copy));
    assert_ok(strata_worker_register_sub(f->w, "add1", add1_fn, f, &f->add1));
    assert_ok(strata_worker_register_sub(f->w, "mark", mark_fn, f, &f->mark));
    assert_ok(strata_worker_init(f->w));
    st_worker_set_hook(f->w, ST_HOOK_AFTER_WIRING, capture_ref, f);
    assert_ok(strata_buffer_create(f->w, ELEMS * 4, &f->x));
    assert_ok(strata_buffer_create(f->w, ELEMS * 4, &f->y));
    assert_ok(strata_buffer_create(f->w, ELEMS * 4, &f->z));
    int32_t *x = strata_buffer_data(f->x);
    for (int i = 0; i < ELEMS; i++)
        x[i] = PRESET;
    return f;
}

static void destroy(fx *f) {
    atomic_store(&f->gate, 1); /* never leave a held task behind */
    strata_worker_destroy(f->w);
    strata_buffer_destroy(f->x);
    strata_buffer_destroy(f->y);
    strata_buffer_destroy(f->z);
    free(f);
}

/* The test's verdict on bounded waits: none may have expired. */
static void assert_no_timeouts(fx *f) {
    assert_int_equal(atomic_load(&f->timeouts), 0);
}

/* I32 view of b: n elements from element `first`, element stride `stride`. */
static strata_tensor vec(strata_buffer *b, int64_t first, int64_t n, int64_t stride) {
    strata_tensor t;
    assert_ok(strata_tensor_view(b, (uint64_t)first * 4, STRATA_I32, 1, &n, &stride, &t));
    return t;
}

/* rows x cols tile at (r0, c0) of b seen as a 16 x 16 I32 matrix. */
static strata_tensor tile(strata_buffer *b, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
    strata_tensor t;
    int64_t shape[2] = {rows, cols}, strides[2] = {16, 1};
    assert_ok(
        strata_tensor_view(b, (uint64_t)(r0 * 16 + c0) * 4, STRATA_I32, 2, shape, strides, &t));
    return t;
}

/* Submit fn(id, flags) on up to two tagged tensors; keeps the status. */
static int submit(strata_orch *o, fx *f, strata_callable fn, uint64_t id, uint64_t flags,
                  strata_tensor *t0, strata_tag g0, strata_tensor *t1, strata_tag g1) {
    strata_task_args a;
    strata_args_init(&a);
    strata_args_add_scalar(&a, id);
    strata_args_add_scalar(&a, flags);
    if (t0)
        strata_args_add_tensor(&a, t0, g0);
    if (t1)
        strata_args_add_tensor(&a, t1, g1);
    int rc = strata_orch_submit_sub(o, fn, &a);
    if (f->nsubmits < MAX_TASKS)
        f->submit_rc[f->nsubmits++] = rc;
    if (rc == STRATA_OK && t0)
        *t0 = a.tensors[0]; /* runtime memory, if any, was written back */
    return rc;
}

static void assert_submits_ok(fx *f) {
    for (int i = 0; i < f->nsubmits; i++)
        if (f->submit_rc[i] != STRATA_OK)
            fail_msg("submit %d returned %s", i, strata_status_name(f->submit_rc[i]));
}

/* ---- engine observations (the slot store, under the engine lock) ------------------ */

/* State of the k-th submitted task; ST_CONSUMED once its slot was recycled. */
static st_task_state task_state(fx *f, int k) {
    assert_true(k < f->nrefs);
    st_engine_lock(f->w);
    st_slot *s = st_slots_get(&f->w->slots, f->refs[k]);
    st_task_state st = s ? st_slot_state(s) : ST_CONSUMED;
    st_engine_unlock(f->w);
    return st;
}

/* 1 if task c was wired to task p, 0 if not; fails the test if c is gone. */
static int has_edge(fx *f, int c, int p) {
    assert_true(c < f->nrefs && p < f->nrefs);
    st_engine_lock(f->w);
    st_slot *s = st_slots_get(&f->w->slots, f->refs[c]);
    int found = -1;
    if (s) {
        found = 0;
        for (uint32_t i = 0; i < s->producers.n; i++)
            found |= s->producers.v[i] == f->refs[p];
    }
    st_engine_unlock(f->w);
    if (found < 0)
        fail_msg("task %d is already consumed; cannot inspect its edges", c);
    return found;
}

static uint32_t producer_count(fx *f, int c) {
    st_engine_lock(f->w);
    st_slot *s = st_slots_get(&f->w->slots, f->refs[c]);
    uint32_t n = s ? s->producers.n : UINT32_MAX;
    st_engine_unlock(f->w);
    if (n == UINT32_MAX)
        fail_msg("task %d is already consumed; cannot inspect its edges", c);
    return n;
}

/* Wait (bounded) until task `id` has entered its body. */
static void wait_started(fx *f, uint64_t id) {
    uint64_t deadline = st_deadline_after(HOLD_TIMEOUT);
    while (atomic_load(&f->spans[id].start) == 0) {
        if (st_now_ns() >= deadline)
            fail_msg("task %llu never started", (unsigned long long)id);
        sleep_us(100);
    }
}

/* Task b started only after task a finished. */
static void assert_after(fx *f, uint64_t b, uint64_t a) {
    uint64_t a_end = atomic_load(&f->spans[a].end), b_start = atomic_load(&f->spans[b].start);
    assert_true(a_end != 0 && b_start != 0);
    if (b_start <= a_end)
        fail_msg("task %llu started (tick %llu) before task %llu ended (tick %llu)",
                 (unsigned long long)b, (unsigned long long)b_start, (unsigned long long)a,
                 (unsigned long long)a_end);
}

static void assert_all(const strata_tensor *t, int32_t v) {
    for (int64_t i = 0; i < strata_tensor_numel(t); i++)
        if (*elem(t, i) != v)
            fail_msg("element %lld is %d, expected %d", (long long)i, *elem(t, i), v);
}

static strata_run *submit_run(fx *f, strata_orch_fn fn) {
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, fn, f, &h));
    return h;
}

static void finish_run(fx *f, strata_run *h) {
    atomic_store(&f->gate, 1);
    assert_ok(strata_run_wait(h, STRATA_WAIT_FOREVER));
    strata_run_release(h);
    assert_submits_ok(f);
    assert_no_timeouts(f);
}

/* ==== read-after-write ========================================================== */

static int orch_raw(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    submit(o, f, f->fill, 0, F_HOLD, &x, STRATA_OUT, NULL, 0);
    submit(o, f, f->copy, 1, 0, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void reader_starts_after_writer_finished(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_raw);
    assert_int_equal(task_state(f, 1), ST_PENDING); /* a worker is free, yet it waits */
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor y = vec(f->y, 0, 64, 1);
    assert_all(&y, value_of(0));
    destroy(f);
}

/* ==== write-after-write ========================================================= */

static int orch_waw(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1);
    submit(o, f, f->fill, 0, F_HOLD, &x, STRATA_OUT, NULL, 0);
    submit(o, f, f->fill, 1, 0, &x, STRATA_OUT_EXISTING, NULL, 0);
    return STRATA_OK;
}

static void second_writer_waits_for_first(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_waw);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor x = vec(f->x, 0, 64, 1);
    assert_all(&x, value_of(1));
    destroy(f);
}

/* ==== write-after-read ========================================================== */

static int orch_war(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    submit(o, f, f->copy, 0, F_HOLD, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    submit(o, f, f->fill, 1, 0, &x, STRATA_OUT, NULL, 0);
    return STRATA_OK;
}

static void writer_after_reader_waits_for_the_reader(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_war);
    wait_started(f, 0); /* the reader runs; the other worker is idle */
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    assert_all(&y, PRESET); /* the reader saw the old contents */
    assert_all(&x, value_of(1));
    destroy(f);
}

static int orch_war_two_readers(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1), z = vec(f->z, 0, 64, 1);
    submit(o, f, f->copy, 0, F_HOLD, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    submit(o, f, f->copy, 1, F_HOLD, &x, STRATA_IN, &z, STRATA_OUT_EXISTING);
    submit(o, f, f->add1, 2, 0, &x, STRATA_INOUT, NULL, 0);
    return STRATA_OK;
}

static void writer_waits_for_every_reader_since_the_last_write(void **state) {
    (void)state;
    fx *f = make(3, 2);
    strata_run *h = submit_run(f, orch_war_two_readers);
    wait_started(f, 0);
    wait_started(f, 1);
    assert_int_equal(task_state(f, 2), ST_PENDING);
    assert_true(has_edge(f, 2, 0));
    assert_true(has_edge(f, 2, 1));
    finish_run(f, h);
    assert_after(f, 2, 0);
    assert_after(f, 2, 1);
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1), z = vec(f->z, 0, 64, 1);
    assert_all(&y, PRESET);
    assert_all(&z, PRESET);
    assert_all(&x, PRESET + 1);
    destroy(f);
}

/* ==== readers together ============================================================ */

static int orch_two_readers(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1), z = vec(f->z, 0, 64, 1);
    submit(o, f, f->fill, 0, 0, &x, STRATA_OUT, NULL, 0);
    submit(o, f, f->copy, 1, F_MEET, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    submit(o, f, f->copy, 2, F_MEET, &x, STRATA_IN, &z, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void readers_of_one_tensor_run_concurrently(void **state) {
    (void)state;
    fx *f = make(2, 2);
    finish_run(f, submit_run(f, orch_two_readers));
    assert_int_equal(atomic_load(&f->met), 2); /* both readers were inside at once */
    assert_after(f, 1, 0);
    assert_after(f, 2, 0);
    strata_tensor y = vec(f->y, 0, 64, 1), z = vec(f->z, 0, 64, 1);
    assert_all(&y, value_of(0));
    assert_all(&z, value_of(0));
    destroy(f);
}

static int orch_inout_chain(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1);
    submit(o, f, f->fill, 0, 0, &x, STRATA_OUT, NULL, 0);
    for (uint64_t i = 1; i <= 12; i++)
        submit(o, f, f->add1, i, 0, &x, STRATA_INOUT, NULL, 0);
    return STRATA_OK;
}

static void inout_chain_runs_in_submit_order(void **state) {
    (void)state;
    fx *f = make(4, 2);
    finish_run(f, submit_run(f, orch_inout_chain));
    for (uint64_t i = 1; i <= 12; i++)
        assert_after(f, i, i - 1);
    strata_tensor x = vec(f->x, 0, 64, 1);
    assert_all(&x, value_of(0) + 12);
    destroy(f);
}

/* ==== partial overlaps ============================================================= */

static int orch_partial_raw(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor w = vec(f->x, 0, 32, 1), r = vec(f->x, 16, 32, 1), y = vec(f->y, 0, 32, 1);
    submit(o, f, f->fill, 0, F_HOLD, &w, STRATA_OUT, NULL, 0);
    submit(o, f, f->copy, 1, 0, &r, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void partially_overlapping_read_waits_for_writer(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_partial_raw);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor lo = vec(f->y, 0, 16, 1), hi = vec(f->y, 16, 16, 1);
    assert_all(&lo, value_of(0));
    assert_all(&hi, PRESET);
    destroy(f);
}

static int orch_partial_war(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor r = vec(f->x, 0, 32, 1), y = vec(f->y, 0, 32, 1), w = vec(f->x, 31, 8, 1);
    submit(o, f, f->copy, 0, F_HOLD, &r, STRATA_IN, &y, STRATA_OUT_EXISTING);
    submit(o, f, f->fill, 1, 0, &w, STRATA_OUT, NULL, 0); /* shares one element */
    return STRATA_OK;
}

static void partially_overlapping_write_waits_for_reader(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_partial_war);
    wait_started(f, 0);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor y = vec(f->y, 0, 32, 1);
    assert_all(&y, PRESET);
    destroy(f);
}

static int orch_partial_tiles(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor a = tile(f->x, 0, 0, 4, 4), b = tile(f->x, 3, 3, 4, 4);
    submit(o, f, f->fill, 0, F_HOLD, &a, STRATA_OUT, NULL, 0);
    submit(o, f, f->fill, 1, 0, &b, STRATA_OUT, NULL, 0); /* shares element (3,3) */
    return STRATA_OK;
}

static void overlapping_tiles_of_a_matrix_are_ordered(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_partial_tiles);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    const int32_t *x = strata_buffer_data(f->x);
    assert_int_equal(x[3 * 16 + 3], value_of(1));
    assert_int_equal(x[0], value_of(0));
    destroy(f);
}

static int orch_strided_sharing(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor even = vec(f->x, 0, 32, 2), thirds = vec(f->x, 0, 20, 3);
    submit(o, f, f->fill, 0, F_HOLD, &even, STRATA_OUT, NULL, 0);
    submit(o, f, f->fill, 1, 0, &thirds, STRATA_OUT, NULL, 0); /* share 0, 6, 12, ... */
    return STRATA_OK;
}

static void strided_views_sharing_elements_are_ordered(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_strided_sharing);
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    const int32_t *x = strata_buffer_data(f->x);
    assert_int_equal(x[6], value_of(1));
    assert_int_equal(x[2], value_of(0));
    destroy(f);
}

/* ==== disjoint views ================================================================ */

static int orch_disjoint_ranges(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor lo = vec(f->x, 0, 32, 1), hi = vec(f->x, 32, 32, 1);
    submit(o, f, f->fill, 0, F_MEET, &lo, STRATA_OUT, NULL, 0);
    submit(o, f, f->fill, 1, F_MEET, &hi, STRATA_OUT, NULL, 0);
    return STRATA_OK;
}

static void writers_of_disjoint_ranges_run_concurrently(void **state) {
    (void)state;
    fx *f = make(2, 2);
    finish_run(f, submit_run(f, orch_disjoint_ranges));
    assert_int_equal(atomic_load(&f->met), 2);
    strata_tensor lo = vec(f->x, 0, 32, 1), hi = vec(f->x, 32, 32, 1);
    assert_all(&lo, value_of(0));
    assert_all(&hi, value_of(1));
    destroy(f);
}

static int orch_disjoint_strided(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor even = vec(f->x, 0, 32, 2), odd = vec(f->x, 1, 32, 2);
    submit(o, f, f->fill, 0, F_MEET, &even, STRATA_OUT, NULL, 0);
    submit(o, f, f->fill, 1, F_MEET, &odd, STRATA_INOUT, NULL, 0);
    return STRATA_OK;
}

static void writers_of_interleaved_strided_views_run_concurrently(void **state) {
    (void)state;
    fx *f = make(2, 2);
    finish_run(f, submit_run(f, orch_disjoint_strided));
    assert_int_equal(atomic_load(&f->met), 2);
    strata_tensor even = vec(f->x, 0, 32, 2), odd = vec(f->x, 1, 32, 2);
    assert_all(&even, value_of(0));
    assert_all(&odd, value_of(1));
    destroy(f);
}

static int orch_disjoint_tiles(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor left = tile(f->x, 0, 0, 8, 8), right = tile(f->x, 0, 8, 8, 8);
    strata_tensor y = vec(f->y, 0, 64, 1);
    submit(o, f, f->fill, 0, F_MEET, &left, STRATA_OUT, NULL, 0);
    submit(o, f, f->copy, 1, F_MEET, &right, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void writer_and_reader_of_disjoint_tiles_run_concurrently(void **state) {
    (void)state;
    fx *f = make(3, 2);
    finish_run(f, submit_run(f, orch_disjoint_tiles));
    assert_int_equal(atomic_load(&f->met), 2);
    strata_tensor y = vec(f->y, 0, 64, 1), left = tile(f->x, 0, 0, 8, 8);
    assert_all(&y, PRESET);
    assert_all(&left, value_of(0));
    destroy(f);
}

/* ==== NO_DEP ========================================================================= */

static int orch_no_dep(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1);
    submit(o, f, f->mark, 0, F_MEET | F_HOLD, &x, STRATA_OUT, NULL, 0);
    submit(o, f, f->mark, 1, F_MEET | F_HOLD, &x, STRATA_NO_DEP, NULL, 0);
    return STRATA_OK;
}

static int orch_writer_after_no_dep(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1);
    submit(o, f, f->mark, 2, 0, &x, STRATA_OUT, NULL, 0);
    return STRATA_OK;
}

static void no_dep_tensor_creates_no_edges(void **state) {
    (void)state;
    fx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_no_dep);
    /* The NO_DEP task meets the running writer of the same bytes: no edge. */
    uint64_t deadline = st_deadline_after(MEET_TIMEOUT + SEC);
    while (atomic_load(&f->met) < 2 && st_now_ns() < deadline)
        sleep_us(100);
    assert_int_equal(atomic_load(&f->met), 2);
    assert_int_equal(producer_count(f, 1), 0);
    finish_run(f, h);
    destroy(f);
}

static int orch_no_dep_then_writer(strata_orch *o, void *arg) {
    fx *f = arg;
    orch_no_dep(o, arg);
    /* Wait inside the build until both are running, then add a writer:
     * it follows the OUT writer only (NO_DEP left nothing in the map). */
    uint64_t deadline = st_deadline_after(MEET_TIMEOUT + SEC);
    while (atomic_load(&f->met) < 2 && st_now_ns() < deadline)
        sleep_us(100);
    return orch_writer_after_no_dep(o, arg);
}

static void later_writer_ignores_a_no_dep_user(void **state) {
    (void)state;
    fx *f = make(3, 1);
    strata_run *h = submit_run(f, orch_no_dep_then_writer);
    assert_int_equal(atomic_load(&f->met), 2);
    assert_int_equal(task_state(f, 2), ST_PENDING);
    assert_true(has_edge(f, 2, 0));
    assert_false(has_edge(f, 2, 1));
    assert_int_equal(producer_count(f, 2), 1);
    finish_run(f, h);
    assert_after(f, 2, 0);
    destroy(f);
}

/* ==== runtime memory ================================================================== */

static int orch_out_without_memory(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_I32;
    t.rank = 2;
    t.shape[0] = 4;
    t.shape[1] = 8;
    t.strides[0] = 1; /* any positive values: replaced by row-major strides */
    t.strides[1] = 1;
    strata_tensor y = vec(f->y, 0, 32, 1);
    if (submit(o, f, f->fill, 0, F_HOLD, &t, STRATA_OUT, NULL, 0) != STRATA_OK)
        return STRATA_OK; /* reported by assert_submits_ok */
    f->written_back = t;
    submit(o, f, f->copy, 1, 0, &t, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void out_without_memory_gets_runtime_memory_and_feeds_a_reader(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h = submit_run(f, orch_out_without_memory);
    assert_submits_ok(f);
    const strata_tensor *t = &f->written_back;
    assert_non_null(t->base);
    assert_true(t->ident.id != 0);
    assert_int_equal(t->buffer_bytes, 4 * 8 * 4);
    assert_int_equal(t->offset, 0);
    assert_int_equal(t->strides[0], 8);
    assert_int_equal(t->strides[1], 1);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->dtype, STRATA_I32);
    /* the written-back memory is what later tasks depend on */
    assert_int_equal(task_state(f, 1), ST_PENDING);
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 1, 0);
    strata_tensor y = vec(f->y, 0, 32, 1);
    assert_all(&y, value_of(0));
    destroy(f);
}

static int orch_out_from_zeroed_tensor(strata_orch *o, void *arg) {
    fx *f = arg;
    /* docs/guide.md: "a zeroed strata_tensor with dtype, rank and shape set" */
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_I32;
    t.rank = 1;
    t.shape[0] = 16;
    strata_tensor y = vec(f->y, 0, 16, 1);
    if (submit(o, f, f->fill, 0, 0, &t, STRATA_OUT, NULL, 0) != STRATA_OK)
        return STRATA_OK;
    f->written_back = t;
    submit(o, f, f->copy, 1, 0, &t, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void out_without_memory_from_a_zeroed_tensor_with_dtype_rank_shape(void **state) {
    (void)state;
    fx *f = make(2, 2);
    finish_run(f, submit_run(f, orch_out_from_zeroed_tensor));
    assert_int_equal(f->written_back.strides[0], 1);
    strata_tensor y = vec(f->y, 0, 16, 1);
    assert_all(&y, value_of(0));
    destroy(f);
}

static int orch_alloc_chain(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor t, y = vec(f->y, 0, 64, 1);
    int64_t shape[2] = {8, 8};
    int rc = strata_orch_alloc(o, 2, shape, STRATA_I32, &t);
    f->submit_rc[f->nsubmits++] = rc;
    if (rc != STRATA_OK)
        return rc;
    submit(o, f, f->fill, 0, 0, &t, STRATA_OUT, NULL, 0);
    submit(o, f, f->add1, 1, 0, &t, STRATA_INOUT, NULL, 0);
    submit(o, f, f->add1, 2, 0, &t, STRATA_INOUT, NULL, 0);
    submit(o, f, f->copy, 3, 0, &t, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void orch_alloc_intermediate_flows_through_a_chain(void **state) {
    (void)state;
    fx *f = make(4, 2);
    finish_run(f, submit_run(f, orch_alloc_chain));
    for (uint64_t i = 1; i <= 3; i++)
        assert_after(f, i, i - 1);
    strata_tensor y = vec(f->y, 0, 64, 1);
    assert_all(&y, value_of(0) + 2);
    destroy(f);
}

/* ==== groups ============================================================================ */

static int orch_group_then_reader(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_task_args m[2];
    strata_tensor halves[2] = {vec(f->x, 0, 32, 1), vec(f->x, 32, 32, 1)};
    for (int i = 0; i < 2; i++) {
        strata_args_init(&m[i]);
        strata_args_add_scalar(&m[i], (uint64_t)i);
        strata_args_add_scalar(&m[i], F_HOLD);
        strata_args_add_tensor(&m[i], &halves[i], STRATA_OUT);
    }
    f->submit_rc[f->nsubmits++] = strata_orch_submit_sub_group(o, f->fill, m, 2);
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    submit(o, f, f->copy, 2, 0, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    return STRATA_OK;
}

static void reader_waits_for_every_member_of_a_writing_group(void **state) {
    (void)state;
    fx *f = make(3, 2);
    strata_run *h = submit_run(f, orch_group_then_reader);
    wait_started(f, 0);
    wait_started(f, 1);
    assert_int_equal(task_state(f, 1), ST_PENDING); /* refs: [0] group, [1] reader */
    assert_true(has_edge(f, 1, 0));
    finish_run(f, h);
    assert_after(f, 2, 0);
    assert_after(f, 2, 1);
    strata_tensor lo = vec(f->y, 0, 32, 1), hi = vec(f->y, 32, 32, 1);
    assert_all(&lo, value_of(0));
    assert_all(&hi, value_of(1));
    destroy(f);
}

/* ==== identity ============================================================================ */

typedef struct alias_ctx {
    fx *f;
    strata_buffer *other; /* a second identity on the memory of f->x */
} alias_ctx;

static int orch_two_identities(strata_orch *o, void *arg) {
    alias_ctx *c = arg;
    fx *f = c->f;
    strata_tensor a = vec(f->x, 0, 64, 1), b = vec(c->other, 0, 64, 1);
    submit(o, f, f->mark, 0, F_MEET, &a, STRATA_OUT, NULL, 0);
    submit(o, f, f->mark, 1, F_MEET, &b, STRATA_OUT, NULL, 0);
    return STRATA_OK;
}

static void aliasing_is_decided_by_buffer_identity_not_address(void **state) {
    (void)state;
    fx *f = make(2, 2);
    alias_ctx c = {.f = f};
    assert_ok(strata_buffer_wrap(f->w, strata_buffer_data(f->x), ELEMS * 4, &c.other));
    strata_run *h;
    assert_ok(strata_worker_submit(f->w, orch_two_identities, &c, &h));
    finish_run(f, h);
    assert_int_equal(atomic_load(&f->met), 2);
    strata_buffer_destroy(c.other);
    destroy(f);
}

/* ==== runs never share the dependency map ==================================================== */

static int orch_run1_writer(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1);
    submit(o, f, f->fill, 0, F_HOLD, &x, STRATA_OUT, NULL, 0);
    return STRATA_OK;
}

static int orch_run2_reader_writer(strata_orch *o, void *arg) {
    fx *f = arg;
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    submit(o, f, f->copy, 1, 0, &x, STRATA_IN, &y, STRATA_OUT_EXISTING);
    submit(o, f, f->add1, 2, 0, &x, STRATA_INOUT, NULL, 0);
    return STRATA_OK;
}

static void a_later_run_starts_with_an_empty_dependency_map(void **state) {
    (void)state;
    fx *f = make(2, 2);
    strata_run *h1 = submit_run(f, orch_run1_writer);
    wait_started(f, 0); /* run 1's writer of x is running, held */
    strata_run *h2 = submit_run(f, orch_run2_reader_writer);
    /* Run 2 is staged behind run 1. Its reader of x has no edge to run 1's
     * writer: it is READY (not dispatched, since only the head executes). */
    assert_int_equal(task_state(f, 1), ST_READY);
    assert_int_equal(producer_count(f, 1), 0);
    /* Its writer follows its own run's reader only. */
    assert_int_equal(task_state(f, 2), ST_PENDING);
    assert_true(has_edge(f, 2, 1));
    assert_false(has_edge(f, 2, 0));
    assert_int_equal(producer_count(f, 2), 1);
    assert_int_equal(atomic_load(&f->spans[1].start), 0); /* run 2 waits for the head */
    finish_run(f, h1);
    assert_ok(strata_run_wait(h2, STRATA_WAIT_FOREVER));
    strata_run_release(h2);
    /* run 2 executed after run 1, so it read what run 1 wrote */
    assert_after(f, 1, 0);
    assert_after(f, 2, 1);
    strata_tensor x = vec(f->x, 0, 64, 1), y = vec(f->y, 0, 64, 1);
    assert_all(&y, value_of(0));
    assert_all(&x, value_of(0) + 1);
    destroy(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reader_starts_after_writer_finished),
        cmocka_unit_test(second_writer_waits_for_first),
        cmocka_unit_test(writer_after_reader_waits_for_the_reader),
        cmocka_unit_test(writer_waits_for_every_reader_since_the_last_write),
        cmocka_unit_test(readers_of_one_tensor_run_concurrently),
        cmocka_unit_test(inout_chain_runs_in_submit_order),
        cmocka_unit_test(partially_overlapping_read_waits_for_writer),
        cmocka_unit_test(partially_overlapping_write_waits_for_reader),
        cmocka_unit_test(overlapping_tiles_of_a_matrix_are_ordered),
        cmocka_unit_test(strided_views_sharing_elements_are_ordered),
        cmocka_unit_test(writers_of_disjoint_ranges_run_concurrently),
        cmocka_unit_test(writers_of_interleaved_strided_views_run_concurrently),
        cmocka_unit_test(writer_and_reader_of_disjoint_tiles_run_concurrently),
        cmocka_unit_test(no_dep_tensor_creates_no_edges),
        cmocka_unit_test(later_writer_ignores_a_no_dep_user),
        cmocka_unit_test(out_without_memory_gets_runtime_memory_and_feeds_a_reader),
        cmocka_unit_test(out_without_memory_from_a_zeroed_tensor_with_dtype_rank_shape),
        cmocka_unit_test(orch_alloc_intermediate_flows_through_a_chain),
        cmocka_unit_test(reader_waits_for_every_member_of_a_writing_group),
        cmocka_unit_test(aliasing_is_decided_by_buffer_identity_not_address),
        cmocka_unit_test(a_later_run_starts_with_an_empty_dependency_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
