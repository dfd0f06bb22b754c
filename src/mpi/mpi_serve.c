/* mpi/mpi_serve.c - an L3 child Worker on a rank other than 0: the serve loop.
 *
 * Owns: what strata_worker_init does on a non-root rank: bring up the child
 * whose config names this rank (setup, init of its whole subtree), report
 * HELLO, then serve rank 0 on this thread: task frames (decode, the IN data
 * received into buffers of the inner worker, one run of the inner worker
 * per task, started without waiting for it, DONE and the OUT data when it
 * ends), control calls (remote memory: malloc, free, copy_to, copy_from),
 * the heartbeat's PONG, a PEER_GONE (a copy's holder was declared dead: stop
 * waiting for its bytes), DECLARED_DEAD (rank 0 gave up on this rank: leave,
 * status 0), SHUTDOWN (tear down, BYE, finalise MPI, exit), and the silence
 * bound (rank 0 heard from for the last time, or never after the HELLO:
 * leave, status 1).
 * Must never: wait for a run (runs are polled, so frames are answered while
 * one goes on), block in an MPI call (every wait is a backed-off test),
 * trust a frame (header, arguments, addresses of remote memory are checked),
 * or return to the program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/endpoint.h"
#include "exec/worker_child.h"
#include "ipc/wire_args.h"
#include "mpi/mpi_bell.h"
#include "mpi/mpi_env.h"
#include "mpi/mpi_session.h"
#include "mpi/mpi_symbol.h"
#include "mpi/mpi_xfer.h"
#include "mpi/remote_child.h"
#include "strata/mpi.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/growable.h"
#include "util/message.h"

enum { S_FREE = 0, S_RECV, S_RUN, S_SEND };

/* A copy this rank keeps for rank 0's directory (mpi_directory.h): named by
 * its cache id, used by tasks (users) and sent to other ranks (sends); freed
 * once dropped (unlisted) and neither. It is unlisted by rank 0's drop, by a
 * task told to make a new copy under its id, or, each time saying so in the
 * task's DONE, by a task that finds it unusable, or that fails after writing
 * it or before its bytes all came; never otherwise. */
typedef struct cache_entry {
    uint64_t id;
    strata_buffer *b;
    int users, sends;
    int filling; /* its bytes are still arriving for the task that made it */
    int failed;  /* that task failed first: the bytes never came */
    int listed;
} cache_entry;

typedef struct serve_task {
    int state;
    uint32_t seq;
    strata_task_args args;
    const st_callable_info *ci;
    strata_buffer *buf[STRATA_MAX_TENSORS]; /* the task's own copies of host tensors */
    cache_entry *ce[STRATA_MAX_TENSORS];    /* or a kept copy it reads or fills */
    uint8_t keep[STRATA_MAX_TENSORS];       /* ce[i] is written by this task: dropped if it fails */
    uint8_t fills[STRATA_MAX_TENSORS];      /* ce[i]'s bytes arrive with this task */
    uint64_t unkept; /* tensors placed KEEP that this rank keeps no copy of (its DONE says so) */
    int nreq;
    MPI_Request req[STRATA_MAX_TENSORS + 1];
    int req_peer[STRATA_MAX_TENSORS + 1]; /* bytes a PEER receive must bring (0: not one) */
    int peer_req[STRATA_MAX_TENSORS];     /* tensor i's PEER receive: its req index + 1 (0: none) */
    MPI_Status st[STRATA_MAX_TENSORS + 1];
    uint64_t verify; /* tensors placed ST_PLACE_VERIFY: the task waits for rank 0's VERDICT */
    uint64_t stale;  /* of those, the ones the VERDICT found stale (their bytes come again) */
    int verdict_in;  /* the VERDICT arrived */
    int ndrain;      /* IN data of a task that failed before it ran: taken and dropped */
    MPI_Request drain[STRATA_MAX_TENSORS]; /* bounded: a tensor past it is not drained */
    strata_run *run;
    int status;
    char msg[STRATA_ERRMSG_MAX];
    uint8_t frame[ST_MPI_HDR_BYTES + STRATA_ERRMSG_MAX];
} serve_task;

/* A SEND_TO from rank 0: started once its copy is filled. */
typedef struct pending_send {
    cache_entry *ce; /* NULL: the copy is missing (0 bytes go) */
    int dest, tag;
    uint64_t bytes;
    int started;
    MPI_Request req;
} pending_send;

typedef struct server {
    mpi_session *s;
    mpi_ep *ep; /* this rank's child (NULL: none) */
    strata_worker *inner;
    int worker_id;
    serve_task task[ST_MPI_SLOTS];
    strata_buffer **rbuf; /* remote memory held for rank 0 */
    uint32_t nrbuf, caprbuf;
    cache_entry **cache;
    uint32_t ncache, capcache;
    pending_send *ps;
    uint32_t nps, capps;
    strata_buffer **pool; /* task buffers kept for reuse (oldest first) */
    uint32_t npool, cappool;
    uint64_t pool_bytes;
    st_mpi_traffic traffic;
    uint8_t *in; /* the frame being read */
    uint8_t out[ST_MPI_HDR_BYTES + STRATA_ERRMSG_MAX];
    uint64_t last_heard_ns; /* 0: rank 0 not heard yet */
    uint64_t first_by_ns;   /* its first frame is due by then */
    uint8_t sink;
} server;

/* How long a rank that stopped hearing rank 0 lets MPI_Finalize wait for the
 * job's closing fence: rank 0 may be dead, and then the fence never ends. */
#define ROOT_GONE_FINALIZE_NS 5000000000ull

_Noreturn static void leave(int code) {
    st_mpi_finalize_any();
    exit(code);
}

/* A backed-off wait for one request (st_mpi_lock held: this thread is the
 * rank's only MPI caller once it serves). 0 or the MPI error. */
static int wait_req(MPI_Request *r) {
    st_backoff bo = {.busy = 1};
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        st_backoff_idle(&bo);
    }
}

/* Send a frame with a body of n bytes and wait for it to leave. */
static void send_body(server *sv, st_mpi_hdr *h, const void *body, size_t n) {
    h->body_bytes = (uint32_t)n;
    st_mpi_hdr_put(sv->out, h);
    if (n)
        memcpy(sv->out + ST_MPI_HDR_BYTES, body, n);
    MPI_Request r;
    if (st_mpi_isend(sv->out, (int)(ST_MPI_HDR_BYTES + n), 0, ST_MPI_TAG_FRAME, &r) == MPI_SUCCESS)
        (void)wait_req(&r);
}

static void send_frame(server *sv, st_mpi_hdr *h, const char *text) {
    send_body(sv, h, text, text ? strnlen(text, STRATA_ERRMSG_MAX - 1) : 0);
}

/* ---- Task buffers ------------------------------------------------------------------------
 * A large buffer of the inner worker is a mapping of its own, and its first
 * touch faults every page in (64 MiB: some 40 ms here, twice what moving it
 * costs): buffers of finished tasks are kept for the next ones instead,
 * up to ST_POOL_BYTES, the oldest destroyed first. Small ones come from the
 * arena's free lists, cheaply: they are not kept. A reused buffer holds the
 * bytes of an earlier task: OUT bytes a task leaves unwritten are undefined
 * (docs/guide.md "Multi-host"). */
#define ST_POOL_MIN (1u << 20)
#define ST_POOL_BYTES (512ull << 20)

static int pool_take(server *sv, uint64_t n, strata_buffer **out) {
    int best = -1;
    for (uint32_t i = 0; i < sv->npool; i++) {
        uint64_t size = strata_buffer_size(sv->pool[i]);
        if (size >= n && size / 2 <= n && (best < 0 || size < strata_buffer_size(sv->pool[best])))
            best = (int)i;
    }
    if (best < 0)
        return strata_buffer_create(sv->inner, n, out);
    *out = sv->pool[best];
    sv->pool_bytes -= strata_buffer_size(*out);
    memmove(&sv->pool[best], &sv->pool[best + 1],
            (sv->npool - (uint32_t)best - 1) * sizeof *sv->pool);
    sv->npool--;
    return STRATA_OK;
}

static void pool_give(server *sv, strata_buffer *b) {
    uint64_t size = strata_buffer_size(b);
    if (size < ST_POOL_MIN || size > ST_POOL_BYTES) {
        strata_buffer_destroy(b);
        return;
    }
    if (sv->npool == sv->cappool) {
        strata_buffer **np =
            st_grow(sv->pool, &sv->cappool, sv->npool + 1, sizeof *np, 16, NULL, "buffer pool");
        if (!np) {
            strata_buffer_destroy(b);
            return;
        }
        sv->pool = np;
    }
    sv->pool[sv->npool++] = b;
    sv->pool_bytes += size;
    while (sv->pool_bytes > ST_POOL_BYTES) { /* the oldest go */
        sv->pool_bytes -= strata_buffer_size(sv->pool[0]);
        strata_buffer_destroy(sv->pool[0]);
        memmove(&sv->pool[0], &sv->pool[1], --sv->npool * sizeof *sv->pool);
    }
}

/* ---- Kept copies -------------------------------------------------------------------------- */

static cache_entry *cache_find(server *sv, uint64_t id) {
    for (uint32_t i = 0; i < sv->ncache; i++)
        if (sv->cache[i]->id == id)
            return sv->cache[i];
    return NULL;
}

static void cache_maybe_free(server *sv, cache_entry *ce) {
    if (ce->listed || ce->users || ce->sends)
        return;
    pool_give(sv, ce->b);
    st_free(ce);
}

/* Take ce off the list (a drop, a replacement, a failed task): freed once unused. */
static void cache_unlist(server *sv, cache_entry *ce) {
    for (uint32_t i = 0; i < sv->ncache; i++)
        if (sv->cache[i] == ce) {
            sv->cache[i] = sv->cache[--sv->ncache];
            break;
        }
    ce->listed = 0;
    cache_maybe_free(sv, ce);
}

/* b kept as copy id (replacing an older one of that id); NULL: no memory. */
static cache_entry *cache_put(server *sv, uint64_t id, strata_buffer *b) {
    if (sv->ncache == sv->capcache) {
        cache_entry **nc =
            st_grow(sv->cache, &sv->capcache, sv->ncache + 1, sizeof *nc, 32, NULL, "kept copies");
        if (!nc)
            return NULL;
        sv->cache = nc;
    }
    cache_entry *ce = st_calloc(1, sizeof *ce);
    if (!ce)
        return NULL;
    cache_entry *old = cache_find(sv, id);
    if (old)
        cache_unlist(sv, old);
    ce->id = id;
    ce->b = b;
    ce->listed = 1;
    sv->cache[sv->ncache++] = ce;
    return ce;
}

static void send_to(server *sv, const st_mpi_hdr *h) {
    if (sv->nps == sv->capps) {
        pending_send *np =
            st_grow(sv->ps, &sv->capps, sv->nps + 1, sizeof *np, 16, NULL, "pending sends");
        if (!np) { /* cannot even queue it: 0 bytes now, the receiver fails its task */
            MPI_Request r;
            if (st_mpi_isend(&sv->sink, 0, (int)h->slot, (int)h->seq, &r) == MPI_SUCCESS)
                (void)wait_req(&r);
            return;
        }
        sv->ps = np;
    }
    pending_send *p = &sv->ps[sv->nps++];
    memset(p, 0, sizeof *p);
    p->ce = cache_find(sv, h->arg0);
    if (p->ce && strata_buffer_size(p->ce->b) < h->arg1)
        p->ce = NULL;
    if (p->ce)
        p->ce->sends++;
    p->dest = (int)h->slot;
    p->tag = (int)h->seq;
    p->bytes = h->arg1;
}

/* Start the SEND_TOs whose copy is filled, retire the finished ones. */
static int step_sends(server *sv) {
    int did = 0;
    for (uint32_t i = 0; i < sv->nps;) {
        pending_send *p = &sv->ps[i];
        if (!p->started) {
            if (p->ce && p->ce->filling && !p->ce->failed) {
                i++;
                continue;
            }
            int ok = p->ce && !p->ce->failed;
            if (st_mpi_isend(ok ? strata_buffer_data(p->ce->b) : &sv->sink, ok ? (int)p->bytes : 0,
                             p->dest, p->tag, &p->req) != MPI_SUCCESS)
                p->req = MPI_REQUEST_NULL;
            if (ok)
                sv->traffic.to_peers += p->bytes;
            p->started = 1;
            did = 1;
        }
        int flag = 0;
        MPI_Test(&p->req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            i++;
            continue;
        }
        if (p->ce) {
            p->ce->sends--;
            cache_maybe_free(sv, p->ce);
        }
        sv->ps[i] = sv->ps[--sv->nps];
        did = 1;
    }
    return did;
}

/* ---- Remote memory ---------------------------------------------------------------------- */

/* The remote buffer holding [addr, addr + n), or NULL. exact: addr is its start. */
static strata_buffer *find_rbuf(server *sv, uint64_t addr, uint64_t n, int exact, size_t *at) {
    for (uint32_t i = 0; i < sv->nrbuf; i++) {
        uint64_t lo = (uint64_t)(uintptr_t)strata_buffer_data(sv->rbuf[i]);
        uint64_t size = strata_buffer_size(sv->rbuf[i]);
        if (exact ? addr == lo : (addr >= lo && n <= size && addr - lo <= size - n)) {
            if (at)
                *at = i;
            return sv->rbuf[i];
        }
    }
    return NULL;
}

/* REGISTER: the callable's function found here by object and offset. */
static int register_orch(server *sv, const st_mpi_hdr *h, const uint8_t *body) {
    if (h->body_bytes < 24)
        return st_fail(STRATA_EINVAL, "a REGISTER body of %u bytes", h->body_bytes);
    uint32_t lens = st_mpi_get32(body + 16), ln = st_mpi_get32(body + 20);
    uint32_t lo = lens & 0xffff, ls = lens >> 16;
    st_symbol_ref ref;
    memset(&ref, 0, sizeof ref);
    char name[64];
    if ((uint64_t)24 + lo + ls + ln != h->body_bytes || lo >= sizeof ref.object ||
        ls >= sizeof ref.symbol || ln == 0 || ln >= sizeof name)
        return st_fail(STRATA_EINVAL, "a REGISTER body of %u bytes does not hold its strings",
                       h->body_bytes);
    ref.offset = st_mpi_get64(body);
    uint64_t user = st_mpi_get64(body + 8);
    memcpy(ref.object, body + 24, lo);
    memcpy(ref.symbol, body + 24 + lo, ls);
    memcpy(name, body + 24 + lo + ls, ln);
    name[ln] = '\0';
    void *p = NULL;
    STRATA_TRY(st_symbol_resolve(&ref, &p));
    strata_orch_fn fn;
    memcpy(&fn, &p, sizeof fn);
    strata_callable id;
    return strata_worker_register_orch(sv->s->l4, name, fn, (void *)(uintptr_t)user, &id);
}

static void control(server *sv, const st_mpi_hdr *h, const uint8_t *body) {
    st_mpi_hdr r;
    st_mpi_hdr_init(&r, ST_MPI_REPLY, sv->worker_id);
    r.seq = h->seq;
    char msg[STRATA_ERRMSG_MAX] = "";
    int rc = STRATA_OK;
    size_t at = 0;
    strata_buffer *b = NULL;
    switch (h->slot) {
    case ST_MPI_CTRL_MALLOC:
        if (sv->nrbuf == sv->caprbuf) {
            strata_buffer **nb = st_grow(sv->rbuf, &sv->caprbuf, sv->nrbuf + 1, sizeof *nb, 16,
                                         NULL, "remote memory: the buffer list");
            if (!nb) {
                rc = STRATA_ENOMEM;
                break;
            }
            sv->rbuf = nb;
        }
        rc = strata_buffer_create(sv->inner, (size_t)h->arg1, &b);
        if (rc == STRATA_OK) {
            sv->rbuf[sv->nrbuf++] = b;
            r.arg0 = (uint64_t)(uintptr_t)strata_buffer_data(b);
        }
        break;
    case ST_MPI_CTRL_FREE:
        b = find_rbuf(sv, h->arg0, 0, 1, &at);
        if (!b) {
            rc = st_fail(STRATA_EINVAL, "no remote buffer at 0x%llx on rank %d",
                         (unsigned long long)h->arg0, sv->s->my_rank);
            break;
        }
        sv->rbuf[at] = sv->rbuf[--sv->nrbuf];
        strata_buffer_destroy(b);
        break;
    case ST_MPI_CTRL_COPY_TO: {
        b = find_rbuf(sv, h->arg0, h->arg1, 0, NULL);
        MPI_Request q;
        if (h->arg1 &&
            MPI_Irecv(b ? (void *)(uintptr_t)h->arg0 : &sv->sink, b ? (int)h->arg1 : 0, MPI_BYTE, 0,
                      ST_MPI_TAG_CTRL_DATA, st_mpi_comm(), &q) == MPI_SUCCESS)
            (void)wait_req(&q); /* a refused copy's bytes are taken and dropped (truncated) */
        if (!b)
            rc = st_fail(STRATA_EINVAL, "%llu bytes at 0x%llx are no remote buffer on rank %d",
                         (unsigned long long)h->arg1, (unsigned long long)h->arg0, sv->s->my_rank);
        break;
    }
    case ST_MPI_CTRL_COPY_FROM:
        b = find_rbuf(sv, h->arg0, h->arg1, 0, NULL);
        if (!b)
            rc = st_fail(STRATA_EINVAL, "%llu bytes at 0x%llx are no remote buffer on rank %d",
                         (unsigned long long)h->arg1, (unsigned long long)h->arg0, sv->s->my_rank);
        break;
    case ST_MPI_CTRL_REGISTER:
        rc = register_orch(sv, h, body);
        break;
    case ST_MPI_CTRL_TRAFFIC: {
        uint8_t body[7 * 8];
        uint64_t cached = 0;
        for (uint32_t i = 0; i < sv->ncache; i++)
            cached += strata_buffer_size(sv->cache[i]->b);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        uint64_t cpu =
            ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
            ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
        const uint64_t f[7] = {sv->traffic.from_root,
                               sv->traffic.to_root,
                               sv->traffic.from_peers,
                               sv->traffic.to_peers,
                               sv->traffic.cache_hits,
                               cached,
                               cpu};
        for (int k = 0; k < 7; k++)
            st_mpi_put64(body + 8 * k, f[k]);
        send_body(sv, &r, body, sizeof body);
        return;
    }
    default:
        rc = st_fail(STRATA_EINVAL, "unknown control call %u", h->slot);
    }

    if (rc != STRATA_OK)
        st_msg_format(msg, sizeof msg, "%s", strata_error_message());
    r.status = rc;
    send_frame(sv, &r, msg);
    if (rc == STRATA_OK && h->slot == ST_MPI_CTRL_COPY_FROM && h->arg1) {
        MPI_Request q;
        if (st_mpi_isend((void *)(uintptr_t)h->arg0, (int)h->arg1, 0, ST_MPI_TAG_CTRL_DATA, &q) ==
            MPI_SUCCESS)
            (void)wait_req(&q);
    }
}

/* ---- Tasks ----------------------------------------------------------------------------- */

static const st_callable_info *callable_of(server *sv, const st_digest *d) {
    uint32_t n = st_engine_callable_count(sv->s->l4);
    for (uint32_t id = 0; id < n; id++) {
        const st_callable_info *ci = st_engine_callable(sv->s->l4, id);
        if (ci && st_digest_equal(&ci->digest, d))
            return ci;
    }
    return NULL;
}

static void task_fail(serve_task *t, int status, const char *fmt, const char *detail) {
    if (t->status != STRATA_OK)
        return; /* the first reason stays */
    t->status = status;
    st_msg_format(t->msg, sizeof t->msg, fmt, detail);
}

/* The buffer that holds tensor i of t on this rank (NULL: none). */
static strata_buffer *task_buffer(const serve_task *t, uint32_t i) {
    return t->buf[i] ? t->buf[i] : t->ce[i] ? t->ce[i]->b : NULL;
}

/* Tensor i of a task on this rank, placed as rank 0 says (TASK body): a host
 * tensor becomes a contiguous tensor of a buffer of the inner worker (its
 * own, or a kept copy), its bytes received from rank 0 or from the rank
 * holding a valid copy; remote memory of this child becomes a host tensor of
 * the inner worker's buffer. */
static void place_tensor(server *sv, serve_task *t, uint32_t i, int slot, const st_mpi_place *pl) {
    strata_tensor *x = &t->args.tensors[i];
    int dirs = st_xfer_dirs(x, t->args.tags[i]);
    int tag = ST_MPI_TAG_DATA0 + slot * 64 + (int)i;
    int kind = pl->kind & 0xf, keep = (pl->kind & ST_PLACE_KEEP) != 0;
    char detail[160];
    if (x->mem == STRATA_MEM_HOST) {
        uint64_t n = st_xfer_bytes(x);
        strata_tensor v;
        if (kind == ST_PLACE_PEER && (pl->kind & ST_PLACE_VERIFY))
            t->verify |= 1ull << i; /* even if it fails here: the VERDICT must be taken */
        if (kind == ST_PLACE_CACHED) {
            cache_entry *ce = cache_find(sv, pl->id);
            if (ce && strata_buffer_size(ce->b) >= (n ? n : 1) &&
                strata_tensor_contiguous(ce->b, (strata_dtype)x->dtype, x->rank, x->shape, &v) ==
                    STRATA_OK) {
                ce->users++;
                t->ce[i] = ce;
                t->keep[i] = (uint8_t)keep; /* written: dropped if the task fails */
                *x = v;
                sv->traffic.cache_hits++;
                return;
            }
            if (ce) /* unusable under that name: it goes, and rank 0 hears so */
                cache_unlist(sv, ce);
            t->unkept |= 1ull << i;
            snprintf(detail, sizeof detail, "tensor %u: copy %llu", i, (unsigned long long)pl->id);
            task_fail(t, STRATA_EENDPOINT, "rank 0 named a kept %s this rank does not hold",
                      detail);
            return;
        }
        int src = kind == ST_PLACE_PEER ? pl->src : 0;
        int recv = (dirs & ST_XFER_IN) && (kind == ST_PLACE_ROOT || kind == ST_PLACE_PEER);
        strata_buffer *b = NULL;
        if (keep) { /* a new copy under this id: an older one goes first, whatever happens
                     * next (rank 0 may have taken back its drop, mpi_copies.c) */
            cache_entry *old = cache_find(sv, pl->id);
            if (old)
                cache_unlist(sv, old);
            t->unkept |= 1ull << i; /* until the copy is made below */
        }
        if (t->status == STRATA_OK && n <= (uint64_t)INT32_MAX &&
            pool_take(sv, n ? n : 1, &b) == STRATA_OK &&
            strata_tensor_contiguous(b, (strata_dtype)x->dtype, x->rank, x->shape, &v) ==
                STRATA_OK) {
            *x = v;
            cache_entry *ce = keep ? cache_put(sv, pl->id, b) : NULL;
            if (ce) {
                ce->users = 1;
                ce->filling = recv;
                t->ce[i] = ce;
                t->keep[i] = (dirs & ST_XFER_OUT) != 0; /* a read copy stays valid if it fails */
                t->unkept &= ~(1ull << i);
                t->fills[i] = (uint8_t)recv;
            } else {
                t->buf[i] = b;
            }
            if (recv) {
                t->req_peer[t->nreq] = kind == ST_PLACE_PEER ? (int)n : 0;
                if (kind == ST_PLACE_PEER)
                    t->peer_req[i] = t->nreq + 1;
                if (MPI_Irecv(strata_buffer_data(b), (int)n, MPI_BYTE, src, tag, st_mpi_comm(),
                              &t->req[t->nreq++]) != MPI_SUCCESS)
                    task_fail(t, STRATA_EENDPOINT, "%s", "MPI_Irecv of a task's data failed");
                if (kind == ST_PLACE_PEER)
                    sv->traffic.from_peers += n;
                else
                    sv->traffic.from_root += n;
            }
            return;
        }
        if (b)
            strata_buffer_destroy(b);
        if (t->status == STRATA_OK) {
            snprintf(detail, sizeof detail, "tensor %u (%llu bytes): %s", i, (unsigned long long)n,
                     strata_error_message());
            task_fail(t, STRATA_ENOMEM, "no memory on this rank for %s", detail);
        }
        if (recv && MPI_Irecv(&sv->sink, 0, MPI_BYTE, src, tag, st_mpi_comm(),
                              &t->drain[t->ndrain]) == MPI_SUCCESS)
            t->ndrain++;
        return;
    }
    /* device memory: remote memory of this child only (the engine refused any other) */
    strata_buffer *b = x->ident.owner == sv->worker_id
                           ? find_rbuf(sv, (uint64_t)(uintptr_t)x->base, 0, 1, NULL)
                           : NULL;
    strata_tensor v;
    if (b && x->buffer_bytes == strata_buffer_size(b) &&
        strata_tensor_view(b, x->offset, (strata_dtype)x->dtype, x->rank, x->shape, x->strides,
                           &v) == STRATA_OK) {
        *x = v; /* a host tensor of the inner worker's buffer, its identity included */
        return;
    }
    snprintf(detail, sizeof detail, "tensor %u names %llu bytes at %p", i,
             (unsigned long long)x->buffer_bytes, x->base);
    task_fail(t, STRATA_ETASK, "%s, which is no remote buffer of this child (freed?)", detail);
}

/* The copies this task fills are settled: filled, or failed when the task
 * failed before its bytes all came (a SEND_TO or a reader waiting on one then
 * fails instead of waiting). */
static void settle_fill(serve_task *t) {
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        if (t->ce[i] && t->fills[i]) {
            t->ce[i]->filling = 0;
            t->ce[i]->failed = t->status != STRATA_OK;
            t->fills[i] = 0;
        }
}

/* The task is over: its own buffers freed, its copies released. */
static void free_task(server *sv, serve_task *t) {
    settle_fill(t);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        if (t->buf[i]) {
            pool_give(sv, t->buf[i]);
            t->buf[i] = NULL;
        }
        cache_entry *ce = t->ce[i];
        if (ce) {
            t->ce[i] = NULL;
            ce->users--;
            cache_maybe_free(sv, ce);
        }
        t->keep[i] = 0;
    }
    t->nreq = 0;
    t->ndrain = 0;
    t->state = S_FREE;
}

/* A failed task's kept copies that cannot be trusted go: those it writes
 * (half-written, maybe) and those whose bytes never all came; the ones it
 * only read are valid and stay. The tensors whose copy went (bit i: tensor
 * i); a copy already replaced or dropped is not this task's to report. */
static uint64_t drop_untrusted_copies(server *sv, serve_task *t) {
    uint64_t gone = 0;
    for (int i = 0; i < STRATA_MAX_TENSORS; i++) {
        cache_entry *ce = t->ce[i];
        if (ce && ce->listed && (t->keep[i] || ce->failed)) {
            cache_unlist(sv, ce); /* freed when the task lets it go */
            gone |= 1ull << i;
        }
    }
    return gone;
}

static void send_done(server *sv, serve_task *t, int slot) {
    settle_fill(t); /* a failed task's copies never fill: whoever waits on them fails */
    st_mpi_hdr h;
    st_mpi_hdr_init(&h, ST_MPI_DONE, sv->worker_id);
    h.seq = t->seq;
    h.slot = (uint32_t)slot;
    h.status = t->status;
    /* what rank 0's record must forget: the copies this rank does not keep */
    _Static_assert(STRATA_MAX_TENSORS <= 64, "one bit per tensor in a DONE's arg0");
    h.arg0 = t->unkept | (t->status != STRATA_OK ? drop_untrusted_copies(sv, t) : 0);
    size_t n = t->status == STRATA_OK ? 0 : strnlen(t->msg, STRATA_ERRMSG_MAX - 1);
    h.body_bytes = (uint32_t)n;
    st_mpi_hdr_put(t->frame, &h);
    memcpy(t->frame + ST_MPI_HDR_BYTES, t->msg, n);
    t->nreq = 0;
    (void)st_mpi_isend(t->frame, (int)(ST_MPI_HDR_BYTES + n), 0, ST_MPI_TAG_FRAME,
                       &t->req[t->nreq++]);
    if (t->status == STRATA_OK)
        for (uint32_t i = 0; i < t->args.ntensors; i++) {
            strata_buffer *b = task_buffer(t, i);
            if (!b || !(st_xfer_dirs(&t->args.tensors[i], t->args.tags[i]) & ST_XFER_OUT))
                continue;
            /* the rewritten tensor is host memory of b; the tag is the original's */
            uint64_t n = st_xfer_bytes(&t->args.tensors[i]);
            (void)st_mpi_isend(strata_buffer_data(b), (int)n, 0,
                               ST_MPI_TAG_DATA0 + slot * 64 + (int)i, &t->req[t->nreq++]);
            sv->traffic.to_root += n;
        }
    t->state = S_SEND;
}

static void take_task(server *sv, const st_mpi_hdr *h, const uint8_t *body) {
    if (h->slot >= ST_MPI_SLOTS)
        return; /* rank 0 never sends it; nothing can be answered for it */
    int slot = (int)h->slot;
    serve_task *t = &sv->task[slot];
    st_backoff bo = {.busy = 1};
    while (t->state == S_SEND) { /* rank 0 has its results: the sends end at once */
        int flag = 0;
        MPI_Testall(t->nreq, t->req, &flag, MPI_STATUSES_IGNORE);
        if (flag)
            free_task(sv, t);
        else
            st_backoff_idle(&bo);
    }
    t->seq = (uint32_t)h->seq;
    t->status = STRATA_OK;
    t->msg[0] = '\0';
    t->run = NULL;
    t->nreq = t->ndrain = 0;
    t->verify = t->stale = 0;
    t->verdict_in = 0;
    t->unkept = 0;
    memset(t->peer_req, 0, sizeof t->peer_req);
    char who[96];
    snprintf(who, sizeof who, "L4 child %s", sv->ep->base.label);
    /* digest, u32 args_bytes, u32 ndrop, args, placements, drops (mpi_frame.h) */
    const size_t head = sizeof(st_digest) + 8;
    uint32_t args_bytes = h->body_bytes >= head ? st_mpi_get32(body + sizeof(st_digest)) : 0;
    uint32_t ndrop = h->body_bytes >= head ? st_mpi_get32(body + sizeof(st_digest) + 4) : 0;
    int rc =
        h->body_bytes >= head && args_bytes <= h->body_bytes - head && ndrop <= ST_MPI_DROPS_MAX
            ? st_wire_args_decode(body + head, args_bytes, &t->args, who)
            : st_fail(STRATA_EINVAL, "%s: a task frame of %u bytes is malformed", who,
                      h->body_bytes);
    if (rc == STRATA_OK &&
        (uint64_t)h->body_bytes != head + args_bytes + 16ull * t->args.ntensors + 8ull * ndrop)
        rc = st_fail(STRATA_EINVAL,
                     "%s: a task frame of %u bytes does not hold its %u placements and %u drops",
                     who, h->body_bytes, t->args.ntensors, ndrop);
    if (rc != STRATA_OK) {
        task_fail(t, STRATA_EENDPOINT, "%s", strata_error_message());
        send_done(sv, t, slot); /* its data (if any) cannot be told apart: see docs */
        return;
    }
    const uint8_t *places = body + head + args_bytes;
    const uint8_t *drops = places + 16u * t->args.ntensors;
    for (uint32_t k = 0; k < ndrop; k++) { /* older than this task's placements */
        cache_entry *ce = cache_find(sv, st_mpi_get64(drops + 8 * k));
        if (ce)
            cache_unlist(sv, ce);
    }
    st_digest d;
    memcpy(&d, body, sizeof d);
    t->ci = callable_of(sv, &d);
    if (!t->ci) {
        char hex[ST_DIGEST_HEX];
        st_digest_hex(&d, hex);
        char detail[160];
        snprintf(detail, sizeof detail, "%s is not registered on rank %d", hex, sv->s->my_rank);
        task_fail(t, STRATA_ETASK,
                  "the callable with digest %s (register the same callables on every rank "
                  "before strata_worker_init)",
                  detail);
    }
    for (uint32_t i = 0; i < t->args.ntensors; i++) {
        st_mpi_place pl;
        st_mpi_place_get(places + 16 * i, &pl);
        place_tensor(sv, t, i, slot, &pl);
    }
    t->state = S_RECV;
}

/* S_RECV is over once its receives are done and every kept copy it reads is
 * filled; 1 if so (t->status says whether the bytes all came). */
static int received(server *sv, serve_task *t) {
    int flag = 0;
    MPI_Testall(t->nreq, t->req, &flag, t->st);
    if (!flag)
        return 0;
    if (t->ndrain) { /* truncated on purpose: their errors are expected */
        MPI_Testall(t->ndrain, t->drain, &flag, MPI_STATUSES_IGNORE);
        if (!flag)
            return 0;
    }
    for (int k = 0; k < t->nreq; k++) {
        int count = 0;
        if (t->req_peer[k]) {
            MPI_Get_count(&t->st[k], MPI_BYTE, &count);
            if (count != t->req_peer[k])
                task_fail(t, STRATA_EENDPOINT, "%s",
                          "a copy from another rank arrived short (that rank no longer held "
                          "it)");
        }
        t->req_peer[k] = 0;
    }
    if (t->verify) { /* the peers' bytes are in: rank 0's word on them, and what it resends */
        if (!t->verdict_in)
            return 0;
        t->nreq = 0;
        for (uint32_t i = 0; i < t->args.ntensors; i++) {
            if (!(t->stale >> i & 1))
                continue;
            strata_buffer *b = task_buffer(t, i);
            int tag = ST_MPI_TAG_DATA0 + (int)(t - sv->task) * 64 + (int)i;
            uint64_t n = st_xfer_bytes(&t->args.tensors[i]);
            if (b && t->status == STRATA_OK) {
                if (MPI_Irecv(strata_buffer_data(b), (int)n, MPI_BYTE, 0, tag, st_mpi_comm(),
                              &t->req[t->nreq++]) != MPI_SUCCESS)
                    task_fail(t, STRATA_EENDPOINT, "%s", "MPI_Irecv of a task's data failed");
                sv->traffic.from_root += n;
            } else if (t->ndrain < STRATA_MAX_TENSORS &&
                       MPI_Irecv(&sv->sink, 0, MPI_BYTE, 0, tag, st_mpi_comm(),
                                 &t->drain[t->ndrain]) == MPI_SUCCESS) {
                t->ndrain++; /* taken and dropped (truncated): the task fails anyway */
            }
        }
        t->verify = t->stale = 0;
        return 0; /* done once those receives are */
    }
    settle_fill(t); /* the copies it made are filled now (or failed with it) */
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        if (t->ce[i] && t->ce[i]->filling)
            return 0; /* another task's bytes for this copy are still arriving */
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        if (t->ce[i] && t->ce[i]->failed)
            task_fail(t, STRATA_EENDPOINT, "%s", "a kept copy it reads never arrived");
    return 1;
}

/* The run of t is over: DONE (and its OUT data) to rank 0. */
static void finish_run(server *sv, serve_task *t, int slot) {
    t->status = st_worker_child_finish(t->run, t->msg, sizeof t->msg);
    t->run = NULL;
    send_done(sv, t, slot);
}

/* A VERDICT on a task's copies checked while they moved (mpi_frame.h). */
static void take_verdict(server *sv, const st_mpi_hdr *h) {
    serve_task *t = h->slot < ST_MPI_SLOTS ? &sv->task[h->slot] : NULL;
    if (!t || t->state != S_RECV || t->seq != (uint32_t)h->seq || t->verdict_in ||
        h->arg0 != t->verify) {
        fprintf(stderr, "strata: rank %d: dropped a VERDICT for no waiting task (slot %u)\n",
                sv->s->my_rank, h->slot);
        return;
    }
    t->verdict_in = 1;
    t->stale = h->arg1 & t->verify;
}

/* A PEER_GONE: the rank that was to send some of a waiting task's bytes was
 * declared dead by rank 0, so they may never come. A receive still waiting
 * is cancelled (MPI completes a cancelled request whatever the peer does)
 * and the task fails, naming that rank; the rest of its traffic (rank 0's
 * data, the VERDICT) ends as for any failed task. Bytes that came before
 * the holder went are kept: a task past its receives is not failed, and a
 * frame for a task no longer waiting is dropped. */
static void take_peer_gone(server *sv, const st_mpi_hdr *h) {
    serve_task *t = h->slot < ST_MPI_SLOTS ? &sv->task[h->slot] : NULL;
    if (!t || t->state != S_RECV || t->seq != (uint32_t)h->seq)
        return;
    for (uint32_t i = 0; i < t->args.ntensors && i < STRATA_MAX_TENSORS; i++) {
        int k = t->peer_req[i] - 1;
        if (!(h->arg0 >> i & 1) || k < 0 || !t->req_peer[k])
            continue; /* not placed PEER, or its bytes are in and counted */
        t->peer_req[i] = 0;
        int came = 0, count = 0;
        MPI_Status st;
        if (MPI_Test(&t->req[k], &came, &st) == MPI_SUCCESS && came) {
            MPI_Get_count(&st, MPI_BYTE, &count);
            if (count != t->req_peer[k])
                task_fail(t, STRATA_EENDPOINT, "%s",
                          "a copy from another rank arrived short (that rank no longer held it)");
            t->req_peer[k] = 0; /* counted here: its request is freed */
            continue;
        }
        MPI_Cancel(&t->req[k]);
        t->req_peer[k] = 0; /* its count says nothing now */
        char detail[160];
        snprintf(detail, sizeof detail, "tensor %u: its copy was to come from rank %d", i,
                 (int)h->arg1);
        task_fail(t, STRATA_EENDPOINT, "%s, which rank 0 declared dead", detail);
    }
}

/* Drive the tasks: received -> run started; run done -> DONE; sent -> free. */
static int step_tasks(server *sv) {
    int did = 0;
    for (int k = 0; k < ST_MPI_SLOTS; k++) {
        serve_task *t = &sv->task[k];
        int flag = 0;
        switch (t->state) {
        case S_RECV:
            if (!received(sv, t))
                break;
            did = 1;
            if (t->status == STRATA_OK)
                t->status = st_worker_child_start(sv->inner, sv->ep->base.label, t->ci, &t->args,
                                                  &t->run, t->msg, sizeof t->msg);
            if (t->status != STRATA_OK) {
                send_done(sv, t, k);
                break;
            }
            t->state = S_RUN;
            /* a run whose orchestration ran here and left nothing to wait for
             * (no task, or tasks already done) is answered in this pass: not
             * after another probe of the loop */
            if (strata_run_done(t->run))
                finish_run(sv, t, k);
            break;
        case S_RUN:
            if (!strata_run_done(t->run))
                break;
            did = 1;
            finish_run(sv, t, k);
            break;
        case S_SEND:
            MPI_Testall(t->nreq, t->req, &flag, MPI_STATUSES_IGNORE);
            if (flag) {
                free_task(sv, t);
                did = 1;
            }
            break;
        default:
            break;
        }
    }
    return did;
}

/* ---- The loop ------------------------------------------------------------------------------ */

static mpi_ep *my_child(mpi_session *s) {
    for (int i = 0; i < s->n; i++)
        if (s->eps[i]->rank == s->my_rank)
            return s->eps[i];
    return NULL;
}

/* Read one frame from rank 0 if one is there: 1 and its header, 0 if none. */
static int read_frame(server *sv, st_mpi_hdr *h) {
    int flag = 0, count = 0;
    MPI_Status st;
    if (MPI_Iprobe(0, ST_MPI_TAG_FRAME, st_mpi_comm(), &flag, &st) != MPI_SUCCESS || !flag)
        return 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    int too_big = count < 0 || (size_t)count > ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX;
    MPI_Recv(sv->in, too_big ? 0 : count, MPI_BYTE, 0, ST_MPI_TAG_FRAME, st_mpi_comm(),
             MPI_STATUS_IGNORE);
    sv->last_heard_ns = st_now_ns();
    char why[256];
    if (too_big || st_mpi_hdr_get(sv->in, (size_t)count, h, why, sizeof why) != STRATA_OK) {
        /* nothing names the task it belonged to: report it on stderr and go on */
        fprintf(stderr, "strata: rank %d: dropped a bad frame from rank 0: %s\n", sv->s->my_rank,
                too_big ? "too long" : why);
        return -1;
    }
    return 1;
}

/* Rank 0 gave up on this rank (it was slow, or a send to it failed): its
 * tasks failed there and nothing more comes. It leaves with status 0: the
 * job's outcome is rank 0's to report. The L3's runs are interrupted first
 * (its process children running a task are killed), not waited for. */
_Noreturn static void declared_dead(server *sv, const st_mpi_hdr *h, const uint8_t *body) {
    int n = h->body_bytes < STRATA_ERRMSG_MAX ? (int)h->body_bytes : STRATA_ERRMSG_MAX;
    fprintf(stderr, "strata: rank %d: rank 0 declared this rank dead (%.*s): leaving\n",
            sv->s->my_rank, n, (const char *)body);
    st_mpi_unlock();
    if (sv->inner)
        (void)strata_worker_interrupt(sv->inner);
    leave(0);
}

/* Whether this rank waits on a peer for something: a task's bytes (or its
 * verdict), the end of its sends, or a SEND_TO still going. A task whose run
 * is running is not: its end is this rank's own, and rings this rank's
 * bell (st_worker_set_run_end_bell at bring-up; without a bell it is polled
 * at the idle pace, at most an eighth of its time or the cap late). Sets
 * the back-off's busy. */
static int owed_anything(const server *sv) {
    if (sv->nps)
        return 1;
    for (int k = 0; k < ST_MPI_SLOTS; k++)
        if (sv->task[k].state == S_RECV || sv->task[k].state == S_SEND)
            return 1;
    return 0;
}

_Noreturn void st_mpi_serve(mpi_session *s) {
    server *sv = st_calloc(1, sizeof *sv);
    uint8_t *in = st_malloc(ST_MPI_HDR_BYTES + ST_MPI_BODY_MAX);
    if (!sv || !in) {
        fprintf(stderr, "strata: rank %d: out of memory for the serve loop\n", s->my_rank);
        leave(1);
    }
    sv->s = s;
    sv->in = in;
    sv->ep = my_child(s);
    int failed = 0;
    st_mpi_precise_sleeps();
    st_mpi_lock(); /* this thread is the rank's only MPI caller from now on */
    if (sv->ep) {
        sv->worker_id = sv->ep->base.worker_id;
        st_mpi_hdr h;
        st_mpi_hdr_init(&h, ST_MPI_HELLO, sv->worker_id);
        int rc = st_worker_child_bring_up(&sv->ep->cfg, sv->ep->name, 1, NULL, &sv->inner);
        if (rc == STRATA_OK) /* a run's end wakes the loop as a frame does (NULL: no bell) */
            st_worker_set_run_end_bell(sv->inner, st_mpi_bell_mine());
        h.status = rc;
        failed = rc != STRATA_OK;
        send_frame(sv, &h, rc == STRATA_OK ? NULL : strata_error_message());
    }
    st_backoff bo = {0};
    /* Rank 0 waits at most startup_timeout_ns for every child's HELLO, then
     * pings each live one within a quarter bound: a rank it declared dead
     * before sending it anything (and whose word of it was lost) is not
     * waited for forever either. A rank with no child is pinged on the
     * bystander bound (mpi_session.h), so it leaves too when rank 0 is gone
     * instead of waiting for a SHUTDOWN that never comes. */
    uint64_t silence = 4 * (sv->ep ? sv->ep->heartbeat_ns : st_mpi_bystander_heartbeat_ns(s));
    uint64_t startup =
        sv->ep ? sv->ep->cfg.worker.startup_timeout_ns : st_mpi_bystander_startup_ns(s);
    sv->first_by_ns = st_now_ns() + startup + silence;
    for (;;) {
        int did = sv->inner ? step_tasks(sv) | step_sends(sv) : 0;
        st_mpi_hdr h;
        int got = read_frame(sv, &h);
        if (got) {
            did = 1;
            if (got > 0) {
                const uint8_t *body = sv->in + ST_MPI_HDR_BYTES;
                st_mpi_hdr r;
                switch (h.type) {
                case ST_MPI_TASK:
                    if (sv->inner)
                        take_task(sv, &h, body);
                    break;
                case ST_MPI_CTRL:
                    if (sv->inner)
                        control(sv, &h, body);
                    break;
                case ST_MPI_VERDICT:
                    if (sv->inner)
                        take_verdict(sv, &h);
                    break;
                case ST_MPI_PEER_GONE:
                    if (sv->inner)
                        take_peer_gone(sv, &h);
                    break;
                case ST_MPI_DECLARED_DEAD:
                    declared_dead(sv, &h, body); /* never returns */
                case ST_MPI_SEND_TO:             /* served even while a run goes on */
                    if (sv->inner)
                        send_to(sv, &h);
                    break;
                case ST_MPI_PING:
                    if (!sv->ep)
                        break; /* a bystander's ping is not answered: only heard */
                    st_mpi_hdr_init(&r, ST_MPI_PONG, sv->worker_id);
                    r.seq = h.seq;
                    send_frame(sv, &r, NULL);
                    break;
                case ST_MPI_SHUTDOWN:
                    if (h.arg0) /* a rank died: Open MPI's closing fence may wait for it */
                        st_mpi_note_peer_died(h.arg0);
                    while (sv->ncache)
                        cache_unlist(sv, sv->cache[sv->ncache - 1]);
                    for (uint32_t i = 0; i < sv->nrbuf; i++)
                        strata_buffer_destroy(sv->rbuf[i]);
                    sv->nrbuf = 0;
                    for (uint32_t i = 0; i < sv->npool; i++)
                        strata_buffer_destroy(sv->pool[i]);
                    sv->npool = 0;
                    st_mpi_unlock();
                    strata_worker_destroy(sv->inner); /* closes its own children */
                    st_mpi_lock();
                    if (sv->ep) {
                        st_mpi_hdr_init(&r, ST_MPI_BYE, sv->worker_id);
                        send_frame(sv, &r, NULL);
                    }
                    st_mpi_unlock();
                    leave(failed ? 1 : 0);
                default:
                    fprintf(stderr, "strata: rank %d: unexpected frame type %u from rank 0\n",
                            s->my_rank, h.type);
                }
            }
        }
        uint64_t now = st_now_ns();
        if (sv->last_heard_ns ? now - sv->last_heard_ns > silence : now > sv->first_by_ns) {
            /* it declared this rank dead (and the word was lost), or is gone
             * itself: which one cannot be told from here, so no clean exit */
            uint64_t quiet = sv->last_heard_ns ? silence : startup + silence;
            fprintf(stderr,
                    "strata: rank %d: rank 0 sent nothing for %llu ms (it pings every "
                    "heartbeat_timeout_ns / 4): taken as declared dead or gone; leaving\n",
                    s->my_rank, (unsigned long long)(quiet / 1000000));
            st_mpi_note_peer_died(ROOT_GONE_FINALIZE_NS); /* rank 0 may be gone */
            st_mpi_unlock();
            leave(1);
        }
        if (did) {
            st_backoff_reset(&bo);
            continue;
        }
        bo.busy = owed_anything(sv);
        st_mpi_unlock(); /* nothing happened: sleep (back-off) without the lock */
        st_backoff_idle(&bo);
        st_mpi_lock();
    }
}
