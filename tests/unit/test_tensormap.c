/* tests/unit/test_tensormap.c - the dependency map: tag semantics, partial
 * and strided overlaps, coverage dropping, keys, reset, dead entries and
 * growth; tiled views of one buffer (the cells: lookups that walk only the
 * tiles they touch). A randomized run checks every dependency the byte-level
 * semantics require is implied (directly or transitively) by what the map
 * reports, and another that the map reports exactly the producers of a
 * brute-force list of every entry.
 */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "core/tensormap.h"
#include "util/alloc.h"

/* ---- helpers ---------------------------------------------------------------- */

#define MAXDEPS 32768

typedef struct deps {
    uint64_t ref[MAXDEPS];
    int n;
} deps;

static int collect(void *ctx, uint64_t ref) {
    deps *d = ctx;
    assert_true(d->n < MAXDEPS);
    assert_true(ref != 0);
    d->ref[d->n++] = ref;
    return 0;
}

static int has_dep(const deps *d, uint64_t ref) {
    for (int i = 0; i < d->n; i++)
        if (d->ref[i] == ref)
            return 1;
    return 0;
}

static strata_buffer_id bid(uint64_t id) {
    strata_buffer_id b = {id, 0, -1};
    return b;
}

static st_footprint whole(uint64_t n) {
    st_footprint f;
    st_footprint_whole(n, &f);
    return f;
}

/* A u8 view [lo, hi) of a buffer. */
static st_footprint range(uint64_t lo, uint64_t hi) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_U8;
    t.rank = 1;
    t.offset = lo;
    t.shape[0] = (int64_t)(hi - lo);
    t.strides[0] = 1;
    st_footprint f;
    st_footprint_of(&t, &f);
    return f;
}

/* Column c of a rows x cols f32 matrix. */
static st_footprint column(int64_t rows, int64_t cols, int64_t c) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_F32;
    t.rank = 2;
    t.offset = (uint64_t)c * 4;
    t.shape[0] = rows;
    t.shape[1] = 1;
    t.strides[0] = cols;
    t.strides[1] = 1;
    st_footprint f;
    st_footprint_of(&t, &f);
    return f;
}

/* What the engine does for one tagged argument: look up, then record. */
static void submit(st_tensormap *m, const strata_buffer_id *k, const st_footprint *fp,
                   strata_tag tag, uint64_t ref, deps *d) {
    d->n = 0;
    if (tag == STRATA_NO_DEP)
        return;
    if (tag == STRATA_IN) {
        assert_int_equal(st_tmap_lookup(m, k, fp, 0, collect, d), 0);
        assert_ok(st_tmap_insert_reader(m, k, fp, ref, 0));
    } else {
        assert_int_equal(st_tmap_lookup(m, k, fp, 1, collect, d), 0);
        assert_ok(st_tmap_insert_writer(m, k, fp, ref, 0));
    }
}

static int setup(void **state) {
    st_tensormap *m = malloc(sizeof *m);
    assert_non_null(m);
    assert_ok(st_tmap_init(m));
    *state = m;
    return 0;
}

static int teardown(void **state) {
    st_tensormap *m = *state;
    st_tmap_destroy(m);
    free(m);
    return 0;
}

/* ---- tag semantics ---------------------------------------------------------- */

static void test_tag_pairs(void **state) {
    st_tensormap *m = *state;
    static deps d;
    const strata_tag tags[] = {STRATA_IN, STRATA_OUT, STRATA_INOUT, STRATA_OUT_EXISTING,
                               STRATA_NO_DEP};
    strata_buffer_id k = bid(7);
    st_footprint f = whole(64);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            st_tmap_reset(m);
            submit(m, &k, &f, tags[i], 1, &d);
            assert_int_equal(d.n, 0);
            submit(m, &k, &f, tags[j], 2, &d);
            int want = tags[i] != STRATA_NO_DEP && tags[j] != STRATA_NO_DEP &&
                       !(tags[i] == STRATA_IN && tags[j] == STRATA_IN);
            if (want != (d.n == 1 && d.ref[0] == 1))
                fail_msg("tags %d then %d: %d deps", tags[i], tags[j], d.n);
            if (!want)
                assert_int_equal(d.n, 0);
        }
}

static void test_raw_war_waw_chain(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    st_footprint f = whole(100);
    submit(m, &k, &f, STRATA_OUT, 1, &d); /* W1 */
    submit(m, &k, &f, STRATA_IN, 2, &d);  /* R2: RAW on 1 */
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 1));
    submit(m, &k, &f, STRATA_IN, 3, &d); /* R3: RAW on 1 only, not on R2 */
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 1));
    submit(m, &k, &f, STRATA_INOUT, 4, &d); /* W4: WAW 1, WAR 2, 3 */
    assert_int_equal(d.n, 3);
    assert_true(has_dep(&d, 1) && has_dep(&d, 2) && has_dep(&d, 3));
    assert_int_equal(st_tmap_live_entries(m), 1); /* 1, 2, 3 were covered by 4 */
    submit(m, &k, &f, STRATA_IN, 5, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 4));
    submit(m, &k, &f, STRATA_OUT_EXISTING, 6, &d);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 4) && has_dep(&d, 5));
    /* the same reader twice with the same view is stored once */
    submit(m, &k, &f, STRATA_IN, 7, &d);
    size_t n = st_tmap_live_entries(m);
    assert_ok(st_tmap_insert_reader(m, &k, &f, 7, 0));
    assert_int_equal(st_tmap_live_entries(m), n);
    st_footprint half = range(0, 50);
    assert_ok(st_tmap_insert_reader(m, &k, &half, 7, 0));
    assert_int_equal(st_tmap_live_entries(m), n + 1);
}

static void test_partial_overlaps(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(2);
    st_footprint all = range(0, 100), lo = range(0, 50), mid = range(25, 75), hi = range(60, 100);
    submit(m, &k, &all, STRATA_OUT, 1, &d);
    submit(m, &k, &lo, STRATA_OUT, 2, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 1));
    assert_int_equal(st_tmap_live_entries(m), 2); /* 1 only partially covered: kept */
    submit(m, &k, &mid, STRATA_IN, 3, &d);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 1) && has_dep(&d, 2));
    submit(m, &k, &hi, STRATA_IN, 4, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 1));
    /* a writer of [50,60) meets writer 1 and reader 3, not 2 or 4 */
    st_footprint gap = range(50, 60);
    d.n = 0;
    assert_int_equal(st_tmap_lookup(m, &k, &gap, 1, collect, &d), 0);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 1) && has_dep(&d, 3));
    /* a whole-buffer writer meets all and then stands alone */
    submit(m, &k, &all, STRATA_OUT, 5, &d);
    assert_int_equal(d.n, 4);
    assert_int_equal(st_tmap_live_entries(m), 1);
}

static void test_strided_disjoint(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(3);
    for (int c = 0; c < 8; c++) {
        st_footprint col = column(16, 8, c);
        submit(m, &k, &col, STRATA_OUT, (uint64_t)c + 1, &d);
        assert_int_equal(d.n, 0); /* columns never meet */
    }
    assert_int_equal(st_tmap_live_entries(m), 8);
    st_footprint c3 = column(16, 8, 3);
    submit(m, &k, &c3, STRATA_IN, 100, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 4));
    st_footprint all = whole(16 * 8 * 4);
    submit(m, &k, &all, STRATA_IN, 101, &d);
    assert_int_equal(d.n, 8);
    submit(m, &k, &all, STRATA_OUT, 102, &d);
    assert_int_equal(d.n, 10);
    assert_int_equal(st_tmap_live_entries(m), 1);
}

static void test_keys_distinct(void **state) {
    st_tensormap *m = *state;
    static deps d;
    st_footprint f = whole(8);
    strata_buffer_id a = {5, 0, -1}, gen = {5, 1, -1}, own = {5, 0, 2}, other = {6, 0, -1};
    submit(m, &a, &f, STRATA_OUT, 1, &d);
    submit(m, &gen, &f, STRATA_OUT, 2, &d);
    assert_int_equal(d.n, 0);
    submit(m, &own, &f, STRATA_OUT, 3, &d);
    assert_int_equal(d.n, 0);
    submit(m, &other, &f, STRATA_OUT, 4, &d);
    assert_int_equal(d.n, 0);
    assert_int_equal(st_tmap_live_keys(m), 4);
    submit(m, &a, &f, STRATA_IN, 5, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 1));
    submit(m, &own, &f, STRATA_IN, 6, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 3));
}

static void test_reset_isolates_runs(void **state) {
    st_tensormap *m = *state;
    static deps d;
    st_footprint f = whole(8);
    for (uint64_t i = 1; i <= 3000; i++) {
        strata_buffer_id k = bid(i);
        submit(m, &k, &f, STRATA_OUT, i, &d);
    }
    uint32_t cap = m->cap, pool_cap = m->pool_cap;
    for (int run = 0; run < 50; run++) {
        st_tmap_reset(m);
        assert_int_equal(st_tmap_live_entries(m), 0);
        assert_int_equal(st_tmap_live_keys(m), 0);
        for (uint64_t i = 1; i <= 3000; i++) {
            strata_buffer_id k = bid(i);
            submit(m, &k, &f, STRATA_IN, 10000 + i, &d);
            assert_int_equal(d.n, 0); /* the previous run's writers are gone */
        }
        for (uint64_t i = 1; i <= 3000; i += 7) {
            strata_buffer_id k = bid(i);
            submit(m, &k, &f, STRATA_OUT, 20000 + i, &d);
            assert_int_equal(d.n, 1);
            assert_true(has_dep(&d, 10000 + i));
        }
    }
    /* steady state: nothing grew across runs */
    assert_int_equal(m->cap, cap);
    assert_int_equal(m->pool_cap, pool_cap);
}

static void test_epoch_wrap(void **state) {
    st_tensormap *m = *state;
    static deps d;
    st_footprint f = whole(8);
    m->epoch = UINT32_MAX - 1;
    for (int run = 0; run < 4; run++) {
        for (uint64_t i = 1; i <= 100; i++) {
            strata_buffer_id k = bid(i);
            submit(m, &k, &f, STRATA_IN, i, &d);
            assert_int_equal(d.n, 0);
            submit(m, &k, &f, STRATA_OUT, 1000 + i, &d);
            assert_int_equal(d.n, 1);
        }
        st_tmap_reset(m);
        assert_true(m->epoch != 0);
    }
}

static int abort_visit(void *ctx, uint64_t ref) {
    (*(int *)ctx)++;
    return ref == 2 ? 42 : 0;
}

static void test_visit_abort(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    st_footprint a = range(0, 10), b = range(10, 20), all = range(0, 20);
    submit(m, &k, &a, STRATA_OUT, 1, &d);
    submit(m, &k, &b, STRATA_OUT, 2, &d);
    int calls = 0;
    assert_int_equal(st_tmap_lookup(m, &k, &all, 1, abort_visit, &calls), 42);
    assert_true(calls >= 1 && calls <= 2);
    strata_buffer_id none = bid(99);
    assert_int_equal(st_tmap_lookup(m, &none, &all, 1, abort_visit, &calls), 0);
}

/* ---- dead entries -------------------------------------------------------------- */

typedef struct liveness {
    uint64_t min_alive; /* refs below this are gone */
    uint64_t dead_one;  /* and this one */
    long calls;
} liveness;

static int alive_fn(void *ctx, uint64_t ref) {
    liveness *l = ctx;
    l->calls++;
    return ref >= l->min_alive && ref != l->dead_one;
}

static void test_dead_entries_not_visited(void **state) {
    st_tensormap *m = *state;
    static deps d;
    liveness l = {0, 0, 0};
    st_tmap_set_alive_fn(m, alive_fn, &l);
    strata_buffer_id k = bid(1);
    st_footprint a = range(0, 10), b = range(10, 20), all = range(0, 20);
    submit(m, &k, &a, STRATA_OUT, 1, &d);
    submit(m, &k, &b, STRATA_OUT, 2, &d);
    submit(m, &k, &all, STRATA_IN, 3, &d);
    assert_int_equal(d.n, 2);
    assert_int_equal(st_tmap_live_entries(m), 3);
    l.dead_one = 1;
    submit(m, &k, &all, STRATA_IN, 4, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 2));
    assert_int_equal(st_tmap_live_entries(m), 3); /* 1 dropped, 4 added */
    l.dead_one = 3;
    d.n = 0;
    assert_int_equal(st_tmap_lookup(m, &k, &all, 1, collect, &d), 0);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 2) && has_dep(&d, 4));
    l.min_alive = 100;
    submit(m, &k, &a, STRATA_OUT, 100, &d);
    assert_int_equal(d.n, 0);
    assert_int_equal(st_tmap_live_entries(m), 1);
    st_tmap_set_alive_fn(m, NULL, NULL);
}

static void test_readers_do_not_slow_in_lookups(void **state) {
    st_tensormap *m = *state;
    static deps d;
    liveness l = {0, 0, 0};
    st_tmap_set_alive_fn(m, alive_fn, &l);
    strata_buffer_id k = bid(1);
    st_footprint f = whole(4096);
    submit(m, &k, &f, STRATA_OUT, 1, &d);
    for (uint64_t i = 2; i < 3002; i++)
        submit(m, &k, &f, STRATA_IN, i, &d);
    l.calls = 0;
    submit(m, &k, &f, STRATA_IN, 5000, &d);
    assert_int_equal(d.n, 1);
    assert_true(l.calls <= 4); /* the writer (and the newest reader), not 3000 readers */
    submit(m, &k, &f, STRATA_OUT, 6000, &d);
    assert_int_equal(d.n, 3002);
    assert_int_equal(st_tmap_live_entries(m), 1);
    st_tmap_set_alive_fn(m, NULL, NULL);
}

static void test_sweep_bounds_entries(void **state) {
    st_tensormap *m = *state;
    static deps d;
    liveness l = {0, 0, 0};
    st_tmap_set_alive_fn(m, alive_fn, &l);
    st_footprint f = whole(64);
    size_t peak = 0, peak_keys = 0;
    for (uint64_t i = 1; i <= 100000; i++) {
        strata_buffer_id k = bid(i); /* a new buffer every time */
        l.min_alive = i > 16 ? i - 16 : 0;
        submit(m, &k, &f, (i % 3) ? STRATA_OUT : STRATA_IN, i, &d);
        assert_int_equal(d.n, 0);
        size_t n = st_tmap_live_entries(m);
        peak = n > peak ? n : peak;
        peak_keys = st_tmap_live_keys(m) > peak_keys ? st_tmap_live_keys(m) : peak_keys;
    }
    print_message("peak entries %zu, peak keys %zu, slots %u, pool %u\n", peak, peak_keys, m->cap,
                  m->pool_cap);
    assert_true(peak <= 2048);
    assert_true(peak_keys <= 2048);
    assert_true(m->cap <= 8192);
    assert_true(m->pool_cap <= 4096);
    st_tmap_set_alive_fn(m, NULL, NULL);
}

static void test_growth_many_keys(void **state) {
    st_tensormap *m = *state;
    static deps d;
    const uint64_t n = 200000;
    for (uint64_t i = 1; i <= n; i++) {
        strata_buffer_id k = {i * 0x10001, (uint32_t)(i & 3), (int32_t)(i % 5) - 1};
        st_footprint f = whole(8 + (i & 7));
        assert_ok(st_tmap_insert_writer(m, &k, &f, i, 0));
    }
    assert_int_equal(st_tmap_live_keys(m), n);
    assert_int_equal(st_tmap_live_entries(m), n);
    st_footprint f = whole(16);
    for (uint64_t i = 1; i <= n; i++) {
        strata_buffer_id k = {i * 0x10001, (uint32_t)(i & 3), (int32_t)(i % 5) - 1};
        d.n = 0;
        assert_int_equal(st_tmap_lookup(m, &k, &f, 0, collect, &d), 0);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ref[0], i);
        k.generation += 4; /* not stored */
        d.n = 0;
        st_tmap_lookup(m, &k, &f, 0, collect, &d);
        assert_int_equal(d.n, 0);
    }
}

/* Keys come and go (sweeps delete them): deleted slots must not break probing. */
static void test_key_churn(void **state) {
    st_tensormap *m = *state;
    static deps d;
    liveness l = {0, 0, 0};
    st_tmap_set_alive_fn(m, alive_fn, &l);
    st_footprint f = whole(8);
    uint64_t ref = 1;
    for (int round = 0; round < 200; round++) {
        /* 500 long-lived keys rewritten each round, plus 500 throwaway keys */
        for (uint64_t i = 0; i < 500; i++) {
            strata_buffer_id k = bid(1 + i);
            uint64_t before = ref;
            submit(m, &k, &f, STRATA_OUT, ref++, &d);
            if (round > 0) {
                assert_int_equal(d.n, 1);
                assert_true(d.ref[0] == before - 1000);
            }
            strata_buffer_id t = bid(1000000 + (uint64_t)round * 1000 + i);
            submit(m, &t, &f, STRATA_OUT, ref++, &d);
            assert_int_equal(d.n, 0);
        }
        /* everything but the long-lived keys' newest writers dies */
        l.min_alive = ref - 1000;
        l.dead_one = 0;
    }
    assert_true(m->cap <= 8192);
    st_tmap_set_alive_fn(m, NULL, NULL);
}

/* Whole-buffer views on many keys with tasks dying at random: the map must
 * answer exactly like a model (last live writer + live readers since), while
 * sweeps delete keys and move key records around. */
#define MW_KEYS 3000
#define MW_OPS 300000
#define MW_MAXR 64

typedef struct mw_liveness {
    uint64_t min_alive;
    uint8_t *dead; /* per ref */
} mw_liveness;

static int mw_alive(void *ctx, uint64_t ref) {
    mw_liveness *l = ctx;
    return ref >= l->min_alive && !l->dead[ref];
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_model_whole_buffers(void **state) {
    st_tensormap *m = *state;
    static deps d;
    static uint64_t writer[MW_KEYS], readers[MW_KEYS][MW_MAXR];
    static int nreaders[MW_KEYS];
    memset(writer, 0, sizeof writer);
    memset(nreaders, 0, sizeof nreaders);
    mw_liveness l = {1, calloc(MW_OPS + 2, 1)};
    assert_non_null(l.dead);
    st_tmap_set_alive_fn(m, mw_alive, &l);
    st_footprint f = whole(256);
    uint64_t st = 4242;
    size_t peak_keys = 0;
    for (uint64_t ref = 1; ref <= MW_OPS; ref++) {
        /* hot keys live long, the rest churn */
        int key = ts_rand(&st) % 4 == 0 ? (int)(ts_rand(&st) % 50) : (int)(ts_rand(&st) % MW_KEYS);
        strata_buffer_id k = {(uint64_t)key * 7919 + 1, (uint32_t)(key & 1),
                              key % 3 == 0 ? -1 : key % 3};
        int is_write = nreaders[key] == MW_MAXR || ts_rand(&st) % 3 == 0;
        uint64_t want[MW_MAXR + 1];
        int nwant = 0;
        if (writer[key] && mw_alive(&l, writer[key]))
            want[nwant++] = writer[key];
        if (is_write)
            for (int i = 0; i < nreaders[key]; i++)
                if (mw_alive(&l, readers[key][i]))
                    want[nwant++] = readers[key][i];
        submit(m, &k, &f, is_write ? STRATA_OUT : STRATA_IN, ref, &d);
        if (d.n != nwant)
            fail_msg("op %llu key %d: %d deps, model %d", (unsigned long long)ref, key, d.n, nwant);
        qsort(d.ref, (size_t)d.n, sizeof d.ref[0], cmp_u64);
        qsort(want, (size_t)nwant, sizeof want[0], cmp_u64);
        for (int i = 0; i < nwant; i++)
            assert_int_equal(d.ref[i], want[i]);
        if (is_write) {
            writer[key] = ref;
            nreaders[key] = 0;
        } else {
            readers[key][nreaders[key]++] = ref;
        }
        /* deaths: a random older task now and then, and a moving horizon */
        if (ts_rand(&st) % 2 == 0)
            l.dead[1 + ts_rand(&st) % ref] = 1;
        if (ref % 1000 == 0 && ref > 4000) { /* deaths are final: the horizon only moves up */
            uint64_t h = ref - 2000 - ts_rand(&st) % 2000;
            l.min_alive = h > l.min_alive ? h : l.min_alive;
        }
        size_t nk = st_tmap_live_keys(m);
        peak_keys = nk > peak_keys ? nk : peak_keys;
    }
    print_message("model: peak keys %zu, entries now %zu\n", peak_keys, st_tmap_live_entries(m));
    st_tmap_set_alive_fn(m, NULL, NULL);
    free(l.dead);
}

/* ---- randomized semantics check --------------------------------------------- */

#define RT_TASKS 256
#define RT_BYTES 64 /* 8x8 u8 matrix */
#define RT_KEYS 3

typedef struct bits256 {
    uint64_t w[4];
} bits256;

static void bset_add(bits256 *s, int i) {
    s->w[i / 64] |= 1ull << (i % 64);
}
static int bset_has(const bits256 *s, int i) {
    return (int)((s->w[i / 64] >> (i % 64)) & 1);
}

/* A random rectangular block (maybe transposed, maybe the whole buffer). */
static st_footprint rand_view(uint64_t *st, uint64_t bytes[RT_BYTES], int *nb) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_U8;
    t.rank = 2;
    int r0 = (int)(ts_rand(st) % 8), c0 = (int)(ts_rand(st) % 8);
    int nr = 1 + (int)(ts_rand(st) % (uint64_t)(8 - r0)),
        nc = 1 + (int)(ts_rand(st) % (uint64_t)(8 - c0));
    if (ts_rand(st) % 6 == 0) {
        r0 = c0 = 0;
        nr = nc = 8;
    }
    t.offset = (uint64_t)(r0 * 8 + c0);
    int tr = (int)(ts_rand(st) & 1);
    t.shape[0] = tr ? nc : nr;
    t.shape[1] = tr ? nr : nc;
    t.strides[0] = tr ? 1 : 8;
    t.strides[1] = tr ? 8 : 1;
    *nb = 0;
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nc; j++)
            bytes[(*nb)++] = (uint64_t)((r0 + i) * 8 + c0 + j);
    st_footprint f;
    st_footprint_of(&t, &f);
    return f;
}

static void test_random_semantics(void **state) {
    st_tensormap *m = *state;
    static deps d;
    uint64_t st = 99;
    static bits256 reach[RT_TASKS + 1]; /* tasks each task (transitively) waits for */
    for (int trial = 0; trial < 40; trial++) {
        st_tmap_reset(m);
        memset(reach, 0, sizeof reach);
        int last_writer[RT_KEYS][RT_BYTES];
        bits256 readers[RT_KEYS][RT_BYTES]; /* readers since the last writer */
        memset(last_writer, 0, sizeof last_writer);
        memset(readers, 0, sizeof readers);
        int is_reader[RT_TASKS + 1] = {0};
        for (int task = 1; task <= RT_TASKS - 1; task++) {
            int key = (int)(ts_rand(&st) % RT_KEYS);
            strata_buffer_id k = {(uint64_t)key + 1, 0, -1};
            uint64_t bytes[RT_BYTES];
            int nb;
            st_footprint f = rand_view(&st, bytes, &nb);
            strata_tag tag = (strata_tag)(ts_rand(&st) % 4);
            submit(m, &k, &f, tag, (uint64_t)task, &d);
            is_reader[task] = tag == STRATA_IN;
            for (int i = 0; i < d.n; i++) {
                int dep = (int)d.ref[i];
                assert_true(dep > 0 && dep < task);
                if (tag == STRATA_IN)
                    assert_false(is_reader[dep]); /* reads never wait for reads */
                bset_add(&reach[task], dep);
                for (int w = 0; w < 4; w++)
                    reach[task].w[w] |= reach[dep].w[w];
            }
            for (int i = 0; i < nb; i++) {
                int b = (int)bytes[i];
                int lw = last_writer[key][b];
                if (lw && !bset_has(&reach[task], lw))
                    fail_msg("task %d (tag %d) does not wait for writer %d of byte %d", task, tag,
                             lw, b);
                if (tag != STRATA_IN) {
                    for (int r = 1; r < task; r++)
                        if (bset_has(&readers[key][b], r) && !bset_has(&reach[task], r))
                            fail_msg("task %d does not wait for reader %d of byte %d", task, r, b);
                    last_writer[key][b] = task;
                    memset(&readers[key][b], 0, sizeof readers[key][b]);
                } else {
                    bset_add(&readers[key][b], task);
                }
            }
        }
    }
}

/* With an fp_fn the map keeps byte ranges only and rebuilds footprints from
 * their tasks: every lookup must find exactly what the storing map finds. */
static st_footprint rebuilt_tab[RT_TASKS + 1];

static void rebuild_fp(void *ctx, uint64_t ref, uint32_t argpos, st_footprint *out) {
    (void)ctx;
    assert_int_equal(argpos, 3);
    assert_true(ref >= 1 && ref <= RT_TASKS);
    *out = rebuilt_tab[ref];
}

static void sorted_deps(deps *d) {
    qsort(d->ref, (size_t)d->n, sizeof d->ref[0], cmp_u64);
}

static void test_rebuilt_footprints_match_stored(void **state) {
    st_tensormap *stored = *state, rebuilt;
    assert_ok(st_tmap_init(&rebuilt));
    st_tmap_set_fp_fn(&rebuilt, rebuild_fp, NULL);
    static deps d1, d2;
    uint64_t st = 1234;
    for (int trial = 0; trial < 60; trial++) {
        st_tmap_reset(stored);
        st_tmap_reset(&rebuilt);
        for (int task = 1; task < RT_TASKS; task++) {
            strata_buffer_id k = {(uint64_t)(ts_rand(&st) % RT_KEYS) + 1, 0, -1};
            uint64_t bytes[RT_BYTES];
            int nb;
            st_footprint f = rand_view(&st, bytes, &nb);
            rebuilt_tab[task] = f;
            int writes = (int)(ts_rand(&st) % 3) != 0;
            d1.n = d2.n = 0;
            assert_ok(st_tmap_lookup(stored, &k, &f, writes, collect, &d1));
            assert_ok(st_tmap_lookup(&rebuilt, &k, &f, writes, collect, &d2));
            sorted_deps(&d1);
            sorted_deps(&d2);
            assert_int_equal(d1.n, d2.n);
            for (int i = 0; i < d1.n; i++)
                assert_int_equal(d1.ref[i], d2.ref[i]);
            if (writes) {
                assert_ok(st_tmap_insert_writer(stored, &k, &f, (uint64_t)task, 3));
                assert_ok(st_tmap_insert_writer(&rebuilt, &k, &f, (uint64_t)task, 3));
            } else {
                assert_ok(st_tmap_insert_reader(stored, &k, &f, (uint64_t)task, 3));
                assert_ok(st_tmap_insert_reader(&rebuilt, &k, &f, (uint64_t)task, 3));
            }
            assert_int_equal(st_tmap_live_entries(stored), st_tmap_live_entries(&rebuilt));
        }
    }
    st_tmap_destroy(&rebuilt);
}

/* ---- tiled views of one buffer ---------------------------------------------- */

#define TILE 16 /* bytes of a tile */

static st_footprint tile(uint64_t i) {
    return range(i * TILE, (i + 1) * TILE);
}

/* The record of key k (the test reads the map's layout). */
static const st_tmap_key *key_rec(const st_tensormap *m, const strata_buffer_id *k) {
    for (uint32_t r = 0; r < m->nkeys; r++) {
        const strata_buffer_id *s = &m->slots[m->keys[r].slot].key;
        if (s->id == k->id && s->generation == k->generation && s->owner == k->owner)
            return &m->keys[r];
    }
    return NULL;
}

/* The grid of key k's record. */
static const st_tmap_grid *grid_rec(const st_tensormap *m, const strata_buffer_id *k) {
    const st_tmap_key *rec = key_rec(m, k);
    assert_non_null(rec);
    assert_true(rec->gridded);
    return &m->grids[rec - m->keys];
}

static void test_tiles_disjoint_independent(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (uint64_t i = 0; i < 256; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
        assert_int_equal(d.n, 0);
    }
    for (uint64_t i = 0; i < 256; i++) { /* each tile's reader waits for its writer only */
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_IN, 1000 + i, &d);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ref[0], i + 1);
    }
    const st_tmap_key *rec = key_rec(m, &k);
    assert_non_null(rec);
    assert_int_equal(grid_rec(m, &k)->grid, TILE); /* the tiles went to cells */
    assert_int_equal(rec->ncelled, 512);
}

static void test_tiles_overlapping_ordered(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (uint64_t i = 0; i < 64; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
    }
    /* a view across tiles 9 and 10 (in no cell) waits for both writers */
    st_footprint across = range(9 * TILE + 8, 10 * TILE + 8);
    submit(m, &k, &across, STRATA_INOUT, 100, &d);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 10) && has_dep(&d, 11));
    /* half of tile 10 now waits for the view across, and for tile 10's writer */
    st_footprint half = range(10 * TILE, 10 * TILE + 8);
    submit(m, &k, &half, STRATA_IN, 101, &d);
    assert_int_equal(d.n, 2);
    assert_true(has_dep(&d, 100) && has_dep(&d, 11));
    /* the other half meets tile 10's writer only */
    st_footprint other = range(10 * TILE + 8, 11 * TILE);
    submit(m, &k, &other, STRATA_IN, 102, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 11));
    /* rewriting tile 10 waits for its writer, the view across, both halves */
    st_footprint t10 = tile(10);
    submit(m, &k, &t10, STRATA_OUT, 103, &d);
    assert_int_equal(d.n, 4);
    assert_true(has_dep(&d, 11) && has_dep(&d, 100) && has_dep(&d, 101) && has_dep(&d, 102));
}

static void test_whole_writer_after_tile_readers(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    st_footprint all = whole(1024 * TILE);
    submit(m, &k, &all, STRATA_OUT, 1, &d);
    for (uint64_t i = 0; i < 1024; i++) { /* a tile reader after a whole writer waits for it */
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_IN, 10 + i, &d);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ref[0], 1);
    }
    assert_true(key_rec(m, &k)->ncelled > 1000);
    assert_int_equal(grid_rec(m, &k)->grid, TILE); /* the whole-buffer view did not set it */
    submit(m, &k, &all, STRATA_OUT, 5000, &d);     /* waits for the writer and all 1024 readers */
    assert_int_equal(d.n, 1025);
    assert_true(has_dep(&d, 1));
    for (uint64_t i = 0; i < 1024; i++)
        assert_true(has_dep(&d, 10 + i));
    assert_int_equal(st_tmap_live_entries(m), 1);
    st_footprint f = tile(77);
    submit(m, &k, &f, STRATA_IN, 6000, &d);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.ref[0], 5000);
}

/* A u8 view of column block c (`w` bytes wide) of a rows x cols matrix. */
static st_footprint col_block(int64_t rows, int64_t cols, int64_t c, int64_t w) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_U8;
    t.rank = 2;
    t.offset = (uint64_t)(c * w);
    t.shape[0] = rows;
    t.shape[1] = w;
    t.strides[0] = cols;
    t.strides[1] = 1;
    st_footprint f;
    st_footprint_of(&t, &f);
    return f;
}

/* Strided views that interleave without sharing a byte stay independent,
 * next to tiles of the same buffer in cells. */
static void test_tiles_strided_interleaved(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    const int64_t rows = 64, cols = 64; /* 4096 bytes, 256 tiles of 16 */
    for (uint64_t i = 0; i < 256; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
    }
    for (int64_t c = 0; c < 16; c++) { /* 16 column blocks of 4 bytes: each meets every row */
        st_footprint f = col_block(rows, cols, c, 4);
        submit(m, &k, &f, STRATA_OUT, 1000 + (uint64_t)c, &d);
        /* row r's bytes [r*64 + 4c, +4) lie in tile 4r + c/4 */
        assert_int_equal(d.n, 64);
        for (int64_t r = 0; r < rows; r++)
            assert_true(has_dep(&d, (uint64_t)(4 * r + c / 4) + 1));
    }
    /* a block reader waits for its block's writer and, as no single later
     * writer covers them, for the tiles it crosses: not for other blocks */
    st_footprint c5 = col_block(rows, cols, 5, 4);
    submit(m, &k, &c5, STRATA_IN, 2000, &d);
    assert_int_equal(d.n, 65);
    assert_true(has_dep(&d, 1005));
    for (uint64_t c = 0; c < 16; c++)
        assert_int_equal(has_dep(&d, 1000 + c), c == 5);
    st_footprint t1 = tile(1); /* bytes 16..31 of row 0: column blocks 4..7 */
    submit(m, &k, &t1, STRATA_IN, 2001, &d);
    assert_int_equal(d.n, 5);
    assert_true(has_dep(&d, 2));
    for (uint64_t c = 4; c < 8; c++)
        assert_true(has_dep(&d, 1000 + c));
}

/* Tile (r, c) of a 256 x 256 u8 matrix cut in 16 x 16 tiles of 16 x 16. */
static st_footprint tile2d(int64_t r, int64_t c) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = STRATA_U8;
    t.rank = 2;
    t.offset = (uint64_t)(r * 16 * 256 + c * 16);
    t.shape[0] = t.shape[1] = 16;
    t.strides[0] = 256;
    t.strides[1] = 1;
    st_footprint f;
    st_footprint_of(&t, &f);
    return f;
}

/* 2-D tiles (strided views whose byte ranges interleave within a row of
 * tiles): a cell per row of tiles, so a tile's lookup walks its own row. */
static void test_tiles_2d(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (int64_t r = 0; r < 16; r++)
        for (int64_t c = 0; c < 16; c++) {
            st_footprint f = tile2d(r, c);
            submit(m, &k, &f, STRATA_OUT, (uint64_t)(r * 16 + c) + 1, &d);
            assert_int_equal(d.n, 0); /* tiles never meet */
        }
    for (int64_t r = 0; r < 16; r++)
        for (int64_t c = 0; c < 16; c++) {
            st_footprint f = tile2d(r, c);
            uint64_t before = m->walked;
            submit(m, &k, &f, STRATA_IN, (uint64_t)(r * 16 + c) + 1000, &d);
            assert_true(m->walked - before <= 16); /* the writers of its row, not all 256 */
            assert_int_equal(d.n, 1);
            assert_int_equal(d.ref[0], (uint64_t)(r * 16 + c) + 1);
        }
    const st_tmap_key *rec = key_rec(m, &k);
    assert_int_equal(grid_rec(m, &k)->grid, 16 * 256);
    assert_int_equal(rec->ncelled, 512);
    st_footprint all = whole(256 * 256);
    submit(m, &k, &all, STRATA_OUT, 5000, &d);
    assert_int_equal(d.n, 512);
    assert_int_equal(st_tmap_live_entries(m), 1);
}

/* 2-D tiles of a matrix whose rows are not a power of two bytes (200-byte
 * rows, tiles of 20 x 20): the cell is still one row of tiles. */
static void test_tiles_2d_any_rows(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (int64_t r = 0; r < 12; r++)
        for (int64_t c = 0; c < 10; c++) {
            strata_tensor t;
            memset(&t, 0, sizeof t);
            t.dtype = STRATA_U8;
            t.rank = 2;
            t.offset = (uint64_t)(r * 20 * 200 + c * 20);
            t.shape[0] = t.shape[1] = 20;
            t.strides[0] = 200;
            t.strides[1] = 1;
            st_footprint f;
            st_footprint_of(&t, &f);
            uint64_t before = m->walked;
            submit(m, &k, &f, STRATA_OUT, (uint64_t)(r * 10 + c) + 1, &d);
            assert_int_equal(d.n, 0);
            if (r > 2) /* once the grid is set: the tiles of its own row only */
                assert_true(m->walked - before <= 2 * 10);
        }
    assert_int_equal(grid_rec(m, &k)->grid, 20 * 200);
    assert_int_equal(key_rec(m, &k)->ngeneral, 0);
}

/* 12,000 tiles: a tile's lookup walks its own cell, not 12,000 entries. */
#define MANY_TILES 12000

static void test_many_tiles(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (uint64_t i = 0; i < MANY_TILES; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
        assert_int_equal(d.n, 0);
    }
    for (uint64_t i = 0; i < MANY_TILES; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_IN, MANY_TILES + 1 + i, &d);
    }
    assert_int_equal(st_tmap_live_entries(m), 2 * MANY_TILES);
    uint64_t worst = 0;
    for (uint64_t i = 0; i < MANY_TILES; i += 97) {
        st_footprint f = tile(i);
        uint64_t before = m->walked;
        d.n = 0;
        assert_ok(st_tmap_lookup(m, &k, &f, 1, collect, &d));
        uint64_t walked = m->walked - before;
        worst = walked > worst ? walked : worst;
        assert_int_equal(d.n, 2);
        assert_true(has_dep(&d, i + 1) && has_dep(&d, MANY_TILES + 1 + i));
    }
    print_message("many tiles: at most %llu entries walked by a tile's lookup\n",
                  (unsigned long long)worst);
    assert_true(worst <= 4);
    st_footprint all = whole(MANY_TILES * TILE);
    submit(m, &k, &all, STRATA_IN, 3 * MANY_TILES, &d);
    assert_int_equal(d.n, MANY_TILES);
    submit(m, &k, &all, STRATA_OUT, 3 * MANY_TILES + 1, &d);
    assert_int_equal(d.n, 2 * MANY_TILES + 1);
    assert_int_equal(st_tmap_live_entries(m), 1);
}

/* A tile far into a huge buffer gets no cells that far (the general lists
 * hold it), and is still found. */
static void test_far_tile(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    for (uint64_t i = 0; i < 64; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
    }
    uint64_t far = (uint64_t)1 << 40;
    st_footprint f = range(far, far + TILE);
    submit(m, &k, &f, STRATA_OUT, 100, &d);
    assert_int_equal(d.n, 0);
    const st_tmap_key *rec = key_rec(m, &k);
    assert_true(grid_rec(m, &k)->ncells <= 16384);
    assert_int_equal(rec->ngeneral, 1);
    submit(m, &k, &f, STRATA_IN, 101, &d);
    assert_int_equal(d.n, 1);
    assert_true(has_dep(&d, 100));
    st_footprint all = whole(far + TILE);
    submit(m, &k, &all, STRATA_OUT, 102, &d);
    assert_int_equal(d.n, 66);
}

/* Cells that cannot grow fail the insert before it stores anything; the map
 * still answers every lookup, and grows once memory is back. */
static void test_cells_growth_failure(void **state) {
    st_tensormap *m = *state;
    static deps d;
    strata_buffer_id k = bid(1);
    const uint64_t g = ST_TMAP_GRID_AFTER;
    for (uint64_t i = 0; i < g; i++) { /* general entries: the next insert makes the grid */
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_OUT, i + 1, &d);
    }
    st_footprint next = tile(g);
    st_alloc_fail_after(1, ST_ALLOC_FAIL_FROM, ST_ALLOC_THIS_THREAD);
    assert_fails(STRATA_ENOMEM, "cells", st_tmap_insert_writer(m, &k, &next, g + 1, 0));
    st_alloc_hook_off();
    assert_true(st_alloc_failed() >= 1);
    assert_int_equal(st_tmap_live_entries(m), g); /* nothing half stored */
    for (uint64_t i = 0; i < g; i++) {
        st_footprint f = tile(i);
        submit(m, &k, &f, STRATA_IN, 100 + i, &d);
        assert_int_equal(d.n, 1);
        assert_int_equal(d.ref[0], i + 1);
    }
    submit(m, &k, &next, STRATA_OUT, g + 1, &d);
    assert_int_equal(d.n, 0);
    assert_true(key_rec(m, &k)->ncelled > 0);
    st_footprint all = whole((g + 1) * TILE);
    submit(m, &k, &all, STRATA_OUT, 200, &d);
    assert_int_equal(d.n, 2 * g + 1); /* every writer and every reader */
}

/* ---- randomized: exactly the producers of a brute-force entry list --------- */

#define BF_TILES 48
#define BF_BYTES (BF_TILES * TILE)
#define BF_KEYS 2
#define BF_OPS 3000
#define BF_MAX 8192

typedef struct bf_entry {
    uint64_t ref;
    int key, writer;
    st_footprint fp;
} bf_entry;

typedef struct bf_list {
    bf_entry e[BF_MAX];
    int n;
} bf_list;

/* Mostly tiles, else halves, runs of tiles, odd ranges, strided blocks, 2-D
 * tiles, the whole buffer. */
static st_footprint bf_view(uint64_t *st) {
    uint64_t t = ts_rand(st) % BF_TILES, pick = ts_rand(st) % 17;
    if (pick < 8)
        return tile(t);
    if (pick < 10)
        return range(t * TILE + (pick & 1) * 8, t * TILE + (pick & 1) * 8 + 8);
    if (pick < 11) {
        uint64_t n = 1 + ts_rand(st) % (BF_TILES - t);
        return range(t * TILE, (t + n) * TILE);
    }
    if (pick < 12) {
        uint64_t lo = ts_rand(st) % BF_BYTES, n = ts_rand(st) % (BF_BYTES - lo + 1);
        return range(lo, lo + n); /* may be empty */
    }
    if (pick < 15) /* 12 rows x 64 bytes: blocks of 4 bytes, strided */
        return col_block(12, 64, (int64_t)(ts_rand(st) % 16), 4);
    if (pick < 16) { /* the same matrix in 2-D tiles of 4 rows x 16 bytes */
        strata_tensor v;
        memset(&v, 0, sizeof v);
        v.dtype = STRATA_U8;
        v.rank = 2;
        v.offset = (t % 3) * 4 * 64 + (t % 4) * 16;
        v.shape[0] = 4;
        v.shape[1] = 16;
        v.strides[0] = 64;
        v.strides[1] = 1;
        st_footprint f;
        st_footprint_of(&v, &f);
        return f;
    }
    return whole(BF_BYTES);
}

/* The map's semantics on one flat list: a writer drops the entries it covers;
 * a lookup reports every live overlapping writer (and reader). */
static void bf_lookup(const bf_list *l, int key, const st_footprint *fp, int readers,
                      const mw_liveness *live, deps *out) {
    out->n = 0;
    for (int i = 0; i < l->n; i++) {
        const bf_entry *e = &l->e[i];
        if (e->key == key && (e->writer || readers) && mw_alive((void *)live, e->ref) &&
            st_footprint_overlap(&e->fp, fp) && !has_dep(out, e->ref))
            out->ref[out->n++] = e->ref;
    }
}

static void bf_insert(bf_list *l, int key, const st_footprint *fp, int writer, uint64_t ref) {
    if (writer) {
        int j = 0;
        for (int i = 0; i < l->n; i++)
            if (l->e[i].key != key || !st_footprint_covers(fp, &l->e[i].fp))
                l->e[j++] = l->e[i];
        l->n = j;
    }
    assert_true(l->n < BF_MAX);
    l->e[l->n++] = (bf_entry){ref, key, writer, *fp};
}

static void unique_sorted(deps *d) {
    sorted_deps(d);
    int j = 0;
    for (int i = 0; i < d->n; i++)
        if (j == 0 || d->ref[j - 1] != d->ref[i])
            d->ref[j++] = d->ref[i];
    d->n = j;
}

static void test_random_tiles_match_brute_force(void **state) {
    st_tensormap *m = *state;
    static deps got, want;
    static bf_list bf;
    uint64_t st = 777;
    mw_liveness live = {1, calloc(BF_OPS + 2, 1)};
    assert_non_null(live.dead);
    st_tmap_set_alive_fn(m, mw_alive, &live);
    uint64_t celled = 0;
    for (int trial = 0; trial < 12; trial++) {
        st_tmap_reset(m);
        bf.n = 0;
        memset(live.dead, 0, BF_OPS + 2);
        live.min_alive = 1;
        for (uint64_t ref = 1; ref <= BF_OPS; ref++) {
            int key = (int)(ts_rand(&st) % BF_KEYS);
            strata_buffer_id k = bid((uint64_t)key + 1);
            st_footprint f = bf_view(&st);
            int writer = ts_rand(&st) % 3 == 0;
            got.n = 0;
            assert_ok(st_tmap_lookup(m, &k, &f, writer, collect, &got));
            bf_lookup(&bf, key, &f, writer, &live, &want);
            unique_sorted(&got);
            sorted_deps(&want);
            if (got.n != want.n)
                print_message("view [%llu, %llu) dense %d rank %d writer %d\n",
                              (unsigned long long)f.lo, (unsigned long long)f.hi, f.dense, f.rank,
                              writer);
            if (got.n != want.n)
                fail_msg("trial %d op %llu: %d producers, brute force %d", trial,
                         (unsigned long long)ref, got.n, want.n);
            for (int i = 0; i < got.n; i++)
                assert_int_equal(got.ref[i], want.ref[i]);
            if (writer)
                assert_ok(st_tmap_insert_writer(m, &k, &f, ref, 0));
            else
                assert_ok(st_tmap_insert_reader(m, &k, &f, ref, 0));
            bf_insert(&bf, key, &f, writer, ref);
            if (ts_rand(&st) % 4 == 0) /* tasks finish out of order; deaths are final */
                live.dead[1 + ts_rand(&st) % ref] = 1;
            if (ref % 500 == 0)
                live.min_alive = ref - 400;
            const st_tmap_key *rec = key_rec(m, &k);
            celled += rec ? rec->ncelled : 0;
        }
    }
    assert_true(celled > 0); /* the cells were exercised, not only the general lists */
    st_tmap_set_alive_fn(m, NULL, NULL);
    free(live.dead);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tag_pairs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebuilt_footprints_match_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_war_waw_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_overlaps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strided_disjoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_distinct, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_isolates_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epoch_wrap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_visit_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_entries_not_visited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readers_do_not_slow_in_lookups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_bounds_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_growth_many_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_churn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_model_whole_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_semantics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles_disjoint_independent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles_overlapping_ordered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whole_writer_after_tile_readers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles_strided_interleaved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles_2d, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiles_2d_any_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_tiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_far_tile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cells_growth_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_tiles_match_brute_force, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
