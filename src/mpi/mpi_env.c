/* mpi/mpi_env.c - MPI initialisation, the library's communicator and lock,
 * the polling back-off (mpi/mpi_env.h), and the public strata_mpi_* calls.
 *
 * Owns: the record of who initialised MPI (only what strata initialised it
 * finalises, at strata_mpi_finalize or at exit), the thread level MPI gave,
 * the communicator dup with MPI_ERRORS_RETURN.
 * Must never: finalise an MPI the program initialised, or accept a thread
 * level below MPI_THREAD_SERIALIZED (the progress thread is not the thread
 * that initialised MPI).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <time.h>

#include "mpi/mpi_env.h"
#include "strata/mpi.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"

/* Protects every field below and is the lock of every MPI call (mpi_env.h). */
static pthread_mutex_t g_mpi_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ours;      /* strata called MPI_Init_thread */
static int g_ready;     /* g_comm is made */
static int g_finalized; /* strata finalised it */
static MPI_Comm g_comm = MPI_COMM_NULL;

void st_mpi_lock(void) {
    pthread_mutex_lock(&g_mpi_mu);
}

void st_mpi_unlock(void) {
    pthread_mutex_unlock(&g_mpi_mu);
}

MPI_Comm st_mpi_comm(void) {
    return g_comm;
}

const char *st_mpi_strerror(int code, char *buf, int cap) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "unknown MPI error");
    snprintf(buf, (size_t)cap, "%s (code %d)", s, code);
    return buf;
}

static void finalize_at_exit(void) {
    (void)strata_mpi_finalize();
}

/* Under g_mpi_mu. */
static int ensure_locked(int *argc, char ***argv, const char *who) {
    if (g_finalized)
        return st_fail(STRATA_ESTATE, "%s: MPI was finalised already", who);
    if (g_ready)
        return STRATA_OK;
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
        return st_fail(STRATA_ESTATE, "%s: MPI was finalised already", who);
    int provided = MPI_THREAD_SINGLE;
    if (!inited) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            char e[MPI_MAX_ERROR_STRING + 32];
            return st_fail(STRATA_EENDPOINT, "%s: MPI_Init_thread failed: %s", who,
                           st_mpi_strerror(rc, e, (int)sizeof e));
        }
        g_ours = 1;
        atexit(finalize_at_exit);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
        return st_fail(STRATA_EENDPOINT,
                       "%s: MPI gives thread level %d; strata needs MPI_THREAD_SERIALIZED or "
                       "MPI_THREAD_MULTIPLE (initialise MPI with MPI_Init_thread, or let "
                       "strata_mpi_init do it)",
                       who, provided);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &g_comm) != MPI_SUCCESS)
        return st_fail(STRATA_EENDPOINT, "%s: MPI_Comm_dup failed", who);
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    g_ready = 1;
    return STRATA_OK;
}

int st_mpi_ensure(const char *who) {
    st_mpi_lock();
    int rc = ensure_locked(NULL, NULL, who);
    st_mpi_unlock();
    return rc;
}

int strata_mpi_available(void) {
    return 1;
}

int strata_mpi_init(int *argc, char ***argv) {
    st_mpi_lock();
    int rc = ensure_locked(argc, argv, "strata_mpi_init");
    st_mpi_unlock();
    return rc;
}

int strata_mpi_rank(void) {
    int r = 0, inited = 0, fin = 0;
    st_mpi_lock();
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    st_mpi_unlock();
    return r;
}

int strata_mpi_size(void) {
    int n = 1, inited = 0, fin = 0;
    st_mpi_lock();
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin)
        MPI_Comm_size(MPI_COMM_WORLD, &n);
    st_mpi_unlock();
    return n;
}

int strata_mpi_finalize(void) {
    st_mpi_lock();
    int rc = STRATA_OK;
    if (g_ready && !g_finalized) {
        MPI_Comm_free(&g_comm);
        g_ready = 0;
    }
    if (g_ours && !g_finalized) {
        g_finalized = 1;
        if (MPI_Finalize() != MPI_SUCCESS)
            rc = st_fail(STRATA_EENDPOINT, "strata_mpi_finalize: MPI_Finalize failed");
    }
    st_mpi_unlock();
    return rc;
}

void st_mpi_finalize_any(void) {
    st_mpi_lock();
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (g_ready) {
        MPI_Comm_free(&g_comm);
        g_ready = 0;
    }
    if (inited && !fin) {
        g_finalized = 1;
        MPI_Finalize();
    }
    st_mpi_unlock();
}

uint64_t st_backoff_step(st_backoff *b) {
    uint64_t now = st_now_ns();
    if (!b->since)
        b->since = now;
    if (now - b->since < ST_BACKOFF_POLL_NS) {
        if (b->idle_passes++ < 16)
            st_cpu_relax();
        else
            sched_yield();
        return 0;
    }
    b->sleep_ns = b->sleep_ns ? b->sleep_ns * 2 : 1000;
    if (b->sleep_ns > 1000000)
        b->sleep_ns = 1000000;
    return b->sleep_ns;
}

void st_backoff_idle(st_backoff *b) {
    uint64_t ns = st_backoff_step(b);
    if (!ns)
        return;
    struct timespec ts = {0, (long)ns};
    nanosleep(&ts, NULL);
}

void st_mpi_precise_sleeps(void) {
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}
