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
#include <stdatomic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <time.h>

#include "mpi/mpi_bell.h"
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
/* Nonzero once this process learned that a rank of the job was declared dead
 * (by rank 0, or rank 0 said so at SHUTDOWN): the bound on its MPI_Finalize.
 * Open MPI 4.1's closing fence includes every rank of the job and, when a
 * death reached the runtime too late, waits for the dead rank for ever; a
 * rank declared dead that still lives leaves within a bound of its own,
 * which this one covers. Atomic: set by the progress thread and the serve
 * loop outside g_mpi_mu (the largest bound wins). */
static _Atomic uint64_t g_finalize_bound_ns;

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

void st_mpi_note_peer_died(uint64_t finalize_bound_ns) {
    uint64_t was = atomic_load(&g_finalize_bound_ns);
    while (finalize_bound_ns > was &&
           !atomic_compare_exchange_weak(&g_finalize_bound_ns, &was, finalize_bound_ns)) {
    }
}

uint64_t st_mpi_finalize_bound(void) {
    return atomic_load(&g_finalize_bound_ns);
}

typedef struct finalizer {
    st_event done; /* value 1 once MPI_Finalize returned */
    int rc;
} finalizer;

static void *finalize_thread(void *arg) {
    finalizer *f = arg;
    f->rc = MPI_Finalize();
    st_event_set(&f->done, 1);
    return NULL;
}

/* MPI_Finalize, bounded once a rank died. 0 when it returned (*rc its
 * result); -1 when it did not within the bound: it is left running on its
 * thread, MPI must not be called again, and the process may exit, saying so
 * (`who` starts the line on stderr). Under g_mpi_mu. */
static int finalize_mpi(int *rc, const char *who) {
    uint64_t bound = atomic_load(&g_finalize_bound_ns);
    if (!bound) {
        *rc = MPI_Finalize();
        return 0;
    }
    static finalizer f; /* outlives a finalize that never returns */
    atomic_store(&f.done.value, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, finalize_thread, &f) != 0) {
        *rc = MPI_Finalize();
        return 0;
    }
    if (st_event_wait(&f.done, 0, 0, st_deadline_after(bound)) != 0) {
        pthread_detach(t);
        fprintf(stderr,
                "%s: MPI_Finalize did not return within %llu s after a rank of the job died "
                "(Open MPI's closing fence waits for it): MPI is left unfinalised\n",
                who, (unsigned long long)(bound / 1000000000ull));
        return -1;
    }
    pthread_join(t, NULL);
    *rc = f.rc;
    return 0;
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
    st_mpi_bells_open(g_comm); /* collective, as the dup: every rank is here */
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
        int mrc = MPI_SUCCESS;
        if (finalize_mpi(&mrc, "strata_mpi_finalize") == 0 && mrc != MPI_SUCCESS)
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
    if (inited && !fin && !g_finalized) {
        g_finalized = 1;
        int mrc;
        (void)finalize_mpi(&mrc, "strata: a child's rank");
    }
    st_mpi_unlock();
}

uint64_t st_backoff_step(st_backoff *b) {
    uint64_t now = st_now_ns();
    if (!b->since)
        b->since = now;
    uint64_t ns = st_backoff_sleep_for(now - b->since, (int)b->busy);
    if (ns == 0) {
        if (b->idle_passes++ < 16)
            st_cpu_relax();
        else
            sched_yield();
    }
    return ns;
}

uint64_t st_backoff_sleep_for(uint64_t waited_ns, int busy) {
    if (waited_ns < (busy ? ST_BACKOFF_BUSY_POLL_NS : ST_BACKOFF_POLL_NS))
        return 0;
    uint64_t ns = waited_ns / ST_BACKOFF_SHARE;
    return ns < 1000 ? 1000 : ns > ST_BACKOFF_SLEEP_MAX_NS ? ST_BACKOFF_SLEEP_MAX_NS : ns;
}

int st_backoff_idle(st_backoff *b) {
    uint64_t ns = st_backoff_step(b);
    if (!ns)
        return 0;
    st_event *bell = st_mpi_bell_mine();
    if (!bell) {
        struct timespec ts = {0, (long)ns};
        nanosleep(&ts, NULL);
        return 1;
    }
    /* A ring since the last look may be for what the caller polls: poll
     * first. Otherwise park; any ring from now on ends it. */
    uint32_t v = atomic_load(&bell->value);
    if (v != b->bell_seen) {
        b->bell_seen = v;
        return 0;
    }
    (void)st_event_wait(bell, v, 0, st_deadline_after(ns));
    b->bell_seen = atomic_load(&bell->value);
    return 1;
}

void st_mpi_precise_sleeps(void) {
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}
