// label: concurrency
/* tests/unit/test_task_view.c - what a task body and a chip program receive
 * (strata_task_view, include/strata/types.h).
 *
 * Owns: that a body may copy what it receives by assignment and read every
 * field of the copy, getting back exactly the arguments submitted, whether
 * strata stored them in the slot (up to 4 tensors), on the heap (more
 * tensors, group members), with helping off and on (a task lent to the
 * waiting thread gets its view from the same st_run_host_callable, so which
 * thread ran it is not forced here; test_helping forces that); the same for
 * a chip program on an L2 chip and on a chip of an L3
 * worker; and the view of a builder (strata_args_view) with the accessors.
 * The view points at the stored arguments only, so the asan stage also checks
 * that reading all of them reads nothing past them.
 * Must never: read a field through the original pointer after copying (the
 * copy is what is under test), or accept a body that did not run.
 */
#include "test_support.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/chip.h"

enum { REGION = 8192, NREGIONS = STRATA_MAX_TENSORS + 2, MAX_MEMBERS = 2 };

typedef struct vfx {
    strata_worker *w;
    strata_buffer *buf; /* one REGION per tensor: written arguments never overlap */
    strata_callable body;
    strata_task_args want[MAX_MEMBERS]; /* what each member was submitted with */
    int nmembers;
    _Atomic int ran;
} vfx;

/* Tensor i of a case: its own region, rank, dtype, strides and tag, so a view
 * that mixed up two arguments could not compare equal. */
static strata_tensor tensor_of(strata_buffer *b, int i, strata_tag *tag) {
    int rank = 1 + i % STRATA_MAX_RANK;
    int64_t shape[STRATA_MAX_RANK], strides[STRATA_MAX_RANK], step = 1 + i % 2;
    for (int k = rank - 1; k >= 0; k--) {
        shape[k] = 2;
        strides[k] = step;
        step *= 2 * shape[k];
    }
    strata_dtype dtype = (strata_dtype)(i % STRATA_DTYPE_COUNT);
    strata_tensor t;
    if (strata_tensor_view(b, (uint64_t)i * REGION + 8 * (uint64_t)(i % 3), dtype, rank, shape,
                           strides, &t) != STRATA_OK)
        fail_msg("tensor %d: %s", i, strata_error_message());
    static const strata_tag tags[] = {STRATA_IN, STRATA_OUT, STRATA_INOUT, STRATA_OUT_EXISTING,
                                      STRATA_NO_DEP};
    *tag = tags[i % 5];
    return t;
}

/* Arguments with `nt` tensors and `ns` scalars; scalar 0 is the member index. */
static void build(vfx *f, int member, int first, int nt, int ns, strata_task_args *a) {
    strata_args_init(a);
    for (int i = 0; i < nt; i++) {
        strata_tag tag;
        strata_tensor t = tensor_of(f->buf, first + i, &tag);
        assert_ok(strata_args_add_tensor(a, &t, tag));
    }
    for (int i = 0; i < ns; i++)
        assert_ok(strata_args_add_scalar(a, i == 0 ? (uint64_t)member : 0x1000u * i + 7));
}

/* Every field of `got` against `want`; the reason of the first mismatch in why. */
static int same_args(const strata_task_view *got, const strata_task_args *want, char *why,
                     size_t n) {
    if (got->ntensors != want->ntensors || got->nscalars != want->nscalars) {
        snprintf(why, n, "%u tensors and %u scalars, submitted %u and %u", got->ntensors,
                 got->nscalars, want->ntensors, want->nscalars);
        return 0;
    }
    for (uint32_t i = 0; i < got->ntensors; i++) {
        strata_tensor t = got->tensors[i]; /* every byte, the padding included */
        if (got->tags[i] != want->tags[i] || memcmp(&t, &want->tensors[i], sizeof t) != 0 ||
            strata_args_tensor(got, i) != &got->tensors[i] ||
            strata_args_data(got, i) != strata_tensor_data(&want->tensors[i])) {
            snprintf(why, n, "tensor %u differs from the one submitted", i);
            return 0;
        }
    }
    for (uint32_t i = 0; i < got->nscalars; i++)
        if (got->scalars[i] != want->scalars[i] || strata_args_scalar(got, i) != want->scalars[i]) {
            snprintf(why, n, "scalar %u is %llu, submitted %llu", i,
                     (unsigned long long)got->scalars[i], (unsigned long long)want->scalars[i]);
            return 0;
        }
    if (strata_args_tensor(got, got->ntensors) || strata_args_data(got, got->ntensors) ||
        strata_args_scalar(got, got->nscalars)) {
        snprintf(why, n, "an accessor past the last argument returned one");
        return 0;
    }
    return 1;
}

static const strata_task_args *wanted(vfx *f, const strata_task_view *copy) {
    uint64_t m = copy->nscalars ? copy->scalars[0] : 0;
    return m < (uint64_t)f->nmembers ? &f->want[m] : NULL;
}

static int copying_body(const strata_task_view *a, void *user) {
    vfx *f = user;
    strata_task_view copy = *a; /* by assignment; only the copy is read below */
    char why[160];
    const strata_task_args *want = wanted(f, &copy);
    atomic_fetch_add(&f->ran, 1);
    if (!want) {
        strata_task_set_error("scalar 0 names no member");
        return 1;
    }
    if (!same_args(&copy, want, why, sizeof why)) {
        strata_task_set_error("%s", why);
        return 1;
    }
    return 0;
}

static vfx *make(int help) {
    vfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = MAX_MEMBERS;
    cfg.help_while_waiting = help;
    assert_ok(strata_worker_create(&cfg, &f->w));
    assert_ok(strata_worker_register_sub(f->w, "copying", copying_body, f, &f->body));
    assert_ok(strata_worker_init(f->w));
    assert_ok(strata_buffer_create(f->w, (size_t)REGION * NREGIONS, &f->buf));
    return f;
}

static void destroy(vfx *f) {
    strata_buffer_destroy(f->buf);
    strata_worker_destroy(f->w);
    free(f);
}

static int submit_single(strata_orch *o, void *arg) {
    vfx *f = arg;
    strata_task_args a = f->want[0]; /* a builder may be assigned: it is full size */
    return strata_orch_submit_sub(o, f->body, &a);
}

static int submit_group(strata_orch *o, void *arg) {
    vfx *f = arg;
    strata_task_args a[MAX_MEMBERS];
    for (int m = 0; m < f->nmembers; m++)
        strata_args_copy(&a[m], &f->want[m]);
    return strata_orch_submit_sub_group(o, f->body, a, f->nmembers);
}

/* Stored in the slot (at most 4 tensors) or on the heap; on a sub worker
 * (help 0) or maybe on the waiting thread (help 1). */
static void a_body_copies_its_view_and_reads_every_argument(void **state) {
    (void)state;
    static const int cases[][2] = {{0, 0}, {0, 1},  {1, 1}, {3, 2},
                                   {4, 2}, {4, 16}, {5, 1}, {16, 16}};
    for (int help = 0; help <= 1; help++) {
        vfx *f = make(help);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            f->nmembers = 1;
            build(f, 0, (int)c % 2, cases[c][0], cases[c][1], &f->want[0]);
            atomic_store(&f->ran, 0);
            int rc = strata_worker_run(f->w, submit_single, f);
            if (rc != STRATA_OK)
                fail_msg("help %d, %d tensors, %d scalars: %s", help, cases[c][0], cases[c][1],
                         strata_error_message());
            assert_int_equal(atomic_load(&f->ran), 1);
        }
        destroy(f);
    }
}

/* Group members' arguments live in a heap array, one member after another. */
static void group_members_copy_their_own_views(void **state) {
    (void)state;
    vfx *f = make(1);
    f->nmembers = MAX_MEMBERS;
    build(f, 0, 0, 3, 1, &f->want[0]);
    build(f, 1, 3, 4, 3, &f->want[1]);
    assert_ok(strata_worker_run(f->w, submit_group, f));
    assert_int_equal(atomic_load(&f->ran), MAX_MEMBERS);
    destroy(f);
}

/* The view of a builder reads the builder itself (no copy), and the
 * accessors refuse indices past the counts and a NULL view. */
static void the_view_of_a_builder_points_into_it(void **state) {
    (void)state;
    vfx *f = make(0);
    f->nmembers = 1;
    build(f, 0, 0, 2, 3, &f->want[0]);
    strata_task_view v = strata_args_view(&f->want[0]);
    assert_ptr_equal(v.tensors, f->want[0].tensors);
    assert_ptr_equal(v.tags, f->want[0].tags);
    assert_ptr_equal(v.scalars, f->want[0].scalars);
    char why[160] = "";
    if (!same_args(&v, &f->want[0], why, sizeof why))
        fail_msg("%s", why);
    assert_null(strata_args_tensor(NULL, 0));
    assert_null(strata_args_data(NULL, 0));
    assert_int_equal(strata_args_scalar(NULL, 0), 0);
    destroy(f);
}

/* ---- chip programs ---------------------------------------------------------------- */

typedef struct chip_case {
    strata_task_args want;
    _Atomic int ran;
} chip_case;

static int copying_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    chip_case *c = user;
    strata_task_view copy = *a;
    char why[160];
    atomic_fetch_add(&c->ran, 1);
    if (!same_args(&copy, &c->want, why, sizeof why)) {
        strata_program_fail(ctx, "%s", why);
        return 1;
    }
    return 0;
}

/* L2: the lane keeps a copy of the arguments; the program gets a view of it. */
static void an_l2_chip_program_copies_its_view(void **state) {
    (void)state;
    vfx *f = make(0); /* only for its buffer's tensors: the program never touches them */
    chip_case c = {0};
    build(f, 0, 0, STRATA_MAX_TENSORS, STRATA_MAX_SCALARS, &c.want);
    strata_chip_config cfg;
    strata_chip_config_init(&cfg);
    strata_chip *chip;
    assert_ok(strata_chip_open(&cfg, &chip));
    strata_chip_program prog;
    strata_chip_program_desc d = {.name = "copying", .fn = copying_program, .user = &c};
    assert_ok(strata_chip_register_program(chip, &d, &prog));
    assert_ok(strata_chip_run_sync(chip, prog, &c.want, NULL));
    assert_int_equal(atomic_load(&c.ran), 1);
    strata_chip_destroy(chip);
    destroy(f);
}

typedef struct l3_case {
    strata_callable prog;
    int chip;
    chip_case *c;
} l3_case;

static int submit_chip_task(strata_orch *o, void *arg) {
    l3_case *l = arg;
    strata_task_args a = l->c->want;
    return strata_orch_submit_next_level(o, l->prog, &a, NULL, l->chip);
}

/* L3: the program reads the task's stored arguments (in the slot or on the
 * heap) through the chip's lane. */
static void an_l3_chip_program_copies_its_view(void **state) {
    (void)state;
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    strata_worker *w;
    assert_ok(strata_worker_create(&wc, &w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    l3_case l = {0};
    chip_case c = {0};
    l.c = &c;
    assert_ok(strata_worker_add_chip(w, &cc, &l.chip));
    strata_chip_program_desc d = {.name = "copying", .fn = copying_program, .user = &c};
    assert_ok(strata_worker_register_chip_program(w, &d, &l.prog));
    assert_ok(strata_worker_init(w));
    vfx host = {0};
    assert_ok(strata_buffer_create(w, (size_t)REGION * NREGIONS, &host.buf));
    static const int cases[][2] = {{4, 2}, {STRATA_MAX_TENSORS, STRATA_MAX_SCALARS}};
    for (int k = 0; k < 2; k++) {
        build(&host, 0, k, cases[k][0], cases[k][1], &c.want);
        atomic_store(&c.ran, 0);
        int rc = strata_worker_run(w, submit_chip_task, &l);
        if (rc != STRATA_OK)
            fail_msg("%d tensors: %s", cases[k][0], strata_error_message());
        assert_int_equal(atomic_load(&c.ran), 1);
    }
    strata_buffer_destroy(host.buf);
    strata_worker_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_body_copies_its_view_and_reads_every_argument),
        cmocka_unit_test(group_members_copy_their_own_views),
        cmocka_unit_test(the_view_of_a_builder_points_into_it),
        cmocka_unit_test(an_l2_chip_program_copies_its_view),
        cmocka_unit_test(an_l3_chip_program_copies_its_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
