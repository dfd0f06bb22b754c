/* tests/unit/test_arena.c - the shared arena strata_buffer_create takes
 * memory from once a worker has process children (core/arena.c).
 *
 * Granules and alignment, zero-filled memory (also when reused), freed
 * extents coalesced and reused, a full arena failing with STRATA_ENOMEM
 * naming shared_arena_bytes, the arena outliving its worker while a buffer
 * lives, no arena for a thread-hosted worker, strata_buffer_create / _destroy
 * refused in a process child (a process sub function) of the worker (a child seeing arena memory
 * at the same address is test_process_endpoint.c's round trip).
 */
#include <string.h>
#include <sys/wait.h>

#include "core/arena.h"
#include "core/engine.h"
#include "test_support.h"

static void allocations_are_aligned_zeroed_and_reused_after_coalescing(void **state) {
    (void)state;
    st_arena *a;
    assert_ok(st_arena_create(4096, &a));
    uint8_t *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = st_arena_alloc(a, 1000);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % ST_ARENA_GRANULE, 0);
        for (int k = 0; k < 1000; k++)
            assert_int_equal(p[i][k], 0);
        memset(p[i], 0xab, 1000);
    }
    assert_fails(STRATA_ENOMEM, "shared_arena_bytes",
                 st_arena_alloc(a, 64) ? STRATA_OK : STRATA_ENOMEM);
    /* free 1 and 2 (not adjacent to the free tail), then 0: one extent of three */
    st_arena_free(a, p[1], 1000);
    st_arena_free(a, p[0], 1000);
    st_arena_free(a, p[2], 1000);
    uint8_t *big = st_arena_alloc(a, 3 * 1024); /* fits only if all three coalesced */
    assert_ptr_equal(big, p[0]);
    for (int k = 0; k < 3 * 1024; k++)
        assert_int_equal(big[k], 0); /* handed out before: zeroed again */
    st_arena_free(a, big, 3 * 1024);
    st_arena_free(a, p[3], 1000);
    uint8_t *all = st_arena_alloc(a, 4096); /* everything back in one extent */
    assert_ptr_equal(all, p[0]);
    st_arena_free(a, all, 4096);
    st_arena_put(a);
}

static void a_full_arena_fails_buffer_create_naming_the_field(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    cfg.shared_arena_bytes = 64 << 10;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_ok(strata_worker_init(w));
    assert_non_null(w->arena);
    strata_buffer *b, *c;
    assert_ok(strata_buffer_create(w, 60 << 10, &b));
    assert_fails(STRATA_ENOMEM, "shared_arena_bytes", strata_buffer_create(w, 8 << 10, &c));
    assert_message_mentions("strata_buffer_create");
    strata_buffer_destroy(b);
    assert_ok(strata_buffer_create(w, 64 << 10, &c)); /* freed memory is reused */
    /* the buffer outlives the worker: the arena stays mapped until it goes */
    strata_worker_destroy(w);
    memset(strata_buffer_data(c), 1, 64 << 10);
    strata_buffer_destroy(c);
}

static void a_thread_hosted_worker_reserves_no_arena(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_ok(strata_worker_init(w));
    assert_null(w->arena);
    strata_worker_destroy(w);
}

static int g_fail_setup; /* read by the process child's setup: its value at the fork */

static int picky_setup(strata_worker *w, void *user) {
    (void)w;
    (void)user;
    return g_fail_setup ? st_fail(STRATA_EINVAL, "picky refuses to start") : STRATA_OK;
}

/* In a process sub: both calls on the parent's worker must be refused. */
static int touch_parents_buffers(const strata_task_view *a, void *user) {
    (void)user;
    strata_worker *w = (strata_worker *)(uintptr_t)strata_args_scalar(a, 0);
    strata_buffer *b = (strata_buffer *)(uintptr_t)strata_args_scalar(a, 1);
    strata_buffer *c = NULL;
    if (strata_buffer_create(w, 64, &c) != STRATA_ESTATE || c ||
        !strstr(strata_error_message(), "worker's own process")) {
        strata_task_set_error("create was not refused: %s", strata_error_message());
        return 1;
    }
    st_clear_error();
    strata_buffer_destroy(b);
    if (!strstr(strata_error_message(), "strata_buffer_destroy: called in a process child")) {
        strata_task_set_error("destroy was not refused: '%s'", strata_error_message());
        return 1;
    }
    return 0;
}

typedef struct touch_job {
    strata_callable fn;
    strata_worker *w;
    strata_buffer *b;
} touch_job;

static int orch_touch(strata_orch *o, void *arg) {
    touch_job *j = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)(uintptr_t)j->w));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)(uintptr_t)j->b));
    return strata_orch_submit_sub(o, j->fn, &a);
}

static void a_process_sub_cannot_make_or_free_the_parents_buffers(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    cfg.shared_arena_bytes = 64 << 10;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_child_config cc;
    strata_child_config_init(&cc);
    cc.host = STRATA_HOST_PROCESS;
    cc.setup = picky_setup;
    int id;
    assert_ok(strata_worker_add_child(w, &cc, &id));
    touch_job j = {.w = w};
    assert_ok(strata_worker_register_sub(w, "touch", touch_parents_buffers, NULL, &j.fn));
    /* A failed init keeps the arena: a buffer made now exists in the sub's
     * fork at the retry, so the sub holds a valid record of it. */
    g_fail_setup = 1;
    assert_fails(STRATA_EENDPOINT, "picky refuses to start", strata_worker_init(w));
    assert_non_null(w->arena);
    assert_ok(strata_buffer_create(w, 4096, &j.b));
    void *at = strata_buffer_data(j.b);
    g_fail_setup = 0;
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_run(w, orch_touch, &j)); /* both refused in the child */
    /* the parent's free list is intact: the extent comes back at the same place */
    strata_buffer_destroy(j.b);
    assert_ok(strata_buffer_create(w, 4096, &j.b));
    assert_ptr_equal(strata_buffer_data(j.b), at);
    strata_buffer_destroy(j.b);
    strata_worker_destroy(w);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocations_are_aligned_zeroed_and_reused_after_coalescing),
        cmocka_unit_test(a_full_arena_fails_buffer_create_naming_the_field),
        cmocka_unit_test(a_thread_hosted_worker_reserves_no_arena),
        cmocka_unit_test(a_process_sub_cannot_make_or_free_the_parents_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
