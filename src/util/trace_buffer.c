/* util/trace_buffer.c - the lane buffer's memory.
 *
 * Owns: mapping and unmapping a lane's fixed buffer.
 * Must never: be called on the record path (only at create and destroy).
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/status.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/trace_buffer.h"

int st_trace_lane_init(st_trace_lane *l, uint32_t cap) {
    memset(l, 0, sizeof *l);
    size_t bytes = (size_t)cap * sizeof(st_trace_event);
    /* Shared, so a lane mapped before a fork is memory both processes see (the
     * engine lane is written by the parent only; see core/trace.h). */
    /* Populated now: a first touch on the record path would cost a page fault. */
    l->ev = st_map_anon(bytes, MAP_SHARED | MAP_POPULATE);
    if (!l->ev)
        return st_fail_nomem("tracing: a lane of trace_events_per_lane events", bytes);
    l->cap = cap;
    return STRATA_OK;
}

void st_trace_lane_free(st_trace_lane *l) {
    if (l->ev)
        st_unmap(l->ev, (size_t)l->cap * sizeof(st_trace_event));
    l->ev = NULL;
    l->cap = 0;
}
