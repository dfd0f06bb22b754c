/* core/ready_queue.c - growable FIFO of task references.
 *
 * Owns: the queue storage. Must never: reorder entries.
 */
#include "core/ready_queue.h"

#include <stdlib.h>

#include "strata/status.h"
#include "util/alloc.h"
#include "util/error.h"

static int rq_grow(st_ready_queue *q) {
    uint32_t ncap = q->cap ? q->cap * 2 : 64;
    uint64_t *nv = st_malloc(sizeof *nv * ncap);
    if (!nv)
        return st_fail_nomem("growing a ready queue", sizeof *nv * ncap);
    for (uint32_t i = 0; i < q->count; i++)
        nv[i] = q->v[(q->head + i) & (q->cap - 1)];
    st_free(q->v);
    q->v = nv;
    q->cap = ncap;
    q->head = 0;
    return STRATA_OK;
}

int st_rq_push(st_ready_queue *q, uint64_t ref) {
    if (q->count == q->cap) {
        int rc = rq_grow(q);
        if (rc)
            return rc;
    }
    q->v[(q->head + q->count) & (q->cap - 1)] = ref;
    q->count++;
    return STRATA_OK;
}

void st_rq_free(st_ready_queue *q) {
    st_free(q->v);
    q->v = NULL;
    q->cap = q->head = q->count = 0;
}
