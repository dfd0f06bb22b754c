/* tests/unit/test_arena.c - the shared arenas strata_buffer_create takes
 * memory from (core/arena.c).
 *
 * Small blocks aligned, zero-filled and reused from their size's free list
 * (zeroed again); larger extents coalesced and reused; an unsealed arena
 * growing by a region and giving a large buffer a mapping of its own; a
 * sealed arena failing with STRATA_ENOMEM naming shared_arena_bytes; fresh
 * memory faulted in ahead (a first run writes its tiles without a page fault
 * each); every worker reserving its arena at create (buffers made before
 * init come from it); a million 16-byte buffers created, used in a run and
 * destroyed; the arena outliving its worker while a buffer lives;
 * strata_buffer_create / _destroy refused in a process child (a process sub
 * function) of the worker (a child seeing arena memory at the same address is
 * test_process_endpoint.c's round trip).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "core/arena.h"
#include "core/engine.h"
#include "util/alloc.h"
#include "test_support.h"

static void *take(st_arena *a, size_t n) {
    size_t own = 1;
    void *p = st_arena_alloc(a, n, &own);
    assert_non_null(p);
    assert_int_equal(own, 0);
    assert_int_equal((uintptr_t)p % ST_ARENA_GRANULE, 0);
    for (size_t k = 0; k < n; k++)
        if (((uint8_t *)p)[k] != 0)
            fail_msg("byte %zu of a %zu-byte block is not zero", k, n);
    return p;
}

static void small_blocks_are_reused_from_their_size_zeroed_again(void **state) {
    (void)state;
    st_arena *a;
    assert_ok(st_arena_create(1 << 20, &a));
    uint8_t *p = take(a, 16), *q = take(a, 1000);
    assert_int_equal(st_arena_used(a), 64 + 1024); /* sizes rounded to a cache line */
    memset(p, 0xab, 16);
    memset(q, 0xcd, 1000);
    st_arena_free(a, p, 16);
    st_arena_free(a, q, 1000);
    assert_ptr_equal(take(a, 1000), q); /* its own size's list, not the 64-byte one */
    assert_ptr_equal(take(a, 50), p);   /* 50 rounds to the same 64 bytes */
    st_arena_free(a, p, 64);
    st_arena_free(a, q, 1000);
    assert_int_equal(st_arena_used(a), 0);
    st_arena_put(a);
}

static void larger_extents_coalesce_and_are_reused(void **state) {
    (void)state;
    enum { K = 64 << 10 };
    st_arena *a;
    assert_ok(st_arena_create(4 * K, &a));
    st_arena_seal(a); /* no region added: the coalescing must make the room */
    uint8_t *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = take(a, K);
        memset(p[i], 0xab, K);
    }
    size_t own = 0;
    assert_fails(STRATA_ENOMEM, "shared_arena_bytes",
                 st_arena_alloc(a, K, &own) ? STRATA_OK : STRATA_ENOMEM);
    assert_message_mentions("process children");
    /* free 1 and 2 (not adjacent to the free tail), then 0: one extent of three */
    st_arena_free(a, p[1], K);
    st_arena_free(a, p[0], K);
    st_arena_free(a, p[2], K);
    uint8_t *big = take(a, 3 * K); /* fits only if all three coalesced; zeroed again */
    assert_ptr_equal(big, p[0]);
    st_arena_free(a, big, 3 * K);
    st_arena_free(a, p[3], K);
    assert_ptr_equal(take(a, 4 * K), p[0]); /* everything back in one extent */
    st_arena_put(a);
}

static void an_unsealed_arena_grows_and_maps_a_large_buffer_on_its_own(void **state) {
    (void)state;
    st_arena *a;
    assert_ok(st_arena_create(64 << 10, &a));
    for (int i = 0; i < 3; i++)
        take(a, 32 << 10); /* the third one needs a second region */
    assert_int_equal(a->nregions, 2);
    size_t own = 0;
    int64_t maps = st_alloc_live_maps();
    void *big = st_arena_alloc(a, ST_ARENA_OWN_MAP_MIN, &own);
    assert_non_null(big);
    assert_int_equal(own, ST_ARENA_OWN_MAP_MIN);
    assert_int_equal(st_alloc_live_maps(), maps + 1);
    st_unmap(big, own);
    st_arena_seal(a); /* as before a fork: now the regions there are all there is */
    void *in = st_arena_alloc(a, ST_ARENA_OWN_MAP_MIN, &own);
    assert_null(in);
    assert_message_mentions("shared_arena_bytes");
    assert_int_equal(a->nregions, 2);
    st_arena_put(a);
}

static long minor_faults(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

/* 2,000 tiles of 16 bytes span 32 pages: each used to be a page (and a
 * fault) of its own, and the arena now faults them in before they are used. */
static void fresh_small_buffers_are_faulted_in_ahead(void **state) {
    (void)state;
    enum { N = 2000 };
    st_arena *a;
    assert_ok(st_arena_create(64 << 20, &a));
    static uint8_t *tiles[N];
    for (int i = 0; i < N; i++) {
        size_t own = 0;
        assert_non_null(tiles[i] = st_arena_alloc(a, 16, &own));
    }
    long before = minor_faults();
    for (int i = 0; i < N; i++)
        tiles[i][15] = 1;
    long faults = minor_faults() - before;
    print_message("minor faults writing %d fresh tiles: %ld\n", N, faults);
#ifndef __SANITIZE_THREAD__ /* TSan's shadow of each first-written page faults on its own */
    assert_true(faults < 8);
#endif
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
    assert_ok(strata_worker_init(w)); /* process children: the arena is sealed */
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

static void every_worker_reserves_its_arena_at_create(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_non_null(w->arena);
    strata_buffer *b;
    assert_ok(strata_buffer_create(w, 16, &b)); /* before init: from the arena already */
    uint8_t *p = strata_buffer_data(b);
    const st_arena_region *r = &w->arena->regions[0];
    assert_true(p >= r->base && p < r->base + r->bytes);
    assert_ok(strata_worker_init(w));
    assert_int_equal(w->arena->sealed, 0); /* no process child: it may still grow */
    strata_buffer_destroy(b);
    strata_worker_destroy(w);
}

/* Under the sanitizers a tenth of the buffers: the full million runs in the plain build. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MANY_BUFFERS 100000
#else
#define MANY_BUFFERS 1000000
#endif
#define PER_TASK 16

/* Writes its index into each of its tiles, after checking they were zero. */
static int stamp_tiles(const strata_task_view *a, void *user) {
    (void)user;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        uint32_t *t = strata_args_data(a, i);
        if (t[0] != 0 || t[3] != 0) {
            strata_task_set_error("tile %u of the task was not zero", i);
            return 1;
        }
        t[0] = (uint32_t)strata_args_scalar(a, 0) + i;
        t[3] = 0xfeedu;
    }
    return 0;
}

typedef struct many_job {
    strata_callable fn;
    strata_buffer **b;
} many_job;

static int orch_many(strata_orch *o, void *arg) {
    many_job *j = arg;
    const int64_t shape[1] = {4};
    for (uint32_t first = 0; first < MANY_BUFFERS; first += PER_TASK) {
        strata_task_args a;
        strata_args_init(&a);
        for (uint32_t i = 0; i < PER_TASK; i++) {
            strata_tensor t;
            STRATA_TRY(strata_tensor_contiguous(j->b[first + i], STRATA_I32, 1, shape, &t));
            STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_OUT));
        }
        STRATA_TRY(strata_args_add_scalar(&a, first));
        STRATA_TRY(strata_orch_submit_sub(o, j->fn, &a));
    }
    return STRATA_OK;
}

static void a_million_tile_buffers_are_created_used_in_a_run_and_destroyed(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    many_job j = {.b = calloc(MANY_BUFFERS, sizeof *j.b)};
    assert_non_null(j.b);
    assert_ok(strata_worker_register_sub(w, "stamp", stamp_tiles, NULL, &j.fn));
    assert_ok(strata_worker_init(w));
    int64_t maps = st_alloc_live_maps();
    for (uint32_t i = 0; i < MANY_BUFFERS; i++)
        assert_ok(strata_buffer_create(w, 16, &j.b[i]));
    assert_true(st_alloc_live_maps() - maps < 4); /* no mapping per buffer */
    assert_int_equal(st_arena_used(w->arena), (uint64_t)MANY_BUFFERS * 64);
    assert_ok(strata_worker_run(w, orch_many, &j));
    for (uint32_t i = 0; i < MANY_BUFFERS; i++) {
        const uint32_t *t = strata_buffer_data(j.b[i]);
        if (t[0] != i || t[3] != 0xfeedu)
            fail_msg("buffer %u holds %u, %x", i, t[0], t[3]);
        strata_buffer_destroy(j.b[i]);
    }
    assert_int_equal(st_arena_used(w->arena), 0);
    free(j.b);
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
    /* ... and leaves it unsealed (every child is reaped): a buffer larger
     * than the whole arena still gets a mapping of its own */
    assert_int_equal(w->arena->sealed, 0);
    strata_buffer *big;
    assert_ok(strata_buffer_create(w, 3u << 20, &big));
    strata_buffer_destroy(big);
    assert_ok(strata_buffer_create(w, 4096, &j.b));
    void *at = strata_buffer_data(j.b);
    g_fail_setup = 0;
    assert_ok(strata_worker_init(w));
    assert_int_equal(w->arena->sealed, 1);
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
        cmocka_unit_test(small_blocks_are_reused_from_their_size_zeroed_again),
        cmocka_unit_test(larger_extents_coalesce_and_are_reused),
        cmocka_unit_test(an_unsealed_arena_grows_and_maps_a_large_buffer_on_its_own),
        cmocka_unit_test(fresh_small_buffers_are_faulted_in_ahead),
        cmocka_unit_test(a_full_arena_fails_buffer_create_naming_the_field),
        cmocka_unit_test(every_worker_reserves_its_arena_at_create),
        cmocka_unit_test(a_million_tile_buffers_are_created_used_in_a_run_and_destroyed),
        cmocka_unit_test(a_process_sub_cannot_make_or_free_the_parents_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
