/* core/submit.c - the four strata_orch_submit_* calls of the argument-list
 * form (DESIGN §5.1): a task of the building run from checks to publication
 * (st_submit, which the one-call form, core/submit_items.c, ends in too).
 *
 * Owns: the order of a submit (checks, capacity, building the slot, scope,
 * dependencies, publication, a scheduler pass) and the slot's fields and
 * member arrays.
 * Must never: run outside the orchestration function of the building run, or
 * leave a slot without an owner when a submit fails part-way: once built, a
 * failed slot is failed in its run, so the fence still resolves.
 */
#include "core/engine.h"
#include "core/hooks.h"
#include "core/orchestrator.h"
#include "core/run.h"
#include "core/scheduler.h"
#include "core/slot.h"
#include "core/worker.h"
#include "util/alloc.h"
#include "util/stamp.h"
#include "util/error.h"

/* Bytes of storage a single task's args need: the used prefix of a
 * strata_task_args, or all of it when there is a payload (it sits last). A
 * group's members are whole structs (they are indexed). */
static size_t single_args_bytes(const strata_task_args *a) {
    if (a->payload_bytes)
        return sizeof *a;
    return offsetof(strata_task_args, tensors) + sizeof a->tensors[0] * a->ntensors;
}

/* Storage for n members' args (args0: member 0's; NULL: none, inline). On
 * failure the slot is left as a one-member task on inline storage, so it can
 * be settled. */
int st_alloc_member_arrays(st_slot *s, int n, const strata_task_args *args0) {
    s->args = st_slot_inline_args(s);
    s->targets = &s->inline_target;
    s->member_state = &s->inline_member;
    s->inline_member = ST_MEMBER_WAITING;
    s->args_bytes = 0;
    if (!args0 || (n == 1 && args0->ntensors <= ST_INLINE_TENSORS && args0->payload_bytes == 0))
        return STRATA_OK;
    size_t args_bytes = n == 1 ? single_args_bytes(args0) : sizeof(strata_task_args) * (size_t)n;
    strata_task_args *args;
    if (n == 1 && s->spare_args && s->spare_bytes >= args_bytes) { /* the slot's kept block */
        args = s->spare_args;
        args_bytes = s->spare_bytes;
        s->spare_args = NULL;
        s->spare_bytes = 0;
    } else {
        args = st_malloc(args_bytes);
    }
    int32_t *targets = n > 1 ? st_malloc(sizeof *targets * (size_t)n) : &s->inline_target;
    uint8_t *states = n > 1 ? st_malloc((size_t)n) : &s->inline_member;
    if (!args || !targets || !states) {
        size_t bytes = !args ? args_bytes : !targets ? sizeof *targets * (size_t)n : (size_t)n;
        st_free(args);
        if (targets != &s->inline_target)
            st_free(targets);
        if (states != &s->inline_member)
            st_free(states);
        s->nmembers = 1;
        s->args->ntensors = 0;
        s->args->nscalars = 0;
        s->args->payload_bytes = 0;
        return st_fail_nomem(!args ? "the task's arguments" : "the group's member table", bytes);
    }
    s->args = args;
    s->args_bytes = n == 1 ? (uint32_t)args_bytes : 0;
    s->targets = targets;
    s->member_state = states;
    return STRATA_OK;
}

void st_init_slot(strata_orch *o, st_slot *s, st_slot_kind kind, strata_callable fn, int n) {
    st_run *r = o->run;
    s->kind = (uint8_t)kind;
    s->has_heap = 0;
    s->scope_ref = 0;
    s->poisoned_in_build = 0;
    s->run = r;
    s->seq = ++r->next_seq;
    s->callable = fn;
    s->nmembers = (uint16_t)n;
    s->members_terminal = 0;
    s->group_failed = 0;
    s->fanin_count = s->fanin_released = 0;
    s->fanout_total = s->fanout_released = 0;
    s->fail_status = 0;
    s->path_ns = 0;
    s->t_submit = ST_TIMED(r->w) ? st_stamp() : 0;
    s->cfg = (strata_call_config){0};
    st_run_link_slot(r, s);
    r->active_tasks++;
}

int st_submit(strata_orch *o, st_slot_kind kind, strata_callable fn, strata_task_args *args, int n,
              const int *targets, const strata_call_config *cfg, const char *what) {
    STRATA_TRY(st_orch_check(o, what));
    strata_worker *w = o->w;
    if (!args)
        return st_fail(STRATA_EINVAL, "%s: args is NULL", what);
    if (n < 1 || n > STRATA_MAX_GROUP)
        return st_fail(STRATA_EINVAL, "%s: %d members (1..%d allowed)", what, n, STRATA_MAX_GROUP);
    if (kind == ST_SLOT_SUB && n > w->nsubs)
        return st_fail(STRATA_EINVAL, "%s: a group of %d needs %d sub workers (this worker has %d)",
                       what, n, n, w->nsubs);
    STRATA_TRY(
        st_check_callable(w, fn, kind == ST_SLOT_SUB ? ST_CALLABLE_SUB : ST_CALLABLE_NEXT, what));
    if (kind == ST_SLOT_NEXT) /* next-level tasks always name their workers */
        STRATA_TRY(st_check_targets(w, targets, n, what));
    STRATA_TRY(st_check_args(args, n, targets, what));
    if (cfg && (cfg->flags & ~STRATA_CALL_DIAGNOSTICS))
        return st_fail(STRATA_EINVAL,
                       "%s: unknown call config flags 0x%x (only STRATA_CALL_DIAGNOSTICS is "
                       "defined)",
                       what, cfg->flags & ~STRATA_CALL_DIAGNOSTICS);

    uint64_t heap_bytes = 0;
    STRATA_TRY(st_out_memory_bytes(args, n, &heap_bytes, what));
    void *heap = NULL;
    uint64_t ticket = 0;
    int rc;
    st_engine_lock(w);
    st_run *r = o->run;
    /* Capacity first (memory, then a slot): failing here leaves the run untouched. */
    st_slot *s = st_take_capacity(o, args, n, heap_bytes, &heap, &ticket, &rc, what);
    if (!s) {
        st_engine_unlock(w);
        return rc;
    }
    st_init_slot(o, s, kind, fn, n);
    if (cfg)
        s->cfg = *cfg;
    rc = st_alloc_member_arrays(s, n, &args[0]);
    if (rc == STRATA_OK) {
        for (int m = 0; m < n; m++) {
            strata_args_copy(&s->args[m], &args[m]);
            s->targets[m] = targets ? targets[m] : -1;
            s->member_state[m] = ST_MEMBER_WAITING;
        }
        if (heap) {
            s->has_heap = 1;
            s->heap_ticket = ticket;
            st_carve_out_memory(w, s, args, heap);
        }
    } else if (heap) {
        s->has_heap = 1; /* released when the failed slot is consumed */
        s->heap_ticket = ticket;
    }
    /* Only tasks that own runtime memory need the scope's reference: it keeps
     * the memory alive for tasks submitted later in the scope. Others are
     * released as soon as they finish, so the task window bounds unfinished
     * tasks, not the size of a run. */
    if (rc == STRATA_OK && s->has_heap)
        rc = st_hold_in_scope(o, s);
    st_dep_ctx d; /* fields set one by one: zeroing the inline buffer costs more than a submit */
    d.w = w;
    d.self = s;
    d.stamp = ++w->visit_stamp;
    d.n = 0;
    d.cap = 64;
    d.refs = d.inline_buf;
    if (rc == STRATA_OK)
        rc = st_infer_dependencies(w, s, &d);
    uint32_t live = 0;
    int poisoned = 0;
    if (rc == STRATA_OK)
        rc = st_wire(w, s, &d, &live, &poisoned);
    if (d.refs != d.inline_buf)
        st_free(d.refs);
    if (rc != STRATA_OK) {
        /* The slot belongs to the run: fail it there, so the fence still resolves. */
        if (rc == STRATA_ENOMEM)
            st_fail_prefix(rc, what); /* the allocation said what and how big */
        char label[128];
        st_task_label(w, s, label, sizeof label);
        st_run_record_error(r, rc, "run %llu: %s: submit failed: %s", (unsigned long long)r->id,
                            label, strata_error_message());
        poisoned = 1;
    }
    st_hook(w, ST_HOOK_AFTER_WIRING, st_ref_of(s));
    st_publish(w, s, live, poisoned);
    st_sched_pass(w);
    st_engine_unlock(w);
    return rc;
}

int strata_orch_submit_sub(strata_orch *o, strata_callable fn, strata_task_args *args) {
    return st_submit(o, ST_SLOT_SUB, fn, args, 1, NULL, NULL, "strata_orch_submit_sub");
}

int strata_orch_submit_sub_group(strata_orch *o, strata_callable fn, strata_task_args *args,
                                 int n) {
    return st_submit(o, ST_SLOT_SUB, fn, args, n, NULL, NULL, "strata_orch_submit_sub_group");
}

int strata_orch_submit_next_level(strata_orch *o, strata_callable fn, strata_task_args *args,
                                  const strata_call_config *cfg, int worker_id) {
    return st_submit(o, ST_SLOT_NEXT, fn, args, 1, &worker_id, cfg,
                     "strata_orch_submit_next_level");
}

int strata_orch_submit_next_level_group(strata_orch *o, strata_callable fn, strata_task_args *args,
                                        const strata_call_config *cfg, const int *worker_ids,
                                        int n) {
    /* A NULL worker_ids is refused by the target check, after the state check. */
    return st_submit(o, ST_SLOT_NEXT, fn, args, n, worker_ids, cfg,
                     "strata_orch_submit_next_level_group");
}
