/* mpi/mpi_bell.c - the doorbells of the ranks that share a host (mpi_bell.h).
 *
 * Owns: the host's region (published by the host's lowest rank through
 * ipc/shm_region.h, attached by the others, withdrawn before the open
 * returns), the table from a rank of the communicator to its line, and the
 * ring after each send.
 * Must never: fail the library's start when the bells cannot be made (they
 * are only a wake-up), or free the table or the region while the process
 * lives (read without a lock by every thread that sends or parks).
 */
#include "mpi/mpi_bell.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/shm_region.h"
#include "mpi/mpi_env.h"
#include "strata/status.h"
#include "util/alloc.h"
#include "util/error.h"

/* A line per rank: two ranks' words never share a cache line. */
#define BELL_LINE 64
_Static_assert(sizeof(st_event) <= BELL_LINE, "a bell fits its line");

typedef struct bells {
    st_shm region;
    int nranks; /* of the communicator */
    int *line;  /* per rank of the communicator: its line, or -1 (another host) */
    st_event *mine;
} bells;

/* Set once by st_mpi_bells_open (release), then only read (acquire). */
static _Atomic(bells *) g_bells;

static st_event *line_at(const bells *b, int k) {
    return (st_event *)(void *)((char *)b->region.base + (size_t)k * BELL_LINE);
}

/* The host's region mapped on every rank of `node`, or every rank none:
 * the lowest rank publishes it, the others attach, all agree, the name goes. */
static int map_host_region(MPI_Comm node, int me, int n, st_shm *r) {
    char name[ST_SHM_NAME_MAX] = "";
    size_t bytes = (size_t)n * BELL_LINE;
    if (me == 0 && st_shm_publish("MPI doorbells", bytes, r, name) != STRATA_OK)
        name[0] = '\0';
    int ok = MPI_Bcast(name, (int)sizeof name, MPI_CHAR, 0, node) == MPI_SUCCESS;
    name[sizeof name - 1] = '\0';
    ok = ok && name[0] && (me == 0 || st_shm_attach("MPI doorbells", name, bytes, r) == STRATA_OK);
    int all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node) != MPI_SUCCESS)
        all = 0;
    if (me == 0)
        st_shm_withdraw(name); /* every rank has attached, or given up */
    if (!all)
        st_shm_destroy(r);
    return all;
}

void st_mpi_bells_open(MPI_Comm comm) {
    int wr = 0, wn = 0, me = 0, n = 0;
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_rank(comm, &wr);
    MPI_Comm_size(comm, &wn);
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &n);
    bells *b = st_calloc(1, sizeof *b);
    int *ranks = st_calloc((size_t)n, sizeof *ranks);
    int ok = b && ranks && (b->line = st_malloc((size_t)wn * sizeof *b->line)) != NULL;
    int all = 0; /* every rank of the host takes part in each step, whatever it has */
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, node) != MPI_SUCCESS)
        all = 0;
    all = all && map_host_region(node, me, n, &b->region);
    if (all && MPI_Allgather(&wr, 1, MPI_INT, ranks, 1, MPI_INT, node) != MPI_SUCCESS) {
        st_shm_destroy(&b->region); /* the others may keep theirs: rung by none from here */
        all = 0;
    }
    MPI_Comm_free(&node);
    if (all) {
        b->nranks = wn;
        for (int i = 0; i < wn; i++)
            b->line[i] = -1;
        for (int k = 0; k < n; k++)
            if (ranks[k] >= 0 && ranks[k] < wn)
                b->line[ranks[k]] = k;
        b->mine = line_at(b, me);
        atomic_store_explicit(&g_bells, b, memory_order_release);
    } else if (b) {
        st_free(b->line);
        st_free(b);
    }
    st_free(ranks);
    st_clear_error(); /* a region that could not be made is not the caller's error */
}

st_event *st_mpi_bell_mine(void) {
    bells *b = atomic_load_explicit(&g_bells, memory_order_acquire);
    return b ? b->mine : NULL;
}

void st_mpi_bell_ring(int rank) {
    bells *b = atomic_load_explicit(&g_bells, memory_order_acquire);
    if (!b || rank < 0 || rank >= b->nranks || b->line[rank] < 0)
        return;
    st_event_bump(line_at(b, b->line[rank]));
}

int st_mpi_isend(const void *buf, int count, int to, int tag, MPI_Request *req) {
    int rc = MPI_Isend(buf, count, MPI_BYTE, to, tag, st_mpi_comm(), req);
    if (rc == MPI_SUCCESS)
        st_mpi_bell_ring(to);
    return rc;
}
