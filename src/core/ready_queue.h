/* core/ready_queue.h - a FIFO of task references (one per run and target).
 *
 * Owns: a growable circular array of u64 task references.
 * Must never: lock (the engine lock protects every queue) or drop an entry;
 * stale entries are filtered by the scheduler, not here.
 */
#ifndef STRATA_CORE_READY_QUEUE_H
#define STRATA_CORE_READY_QUEUE_H

#include <stdint.h>

typedef struct st_ready_queue {
    uint64_t *v;
    uint32_t cap; /* power of two, 0 before the first push */
    uint32_t head;
    uint32_t count;
} st_ready_queue;

/* Append; STRATA_ENOMEM if growing failed (the queue is unchanged). */
int st_rq_push(st_ready_queue *q, uint64_t ref);

static inline int st_rq_empty(const st_ready_queue *q) {
    return q->count == 0;
}

static inline uint64_t st_rq_front(const st_ready_queue *q) {
    return q->v[q->head];
}

static inline void st_rq_pop(st_ready_queue *q) {
    q->head = (q->head + 1) & (q->cap - 1);
    q->count--;
}

void st_rq_free(st_ready_queue *q);

#endif
