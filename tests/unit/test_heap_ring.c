/* tests/unit/test_heap_ring.c - heap rings: bump allocation, wrap-around,
 * FIFO reclaim, capacity errors, independence of the rings, the shared
 * mapping seen by a forked child, the owner an allocation's record knows and
 * the buffer identities of runtime memory that name an allocation.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

#include "core/heap_ring.h"

#define K 1024u

static char *ring_base(const st_heap *h, int r) {
    return h->rings[r].base;
}

static void test_init_errors(void **state) {
    (void)state;
    st_heap h;
    assert_status(STRATA_EINVAL, st_heap_init(&h, 1000));
    assert_ok(st_heap_init(&h, 0)); /* disabled */
    assert_int_equal(st_heap_ring_bytes(&h), 0);
    void *p;
    uint64_t t;
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 0, 64, &p, &t));
    assert_non_null(strstr(strata_error_message(), "heap_ring_bytes"));
    st_heap_release(&h, 0);
    st_heap_destroy(&h);
}

static void test_alloc_release_order(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 16 * K));
    assert_int_equal(st_heap_ring_bytes(&h), 16 * K);
    void *p[4];
    uint64_t t[4];
    for (int i = 0; i < 4; i++) {
        assert_ok(st_heap_try_alloc(&h, 0, 1000, &p[i], &t[i]));
        assert_ptr_equal(p[i], ring_base(&h, 0) + i * K);
        assert_int_equal((uintptr_t)p[i] % ST_HEAP_ALIGN, 0);
        assert_true(t[i] != 0);
    }
    assert_int_equal(st_heap_used(&h, 0), 4 * K);
    for (int i = 0; i < 4; i++) {
        st_heap_release(&h, t[i]);
        assert_int_equal(st_heap_used(&h, 0), (3 - (uint64_t)i) * K);
    }
    /* an empty ring starts over at its base; 0 bytes still takes one unit */
    void *q;
    uint64_t tq;
    assert_ok(st_heap_try_alloc(&h, 0, 0, &q, &tq));
    assert_ptr_equal(q, ring_base(&h, 0));
    assert_int_equal(st_heap_used(&h, 0), K);
    assert_ok(st_heap_try_alloc(&h, 0, K + 1, &q, &tq));
    assert_int_equal(st_heap_used(&h, 0), 3 * K);
    st_heap_destroy(&h);
}

static void test_fifo_reclaim(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 8 * K));
    void *a, *b, *c;
    uint64_t ta, tb, tc;
    assert_ok(st_heap_try_alloc(&h, 1, 2 * K, &a, &ta));
    assert_ok(st_heap_try_alloc(&h, 1, 2 * K, &b, &tb));
    assert_ok(st_heap_try_alloc(&h, 1, 2 * K, &c, &tc));
    st_heap_release(&h, tb); /* younger: frees nothing yet */
    assert_int_equal(st_heap_used(&h, 1), 6 * K);
    st_heap_release(&h, tc);
    assert_int_equal(st_heap_used(&h, 1), 6 * K);
    void *x;
    uint64_t tx;
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 1, 3 * K, &x, &tx));
    st_heap_release(&h, ta); /* now all three come back */
    assert_int_equal(st_heap_used(&h, 1), 0);
    assert_ok(st_heap_try_alloc(&h, 1, 8 * K, &x, &tx));
    st_heap_destroy(&h);
}

static void test_wrap_around(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 8 * K));
    char *base = ring_base(&h, 2);
    void *a, *b, *c, *d;
    uint64_t ta, tb, tc, td;
    assert_ok(st_heap_try_alloc(&h, 2, 3 * K, &a, &ta));
    assert_ok(st_heap_try_alloc(&h, 2, 3 * K, &b, &tb));
    assert_ptr_equal(b, base + 3 * K);
    assert_status(STRATA_ECAPACITY,
                  st_heap_try_alloc(&h, 2, 3 * K, &c, &tc)); /* 2K at the end, 0 before */
    st_heap_release(&h, ta);
    assert_int_equal(st_heap_used(&h, 2), 3 * K);
    assert_ok(st_heap_try_alloc(&h, 2, 3 * K, &c, &tc)); /* does not fit at the end: wraps */
    assert_ptr_equal(c, base);
    assert_int_equal(st_heap_used(&h, 2), 8 * K); /* the skipped 2K at the end counts */
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 2, 1, &d, &td)); /* exactly full */
    st_heap_release(&h, tb); /* frontier passes the wrap point */
    assert_int_equal(st_heap_used(&h, 2), 3 * K);
    assert_ok(st_heap_try_alloc(&h, 2, 5 * K, &d, &td));
    assert_ptr_equal(d, base + 3 * K);
    assert_int_equal(st_heap_used(&h, 2), 8 * K);
    st_heap_release(&h, td); /* younger than c: nothing */
    assert_int_equal(st_heap_used(&h, 2), 8 * K);
    st_heap_release(&h, tc);
    assert_int_equal(st_heap_used(&h, 2), 0);
    /* wrap with room left exactly up to the tail */
    assert_ok(st_heap_try_alloc(&h, 2, 4 * K, &a, &ta));
    assert_ok(st_heap_try_alloc(&h, 2, 3 * K, &b, &tb));
    st_heap_release(&h, ta);                             /* tail 4K, top 7K */
    assert_ok(st_heap_try_alloc(&h, 2, 4 * K, &c, &tc)); /* 1K at the end is too small: [0,4K) */
    assert_ptr_equal(c, base);
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 2, 1, &d, &td));
    st_heap_destroy(&h);
}

static void test_exactly_full_and_too_large(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 4 * K));
    void *p, *q;
    uint64_t tp, tq;
    assert_ok(st_heap_try_alloc(&h, 3, 4 * K, &p, &tp));
    assert_int_equal(st_heap_used(&h, 3), 4 * K);
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 3, 1, &q, &tq));
    st_heap_release(&h, tp);
    assert_int_equal(st_heap_used(&h, 3), 0);
    for (int i = 0; i < 4; i++)
        assert_ok(st_heap_try_alloc(&h, 3, K, &p, &tp));
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 3, 1, &q, &tq));
    assert_status(STRATA_EINVAL, st_heap_try_alloc(&h, 3, 4 * K + 1, &q, &tq));
    assert_non_null(
        strstr(strata_error_message(), "request 4097 bytes exceeds heap_ring_bytes (now 4096)"));
    assert_status(STRATA_EINVAL, st_heap_try_alloc(&h, 3, UINT64_MAX, &q, &tq));
    assert_status(STRATA_EINVAL, st_heap_try_alloc(&h, 4, 1, &q, &tq));
    assert_status(STRATA_EINVAL, st_heap_try_alloc(&h, -1, 1, &q, &tq));
    st_heap_destroy(&h);
}

static void test_rings_independent(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 4 * K));
    void *p[ST_HEAP_RINGS];
    uint64_t t[ST_HEAP_RINGS];
    for (int r = 0; r < ST_HEAP_RINGS; r++) {
        assert_ok(st_heap_try_alloc(&h, r, 4 * K, &p[r], &t[r]));
        assert_ptr_equal(p[r], h.base + (uint64_t)r * 4 * K);
        memset(p[r], 'a' + r, 4 * K);
    }
    for (int r = 0; r < ST_HEAP_RINGS; r++) {
        void *q;
        uint64_t tq;
        assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, r, 1, &q, &tq));
        assert_int_equal(((char *)p[r])[0], 'a' + r);
        assert_int_equal(((char *)p[r])[4 * K - 1], 'a' + r);
    }
    st_heap_release(&h, t[2]);
    for (int r = 0; r < ST_HEAP_RINGS; r++)
        assert_int_equal(st_heap_used(&h, r), r == 2 ? 0 : 4 * K);
    st_heap_destroy(&h);
}

static void test_shared_with_fork(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 64 * K));
    void *p;
    uint64_t t;
    assert_ok(st_heap_try_alloc(&h, 1, 3000, &p, &t));
    memset(p, 0, 3000);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        memcpy(p, "hello from the child", 21);
        ((char *)p)[2999] = 'z';
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal((char *)p, "hello from the child");
    assert_int_equal(((char *)p)[2999], 'z');
    st_heap_release(&h, t);
    st_heap_destroy(&h);
}

static void test_fifo_growth(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 2048 * K));
    static uint64_t t[2048];
    void *p;
    for (int i = 0; i < 2048; i++) {
        assert_ok(st_heap_try_alloc(&h, 0, K, &p, &t[i]));
        assert_ptr_equal(p, ring_base(&h, 0) + (uint64_t)i * K);
    }
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 0, 1, &p, &t[0]));
    for (int i = 2047; i >= 1; i--) { /* youngest first: nothing comes back */
        st_heap_release(&h, t[i]);
        assert_int_equal(st_heap_used(&h, 0), 2048 * K);
    }
    st_heap_release(&h, t[0]);
    assert_int_equal(st_heap_used(&h, 0), 0);
    st_heap_destroy(&h);
}

/* Random allocations and out-of-order releases: live allocations never
 * overlap, their contents survive, and an empty ring always takes a full-size
 * request. */
static void test_random_stress(void **state) {
    (void)state;
    enum { RING = 64 * K, MAXLIVE = 128 };
    st_heap h;
    assert_ok(st_heap_init(&h, RING));
    struct live {
        unsigned char *p;
        uint64_t n, ticket;
        unsigned char fill;
    } live[MAXLIVE];
    int nlive = 0;
    uint64_t st = 5;
    long ok = 0, full = 0;
    for (int it = 0; it < 200000; it++) {
        int r = (int)(ts_rand(&st) % ST_HEAP_RINGS);
        if (r != 0 && r != 3)
            r = 0; /* mostly ring 0, some ring 3 */
        if (nlive < MAXLIVE && ts_rand(&st) % 100 < 55) {
            uint64_t n = 1 + ts_rand(&st) % (ts_rand(&st) % 8 == 0 ? RING : 6 * K);
            void *p;
            uint64_t t;
            int rc = st_heap_try_alloc(&h, r, n, &p, &t);
            if (rc == STRATA_ECAPACITY) {
                full++;
                assert_true(st_heap_used(&h, r) > 0);
                continue;
            }
            assert_ok(rc);
            ok++;
            unsigned char *c = p;
            assert_true(c >= (unsigned char *)ring_base(&h, r) &&
                        c + n <= (unsigned char *)ring_base(&h, r) + RING);
            assert_int_equal((uintptr_t)c % ST_HEAP_ALIGN, 0);
            for (int i = 0; i < nlive; i++) /* no overlap with anything live */
                assert_true(c + n <= live[i].p || live[i].p + live[i].n <= c);
            live[nlive].p = c;
            live[nlive].n = n;
            live[nlive].ticket = t;
            live[nlive].fill = (unsigned char)(ts_rand(&st) | 1);
            memset(c, live[nlive].fill, n);
            nlive++;
        } else if (nlive > 0) {
            int i = (int)(ts_rand(&st) % (uint64_t)nlive);
            for (uint64_t j = 0; j < live[i].n; j += 97)
                assert_int_equal(live[i].p[j], live[i].fill);
            assert_int_equal(live[i].p[live[i].n - 1], live[i].fill);
            st_heap_release(&h, live[i].ticket);
            live[i] = live[--nlive];
        }
        if (nlive == 0) {
            for (int q = 0; q < ST_HEAP_RINGS; q++)
                assert_int_equal(st_heap_used(&h, q), 0);
        }
        for (int q = 0; q < ST_HEAP_RINGS; q++)
            assert_true(st_heap_used(&h, q) <= RING);
    }
    while (nlive > 0)
        st_heap_release(&h, live[--nlive].ticket);
    for (int q = 0; q < ST_HEAP_RINGS; q++) {
        assert_int_equal(st_heap_used(&h, q), 0);
        void *p;
        uint64_t t;
        assert_ok(st_heap_try_alloc(&h, q, RING, &p, &t));
    }
    print_message("%ld allocations, %ld full\n", ok, full);
    assert_true(ok > 50000 && full > 100);
    st_heap_destroy(&h);
}

/* The submit path asks an allocation's record who owns runtime memory: it must
 * answer only while the allocation is live, even when a younger release does
 * not yet move the frontier. */
static void test_owner_known_only_while_live(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 8 * K));
    void *p;
    uint64_t ta, tb;
    assert_ok(st_heap_try_alloc(&h, 2, K, &p, &ta));
    assert_ok(st_heap_try_alloc(&h, 2, K, &p, &tb));
    assert_int_equal(st_heap_owner(&h, ta), 0); /* no owner set yet */
    st_heap_set_owner(&h, ta, 0x100000007ull);
    st_heap_set_owner(&h, tb, 0x200000009ull);
    assert_int_equal(st_heap_owner(&h, ta), 0x100000007ull);
    assert_int_equal(st_heap_owner(&h, tb), 0x200000009ull);
    st_heap_release(&h, tb); /* younger: its space stays, its owner goes */
    assert_int_equal(st_heap_used(&h, 2), 2 * K);
    assert_int_equal(st_heap_owner(&h, tb), 0);
    assert_int_equal(st_heap_owner(&h, ta), 0x100000007ull);
    st_heap_release(&h, ta);
    assert_int_equal(st_heap_owner(&h, ta), 0);
    /* tickets never handed out: 0, the next one, one of another ring */
    assert_int_equal(st_heap_owner(&h, 0), 0);
    assert_int_equal(st_heap_owner(&h, tb + 4), 0);
    assert_int_equal(st_heap_owner(&h, (ta & ~3ull) | 1), 0);
    st_heap_set_owner(&h, tb + 4, 5); /* not live: ignored */
    assert_ok(st_heap_try_alloc(&h, 2, K, &p, &ta));
    assert_int_equal(st_heap_owner(&h, ta), 0);
    /* a record reused from the circular queue forgets its last owner */
    for (uint64_t i = 0; i < h.rings[0].fifo_cap; i++) {
        assert_ok(st_heap_try_alloc(&h, 0, K, &p, &ta));
        st_heap_set_owner(&h, ta, 1000 + i);
        st_heap_release(&h, ta);
    }
    assert_ok(st_heap_try_alloc(&h, 0, K, &p, &ta));
    assert_int_equal(st_heap_owner(&h, ta), 0);
    st_heap_destroy(&h);
    assert_ok(st_heap_init(&h, 0)); /* disabled heaps own nothing */
    assert_int_equal(st_heap_owner(&h, ta), 0);
    st_heap_destroy(&h);
}

/* A runtime piece's identity carries its allocation's ticket and its index:
 * distinct per piece, never a user buffer's id, and the ticket comes back
 * whole for the largest ticket a ring hands out. */
static void test_runtime_ids_name_their_allocation(void **state) {
    (void)state;
    st_heap h;
    assert_ok(st_heap_init(&h, 4 * K));
    st_heap_ring *g = &h.rings[3];
    g->head_seq = g->next_seq = ST_HEAP_MAX_SEQ - 1; /* as if after 2^49 allocations */
    void *p;
    uint64_t last;
    assert_ok(st_heap_try_alloc(&h, 3, K, &p, &last));
    uint32_t top_piece = (1u << ST_RUNTIME_PIECE_BITS) - 1;
    uint64_t ids[] = {st_runtime_id(last, 0), st_runtime_id(last, top_piece), st_runtime_id(4, 0),
                      st_runtime_id(4, 1)};
    for (unsigned i = 0; i < 4; i++) {
        assert_true(st_is_runtime_id(ids[i]));
        for (unsigned j = 0; j < i; j++)
            assert_true(ids[i] != ids[j]);
    }
    assert_int_equal(st_runtime_ticket(ids[0]), last);
    assert_int_equal(st_runtime_ticket(ids[1]), last);
    assert_int_equal(st_runtime_ticket(ids[3]), 4);
    st_heap_set_owner(&h, last, 77);
    assert_int_equal(st_heap_owner(&h, st_runtime_ticket(ids[1])), 77);
    /* user buffers count up from 1 */
    assert_false(st_is_runtime_id(1));
    assert_false(st_is_runtime_id(UINT64_MAX >> 1));
    /* one more allocation would not fit an identity: refused, not wrapped */
    assert_status(STRATA_ECAPACITY, st_heap_try_alloc(&h, 3, K, &p, &last));
    assert_non_null(strstr(strata_error_message(), "no longer fit"));
    st_heap_destroy(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_alloc_release_order),
        cmocka_unit_test(test_fifo_reclaim),
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_exactly_full_and_too_large),
        cmocka_unit_test(test_rings_independent),
        cmocka_unit_test(test_shared_with_fork),
        cmocka_unit_test(test_fifo_growth),
        cmocka_unit_test(test_random_stress),
        cmocka_unit_test(test_owner_known_only_while_live),
        cmocka_unit_test(test_runtime_ids_name_their_allocation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
