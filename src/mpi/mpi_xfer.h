/* mpi/mpi_xfer.h - which bytes of a task's tensor travel to and from a rank.
 *
 * Owns: the direction of a host tensor by its tag (IN, NO_DEP: sent before
 * the task; OUT, OUT_EXISTING: returned after it; INOUT: both), the bytes
 * that travel (exactly the elements the view touches, in row-major order),
 * and packing a strided view into / out of that dense order. A contiguous
 * view travels straight from / into its buffer (no copy). Device tensors
 * (remote memory of the child, chip memory) never travel.
 * Must never: touch a byte outside the view.
 */
#ifndef STRATA_MPI_MPI_XFER_H
#define STRATA_MPI_MPI_XFER_H

#include <stdint.h>

#include "strata/types.h"

#define ST_XFER_IN 1
#define ST_XFER_OUT 2

/* ST_XFER_IN | ST_XFER_OUT bits of tensor t passed with `tag`; 0: it stays. */
int st_xfer_dirs(const strata_tensor *t, uint8_t tag);

/* Bytes of the view's elements (numel * element size). */
uint64_t st_xfer_bytes(const strata_tensor *t);

/* 1 if the view's elements are one dense row-major range at its data pointer. */
int st_xfer_contiguous(const strata_tensor *t);

/* The view's elements into dst (st_xfer_bytes bytes, row-major), and back. */
void st_xfer_pack(const strata_tensor *t, void *dst);
void st_xfer_unpack(const strata_tensor *t, const void *src);

#endif
