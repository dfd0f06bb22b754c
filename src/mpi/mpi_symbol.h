/* mpi/mpi_symbol.h - a function's address as another rank of the same
 * program can find it: the loaded object it lies in and its offset there.
 *
 * Owns: naming an address by (object path, offset from the object's base,
 * symbol name if it has a dynamic one) and resolving that name in this
 * process. Every rank runs the same binary, but address space layout
 * randomisation loads it (and its libraries) at different bases, so a raw
 * pointer means nothing on another rank.
 * Must never: resolve to an address outside the named object, or accept a
 * resolution whose dynamic symbol name differs from the one sent.
 */
#ifndef STRATA_MPI_MPI_SYMBOL_H
#define STRATA_MPI_MPI_SYMBOL_H

#include <stddef.h>
#include <stdint.h>

#define ST_SYM_PATH_MAX 512

typedef struct st_symbol_ref {
    char object[ST_SYM_PATH_MAX]; /* "" for the main program */
    char symbol[128];             /* its dynamic symbol's name, "" if it has none */
    uint64_t offset;              /* from the object's lowest loaded address */
} st_symbol_ref;

/* Name address p. STRATA_OK, or STRATA_EINVAL with a message (p lies in no
 * loaded object, or the object's path is too long). */
int st_symbol_name(const void *p, st_symbol_ref *out);

/* The address ref names in this process. STRATA_OK and *out, or
 * STRATA_EINVAL with a message saying why not. */
int st_symbol_resolve(const st_symbol_ref *ref, void **out);

#endif
