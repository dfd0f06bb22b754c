/* ipc/child_process.c - forked children: spawn, liveness probe, bounded reap,
 * and the child's view of its parent.
 *
 * Owns: the fork (the child runs its entry and _exit()s: no atexit handler,
 * no return into the parent's frames), the decoding of a wait status into
 * st_child.why (once, then cached), the reap's deadline (a pidfd polled until
 * the deadline where the kernel has pidfd_open, otherwise short sleeps), and
 * the parent pid captured before the fork.
 * Must never: wait for or signal a pid it did not fork, signal a pid after it
 * was reaped (pid 0 from then on), or block past a deadline.
 */
#include "ipc/child_process.h"

#ifdef STRATA_COVERAGE_DUMP
void __gcov_dump(void); /* libgcov (--coverage) */
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/message.h"

/* In a child: its parent's pid, captured by the parent before the fork.
 * 0 in a process that no st_child_spawn started. */
static pid_t parent_pid_at_spawn;

/* After SIGKILL a process dies promptly; this bounds the wait for it anyway. */
#define ST_CHILD_KILL_WAIT_NS (5ull * 1000000000ull)

static void copy_label(st_child *c, const char *label) {
    st_msg_format(c->label, sizeof c->label, "%s", label ? label : "child");
}

int st_child_spawn(st_child *c, const char *label, st_child_entry entry, void *arg) {
    memset(c, 0, sizeof *c);
    copy_label(c, label);
    if (!entry)
        return st_fail(STRATA_EINVAL, "child %s: no entry function", c->label);
    pid_t me = getpid(); /* captured before the fork: the child's parent */
    fflush(NULL);        /* buffered output would be written twice */
    pid_t pid = fork();
    if (pid < 0)
        return st_fail(STRATA_ENOMEM, "child %s: fork failed: %s", c->label, strerror(errno));
    if (pid == 0) {
        parent_pid_at_spawn = me;
        st_child_exit(entry(arg));
    }
    c->pid = pid;
    return STRATA_OK;
}

static void record_end(st_child *c, int status) {
    c->exited = 1;
    c->status = status;
    c->pid = 0;
    if (WIFEXITED(status)) {
        st_msg_format(c->why, sizeof c->why, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *abbrev = sigabbrev_np(sig);
        st_msg_format(c->why, sizeof c->why, "killed by signal %d (%s%s)%s", sig,
                      abbrev ? "SIG" : "", abbrev ? abbrev : "unknown signal",
                      WCOREDUMP(status) ? ", core dumped" : "");
    } else {
        st_msg_format(c->why, sizeof c->why, "ended with wait status 0x%x", (unsigned)status);
    }
}

int st_child_alive(st_child *c) {
    if (c->pid <= 0)
        return 0;
    int status = 0;
    pid_t rc;
    do
        rc = waitpid(c->pid, &status, WNOHANG);
    while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return 1;
    if (rc == c->pid) {
        record_end(c, status);
        return 0;
    }
    /* ECHILD: reaped by someone else (or SIGCHLD ignored): no longer ours to
     * wait for or signal. */
    int err = errno;
    c->exited = 1;
    c->status = 0;
    c->pid = 0;
    st_msg_format(c->why, sizeof c->why, "no longer waitable (%s): its exit status is unknown",
                  strerror(err));
    return 0;
}

/* Wait until the child ended or deadline_ns; 1 if it ended. */
static int wait_until(st_child *c, uint64_t deadline_ns) {
    int pidfd = -1;
#ifdef SYS_pidfd_open
    pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
#endif
    int ended = 0;
    uint64_t nap_ns = 20000; /* without a pidfd: 20 us, doubling up to 2 ms */
    for (;;) {
        if (!st_child_alive(c)) {
            ended = 1;
            break;
        }
        uint64_t now = st_now_ns();
        if (now >= deadline_ns)
            break;
        uint64_t left = deadline_ns - now;
        if (pidfd >= 0) {
            uint64_t ms = left / 1000000u + 1;
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            poll(&p, 1, ms > 1000 ? 1000 : (int)ms);
        } else {
            uint64_t ns = nap_ns < left ? nap_ns : left;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ns};
            nanosleep(&ts, NULL);
            if (nap_ns < 2000000)
                nap_ns *= 2;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    return ended;
}

int st_child_reap(st_child *c, uint64_t deadline_ns) {
    if (c->pid <= 0)
        return !c->killed;
    if (wait_until(c, deadline_ns))
        return 1;
    c->killed = 1;
    kill(c->pid, SIGKILL); /* not reaped yet: the pid is still this child's */
    if (!wait_until(c, st_deadline_after(ST_CHILD_KILL_WAIT_NS)))
        st_msg_format(c->why, sizeof c->why, "still running %llu s after SIGKILL",
                      (unsigned long long)(ST_CHILD_KILL_WAIT_NS / 1000000000ull));
    return 0;
}

_Noreturn void st_child_exit(int status) {
#ifdef STRATA_COVERAGE_DUMP
    __gcov_dump(); /* coverage builds: _exit skips gcov's own exit handler */
#endif
    _exit(status);
}

pid_t st_child_parent_pid(void) {
    return parent_pid_at_spawn;
}

int st_child_parent_alive(void) {
    /* A dead parent's children are re-parented (to init or a subreaper, a
     * live process whose pid differs from the parent's): a changed getppid()
     * is the parent's death, even if its pid was reused meanwhile. */
    if (parent_pid_at_spawn == 0)
        return 1;
    return getppid() == parent_pid_at_spawn;
}
