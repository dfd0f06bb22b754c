/* mpi/mpi_bell.h - the doorbells of the ranks that share a host.
 *
 * Owns: one shared region per host with a wake-up word (an st_event, a cache
 * line each) for every rank of the library's communicator on that host; the
 * send that rings its destination's word (st_mpi_isend: every send the
 * library makes); this rank's own word, which its back-off parks on
 * (st_backoff_idle, mpi_env.h) and rank 0's progress thread parks on.
 * Why: a rank owed nothing sleeps in steps of up to 1 ms between probes, so a
 * frame to an idle rank waited up to that long to be seen (measured: the
 * SEND_TO and the task of a rank-to-rank move reached their idle ranks
 * 0.75-1.4 ms after the run began). A rank on the same host now wakes when
 * the frame is sent.
 * Must never: be needed for correctness. A bell is a hint: every wait keeps
 * its back-off deadline and probes after it, a rank on another host has no
 * bell to ring, and a ring may come before MPI shows the message. Nor unmap
 * the region while the process lives (a thread may be parked on its word
 * when MPI is finalised; MPI is initialised once, so there is one region).
 */
#ifndef STRATA_MPI_MPI_BELL_H
#define STRATA_MPI_MPI_BELL_H

#include <mpi.h>

#include "util/futex.h"

/* Collective over comm (every rank calls it once, when the library's
 * communicator is made, under st_mpi_lock: ensure_locked in mpi_env.c, which
 * runs once per process): the ranks of each host map one
 * region their lowest rank publishes, and the name is withdrawn before the
 * call returns on every rank. A rank that cannot take part (no /dev/shm, no
 * memory) has no bells and is rung by nobody: its waits end at their
 * deadlines, as they did before. */
void st_mpi_bells_open(MPI_Comm comm);

/* This rank's own word, or NULL when it has none. */
st_event *st_mpi_bell_mine(void);

/* Wake `rank` if it shares this host and is parked on its word. */
void st_mpi_bell_ring(int rank);

/* MPI_Isend of count bytes on the library's communicator, then the ring of
 * `to` (st_mpi_lock held, as for every MPI call). MPI's return code. */
int st_mpi_isend(const void *buf, int count, int to, int tag, MPI_Request *req);

#endif
