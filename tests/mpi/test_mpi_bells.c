/* tests/mpi/test_mpi_bells.c - the doorbells of the ranks of one host
 * (mpi/mpi_bell.h), under mpirun -np 3 on one machine.
 *
 * Owns: every rank has its own bell once the library's communicator is
 * made, and no name of the job is left in /dev/shm; a send to a rank rings
 * that rank only, and wakes it while it is parked on its bell (rank 1 parks
 * with a 10 s deadline: a missing ring fails the check as a timeout, not by
 * a timing); the back-off polls again at once when the bell rang since its
 * last look instead of sleeping.
 * Must never: build an L4 (the bells are below it), or judge by a time.
 */
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "mpi_test.h"

#ifdef MT_NO_MPI
int main(void) {
    mt_skip_without_mpi();
    return MT_SKIP;
}
#else

#include <mpi.h>

#include "ipc/shm_region.h"
#include "mpi/mpi_bell.h"
#include "mpi/mpi_env.h"
#include "util/clock.h"

enum { TAG_RING = 5 };

/* Names in /dev/shm that a process of this job made ("strata-<pid>-..."). */
static int names_of(const int *pids, int n) {
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        for (int k = 0; k < n; k++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, ST_SHM_NAME_PREFIX "%d-", pids[k]);
            found += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
        }
    closedir(d);
    return found;
}

static void barrier(void) {
    st_mpi_lock();
    MT_CHECK(MPI_Barrier(st_mpi_comm()) == MPI_SUCCESS, "barrier");
    st_mpi_unlock();
}

int main(int argc, char **argv) {
    mt_skip_without_mpi();
    MT_OK(strata_mpi_init(&argc, &argv));
    int rank = strata_mpi_rank();
    MT_CHECK(strata_mpi_size() == 3, "run under mpirun -np 3 (size %d)", strata_mpi_size());
    st_event *mine = st_mpi_bell_mine();
    MT_CHECK(mine != NULL, "rank %d has a bell (all three ranks share this host)", rank);

    int pid = (int)getpid(), pids[3];
    st_mpi_lock();
    MPI_Allgather(&pid, 1, MPI_INT, pids, 1, MPI_INT, st_mpi_comm());
    st_mpi_unlock();
    MT_CHECK(names_of(pids, 3) == 0, "no name of the job is left in /dev/shm once the bells exist");

    uint32_t before = atomic_load(&mine->value);
    barrier(); /* every rank has read its value: only the ring below changes one */
    if (rank == 0) {
        usleep(20000); /* rank 1 is most likely parked by now: the wake, not only the value */
        char byte = 1;
        MPI_Request r;
        st_mpi_lock();
        MT_CHECK(st_mpi_isend(&byte, 1, 1, TAG_RING, &r) == MPI_SUCCESS, "the send");
        MT_CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS, "the send completes");
        st_mpi_unlock();
    } else if (rank == 1) {
        int rc = st_event_wait(mine, before, 0, st_deadline_after(10ull * 1000000000ull));
        MT_CHECK(rc == 0, "rank 1 parked on its bell is woken by rank 0's send (rc %d)", rc);
        char byte = 0;
        st_mpi_lock();
        MT_CHECK(MPI_Recv(&byte, 1, MPI_BYTE, 0, TAG_RING, st_mpi_comm(), MPI_STATUS_IGNORE) ==
                     MPI_SUCCESS,
                 "the rung rank takes the message");
        st_mpi_unlock();
        MT_CHECK(byte == 1, "the message came whole");
    }
    barrier();
    uint32_t after = atomic_load(&mine->value);
    if (rank == 1)
        MT_CHECK(after != before, "the send rang the rank it went to");
    else
        MT_CHECK(after == before, "rank %d was not rung: the send went to rank 1 only", rank);

    /* The back-off, past its poll window: a ring since its last look means
     * "poll again" at once; with none it parks (for its 1 ms cap here). */
    st_backoff bo = {.since = st_now_ns() - 10ull * 1000000000ull, .busy = 0};
    bo.bell_seen = after - 1;
    MT_CHECK(st_backoff_idle(&bo) == 0, "a ring since the last look: no sleep");
    MT_CHECK(bo.bell_seen == after, "the back-off took the ring in (seen %u, bell %u)",
             bo.bell_seen, after);
    MT_CHECK(st_backoff_idle(&bo) == 1, "no ring since: it parks on the bell");
    barrier();
    MT_OK(strata_mpi_finalize());
    if (rank == 0)
        printf("test_mpi_bells: all checks passed\n");
    return 0;
}
#endif
