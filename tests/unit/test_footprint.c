/* tests/unit/test_footprint.c - byte footprints, overlap and coverage.
 *
 * Besides hand-picked cases, compares st_footprint_overlap/covers against a
 * brute-force enumeration of the bytes of small random views: overlap must
 * never say 0 for views sharing a byte, covers must never say 1 unless every
 * byte of b is a byte of a, and for sub-views of one contiguous parent (any
 * axis order, any start) both answers must be exact.
 */
#include <string.h>

#include "test_support.h"

#include "core/footprint.h"

#define BUF 256 /* bytes of the imaginary buffer the random views live in */
#define WORDS (BUF / 64)

typedef struct bset {
    uint64_t w[WORDS];
} bset;

static const uint8_t dtypes[] = {STRATA_U8,  STRATA_I16,  STRATA_F32,
                                 STRATA_F64, STRATA_BF16, STRATA_I64};

static size_t esize(int dtype) {
    switch (dtype) {
    case STRATA_U8:
    case STRATA_I8:
        return 1;
    case STRATA_I16:
    case STRATA_F16:
    case STRATA_BF16:
        return 2;
    case STRATA_I32:
    case STRATA_F32:
        return 4;
    default:
        return 8;
    }
}

static strata_tensor mk(int dtype, uint64_t offset, int rank, const int64_t *shape,
                        const int64_t *strides) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = (uint8_t)dtype;
    t.rank = (uint8_t)rank;
    t.offset = offset;
    t.buffer_bytes = BUF;
    for (int k = 0; k < rank; k++) {
        t.shape[k] = shape[k];
        t.strides[k] = strides[k];
    }
    return t;
}

static st_footprint fp_of(const strata_tensor *t) {
    st_footprint f;
    st_footprint_of(t, &f);
    return f;
}

/* Last byte + 1 of a view (0-element views: offset). */
static uint64_t view_end(const strata_tensor *t) {
    uint64_t span = 0;
    for (int k = 0; k < t->rank; k++) {
        if (t->shape[k] == 0)
            return t->offset;
        span += (uint64_t)(t->shape[k] - 1) * (uint64_t)t->strides[k];
    }
    return t->offset + (span + 1) * esize(t->dtype);
}

static void bytes_of(const strata_tensor *t, bset *s) {
    memset(s, 0, sizeof *s);
    int64_t idx[STRATA_MAX_RANK] = {0};
    for (int k = 0; k < t->rank; k++)
        if (t->shape[k] == 0)
            return;
    size_t e = esize(t->dtype);
    for (;;) {
        uint64_t off = t->offset;
        for (int k = 0; k < t->rank; k++)
            off += (uint64_t)idx[k] * (uint64_t)t->strides[k] * e;
        for (size_t j = 0; j < e; j++) {
            assert_true(off + j < BUF);
            s->w[(off + j) / 64] |= 1ull << ((off + j) % 64);
        }
        int k = t->rank - 1;
        while (k >= 0 && ++idx[k] == t->shape[k])
            idx[k--] = 0;
        if (k < 0)
            break;
    }
}

static int intersects(const bset *a, const bset *b) {
    for (int i = 0; i < WORDS; i++)
        if (a->w[i] & b->w[i])
            return 1;
    return 0;
}

static int subset(const bset *a, const bset *b) { /* b within a */
    for (int i = 0; i < WORDS; i++)
        if (b->w[i] & ~a->w[i])
            return 0;
    return 1;
}

static int has(const bset *s, uint64_t i) {
    return (int)((s->w[i / 64] >> (i % 64)) & 1);
}

/* lo/hi must be the first byte and one past the last; dense must mean every byte in between. */
static void check_fp_bytes(const strata_tensor *t, const st_footprint *f, const bset *s) {
    int any = 0;
    uint64_t first = 0, last = 0;
    for (uint64_t i = 0; i < BUF; i++) {
        if (has(s, i)) {
            if (!any)
                first = i;
            any = 1;
            last = i;
        }
    }
    if (!any) {
        assert_int_equal(f->lo, f->hi);
        return;
    }
    assert_int_equal(f->lo, first);
    assert_int_equal(f->hi, last + 1);
    if (f->dense)
        for (uint64_t i = first; i <= last; i++)
            if (!has(s, i))
                fail_msg("view claimed dense misses byte %llu", (unsigned long long)i);
    (void)t;
}

/* ---- random view generators ------------------------------------------------ */

static uint64_t rnd(uint64_t *st, uint64_t n) {
    return ts_rand(st) % n;
}

/* Arbitrary strides (aliasing, gaps, any order), partial-element offsets. */
static strata_tensor gen_random(uint64_t *st) {
    for (;;) {
        int dtype = dtypes[rnd(st, sizeof dtypes)];
        int rank = 1 + (int)rnd(st, 3);
        int64_t shape[3], strides[3];
        for (int k = 0; k < rank; k++) {
            shape[k] = rnd(st, 24) == 0 ? 0 : 1 + (int64_t)rnd(st, 4);
            strides[k] = 1 + (int64_t)rnd(st, 7);
        }
        strata_tensor t = mk(dtype, rnd(st, BUF / 2), rank, shape, strides);
        if (view_end(&t) <= BUF)
            return t;
    }
}

typedef struct parent {
    int dtype, rank;
    int64_t dims[3], strides[3]; /* contiguous row-major */
} parent;

static parent gen_parent(uint64_t *st) {
    for (;;) {
        parent p;
        p.dtype = dtypes[rnd(st, sizeof dtypes)];
        p.rank = 1 + (int)rnd(st, 3);
        int64_t n = 1;
        for (int k = p.rank - 1; k >= 0; k--) {
            p.dims[k] = 1 + (int64_t)rnd(st, p.rank == 1 ? 24 : 6);
            p.strides[k] = n;
            n *= p.dims[k];
        }
        if ((uint64_t)n * esize(p.dtype) <= BUF)
            return p;
    }
}

/* A sub-block of the parent: any start and extent per axis, axes permuted,
 * sometimes an axis fixed (rank reduced). *shifted is set when a partial-
 * element byte shift was added (results no longer need to be exact). */
static strata_tensor gen_sub(uint64_t *st, const parent *p, int allow_shift, int *shifted) {
    int64_t shape[3], strides[3];
    int order[3] = {0, 1, 2};
    for (int k = p->rank - 1; k > 0; k--) { /* random permutation */
        int j = (int)rnd(st, (uint64_t)k + 1);
        int x = order[k];
        order[k] = order[j];
        order[j] = x;
    }
    uint64_t off = 0;
    int rank = 0;
    for (int i = 0; i < p->rank; i++) {
        int k = order[i];
        int64_t start = (int64_t)rnd(st, (uint64_t)p->dims[k]);
        int64_t count = rnd(st, 32) == 0 ? 0 : 1 + (int64_t)rnd(st, (uint64_t)(p->dims[k] - start));
        off += (uint64_t)start * (uint64_t)p->strides[k] * esize(p->dtype);
        if (count == 1 && p->rank > 1 && rnd(st, 3) == 0)
            continue; /* index fixed: the axis disappears */
        shape[rank] = count;
        strides[rank] = p->strides[k];
        rank++;
    }
    if (rank == 0) {
        shape[0] = 1;
        strides[0] = 1;
        rank = 1;
    }
    strata_tensor t = mk(p->dtype, off, rank, shape, strides);
    *shifted = 0;
    size_t e = esize(p->dtype);
    if (allow_shift && e > 1 && rnd(st, 6) == 0) {
        t.offset += 1 + rnd(st, e - 1);
        if (view_end(&t) <= BUF)
            *shifted = 1;
        else
            t.offset = off;
    }
    return t;
}

typedef struct stats {
    long pairs, disjoint, said_disjoint, subset, said_covers;
} stats;

/* Soundness always; exactness when `exact`. */
static void check_pair(const strata_tensor *ta, const strata_tensor *tb, int exact, stats *s) {
    bset ba, bb;
    bytes_of(ta, &ba);
    bytes_of(tb, &bb);
    st_footprint fa = fp_of(ta), fb = fp_of(tb);
    check_fp_bytes(ta, &fa, &ba);
    check_fp_bytes(tb, &fb, &bb);
    int real_ov = intersects(&ba, &bb);
    int ov = st_footprint_overlap(&fa, &fb);
    assert_int_equal(ov, st_footprint_overlap(&fb, &fa));
    assert_int_equal(st_views_overlap(ta, tb), ov); /* the shortcut, where it applies */
    assert_int_equal(st_views_overlap(tb, ta), ov);
    if (real_ov && !ov)
        fail_msg("overlap said disjoint for views sharing a byte (off %llu/%llu)",
                 (unsigned long long)ta->offset, (unsigned long long)tb->offset);
    int real_ab = subset(&ba, &bb), real_ba = subset(&bb, &ba);
    int cab = st_footprint_covers(&fa, &fb), cba = st_footprint_covers(&fb, &fa);
    if (cab && !real_ab)
        fail_msg("covers(a, b) = 1 but a misses a byte of b");
    if (cba && !real_ba)
        fail_msg("covers(b, a) = 1 but b misses a byte of a");
    if (exact) {
        assert_int_equal(ov, real_ov);
        assert_int_equal(cab, real_ab);
        assert_int_equal(cba, real_ba);
    }
    assert_true(st_footprint_covers(&fa, &fa));
    s->pairs++;
    s->disjoint += !real_ov;
    s->said_disjoint += !ov;
    s->subset += real_ab;
    s->said_covers += cab;
}

static void test_random_views_brute_force(void **state) {
    (void)state;
    uint64_t st = 0x1234567;
    stats s = {0};
    for (int i = 0; i < 60000; i++) {
        strata_tensor a = gen_random(&st), b = gen_random(&st);
        check_pair(&a, &b, 0, &s);
    }
    /* unrelated random views sometimes also meet a parent sub-view */
    for (int i = 0; i < 20000; i++) {
        parent p = gen_parent(&st);
        int sh;
        strata_tensor a = gen_random(&st), b = gen_sub(&st, &p, 1, &sh);
        check_pair(&a, &b, 0, &s);
    }
    assert_true(s.said_disjoint > 0);
    print_message("random: %ld pairs, %ld disjoint (%ld proven), %ld covered (%ld proven)\n",
                  s.pairs, s.disjoint, s.said_disjoint, s.subset, s.said_covers);
}

static void test_subviews_exact(void **state) {
    (void)state;
    uint64_t st = 0xabcdef;
    stats s = {0};
    for (int i = 0; i < 80000; i++) {
        parent p = gen_parent(&st);
        int sa, sb;
        strata_tensor a = gen_sub(&st, &p, 1, &sa), b = gen_sub(&st, &p, 1, &sb);
        check_pair(&a, &b, !sa && !sb, &s);
    }
    /* the proofs must actually fire often */
    assert_true(s.said_disjoint * 10 >= s.disjoint * 8);
    assert_true(s.said_covers * 10 >= s.subset * 8);
    print_message("sub-views: %ld pairs, %ld disjoint (%ld proven), %ld covered (%ld proven)\n",
                  s.pairs, s.disjoint, s.said_disjoint, s.subset, s.said_covers);
}

static void test_mixed_dtypes(void **state) {
    (void)state;
    uint64_t st = 0x77;
    stats s = {0};
    for (int i = 0; i < 40000; i++) {
        parent p = gen_parent(&st), q = gen_parent(&st);
        int sa, sb;
        strata_tensor a = gen_sub(&st, &p, 1, &sa), b = gen_sub(&st, &q, 1, &sb);
        check_pair(&a, &b, 0, &s);
    }
    print_message("mixed: %ld pairs, %ld disjoint (%ld proven), %ld covered (%ld proven)\n",
                  s.pairs, s.disjoint, s.said_disjoint, s.subset, s.said_covers);
}

/* ---- hand-picked cases ------------------------------------------------------- */

static void test_basic_fields(void **state) {
    (void)state;
    int64_t sh[2] = {3, 4}, str[2] = {4, 1};
    strata_tensor t = mk(STRATA_F32, 16, 2, sh, str);
    st_footprint f = fp_of(&t);
    assert_int_equal(f.lo, 16);
    assert_int_equal(f.hi, 16 + 48);
    assert_int_equal(f.offset, 16);
    assert_int_equal(f.elem, 4);
    assert_int_equal(f.rank, 2);
    assert_int_equal(f.dense, 1);
    assert_int_equal(f.shape[1], 4);
    assert_int_equal(f.strides[0], 4);

    int64_t tsh[2] = {4, 3}, tstr[2] = {1, 4}; /* transposed, still every byte */
    t = mk(STRATA_F32, 0, 2, tsh, tstr);
    assert_int_equal(fp_of(&t).dense, 1);

    int64_t gsh[2] = {3, 2}, gstr[2] = {4, 1}; /* 2 of every 4 columns: gaps */
    t = mk(STRATA_F32, 0, 2, gsh, gstr);
    f = fp_of(&t);
    assert_int_equal(f.dense, 0);
    assert_int_equal(f.hi, (2 * 4 + 1 + 1) * 4);

    int64_t ush[3] = {1, 5, 1}, ustr[3] = {100, 1, 7}; /* size-1 axes ignored */
    t = mk(STRATA_I16, 2, 3, ush, ustr);
    f = fp_of(&t);
    assert_int_equal(f.dense, 1);
    assert_int_equal(f.lo, 2);
    assert_int_equal(f.hi, 12);

    st_footprint w;
    st_footprint_whole(1000, &w);
    assert_int_equal(w.lo, 0);
    assert_int_equal(w.hi, 1000);
    assert_int_equal(w.dense, 1);
    assert_true(st_footprint_covers(&w, &f));
    assert_false(st_footprint_covers(&f, &w));
    assert_true(st_footprint_overlap(&w, &f));
    assert_true(st_footprint_equal(&f, &f));
    assert_false(st_footprint_equal(&f, &w));
}

static void test_empty_views(void **state) {
    (void)state;
    int64_t sh[2] = {0, 4}, str[2] = {4, 1};
    strata_tensor t = mk(STRATA_F32, 8, 2, sh, str);
    st_footprint e = fp_of(&t), w, z;
    assert_int_equal(e.lo, e.hi);
    st_footprint_whole(64, &w);
    st_footprint_whole(0, &z);
    assert_false(st_footprint_overlap(&e, &w));
    assert_false(st_footprint_overlap(&w, &e));
    assert_false(st_footprint_overlap(&z, &w));
    assert_true(st_footprint_covers(&w, &e));
    assert_true(st_footprint_covers(&e, &e));
    assert_false(st_footprint_covers(&e, &w));
}

/* Contiguous vectors meet by their byte ranges: 16-byte tiles of one buffer
 * side by side do not, a range across a boundary does, an empty one never;
 * a vector against a strided view takes the footprints' answer. */
static void test_views_overlap_of_vectors_is_their_byte_ranges(void **state) {
    (void)state;
    int64_t n16[1] = {16}, n4[1] = {4}, n0[1] = {0}, one[1] = {1};
    strata_tensor t0 = mk(STRATA_U8, 0, 1, n16, one), t1 = mk(STRATA_U8, 16, 1, n16, one);
    strata_tensor across = mk(STRATA_F32, 12, 1, n4, one); /* bytes 12..27 */
    strata_tensor empty = mk(STRATA_U8, 8, 1, n0, one);
    assert_false(st_views_overlap(&t0, &t1));
    assert_true(st_views_overlap(&t0, &t0));
    assert_true(st_views_overlap(&across, &t0));
    assert_true(st_views_overlap(&t1, &across));
    assert_false(st_views_overlap(&empty, &t0));
    assert_false(st_views_overlap(&empty, &empty));
    int64_t sh[2] = {2, 4}, str[2] = {8, 1}; /* f32 bytes 0..15 and 32..47 */
    strata_tensor rows = mk(STRATA_F32, 0, 2, sh, str);
    st_footprint frows = fp_of(&rows), f0 = fp_of(&t0), f1 = fp_of(&t1);
    assert_int_equal(st_views_overlap(&rows, &t1), st_footprint_overlap(&frows, &f1));
    assert_int_equal(st_views_overlap(&t0, &rows), st_footprint_overlap(&f0, &frows));
    assert_true(st_views_overlap(&rows, &t0));
}

static void test_matrix_tiles(void **state) {
    (void)state;
    /* 8x8 f32 matrix, 4x4 tiles */
    int64_t sh[2] = {4, 4}, str[2] = {8, 1};
    st_footprint tile[4];
    for (int i = 0; i < 4; i++) {
        uint64_t r = (uint64_t)(i / 2) * 4, c = (uint64_t)(i % 2) * 4;
        strata_tensor t = mk(STRATA_F32, (r * 8 + c) * 4, 2, sh, str);
        tile[i] = fp_of(&t);
        assert_int_equal(tile[i].dense, 0);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            assert_int_equal(st_footprint_overlap(&tile[i], &tile[j]), i == j);
            assert_int_equal(st_footprint_covers(&tile[i], &tile[j]), i == j);
        }
    /* a 2x2 block inside tile 3 */
    int64_t sh2[2] = {2, 2};
    strata_tensor in = mk(STRATA_F32, (5 * 8 + 6) * 4, 2, sh2, str);
    st_footprint b = fp_of(&in);
    assert_true(st_footprint_covers(&tile[3], &b));
    assert_false(st_footprint_covers(&tile[2], &b));
    assert_false(st_footprint_overlap(&tile[0], &b));
    assert_true(st_footprint_overlap(&tile[3], &b));
    /* the transposed view of tile 1 is the same bytes */
    int64_t tsh[2] = {4, 4}, tstr[2] = {1, 8};
    strata_tensor tr = mk(STRATA_F32, 4 * 4, 2, tsh, tstr);
    st_footprint ft = fp_of(&tr);
    assert_true(st_footprint_covers(&tile[1], &ft));
    assert_true(st_footprint_covers(&ft, &tile[1]));
    assert_false(st_footprint_overlap(&ft, &tile[0]));
    /* columns */
    int64_t csh[1] = {8}, cstr[1] = {8};
    strata_tensor c0 = mk(STRATA_F32, 0, 1, csh, cstr), c5 = mk(STRATA_F32, 20, 1, csh, cstr);
    st_footprint f0 = fp_of(&c0), f5 = fp_of(&c5);
    assert_false(st_footprint_overlap(&f0, &f5));
    assert_true(st_footprint_overlap(&f0, &tile[0]));
    assert_false(st_footprint_overlap(&f0, &tile[1]));
    assert_true(st_footprint_overlap(&f5, &tile[1]));
    assert_false(st_footprint_covers(&tile[1], &f5)); /* column runs through tile 3 too */
}

static void test_interleaved_and_partial(void **state) {
    (void)state;
    int64_t sh[1] = {16}, str[1] = {2};
    strata_tensor ev = mk(STRATA_F64, 0, 1, sh, str), od = mk(STRATA_F64, 8, 1, sh, str);
    st_footprint e = fp_of(&ev), o = fp_of(&od);
    assert_false(st_footprint_overlap(&e, &o)); /* even vs odd elements */
    /* an f64 view over bytes shifted by 4 meets both */
    strata_tensor sv = mk(STRATA_F64, 4, 1, sh, str);
    st_footprint s = fp_of(&sv);
    assert_true(st_footprint_overlap(&s, &e));
    assert_true(st_footprint_overlap(&s, &o));
    /* u8 view of byte 3 of every even f64 */
    strata_tensor bv = mk(STRATA_U8, 3, 1, sh, (int64_t[]){16});
    st_footprint b = fp_of(&bv);
    assert_true(st_footprint_overlap(&b, &e));
    assert_false(st_footprint_overlap(&b, &o));
    assert_true(st_footprint_covers(&e, &b));
    assert_false(st_footprint_covers(&b, &e));
    /* partial-element neighbours: [2,6) vs [0,4) share bytes 2,3 */
    int64_t one[1] = {1}, u[1] = {1};
    strata_tensor p = mk(STRATA_F32, 2, 1, one, u), q = mk(STRATA_F32, 0, 1, one, u);
    st_footprint fp = fp_of(&p), fq = fp_of(&q);
    assert_true(st_footprint_overlap(&fp, &fq));
    assert_false(st_footprint_covers(&fp, &fq));
}

/* A 1-D unit-stride view takes a shortcut in st_footprint_of; it must give
 * what the general computation gives for the same bytes written as a
 * [1, n] view (the lattice, range and density, level by level). */
static void test_vector_shortcut_matches_general_path(void **state) {
    (void)state;
    for (size_t d = 0; d < sizeof dtypes; d++) {
        for (uint64_t off = 0; off < 20; off++) {
            for (int64_t n = 1; n <= 9; n++) {
                int64_t shape1[1] = {n}, stride1[1] = {1};
                int64_t shape2[2] = {1, n}, stride2[2] = {n, 1};
                strata_tensor v = mk(dtypes[d], off, 1, shape1, stride1);
                strata_tensor g = mk(dtypes[d], off, 2, shape2, stride2);
                st_footprint a, b;
                st_footprint_of(&v, &a);
                st_footprint_of(&g, &b);
                assert_int_equal(a.lo, b.lo);
                assert_int_equal(a.hi, b.hi);
                assert_int_equal(a.dense, b.dense);
                assert_int_equal(a.offset, b.offset);
                assert_int_equal(a.elem, b.elem);
                assert_int_equal(a.nlev, b.nlev);
                for (int i = 0; i < a.nlev; i++) {
                    assert_int_equal(a.lv[i], b.lv[i]);
                    assert_int_equal(a.box_lo[i], b.box_lo[i]);
                    assert_int_equal(a.box_n[i], b.box_n[i]);
                }
                assert_int_equal(a.rank, 1);
                assert_int_equal(a.shape[0], n);
                assert_int_equal(a.strides[0], 1);
                for (int k = 1; k < STRATA_MAX_RANK; k++)
                    assert_true(a.shape[k] == 0 && a.strides[k] == 0);
                assert_true(st_footprint_overlap(&a, &b) && st_footprint_covers(&a, &b) &&
                            st_footprint_covers(&b, &a));
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_shortcut_matches_general_path),
        cmocka_unit_test(test_basic_fields),
        cmocka_unit_test(test_empty_views),
        cmocka_unit_test(test_views_overlap_of_vectors_is_their_byte_ranges),
        cmocka_unit_test(test_matrix_tiles),
        cmocka_unit_test(test_interleaved_and_partial),
        cmocka_unit_test(test_random_views_brute_force),
        cmocka_unit_test(test_subviews_exact),
        cmocka_unit_test(test_mixed_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
