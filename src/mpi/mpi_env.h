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

/* The library's communicator (valid after st_mpi_ensure). */
MPI_Comm st_mpi_comm(void);

/* The lock of every MPI call the library makes. With MPI_THREAD_MULTIPLE it
 * only orders the library's own calls; with MPI_THREAD_SERIALIZED it is what
 * makes them legal. A leaf lock: nothing else is taken while it is held. */
void st_mpi_lock(void);
void st_mpi_unlock(void);

/* "<MPI's error string> (code N)" for an MPI return code, into buf. */
const char *st_mpi_strerror(int code, char *buf, int cap);

/* The back-off of a polling loop: call st_backoff_idle after a pass that did
 * nothing (spins a little, then sleeps 1 us doubling up to 1 ms), and
 * st_backoff_reset after one that did something. */
typedef struct st_backoff {
    uint32_t idle_passes;
    uint32_t sleep_ns;
} st_backoff;
void st_backoff_idle(st_backoff *b);
static inline void st_backoff_reset(st_backoff *b) {
    b->idle_passes = 0;
    b->sleep_ns = 0;
}

#endif
