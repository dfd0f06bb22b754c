/* tests/unit/test_size_extremes.c - every public call that takes a size,
 * shape, stride or offset, fed the extremes (0, 1, 2^31, 2^32, 2^62,
 * 2^63 - 1, INT64_MIN and neighbours).
 *
 * A call either succeeds with a result that is right (a view that lies inside
 * its memory, a runtime allocation of exactly numel * elem bytes), or fails
 * with STRATA_EINVAL / STRATA_ENOMEM / STRATA_ECAPACITY and a message; it
 * never wraps around, and under UBSan never overflows. Views are judged
 * against an independent oracle that computes in 128 bits with saturation. */
#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#define BUF_BYTES 64
#define RING_BYTES (1u << 20) /* each heap ring of the fixture worker */

static const int64_t extremes[] = {
    0,
    1,
    2,
    (int64_t)1 << 31,
    ((int64_t)1 << 31) + 1,
    (int64_t)1 << 32,
    (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1,
    INT64_MAX - 1,
    INT64_MAX,
    -1,
    INT64_MIN,
};
#define NEXT ((int)(sizeof extremes / sizeof extremes[0]))

/* ---- the oracle --------------------------------------------------------------- */

typedef unsigned __int128 u128;
#define SAT ((u128)1 << 100) /* far past any buffer; products below stay exact */

static u128 sat_add(u128 a, u128 b) {
    return a >= SAT || b >= SAT || a + b >= SAT ? SAT : a + b;
}

static u128 sat_mul(u128 a, u128 b) {
    if (a == 0 || b == 0)
        return 0;
    if (a >= SAT || b >= SAT || a > SAT / b)
        return SAT;
    return a * b;
}

/* Does a view with these fields lie inside `nbytes`? (-1: the fields are invalid.) */
static int oracle_fits(uint64_t offset, int rank, const int64_t *shape, const int64_t *strides,
                       uint64_t elem, uint64_t nbytes) {
    for (int k = 0; k < rank; k++)
        if (shape[k] < 1 || strides[k] < 1)
            return -1;
    u128 last = 0;
    for (int k = 0; k < rank; k++)
        last = sat_add(last, sat_mul((u128)(shape[k] - 1), (u128)strides[k]));
    u128 end = sat_add((u128)offset, sat_mul(sat_add(last, 1), elem));
    return end <= nbytes;
}

/* Elements of a shape; 0 if a dimension is below 1 (saturating). */
static u128 oracle_numel(int rank, const int64_t *shape) {
    u128 n = 1;
    for (int k = 0; k < rank; k++) {
        if (shape[k] < 1)
            return 0;
        n = sat_mul(n, (u128)shape[k]);
    }
    return n;
}

/* Row-major strides in 128 bits; -1 if one does not fit in int64. */
static int oracle_row_major(int rank, const int64_t *shape, int64_t *strides) {
    u128 s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        if (s > (u128)INT64_MAX)
            return -1;
        strides[k] = (int64_t)s;
        s = sat_mul(s, shape[k] > 0 ? (u128)shape[k] : 0);
    }
    return 0;
}

static void assert_fails_cleanly(int rc, const char *call) {
    if (rc != STRATA_EINVAL && rc != STRATA_ENOMEM && rc != STRATA_ECAPACITY)
        fail_msg("%s: unexpected status %s: %s", call, strata_status_name(rc),
                 strata_error_message());
    assert_true(strata_error_message()[0] != '\0');
}

/* ---- host buffers --------------------------------------------------------------- */

/* The fixture's worker: one sub worker ("noop" is its task), 1 MiB heap
 * rings, one BUF_BYTES buffer. */
typedef ts_worker fixture;

static fixture *make(void) {
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ts_worker_opts o;
    ts_worker_opts_init(&o);
    o.cfg.sub_workers = 1;
    o.cfg.heap_ring_bytes = RING_BYTES;
    o.buffers[0] = BUF_BYTES;
    ts_worker_open(f, &o);
    return f;
}

static void destroy(fixture *f) {
    ts_worker_close(f);
    free(f);
}

static void buffer_sizes_at_the_extremes(void **state) {
    (void)state;
    fixture *f = make();
    static const uint64_t sizes[] = {0, (uint64_t)1 << 62, (uint64_t)INT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        strata_buffer *b = (strata_buffer *)1;
        int rc = strata_buffer_create(f->w, (size_t)sizes[i], &b);
        assert_fails_cleanly(rc, "strata_buffer_create");
        assert_null(b);
    }
    strata_buffer *b;
    assert_ok(strata_buffer_create(f->w, 1, &b));
    assert_int_equal(strata_buffer_size(b), 1);
    strata_buffer_destroy(b);
    char mem[8];
    assert_status(STRATA_EINVAL, strata_buffer_wrap(f->w, mem, 0, &b));
    destroy(f);
}

/* Every rank-1 and rank-2 combination of extreme shapes, strides (or
 * row-major) and offsets, on every element size. */
static void views_at_the_extremes_match_the_oracle(void **state) {
    (void)state;
    fixture *f = make();
    static const strata_dtype dtypes[] = {STRATA_U8, STRATA_I32, STRATA_F64};
    static const uint64_t offsets[] = {0,         1, 63, 64, (uint64_t)1 << 32, (uint64_t)INT64_MAX,
                                       UINT64_MAX};
    long checked = 0;
    for (size_t d = 0; d < 3; d++)
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
            for (int rank = 1; rank <= 2; rank++)
                for (int s0 = 0; s0 < NEXT; s0++)
                    for (int s1 = 0; s1 < (rank == 2 ? NEXT : 1); s1++)
                        for (int t0 = -1; t0 < NEXT; t0++) /* -1: row-major */
                            for (int t1 = 0; t1 < (rank == 2 && t0 >= 0 ? NEXT : 1); t1++) {
                                int64_t shape[2] = {extremes[s0], extremes[s1]};
                                int64_t strides[2] = {t0 >= 0 ? extremes[t0] : 0, extremes[t1]};
                                int64_t eff[2];
                                int row_major_ok = 1;
                                if (t0 < 0) {
                                    row_major_ok = oracle_row_major(rank, shape, eff) == 0;
                                } else {
                                    eff[0] = strides[0];
                                    eff[1] = strides[1];
                                }
                                uint64_t elem = strata_dtype_size(dtypes[d]);
                                int fits = row_major_ok ? oracle_fits(offsets[o], rank, shape, eff,
                                                                      elem, BUF_BYTES)
                                                        : 0;
                                if (t0 < 0) /* a bad dimension beats row-major overflow */
                                    for (int k = 0; k < rank; k++)
                                        if (shape[k] < 1)
                                            fits = -1;
                                strata_tensor t;
                                int rc = strata_tensor_view(f->buf[0], offsets[o], dtypes[d], rank,
                                                            shape, t0 >= 0 ? strides : NULL, &t);
                                if (fits == 1) {
                                    if (rc != STRATA_OK)
                                        fail_msg("view rank %d shape {%lld,%lld} refused: %s", rank,
                                                 (long long)shape[0], (long long)shape[1],
                                                 strata_error_message());
                                    for (int k = 0; k < rank; k++) {
                                        assert_int_equal(t.shape[k], shape[k]);
                                        assert_int_equal(t.strides[k], eff[k]);
                                    }
                                    assert_int_equal(t.offset, offsets[o]);
                                } else {
                                    if (rc != STRATA_EINVAL)
                                        fail_msg("view rank %d shape {%lld,%lld} strides "
                                                 "{%lld,%lld} offset %llu elem %llu: %s, "
                                                 "expected STRATA_EINVAL",
                                                 rank, (long long)shape[0], (long long)shape[1],
                                                 (long long)strides[0], (long long)strides[1],
                                                 (unsigned long long)offsets[o],
                                                 (unsigned long long)elem, strata_status_name(rc));
                                    assert_true(strata_error_message()[0] != '\0');
                                }
                                checked++;
                            }
    assert_true(checked > 10000);
    destroy(f);
}

/* The reproducer: five terms near 2^126 times 8 bytes pass 2^128. */
static void view_whose_extent_wraps_128_bits_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    strata_buffer *small;
    assert_ok(strata_buffer_create(f->w, 8, &small));
    int64_t shape[5], strides[5];
    for (int k = 0; k < 5; k++) {
        shape[k] = ((int64_t)1 << 62) + 1;
        strides[k] = (int64_t)1 << 62;
    }
    strata_tensor t;
    assert_status(STRATA_EINVAL, strata_tensor_view(small, 0, STRATA_F64, 2, shape, strides, &t));
    assert_status(STRATA_EINVAL, strata_tensor_view(small, 0, STRATA_F64, 5, shape, strides, &t));
    /* Row-major strides of a huge shape: refused, with the right reason. */
    int64_t big[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 2};
    assert_status(STRATA_EINVAL, strata_tensor_contiguous(small, STRATA_U8, 3, big, &t));
    assert_non_null(strstr(strata_error_message(), "does not fit"));
    assert_null(strstr(strata_error_message(), "stride 0 is 0"));
    strata_buffer_destroy(small);
    destroy(f);
}

/* ---- submit: hand-made views and OUT tensors without memory ------------------------ */

typedef struct submit_case {
    fixture *f;
    strata_tensor t;
    strata_tag tag;
    int rc;
    strata_tensor written; /* the view the submit wrote back (OUT without memory) */
} submit_case;

static int orch_submit_one(strata_orch *o, void *arg) {
    submit_case *c = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_tensor(&a, &c->t, c->tag));
    c->rc = strata_orch_submit_sub(o, c->f->noop, &a);
    c->written = a.tensors[0];
    return STRATA_OK;
}

static int submit_tensor(fixture *f, const strata_tensor *t, strata_tag tag, strata_tensor *w) {
    submit_case c = {f, *t, tag, 0, {0}};
    assert_ok(strata_worker_run(f->w, orch_submit_one, &c));
    if (w)
        *w = c.written;
    return c.rc;
}

/* A view built legally, then its fields changed by hand (the struct is
 * public): the submit's own bounds check must catch every wrap. */
static void hand_made_views_at_the_extremes_match_the_oracle(void **state) {
    (void)state;
    fixture *f = make();
    int64_t one = 1;
    strata_tensor base;
    assert_ok(strata_tensor_view(f->buf[0], 0, STRATA_F64, 1, &one, NULL, &base));
    for (int rank = 1; rank <= 5; rank += 4)
        for (int s = 0; s < NEXT; s++)
            for (int st = 0; st < NEXT; st++)
                for (int o = 0; o < 3; o++) {
                    strata_tensor t = base;
                    t.rank = (uint8_t)rank;
                    for (int k = 0; k < rank; k++) {
                        t.shape[k] = extremes[s];
                        t.strides[k] = extremes[st];
                    }
                    t.offset = o == 0 ? 0 : o == 1 ? (uint64_t)INT64_MAX : UINT64_MAX - 7;
                    int fits = oracle_fits(t.offset, rank, t.shape, t.strides, 8, BUF_BYTES);
                    int rc = submit_tensor(f, &t, STRATA_INOUT, NULL);
                    if (fits == 1)
                        assert_ok(rc);
                    else if (rc != STRATA_EINVAL)
                        fail_msg("hand-made view rank %d shape %lld stride %lld offset %llu: %s",
                                 rank, (long long)t.shape[0], (long long)t.strides[0],
                                 (unsigned long long)t.offset, strata_status_name(rc));
                }
    destroy(f);
}

static strata_tensor no_memory(strata_dtype dtype, int rank, const int64_t *shape) {
    strata_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = (uint8_t)dtype;
    t.rank = (uint8_t)rank;
    for (int k = 0; k < rank; k++)
        t.shape[k] = shape[k];
    return t;
}

/* The reproducer: 2^61 F64 elements are 2^64 bytes (wrapped to 0 once, and
 * a task saw base == NULL); 2^61 + 128 wrapped to a 1 KiB buffer. */
static void out_tensor_whose_size_wraps_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    int64_t n = (int64_t)1 << 61;
    strata_tensor t = no_memory(STRATA_F64, 1, &n);
    assert_status(STRATA_EINVAL, submit_tensor(f, &t, STRATA_OUT, NULL));
    assert_non_null(strstr(strata_error_message(), "tensor 0"));
    assert_non_null(strstr(strata_error_message(), "2305843009213693952"));
    n += 128;
    t = no_memory(STRATA_F64, 1, &n);
    assert_status(STRATA_EINVAL, submit_tensor(f, &t, STRATA_OUT, NULL));
    destroy(f);
}

/* Pieces that fit 64 bits alone but not together. */
static int orch_four_quarters(strata_orch *o, void *arg) {
    submit_case *c = arg;
    int64_t quarter = (int64_t)1 << 62;
    strata_tensor t = no_memory(STRATA_U8, 1, &quarter);
    strata_task_args a;
    strata_args_init(&a);
    for (int i = 0; i < 4; i++)
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_OUT));
    c->rc = strata_orch_submit_sub(o, c->f->noop, &a);
    return STRATA_OK;
}

static void out_tensors_whose_sum_wraps_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    submit_case c = {f, {0}, STRATA_OUT, 0, {0}};
    assert_ok(strata_worker_run(f->w, orch_four_quarters, &c));
    assert_status(STRATA_EINVAL, c.rc);
    assert_non_null(strstr(strata_error_message(), "together"));
    destroy(f);
}

/* Extreme shapes for OUT tensors without memory: OK only with a buffer of
 * exactly numel * elem bytes, contiguous strides and real memory. */
static void out_tensors_at_the_extremes(void **state) {
    (void)state;
    fixture *f = make();
    for (int rank = 1; rank <= 3; rank++)
        for (int s = 0; s < NEXT; s++)
            for (int s2 = 0; s2 < 4; s2++) {
                int64_t shape[3] = {extremes[s], extremes[s2], extremes[(s + s2) % NEXT]};
                strata_tensor t = no_memory(STRATA_I32, rank, shape), w;
                int rc = submit_tensor(f, &t, STRATA_OUT, &w);
                u128 numel = oracle_numel(rank, shape);
                if (numel != 0 && numel * 4 <= RING_BYTES) /* fits the ring: must succeed */
                    assert_ok(rc);
                if (rc != STRATA_OK) {
                    assert_fails_cleanly(rc, "strata_orch_submit_sub (OUT without memory)");
                    continue;
                }
                assert_true(numel != 0 && numel * 4 <= RING_BYTES);
                assert_non_null(w.base);
                assert_int_equal(w.buffer_bytes, (uint64_t)(numel * 4));
                int64_t rm[3];
                assert_int_equal(oracle_row_major(rank, shape, rm), 0);
                for (int k = 0; k < rank; k++)
                    assert_int_equal(w.strides[k], rm[k]);
            }
    destroy(f);
}

/* ---- strata_orch_alloc --------------------------------------------------------------- */

typedef struct alloc_case {
    int rank;
    int64_t shape[STRATA_MAX_RANK];
    strata_dtype dtype;
    int rc;
    strata_tensor t;
} alloc_case;

static int orch_alloc_one(strata_orch *o, void *arg) {
    alloc_case *c = arg;
    c->rc = strata_orch_alloc(o, c->rank, c->shape, c->dtype, &c->t);
    return STRATA_OK;
}

/* The reproducer: 2^61 F64 elements gave STRATA_OK and 1024 bytes. */
static void alloc_whose_size_wraps_is_einval(void **state) {
    (void)state;
    fixture *f = make();
    alloc_case c = {1, {(int64_t)1 << 61}, STRATA_F64, 0, {0}};
    assert_ok(strata_worker_run(f->w, orch_alloc_one, &c));
    assert_status(STRATA_EINVAL, c.rc);
    /* A signed overflow in the stride computation once (UBSan). */
    alloc_case d = {3, {(int64_t)1 << 40, (int64_t)1 << 40, 1 << 20}, STRATA_U8, 0, {0}};
    assert_ok(strata_worker_run(f->w, orch_alloc_one, &d));
    assert_status(STRATA_EINVAL, d.rc);
    destroy(f);
}

static void allocs_at_the_extremes(void **state) {
    (void)state;
    fixture *f = make();
    for (int rank = 1; rank <= 5; rank += 2)
        for (int s = 0; s < NEXT; s++)
            for (int s2 = 0; s2 < NEXT; s2++) {
                alloc_case c = {rank, {0}, STRATA_F64, 0, {0}};
                for (int k = 0; k < rank; k++)
                    c.shape[k] = k == 0 ? extremes[s] : extremes[s2];
                assert_ok(strata_worker_run(f->w, orch_alloc_one, &c));
                u128 numel = oracle_numel(rank, c.shape);
                if (numel != 0 && numel * 8 <= RING_BYTES) /* fits the ring: must succeed */
                    assert_ok(c.rc);
                if (c.rc != STRATA_OK) {
                    assert_fails_cleanly(c.rc, "strata_orch_alloc");
                    continue;
                }
                assert_true(numel != 0 && numel * 8 <= RING_BYTES);
                assert_non_null(c.t.base);
                assert_int_equal(c.t.buffer_bytes, (uint64_t)(numel * 8));
            }
    destroy(f);
}

/* ---- the chip level ------------------------------------------------------------------ */

static void chip_sizes_at_the_extremes(void **state) {
    (void)state;
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    strata_chip *chip;
    assert_ok(strata_chip_open(&cc, &chip));
    /* 2^31 and 2^32 are legal and would commit gigabytes: not tried here. */
    static const uint64_t huge[] = {0, (uint64_t)1 << 62, (uint64_t)INT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        void *p = NULL;
        int rc = strata_chip_malloc(chip, huge[i], &p);
        assert_true(rc != STRATA_OK);
        assert_true(strata_error_message()[0] != '\0');
    }
    void *dev;
    assert_ok(strata_chip_malloc(chip, BUF_BYTES, &dev));
    char host[BUF_BYTES] = {0};
    static const uint64_t lens[] = {BUF_BYTES + 1, (uint64_t)1 << 32, (uint64_t)INT64_MAX,
                                    UINT64_MAX};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        assert_true(strata_chip_copy_to(chip, dev, host, lens[i]) != STRATA_OK);
        assert_true(strata_chip_copy_from(chip, host, dev, lens[i]) != STRATA_OK);
    }
    for (int s = 0; s < NEXT; s++)
        for (int s2 = 0; s2 < NEXT; s2++) {
            int64_t shape[2] = {extremes[s], extremes[s2]}, rm[2];
            strata_tensor t;
            int rc = strata_chip_tensor(dev, BUF_BYTES, STRATA_I32, 2, shape, &t);
            int fits = oracle_row_major(2, shape, rm) == 0
                           ? oracle_fits(0, 2, shape, rm, 4, BUF_BYTES)
                           : (shape[0] < 1 || shape[1] < 1 ? -1 : 0);
            if (fits == 1)
                assert_ok(rc);
            else
                assert_status(STRATA_EINVAL, rc);
        }
    assert_ok(strata_chip_free(chip, dev));
    strata_chip_destroy(chip);
}

/* ---- worker configuration and the worker-level chip calls --------------------------- */

static void config_sizes_at_the_extremes(void **state) {
    (void)state;
    static const uint64_t rings[] = {0,
                                     1024,
                                     (uint64_t)1 << 31,
                                     (uint64_t)1 << 62,
                                     (uint64_t)INT64_MAX & ~(uint64_t)1023,
                                     UINT64_MAX & ~(uint64_t)1023,
                                     1023};
    /* 2^24 is legal but touches gigabytes of slots: not tried here. */
    static const uint32_t windows[] = {0, 1, 2, 3, (1u << 24) + 1, 1u << 31, UINT32_MAX};
    for (size_t i = 0; i < sizeof rings / sizeof rings[0]; i++)
        for (size_t j = 0; j < sizeof windows / sizeof windows[0]; j++) {
            strata_worker_config cfg;
            strata_worker_config_init(&cfg);
            cfg.sub_workers = 1;
            cfg.heap_ring_bytes = rings[i];
            cfg.task_window = windows[j];
            strata_worker *w = NULL;
            int rc = strata_worker_create(&cfg, &w);
            if (rc == STRATA_OK)
                rc = strata_worker_init(w);
            if (rc != STRATA_OK)
                assert_fails_cleanly(rc, "strata_worker_create/init");
            int valid_window =
                windows[j] >= 2 && windows[j] <= (1u << 24) && (windows[j] & (windows[j] - 1)) == 0;
            if (!valid_window || rings[i] % 1024)
                assert_status(STRATA_EINVAL, rc);
            else if (rings[i] <= 1024) /* valid and small: must come up */
                assert_ok(rc);
            strata_worker_destroy(w);
        }
}

static void worker_chip_calls_at_the_extremes(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    int chip;
    assert_ok(strata_worker_add_chip(w, &cc, &chip));
    assert_ok(strata_worker_init(w));
    strata_buffer *b;
    assert_ok(strata_worker_chip_malloc(w, chip, BUF_BYTES, &b));
    char host[BUF_BYTES] = {0};
    static const uint64_t offs[] = {0,
                                    1,
                                    BUF_BYTES,
                                    BUF_BYTES + 1,
                                    (uint64_t)1 << 32,
                                    (uint64_t)INT64_MAX,
                                    UINT64_MAX - 1,
                                    UINT64_MAX};
    static const uint64_t lens[] = {0,         1, BUF_BYTES, BUF_BYTES + 1, (uint64_t)INT64_MAX,
                                    UINT64_MAX};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
        for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) {
            int fits = (u128)offs[i] + lens[j] <= BUF_BYTES && lens[j] <= sizeof host;
            int rc_to = strata_worker_chip_copy_to(w, b, offs[i], host, (size_t)lens[j]);
            int rc_from = strata_worker_chip_copy_from(w, b, offs[i], host, (size_t)lens[j]);
            if (fits) {
                assert_ok(rc_to);
                assert_ok(rc_from);
            } else {
                assert_status(STRATA_EINVAL, rc_to);
                assert_status(STRATA_EINVAL, rc_from);
            }
        }
    for (int s = 0; s < NEXT; s++)
        for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
            int64_t shape[1] = {extremes[s]}, rm[1] = {1};
            strata_tensor t;
            int rc = strata_worker_chip_tensor(w, b, offs[i], STRATA_I32, 1, shape, NULL, &t);
            int fits = oracle_fits(offs[i], 1, shape, rm, 4, BUF_BYTES);
            if (fits == 1)
                assert_ok(rc);
            else
                assert_status(STRATA_EINVAL, rc);
        }
    static const uint64_t huge[] = {0, (uint64_t)1 << 62, (uint64_t)INT64_MAX, UINT64_MAX};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        strata_buffer *x = NULL;
        assert_true(strata_worker_chip_malloc(w, chip, (size_t)huge[i], &x) != STRATA_OK);
        assert_null(x);
    }
    assert_ok(strata_worker_chip_free(w, b));
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buffer_sizes_at_the_extremes),
        cmocka_unit_test(views_at_the_extremes_match_the_oracle),
        cmocka_unit_test(view_whose_extent_wraps_128_bits_is_einval),
        cmocka_unit_test(hand_made_views_at_the_extremes_match_the_oracle),
        cmocka_unit_test(out_tensor_whose_size_wraps_is_einval),
        cmocka_unit_test(out_tensors_whose_sum_wraps_is_einval),
        cmocka_unit_test(out_tensors_at_the_extremes),
        cmocka_unit_test(alloc_whose_size_wraps_is_einval),
        cmocka_unit_test(allocs_at_the_extremes),
        cmocka_unit_test(chip_sizes_at_the_extremes),
        cmocka_unit_test(config_sizes_at_the_extremes),
        cmocka_unit_test(worker_chip_calls_at_the_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
