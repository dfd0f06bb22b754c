// label: concurrency
/* tests/system/test_random_graphs.c - thousands of seeded random task graphs
 * run on a real Worker and checked against a sequential replay.
 *
 * Owns: the random graph generator, the reference model (the same task bodies
 * run in submission order on private copies) and the checks tying them
 * together: final buffer contents, which tasks may (or must) have run after an
 * injected failure, the run's error, and rejection of self-overlapping tasks.
 * Must never: look inside the engine (public API only, but for one hook that
 * counts capacity waits), assert timings, or accept a result the model
 * cannot explain.
 *
 * Graph shape: three main buffers of 64 int32 plus one constant buffer; each
 * task has 1-4 random views (contiguous, aligned tiles of 4 elements, strided
 * rank 1, strided rank 2) with random tags; some tasks are sub groups of two
 * members; scopes nest up to depth 4; strata_orch_alloc intermediates are
 * produced, transformed and consumed inside the scope that allocated them
 * (half of them are produced by an OUT tensor without memory instead). Scale
 * the amount of work with STRATA_TEST_SCALE (default 1; e.g. 0.1 for a quick
 * run).
 *
 * What is checked, per run: self-overlapping tasks are rejected with
 * STRATA_EINVAL; without injected failures every task runs and the run
 * completes with no error; with them the run fails with STRATA_ETASK and an
 * error naming a body that failed, later refused calls return the run's
 * error, no task conflicting (exact element overlap where either writes) with
 * an earlier task that did not succeed has started, a group runs all members
 * or none, and, unless the orchestration function cancelled the rest, every
 * task not even conservatively dependent on a failed one ran; and no body of
 * a task began before every body of an earlier conflicting task had ended
 * (a clock ticked at each body's start and end). Small task windows and heap
 * rings make submits wait for capacity while failures are handled. Per batch of
 * runs: the buffers equal a sequential replay of exactly the members that ran.
 *
 * Under an L4 (RG_L4_CHILDREN > 0, test_l4_random_graphs.c builds this source
 * again with it): the buffers are the L4's, every L3 child registers the body,
 * and each run of the L4 is one next-level task that runs the graph as one run
 * of a child (the children taken in turn); the checks are the same, on the
 * L4's run (its error carries the child run's). With process children
 * (RG_L4_CHILD_HOST, test_l4_random_graphs_process.c) the orchestration and
 * the bodies run in a child process: everything they read or write (context,
 * graphs, orchestration arguments, clock, counters) is shared memory mapped
 * before the fork (ts_shared_calloc), and the buffers are strata_buffers.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#include "core/hooks.h"

#ifndef RG_L4_CHILDREN
#define RG_L4_CHILDREN 0 /* the graphs run on an L3 worker */
#endif
#ifndef RG_L4_CHILD_HOST
#define RG_L4_CHILD_HOST STRATA_HOST_THREAD /* how the L4's children are hosted */
#endif

/* ---- sizes ---------------------------------------------------------------- */

#define NMAIN 3         /* buffers tasks read and write */
#define CONST_BUF NMAIN /* buffer index of the read-only constant buffer */
#define FIRST_INTER (NMAIN + 1)
#define ELEMS 64     /* int32 elements per buffer (one bit each in a mask) */
#define MAX_INTER 12 /* intermediates per graph */
#define MAX_BUFS (FIRST_INTER + MAX_INTER)
#define MAX_ARGS 4   /* tensor args per member */
#define MAX_TASKS 64 /* accepted tasks per graph */
#define MAX_OPS 256  /* ops (tasks, rejects, scopes, allocs) per graph */
#define MAX_DEPTH 4  /* open scopes, the run's outer scope included */
#define BATCH_MAX 4  /* runs submitted between two full checks */
#define WAIT_NS (120ull * 1000 * 1000 * 1000)

/* ---- graph description ------------------------------------------------------ */

/* One tensor argument: a view of buffer `buf` in element units. */
typedef struct view {
    uint8_t buf;
    uint8_t tag;
    uint8_t rank;
    int32_t off;
    int32_t shape[2];
    int32_t stride[2];
    uint64_t mask;  /* elements touched (exact footprint) */
    int32_t lo, hi; /* first and last element touched (bounding range) */
} view;

typedef struct member {
    int nargs;
    view args[MAX_ARGS];
    bool fail; /* the body returns failure without writing anything */
} member;

typedef struct task {
    int nmembers; /* 1 = single sub task, 2 = sub group */
    member m[2];
    /* Two of its args (or members' args) are disjoint element by element but
     * their byte ranges overlap: an engine that cannot prove the disjointness
     * may reject the task with STRATA_EINVAL; one that accepts it must run it. */
    bool may_reject;
} task;

typedef enum op_kind { OP_TASK, OP_REJECT, OP_SCOPE_BEGIN, OP_SCOPE_END, OP_ALLOC } op_kind;

typedef struct op {
    op_kind kind;
    int index; /* OP_TASK: task index; OP_REJECT: reject index; OP_ALLOC: intermediate */
} op;

typedef struct inter_desc {
    int rank;
    int64_t shape[2];
    bool auto_out; /* no alloc: its producer passes an OUT tensor without memory */
} inter_desc;

/* What the orchestration function observed while building the run. */
typedef struct build_log {
    bool submitted[MAX_TASKS]; /* the submit of the task returned STRATA_OK */
    int maybe_rejected;        /* tasks with may_reject the engine rejected */
    int stopped_rc;            /* status that made it stop submitting (0 = none) */
    char stopped_msg[512];     /* strata_error_message() at that point */
    int bad_reject;            /* a self-overlapping task was not rejected with EINVAL */
    int bad_reject_rc;
    int bad_reject_op;
    int reject_count;     /* rejections observed */
    int auto_out_missing; /* an OUT without memory came back without memory (task + 1) */
} build_log;

typedef struct graph {
    uint64_t seed;
    int nops;
    op ops[MAX_OPS];
    int ntasks;
    task tasks[MAX_TASKS];
    int nrejects;
    task rejects[MAX_OPS];
    int ninter;
    inter_desc inter[MAX_INTER];
    bool orch_returns_error; /* after a failed submit: return its status, or STRATA_OK */
    bool any_fail;
    uint32_t salt; /* mixes the run into the task arithmetic */

    /* written while the run builds and executes */
    strata_tensor inter_t[MAX_INTER];
    build_log log;
    uint8_t ran[MAX_TASKS][2]; /* 0 = never ran, 1 = ran and succeeded, 2 = ran and failed */
    /* ticks of the worker's body clock when each member's body began and
     * ended: a task conflicting with an earlier one must begin after it ended */
    uint64_t began[MAX_TASKS][2], ended[MAX_TASKS][2];
} graph;

/* ---- the task body, shared by the engine and the model --------------------- */

typedef struct body_arg {
    int tag;
    bool reads;  /* IN, INOUT, or NO_DEP on the constant buffer */
    bool writes; /* OUT, OUT_EXISTING, INOUT */
    int32_t *p;  /* element [0,0] */
    int rank;
    int64_t shape[2];
    int64_t stride[2];
} body_arg;

static int64_t elem_offset(const body_arg *a, int64_t k) {
    if (a->rank == 1)
        return k * a->stride[0];
    return (k / a->shape[1]) * a->stride[0] + (k % a->shape[1]) * a->stride[1];
}

static int64_t body_numel(const body_arg *a) {
    return a->rank == 1 ? a->shape[0] : a->shape[0] * a->shape[1];
}

/* Deterministic arithmetic: a digest of everything read, then every written
 * element becomes a function of the digest, its index, and (INOUT) its old value. */
static void apply_body(const body_arg *args, int n, uint32_t id, uint32_t member) {
    uint32_t s = id * 2654435761u + member * 97u + 1u;
    for (int j = 0; j < n; j++) {
        if (!args[j].reads)
            continue;
        for (int64_t k = 0; k < body_numel(&args[j]); k++)
            s = s * 31u + (uint32_t)args[j].p[elem_offset(&args[j], k)] + (uint32_t)k;
    }
    for (int j = 0; j < n; j++) {
        if (!args[j].writes)
            continue;
        for (int64_t k = 0; k < body_numel(&args[j]); k++) {
            int32_t *e = &args[j].p[elem_offset(&args[j], k)];
            if (args[j].tag == STRATA_INOUT)
                *e = (int32_t)((uint32_t)*e * 3u + s + (uint32_t)k);
            else
                *e = (int32_t)(s + (uint32_t)k * 13u + (uint32_t)j);
        }
    }
}

static bool tag_writes(int tag) {
    return tag == STRATA_OUT || tag == STRATA_INOUT || tag == STRATA_OUT_EXISTING;
}

/* ---- test context ------------------------------------------------------------ */

typedef struct test_ctx {
    strata_worker *w; /* the worker the buffers belong to and the runs go to */
    strata_callable body;
    strata_callable graph;       /* RG_L4_CHILDREN: the L4's orchestration callable */
    _Atomic uint64_t body_clock; /* ticks once at every body's start and end */
    _Atomic long capacity_waits; /* submits that waited for a slot or ring space */
    strata_buffer *bufs[NMAIN + 1];
    int32_t *const_base;
    graph *slots[BATCH_MAX]; /* graphs of the runs in the current batch */
    int32_t model[NMAIN + 1][ELEMS];
    int32_t model_inter[MAX_INTER][ELEMS];
} test_ctx;

/* Scalars of every member: graph slot, task index, member index, fail flag, salt. */
enum { SC_SLOT, SC_TASK, SC_MEMBER, SC_FAIL, SC_SALT, SC_COUNT };

static uint32_t arith_id(uint32_t task_index, uint32_t salt) {
    return task_index + salt * 1000u;
}

static int task_body(const strata_task_view *a, void *user) {
    test_ctx *ctx = user;
    uint64_t slot = strata_args_scalar(a, SC_SLOT);
    uint64_t t = strata_args_scalar(a, SC_TASK);
    uint64_t m = strata_args_scalar(a, SC_MEMBER);
    if (a->nscalars != SC_COUNT || slot >= BATCH_MAX || t >= MAX_TASKS || m > 1) {
        strata_task_set_error("task body got malformed scalars");
        return 1;
    }
    graph *g = ctx->slots[slot];
    g->began[t][m] = atomic_fetch_add(&ctx->body_clock, 1) + 1;
    if (strata_args_scalar(a, SC_FAIL)) {
        g->ran[t][m] = 2;
        g->ended[t][m] = atomic_fetch_add(&ctx->body_clock, 1) + 1;
        strata_task_set_error("injected failure t%u.m%u", (unsigned)t, (unsigned)m);
        return 1;
    }
    body_arg args[MAX_ARGS];
    if (a->ntensors > MAX_ARGS) {
        strata_task_set_error("task body got %u tensors", a->ntensors);
        return 1;
    }
    for (uint32_t j = 0; j < a->ntensors; j++) {
        const strata_tensor *tv = strata_args_tensor(a, j);
        body_arg *b = &args[j];
        b->tag = a->tags[j];
        b->p = strata_args_data(a, j);
        b->writes = tag_writes(b->tag);
        b->reads = b->tag == STRATA_IN || b->tag == STRATA_INOUT ||
                   (b->tag == STRATA_NO_DEP && tv->base == (void *)ctx->const_base);
        b->rank = tv->rank;
        for (int d = 0; d < tv->rank && d < 2; d++) {
            b->shape[d] = tv->shape[d];
            b->stride[d] = tv->strides[d];
        }
    }
    apply_body(args, (int)a->ntensors,
               arith_id((uint32_t)t, (uint32_t)strata_args_scalar(a, SC_SALT)), (uint32_t)m);
    g->ran[t][m] = 1;
    g->ended[t][m] = atomic_fetch_add(&ctx->body_clock, 1) + 1;
    return 0;
}

/* ---- random views ------------------------------------------------------------ */

static uint32_t rnd(uint64_t *s, uint32_t n) {
    return (uint32_t)(ts_rand(s) % n);
}

/* Element footprint of a view; false if two of its elements coincide. */
static bool view_footprint(view *v) {
    v->mask = 0;
    v->lo = ELEMS;
    v->hi = -1;
    bool distinct = true;
    int n0 = v->shape[0], n1 = v->rank == 2 ? v->shape[1] : 1;
    for (int i = 0; i < n0; i++)
        for (int j = 0; j < n1; j++) {
            int e = v->off + i * v->stride[0] + (v->rank == 2 ? j * v->stride[1] : 0);
            uint64_t bit = 1ull << e;
            if (v->mask & bit)
                distinct = false;
            v->mask |= bit;
            if (e < v->lo)
                v->lo = e;
            if (e > v->hi)
                v->hi = e;
        }
    return distinct;
}

/* A random view inside one of the 64-element buffers (always in bounds). */
static void random_buffer_view(uint64_t *s, int buf, view *v) {
    memset(v, 0, sizeof *v);
    v->buf = (uint8_t)buf;
    switch (rnd(s, 4)) {
    case 3: /* an aligned tile of 4 elements: tilings get the tensor map's cells */
        v->rank = 1;
        v->shape[0] = 4;
        v->stride[0] = 1;
        v->off = 4 * (int)rnd(s, ELEMS / 4);
        return;
    case 0: /* contiguous */
        v->rank = 1;
        v->shape[0] = 1 + (int)rnd(s, 24);
        v->stride[0] = 1;
        break;
    case 1: /* strided rank 1 */
        v->rank = 1;
        v->stride[0] = 1 + (int)rnd(s, 5);
        v->shape[0] =
            1 + (int)rnd(s, (ELEMS - 1) / v->stride[0] < 12 ? (ELEMS - 1) / v->stride[0] + 1 : 12);
        break;
    default: /* rank 2, random strides (may interleave) */
        v->rank = 2;
        v->shape[0] = 1 + (int)rnd(s, 4);
        v->shape[1] = 1 + (int)rnd(s, 6);
        v->stride[0] = 1 + (int)rnd(s, 20);
        v->stride[1] = 1 + (int)rnd(s, 4);
        break;
    }
    int span =
        (v->shape[0] - 1) * v->stride[0] + (v->rank == 2 ? (v->shape[1] - 1) * v->stride[1] : 0);
    if (span >= ELEMS) { /* shrink to fit */
        v->rank = 1;
        v->stride[0] = 1;
        v->shape[0] = 1 + (int)rnd(s, 16);
        span = v->shape[0] - 1;
    }
    v->off = (int)rnd(s, (uint32_t)(ELEMS - span));
}

static void whole_inter_view(const graph *g, int k, int tag, view *v) {
    memset(v, 0, sizeof *v);
    v->buf = (uint8_t)(FIRST_INTER + k);
    v->tag = (uint8_t)tag;
    v->rank = (uint8_t)g->inter[k].rank;
    v->shape[0] = (int)g->inter[k].shape[0];
    v->stride[0] = g->inter[k].rank == 2 ? (int)g->inter[k].shape[1] : 1;
    if (v->rank == 2) {
        v->shape[1] = (int)g->inter[k].shape[1];
        v->stride[1] = 1;
    }
    view_footprint(v);
}

/* Whether the overlap of two args of one task matters: either writes. NO_DEP
 * args are treated like writers here, so the generator never relies on how the
 * engine treats them in its overlap check. */
static bool pair_is_sensitive(const view *a, const view *b) {
    if (a->buf != b->buf)
        return false;
    return a->tag == STRATA_NO_DEP || b->tag == STRATA_NO_DEP || tag_writes(a->tag) ||
           tag_writes(b->tag);
}

/* Two args clash when they share an element and the pair is sensitive. */
static bool args_clash_in_task(const view *a, const view *b) {
    return pair_is_sensitive(a, b) && (a->mask & b->mask);
}

/* Disjoint elements, overlapping byte ranges: not provably disjoint for every engine. */
static bool args_interleave(const view *a, const view *b) {
    return pair_is_sensitive(a, b) && !(a->mask & b->mask) && a->lo <= b->hi && b->lo <= a->hi;
}

static bool clashes_with_task(const task *t, const view *v) {
    for (int m = 0; m < t->nmembers; m++)
        for (int j = 0; j < t->m[m].nargs; j++)
            if (args_clash_in_task(&t->m[m].args[j], v))
                return true;
    return false;
}

static bool task_has_interleaved_args(const task *t) {
    for (int ma = 0; ma < t->nmembers; ma++)
        for (int ja = 0; ja < t->m[ma].nargs; ja++)
            for (int mb = ma; mb < t->nmembers; mb++)
                for (int jb = mb == ma ? ja + 1 : 0; jb < t->m[mb].nargs; jb++)
                    if (args_interleave(&t->m[ma].args[ja], &t->m[mb].args[jb]))
                        return true;
    return false;
}

static int random_main_tag(uint64_t *s) {
    uint32_t r = rnd(s, 100);
    if (r < 32)
        return STRATA_IN;
    if (r < 47)
        return STRATA_OUT;
    if (r < 72)
        return STRATA_INOUT;
    if (r < 85)
        return STRATA_OUT_EXISTING;
    return STRATA_NO_DEP;
}

/* Intermediates alive (allocated in an open scope and already produced). */
typedef struct gen_state {
    int depth;
    int level_of_inter[MAX_INTER]; /* scope depth that allocated it, 0 = dead */
    bool produced[MAX_INTER];
} gen_state;

/* Adds one random arg to member m of t (not clashing with the task so far). */
static void add_random_arg(uint64_t *s, const graph *g, const gen_state *st, task *t, int m) {
    for (int attempt = 0; attempt < 8; attempt++) {
        view v;
        uint32_t r = rnd(s, 100);
        if (r < 12) {
            random_buffer_view(s, CONST_BUF, &v);
            v.tag = rnd(s, 2) ? STRATA_IN : STRATA_NO_DEP;
        } else if (r < 22) {
            int live[MAX_INTER], nlive = 0;
            for (int k = 0; k < g->ninter; k++)
                if (st->level_of_inter[k] && st->produced[k])
                    live[nlive++] = k;
            if (!nlive)
                continue;
            whole_inter_view(g, live[rnd(s, (uint32_t)nlive)], rnd(s, 3) ? STRATA_IN : STRATA_INOUT,
                             &v);
        } else {
            random_buffer_view(s, (int)rnd(s, NMAIN), &v);
            v.tag = (uint8_t)random_main_tag(s);
            bool distinct = view_footprint(&v);
            if (!distinct && v.tag != STRATA_IN)
                continue; /* a writer never aliases itself */
        }
        view_footprint(&v);
        if (clashes_with_task(t, &v))
            continue;
        t->m[m].args[t->m[m].nargs++] = v;
        return;
    }
}

static void random_task(uint64_t *s, graph *g, const gen_state *st, task *t, bool allow_group) {
    memset(t, 0, sizeof *t);
    t->nmembers = allow_group && rnd(s, 100) < 15 ? 2 : 1;
    for (int m = 0; m < t->nmembers; m++) {
        int want = 1 + (int)rnd(s, MAX_ARGS);
        for (int j = 0; j < want; j++)
            add_random_arg(s, g, st, t, m);
        if (t->m[m].nargs == 0) { /* always touch something */
            view v;
            random_buffer_view(s, CONST_BUF, &v);
            v.tag = STRATA_IN;
            view_footprint(&v);
            t->m[m].args[t->m[m].nargs++] = v;
        }
    }
}

/* A task whose two args overlap where one writes: submit must reject it. */
static void random_reject(uint64_t *s, task *t) {
    memset(t, 0, sizeof *t);
    t->nmembers = 1;
    view a, b;
    do {
        random_buffer_view(s, (int)rnd(s, NMAIN), &a);
        random_buffer_view(s, a.buf, &b);
        a.tag = (uint8_t)(rnd(s, 2) ? STRATA_IN : STRATA_INOUT);
        static const int writers[] = {STRATA_OUT, STRATA_INOUT, STRATA_OUT_EXISTING};
        b.tag = (uint8_t)writers[rnd(s, 3)];
        view_footprint(&a);
        view_footprint(&b);
    } while (!(a.mask & b.mask));
    bool swap = rnd(s, 2);
    t->m[0].args[0] = swap ? b : a;
    t->m[0].args[1] = swap ? a : b;
    t->m[0].nargs = 2;
}

static void push_op(graph *g, op_kind kind, int index) {
    g->ops[g->nops].kind = kind;
    g->ops[g->nops].index = index;
    g->nops++;
}

/* Allocates an intermediate in the current scope and submits its producer:
 * one task writing the whole intermediate (OUT) from random inputs. */
static void gen_intermediate(uint64_t *s, graph *g, gen_state *st) {
    int k = g->ninter++;
    inter_desc *d = &g->inter[k];
    if (rnd(s, 2)) {
        d->rank = 1;
        d->shape[0] = 4 + rnd(s, ELEMS - 3);
    } else {
        d->rank = 2;
        d->shape[0] = 1 + rnd(s, 8);
        d->shape[1] = 1 + rnd(s, 8);
    }
    d->auto_out = rnd(s, 2);
    if (!d->auto_out)
        push_op(g, OP_ALLOC, k);
    st->level_of_inter[k] = st->depth;
    task *t = &g->tasks[g->ntasks];
    memset(t, 0, sizeof *t);
    t->nmembers = 1;
    whole_inter_view(g, k, STRATA_OUT, &t->m[0].args[0]);
    t->m[0].nargs = 1;
    int extra = (int)rnd(s, 3);
    for (int j = 0; j < extra; j++)
        add_random_arg(s, g, st, t, 0);
    if (task_has_interleaved_args(t))
        t->m[0].nargs = 1; /* a producer must be accepted, or its readers would read garbage */
    push_op(g, OP_TASK, g->ntasks++);
    st->produced[k] = true;
}

static void gen_scope_end(graph *g, gen_state *st) {
    for (int k = 0; k < g->ninter; k++)
        if (st->level_of_inter[k] == st->depth)
            st->level_of_inter[k] = 0; /* its memory may be reclaimed now */
    st->depth--;
    push_op(g, OP_SCOPE_END, -1);
}

static void generate_graph(graph *g, uint64_t seed, int sub_workers, uint32_t salt) {
    memset(g, 0, sizeof *g);
    g->seed = seed;
    g->salt = salt;
    uint64_t s = seed | 1;
    gen_state st = {.depth = 1};
    int target = 4 + (int)rnd(&s, 40);
    bool failures = rnd(&s, 100) < 30;
    g->orch_returns_error = rnd(&s, 2);
    while (g->ntasks < target && g->nops < MAX_OPS - 2 * MAX_DEPTH - 2) {
        uint32_t r = rnd(&s, 100);
        if (r < 8 && st.depth < MAX_DEPTH) {
            push_op(g, OP_SCOPE_BEGIN, -1);
            st.depth++;
        } else if (r < 14 && st.depth > 1) {
            gen_scope_end(g, &st);
        } else if (r < 22 && g->ninter < MAX_INTER && g->ntasks + 1 < MAX_TASKS) {
            gen_intermediate(&s, g, &st);
        } else if (r < 27) {
            random_reject(&s, &g->rejects[g->nrejects]);
            push_op(g, OP_REJECT, g->nrejects++);
        } else if (r < 28 && g->ninter < MAX_INTER) {
            /* an intermediate no task ever uses */
            int k = g->ninter++;
            g->inter[k].rank = 1;
            g->inter[k].shape[0] = 1 + rnd(&s, ELEMS);
            push_op(g, OP_ALLOC, k);
        } else {
            random_task(&s, g, &st, &g->tasks[g->ntasks], sub_workers >= 2);
            g->tasks[g->ntasks].may_reject = task_has_interleaved_args(&g->tasks[g->ntasks]);
            push_op(g, OP_TASK, g->ntasks++);
        }
    }
    while (st.depth > 1)
        gen_scope_end(g, &st);
    if (failures) {
        int nfail = 1 + (int)rnd(&s, 2);
        for (int f = 0; f < nfail; f++) {
            task *t = &g->tasks[rnd(&s, (uint32_t)g->ntasks)];
            t->m[rnd(&s, (uint32_t)t->nmembers)].fail = true;
        }
        g->any_fail = true;
    }
}

/* ---- printing a graph (for reproductions) ------------------------------------- */

static const char *tag_name(int tag) {
    static const char *names[] = {"IN", "OUT", "INOUT", "OUT_EXISTING", "NO_DEP"};
    return tag >= 0 && tag <= 4 ? names[tag] : "?";
}

static void print_view(const view *v, const graph *g) {
    const char *bname = v->buf < NMAIN ? "buf" : v->buf == CONST_BUF ? "const" : "inter";
    int bidx = v->buf < NMAIN ? v->buf : v->buf == CONST_BUF ? 0 : v->buf - FIRST_INTER;
    if (v->buf >= FIRST_INTER && g->inter[bidx].auto_out)
        bname = "auto-inter"; /* produced by an OUT without memory */
    if (v->rank == 1)
        fprintf(stderr, " %s %s%d[off %d, shape %d, stride %d]", tag_name(v->tag), bname, bidx,
                v->off, v->shape[0], v->stride[0]);
    else
        fprintf(stderr, " %s %s%d[off %d, shape %dx%d, strides %d,%d]", tag_name(v->tag), bname,
                bidx, v->off, v->shape[0], v->shape[1], v->stride[0], v->stride[1]);
}

static void print_task(const char *what, int index, const task *t, const graph *g) {
    fprintf(stderr, "  %s %d:", what, index);
    for (int m = 0; m < t->nmembers; m++) {
        if (t->nmembers > 1)
            fprintf(stderr, " {m%d%s", m, t->m[m].fail ? " FAILS" : "");
        else if (t->m[m].fail)
            fprintf(stderr, " FAILS");
        for (int j = 0; j < t->m[m].nargs; j++)
            print_view(&t->m[m].args[j], g);
        if (t->nmembers > 1)
            fprintf(stderr, " }");
    }
    if (index < MAX_TASKS && what[0] == 't')
        fprintf(stderr, "   ran=%d,%d%s%s", g->ran[index][0], g->ran[index][1],
                t->may_reject ? " may-reject" : "",
                g->log.submitted[index] ? "" : " NOT-SUBMITTED");
    fprintf(stderr, "\n");
}

static void print_graph(const graph *g) {
    fprintf(stderr, "graph seed 0x%llx salt %u (%d tasks, %d ops, orch %s after a failed submit)\n",
            (unsigned long long)g->seed, g->salt, g->ntasks, g->nops,
            g->orch_returns_error ? "returns the error" : "returns OK");
    for (int i = 0; i < g->nops; i++) {
        const op *o = &g->ops[i];
        switch (o->kind) {
        case OP_TASK:
            print_task("task", o->index, &g->tasks[o->index], g);
            break;
        case OP_REJECT:
            print_task("reject", o->index, &g->rejects[o->index], g);
            break;
        case OP_SCOPE_BEGIN:
            fprintf(stderr, "  scope_begin\n");
            break;
        case OP_SCOPE_END:
            fprintf(stderr, "  scope_end\n");
            break;
        case OP_ALLOC:
            fprintf(stderr, "  strata_orch_alloc inter%d rank %d shape %lld x %lld\n", o->index,
                    g->inter[o->index].rank, (long long)g->inter[o->index].shape[0],
                    (long long)(g->inter[o->index].rank == 2 ? g->inter[o->index].shape[1] : 1));
            break;
        }
    }
}

/* ---- orchestration -------------------------------------------------------------- */

typedef struct orch_arg {
    test_ctx *ctx;
    graph *g;
    int slot;
    int child; /* RG_L4_CHILDREN: the child that runs it */
} orch_arg;

static int make_tensor(const orch_arg *oa, const view *v, strata_tensor *out) {
    if (v->buf >= FIRST_INTER) {
        int k = v->buf - FIRST_INTER;
        const inter_desc *d = &oa->g->inter[k];
        if (d->auto_out && oa->g->inter_t[k].base == NULL) {
            /* the producer: an OUT tensor without memory asks for runtime memory */
            memset(out, 0, sizeof *out);
            out->dtype = STRATA_I32;
            out->rank = (uint8_t)d->rank;
            for (int i = 0; i < d->rank; i++)
                out->shape[i] = d->shape[i];
            if (k % 2) { /* strides are optional here: half the producers give them */
                out->strides[0] = d->rank == 2 ? d->shape[1] : 1;
                out->strides[1] = d->rank == 2 ? 1 : 0;
            }
            return STRATA_OK;
        }
        *out = oa->g->inter_t[k];
        return STRATA_OK;
    }
    int64_t shape[2] = {v->shape[0], v->shape[1]};
    int64_t strides[2] = {v->stride[0], v->stride[1]};
    return strata_tensor_view(oa->ctx->bufs[v->buf], (uint64_t)v->off * 4, STRATA_I32, v->rank,
                              shape, strides, out);
}

static int fill_args(const orch_arg *oa, const member *m, uint64_t task_index, int member_index,
                     strata_task_args *a) {
    strata_args_init(a);
    for (int j = 0; j < m->nargs; j++) {
        strata_tensor t;
        STRATA_TRY(make_tensor(oa, &m->args[j], &t));
        STRATA_TRY(strata_args_add_tensor(a, &t, (strata_tag)m->args[j].tag));
    }
    const uint64_t sc[SC_COUNT] = {(uint64_t)oa->slot, task_index, (uint64_t)member_index, m->fail,
                                   oa->g->salt};
    for (int i = 0; i < SC_COUNT; i++)
        STRATA_TRY(strata_args_add_scalar(a, sc[i]));
    return STRATA_OK;
}

/* The submit wrote the runtime memory of an OUT without memory back into the
 * args: that view is the intermediate from now on. */
static void take_auto_out(const orch_arg *oa, const task *t, const strata_task_args *a,
                          uint64_t task_index) {
    graph *g = oa->g;
    for (int j = 0; j < t->m[0].nargs; j++) {
        const view *v = &t->m[0].args[j];
        if (v->buf < FIRST_INTER || !g->inter[v->buf - FIRST_INTER].auto_out ||
            g->inter_t[v->buf - FIRST_INTER].base != NULL)
            continue;
        g->inter_t[v->buf - FIRST_INTER] = a->tensors[j];
        if (a->tensors[j].base == NULL && !g->log.auto_out_missing)
            g->log.auto_out_missing = (int)task_index + 1;
    }
}

/* task_index >= MAX_TASKS marks a task that must never run (the body fails it). */
static int submit_task(strata_orch *o, const orch_arg *oa, const task *t, uint64_t task_index) {
    strata_task_args a[2];
    for (int m = 0; m < t->nmembers; m++)
        STRATA_TRY(fill_args(oa, &t->m[m], task_index, m, &a[m]));
    if (t->nmembers > 1)
        return strata_orch_submit_sub_group(o, oa->ctx->body, a, t->nmembers);
    int rc = strata_orch_submit_sub(o, oa->ctx->body, &a[0]);
    if (rc == STRATA_OK)
        take_auto_out(oa, t, &a[0], task_index);
    return rc;
}

static int run_op(strata_orch *o, orch_arg *oa, const op *p) {
    graph *g = oa->g;
    switch (p->kind) {
    case OP_TASK: {
        int rc = submit_task(o, oa, &g->tasks[p->index], (uint64_t)p->index);
        if (rc == STRATA_OK)
            g->log.submitted[p->index] = true;
        if (rc == STRATA_EINVAL && g->tasks[p->index].may_reject) {
            g->log.maybe_rejected++;
            return STRATA_OK; /* as if never planned; the model skips it */
        }
        return rc;
    }
    case OP_REJECT: {
        int rc = submit_task(o, oa, &g->rejects[p->index], MAX_TASKS + (uint64_t)p->index);
        if (rc == STRATA_EINVAL) {
            g->log.reject_count++;
            return STRATA_OK;
        }
        if (rc == STRATA_OK || !g->any_fail) {
            /* accepted, or refused for another reason in a run that cannot have failed */
            if (!g->log.bad_reject) {
                g->log.bad_reject = 1;
                g->log.bad_reject_rc = rc;
                g->log.bad_reject_op = p->index;
            }
            return STRATA_OK;
        }
        return rc; /* the run failed meanwhile: fail-fast may win over validation */
    }
    case OP_ALLOC: {
        const inter_desc *d = &g->inter[p->index];
        return strata_orch_alloc(o, d->rank, d->shape, STRATA_I32, &g->inter_t[p->index]);
    }
    case OP_SCOPE_BEGIN:
        return strata_orch_scope_begin(o);
    case OP_SCOPE_END:
        return strata_orch_scope_end(o);
    }
    return STRATA_EINVAL;
}

/* Executes the plan; on the first failing call it stops submitting (closing the
 * scopes it opened) and returns either that status or STRATA_OK. */
static int graph_orch(strata_orch *o, void *arg) {
    orch_arg *oa = arg;
    graph *g = oa->g;
    int depth = 1;
    for (int i = 0; i < g->nops; i++) {
        int rc = run_op(o, oa, &g->ops[i]);
        if (rc != STRATA_OK) {
            g->log.stopped_rc = rc;
            snprintf(g->log.stopped_msg, sizeof g->log.stopped_msg, "%s", strata_error_message());
            for (; depth > 1; depth--)
                (void)strata_orch_scope_end(o); /* may fail fast too; the run is failed already */
            return g->orch_returns_error ? rc : STRATA_OK;
        }
        if (g->ops[i].kind == OP_SCOPE_BEGIN)
            depth++;
        else if (g->ops[i].kind == OP_SCOPE_END)
            depth--;
    }
    return STRATA_OK;
}

/* Under an L4: the L4's run submits one task, whose child runs graph_orch with
 * the orch_arg named by the task's one scalar. A process child sees it (and
 * the graph, the context and the buffers it points to) at the same address:
 * all of it is shared memory mapped before the children were forked. */
static int child_graph_orch(strata_orch *o, void *arg) {
    (void)arg;
    const strata_task_view *ta = strata_orch_task_args(o);
    if (!ta || ta->nscalars != 1)
        return STRATA_EINVAL;
    return graph_orch(o, (void *)(uintptr_t)strata_args_scalar(ta, 0));
}

static int l4_graph_orch(strata_orch *o, void *arg) {
    orch_arg *oa = arg;
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)(uintptr_t)oa));
    return strata_orch_submit_next_level(o, oa->ctx->graph, &a, NULL, oa->child);
}

/* ---- checks ---------------------------------------------------------------------- */

/* Exact conflict: an element of one buffer both touch, where either writes. */
static bool views_conflict(const view *a, const view *b, bool exact) {
    if (a->tag == STRATA_NO_DEP || b->tag == STRATA_NO_DEP || a->buf != b->buf)
        return false;
    if (!tag_writes(a->tag) && !tag_writes(b->tag))
        return false;
    if (exact)
        return (a->mask & b->mask) != 0;
    return a->lo <= b->hi &&
           b->lo <= a->hi; /* bounding byte ranges: the most an engine may assume */
}

static bool tasks_conflict(const task *a, const task *b, bool exact) {
    for (int ma = 0; ma < a->nmembers; ma++)
        for (int ja = 0; ja < a->m[ma].nargs; ja++)
            for (int mb = 0; mb < b->nmembers; mb++)
                for (int jb = 0; jb < b->m[mb].nargs; jb++)
                    if (views_conflict(&a->m[ma].args[ja], &b->m[mb].args[jb], exact))
                        return true;
    return false;
}

static bool ran_ok(const graph *g, int t) {
    for (int m = 0; m < g->tasks[t].nmembers; m++)
        if (g->ran[t][m] != 1)
            return false;
    return true;
}

static bool ran_any(const graph *g, int t) {
    for (int m = 0; m < g->tasks[t].nmembers; m++)
        if (g->ran[t][m] != 0)
            return true;
    return false;
}

static bool ran_all(const graph *g, int t) {
    for (int m = 0; m < g->tasks[t].nmembers; m++)
        if (g->ran[t][m] == 0)
            return false;
    return true;
}

static bool error_names_a_failed_member(const graph *g, const char *err) {
    for (int t = 0; t < g->ntasks; t++)
        for (int m = 0; m < g->tasks[t].nmembers && g->log.submitted[t]; m++) {
            char needle[64];
            snprintf(needle, sizeof needle, "injected failure t%d.m%d", t, m);
            if (g->ran[t][m] == 2 && strstr(err, needle))
                return true;
        }
    return false;
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s: ", where);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            print_graph(g);                                                                        \
            fail_msg("random graph check failed (see above): %s", #cond);                          \
        }                                                                                          \
    } while (0)

/* No body of a task began before every body of an earlier conflicting task
 * (exact element overlap where either writes) had ended. */
static void check_order(const graph *g, const char *where) {
    const bool *sub = g->log.submitted;
    for (int t = 0; t < g->ntasks; t++)
        for (int u = t + 1; u < g->ntasks; u++) {
            if (!sub[t] || !sub[u] || !ran_any(g, t) || !ran_any(g, u) ||
                !tasks_conflict(&g->tasks[t], &g->tasks[u], true))
                continue;
            for (int mt = 0; mt < g->tasks[t].nmembers; mt++)
                for (int mu = 0; mu < g->tasks[u].nmembers; mu++)
                    CHECK(g->ended[t][mt] < g->began[u][mu],
                          "task %d member %d began (tick %llu) before the conflicting task %d "
                          "member %d ended (tick %llu)",
                          u, mu, (unsigned long long)g->began[u][mu], t, mt,
                          (unsigned long long)g->ended[t][mt]);
        }
}

/* Everything one finished run must satisfy, judged from what its bodies recorded. */
static void check_run(const graph *g, int rc_wait, int status, const char *err, const char *where) {
    const build_log *log = &g->log;
    const bool *sub = log->submitted;
    int n = g->ntasks;
    CHECK(!log->bad_reject,
          "reject %d (overlapping args where one writes) returned %s, not STRATA_EINVAL",
          log->bad_reject_op, strata_status_name(log->bad_reject_rc));
    CHECK(!log->auto_out_missing, "task %d: OUT without memory came back without memory",
          log->auto_out_missing - 1);
    CHECK(rc_wait == status, "strata_run_wait returned %s but strata_run_status says %s",
          strata_status_name(rc_wait), strata_status_name(status));
    if (!g->any_fail) {
        CHECK(log->stopped_rc == STRATA_OK, "a call failed in a run without failures: %s (%s)",
              strata_status_name(log->stopped_rc), log->stopped_msg);
        CHECK(status == STRATA_OK, "run failed without injected failures: %s: %s",
              strata_status_name(status), err);
        CHECK(err[0] == '\0', "completed run has error text \"%s\"", err);
        for (int t = 0; t < n; t++)
            CHECK(sub[t] || g->tasks[t].may_reject, "task %d was not submitted", t);
        for (int t = 0; t < n; t++)
            CHECK(!sub[t] || ran_ok(g, t), "task %d did not run in a run without failures", t);
        for (int t = 0; t < n; t++)
            CHECK(sub[t] || !ran_any(g, t), "task %d ran although its submit was refused", t);
        check_order(g, where);
        return;
    }
    bool any_failed_body = false, fail_submitted = false;
    for (int t = 0; t < n; t++) {
        CHECK(sub[t] || !ran_any(g, t), "task %d ran although its submit was refused", t);
        for (int m = 0; m < g->tasks[t].nmembers && sub[t]; m++) {
            any_failed_body |= g->ran[t][m] == 2;
            fail_submitted |= g->tasks[t].m[m].fail;
        }
    }
    if (!fail_submitted && !any_failed_body) { /* never reached an injected failure */
        CHECK(log->stopped_rc == STRATA_OK, "a call failed before any failure: %s (%s)",
              strata_status_name(log->stopped_rc), log->stopped_msg);
        CHECK(status == STRATA_OK && err[0] == '\0', "run failed (%s: %s) without a failed task",
              strata_status_name(status), err);
    } else {
        CHECK(any_failed_body, "a failing task was submitted but no body failed (status %s: %s)",
              strata_status_name(status), err);
        CHECK(status == STRATA_ETASK, "failed run reports %s, expected STRATA_ETASK (%s)",
              strata_status_name(status), err);
        CHECK(error_names_a_failed_member(g, err),
              "run error \"%s\" does not name a task whose body failed", err);
        if (log->stopped_rc != STRATA_OK) {
            CHECK(log->stopped_rc == status,
                  "a later call failed with %s, not the run's error %s (%s)",
                  strata_status_name(log->stopped_rc), strata_status_name(status),
                  log->stopped_msg);
            CHECK(strstr(log->stopped_msg, "injected failure") != NULL,
                  "fail-fast message \"%s\" is not the run's error", log->stopped_msg);
        }
    }
    /* A task that did not run to success is FAILED (failed, poisoned or cancelled):
     * nothing submitted after it that conflicts with it may have started. */
    for (int t = 0; t < n; t++) {
        if (!sub[t] || ran_ok(g, t))
            continue;
        for (int u = t + 1; u < n; u++)
            CHECK(!sub[u] || !(tasks_conflict(&g->tasks[t], &g->tasks[u], true) && ran_any(g, u)),
                  "task %d ran although it conflicts with task %d, which did not succeed", u, t);
    }
    for (int t = 0; t < n; t++)
        if (ran_any(g, t))
            CHECK(ran_all(g, t), "group task %d ran only some of its members", t);
    check_order(g, where);
    /* Without cancellation, every task not even possibly depending on a failed one runs. */
    if (log->stopped_rc == STRATA_OK || !g->orch_returns_error) {
        for (int u = 0; u < n; u++) {
            if (!sub[u] || ran_any(g, u))
                continue;
            bool excused = false;
            for (int t = 0; t < u && !excused; t++)
                excused =
                    sub[t] && !ran_ok(g, t) && tasks_conflict(&g->tasks[t], &g->tasks[u], false);
            CHECK(excused, "task %d never ran, yet it depends on no failed task", u);
        }
    }
}

/* ---- the reference model ---------------------------------------------------------- */

static int32_t *model_base(test_ctx *ctx, int buf) {
    return buf < FIRST_INTER ? ctx->model[buf] : ctx->model_inter[buf - FIRST_INTER];
}

/* Replays the members that ran successfully, in submission order. */
static void model_replay(test_ctx *ctx, const graph *g) {
    for (int k = 0; k < MAX_INTER; k++)
        for (int e = 0; e < ELEMS; e++)
            ctx->model_inter[k][e] = 0x5a5a5a5a; /* never read by a task that ran */
    for (int t = 0; t < g->ntasks; t++)
        for (int m = 0; m < g->tasks[t].nmembers && g->log.submitted[t]; m++) {
            if (g->ran[t][m] != 1)
                continue;
            const member *mb = &g->tasks[t].m[m];
            body_arg args[MAX_ARGS];
            for (int j = 0; j < mb->nargs; j++) {
                const view *v = &mb->args[j];
                args[j] = (body_arg){.tag = v->tag,
                                     .writes = tag_writes(v->tag),
                                     .reads = v->tag == STRATA_IN || v->tag == STRATA_INOUT ||
                                              (v->tag == STRATA_NO_DEP && v->buf == CONST_BUF),
                                     .p = model_base(ctx, v->buf) + v->off,
                                     .rank = v->rank,
                                     .shape = {v->shape[0], v->shape[1]},
                                     .stride = {v->stride[0], v->stride[1]}};
            }
            apply_body(args, mb->nargs, arith_id((uint32_t)t, g->salt), (uint32_t)m);
        }
}

/* ---- driver ------------------------------------------------------------------------ */

static double test_scale(void) {
    const char *s = getenv("STRATA_TEST_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 0 ? v : 1.0;
}

typedef struct worker_shape {
    uint32_t sub_workers;
    uint32_t depth;
    uint32_t task_window;     /* 0: the default */
    uint64_t heap_ring_bytes; /* 0: 1 MiB */
} worker_shape;

/* Counts capacity waits (the one internal seam this test uses: it only
 * proves that the small-capacity shapes really make submits wait). */
static void count_capacity_wait(strata_worker *w, st_hook_point at, uint64_t ref, void *ctx) {
    (void)w, (void)at, (void)ref;
    atomic_fetch_add(&((test_ctx *)ctx)->capacity_waits, 1);
}

/* The worker that runs the graphs: the body and the capacity hook. */
static int setup_graph_worker(strata_worker *w, void *arg) {
    test_ctx *ctx = arg;
    STRATA_TRY(strata_worker_register_sub(w, "random_body", task_body, ctx, &ctx->body));
    st_worker_set_hook(w, ST_HOOK_CAPACITY_WAIT, count_capacity_wait, ctx);
    return STRATA_OK;
}

/* An L4 whose RG_L4_CHILDREN children (L3s of config cfg, hosted as
 * RG_L4_CHILD_HOST) run the graphs. */
static void setup_l4(test_ctx *ctx, const strata_worker_config *cfg) {
    strata_worker_config l4;
    strata_worker_config_init(&l4);
    l4.level = 4;
    l4.sub_workers = 1;
    l4.pipeline_depth = cfg->pipeline_depth;
    assert_ok(strata_worker_create(&l4, &ctx->w));
    for (int k = 0; k < RG_L4_CHILDREN; k++) {
        strata_child_config cc;
        strata_child_config_init(&cc);
        cc.worker = *cfg;
        cc.host = RG_L4_CHILD_HOST;
        cc.setup = setup_graph_worker;
        cc.setup_user = ctx;
        int id;
        assert_ok(strata_worker_add_child(ctx->w, &cc, &id));
        assert_int_equal(id, k);
    }
    assert_ok(strata_worker_register_orch(ctx->w, "graph", child_graph_orch, NULL, &ctx->graph));
}

static void setup_worker(test_ctx *ctx, const worker_shape *ws) {
    memset(ctx, 0, sizeof *ctx);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = ws->sub_workers;
    cfg.sub_mode = TS_SUB_MODE;
    cfg.pipeline_depth = ws->depth;
    cfg.heap_ring_bytes = ws->heap_ring_bytes ? ws->heap_ring_bytes : 1u << 20;
    if (ws->task_window)
        cfg.task_window = ws->task_window;
    if (RG_L4_CHILDREN) {
        setup_l4(ctx, &cfg);
    } else {
        assert_ok(strata_worker_create(&cfg, &ctx->w));
        assert_ok(setup_graph_worker(ctx->w, ctx));
    }
    for (int b = 0; b <= NMAIN; b++) {
        assert_ok(strata_buffer_create(ctx->w, ELEMS * sizeof(int32_t), &ctx->bufs[b]));
        int32_t *p = strata_buffer_data(ctx->bufs[b]);
        for (int e = 0; e < ELEMS; e++)
            p[e] = b == CONST_BUF ? e * e + 3 : e * 7 + b;
        memcpy(ctx->model[b], p, sizeof ctx->model[b]);
    }
    ctx->const_base = strata_buffer_data(ctx->bufs[CONST_BUF]);
    assert_ok(strata_worker_init(ctx->w));
}

static void teardown_worker(test_ctx *ctx) {
    assert_ok(strata_worker_close(ctx->w));
    for (int b = 0; b <= NMAIN; b++)
        strata_buffer_destroy(ctx->bufs[b]);
    strata_worker_destroy(ctx->w);
}

typedef struct pending_run {
    strata_run *h;
    int slot;
} pending_run;

static void finish_run(test_ctx *ctx, pending_run *pr, const char *where) {
    graph *g = ctx->slots[pr->slot];
    int rc = strata_run_wait(pr->h, WAIT_NS);
    if (rc == STRATA_ETIMEDOUT) {
        print_graph(g);
        fail_msg("%s: run did not finish within 120 s", where);
    }
    check_run(g, rc, strata_run_status(pr->h), strata_run_error(pr->h), where);
    strata_run_release(pr->h);
    pr->h = NULL;
}

static void compare_with_model(test_ctx *ctx, int nbatch, const char *where) {
    for (int b = 0; b < NMAIN; b++) {
        const int32_t *real = strata_buffer_data(ctx->bufs[b]);
        for (int e = 0; e < ELEMS; e++) {
            if (real[e] == ctx->model[b][e])
                continue;
            fprintf(stderr, "%s: buf%d[%d] = %d, sequential replay gives %d; the batch was:\n",
                    where, b, e, real[e], ctx->model[b][e]);
            for (int i = 0; i < nbatch; i++)
                print_graph(ctx->slots[i]);
            fail_msg("buffer contents differ from the sequential replay");
        }
    }
    const int32_t *cst = strata_buffer_data(ctx->bufs[CONST_BUF]);
    for (int e = 0; e < ELEMS; e++)
        if (cst[e] != e * e + 3)
            fail_msg("%s: the constant buffer was written (element %d)", where, e);
}

/* Runs `nruns` random graphs in batches of 1-4 overlapping runs; after each
 * batch, every run is checked and the buffers are compared with the model. */
static void run_random_graphs(const worker_shape *ws, int nruns, uint64_t seed) {
    /* Shared, and mapped before the worker forks: bodies in process children write them. */
    test_ctx *ctx = ts_shared_calloc(1, sizeof *ctx);
    graph *graphs = ts_shared_calloc(BATCH_MAX, sizeof *graphs);
    /* Live until the batch is over (an L4's child reads them late), and shared:
     * under an L4 with process children the child reads the one its task names. */
    orch_arg *oas = ts_shared_calloc(BATCH_MAX, sizeof *oas);
    setup_worker(ctx, ws);
    assert_non_null(graphs);
    uint64_t s = seed;
    int done = 0, rejects = 0, failed_runs = 0, maybe_rejected = 0;
    long tasks_run = 0, maybe_accepted = 0;
    while (done < nruns) {
        int nbatch = 1 + (int)rnd(&s, BATCH_MAX);
        if (nbatch > nruns - done)
            nbatch = nruns - done;
        pending_run pend[BATCH_MAX] = {{0}};
        char where[128];
        for (int i = 0; i < nbatch; i++) {
            uint64_t gseed = ts_rand(&s);
            ctx->slots[i] = &graphs[i];
            generate_graph(&graphs[i], gseed, (int)ws->sub_workers, (uint32_t)(done + i));
            /* keep fewer than `depth` runs unfinished when submitting, so no
             * interpretation of admission can make the submit wait on us */
            for (int j = 0; j < i; j++)
                if (pend[j].h && i - j >= (int)ws->depth) {
                    snprintf(where, sizeof where, "sub=%u depth=%u run %d", ws->sub_workers,
                             ws->depth, done + j);
                    finish_run(ctx, &pend[j], where);
                }
            oas[i] = (orch_arg){.ctx = ctx, .g = &graphs[i], .slot = i};
            oas[i].child = RG_L4_CHILDREN ? (done + i) % (RG_L4_CHILDREN ? RG_L4_CHILDREN : 1) : 0;
            pend[i].slot = i;
            int rc = strata_worker_submit(ctx->w, RG_L4_CHILDREN ? l4_graph_orch : graph_orch,
                                          &oas[i], &pend[i].h);
            if (rc != STRATA_OK || pend[i].h == NULL) {
                print_graph(&graphs[i]);
                fail_msg("strata_worker_submit returned %s and no handle: %s",
                         strata_status_name(rc), strata_error_message());
            }
        }
        for (int i = 0; i < nbatch; i++)
            if (pend[i].h) {
                snprintf(where, sizeof where, "sub=%u depth=%u run %d", ws->sub_workers, ws->depth,
                         done + i);
                finish_run(ctx, &pend[i], where);
            }
        for (int i = 0; i < nbatch; i++) {
            model_replay(ctx, &graphs[i]);
            const graph *g = &graphs[i];
            rejects += g->log.reject_count;
            failed_runs += g->any_fail;
            maybe_rejected += g->log.maybe_rejected;
            for (int t = 0; t < g->ntasks; t++) {
                tasks_run += ran_ok(g, t);
                maybe_accepted += g->tasks[t].may_reject && g->log.submitted[t];
            }
        }
        snprintf(where, sizeof where, "sub=%u depth=%u runs %d..%d", ws->sub_workers, ws->depth,
                 done, done + nbatch - 1);
        compare_with_model(ctx, nbatch, where);
        done += nbatch;
    }
    print_message("sub=%u depth=%u: %d runs (%d with injected failures), %ld tasks ran, %d "
                  "overlapping tasks rejected, interleaved-args tasks: %ld accepted, %d rejected\n",
                  ws->sub_workers, ws->depth, nruns, failed_runs, tasks_run, rejects,
                  maybe_accepted, maybe_rejected);
    assert_true(rejects > 0);
    assert_true(failed_runs > 0);
    if (ws->task_window || ws->heap_ring_bytes) {
        print_message("  %ld capacity waits\n", atomic_load(&ctx->capacity_waits));
        assert_true(atomic_load(&ctx->capacity_waits) > 0);
    }
    teardown_worker(ctx);
    ts_shared_free(oas, BATCH_MAX, sizeof *oas);
    ts_shared_free(graphs, BATCH_MAX, sizeof *graphs);
    ts_shared_free(ctx, 1, sizeof *ctx);
}

static int runs_per_shape(void) {
    double n = 1500 * test_scale();
#if defined(STRATA_TSAN)
    n /= 4; /* ThreadSanitizer is an order of magnitude slower; same checks, fewer graphs */
#endif
    return n < 8 ? 8 : (int)n;
}

static void test_random_graphs_one_sub_worker(void **state) {
    (void)state;
    const worker_shape a = {1, 1, 0, 0}, b = {1, 2, 0, 0};
    run_random_graphs(&a, runs_per_shape(), 0x1001);
    run_random_graphs(&b, runs_per_shape(), 0x1002);
}

static void test_random_graphs_two_sub_workers(void **state) {
    (void)state;
    const worker_shape a = {2, 1, 0, 0}, b = {2, 2, 0, 0};
    run_random_graphs(&a, runs_per_shape(), 0x2001);
    run_random_graphs(&b, runs_per_shape(), 0x2002);
}

static void test_random_graphs_four_sub_workers(void **state) {
    (void)state;
    const worker_shape a = {4, 1, 0, 0}, b = {4, 2, 0, 0};
    run_random_graphs(&a, runs_per_shape(), 0x4001);
    run_random_graphs(&b, runs_per_shape(), 0x4002);
}

/* A task window of 16 and heap rings of 16 KiB (a graph holds at most 12
 * intermediates, so a single run always fits): submits keep waiting for
 * slots and ring space while earlier tasks and runs fail and are consumed. */
static void test_random_graphs_small_capacity(void **state) {
    (void)state;
    const worker_shape a = {1, 2, 16, 16 << 10}, b = {2, 2, 16, 16 << 10}, c = {4, 1, 16, 16 << 10};
    run_random_graphs(&a, runs_per_shape(), 0x5001);
    run_random_graphs(&b, runs_per_shape(), 0x5002);
    run_random_graphs(&c, runs_per_shape(), 0x5003);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_graphs_one_sub_worker),
        cmocka_unit_test(test_random_graphs_two_sub_workers),
        cmocka_unit_test(test_random_graphs_four_sub_workers),
        cmocka_unit_test(test_random_graphs_small_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
