/* core/trace_child.c - process children's own traces: the shared regions a
 * parent maps for them before the fork, what a child records there, and the
 * names a child Worker leaves there for its parent's writer.
 *
 * Owns: mapping and unmapping regions (one per process child of a traced
 * worker, in the parent's st_trace.child[]), a process chip's native-phase
 * records (written under its chip driver's lock: the lane's one writer at a
 * time, exec/chip_driver.h "phases"), a child Worker's switch to recording into
 * its region (its engine lane there: written under its engine lock as any
 * engine lane), and the name tables (st_trace_names_of).
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
    uint32_t cap = w->cfg.trace_events_per_lane;
    if (w->trace.child[worker_id]) /* a failed add left it: that id is being added again */
        st_unmap(w->trace.child[worker_id], region_bytes(cap));
    w->trace.child[worker_id] = NULL;
    w->trace.drained[worker_id] = 0;
    /* Shared and populated: the child's first records cost no page fault. */
    st_trace_region *r = st_map_anon(region_bytes(cap), MAP_SHARED | MAP_POPULATE);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->lane.ev = (st_trace_event *)((char *)r + header_bytes());
    r->lane.cap = cap;
    r->kind = (uint32_t)kind;
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

/* Only the records are copied, each once and checked (the chip could
 * scribble on its region): the lane they are drawn on is the one this worker
 * knows the region by, whatever the record says. */
void st_trace_regions_drain(strata_worker *w) {
    st_trace *t = &w->trace;
    if (!t->into)
        return;
    uint32_t cap = w->cfg.trace_events_per_lane; /* what this worker mapped */
    for (int j = 0; j < STRATA_MAX_NEXT_LEVEL; j++) {
        st_trace_region *r = t->child[j];
        if (!r || r->kind != ST_REGION_CHIP)
            continue;
        const st_trace_event *ev = (const st_trace_event *)((const char *)r + header_bytes());
        uint32_t n = atomic_load_explicit(&r->lane.count, memory_order_acquire);
        n = n < cap ? n : cap;
        for (uint32_t i = t->drained[j]; i < n; i++) {
            st_trace_event x = ev[i];
            if (x.kind != ST_TEV_CHIP)
                continue;
            x.worker = ST_TRACE_NEXT + j;
            st_trace_event *e = st_trace_lane_next(t->lane, x.ts);
            if (!e)
                continue; /* counted as this lane's drop */
            *e = x;
            st_trace_lane_commit(t->lane);
        }
        if (n > t->drained[j])
            t->drained[j] = n;
        /* The chip's drops, counted on this lane (its marker: the first's time). */
        uint64_t drops = __atomic_load_n(&r->lane.dropped, __ATOMIC_RELAXED);
        if (drops > t->drained_drops[j]) {
            st_trace_lane_count_drops(t->lane, drops - t->drained_drops[j],
                                      __atomic_load_n(&r->lane.full_ts, __ATOMIC_RELAXED));
            t->drained_drops[j] = drops;
        }
    }
}

void st_trace_record_into(strata_worker *inner, st_trace_region *r) {
    if (!r || !STRATA_TRACE_COMPILED)
        return;
    st_trace *t = &inner->trace;
    t->into = r;
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
