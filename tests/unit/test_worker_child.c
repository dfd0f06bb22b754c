/* tests/unit/test_worker_child.c - a child Worker's task arguments: typed
 * scalars and the payload a parent submits to a child Worker reach the
 * child's orchestration function (strata_orch_task_args) with their values
 * and types, hosted as a thread and as a process.
 *
 * Owns: the one-call next-level submit of I64, F64, U64, F32 scalars and a
 * payload (1 byte, an odd size, STRATA_MAX_PAYLOAD) read back with the typed
 * reads in the child; a misread in the child failing the parent's task with a
 * message naming the call, the position and both types; the child working on
 * after it.
 * Must never: assert inside an orchestration function (a mismatch in the
 * child is its run's failure, which the parent's run reports), or depend on
 * timing.
 * No concurrency label: the process case forks (it runs under ASan+UBSan).
 */
#include <string.h>
#include <sys/wait.h>

#include "test_support.h"

/* Values no default or zeroed field has, each with its high bits set. */
static const int64_t I64_V = INT64_MIN + 12345;
static const double F64_V = -2.5e300;
static const float F32_V = 3.1415927f;

/* Byte k of a payload of n bytes (n in it: a shorter payload is not a prefix). */
static uint8_t payload_byte(size_t k, size_t n) {
    return (uint8_t)(k * 37u + n * 11u + 1u);
}

/* The child's orchestration: scalars i64, f64, u64 (the payload's size), f32
 * and the payload, each checked; the first mismatch is the run's failure. */
static int read_back(strata_orch *o, void *user) {
    (void)user;
    const strata_task_view *ta = strata_orch_task_args(o);
    if (!ta)
        return st_fail(STRATA_ETASK, "read_back: no task arguments");
    if (ta->ntensors != 0 || ta->nscalars != 4)
        return st_fail(STRATA_ETASK, "read_back: %u tensors and %u scalars, expected 0 and 4",
                       ta->ntensors, ta->nscalars);
    int64_t i = strata_args_i64(ta, 0);
    double d = strata_args_f64(ta, 1);
    uint64_t n = strata_args_u64(ta, 2);
    float f = strata_args_f32(ta, 3);
    if (i != I64_V)
        return st_fail(STRATA_ETASK, "read_back: i64 %lld, expected %lld", (long long)i,
                       (long long)I64_V);
    if (d != F64_V)
        return st_fail(STRATA_ETASK, "read_back: f64 %g, expected %g", d, F64_V);
    if (f != F32_V)
        return st_fail(STRATA_ETASK, "read_back: f32 %.9g, expected %.9g", (double)f,
                       (double)F32_V);
    size_t got = 0;
    const uint8_t *p = strata_args_payload(ta, &got);
    if (!p || got != n)
        return st_fail(STRATA_ETASK, "read_back: payload %s of %zu bytes, expected %llu bytes",
                       p ? "present" : "NULL", got, (unsigned long long)n);
    for (size_t k = 0; k < got; k++)
        if (p[k] != payload_byte(k, got))
            return st_fail(STRATA_ETASK, "read_back: payload byte %zu is %u, expected %u", k,
                           (unsigned)p[k], (unsigned)payload_byte(k, got));
    return STRATA_OK;
}

/* The child's orchestration reading the i64 scalar 0 as an f64. */
static int misread(strata_orch *o, void *user) {
    (void)user;
    (void)strata_args_f64(strata_orch_task_args(o), 0);
    return STRATA_OK; /* the failed read fails the run all the same */
}

typedef struct fixture {
    strata_worker *w;
    int child;
    strata_callable read_back, misread, use;
    size_t nbytes; /* the payload's size in the next run */
} fixture;

static int parent_program(strata_orch *o, void *arg) {
    fixture *f = arg;
    uint8_t payload[STRATA_MAX_PAYLOAD];
    for (size_t k = 0; k < f->nbytes; k++)
        payload[k] = payload_byte(k, f->nbytes);
    return strata_orch_next_level(o, f->use, NULL, f->child, STRATA_I64(I64_V), STRATA_F64(F64_V),
                                  STRATA_U64(f->nbytes), STRATA_F32(F32_V),
                                  STRATA_BYTES(payload, f->nbytes));
}

static void open_parent(fixture *f, strata_host_mode host) {
    memset(f, 0, sizeof *f);
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.level = 4;
    assert_ok(strata_worker_create(&wc, &f->w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.worker.level = 3;
    cc.host = host;
    assert_ok(strata_worker_add_child(f->w, &cc, &f->child));
    assert_ok(strata_worker_register_orch(f->w, "read_back", read_back, NULL, &f->read_back));
    assert_ok(strata_worker_register_orch(f->w, "misread", misread, NULL, &f->misread));
    assert_ok(strata_worker_init(f->w));
}

static void close_parent(fixture *f) {
    assert_ok(strata_worker_close(f->w));
    strata_worker_destroy(f->w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* a process child is reaped */
}

static void read_back_sizes(fixture *f) {
    static const size_t sizes[] = {1, 37, STRATA_MAX_PAYLOAD};
    f->use = f->read_back;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        f->nbytes = sizes[s];
        assert_ok(strata_worker_run(f->w, parent_program, f));
    }
}

static void typed_scalars_and_the_payload_reach_the_child(strata_host_mode host) {
    fixture f;
    open_parent(&f, host);
    read_back_sizes(&f);
    close_parent(&f);
}

/* The misread fails the parent's task with the child's message; the child
 * then runs the next task as before. */
static void a_misread_in_the_child_fails_the_parents_task(strata_host_mode host) {
    fixture f;
    open_parent(&f, host);
    f.use = f.misread;
    f.nbytes = 5;
    strata_run *h;
    assert_ok(strata_worker_submit(f.w, parent_program, &f, &h));
    assert_int_equal(strata_run_wait(h, STRATA_WAIT_FOREVER), STRATA_ETASK);
    const char *why = strata_run_error(h);
    ts_assert_mentions(why, "(L3 child 0): task 'misread' #1 failed: ");
    ts_assert_mentions(why, "strata_args_f64: scalar 0 is i64, not f64");
    strata_run_release(h);
    read_back_sizes(&f);
    close_parent(&f);
}

static void typed_scalars_and_the_payload_reach_a_thread_child(void **state) {
    (void)state;
    typed_scalars_and_the_payload_reach_the_child(STRATA_HOST_THREAD);
}

static void typed_scalars_and_the_payload_reach_a_process_child(void **state) {
    (void)state;
    typed_scalars_and_the_payload_reach_the_child(STRATA_HOST_PROCESS);
}

static void a_misread_in_a_thread_child_fails_the_parents_task(void **state) {
    (void)state;
    a_misread_in_the_child_fails_the_parents_task(STRATA_HOST_THREAD);
}

static void a_misread_in_a_process_child_fails_the_parents_task(void **state) {
    (void)state;
    a_misread_in_the_child_fails_the_parents_task(STRATA_HOST_PROCESS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(typed_scalars_and_the_payload_reach_a_thread_child),
        cmocka_unit_test(typed_scalars_and_the_payload_reach_a_process_child),
        cmocka_unit_test(a_misread_in_a_thread_child_fails_the_parents_task),
        cmocka_unit_test(a_misread_in_a_process_child_fails_the_parents_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
