/* tests/system/test_crash_containment.c - a process-hosted sub worker that
 * dies takes only its own tasks with it.
 *
 * Owns: whole-runtime scenarios of a crashing child: SIGKILL mid-task, a
 * segfault and exit() in a sub function, an exit during a control call, a
 * child whose every sibling is gone (its tasks fail fast with the reason),
 * a child killed while idle (noticed before a task goes to it), a dead
 * process chip handed two tasks in one pass, a child's view of its siblings'
 * mailboxes (unmapped), and a parent SIGKILLed (its
 * children exit by themselves, one of them in the middle of a long task). After each crash
 * the failed run's error names the child and how it ended, its dependants
 * never ran, and a later run on the same worker succeeds on the other subs.
 * Must never: assert a duration (every wait is bounded, and generous), or run
 * under TSan (it forks: TSan and fork do not mix; ASan+UBSan run it).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "exec/process_endpoint.h"
#include "test_support.h"
#include "util/clock.h"

typedef enum crash_op {
    OP_RECORD = 0, /* record the pid, add 1 to t0[0] */
    OP_HANG,       /* record the pid, then wait for the gate (the test kills us) */
    OP_SEGV,       /* a null write with the default SIGSEGV action */
    OP_EXIT,       /* exit(7) */
    OP_LONG,       /* record the pid in hang_pid, then sleep 10 s */
    OP_MAPS        /* record the pid and which of sh->mbox[] are mapped here */
} crash_op;

typedef struct shared {
    _Atomic int hang_pid; /* the pid of the child in OP_HANG */
    _Atomic int gate;
    _Atomic int pids[64];
    _Atomic int npids;
    uintptr_t mbox[3];           /* the subs' mailboxes, as the parent maps them */
    unsigned long mbox_inode[3]; /* their shared-memory files (the parent's /proc/self/maps) */
    _Atomic int mapped[3][3];    /* OP_MAPS number k: 1 if mbox[i] is mapped in its child */
    _Atomic int maps_pid[3];
    _Atomic int nmaps;
} shared;
static shared *sh;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* The inode of the file mapped at addr in this process (0: nothing mapped
 * there, or an anonymous mapping). By inode, not by "is anything mapped":
 * once a child unmapped a sibling's mailbox, the address may be reused by an
 * unrelated mapping (ASan's allocator maps often), which is no way into the
 * sibling's frames. */
static unsigned long inode_mapped_at(uintptr_t addr) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    unsigned long inode = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, ino;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %lu", &lo, &hi, &ino) == 3 && addr >= lo &&
            addr < hi) {
            inode = ino;
            break;
        }
    }
    fclose(f);
    return inode;
}

static int crash_body(const strata_task_view *a, void *user) {
    (void)user;
    switch ((crash_op)strata_args_scalar(a, 0)) {
    case OP_RECORD: {
        int i = atomic_fetch_add(&sh->npids, 1);
        if (i < 64)
            atomic_store(&sh->pids[i], (int)getpid());
        ((int32_t *)strata_args_data(a, 0))[0] += 1;
        return 0;
    }
    case OP_HANG:
        atomic_store(&sh->hang_pid, (int)getpid());
        for (int i = 0; i < 60000 && !atomic_load(&sh->gate); i++)
            sleep_ms(1);
        strata_task_set_error("never killed");
        return 1;
    case OP_SEGV:
        signal(SIGSEGV, SIG_DFL); /* the default action, not a sanitizer's report */
#ifdef STRATA_SANITIZED
        raise(SIGSEGV); /* UBSan would stop at a null store before it faults */
#else
        *(volatile int *)(uintptr_t)atoi("0") = 1;
#endif
        return 0;
    case OP_EXIT:
        /* exit(), not _exit(): atexit handlers run in the child. Under ASan
         * its leak check runs there too and may report what only threads of
         * the parent (absent in a fork) referenced, and change the status. */
        exit(7);
    case OP_MAPS: { /* three at once: each waits for the others, so each sub runs one */
        int k = atomic_fetch_add(&sh->nmaps, 1);
        if (k >= 3)
            return 1;
        for (int i = 0; i < 3; i++)
            atomic_store(&sh->mapped[k][i], inode_mapped_at(sh->mbox[i]) == sh->mbox_inode[i]);
        atomic_store(&sh->maps_pid[k], (int)getpid());
        for (int i = 0; i < 30000 && atomic_load(&sh->nmaps) < 3; i++)
            sleep_ms(1);
        return 0;
    }
    case OP_LONG:
        atomic_store(&sh->hang_pid, (int)getpid());
        sleep_ms(10000);
        return 0;
    }
    return 1;
}

typedef struct world {
    strata_worker *w;
    strata_callable fn;
    strata_buffer *a, *b, *c;
} world;

static void open_world(world *wd, uint32_t subs) {
    memset(sh, 0, sizeof *sh);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = subs;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    cfg.spin_ns = 1000;
    assert_ok(strata_worker_create(&cfg, &wd->w));
    assert_ok(strata_worker_register_sub(wd->w, "crash", crash_body, NULL, &wd->fn));
    assert_ok(strata_worker_init(wd->w));
    assert_ok(strata_buffer_create(wd->w, 64, &wd->a));
    assert_ok(strata_buffer_create(wd->w, 64, &wd->b));
}

static void close_world(world *wd) {
    assert_ok(strata_worker_close(wd->w));
    strata_buffer_destroy(wd->a);
    strata_buffer_destroy(wd->b);
    strata_worker_destroy(wd->w);
}

static int submit(strata_orch *o, world *wd, crash_op op, strata_buffer *buf) {
    int64_t shape[1] = {16};
    strata_tensor t;
    STRATA_TRY(strata_tensor_contiguous(buf, STRATA_I32, 1, shape, &t));
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_INOUT));
    STRATA_TRY(strata_args_add_scalar(&a, (uint64_t)op));
    return strata_orch_submit_sub(o, wd->fn, &a);
}

typedef struct crash_run {
    world *wd;
    crash_op op;
} crash_run;

/* The crashing task on a, a dependant of it on a, an independent task on b. */
static int orch_crash(strata_orch *o, void *arg) {
    crash_run *cr = arg;
    STRATA_TRY(submit(o, cr->wd, cr->op, cr->wd->a));
    STRATA_TRY(submit(o, cr->wd, OP_RECORD, cr->wd->a));
    return submit(o, cr->wd, OP_RECORD, cr->wd->b);
}

/* One task of cr->op. */
static int orch_long(strata_orch *o, void *arg) {
    crash_run *cr = arg;
    return submit(o, cr->wd, cr->op, cr->wd->a);
}

static int orch_many(strata_orch *o, void *arg) {
    world *wd = arg;
    for (int i = 0; i < 8; i++)
        STRATA_TRY(submit(o, wd, OP_RECORD, i % 2 ? wd->a : wd->b));
    return STRATA_OK;
}

/* After a crash: the dependant never ran; a later run works on the others. */
static void later_run_works_without(world *wd, int dead_pid) {
    int32_t *a = strata_buffer_data(wd->a);
    assert_int_equal(a[0], 0); /* the dependant of the crashed task was poisoned */
    atomic_store(&sh->npids, 0);
    assert_ok(strata_worker_run(wd->w, orch_many, wd));
    assert_int_equal(atomic_load(&sh->npids), 8);
    for (int i = 0; i < 8; i++)
        assert_int_not_equal(atomic_load(&sh->pids[i]), dead_pid);
    assert_int_equal(a[0], 4);
}

static int pid_of_sub_running(world *wd, int pid) {
    for (int i = 0; i < wd->w->nsubs; i++)
        if (st_proc_ep_child(st_proc_ep_of(wd->w->subs[i].ep))->pid == pid)
            return i;
    return -1;
}

/* A world of 2 subs running orch_crash with OP_HANG: the hung child's pid,
 * once its task started (the run in *r). */
static int start_hung_run(world *wd, strata_run **r) {
    open_world(wd, 2);
    static crash_run cr;
    cr = (crash_run){wd, OP_HANG};
    assert_ok(strata_worker_submit(wd->w, orch_crash, &cr, r));
    for (int i = 0; i < 30000 && atomic_load(&sh->hang_pid) == 0; i++)
        sleep_ms(1);
    int pid = atomic_load(&sh->hang_pid);
    assert_true(pid > 0);
    return pid;
}

static void sigkill_mid_task_fails_only_its_run(void **state) {
    (void)state;
    world wd;
    strata_run *r;
    int pid = start_hung_run(&wd, &r);
    assert_true(pid_of_sub_running(&wd, pid) >= 0);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(strata_run_wait(r, 60 * TS_SEC), STRATA_EENDPOINT);
    const char *err = strata_run_error(r);
    char want[96];
    snprintf(want, sizeof want, "(pid %d) killed by signal 9", pid);
    ts_assert_mentions(err, want);
    ts_assert_mentions(err, "while running task 'crash'");
    ts_assert_mentions(err, "sub ");
    strata_run_release(r);
    later_run_works_without(&wd, pid);
    close_world(&wd);
}

/* strata_worker_interrupt: the child running the hung task is killed (the
 * task would hold its run for a minute), the unstarted dependant is
 * cancelled, the run fails as interrupted, and the worker closes. */
static void interrupt_stops_a_running_child_and_cancels_the_rest(void **state) {
    (void)state;
    assert_int_equal(strata_worker_interrupt(NULL), STRATA_EINVAL);
    world wd;
    strata_run *r;
    int pid = start_hung_run(&wd, &r);
    assert_ok(strata_worker_interrupt(wd.w));
    /* Well inside the minute the hung body would take by itself. */
    assert_int_equal(strata_run_wait(r, 20 * TS_SEC), STRATA_ECANCELED);
    ts_assert_mentions(strata_run_error(r), "interrupted (strata_worker_interrupt)");
    strata_run_statistics rs;
    assert_ok(strata_run_stats(r, &rs));
    assert_true(rs.tasks_failed >= 1); /* the hung task, its child killed */
    strata_run_release(r);
    int32_t *a = strata_buffer_data(wd.a);
    assert_int_equal(a[0], 0);                          /* its dependant never ran */
    assert_int_equal(pid_of_sub_running(&wd, pid), -1); /* that child is gone */
    close_world(&wd);
    assert_int_equal(kill(pid, 0), -1); /* reaped: no process left */
}

/* A worker not running has nothing to stop. */
static void interrupt_before_init_and_after_close_is_a_no_op(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    assert_ok(strata_worker_interrupt(w));
    assert_ok(strata_worker_init(w));
    assert_ok(strata_worker_close(w));
    assert_ok(strata_worker_interrupt(w));
    strata_worker_destroy(w);
}

static void crash_in_body(crash_op op, const char *how) {
    world wd;
    open_world(&wd, 2);
    int pids[2] = {(int)st_proc_ep_child(st_proc_ep_of(wd.w->subs[0].ep))->pid,
                   (int)st_proc_ep_child(st_proc_ep_of(wd.w->subs[1].ep))->pid};
    crash_run cr = {&wd, op};
    st_clear_error();
    assert_int_equal(strata_worker_run(wd.w, orch_crash, &cr), STRATA_EENDPOINT);
    const char *err = strata_error_message();
    ts_assert_mentions(err, how);
    ts_assert_mentions(err, "while running task 'crash'");
    int dead = strstr(err, "sub 0 (pid") ? pids[0] : pids[1];
    char want[64];
    snprintf(want, sizeof want, "(pid %d)", dead);
    ts_assert_mentions(err, want);
    later_run_works_without(&wd, dead);
    close_world(&wd);
}

static void a_segfault_in_a_sub_function_fails_only_its_run(void **state) {
    (void)state;
    crash_in_body(OP_SEGV, "killed by signal 11");
}

static void exit_in_a_sub_function_fails_only_its_run(void **state) {
    (void)state;
#ifdef STRATA_SANITIZED
    crash_in_body(OP_EXIT, "exited with status"); /* a leak report may change the code */
#else
    crash_in_body(OP_EXIT, "exited with status 7");
#endif
}

static void the_last_sub_gone_fails_later_tasks_fast_with_the_reason(void **state) {
    (void)state;
    world wd;
    open_world(&wd, 1);
    int pid = (int)st_proc_ep_child(st_proc_ep_of(wd.w->subs[0].ep))->pid;
    assert_int_equal(kill(pid, SIGKILL), 0);
    crash_run cr = {&wd, OP_RECORD};
    for (int k = 0; k < 3; k++) {
        st_clear_error();
        assert_int_equal(strata_worker_run(wd.w, orch_crash, &cr), STRATA_EENDPOINT);
        ts_assert_mentions(strata_error_message(), "killed by signal 9");
        ts_assert_mentions(strata_error_message(), "sub 0");
        /* the tasks were never taken by the dead child: not "while running" */
        assert_null(strstr(strata_error_message(), "while running"));
    }
    assert_int_equal(atomic_load(&sh->npids), 0);
    close_world(&wd);
}

/* A next-level child whose control handler exits. */
static int plain_init(void *arg, void **self) {
    (void)arg;
    *self = NULL;
    return STRATA_OK;
}
static void plain_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                       const st_callable_info *ci) {
    (void)self;
    (void)args;
    (void)ci;
    st_proc_task_finish(m, frame, STRATA_OK, NULL);
}
static int exiting_control(void *self, st_mbox_frame *ctl) {
    (void)self;
    (void)ctl;
    _exit(9);
}
static void plain_shutdown(void *self, st_mbox *m) {
    (void)self;
    (void)m;
}
static const st_proc_kind exit_on_control = {.name = "exit-on-control",
                                             .frames = 1,
                                             .init = plain_init,
                                             .task = plain_task,
                                             .control = exiting_control,
                                             .shutdown = plain_shutdown};

/* A child whose COPY_FROM answer is one byte short. */
static int short_control(void *self, st_mbox_frame *ctl) {
    (void)self;
    memset(ctl->payload, 7, (size_t)ctl->arg1);
    ctl->payload_bytes = (uint32_t)ctl->arg1 - 1;
    return STRATA_OK;
}
static const st_proc_kind short_copy = {.name = "short-copy",
                                        .frames = 1,
                                        .init = plain_init,
                                        .task = plain_task,
                                        .control = short_control,
                                        .shutdown = plain_shutdown};

static void a_short_copy_from_answer_is_refused(void **state) {
    (void)state;
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    st_proc_ep_config pc = {.kind = &short_copy, .worker_id = -1, .spin_ns = 1000};
    snprintf(pc.label, sizeof pc.label, "chip fake:0");
    st_proc_ep *p;
    assert_ok(st_proc_ep_create(w, &pc, &p));
    int id;
    assert_ok(st_worker_add_endpoint(w, st_proc_ep_endpoint(p), &id));
    assert_ok(strata_worker_init(w));
    char out[16];
    assert_fails(STRATA_EENDPOINT, "answered 15 bytes of 16",
                 st_proc_ep_control(p, ST_MBOX_CMD_COPY_FROM, 0, sizeof out, NULL, 0, out,
                                    sizeof out, NULL, st_deadline_after(60 * TS_SEC)));
    /* the control frame is usable again */
    assert_fails(STRATA_EENDPOINT, "answered 15 bytes of 16",
                 st_proc_ep_control(p, ST_MBOX_CMD_COPY_FROM, 0, sizeof out, NULL, 0, out,
                                    sizeof out, NULL, st_deadline_after(60 * TS_SEC)));
    assert_ok(strata_worker_close(w));
    strata_worker_destroy(w);
}

static void exit_during_a_control_call_is_reported_and_contained(void **state) {
    (void)state;
    memset(sh, 0, sizeof *sh);
    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 1;
    cfg.sub_mode = STRATA_HOST_PROCESS;
    strata_worker *w;
    assert_ok(strata_worker_create(&cfg, &w));
    st_proc_ep_config pc = {.kind = &exit_on_control, .worker_id = -1, .spin_ns = 1000};
    snprintf(pc.label, sizeof pc.label, "chip fake:0");
    st_proc_ep *p;
    assert_ok(st_proc_ep_create(w, &pc, &p));
    int id;
    assert_ok(st_worker_add_endpoint(w, st_proc_ep_endpoint(p), &id));
    strata_callable fn;
    assert_ok(strata_worker_register_sub(w, "crash", crash_body, NULL, &fn));
    assert_ok(strata_worker_init(w));
    int pid = (int)st_proc_ep_child(p)->pid;
    assert_fails(STRATA_EENDPOINT, "exited with status 9 during control call COPY_TO",
                 st_proc_ep_control(p, ST_MBOX_CMD_COPY_TO, 0, 4, "abcd", 4, NULL, 0, NULL,
                                    st_deadline_after(60 * TS_SEC)));
    char want[64];
    snprintf(want, sizeof want, "chip fake:0 (pid %d)", pid);
    assert_message_mentions(want);
    /* a later control call and a registration fail fast, naming it */
    assert_fails(STRATA_EENDPOINT, "exited with status 9",
                 st_proc_ep_control(p, ST_MBOX_CMD_PING, 0, 0, NULL, 0, NULL, 0, NULL,
                                    st_deadline_after(60 * TS_SEC)));
    strata_callable late;
    assert_fails(STRATA_EENDPOINT, "chip fake:0",
                 strata_worker_register_sub(w, "late", ts_noop_sub, NULL, &late));
    /* the sub worker is untouched */
    world wd = {.w = w, .fn = fn};
    assert_ok(strata_buffer_create(w, 64, &wd.a));
    assert_ok(strata_buffer_create(w, 64, &wd.b));
    assert_ok(strata_worker_run(w, orch_many, &wd));
    assert_int_equal(((int32_t *)strata_buffer_data(wd.a))[0], 4);
    close_world(&wd);
}

/* A sub killed while idle: its death is noticed by the parent-side thread's
 * idle probe (the engine marks it gone) before any task is sent to it, so
 * every later run goes to the living sub and succeeds. */
static void an_idle_sub_killed_is_noticed_before_a_task_goes_to_it(void **state) {
    (void)state;
    world wd;
    open_world(&wd, 2);
    assert_ok(strata_worker_run(wd.w, orch_many, &wd));
    st_endpoint *dead = wd.w->subs[0].ep;
    int pid = (int)st_proc_ep_child(st_proc_ep_of(dead))->pid;
    assert_int_equal(kill(pid, SIGKILL), 0);
    for (int i = 0; i < 30000 && !atomic_load(&dead->gone); i++)
        sleep_ms(1); /* a handshake with a generous bound, not a timing check */
    assert_true(atomic_load(&dead->gone));
    for (int k = 0; k < 4; k++) {
        atomic_store(&sh->npids, 0);
        assert_ok(strata_worker_run(wd.w, orch_many, &wd));
        assert_int_equal(atomic_load(&sh->npids), 8);
        for (int i = 0; i < 8; i++)
            assert_int_not_equal(atomic_load(&sh->pids[i]), pid);
    }
    close_world(&wd);
}

/* A child maps its own mailbox only: its siblings' (mapped before the forks)
 * are unmapped, so a wild write in one child cannot reach another's frames. */
static int orch_maps(strata_orch *o, void *arg) {
    world *wd = arg;
    STRATA_TRY(submit(o, wd, OP_MAPS, wd->a));
    STRATA_TRY(submit(o, wd, OP_MAPS, wd->b));
    return submit(o, wd, OP_MAPS, wd->c);
}

static void a_child_maps_no_sibling_mailbox(void **state) {
    (void)state;
    world wd;
    open_world(&wd, 3);
    assert_ok(strata_buffer_create(wd.w, 64, &wd.c));
    for (int i = 0; i < 3; i++) {
        sh->mbox[i] = (uintptr_t)st_proc_ep_mbox(st_proc_ep_of(wd.w->subs[i].ep));
        sh->mbox_inode[i] = inode_mapped_at(sh->mbox[i]);
        assert_true(sh->mbox_inode[i] != 0); /* a shared-memory file's mapping */
    }
    assert_ok(strata_worker_run(wd.w, orch_maps, &wd));
    assert_int_equal(atomic_load(&sh->nmaps), 3);
    for (int k = 0; k < 3; k++) {
        int who = pid_of_sub_running(&wd, atomic_load(&sh->maps_pid[k]));
        assert_true(who >= 0);
        for (int i = 0; i < 3; i++)
            assert_int_equal(atomic_load(&sh->mapped[k][i]), i == who);
    }
    strata_buffer_destroy(wd.c);
    close_world(&wd);
}

/* ---- a process chip that died ------------------------------------------- */

static int crash_program(strata_program_ctx *ctx, const strata_task_view *a, void *user) {
    (void)user;
    uint64_t crash = strata_args_scalar(a, 0);
    return strata_program_launch(ctx, "crash_if", 1, &crash, 1);
}

static int nop_sub(const strata_task_view *a, void *user) {
    (void)a;
    (void)user;
    return 0;
}

typedef struct chip_world {
    strata_worker *w;
    strata_callable prog, prod;
    strata_buffer *buf;
    int chip;
    int ntasks;
    uint64_t crash;
} chip_world;

/* A sub task, then ntasks chip tasks that read its output: they become
 * ready together, so one scheduler pass dispatches them all to the chip. */
static int orch_chip(strata_orch *o, void *arg) {
    chip_world *cw = arg;
    int64_t shape[1] = {16};
    strata_tensor t;
    STRATA_TRY(strata_tensor_contiguous(cw->buf, STRATA_F32, 1, shape, &t));
    strata_task_args a;
    strata_args_init(&a);
    STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_OUT));
    STRATA_TRY(strata_orch_submit_sub(o, cw->prod, &a));
    for (int i = 0; i < cw->ntasks; i++) {
        strata_args_init(&a);
        STRATA_TRY(strata_args_add_tensor(&a, &t, STRATA_IN));
        STRATA_TRY(strata_args_add_scalar(&a, cw->crash));
        STRATA_TRY(strata_orch_submit_next_level(o, cw->prog, &a, NULL, cw->chip));
    }
    return STRATA_OK;
}

static int chip_run(chip_world *cw, int ntasks, uint64_t crash, char *err, size_t cap) {
    cw->ntasks = ntasks;
    cw->crash = crash;
    strata_run *r;
    assert_ok(strata_worker_submit(cw->w, orch_chip, cw, &r));
    int rc = strata_run_wait(r, 60 * TS_SEC); /* a hang shows as ETIMEDOUT, not a stuck test */
    snprintf(err, cap, "%s", strata_run_error(r) ? strata_run_error(r) : "");
    strata_run_release(r);
    return rc;
}

/* Both tasks of one pass to a dead process chip are rejected (each on a
 * completion record of its own: one record pushed twice hung the worker). */
static void a_dead_process_chip_given_two_tasks_in_one_pass_fails_both(void **state) {
    (void)state;
    chip_world cw = {0};
    strata_worker_config wc;
    strata_worker_config_init(&wc);
    wc.sub_workers = 1;
    assert_ok(strata_worker_create(&wc, &cw.w));
    strata_chip_config cc;
    strata_chip_config_init(&cc);
    cc.kernel_module = STRATA_SIM_TEST_KERNELS_PATH;
    cc.host = STRATA_HOST_PROCESS;
    assert_ok(strata_worker_add_chip(cw.w, &cc, &cw.chip));
    strata_chip_program_desc d = {.name = "crash", .fn = crash_program};
    assert_ok(strata_worker_register_chip_program(cw.w, &d, &cw.prog));
    assert_ok(strata_worker_register_sub(cw.w, "prod", nop_sub, NULL, &cw.prod));
    assert_ok(strata_worker_init(cw.w));
    assert_ok(strata_buffer_create(cw.w, 64, &cw.buf));
    char err[STRATA_ERRMSG_MAX];
    assert_int_equal(chip_run(&cw, 1, 0, err, sizeof err), STRATA_OK);
    assert_int_equal(chip_run(&cw, 1, 1, err, sizeof err), STRATA_EENDPOINT);
    ts_assert_mentions(err, "killed by signal 11");
    ts_assert_mentions(err, "while running task 'crash'");
    for (int k = 0; k < 2; k++) {
        assert_int_equal(chip_run(&cw, 2, 0, err, sizeof err), STRATA_EENDPOINT);
        ts_assert_mentions(err, "killed by signal 11");
        ts_assert_mentions(err, "chip sim:0");
    }
    assert_ok(strata_worker_close(cw.w));
    strata_buffer_destroy(cw.buf);
    strata_worker_destroy(cw.w);
}

/* ---- the parent dies ---------------------------------------------------- */

static void the_children_of_a_killed_parent_exit(void **state) {
    (void)state;
    memset(sh, 0, sizeof *sh);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t parent = fork();
    assert_true(parent >= 0);
    if (parent == 0) { /* the "parent": a worker with process subs, then it waits */
        close(fds[0]);
        strata_worker_config cfg;
        strata_worker_config_init(&cfg);
        cfg.sub_workers = 3;
        cfg.sub_mode = STRATA_HOST_PROCESS;
        strata_worker *w;
        strata_callable fn;
        if (strata_worker_create(&cfg, &w) != STRATA_OK ||
            strata_worker_register_sub(w, "crash", crash_body, NULL, &fn) != STRATA_OK ||
            strata_worker_init(w) != STRATA_OK)
            _exit(1);
        /* one child busy in a 10 s task when the parent dies */
        world wd = {.w = w, .fn = fn};
        crash_run cr = {&wd, OP_LONG};
        strata_run *r;
        if (strata_buffer_create(w, 64, &wd.a) != STRATA_OK ||
            strata_worker_submit(w, orch_long, &cr, &r) != STRATA_OK)
            _exit(1);
        for (int i = 0; i < 30000 && atomic_load(&sh->hang_pid) == 0; i++)
            sleep_ms(1);
        int pids[3];
        for (int i = 0; i < 3; i++)
            pids[i] = (int)st_proc_ep_child(st_proc_ep_of(w->subs[i].ep))->pid;
        if (write(fds[1], pids, sizeof pids) != (ssize_t)sizeof pids)
            _exit(2);
        for (;;)
            pause();
    }
    close(fds[1]);
    int pids[3];
    size_t got = 0;
    while (got < sizeof pids) {
        ssize_t n = read(fds[0], (char *)pids + got, sizeof pids - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    assert_int_equal(got, sizeof pids);
    assert_int_equal(kill(parent, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(parent, &status, 0), parent);
    /* Each child's watchdog checks its parent every 250 ms: they are gone
     * within about a second, the busy one too. The bound (5 s) is only below
     * the busy child's 10 s task: past it, that child waited for its task. */
    int busy = atomic_load(&sh->hang_pid);
    int found = 0;
    for (int i = 0; i < 3; i++)
        found |= pids[i] == busy;
    assert_true(found);
    uint64_t until = st_deadline_after(5 * TS_SEC);
    for (int i = 0; i < 3; i++) {
        while (!ts_process_gone(pids[i]) && st_now_ns() < until)
            sleep_ms(1);
        assert_true(ts_process_gone(pids[i]));
    }
}

static int setup(void **state) {
    (void)state;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return sh == MAP_FAILED ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    munmap(sh, sizeof *sh);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_children_of_a_killed_parent_exit),
        cmocka_unit_test(sigkill_mid_task_fails_only_its_run),
        cmocka_unit_test(interrupt_stops_a_running_child_and_cancels_the_rest),
        cmocka_unit_test(interrupt_before_init_and_after_close_is_a_no_op),
        cmocka_unit_test(a_segfault_in_a_sub_function_fails_only_its_run),
        cmocka_unit_test(exit_in_a_sub_function_fails_only_its_run),
        cmocka_unit_test(the_last_sub_gone_fails_later_tasks_fast_with_the_reason),
        cmocka_unit_test(exit_during_a_control_call_is_reported_and_contained),
        cmocka_unit_test(a_short_copy_from_answer_is_refused),
        cmocka_unit_test(an_idle_sub_killed_is_noticed_before_a_task_goes_to_it),
        cmocka_unit_test(a_child_maps_no_sibling_mailbox),
        cmocka_unit_test(a_dead_process_chip_given_two_tasks_in_one_pass_fails_both),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
