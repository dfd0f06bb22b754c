/* ipc/mailbox.c - the mailbox's layout checks, frame identity checks, error
 * text and doorbells (the contract is in ipc/mailbox.h).
 *
 * Owns: the compile-time pins of the frame layout (every offset the wire
 * contract names), the checks a reader makes on a frame before trusting it,
 * and the doorbell calls (st_event in the control frame's head).
 * Must never: hold a lock, read a frame field twice where a peer could change
 * it between the check and the use (the trailer is copied once, then
 * checked), or read past a frame's error text.
 *
 * State words are moved by stores and CAS between two processes, so they do
 * not use util/state_machine.h; the transitions are listed in mailbox.h.
 */
#include "ipc/mailbox.h"

#include <stdarg.h>
#include <string.h>

#include "ipc/wire_args.h"
#include "util/digest.h"
#include "util/error.h"
#include "util/message.h"

/* ---- The layout: part of the wire contract, pinned here and in test_mailbox.c ---- */
_Static_assert(ST_MBOX_DIGEST_BYTES == ST_DIGEST_BYTES, "a frame carries one digest");
_Static_assert(ST_MBOX_ERR_BYTES == STRATA_ERRMSG_MAX, "a frame's error is one message");
_Static_assert(sizeof(st_mbox_frame) == ST_MBOX_FRAME_BYTES, "a frame is 64 KiB");
_Static_assert(sizeof(st_mbox) == ST_MBOX_REGION_BYTES, "a region is its frames");
_Static_assert(sizeof(st_mbox_trailer) == 40, "the trailer is five u64");
_Static_assert(sizeof(strata_call_config) == 8, "the call config is 8 bytes");
_Static_assert(offsetof(st_mbox_frame, state) == 0, "state");
_Static_assert(offsetof(st_mbox_frame, status) == 4, "status");
_Static_assert(offsetof(st_mbox_frame, payload_bytes) == 8, "payload_bytes");
_Static_assert(offsetof(st_mbox_frame, member) == 12, "member");
_Static_assert(offsetof(st_mbox_frame, protocol) == 16, "protocol");
_Static_assert(offsetof(st_mbox_frame, trailer) == 24, "trailer");
_Static_assert(offsetof(st_mbox_frame, lease) == 64, "lease");
_Static_assert(offsetof(st_mbox_frame, cfg) == 80, "cfg");
_Static_assert(offsetof(st_mbox_frame, disposition) == 88, "disposition");
_Static_assert(offsetof(st_mbox_frame, accepted) == 92, "accepted");
_Static_assert(offsetof(st_mbox_frame, digest) == 96, "digest");
_Static_assert(offsetof(st_mbox_frame, child_bell) == 112, "child_bell");
_Static_assert(offsetof(st_mbox_frame, parent_bell) == 120, "parent_bell");
_Static_assert(offsetof(st_mbox_frame, payload) == ST_MBOX_HEAD_BYTES, "payload after the head");
_Static_assert(offsetof(st_mbox_frame, error) == ST_MBOX_FRAME_BYTES - ST_MBOX_TAIL_BYTES,
               "error opens the tail");
_Static_assert(offsetof(st_mbox_frame, command) ==
                   ST_MBOX_FRAME_BYTES - ST_MBOX_TAIL_BYTES + ST_MBOX_ERR_BYTES,
               "command after the error");
_Static_assert(offsetof(st_mbox_frame, arg0) == offsetof(st_mbox_frame, command) + 8, "arg0");
_Static_assert(offsetof(st_mbox_frame, arg1) == offsetof(st_mbox_frame, command) + 16, "arg1");
_Static_assert(offsetof(st_mbox_frame, result) == offsetof(st_mbox_frame, command) + 24, "result");
_Static_assert(offsetof(st_mbox_frame, taken) == offsetof(st_mbox_frame, command) + 36, "taken");
_Static_assert(offsetof(st_mbox_frame, t_start) == offsetof(st_mbox_frame, command) + 40,
               "t_start");
_Static_assert(offsetof(st_mbox_frame, shutdown) == offsetof(st_mbox_frame, command) + 32,
               "shutdown");
/* What a small task's publication writes and the child reads shares the
 * head's two cache lines; the state, the status and the identity share one. */
_Static_assert(offsetof(st_mbox_frame, trailer) + sizeof(st_mbox_trailer) <= 64,
               "state, status, protocol and trailer share cache line 0");
_Static_assert(offsetof(st_mbox_frame, parent_bell) + sizeof(st_event) <= ST_MBOX_HEAD_BYTES &&
                   ST_MBOX_HEAD_BYTES == 128,
               "lease, cfg, disposition, accepted, digest and the bells fill line 1");
_Static_assert(ST_MBOX_HEAD_BYTES % 64 == 0 && ST_MBOX_TAIL_BYTES % 64 == 0 &&
                   (ST_MBOX_FRAME_BYTES - ST_MBOX_TAIL_BYTES) % 64 == 0,
               "the head, payload and tail start on cache lines");
_Static_assert(offsetof(st_mbox_frame, payload) % 8 == 0 && ST_MBOX_ARGS_CAP % 8 == 0,
               "the payload is 8-byte aligned and sized");
_Static_assert(ST_MBOX_ARGS_CAP >= ST_WIRE_ARGS_MAX,
               "a frame carries the largest encoded task arguments (ipc/wire_args.h)");
_Static_assert(sizeof(_Atomic uint32_t) == 4 && _Alignof(st_event) == 4,
               "state words and bells are plain 32-bit futex words");

void st_mbox_init(st_mbox *m) {
    memset(m, 0, sizeof *m);
    for (uint32_t i = 0; i < ST_MBOX_FRAMES; i++) {
        st_mbox_frame *f = &m->frames[i];
        f->protocol = ST_MBOX_PROTOCOL;
        f->trailer.protocol = ST_MBOX_PROTOCOL;
        atomic_store_explicit(&f->disposition, ST_MBOX_DISP_NONE, memory_order_relaxed);
        atomic_store_explicit(&f->accepted, 0, memory_order_relaxed);
        atomic_store_explicit(&f->shutdown, 0, memory_order_relaxed);
        atomic_store_explicit(&f->state, ST_MBOX_IDLE, memory_order_release);
    }
}

int st_mbox_cas(st_mbox_frame *f, st_mbox_state from, st_mbox_state to) {
    uint32_t expected = (uint32_t)from;
    return atomic_compare_exchange_strong_explicit(&f->state, &expected, (uint32_t)to,
                                                   memory_order_acq_rel, memory_order_acquire);
}

void st_mbox_set_error(st_mbox_frame *f, int status, const char *fmt, ...) {
    f->status = status;
    if (!fmt) {
        f->error[0] = '\0';
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    st_msg_formatv(f->error, ST_MBOX_ERR_BYTES, fmt, ap);
    va_end(ap);
}

void st_mbox_get_error(const st_mbox_frame *f, char *out, size_t cap) {
    if (!out || cap == 0)
        return;
    size_t max = cap - 1 < ST_MBOX_ERR_BYTES - 1 ? cap - 1 : ST_MBOX_ERR_BYTES - 1;
    size_t n = strnlen(f->error, max); /* the peer may have left no NUL */
    memcpy(out, f->error, n);
    out[n] = '\0';
}

void st_mbox_task_prepare(st_mbox_frame *f, const st_mbox_trailer *t, const st_lease *lease,
                          const strata_call_config *cfg, uint32_t member,
                          const uint8_t digest[ST_MBOX_DIGEST_BYTES]) {
    /* Only the head: the control words in the tail stay 0 in a task frame
     * (st_mbox_init; nothing writes them there), and the error text is read
     * only after a failure, which writes it. */
    f->status = STRATA_OK;
    f->member = member;
    f->protocol = ST_MBOX_PROTOCOL;
    f->trailer = (st_mbox_trailer){.protocol = ST_MBOX_PROTOCOL,
                                   .run_id = t->run_id,
                                   .lease_slot = t->lease_slot,
                                   .generation = t->generation,
                                   .dispatch_id = t->dispatch_id};
    /* Line 1 is written only where it changes: the child last read it, so a
     * store would take the line from its cache and the child would fetch it
     * back; consecutive tasks of one run and callable leave it as it is. */
    strata_call_config c = cfg ? *cfg : (strata_call_config){0, 0};
    if (f->lease.slot != lease->slot || f->lease.reserved != lease->reserved ||
        f->lease.generation != lease->generation)
        f->lease = *lease;
    if (f->cfg.block_dim != c.block_dim || f->cfg.flags != c.flags)
        f->cfg = c;
    if (atomic_load_explicit(&f->disposition, memory_order_relaxed) != ST_MBOX_DISP_NONE)
        atomic_store_explicit(&f->disposition, ST_MBOX_DISP_NONE, memory_order_relaxed);
    if (atomic_load_explicit(&f->accepted, memory_order_relaxed) != 0)
        atomic_store_explicit(&f->accepted, 0, memory_order_relaxed);
    static const uint8_t none[ST_MBOX_DIGEST_BYTES];
    const uint8_t *dg = digest ? digest : none;
    if (memcmp(f->digest, dg, ST_MBOX_DIGEST_BYTES) != 0)
        memcpy(f->digest, dg, ST_MBOX_DIGEST_BYTES);
}

/* What a frame says about itself, copied once (the peer may write meanwhile). */
typedef struct frame_ident {
    uint64_t protocol;
    st_lease lease;
    st_mbox_trailer t;
} frame_ident;

static void read_ident(const st_mbox_frame *f, frame_ident *out) {
    /* Plain copies through a volatile view: one read of each field. */
    const volatile st_mbox_frame *vf = f;
    out->protocol = vf->protocol;
    out->lease.slot = vf->lease.slot;
    out->lease.reserved = vf->lease.reserved;
    out->lease.generation = vf->lease.generation;
    out->t.protocol = vf->trailer.protocol;
    out->t.run_id = vf->trailer.run_id;
    out->t.lease_slot = vf->trailer.lease_slot;
    out->t.generation = vf->trailer.generation;
    out->t.dispatch_id = vf->trailer.dispatch_id;
}

static int check_ident(const frame_ident *id, const char *who) {
    const char *w = who ? who : "mailbox";
    if (id->protocol != ST_MBOX_PROTOCOL)
        return st_fail(STRATA_EENDPOINT, "%s: protocol version %llu in the frame, expected %u", w,
                       (unsigned long long)id->protocol, ST_MBOX_PROTOCOL);
    if (id->t.protocol != ST_MBOX_PROTOCOL)
        return st_fail(STRATA_EENDPOINT, "%s: protocol version %llu in the trailer, expected %u", w,
                       (unsigned long long)id->t.protocol, ST_MBOX_PROTOCOL);
    if (id->t.run_id == 0)
        return st_fail(STRATA_EENDPOINT, "%s: malformed trailer: run_id 0, expected a run", w);
    if (id->t.lease_slot >= ST_LEASE_SLOTS)
        return st_fail(STRATA_EENDPOINT,
                       "%s: malformed trailer: lease_slot %llu, expected below %u", w,
                       (unsigned long long)id->t.lease_slot, ST_LEASE_SLOTS);
    if (id->t.generation == 0)
        return st_fail(STRATA_EENDPOINT,
                       "%s: malformed trailer: generation 0, expected a lease generation", w);
    if (id->t.dispatch_id == 0)
        return st_fail(STRATA_EENDPOINT,
                       "%s: malformed trailer: dispatch_id 0, expected a dispatch", w);
    if (id->lease.slot != id->t.lease_slot || id->lease.generation != id->t.generation ||
        id->lease.reserved != 0)
        return st_fail(STRATA_EENDPOINT,
                       "%s: malformed frame: lease {slot %u, generation %llu} differs from the "
                       "trailer's {lease_slot %llu, generation %llu}",
                       w, id->lease.slot, (unsigned long long)id->lease.generation,
                       (unsigned long long)id->t.lease_slot, (unsigned long long)id->t.generation);
    return STRATA_OK;
}

int st_mbox_check_frame(const st_mbox_frame *f, const char *who) {
    frame_ident id;
    read_ident(f, &id);
    return check_ident(&id, who);
}

int st_mbox_check_identity(const st_mbox_frame *f, const st_mbox_trailer *expect, const char *who) {
    frame_ident id;
    read_ident(f, &id);
    int rc = check_ident(&id, who);
    if (rc != STRATA_OK)
        return rc;
    const char *w = who ? who : "mailbox";
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        {"run_id", offsetof(st_mbox_trailer, run_id)},
        {"lease_slot", offsetof(st_mbox_trailer, lease_slot)},
        {"generation", offsetof(st_mbox_trailer, generation)},
        {"dispatch_id", offsetof(st_mbox_trailer, dispatch_id)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        uint64_t got, want;
        memcpy(&got, (const char *)&id.t + fields[i].off, sizeof got);
        memcpy(&want, (const char *)expect + fields[i].off, sizeof want);
        if (got != want)
            return st_fail(STRATA_ESTALE, "%s: stale frame: %s %llu, expected %llu", w,
                           fields[i].name, (unsigned long long)got, (unsigned long long)want);
    }
    return STRATA_OK;
}

void st_mbox_ring(st_event *bell) {
    st_event_bump(bell);
}

int st_mbox_wait_bell(st_event *bell, uint32_t seen, uint32_t spin_ns, uint64_t deadline_ns) {
    return st_event_wait(bell, seen, spin_ns, deadline_ns);
}
