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

/* The back-off of a polling loop, after a pass that did nothing. The caller
 * sets `busy` before each step when it waits on something it is owed (a
 * task's answer, a transfer, a control call), and leaves it 0 when nothing
 * is outstanding (no frame is due; a new one may come at any time).
 * - Poll: for ST_BACKOFF_POLL_NS since the last pass that did something
 *   (ST_BACKOFF_BUSY_POLL_NS when busy), poll again at once (a few pauses,
 *   then yielding the CPU: an answer usually follows within microseconds,
 *   and on a machine with fewer cores than ranks the yield lets the peer
 *   run).
 * - Then sleep an eighth of the time waited so far (ST_BACKOFF_SHARE), at
 *   least 1 us and at most ST_BACKOFF_SLEEP_MAX_NS: the sleep adds at most
 *   an eighth to a wait, or the cap to a long one.
 * Why busy polls longer: two loops that answer each other (rank 0's
 * progress thread and a child's serve loop, a chain of short tasks) could
 * otherwise both be asleep, each waiting past its poll window because the
 * other sleeps; with a doubling sleep that slow state lasted (measured: a
 * 5-10 us round trip taking 17-310 us per task over whole runs). The side
 * that is owed an answer keeps polling, so it answers at once and the other
 * side's next wait is short again. An idle loop's cost is unchanged (its
 * sleeps reach the cap), and a busy one's long wait costs its first 2 ms of
 * polling.
 * One cap for both: a busy cap of 250 us measured no gain on bench_mpi's
 * rows over 1 ms and took rank 0 from 4 % to 10 % of a core while a 1 s
 * remote task ran.
 * st_backoff_step does the spin or yield itself and returns 0, or returns
 * the nanoseconds to sleep (a caller that can be woken sleeps its own way);
 * st_backoff_idle sleeps them, parked on this rank's doorbell when it has
 * one (mpi_bell.h: a send from a rank of the same host ends the sleep), so
 * the sleep bounds the wait for a rank on another host only.
 * st_backoff_reset after a pass that did something. */
#define ST_BACKOFF_POLL_NS 200000u
#define ST_BACKOFF_BUSY_POLL_NS 2000000u
#define ST_BACKOFF_SHARE 8u
#define ST_BACKOFF_SLEEP_MAX_NS 1000000u
typedef struct st_backoff {
    uint64_t since; /* first idle pass since the reset (0: none yet) */
    uint32_t idle_passes;
    uint32_t busy;      /* set by the caller before each step: it waits on something it is owed */
    uint32_t bell_seen; /* the doorbell's value at the last look (st_backoff_idle) */
} st_backoff;
uint64_t st_backoff_step(st_backoff *b);
/* 1 when it slept (or parked), 0 when it returned at once to poll again. */
int st_backoff_idle(st_backoff *b);
/* The schedule alone: 0 (poll again) or the ns to sleep after waiting
 * waited_ns, owed an answer (busy) or not. st_backoff_step applies it. */
uint64_t st_backoff_sleep_for(uint64_t waited_ns, int busy);
static inline void st_backoff_reset(st_backoff *b) {
    b->since = 0;
    b->idle_passes = 0;
}

/* The calling thread's timer slack at its least: a polling thread's short
 * sleeps would otherwise last the default 50 us at least. */
void st_mpi_precise_sleeps(void);

#endif
