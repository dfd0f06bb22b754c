/* mpi/mpi_copies.c - where a task's tensor bytes come from, and the copies
 * the child ranks keep (rank 0's side; mpi/mpi_directory.h is the record).
 *
 * Owns: the placement of each host tensor of a task for an MPI child (its
 * own valid copy: nothing travels; a valid copy on another child: that rank
 * is sent a SEND_TO and sends it straight to the child, never through rank
 * 0; otherwise rank 0 sends it) and whether the child keeps its copy (a
 * per-child budget, oldest copies dropped first); the digest check that
 * makes a copy valid at its first use in a run (the program may have written
 * the host bytes between runs); after a task, the copies its writes made
 * stale (dropped at their holders, the drop sent with each holder's next
 * task, taken back if that holder keeps the id again first) and the
 * writer's own copy; after a failed task, the copies its rank says it
 * dropped (DONE arg0); the end of an entry no child holds and no task in
 * flight places; the writes of tasks that go to no MPI child (recorded at
 * their dispatch, applied before the next placement).
 * Must never: be called by any thread but the session's progress thread
 * (under st_mpi_lock; the dispatch observer aside, which only appends to
 * the session's write record), leave a holder recorded for a copy the
 * child does not keep, let a drop reach a rank after that rank was told to
 * keep the same id again, or reuse a cache id.
 */
#include <string.h>

#include "mpi/mpi_bell.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_session.h"
#include "mpi/mpi_xfer.h"
#include "strata/tensor.h"
#include "util/alloc.h"
#include "util/digest.h"
#include "util/growable.h"

/* Queue a drop of copy `id` for ep (sent with its next task); its holder bit
 * is clear already. 0: no memory for the list: the child keeps the copy
 * until that id is kept there again (which replaces it) or until close; the
 * record says it does not hold it, so it is never read (memory, never a
 * wrong read), but the child's bytes exceed what cache_bytes counts. */
static int queue_drop(mpi_ep *ep, uint64_t id, uint64_t bytes) {
    ep->cache_bytes = ep->cache_bytes > bytes ? ep->cache_bytes - bytes : 0;
    if (ep->ndrops == ep->capdrops) {
        uint64_t *nd =
            st_grow(ep->drops, &ep->capdrops, ep->ndrops + 1, sizeof *nd, 32, NULL, "drop list");
        if (!nd)
            return 0;
        ep->drops = nd;
    }
    ep->drops[ep->ndrops++] = id;
    return 1;
}

/* A drop of `id` still queued for ep is taken back: ep holds that id again
 * (its new copy is made by a frame sent before any later one), and a drop
 * sent after that frame would delete the new copy. Drops wait in the queue
 * when a frame cannot carry them all (ST_MPI_DROPS_MAX). */
static void cancel_drop(mpi_ep *ep, uint64_t id) {
    for (uint32_t k = 0; k < ep->ndrops;)
        if (ep->drops[k] == id)
            ep->drops[k] = ep->drops[--ep->ndrops];
        else
            k++;
}

/* Whether a task in flight (sent, not settled yet) places copy id: on ep
 * only, or on any child of s when ep is NULL; `except` (a task being
 * settled) aside. A task finished without a settle (its child dead) is
 * not in flight. */
static int in_flight(const mpi_session *s, const mpi_ep *ep, uint64_t id, const mpi_task *except) {
    for (int c = 0; c < s->n; c++) {
        const mpi_ep *on = s->eps[c];
        if (ep && on != ep)
            continue;
        for (int k = 0; k < ST_MPI_SLOTS; k++) {
            const mpi_task *t = &on->task[k];
            int state = atomic_load(&t->state);
            if (t == except || t->finished || (state != T_SENT && state != T_RECV))
                continue;
            for (uint32_t i = 0; i < t->d.args->ntensors; i++)
                if (t->place[i].id == id)
                    return 1;
        }
    }
    return 0;
}

/* e goes from the directory when no child holds a copy of it and no task in
 * flight places it (its settle looks it up; `except` is the one settling):
 * the directory then holds what the children keep, not every view it saw. */
static void forget_if_unheld(mpi_session *s, st_dir_entry *e, const mpi_task *except) {
    if (st_dir_empty(e) && !in_flight(s, NULL, e->id, except))
        st_dir_remove(&s->dir, e);
}

/* Every holder of e but `keep` (a child index, or -1) drops its copy. */
static void drop_holders(mpi_session *s, st_dir_entry *e, int keep) {
    for (int c = 0; c < s->n; c++)
        if (c != keep && st_dir_holds(e, c)) {
            st_dir_set(e, c, 0);
            if (!atomic_load(&s->eps[c]->dead))
                queue_drop(s->eps[c], e->id, e->bytes);
        }
}

/* Whether copy `id` is one the task being placed already uses (its tensors
 * 0 .. i-1, or the one being placed now, `self`): eviction must leave those,
 * or the child would drop, before this task's placements, a copy the same
 * frame tells it to read. */
static int placed_by_task(const mpi_task *t, uint32_t i, uint64_t self, uint64_t id) {
    if (id == self)
        return 1;
    for (uint32_t j = 0; j < i; j++)
        if (t->place[j].id == id)
            return 1;
    return 0;
}

/* Room for `bytes` more on ep's rank: drop its least recently used copies
 * that neither the task being placed nor a task in flight there uses (the
 * record of a copy in use must stand until that task is settled: its settle
 * keeps it, or a later frame for the same id would race the drop). 0: it
 * does not fit. */
static int make_room(mpi_session *s, mpi_ep *ep, const mpi_task *t, uint32_t i, uint64_t self,
                     uint64_t bytes) {
    uint64_t budget = atomic_load_explicit(&s->cache_budget, memory_order_relaxed);
    if (bytes > budget)
        return 0;
    while (ep->cache_bytes + bytes > budget) {
        st_dir_entry *old = NULL;
        st_dir_entry *e;
        for (uint32_t k = 0; (e = st_dir_at(&s->dir, k)) != NULL; k++)
            if (st_dir_holds(e, ep->index) && (!old || e->last_use < old->last_use) &&
                !placed_by_task(t, i, self, e->id) && !in_flight(s, ep, e->id, NULL))
                old = e;
        if (!old)
            return 0;
        st_dir_set(old, ep->index, 0);
        if (!queue_drop(ep, old->id, old->bytes)) { /* it stays there, and in the record */
            st_dir_set(old, ep->index, 1);
            ep->cache_bytes += old->bytes;
            return 0;
        }
        forget_if_unheld(s, old, NULL);
    }
    return 1;
}

static void hold(mpi_ep *ep, st_dir_entry *e) {
    cancel_drop(ep, e->id);
    st_dir_set(e, ep->index, 1);
    ep->cache_bytes += e->bytes;
}

/* The digest of view x's bytes on the host (packing a strided view into
 * *packed, which the caller sends from when the bytes go from here). */
static int host_digest(const strata_tensor *x, void **packed, st_digest *out) {
    uint64_t n = st_xfer_bytes(x);
    if (st_xfer_contiguous(x)) {
        *out = st_digest_bytes(strata_tensor_data(x), n);
        return 1;
    }
    if (!*packed) {
        *packed = st_malloc(n ? n : 1);
        if (!*packed)
            return 0;
        st_xfer_pack(x, *packed);
    }
    *out = st_digest_bytes(*packed, n);
    return 1;
}

/* A holder of a valid copy of e other than ep, alive, or NULL. */
static mpi_ep *live_holder(mpi_session *s, const st_dir_entry *e, const mpi_ep *ep) {
    for (int c = 0; c < s->n; c++)
        if (c != ep->index && st_dir_holds(e, c) && !atomic_load(&s->eps[c]->dead))
            return s->eps[c];
    return NULL;
}

int st_mpi_place_tensor(mpi_ep *ep, mpi_task *t, int slot, uint32_t i, mpi_ep **asked) {
    mpi_session *s = ep->s;
    const strata_task_args *a = t->d.args;
    const strata_tensor *x = &a->tensors[i];
    st_mpi_place *pl = &t->place[i];
    memset(pl, 0, sizeof *pl);
    int dirs = st_xfer_dirs(x, a->tags[i]);
    *asked = NULL;
    if (!dirs)
        return MPI_SUCCESS;
    if (a->tags[i] == STRATA_NO_DEP) { /* not tracked: its bytes always come from here */
        pl->kind = ST_PLACE_ROOT;
        return MPI_SUCCESS;
    }
    st_dir_entry *e = st_dir_find(&s->dir, x);
    if (!e)
        e = st_dir_add(&s->dir, x);
    if (!e) { /* no memory for the record: the bytes go from here, no copy is kept */
        pl->kind = (dirs & ST_XFER_IN) ? ST_PLACE_ROOT : ST_PLACE_NONE;
        return MPI_SUCCESS;
    }
    pl->id = e->id;
    e->last_use = ++s->use_clock;
    if (!(dirs & ST_XFER_IN)) { /* OUT: the result is the copy (the directory learns at the end) */
        if (make_room(s, ep, t, i, e->id, e->bytes)) {
            pl->kind = ST_PLACE_NONE | ST_PLACE_KEEP;
            cancel_drop(ep, e->id); /* this frame makes the new copy: see hold() */
        }
        return MPI_SUCCESS;
    }
    uint64_t run = t->d.run_id + 1;
    int valid = 1;
    mpi_ep *peer = NULL;
    int checking = 0; /* an earlier tensor of this task moves this copy under a check */
    for (uint32_t j = 0; j < i && !checking; j++)
        checking = (t->verify >> j & 1) && t->place[j].id == e->id;
    if (checking) {
        /* valid as far as this task goes: the VERDICT covers it, and a copy the
         * reader keeps is the one being filled (a stale one is filled again) */
    } else if (e->checked_run != run && !st_dir_holds(e, ep->index) && st_xfer_contiguous(x) &&
               (peer = live_holder(s, e, ep)) != NULL) {
        /* first use in this run, from another rank: the move starts now and the
         * check runs while it goes (st_mpi_verify_copies, before any other placement) */
        t->verify |= 1ull << i;
    } else if (e->checked_run != run) { /* first use in this run: the program may have written it */
        st_digest d;
        if (!host_digest(x, &t->tmp[i], &d)) {
            pl->kind = ST_PLACE_ROOT;
            return MPI_SUCCESS;
        }
        valid = st_digest_equal(&d, &e->digest);
        if (!valid) { /* written since the copies were made (or never copied): they go */
            drop_holders(s, e, -1);
            e->digest = d;
        }
        e->checked_run = run;
    }
    int written = (dirs & ST_XFER_OUT) != 0;
    if (valid && st_dir_holds(e, ep->index)) {
        pl->kind = ST_PLACE_CACHED | (written ? ST_PLACE_KEEP : 0);
        return MPI_SUCCESS;
    }
    mpi_ep *from = peer ? peer : valid ? live_holder(s, e, ep) : NULL;
    int keep = make_room(s, ep, t, i, e->id, e->bytes);
    int rc = MPI_SUCCESS;
    if (from) {
        pl->kind = ST_PLACE_PEER | (peer ? ST_PLACE_VERIFY : 0);
        pl->src = from->rank;
        st_mpi_hdr h;
        st_mpi_hdr_init(&h, ST_MPI_SEND_TO, from->base.worker_id);
        h.arg0 = e->id;
        h.arg1 = e->bytes;
        h.slot = (uint32_t)ep->rank;
        h.seq = (uint64_t)(ST_MPI_TAG_DATA0 + slot * 64 + (int)i);
        st_mpi_hdr_put(t->sendto[i], &h);
        rc = st_mpi_isend(t->sendto[i], ST_MPI_HDR_BYTES, from->rank, ST_MPI_TAG_FRAME,
                          &t->sendto_req[i]);
        *asked = from;
    } else {
        pl->kind = ST_PLACE_ROOT;
    }
    if (keep) {
        pl->kind |= ST_PLACE_KEEP;
        hold(ep, e); /* valid there once its bytes arrive; a later task there waits for them */
    }
    return rc;
}

int st_mpi_verify_copies(mpi_ep *ep, mpi_task *t, int slot) {
    if (!t->verify)
        return MPI_SUCCESS;
    mpi_session *s = ep->s;
    const strata_task_args *a = t->d.args;
    uint64_t stale = 0;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        if (!(t->verify >> i & 1))
            continue;
        const strata_tensor *x = &a->tensors[i];
        st_mpi_place *pl = &t->place[i];
        int seen = 0; /* the same view twice in one task: the first check's word holds */
        for (uint32_t j = 0; j < i && !seen; j++)
            if ((t->verify >> j & 1) && t->place[j].id == pl->id) {
                stale |= (stale >> j & 1) << i;
                seen = 1;
            }
        if (seen)
            continue;
        st_digest d = st_digest_bytes(strata_tensor_data(x), st_xfer_bytes(x)); /* contiguous */
        st_dir_entry *e = st_dir_find(&s->dir, x);
        if (!e || e->id != pl->id) { /* cannot happen between placement and here; stay safe */
            stale |= 1ull << i;
            continue;
        }
        if (!st_digest_equal(&d, &e->digest)) { /* written since: the reader gets it from here */
            stale |= 1ull << i;
            drop_holders(s, e, (pl->kind & ST_PLACE_KEEP) ? ep->index : -1);
            e->digest = d;
        }
        e->checked_run = t->d.run_id + 1;
    }
    st_mpi_hdr h;
    st_mpi_hdr_init(&h, ST_MPI_VERDICT, ep->base.worker_id);
    h.seq = t->d.dispatch_id;
    h.slot = (uint32_t)slot;
    h.arg0 = t->verify;
    h.arg1 = stale;
    st_mpi_hdr_put(t->verdict, &h);
    int rc =
        st_mpi_isend(t->verdict, ST_MPI_HDR_BYTES, ep->rank, ST_MPI_TAG_FRAME, &t->req[t->nreq++]);
    for (uint32_t i = 0; rc == MPI_SUCCESS && i < a->ntensors; i++) {
        if (!(stale >> i & 1))
            continue;
        uint64_t n = st_xfer_bytes(&a->tensors[i]);
        rc = st_mpi_isend(strata_tensor_data(&a->tensors[i]), (int)n, ep->rank,
                          ST_MPI_TAG_DATA0 + slot * 64 + (int)i, &t->req[t->nreq++]);
        atomic_fetch_add(&ep->bytes_sent, n);
    }
    return rc;
}

void st_mpi_settle_copies(mpi_ep *ep, mpi_task *t, int ok) {
    mpi_session *s = ep->s;
    const strata_task_args *a = t->d.args;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        const strata_tensor *x = &a->tensors[i];
        st_mpi_place *pl = &t->place[i];
        int dirs = st_xfer_dirs(x, a->tags[i]);
        if (!dirs || a->tags[i] == STRATA_NO_DEP)
            continue;
        st_dir_entry *e = st_dir_find(&s->dir, x);
        /* the child's word (its DONE): the copies it does not keep. When the
         * task failed: those it wrote and those whose bytes never all came;
         * the ones it only read it keeps, valid */
        int lost = (t->dropped >> i & 1) != 0;
        int kept = (pl->kind & ST_PLACE_KEEP) && !lost;
        if (lost && e && e->id == pl->id && st_dir_holds(e, ep->index)) {
            st_dir_set(e, ep->index, 0);
            ep->cache_bytes = ep->cache_bytes > e->bytes ? ep->cache_bytes - e->bytes : 0;
        }
        if (!ok)
            continue;
        if (!(dirs & ST_XFER_OUT))
            continue;
        for (st_dir_entry *o = st_dir_first_of(&s->dir, x), *next; o; o = next) {
            next = st_dir_next_of(o, x); /* taken before o may go */
            if (o != e && st_dir_overlaps(o, x)) {
                drop_holders(s, o, -1);
                st_dir_remove(&s->dir, o);
            }
        }
        if (!e || e->id != pl->id) { /* its record went (no memory): the child's copy too */
            if (kept)
                queue_drop(ep, pl->id, st_xfer_bytes(x));
            continue;
        }
        int had = st_dir_holds(e, ep->index);
        drop_holders(s, e, ep->index);
        void *packed = NULL;
        if (host_digest(x, &packed, &e->digest))
            e->checked_run = t->d.run_id + 1; /* the host bytes are the copy's now */
        else
            memset(&e->digest, 0, sizeof e->digest), e->checked_run = 0; /* matches nothing */
        st_free(packed);
        if (kept && !had)
            hold(ep, e);
        else if (!kept && had) {
            st_dir_set(e, ep->index, 0);
            queue_drop(ep, e->id, e->bytes);
        }
    }
    for (uint32_t i = 0; i < a->ntensors; i++) { /* after the loop: a view may come twice */
        st_dir_entry *e = st_dir_find(&s->dir, &a->tensors[i]);
        if (e && e->id == t->place[i].id)
            forget_if_unheld(s, e, t);
    }
}

void st_mpi_forget_holder(mpi_ep *ep) {
    mpi_session *s = ep->s;
    ep->cache_bytes = 0;
    ep->ndrops = 0;                         /* never sent: that rank serves no more frames */
    for (uint32_t k = s->dir.n; k-- > 0;) { /* backwards: a removal moves the last entry here */
        st_dir_entry *e = st_dir_at(&s->dir, k);
        if (!st_dir_holds(e, ep->index))
            continue;
        st_dir_set(e, ep->index, 0);
        forget_if_unheld(s, e, NULL);
    }
}

/* ---- Writes the directory does not see otherwise ------------------------------------------ */

void st_mpi_observe_dispatch(void *ctx, st_endpoint *ep, const st_dispatch *d) {
    mpi_session *s = ctx;
    if (st_mpi_ep_of(ep) || !d->args)
        return; /* this session's children: settled when they end */
    const strata_task_args *a = d->args;
    for (uint32_t i = 0; i < a->ntensors; i++) {
        if (a->tags[i] == STRATA_IN || a->tensors[i].mem != STRATA_MEM_HOST)
            continue; /* NO_DEP included: the task may write it */
        pthread_mutex_lock(&s->writes_mu);
        if (s->nwrites == s->capwrites) {
            strata_tensor *nw = st_grow(s->writes, &s->capwrites, s->nwrites + 1, sizeof *nw, 16,
                                        NULL, "the MPI layer's record of host writes");
            if (nw)
                s->writes = nw;
        }
        if (s->nwrites < s->capwrites)
            s->writes[s->nwrites++] = a->tensors[i];
        else
            s->writes_lost = 1; /* no memory: every copy is checked at its next use */
        atomic_store_explicit(&s->writes_pending, 1, memory_order_release);
        pthread_mutex_unlock(&s->writes_mu);
    }
}

void st_mpi_apply_local_writes(mpi_session *s) {
    /* a write recorded at its task's dispatch happens before the dispatch of
     * any task that depends on it, hence before that task is QUEUED here */
    if (!atomic_load_explicit(&s->writes_pending, memory_order_acquire))
        return;
    pthread_mutex_lock(&s->writes_mu);
    for (uint32_t k = 0; k < s->nwrites; k++) {
        const strata_tensor *x = &s->writes[k];
        for (st_dir_entry *o = st_dir_first_of(&s->dir, x), *next; o; o = next) {
            next = st_dir_next_of(o, x); /* taken before o may go */
            if (st_dir_overlaps(o, x)) {
                drop_holders(s, o, -1);
                st_dir_remove(&s->dir, o);
            }
        }
    }
    if (s->writes_lost) {
        st_dir_entry *e;
        for (uint32_t i = 0; (e = st_dir_at(&s->dir, i)) != NULL; i++)
            e->checked_run = 0;
    }
    s->nwrites = 0;
    s->writes_lost = 0;
    atomic_store_explicit(&s->writes_pending, 0, memory_order_relaxed);
    pthread_mutex_unlock(&s->writes_mu);
}
