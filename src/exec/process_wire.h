/* exec/process_wire.h - a callable's description as a REGISTER control
 * carries it from the parent to a process child.
 *
 * Owns: the payload layout of ST_MBOX_CMD_REGISTER (the frame's digest field
 * holds the callable's digest; the child recomputes it from kind and name and
 * refuses a mismatch).
 * Must never: carry anything the child could not use as it is: function and
 * user pointers are valid in the child only because it is a fork of the same
 * binary (user data must have existed at the fork, or be shared memory).
 */
#ifndef STRATA_EXEC_PROCESS_WIRE_H
#define STRATA_EXEC_PROCESS_WIRE_H

#include <stdint.h>

typedef struct st_wire_callable {
    uint32_t kind; /* st_callable_kind */
    int32_t id;    /* the parent's id (informational: the child keys by digest) */
    char name[64]; /* NUL-terminated */
    uint64_t fn, user, program;
} st_wire_callable;

#endif
