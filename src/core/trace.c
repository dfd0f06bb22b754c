/* core/trace.c - the engine's trace points and the statistics kept at each
 * task's end.
 *
 * Owns: switching tracing on (config or STRATA_TRACE), the engine lane, the
 * record calls, the per-worker and per-run counts and times, the critical
 * path (path(t) = dur(t) + max over its producers' paths, at completion).
 * Must never: be called without the engine lock (the lane's one writer is the
 * lock holder), allocate or block while recording, or read the clock when
 * tasks are not timed.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/endpoint.h"
#include "core/engine.h"
#include "core/run.h"
#include "core/slot.h"
#include "core/trace.h"
#include "core/trace_child.h"
#include "util/alloc.h"
#include "util/stamp.h"
#include "util/error.h"

/* Top-level workers that took STRATA_TRACE, and the process they were
 * counted in (process-wide state, not a worker's). A forked child inherits
 * both: its pid differs from `env_pid`, so it knows another process already
 * names files after STRATA_TRACE and puts its own pid into its names. */
static _Atomic unsigned env_users;
static _Atomic long env_pid;
static _Atomic int env_forked; /* this process is such a child */

/* `env` with each "%p" replaced by the pid and "%%" by "%", into p (cap). */
static void expand_pid(char *p, size_t cap, const char *env, long pid) {
    size_t o = 0;
    for (const char *s = env; *s && o + 1 < cap; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            int n = snprintf(p + o, cap - o, "%ld", pid);
            o = n > 0 && (size_t)n < cap - o ? o + (size_t)n : cap - 1;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            p[o++] = '%';
            s++;
        } else {
            p[o++] = *s;
        }
    }
    p[o] = '\0';
}

/* STRATA_OK with *out NULL when STRATA_TRACE is unset or empty. The first
 * worker of the first process takes FILE, further ones FILE.2, FILE.3...; in
 * a process forked from one that took names already, FILE.<pid>,
 * FILE.<pid>.2... (docs/tracing.md, "Recording a trace"). */
static int env_trace_path(char **out) {
    *out = NULL;
    const char *env = getenv("STRATA_TRACE");
    if (!env || !env[0])
        return STRATA_OK;
    long pid = (long)getpid();
    long first = 0;
    if (!atomic_compare_exchange_strong(&env_pid, &first, pid) && first != pid) {
        /* a forked child: its count starts again, under its own pid */
        atomic_store(&env_pid, pid);
        atomic_store(&env_users, 0);
        atomic_store(&env_forked, 1);
    }
    unsigned n = atomic_fetch_add(&env_users, 1) + 1;
    size_t len = strlen(env) * 8 + 48; /* each "%p" (2 bytes) grows to at most 20 */
    char *p = st_malloc(len);
    if (!p)
        return st_fail_nomem("strata_worker_create: the STRATA_TRACE file name", len);
    expand_pid(p, len, env, pid);
    size_t o = strlen(p);
    if (atomic_load(&env_forked) && !strstr(env, "%p")) /* "%p" named it per process already */
        o += (size_t)snprintf(p + o, len - o, ".%ld", pid);
    if (n > 1)
        snprintf(p + o, len - o, ".%u", n);
    *out = p;
    return STRATA_OK;
}

int st_trace_create(strata_worker *w) {
    st_trace *t = &w->trace;
    st_error_init(&t->status);
    st_stamp_setup();     /* before the first stamp of this process */
    t->lane = &t->engine; /* empty until tracing maps it */
    if (w->cfg.trace_path) {
        t->path = st_strdup(w->cfg.trace_path);
        if (!t->path)
            return st_fail_nomem("strata_worker_create: trace_path", strlen(w->cfg.trace_path) + 1);
    } else if (t->env_allowed) {
        STRATA_TRY(env_trace_path(&t->path));
    }
    w->cfg.trace_path = t->path; /* the caller's string may go */
    if (t->path && STRATA_TRACE_COMPILED) {
        int rc = st_trace_lane_init(&t->engine, w->cfg.trace_events_per_lane);
        if (rc == STRATA_OK && !(t->msgs = st_calloc(1, sizeof *t->msgs))) {
            st_trace_lane_free(&t->engine);
            rc = st_fail_nomem("strata_worker_create: the trace's message table", sizeof *t->msgs);
        }
        t->msgs_owned = t->msgs != NULL;
        if (rc != STRATA_OK) {
            st_free(t->path);
            t->path = NULL;
            return rc;
        }
        t->on = 1;
    }
    t->timed = STRATA_TRACE_COMPILED && (t->on || w->cfg.collect_stats);
    w->stats.timed = t->timed;
    return STRATA_OK;
}

void st_trace_destroy(strata_worker *w) {
    st_trace_lane_free(&w->trace.engine);
    if (w->trace.msgs_owned)
        st_free(w->trace.msgs);
    w->trace.msgs = NULL;
    st_trace_regions_free(w);
    st_free(w->trace.path);
    w->trace.path = NULL;
    w->cfg.trace_path = NULL;
}

void st_trace_start(strata_worker *w) {
    w->trace.t0 = st_stamp();
    /* Kept for strata_worker_stats after close, which empties the tables. */
    w->stats.sub_workers = (uint32_t)w->nsubs;
    w->stats.next_level = (uint32_t)w->nnext;
}

void st_trace_finish(strata_worker *w) {
    st_trace *t = &w->trace;
    st_engine_lock(w); /* strata_worker_stats reads t1 under it */
    t->t1 = st_stamp();
    st_engine_unlock(w);
    if (!t->on)
        return;
    t->on = 0;   /* written once */
    if (t->into) /* a child Worker in a process: its parent writes the file */
        return;
    int rc = st_trace_write(w, t->path);
    if (rc != STRATA_OK)
        st_error_set(&t->status, rc, "strata_worker_close: %s", strata_error_message());
}

/* ---- statistics ---------------------------------------------------------- */

static strata_lane_stats *lane_of(strata_worker *w, const st_completion *c, int32_t *num) {
    if (!c->ep->is_sub) {
        *num = ST_TRACE_NEXT + c->ep->worker_id;
        return &w->stats.next[c->ep->worker_id];
    }
    if (c->ran_on == w->nsubs) { /* a waiting caller ran it (helping.c) */
        *num = w->nsubs;
        return &w->stats.helper;
    }
    *num = c->ep->worker_id;
    return &w->stats.sub[c->ep->worker_id];
}

void st_stats_count(strata_worker *w, st_slot *s, const st_completion *c) {
    int32_t num;
    strata_lane_stats *l = lane_of(w, c, &num);
    int failed = c->status != STRATA_OK;
    l->tasks_run++;
    l->tasks_failed += (uint64_t)failed;
    s->run->st_run++;
    s->run->st_failed += (uint64_t)failed;
}

/* ---- record points ------------------------------------------------------- */

static st_trace_event *next_event(strata_worker *w, uint64_t now) {
    return w->trace.on ? st_trace_lane_next(w->trace.lane, now) : NULL;
}

static void edges_of(strata_worker *w, st_slot *s, uint64_t now, uint64_t *longest) {
    for (uint32_t i = 0; i < s->producers.n; i++) {
        st_slot *p = st_slots_get(&w->slots, s->producers.v[i]);
        if (!p || p->kind == ST_SLOT_ALLOC)
            continue;
        if (p->path_ns > *longest)
            *longest = p->path_ns;
        st_trace_event *e = next_event(w, now);
        if (!e)
            continue;
        *e = (st_trace_event){.ts = now,
                              .run = s->run->id,
                              .a = (uint32_t)p->seq,
                              .b = (uint32_t)s->seq,
                              .kind = ST_TEV_EDGE};
        st_trace_lane_commit(w->trace.lane);
    }
}

/* A chip task's native phases, if its endpoint timed them for this dispatch. */
static void chip_phases(strata_worker *w, st_slot *s, const st_completion *c, int32_t num) {
    const uint64_t *n = c->native;
    if (!n[0] || n[0] < s->t_dispatch || n[4] < n[0])
        return;
    st_trace_event *e = next_event(w, n[4]);
    if (!e)
        return;
    *e = (st_trace_event){.ts = n[4],
                          .t = {n[0], n[1], n[2], n[3]},
                          .run = s->run->id,
                          .a = (uint32_t)s->seq,
                          .b = (uint32_t)s->callable,
                          .worker = num,
                          .kind = ST_TEV_CHIP};
    st_trace_lane_commit(w->trace.lane);
}

/* A completion's start and end, if they describe this dispatch: t_dispatch
 * <= t_start <= t_end, and for a child process's times (read in another
 * process, handed back in shared memory the child can scribble on) t_end <=
 * the parent's now (taken here, at the drain: later than the completion, so
 * never too strict). Times that fail are dropped and counted; times of 0
 * were not measured (a kind that measures nothing). */
static int times_trusted(strata_worker *w, const st_slot *s, const st_completion *c) {
    if (c->t_start == 0 && c->t_end == 0)
        return 0;
    int ok = c->t_start != 0 && c->t_start >= s->t_dispatch && c->t_end >= c->t_start;
    if (ok && c->ep->pid != 0)
        ok = c->t_end <= st_stamp();
    if (!ok) {
        w->trace.times_rejected++;
        if (w->trace.into) /* the parent reads the region, not this process's count */
            w->trace.into->times_rejected++;
    }
    return ok;
}

/* A failed task's message, while the table has room (no allocation: the
 * table was made at create). */
static void error_text(strata_worker *w, st_slot *s, const st_completion *c, uint64_t now) {
    st_trace_msgs *m = w->trace.msgs;
    if (!m || m->n >= ST_TRACE_MSGS || !c->msg[0])
        return;
    st_trace_event *e = next_event(w, now);
    if (!e)
        return;
    uint32_t slot = m->n++;
    size_t len = strnlen(c->msg, ST_TRACE_MSG_LEN - 1); /* a longer one is cut */
    memcpy(m->text[slot], c->msg, len);
    m->text[slot][len] = '\0';
    *e = (st_trace_event){.ts = now,
                          .t = {slot},
                          .run = s->run->id,
                          .a = (uint32_t)s->seq,
                          .b = c->member,
                          .kind = ST_TEV_ERROR};
    st_trace_lane_commit(w->trace.lane);
}

void st_trace_task_end(strata_worker *w, st_slot *s, const st_completion *c) {
    int measured = times_trusted(w, s, c);
    uint64_t now = measured ? c->t_end : st_stamp(); /* one clock read fewer per task */
    uint64_t start = measured ? c->t_start : s->t_dispatch;
    uint64_t end = now;
    uint64_t dur = end > start ? end - start : 0;
    int32_t num;
    strata_lane_stats *l = lane_of(w, c, &num);
    l->busy_ns += dur;
    st_run *r = s->run;
    uint64_t ov = start > s->t_ready ? start - s->t_ready : 0;
    strata_worker_statistics *st = &w->stats;
    st->overhead_mean_ns += ov; /* the sum until strata_worker_stats divides it */
    st->overhead_tasks++;
    if (ov > st->overhead_max_ns)
        st->overhead_max_ns = ov;
    r->st_ov_n++;
    r->st_ov_sum += ov;
    if (ov > r->st_ov_max)
        r->st_ov_max = ov;
    uint64_t longest = 0;
    if (c->member == 0)
        edges_of(w, s, now, &longest);
    else
        longest = s->path_ns > dur ? s->path_ns - dur : 0; /* approximate for later members */
    if (longest + dur > s->path_ns)
        s->path_ns = longest + dur;
    if (s->path_ns > r->st_crit)
        r->st_crit = s->path_ns;
    st_trace_event *e = next_event(w, now);
    if (!e)
        return;
    *e = (st_trace_event){
        .ts = end,
        .t = {s->t_submit, s->t_ready, s->t_dispatch, start},
        .run = r->id,
        .a = (uint32_t)s->seq,
        .b = (uint32_t)s->callable | c->member << 16 | (uint32_t)(s->nmembers > 1) << 31,
        .worker = num,
        .kind = ST_TEV_TASK,
        .status = c->status == STRATA_OK ? 0 : 1,
        .flags = measured ? ST_TEVF_MEASURED : 0,
    };
    st_trace_lane_commit(w->trace.lane);
    if (c->status != STRATA_OK)
        error_text(w, s, c, now);
    if (!c->ep->is_sub)
        chip_phases(w, s, c, num);
}

void st_trace_not_run(strata_worker *w, st_slot *s) {
    uint64_t now = st_stamp();
    st_trace_event *e = next_event(w, now);
    if (!e)
        return;
    *e = (st_trace_event){.ts = now,
                          .t = {s->t_submit, s->t_ready},
                          .run = s->run->id,
                          .a = (uint32_t)s->seq,
                          .b = (uint32_t)s->callable,
                          .worker = -1,
                          .kind = ST_TEV_NOT_RUN,
                          .status = s->fail_status == STRATA_ECANCELED ? 2 : 1};
    st_trace_lane_commit(w->trace.lane);
}

void st_trace_phase(strata_worker *w, st_run *r, uint32_t phase) {
    if (phase == ST_RUN_COMPLETED || phase == ST_RUN_FAILED)
        st_trace_regions_drain(w); /* a child Worker's own chips: before its run's end */
    uint64_t now = st_stamp();
    st_trace_event *e = next_event(w, now);
    if (!e)
        return;
    *e = (st_trace_event){.ts = now, .run = r->id, .a = phase, .kind = ST_TEV_PHASE};
    st_trace_lane_commit(w->trace.lane);
}

void st_trace_wait(strata_worker *w, uint64_t began, int heap) {
    uint64_t now = st_stamp();
    st_trace_event *e = next_event(w, now);
    if (!e)
        return;
    *e = (st_trace_event){.ts = now, .t = {began}, .a = (uint32_t)heap, .kind = ST_TEV_WAIT};
    st_trace_lane_commit(w->trace.lane);
}
