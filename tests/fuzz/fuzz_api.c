/* tests/fuzz/fuzz_api.c - drives the public API from a byte string.
 *
 * Owns: a small interpreter (LLVMFuzzerTestOneInput) whose opcodes make views
 * (legal, extreme or hand-edited), fill task arguments with tags, submit
 * tasks and groups (some of which fail), open and close scopes, allocate
 * runtime memory, end runs, keep two runs in flight and wait with zero or
 * bounded timeouts, on a worker with a tiny task window and heap rings so
 * that submits wait for capacity.
 * What it checks besides the sanitizers and the engine's own assertions:
 * every view strata accepts lies inside its memory (judged in saturating
 * 128-bit arithmetic here, independently of strata's checks), a task body
 * never sees a tensor without memory, every call returns a strata_status
 * with a message on failure, and no run fails to finish (a wait that
 * expires after seconds is a hang: abort).
 * Must never: depend on timing for its verdict, or keep state from one input
 * to the next (each input gets a fresh worker).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"

#define NBUF 3
#define BUF_BYTES 256
#define NVIEW 8
#define MAX_TOUCH 4096                  /* elements one body touches at most */
#define HANG_NS (20ull * 1000000000ull) /* a run that takes this long is hung */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t next_byte(reader *r) {
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

/* Sizes worth trying: small, aligned, and every kind of extreme. */
static const int64_t interesting[] = {
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    16,
    63,
    64,
    255,
    256,
    257,
    1024,
    -1,
    -2,
    INT64_MIN,
    INT64_MAX,
    (int64_t)1 << 31,
    (int64_t)1 << 32,
    (int64_t)1 << 61,
    ((int64_t)1 << 61) + 128,
    (int64_t)1 << 62,
    ((int64_t)1 << 62) + 1,
    INT64_MAX - 1,
    (int64_t)1 << 40,
    1 << 20,
    5,
    32,
    128,
    100,
    6,
};
#define NINTERESTING ((uint8_t)(sizeof interesting / sizeof interesting[0]))

static int64_t next_value(reader *r) {
    return interesting[next_byte(r) % NINTERESTING];
}

typedef struct state {
    strata_worker *w;
    strata_buffer *bufs[NBUF];
    strata_callable body;
    strata_tensor views[NVIEW];
    int view_set[NVIEW];
    strata_task_args args[2]; /* members of the next submit */
    reader *in;
    int depth;
} state;

/* ---- the oracle -------------------------------------------------------------- */

typedef unsigned __int128 u128;
#define SAT ((u128)1 << 100)

static u128 sat_add(u128 a, u128 b) {
    return a >= SAT || b >= SAT || a + b >= SAT ? SAT : a + b;
}

static u128 sat_mul(u128 a, u128 b) {
    if (a == 0 || b == 0)
        return 0;
    return a >= SAT || b >= SAT || a > SAT / b ? SAT : a * b;
}

static void must(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_api: violated: %s (last error: %s)\n", what, strata_error_message());
        abort();
    }
}

/* An accepted view with memory lies inside buffer_bytes. */
static void check_view_inside(const strata_tensor *t) {
    must(t->rank >= 1 && t->rank <= STRATA_MAX_RANK, "accepted view has a bad rank");
    u128 last = 0;
    for (int k = 0; k < t->rank; k++) {
        must(t->shape[k] >= 1 && t->strides[k] >= 1, "accepted view has a bad shape or stride");
        last = sat_add(last, sat_mul((u128)(t->shape[k] - 1), (u128)t->strides[k]));
    }
    u128 end =
        sat_add(t->offset, sat_mul(sat_add(last, 1), strata_dtype_size((strata_dtype)t->dtype)));
    must(end <= t->buffer_bytes, "accepted view reaches past its buffer");
}

static void check_status(int rc) {
    must(rc <= 0 && rc >= STRATA_ECANCELED, "a call returned something not a strata_status");
    if (rc != STRATA_OK)
        must(strata_error_message()[0] != '\0', "a failed call left no message");
}

/* ---- the task body -------------------------------------------------------------- */

/* Reads (IN) or writes (OUT, INOUT, OUT_EXISTING) every element of its views
 * (bounded), so ASan sees any view that strata let reach outside its memory
 * and TSan any two tasks strata let write the same bytes at once. Scalar
 * 0 = 1: fail. */
static int body_fn(const strata_task_view *a, void *user) {
    (void)user;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *t = strata_args_tensor(a, i);
        must(t->base != NULL, "a task body got a tensor without memory");
        check_view_inside(t);
        unsigned char *p = strata_args_data(a, i);
        size_t elem = strata_dtype_size((strata_dtype)t->dtype);
        int64_t idx[STRATA_MAX_RANK] = {0};
        for (int n = 0; n < MAX_TOUCH; n++) {
            uint64_t off = 0;
            for (int k = 0; k < t->rank; k++)
                off += (uint64_t)idx[k] * (uint64_t)t->strides[k];
            unsigned char *e = p + off * elem;
            if (a->tags[i] == STRATA_IN)
                (void)*(volatile unsigned char *)e;
            else if (a->tags[i] != STRATA_NO_DEP) /* NO_DEP is unordered: not touched */
                e[elem - 1] ^= 1;
            int k = t->rank - 1;
            while (k >= 0 && ++idx[k] == t->shape[k])
                idx[k--] = 0;
            if (k < 0)
                break;
        }
    }
    if (a->nscalars > 0 && strata_args_scalar(a, 0) == 1) {
        strata_task_set_error("failed on purpose");
        return 1;
    }
    return 0;
}

/* ---- opcodes ------------------------------------------------------------------------- */

static void op_view(state *s) {
    reader *r = s->in;
    int v = next_byte(r) % NVIEW, b = next_byte(r) % NBUF;
    int rank = next_byte(r) % 7; /* 0 and 6 are invalid */
    strata_dtype dt = (strata_dtype)(next_byte(r) % (STRATA_DTYPE_COUNT + 1));
    uint64_t offset = (uint64_t)next_value(r);
    int strided = next_byte(r) & 1;
    int64_t shape[STRATA_MAX_RANK + 1], strides[STRATA_MAX_RANK + 1];
    for (int k = 0; k < STRATA_MAX_RANK + 1; k++) {
        shape[k] = next_value(r);
        strides[k] = next_value(r);
    }
    strata_tensor t;
    int rc = strata_tensor_view(s->bufs[b], offset, dt, rank, shape, strided ? strides : NULL, &t);
    check_status(rc);
    if (rc == STRATA_OK) {
        check_view_inside(&t);
        s->views[v] = t;
        s->view_set[v] = 1;
    }
}

/* Change one field of a view by hand (the struct is public). */
static void op_edit(state *s) {
    reader *r = s->in;
    int v = next_byte(r) % NVIEW;
    uint8_t field = next_byte(r);
    int64_t x = next_value(r);
    strata_tensor *t = &s->views[v];
    int k = (field >> 3) % STRATA_MAX_RANK;
    switch (field & 7) {
    case 0:
        t->shape[k] = x;
        break;
    case 1:
        t->strides[k] = x;
        break;
    case 2:
        t->offset = (uint64_t)x;
        break;
    case 3:
        t->rank = (uint8_t)x;
        break;
    case 4:
        t->dtype = (uint8_t)x;
        break;
    default: /* forget the memory: an OUT tensor without memory */
        t->base = NULL;
        t->ident.id = 0;
        t->buffer_bytes = 0;
        t->offset = 0;
        break;
    }
    s->view_set[v] = 1;
}

static void op_arg(state *s) {
    reader *r = s->in;
    int m = next_byte(r) & 1, v = next_byte(r) % NVIEW;
    strata_tag tag = (strata_tag)(next_byte(r) % 7); /* 5 and 6 are invalid */
    if (!s->view_set[v])
        return;
    check_status(strata_args_add_tensor(&s->args[m], &s->views[v], tag));
}

static void op_scalar(state *s) {
    reader *r = s->in;
    int m = next_byte(r) & 1;
    check_status(strata_args_add_scalar(&s->args[m], next_byte(r) % 4));
}

static void reset_args(state *s) {
    strata_args_init(&s->args[0]);
    strata_args_init(&s->args[1]);
}

static void op_submit(strata_orch *o, state *s, int group) {
    int rc = group ? strata_orch_submit_sub_group(o, s->body, s->args, 2)
                   : strata_orch_submit_sub(o, s->body, s->args);
    check_status(rc);
    if (rc == STRATA_OK) /* OUT tensors without memory were given memory */
        for (int m = 0; m < (group ? 2 : 1); m++)
            for (uint32_t i = 0; i < s->args[m].ntensors; i++)
                if (s->args[m].tags[i] != STRATA_NO_DEP)
                    check_view_inside(&s->args[m].tensors[i]);
    reset_args(s);
}

static void op_alloc(strata_orch *o, state *s) {
    reader *r = s->in;
    int v = next_byte(r) % NVIEW, rank = next_byte(r) % 7;
    strata_dtype dt = (strata_dtype)(next_byte(r) % (STRATA_DTYPE_COUNT + 1));
    int64_t shape[STRATA_MAX_RANK + 1];
    for (int k = 0; k < STRATA_MAX_RANK + 1; k++)
        shape[k] = next_value(r);
    strata_tensor t;
    int rc = strata_orch_alloc(o, rank, shape, dt, &t);
    check_status(rc);
    if (rc == STRATA_OK) {
        must(t.base != NULL, "strata_orch_alloc gave no memory");
        check_view_inside(&t);
        s->views[v] = t;
        s->view_set[v] = 1;
    }
}

/* Builds one run from the input until an end-of-run opcode. */
static int orch_fn(strata_orch *o, void *arg) {
    state *s = arg;
    reader *r = s->in;
    reset_args(s);
    while (r->n > 0) {
        uint8_t op = next_byte(r) % 12;
        switch (op) {
        case 0:
            op_view(s);
            break;
        case 1:
            op_edit(s);
            break;
        case 2:
        case 3:
            op_arg(s);
            break;
        case 4:
            op_scalar(s);
            break;
        case 5:
            op_submit(o, s, 0);
            break;
        case 6:
            op_submit(o, s, 1);
            break;
        case 7:
            check_status(strata_orch_scope_begin(o));
            break;
        case 8:
            check_status(strata_orch_scope_end(o));
            break;
        case 9:
            op_alloc(o, s);
            break;
        case 10:
            return STRATA_OK; /* end of this run */
        default:
            return next_byte(r) & 1 ? STRATA_EINVAL : STRATA_OK; /* the function fails */
        }
    }
    return STRATA_OK;
}

static void finish(strata_run *h) {
    int rc = strata_run_wait(h, HANG_NS);
    must(rc != STRATA_ETIMEDOUT, "a run did not finish (hang)");
    check_status(rc);
    must(strata_run_done(h), "a waited run is not done");
    strata_run_release(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    state s;
    memset(&s, 0, sizeof s);
    s.in = &r;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 2;
    cfg.task_window = 4u << (next_byte(&r) % 3); /* 4, 8 or 16: submits wait */
    cfg.heap_ring_bytes = 8 << 10;
    cfg.capacity_timeout_ns = 200000000ull; /* a wait nothing can end fails in 0.2 s */
    cfg.pipeline_depth = 1 + (next_byte(&r) & 1);
    must(strata_worker_create(&cfg, &s.w) == STRATA_OK, "worker create");
    must(strata_worker_register_sub(s.w, "body", body_fn, NULL, &s.body) == STRATA_OK, "register");
    must(strata_worker_init(s.w) == STRATA_OK, "worker init");
    for (int b = 0; b < NBUF; b++)
        must(strata_buffer_create(s.w, BUF_BYTES, &s.bufs[b]) == STRATA_OK, "buffer create");
    strata_run *prev = NULL;
    for (int runs = 0; r.n > 0 && runs < 64; runs++) {
        strata_run *h = NULL;
        int rc = strata_worker_submit(s.w, orch_fn, &s, &h);
        check_status(rc);
        if (rc != STRATA_OK)
            break;
        check_status(strata_run_wait(h, 0)); /* a zero timeout never blocks */
        if (prev)
            finish(prev);
        prev = NULL;
        if (cfg.pipeline_depth == 2 && (next_byte(&r) & 1))
            prev = h; /* keep it in flight while the next run builds */
        else
            finish(h);
    }
    if (prev)
        finish(prev);
    for (int b = 0; b < NBUF; b++)
        strata_buffer_destroy(s.bufs[b]);
    check_status(strata_worker_close(s.w));
    strata_worker_destroy(s.w);
    return 0;
}
