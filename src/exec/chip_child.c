/* exec/chip_child.c - a chip in its own process: the "chip" kind of process
 * child (the chip is opened and driven there) and the parent's side of it
 * (adding it, its device memory through control calls).
 *
 * Owns: in the child, the chip and the driver that runs its lane for the task
 * frames (exec/chip_driver: the same rules as a thread-hosted chip: leased
 * submits, activated first, then dispatch id); the mapping of frames to the
 * driver's records (frame i uses record i, so a record is reused only by its
 * frame's next task, which the parent sends after reading the result); the
 * staging notice (the disposition, then FRAME_STAGED), the acceptance word
 * (set only once the task's run launched), the identity check at activation
 * (a frame whose identity changed since dispatch poisons the chip), the
 * device-memory controls (MALLOC / FREE / COPY_TO / COPY_FROM). In the
 * parent, st_chip_child_add and the chunked copies.
 * Must never: touch the device in the parent, move a frame's state word
 * except through the process endpoint's calls, or finish a frame twice.
 */
#include <stdio.h>
#include <string.h>

#include "core/buffer.h"
#include "core/endpoint.h"
#include "exec/chip_child.h"
#include "exec/chip_driver.h"
#include "exec/process_endpoint.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/message.h"

#define CONTROL_TIMEOUT_NS (60ull * 1000000000ull) /* one control call of a process chip */
#define CHIP_DRIVER_SPIN_NS 30000u                 /* see chip_kind_init */

/* ---- In the child ---------------------------------------------------------------------- */

typedef struct chip_child_self {
    strata_chip *chip;
    st_chip_driver drv;
    st_mbox *m;                         /* the child's mailbox (the same in every call) */
    st_dispatch d[ST_MBOX_TASK_FRAMES]; /* per frame: the task as the driver got it */
    char label[64];
    st_trace_region *trace; /* the parent's, for native phases; NULL: not traced */
    int worker_id;
} chip_child_self;

static void chip_child_completed(void *owner, st_completion *c, uint64_t tag) {
    chip_child_self *s = owner;
    /* The result goes into the frame, not to an engine. Released first: once
     * the frame is finished the parent may send the next task for it at once,
     * and the record must take it; c is not refilled before that task. */
    st_completion_release(c);
    st_proc_task_finish(s->m, (uint32_t)tag, c->status, c->msg);
}

/* Before the frame is finished: the parent writes its file only after. */
static void chip_child_phases(void *owner, uint64_t run_id, uint32_t callable,
                              const uint64_t native[5]) {
    chip_child_self *s = owner;
    st_trace_region_chip(s->trace, s->worker_id, run_id, callable, native);
}

static void chip_child_staged(void *owner, uint64_t tag, strata_chip_disposition disp) {
    chip_child_self *s = owner;
    st_proc_task_staged(s->m, (uint32_t)tag,
                        disp == STRATA_CHIP_NATIVE_PREPARED ? ST_MBOX_DISP_NATIVE_PREPARED
                                                            : ST_MBOX_DISP_VALIDATED_ONLY);
}

static void chip_child_launched(void *owner, uint64_t tag) {
    chip_child_self *s = owner;
    st_proc_task_accepted(s->m, (uint32_t)tag);
}

static int chip_kind_init(void *arg, void **self) {
    const st_chip_child_arg *a = arg;
    chip_child_self *s = st_calloc(1, sizeof *s);
    if (!s)
        return st_fail_nomem("process chip: its state", sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", a->label);
    s->trace = a->trace;
    s->worker_id = a->worker_id;
    int rc = strata_chip_open(&a->cfg, &s->chip);
    if (rc != STRATA_OK) {
        st_free(s);
        return rc;
    }
    const st_chip_driver_hooks hooks = {.owner = s,
                                        .complete = chip_child_completed,
                                        .phases = chip_child_phases,
                                        .staged = chip_child_staged,
                                        .launched = chip_child_launched};
    st_chip_driver_init(&s->drv, s->chip, s->label, NULL, &hooks);
    /* The serve loop submits and activates tasks itself (one thread hop
     * fewer on the path of every task); the driver's threads wait in the
     * device and release. A thread that completed a task watches briefly
     * for the activation the loop makes next, whose device wait it then
     * takes without being woken (the loop would pay that wake before it
     * serves the successor's frame). */
    s->drv.owner_serves = 1;
    s->drv.spin_ns = CHIP_DRIVER_SPIN_NS;
    rc = st_chip_driver_start(&s->drv);
    if (rc != STRATA_OK) {
        st_chip_driver_destroy(&s->drv);
        strata_chip_destroy(s->chip);
        st_free(s);
        return rc;
    }
    *self = s;
    return STRATA_OK;
}

static void chip_kind_task(void *self, st_mbox *m, uint32_t frame, const strata_task_args *args,
                           const st_callable_info *callable) {
    chip_child_self *s = self;
    /* Written once (the mailbox never changes): a rewrite per task would race
     * the driver threads' reads, ordered only through the parent process. */
    if (s->m != m)
        s->m = m;
    st_mbox_frame *f = st_mbox_task(m, frame);
    st_dispatch *d = &s->d[frame];
    *d = (st_dispatch){.ref = frame,
                       .run_id = f->trailer.run_id,
                       .lease = f->lease,
                       .member = f->member,
                       .dispatch_id = (uint32_t)f->trailer.dispatch_id,
                       .caller_cpu = -1,
                       .lendable = 0,
                       .staged = st_proc_task_is_staged(m, frame),
                       .callable = callable,
                       .timed = s->trace != NULL, /* the driver reads the native phases */
                       .args = args,    /* the loop's decoded copy: valid until finished */
                       .cfg = &f->cfg}; /* the frame's: unchanged while the task lives */
    char why[STRATA_ERRMSG_MAX];
    if (st_chip_driver_dispatch(&s->drv, d, frame, (int)frame, why, sizeof why, NULL) != STRATA_OK)
        st_proc_task_finish(m, frame, STRATA_EENDPOINT, why);
    else
        st_chip_driver_serve_now(&s->drv);
}

/* The frame's run became the head. Its identity must still be the one the
 * task was dispatched with; otherwise the chip is poisoned (every task fails). */
static void chip_kind_activate(void *self, st_mbox *m, uint32_t frame) {
    chip_child_self *s = self;
    const st_mbox_frame *f = st_mbox_task(m, frame);
    const st_dispatch *d = &s->d[frame];
    if (f->trailer.run_id != d->run_id || f->trailer.lease_slot != d->lease.slot ||
        f->trailer.generation != d->lease.generation || f->trailer.dispatch_id != d->dispatch_id) {
        char msg[STRATA_ERRMSG_MAX];
        st_msg_format(
            msg, sizeof msg,
            "%s is poisoned: stale identity at activation of frame %u: dispatched as "
            "{run %llu, lease slot %u, generation %llu, dispatch %u}, activated as "
            "{run %llu, lease slot %llu, generation %llu, dispatch %llu}",
            s->label, frame, (unsigned long long)d->run_id, d->lease.slot,
            (unsigned long long)d->lease.generation, d->dispatch_id,
            (unsigned long long)f->trailer.run_id, (unsigned long long)f->trailer.lease_slot,
            (unsigned long long)f->trailer.generation, (unsigned long long)f->trailer.dispatch_id);
        st_chip_driver_poison(&s->drv, msg);
        return;
    }
    st_chip_driver_activate(&s->drv, d->run_id);
    st_chip_driver_serve_now(&s->drv);
}

/* Device memory: the chip's own calls, their errors carried back. */
static int chip_kind_control(void *self, st_mbox_frame *ctl) {
    chip_child_self *s = self;
    void *dev = (void *)(uintptr_t)ctl->arg0;
    switch (ctl->command) {
    case ST_MBOX_CMD_MALLOC: {
        void *p = NULL;
        STRATA_TRY(strata_chip_malloc(s->chip, (size_t)ctl->arg0, &p));
        ctl->result = (uint64_t)(uintptr_t)p;
        ctl->payload_bytes = 0;
        return STRATA_OK;
    }
    case ST_MBOX_CMD_FREE:
        ctl->payload_bytes = 0;
        return strata_chip_free(s->chip, dev);
    case ST_MBOX_CMD_COPY_TO:
        if (ctl->arg1 != ctl->payload_bytes || ctl->arg1 > ST_MBOX_ARGS_CAP)
            return st_fail(STRATA_EINVAL, "%s: COPY_TO of %llu bytes with %u payload bytes",
                           s->label, (unsigned long long)ctl->arg1, (unsigned)ctl->payload_bytes);
        ctl->payload_bytes = 0;
        return strata_chip_copy_to(s->chip, dev, ctl->payload, (size_t)ctl->arg1);
    case ST_MBOX_CMD_COPY_FROM:
        if (ctl->arg1 > ST_MBOX_ARGS_CAP)
            return st_fail(STRATA_EINVAL, "%s: COPY_FROM of %llu bytes (a frame carries %u)",
                           s->label, (unsigned long long)ctl->arg1, (unsigned)ST_MBOX_ARGS_CAP);
        ctl->payload_bytes = 0;
        STRATA_TRY(strata_chip_copy_from(s->chip, ctl->payload, dev, (size_t)ctl->arg1));
        ctl->payload_bytes = (uint32_t)ctl->arg1;
        return STRATA_OK;
    default:
        return st_fail(STRATA_EINVAL, "%s: control command %llu is not a chip's", s->label,
                       (unsigned long long)ctl->command);
    }
}

/* Every task held is finished once: staged ones never activated are released
 * unlaunched (a prepared one finalized once), the rest run to the end. */
static void chip_kind_shutdown(void *self, st_mbox *m) {
    (void)m;
    chip_child_self *s = self;
    if (!s)
        return;
    st_chip_driver_stop(&s->drv);
    st_chip_driver_destroy(&s->drv);
    strata_chip_destroy(s->chip);
    st_free(s);
}

/* In the parent, when the endpoint is destroyed: the chip buffers' handles
 * (their device memory went with the chip's process). */
static void chip_kind_release(void *kind_arg) {
    st_chip_child_arg *a = kind_arg;
    for (uint32_t i = 0; i < a->bufs.n; i++)
        st_buffer_destroy_device(a->bufs.v[i].b);
    st_free(a->bufs.v);
    pthread_mutex_destroy(&a->bufs.mu);
    st_free(a);
}

const st_proc_kind st_chip_child_kind = {
    .name = "chip",
    .frames = 2, /* one executes while the next is prepared, or staged for the successor */
    .init = chip_kind_init,
    .task = chip_kind_task,
    .activate = chip_kind_activate,
    .poll = NULL,
    .control = chip_kind_control,
    .registered = NULL, /* programs are registered on the chip at a task's first arrival */
    .shutdown = chip_kind_shutdown,
    .release = chip_kind_release,
};

/* ---- In the parent ---------------------------------------------------------------------- */

static void copy_string(char *dst, size_t cap, const char *src, const char **field) {
    if (!src) {
        *field = NULL;
        return;
    }
    snprintf(dst, cap, "%s", src);
    *field = dst;
}

int st_chip_child_add(strata_worker *w, const strata_chip_config *cfg, int *worker_id) {
    const char *what = "strata_worker_add_chip";
    if (cfg->backend_entry)
        return st_fail(STRATA_EINVAL,
                       "%s: a backend linked into the program (backend_entry) is for "
                       "STRATA_HOST_THREAD chips; a process chip loads `backend` in its process",
                       what);
    if ((cfg->backend && strlen(cfg->backend) >= 256) ||
        (cfg->kernel_module && strlen(cfg->kernel_module) >= 256))
        return st_fail(STRATA_EINVAL,
                       "%s: backend and kernel_module paths of a process chip "
                       "are at most 255 characters",
                       what);
    if (cfg->device_id < 0)
        return st_fail(STRATA_EINVAL, "%s: device_id %d must be >= 0", what, cfg->device_id);
    st_chip_child_arg *a = st_calloc(1, sizeof *a);
    if (!a)
        return st_fail_nomem("strata_worker_add_chip: the process chip's record", sizeof *a);
    a->cfg = *cfg;
    copy_string(a->backend, sizeof a->backend, cfg->backend, &a->cfg.backend);
    copy_string(a->kernel_module, sizeof a->kernel_module, cfg->kernel_module,
                &a->cfg.kernel_module);
    if (cfg->sim) {
        a->sim = *cfg->sim;
        a->cfg.sim = &a->sim;
    }
    /* The label the chip will have (chip_worker.c: "chip <backend>:<device>"). */
    const char *name = cfg->backend ? cfg->backend : "sim";
    const char *slash = strrchr(name, '/');
    snprintf(a->label, sizeof a->label, "chip %s:%d", slash ? slash + 1 : name, cfg->device_id);
    pthread_mutex_init(&a->bufs.mu, NULL);

    int next_id = strata_worker_next_level_count(w);
    a->worker_id = next_id;
    a->trace = st_trace_region_new(w, next_id, ST_REGION_CHIP);
    st_proc_ep_config pc;
    memset(&pc, 0, sizeof pc);
    pc.kind = &st_chip_child_kind;
    pc.kind_arg = a;
    pc.is_sub = 0;
    pc.worker_id = next_id;
    pc.spin_ns = 20000;
    snprintf(pc.label, sizeof pc.label, "%d (%s)", next_id, a->label);
    st_proc_ep *p = NULL;
    int rc = st_proc_ep_create(w, &pc, &p);
    if (rc != STRATA_OK) {
        chip_kind_release(a);
        return st_fail_prefix(rc, what);
    }
    st_endpoint *ep = st_proc_ep_endpoint(p);
    ep->staging = CHIP_EP_STAGING; /* a staged successor's task may be shipped early */
    rc = st_worker_add_endpoint(w, ep, worker_id);
    if (rc != STRATA_OK) {
        char keep[STRATA_ERRMSG_MAX];
        st_msg_format(keep, sizeof keep, "%s: %s", what, strata_error_message());
        ep->ops->destroy(ep); /* never spawned; releases a */
        return st_fail_msg(rc, keep);
    }
    return STRATA_OK; /* forked, and the chip opened, at strata_worker_init */
}

st_chip_child_arg *st_chip_child_of(st_endpoint *ep) {
    st_proc_ep *p = ep ? st_proc_ep_of(ep) : NULL;
    if (!p || st_proc_ep_config_of(p)->kind != &st_chip_child_kind)
        return NULL;
    return st_proc_ep_config_of(p)->kind_arg;
}

static int control(st_endpoint *ep, st_mbox_command cmd, uint64_t arg0, uint64_t arg1,
                   const void *in, size_t in_bytes, void *out, size_t out_cap, uint64_t *result) {
    return st_proc_ep_control(st_proc_ep_of(ep), cmd, arg0, arg1, in, in_bytes, out, out_cap,
                              result, st_deadline_after(CONTROL_TIMEOUT_NS));
}

int st_chip_child_malloc(st_endpoint *ep, size_t nbytes, void **dev) {
    uint64_t r = 0;
    STRATA_TRY(control(ep, ST_MBOX_CMD_MALLOC, nbytes, 0, NULL, 0, NULL, 0, &r));
    *dev = (void *)(uintptr_t)r;
    return STRATA_OK;
}

int st_chip_child_free(st_endpoint *ep, void *dev) {
    return control(ep, ST_MBOX_CMD_FREE, (uint64_t)(uintptr_t)dev, 0, NULL, 0, NULL, 0, NULL);
}

int st_chip_child_copy_to(st_endpoint *ep, void *dev_dst, const void *src, size_t n) {
    for (size_t done = 0; done < n;) {
        size_t k = n - done < ST_MBOX_ARGS_CAP ? n - done : ST_MBOX_ARGS_CAP;
        STRATA_TRY(control(ep, ST_MBOX_CMD_COPY_TO, (uint64_t)(uintptr_t)dev_dst + done, k,
                           (const char *)src + done, k, NULL, 0, NULL));
        done += k;
    }
    return STRATA_OK;
}

int st_chip_child_copy_from(st_endpoint *ep, void *dst, const void *dev_src, size_t n) {
    for (size_t done = 0; done < n;) {
        size_t k = n - done < ST_MBOX_ARGS_CAP ? n - done : ST_MBOX_ARGS_CAP;
        STRATA_TRY(control(ep, ST_MBOX_CMD_COPY_FROM, (uint64_t)(uintptr_t)dev_src + done, k, NULL,
                           0, (char *)dst + done, k, NULL));
        done += k;
    }
    return STRATA_OK;
}
