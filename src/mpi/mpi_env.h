/* mpi/mpi_env.h - the MPI environment of the library.
 *
 * Owns: whether and how MPI was initialised (by strata or by the program),
 * the library's own communicator (a dup of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, so a failed call returns instead of aborting the job),
 * the one lock every MPI call of the library is made under, and the back-off
 * every wait for a message uses.
 * Must never: make an MPI call without st_mpi_lock held, or wait in a
 * blocking MPI call (Open MPI's blocking calls spin a core at 100 %).
 */
#ifndef STRATA_MPI_MPI_ENV_H
#define STRATA_MPI_MPI_ENV_H

#include <mpi.h>
#include <stdint.h>

/* Initialise MPI if needed (as strata_mpi_init) and the communicator. */
int st_mpi_ensure(const char *who);

/* A non-root rank leaving its serve loop: the program never regains control,
 * so MPI is finalised whoever initialised it. */
void st_mpi_finalize_any(void);
/* A rank of the job was declared dead (by rank 0, or so said at SHUTDOWN):
 * from now on this process's MPI_Finalize waits at most finalize_bound_ns
 * (the largest noted), as Open MPI 4.1's closing fence can wait for a dead
 * rank for ever; past it MPI is left unfinalised and the process may exit
 * (mpi_env.c). The bound must cover the time a rank declared dead that
 * still lives takes to leave. st_mpi_finalize_bound: 0 while none died. */
void st_mpi_note_peer_died(uint64_t finalize_bound_ns);
uint64_t st_mpi_finalize_bound(void);

/* The library's communicator (valid after st_mpi_ensure). */
MPI_Comm st_mpi_comm(void);

/* The lock of every MPI call the library makes. With MPI_THREAD_MULTIPLE it
 * only orders the library's own calls; with MPI_THREAD_SERIALIZED it is what
 * makes them legal. A leaf lock: nothing else is taken while it is held. */
void st_mpi_lock(void);
void st_mpi_unlock(void);

/* "<MPI's error string> (code N)" for an MPI return code, into buf. */
const char *st_mpi_strerror(int code, char *buf, int cap);

/* The back-off of a polling loop, after a pass that did nothing: for the
 * first ST_BACKOFF_POLL_NS since the last pass that did something, poll again
 * at once (a few pauses, then yielding the CPU: an answer usually follows
 * within microseconds, and on a machine with fewer cores than ranks the
 * yield lets the peer run); then sleep 1 us doubling up to 1 ms.
 * st_backoff_step does the spin or yield itself and returns 0, or returns
 * the nanoseconds to sleep (a caller that can be woken sleeps its own way);
 * st_backoff_idle sleeps them. st_backoff_reset after a pass that did
 * something. */
#define ST_BACKOFF_POLL_NS 200000u
typedef struct st_backoff {
    uint64_t since; /* first idle pass since the reset (0: none yet) */
    uint32_t idle_passes;
    uint32_t sleep_ns;
} st_backoff;
uint64_t st_backoff_step(st_backoff *b);
void st_backoff_idle(st_backoff *b);
static inline void st_backoff_reset(st_backoff *b) {
    b->since = 0;
    b->idle_passes = 0;
    b->sleep_ns = 0;
}

/* The calling thread's timer slack at its least: a polling thread's short
 * sleeps would otherwise last the default 50 us at least. */
void st_mpi_precise_sleeps(void);

#endif
