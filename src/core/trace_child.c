/* core/trace_child.c - process children's own traces: the shared regions a
 * parent maps for them before the fork, what a child records there, and the
 * names a child Worker leaves there for its parent's writer.
 *
 * Owns: mapping and unmapping regions (one per process child of a traced
 * worker, in the parent's st_trace.child[]), a process chip's native-phase
 * records (written under its chip driver's lock: the lane's one writer at a
 * time, exec/chip_driver.h "phases"), a child Worker's switch to recording into
 * its region (its engine lane there: written under its engine lock as any
 * engine lane), a child Worker's copying of its own children's regions into
 * its lane at each run's end (its chips' phases; its child Workers' records
 * tagged with their origin, after their names as records), and the name
 * tables (st_trace_names_of, st_trace_names_decode).
 * Must never: block, allocate or take a lock on a record call; be read by the
 * parent before the child stopped; write a file in a child.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/trace.h"
#include "core/trace_child.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/stamp.h"

/* The header rounded to whole events: the records start 64-byte aligned. */
static size_t header_bytes(void) {
    size_t h = sizeof(st_trace_region);
    return (h + sizeof(st_trace_event) - 1) / sizeof(st_trace_event) * sizeof(st_trace_event);
}

static size_t region_bytes(uint32_t cap) {
    return header_bytes() + (size_t)cap * sizeof(st_trace_event);
}

st_trace_region *st_trace_region_new(st_engine *e, int worker_id, st_trace_region_kind kind) {
    strata_worker *w = e;
    if (!w->trace.on || worker_id < 0 || worker_id >= STRATA_MAX_NEXT_LEVEL)
        return NULL;
    /* Its records would reach no file: only a depth-1 worker copies its
     * child Workers' regions up, and only their own records. */
    if (kind == ST_REGION_WORKER && w->trace.depth >= ST_TRACE_MAX_DEPTH)
        return NULL;
    uint32_t cap = w->cfg.trace_events_per_lane;
    if (w->trace.child[worker_id]) /* a failed add left it: that id is being added again */
        st_unmap(w->trace.child[worker_id], region_bytes(cap));
    w->trace.child[worker_id] = NULL;
    w->trace.drained[worker_id] = 0;
    w->trace.drained_drops[worker_id] = 0;
    w->trace.drained_rejected[worker_id] = 0;
    w->trace.names_sent[worker_id] = 0;
    /* Shared and populated: the child's first records cost no page fault. */
    st_trace_region *r = st_map_anon(region_bytes(cap), MAP_SHARED | MAP_POPULATE);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->lane.ev = (st_trace_event *)((char *)r + header_bytes());
    r->lane.cap = cap;
    r->kind = (uint32_t)kind;
    r->depth = w->trace.depth + 1;
    w->trace.child[worker_id] = r;
    return r;
}

static void terminate(char *s, size_t cap) {
    s[cap - 1] = '\0';
}

int st_trace_region_read(const strata_worker *w, int j, st_trace_region_view *v) {
    memset(v, 0, sizeof *v);
    const st_trace_region *r = j >= 0 && j < STRATA_MAX_NEXT_LEVEL ? w->trace.child[j] : NULL;
    if (!r)
        return STRATA_OK;
    uint32_t cap = w->cfg.trace_events_per_lane; /* what the parent mapped, not r->lane.cap */
    v->kind = r->kind;
    v->ev = (const st_trace_event *)((const char *)r + header_bytes());
    uint32_t n = atomic_load_explicit(&((st_trace_region *)r)->lane.count, memory_order_acquire);
    v->n = n < cap ? n : cap;
    v->dropped = r->lane.dropped;
    v->full_ts = r->lane.full_ts;
    v->times_rejected = r->times_rejected;
    if (r->kind != ST_REGION_WORKER ||
        !atomic_load_explicit(&((st_trace_region *)r)->named, memory_order_acquire))
        return STRATA_OK;
    v->names = st_malloc(sizeof *v->names);
    v->msgs = st_malloc(sizeof *v->msgs);
    if (!v->names || !v->msgs) {
        st_trace_region_view_free(v);
        return st_fail_nomem("writing the trace: a child's names",
                             sizeof *v->names + sizeof *v->msgs);
    }
    memcpy(v->names, &r->names, sizeof *v->names);
    memcpy(v->msgs, &r->msgs, sizeof *v->msgs);
    st_trace_names *nm = v->names;
    nm->nsubs = nm->nsubs < 0                        ? 0
                : nm->nsubs > STRATA_MAX_SUB_WORKERS ? STRATA_MAX_SUB_WORKERS
                                                     : nm->nsubs;
    nm->nnext = nm->nnext < 0                       ? 0
                : nm->nnext > STRATA_MAX_NEXT_LEVEL ? STRATA_MAX_NEXT_LEVEL
                                                    : nm->nnext;
    if (nm->ncallables > ST_MAX_CALLABLES)
        nm->ncallables = ST_MAX_CALLABLES;
    for (int k = 0; k < STRATA_MAX_NEXT_LEVEL; k++)
        terminate(nm->next_label[k], sizeof nm->next_label[k]);
    for (int k = 0; k < ST_MAX_CALLABLES; k++)
        terminate(nm->callable[k], sizeof nm->callable[k]);
    if (v->msgs->n > ST_TRACE_MSGS)
        v->msgs->n = ST_TRACE_MSGS;
    for (int k = 0; k < ST_TRACE_MSGS; k++)
        terminate(v->msgs->text[k], sizeof v->msgs->text[k]);
    v->named = 1;
    v->pid = nm->pid;
    return STRATA_OK;
}

void st_trace_region_view_free(st_trace_region_view *v) {
    st_free(v->names);
    st_free(v->msgs);
    v->names = NULL;
    v->msgs = NULL;
}

void st_trace_regions_free(strata_worker *w) {
    for (int j = 0; j < STRATA_MAX_NEXT_LEVEL; j++) {
        st_trace_region *r = w->trace.child[j];
        if (r) /* the size mapped: the region's own cap field is the child's to scribble on */
            st_unmap(r, region_bytes(w->cfg.trace_events_per_lane));
        w->trace.child[j] = NULL;
    }
}

void st_trace_region_chip(st_trace_region *r, int worker_id, uint64_t run, uint32_t callable,
                          const uint64_t native[5]) {
    if (!r || !native[0] || native[4] < native[0])
        return;
    if (!atomic_load_explicit(&r->pid, memory_order_relaxed))
        atomic_store_explicit(&r->pid, (int32_t)getpid(), memory_order_relaxed);
    st_trace_event *e = st_trace_lane_next(&r->lane, native[4]);
    if (!e)
        return;
    /* a 0: the child knows no task index; the parent draws phases by lane and time */
    *e = (st_trace_event){.ts = native[4],
                          .t = {native[0], native[1], native[2], native[3]},
                          .run = run,
                          .b = callable,
                          .worker = ST_TRACE_NEXT + worker_id,
                          .kind = ST_TEV_CHIP};
    st_trace_lane_commit(&r->lane);
}

/* ---- A child Worker's child Workers' names, as records (trace_child.h) ------------- */

_Static_assert(sizeof(((st_trace_names *)0)->callable[0]) == ST_NM_STR, "a name is 64 bytes");
_Static_assert(sizeof(((st_trace_names *)0)->next_label[0]) == ST_NM_STR, "a label is 64 bytes");

/* The payload through 64-bit words, not the struct's layout. */
static void payload_put(st_trace_event *e, const void *bytes, size_t len) {
    uint64_t p[ST_NM_BYTES / 8] = {0};
    memcpy(p, bytes, len < ST_NM_BYTES ? len : ST_NM_BYTES);
    e->ts = p[0];
    for (int i = 0; i < 4; i++)
        e->t[i] = p[1 + i];
    e->run = p[5];
}

static void payload_get(const st_trace_event *e, void *bytes) {
    uint64_t p[ST_NM_BYTES / 8] = {e->ts, e->t[0], e->t[1], e->t[2], e->t[3], e->run};
    memcpy(bytes, p, ST_NM_BYTES);
}

/* 0 when the lane is full (the record counts as its drop). */
static int name_record(st_trace_lane *l, uint64_t now, unsigned origin, uint8_t what,
                       uint32_t index, int32_t chunk, const void *bytes, size_t len) {
    st_trace_event *e = st_trace_lane_next(l, now);
    if (!e)
        return 0;
    *e = (st_trace_event){
        .a = index, .worker = chunk, .kind = ST_TEV_FROM(ST_TEV_NAME, origin), .status = what};
    payload_put(e, bytes, len);
    st_trace_lane_commit(l);
    return 1;
}

/* A string of the child's table, terminated here (it can scribble on it):
 * one record, a second for a string longer than one payload. */
static int name_string(st_trace_lane *l, uint64_t now, unsigned origin, uint8_t what,
                       uint32_t index, const char *src) {
    char s[ST_NM_STR];
    memcpy(s, src, ST_NM_STR);
    s[ST_NM_STR - 1] = '\0';
    size_t len = strlen(s) + 1;
    if (!name_record(l, now, origin, what, index, 0, s, len))
        return 0;
    return len <= ST_NM_BYTES ||
           name_record(l, now, origin, what, index, 1, s + ST_NM_BYTES, len - ST_NM_BYTES);
}

static int clamp(int32_t v, int32_t max) {
    return v < 0 ? 0 : v > max ? max : v;
}

/* The names of a child Worker (its region's table) into this worker's lane,
 * the header first, up to where the lane fills. */
static void send_names(st_trace_lane *l, unsigned origin, const st_trace_names *src, uint64_t now) {
    int32_t nsubs = clamp(src->nsubs, STRATA_MAX_SUB_WORKERS);
    int32_t nnext = clamp(src->nnext, STRATA_MAX_NEXT_LEVEL);
    uint32_t nc = src->ncallables < ST_MAX_CALLABLES ? src->ncallables : ST_MAX_CALLABLES;
    int32_t head[5] = {src->level, src->pid, nsubs, nnext, (int32_t)nc};
    int ok = name_record(l, now, origin, ST_NM_HEAD, 0, 0, head, sizeof head);
    for (int32_t i = 0; ok && i < nsubs; i += ST_NM_PIDS)
        ok = name_record(l, now, origin, ST_NM_SUB_PIDS, (uint32_t)i, 0, &src->sub_pid[i],
                         (size_t)(nsubs - i < ST_NM_PIDS ? nsubs - i : ST_NM_PIDS) * 4);
    for (int32_t i = 0; ok && i < nnext; i += ST_NM_PIDS)
        ok = name_record(l, now, origin, ST_NM_NEXT_PIDS, (uint32_t)i, 0, &src->next_pid[i],
                         (size_t)(nnext - i < ST_NM_PIDS ? nnext - i : ST_NM_PIDS) * 4);
    for (int32_t i = 0; ok && i < nnext; i++)
        ok = name_string(l, now, origin, ST_NM_NEXT_LABEL, (uint32_t)i, src->next_label[i]);
    for (uint32_t i = 0; ok && i < nc; i++)
        ok = name_string(l, now, origin, ST_NM_CALLABLE, i, src->callable[i]);
}

static void decode_string(char (*table)[ST_NM_STR], uint32_t cap, const st_trace_event *e) {
    if (e->a >= cap || e->worker < 0 || e->worker > 1)
        return;
    char bytes[ST_NM_BYTES];
    payload_get(e, bytes);
    size_t at = (size_t)e->worker * ST_NM_BYTES;
    memcpy(table[e->a] + at, bytes, at ? ST_NM_STR - ST_NM_BYTES : ST_NM_BYTES);
    table[e->a][ST_NM_STR - 1] = '\0';
}

static void decode_pids(int32_t *table, int32_t cap, const st_trace_event *e) {
    int32_t pids[ST_NM_PIDS];
    payload_get(e, pids);
    for (int32_t k = 0; k < ST_NM_PIDS && (int64_t)e->a + k < cap; k++)
        table[e->a + (uint32_t)k] = pids[k];
}

int st_trace_names_decode(const st_trace_event *ev, uint32_t n, unsigned origin,
                          st_trace_names *out) {
    memset(out, 0, sizeof *out);
    int head = 0;
    for (uint32_t i = 0; i < n; i++) {
        const st_trace_event e = ev[i]; /* one copy, checked */
        if (e.kind != ST_TEV_FROM(ST_TEV_NAME, origin))
            continue;
        if (e.status == ST_NM_HEAD && !head) {
            int32_t h[ST_NM_PIDS];
            payload_get(&e, h);
            out->level = h[0];
            out->pid = h[1];
            out->nsubs = clamp(h[2], STRATA_MAX_SUB_WORKERS);
            out->nnext = clamp(h[3], STRATA_MAX_NEXT_LEVEL);
            out->ncallables = (uint32_t)clamp(h[4], ST_MAX_CALLABLES);
            head = 1;
        } else if (head && e.status == ST_NM_SUB_PIDS) {
            decode_pids(out->sub_pid, out->nsubs, &e);
        } else if (head && e.status == ST_NM_NEXT_PIDS) {
            decode_pids(out->next_pid, out->nnext, &e);
        } else if (head && e.status == ST_NM_NEXT_LABEL) {
            decode_string(out->next_label, (uint32_t)out->nnext, &e);
        } else if (head && e.status == ST_NM_CALLABLE) {
            decode_string(out->callable, out->ncallables, &e);
        }
    }
    return head;
}

/* ---- Copying the children's regions up --------------------------------------------- */

/* A child Worker's failed task's message into this worker's table (the
 * record's slot rewritten to it): 0 when its slot is bad or the table full. */
static int copy_message(st_trace *t, const st_trace_region *r, st_trace_event *x) {
    st_trace_msgs *m = t->msgs;
    if (!m || m->n >= ST_TRACE_MSGS || x->t[0] >= ST_TRACE_MSGS)
        return 0;
    const char *src = r->msgs.text[x->t[0]];
    size_t len = strnlen(src, ST_TRACE_MSG_LEN - 1);
    uint32_t slot = m->n++;
    memcpy(m->text[slot], src, len);
    m->text[slot][len] = '\0';
    x->t[0] = slot;
    return 1;
}

/* A process chip's phases, drawn on the lane this worker knows it by,
 * whatever the record says. */
static int take_chip(st_trace_event *x, int j) {
    if (x->kind != ST_TEV_CHIP)
        return 0;
    x->worker = ST_TRACE_NEXT + j;
    return 1;
}

/* A child Worker's own records (origin 0 in its region; it copies none of
 * its children's), tagged with its origin here. NAME and DROPS are this
 * worker's to write. */
static int take_worker(st_trace_event *x, int j) {
    unsigned k = x->kind;
    if (ST_TEV_ORIGIN(k) != 0 || k == 0 || k >= ST_TEV_NAME)
        return 0;
    x->kind = ST_TEV_FROM(k, (unsigned)j + 1);
    return 1;
}

/* The drops of child region j since the last drain: a chip's on this
 * worker's lane (its marker: the first's time); a child Worker's as one
 * DROPS record of its origin, drawn on its own orchestrator lane (on this
 * lane's count if even that record finds no room). */
static void copy_drops(st_trace *t, int j, const st_trace_region *r) {
    uint64_t drops = __atomic_load_n(&r->lane.dropped, __ATOMIC_RELAXED);
    uint64_t ts = __atomic_load_n(&r->lane.full_ts, __ATOMIC_RELAXED);
    if (drops <= t->drained_drops[j])
        return;
    uint64_t more = drops - t->drained_drops[j];
    t->drained_drops[j] = drops;
    if (r->kind == ST_REGION_WORKER) {
        st_trace_event *e = st_trace_lane_next(t->lane, ts);
        if (e) {
            *e = (st_trace_event){
                .ts = ts, .t = {more}, .kind = ST_TEV_FROM(ST_TEV_DROPS, (unsigned)j + 1)};
            st_trace_lane_commit(t->lane);
            return;
        }
    }
    st_trace_lane_count_drops(t->lane, more, ts);
}

/* Only the records are copied, each once and checked (the child could
 * scribble on its region). A child Worker's are copied once its names are
 * complete, after them (the file's writer names its records by them). */
static void drain_one(st_trace *t, int j, st_trace_region *r, uint32_t cap) {
    int worker = r->kind == ST_REGION_WORKER;
    if (worker) {
        if (!atomic_load_explicit(&r->named, memory_order_acquire))
            return;
        if (!t->names_sent[j]) /* once: names that did not fit are drops, counted */
            send_names(t->lane, (unsigned)j + 1, &r->names, st_stamp());
        t->names_sent[j] = 1;
        uint64_t rej = __atomic_load_n(&r->times_rejected, __ATOMIC_RELAXED);
        if (rej > t->drained_rejected[j] && t->into)
            t->into->times_rejected += rej - t->drained_rejected[j];
        if (rej > t->drained_rejected[j])
            t->drained_rejected[j] = rej;
    }
    const st_trace_event *ev = (const st_trace_event *)((const char *)r + header_bytes());
    uint32_t n = atomic_load_explicit(&r->lane.count, memory_order_acquire);
    n = n < cap ? n : cap;
    for (uint32_t i = t->drained[j]; i < n; i++) {
        st_trace_event x = ev[i];
        if (!(worker ? take_worker(&x, j) : take_chip(&x, j)))
            continue;
        st_trace_event *e = st_trace_lane_next(t->lane, x.ts);
        if (!e)
            continue; /* counted as this lane's drop */
        if (ST_TEV_KIND(x.kind) == ST_TEV_ERROR && !copy_message(t, r, &x))
            continue; /* past the table: its task keeps its status, not its text */
        *e = x;
        st_trace_lane_commit(t->lane);
    }
    if (n > t->drained[j])
        t->drained[j] = n;
    copy_drops(t, j, r);
}

void st_trace_regions_drain(strata_worker *w) {
    st_trace *t = &w->trace;
    if (!t->into)
        return;
    uint32_t cap = w->cfg.trace_events_per_lane; /* what this worker mapped */
    for (int j = 0; j < STRATA_MAX_NEXT_LEVEL; j++)
        if (t->child[j])
            drain_one(t, j, t->child[j], cap);
}

void st_trace_record_into(strata_worker *inner, st_trace_region *r) {
    if (!r || !STRATA_TRACE_COMPILED)
        return;
    st_trace *t = &inner->trace;
    t->into = r;
    t->depth = r->depth; /* the mapper's: this worker's own parent wrote it */
    t->lane = &r->lane;
    st_free(t->msgs); /* its own table, if tracing had made one: the region's is read */
    t->msgs = &r->msgs;
    t->msgs_owned = 0;
    t->on = 1;
    t->timed = 1;
    inner->stats.timed = 1;
    atomic_store_explicit(&r->pid, (int32_t)getpid(), memory_order_relaxed);
}

void st_trace_names_of(strata_worker *w, st_trace_names *n) {
    n->level = (int32_t)w->cfg.level;
    n->pid = (int32_t)getpid();
    n->nsubs = w->nsubs;
    n->nnext = w->nnext;
    for (int i = 0; i < w->nsubs && i < STRATA_MAX_SUB_WORKERS; i++)
        n->sub_pid[i] = w->subs[i].ep ? w->subs[i].ep->pid : 0;
    for (int j = 0; j < w->nnext && j < STRATA_MAX_NEXT_LEVEL; j++) {
        const st_endpoint *ep = w->next[j].ep;
        n->next_pid[j] = ep ? ep->pid : 0;
        snprintf(n->next_label[j], sizeof n->next_label[j], "%s", ep ? ep->label : "");
    }
    uint32_t nc = st_registry_count(&w->callables);
    n->ncallables = nc < ST_MAX_CALLABLES ? nc : ST_MAX_CALLABLES;
    for (uint32_t i = 0; i < n->ncallables; i++) {
        const st_callable_info *ci = st_registry_get(&w->callables, (int32_t)i);
        snprintf(n->callable[i], sizeof n->callable[i], "%s", ci ? ci->name : "?");
    }
}

/* Right after the inner worker's init: its parent writes the file while the
 * child process still lives (it is shut down after), so the names cannot
 * wait for the child's close. Its subs, chips and callables are fixed by
 * then (a child Worker's setup registers them before init). */
void st_trace_region_named(strata_worker *inner) {
    st_trace_region *r = inner->trace.into;
    if (!r)
        return;
    st_trace_names_of(inner, &r->names);
    r->t_ready = inner->trace.t0;
    atomic_store_explicit(&r->named, 1, memory_order_release);
}
