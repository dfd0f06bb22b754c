/* bench/bench_mailbox.c - one task's round trip between two processes over
 * the mailbox, beside a bare spin-then-futex ping-pong between two
 * processes, measured in the same invocation.
 *
 * Owns: the two loops. strata: the parent prepares a task frame (identity,
 * config, digest, one tensor and two scalars encoded), publishes TASK_READY
 * and rings the child's bell; the child asks for the frame's lines, checks
 * the frame and the payload's size, decodes the arguments and looks the
 * digest up (process_child.c's per-task path), answers TASK_DONE and rings
 * the parent's bell; the parent checks the identity and returns the frame to
 * IDLE. Both sides spin on the frame's state word for SPIN_NS, then park on
 * their bell (the ring wakes them only if they parked), as the process
 * endpoint does. The anchor: one shared word per direction, the same spin
 * budget, then FUTEX_WAIT, and FUTEX_WAKE only when the peer sleeps. Each
 * repetition times every round trip for the p99, and batches of BATCH
 * consecutive round trips for the p50 (a clock read costs about as much as
 * the anchor's whole round trip on a machine whose two CPUs share a core,
 * and ticks in 10 ns: timed one by one, both p50s carried that cost and the
 * ratio moved by a tick); each is one sample, and the rows are their
 * medians.
 * Must never: share a core budget unequally between the two (same spin,
 * same process layout), or leave a child or a region behind (every path
 * reaps and unmaps).
 *
 * bench-needs: internals
 */
#include "bench_common.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ipc/child_process.h"
#include "ipc/mailbox.h"
#include "ipc/shm_region.h"
#include "ipc/wire_args.h"
#include "util/clock.h"
#include "util/digest.h"
#include "util/error.h"

#define SPIN_NS 50000u /* both loops: spin this long, then park */
#define TRIPS 20000
#define QUICK_TRIPS 2000
#define WARMUP 500
#define BATCH 16                             /* round trips per timed sample of the p50 */
#define WAIT_BOUND_NS (5ull * 1000000000ull) /* a lost wake fails instead of hanging */
#define TARGET_P50_US 1.5
#define TARGET_RATIO 2.0

typedef struct shared {
    /* the anchor's two directions: value + sleepers each */
    _Atomic uint32_t ping, ping_sleepers;
    _Atomic uint32_t pong, pong_sleepers;
    _Atomic uint32_t stop;
} shared;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p50 and p99 of n samples (sorted in place). */
static void percentiles(double *v, int n, double *p50, double *p99) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *p50 = v[n / 2];
    int i = (int)((double)n * 0.99);
    *p99 = v[i < n ? i : n - 1];
}

/* ---- strata: the mailbox ---- */

static int in_set(uint32_t state, uint32_t set) {
    return state < 32 && ((1u << state) & set) != 0;
}

/* Wait until f's state is one of the bits of `want`: spin on the state word itself for
 * SPIN_NS (it is the word the peer publishes last), then park on the bell,
 * reading its value before each re-check so a ring in between is not lost.
 * The state reached, or UINT32_MAX after WAIT_BOUND_NS. */
static uint32_t await_state(st_mbox_frame *f, st_event *bell, uint32_t want) {
    uint64_t now = st_now_ns(), spin_end = now + SPIN_NS, deadline = now + WAIT_BOUND_NS;
    unsigned n = 0;
    for (;;) {
        uint32_t s = st_mbox_state_of(f);
        if (in_set(s, want))
            return s;
        st_cpu_relax();
        if ((++n & 63) == 0 && st_now_ns() >= spin_end)
            break;
    }
    for (;;) {
        uint32_t seen = atomic_load(&bell->value);
        uint32_t s = st_mbox_state_of(f);
        if (in_set(s, want))
            return s;
        if (st_mbox_wait_bell(bell, seen, 0, deadline) != 0) {
            s = st_mbox_state_of(f);
            return in_set(s, want) ? s : UINT32_MAX;
        }
    }
}

/* The child's callables: an open-addressed table of digests, as
 * process_child.c keeps (one entry registered: the bench's callable). */
#define TABLE_SLOTS 64u
static const st_digest *table_[TABLE_SLOTS];

static const st_digest *table_find(const st_digest *d) {
    uint32_t i;
    memcpy(&i, d->bytes, sizeof i);
    i &= TABLE_SLOTS - 1;
    for (uint32_t n = 0; n < TABLE_SLOTS; n++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        if (!table_[i])
            return NULL;
        if (st_digest_equal(table_[i], d))
            return table_[i];
    }
    return NULL;
}

static int mailbox_child(void *arg) {
    st_mbox *m = arg;
    st_mbox_frame *f = st_mbox_task(m, 0), *ctl = st_mbox_control(m);
    static strata_task_args args;
    static st_digest known;
    known = st_digest_callable(1, "bench_noop");
    uint32_t at;
    memcpy(&at, known.bytes, sizeof at);
    table_[at & (TABLE_SLOTS - 1)] = &known;
    for (;;) {
        uint32_t s =
            await_state(f, &ctl->child_bell, 1u << ST_MBOX_TASK_READY | 1u << ST_MBOX_SHUTDOWN);
        if (s == UINT32_MAX)
            return 2;
        if (s == ST_MBOX_SHUTDOWN || atomic_load(&ctl->shutdown))
            return 0;
        if (s != ST_MBOX_TASK_READY)
            return 4;
        /* what process_child.c's take_task does per task: the lines asked
         * for, then the checks of the frame, the payload's size, the
         * arguments (decoded into a private copy), the callable's digest
         * (looked up in a table) */
        st_mbox_prefetch_task(f);
        int rc = st_mbox_check_frame(f, "bench child");
        uint32_t bytes = f->payload_bytes;
        if (rc == STRATA_OK && bytes > ST_MBOX_ARGS_CAP)
            rc = STRATA_EINVAL;
        if (rc == STRATA_OK)
            rc = st_wire_args_decode(f->payload, bytes, &args, "bench child");
        if (rc == STRATA_OK) {
            st_digest d;
            memcpy(d.bytes, f->digest, sizeof d.bytes);
            if (!table_find(&d))
                rc = STRATA_EINVAL;
        }
        f->status = rc;
        st_mbox_publish(f, ST_MBOX_TASK_DONE);
        st_mbox_ring(&ctl->parent_bell);
        if (rc != STRATA_OK)
            return 3;
    }
}

/* `trips` samples of `batch` round trips each: us[i] is the mean of sample i. */
static int mailbox_trips(st_mbox *m, int trips, int batch, double *us, uint64_t *dispatch) {
    st_mbox_frame *f = st_mbox_task(m, 0), *ctl = st_mbox_control(m);
    static uint64_t base[64];
    strata_task_args a;
    memset(&a, 0, sizeof a);
    a.ntensors = 1;
    a.nscalars = 2;
    a.tags[0] = STRATA_INOUT;
    a.tensors[0] = (strata_tensor){.base = base,
                                   .buffer_bytes = sizeof base,
                                   .rank = 1,
                                   .dtype = STRATA_U8,
                                   .shape = {64},
                                   .strides = {1}};
    a.scalars[0] = 7;
    a.scalars[1] = 9;
    st_digest d = st_digest_callable(1, "bench_noop");
    st_lease lease = {.slot = 0, .generation = 1};
    strata_call_config cfg = {0, 0};
    for (int i = -WARMUP; i < trips; i++) {
        uint64_t t0 = bench_now_ns();
        for (int b = 0; b < batch; b++) {
            st_mbox_trailer t = {.protocol = ST_MBOX_PROTOCOL,
                                 .run_id = 1,
                                 .lease_slot = 0,
                                 .generation = 1,
                                 .dispatch_id = ++*dispatch};
            st_mbox_task_prepare(f, &t, &lease, &cfg, 0, d.bytes);
            size_t used = 0;
            if (st_wire_args_encode(&a, f->payload, ST_MBOX_ARGS_CAP, &used) != STRATA_OK)
                return -1;
            f->payload_bytes = (uint32_t)used;
            st_mbox_publish(f, ST_MBOX_TASK_READY);
            st_mbox_ring(&ctl->child_bell);
            if (await_state(f, &ctl->parent_bell, 1u << ST_MBOX_TASK_DONE) != ST_MBOX_TASK_DONE)
                return -1;
            if (f->status != STRATA_OK || st_mbox_check_identity(f, &t, "bench") != STRATA_OK)
                return -1;
            st_mbox_publish(f, ST_MBOX_IDLE);
        }
        uint64_t t1 = bench_now_ns();
        if (i >= 0)
            us[i] = (double)(t1 - t0) / 1000.0 / batch;
    }
    return 0;
}

/* ---- the anchor: a bare spin + futex ping-pong ---- */

static void word_wait(_Atomic uint32_t *w, _Atomic uint32_t *sleepers, uint32_t old) {
    uint64_t end = bench_now_ns() + SPIN_NS;
    unsigned n = 0;
    while (atomic_load_explicit(w, memory_order_acquire) == old) {
        if ((++n & 63) == 0 && bench_now_ns() >= end)
            break;
        st_cpu_relax();
    }
    if (atomic_load_explicit(w, memory_order_acquire) != old)
        return;
    atomic_fetch_add(sleepers, 1);
    while (atomic_load(w) == old)
        syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, old, NULL, NULL, 0);
    atomic_fetch_sub(sleepers, 1);
}

static void word_bump(_Atomic uint32_t *w, _Atomic uint32_t *sleepers) {
    atomic_fetch_add(w, 1);
    if (atomic_load(sleepers) != 0)
        syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int futex_child(void *arg) {
    shared *s = arg;
    uint32_t seen = 0;
    for (;;) {
        word_wait(&s->ping, &s->ping_sleepers, seen);
        seen = atomic_load(&s->ping);
        if (atomic_load(&s->stop))
            return 0;
        word_bump(&s->pong, &s->pong_sleepers);
    }
}

/* As mailbox_trips. */
static void futex_trips(shared *s, int trips, int batch, double *us) {
    for (int i = -WARMUP; i < trips; i++) {
        uint64_t t0 = bench_now_ns();
        for (int b = 0; b < batch; b++) {
            uint32_t seen = atomic_load(&s->pong);
            word_bump(&s->ping, &s->ping_sleepers);
            word_wait(&s->pong, &s->pong_sleepers, seen);
        }
        uint64_t t1 = bench_now_ns();
        if (i >= 0)
            us[i] = (double)(t1 - t0) / 1000.0 / batch;
    }
}

int main(int argc, char **argv) {
    bench_options opt;
    int prc = bench_parse_args(argc, argv,
                               "Round trip of one task between two processes over the mailbox "
                               "(publish + ring, answer + ring), vs a bare spin + futex "
                               "ping-pong between two processes.",
                               &opt);
    if (prc)
        return prc > 0 ? 0 : 2;
    int trips = opt.quick ? QUICK_TRIPS : TRIPS;
    double *us = malloc(sizeof *us * (size_t)trips);
    static bench_series m50, m99, f50, f99;
    static bench_report report;
    bench_report_init(&report, &opt);
    st_shm region = {0}, words = {0};
    if (!us || st_shm_create("bench mailbox", sizeof(st_mbox), &region) != STRATA_OK ||
        st_shm_create("bench ping-pong", sizeof(shared), &words) != STRATA_OK) {
        fprintf(stderr, "bench_mailbox: %s\n", strata_error_message());
        st_shm_destroy(&region);
        free(us);
        return 1;
    }
    int failed = 0;
    st_mbox *m = region.base;
    shared *s = words.base;
    st_mbox_init(m);
    st_child mc = {0}, fc = {0};
    if (bench_wants(&opt, "strata") &&
        st_child_spawn(&mc, "bench mailbox child", mailbox_child, m) != STRATA_OK)
        failed = 1;
    if (st_child_spawn(&fc, "bench ping-pong child", futex_child, s) != STRATA_OK)
        failed = 1;
    uint64_t dispatch = 0;
    for (int r = 0; r < opt.reps && !failed; r++) {
        double p50, p99, unused;
        if (bench_wants(&opt, "strata")) {
            bench_settle();
            if (mailbox_trips(m, trips, BATCH, us, &dispatch) != 0 ||
                (percentiles(us, trips, &p50, &unused),
                 mailbox_trips(m, trips, 1, us, &dispatch) != 0)) {
                fprintf(stderr, "bench_mailbox: a round trip failed or was lost (child %s)\n",
                        st_child_alive(&mc) ? "alive" : mc.why);
                failed = 1;
                break;
            }
            percentiles(us, trips, &unused, &p99);
            bench_series_add(&m50, p50);
            bench_series_add(&m99, p99);
        }
        bench_settle();
        futex_trips(s, trips, BATCH, us);
        percentiles(us, trips, &p50, &unused);
        futex_trips(s, trips, 1, us);
        percentiles(us, trips, &unused, &p99);
        bench_series_add(&f50, p50);
        bench_series_add(&f99, p99);
    }
    /* stop both children: sticky word + state + bell; the anchor by its word */
    atomic_store(&st_mbox_control(m)->shutdown, 1);
    st_mbox_publish(st_mbox_task(m, 0), ST_MBOX_SHUTDOWN);
    st_mbox_ring(&st_mbox_control(m)->child_bell);
    atomic_store(&s->stop, 1);
    word_bump(&s->ping, &s->ping_sleepers);
    if (mc.pid && !st_child_reap(&mc, st_deadline_after(WAIT_BOUND_NS)))
        failed = 1;
    if (fc.pid && !st_child_reap(&fc, st_deadline_after(WAIT_BOUND_NS)))
        failed = 1;
    if (mc.exited && mc.status != 0) {
        fprintf(stderr, "bench_mailbox: the mailbox child %s\n", mc.why);
        failed = 1;
    }
    st_shm_destroy(&region);
    st_shm_destroy(&words);
    free(us);
    if (failed)
        return 1;

    bench_table *t = bench_report_table(&report,
                                        "process round trip over the mailbox, us: p50 of %d "
                                        "means of %d trips, p99 of %d trips, per rep; spin %u us "
                                        "then park",
                                        trips, BATCH, trips, SPIN_NS / 1000u);
    bench_row *row = bench_table_row(t, "round trip p50", "us", &m50, TARGET_P50_US);
    bench_row_compare(row, "futex ping-pong", bench_measured(&f50), TARGET_RATIO);
    row = bench_table_row(t, "round trip p99", "us", &m99, 0);
    bench_row_compare(row, "futex ping-pong", bench_measured(&f99), 0);
    bench_table_print(t);
    bench_report_print_verdict(&report);
    return bench_report_write_json(&report) ? 1 : 0;
}
