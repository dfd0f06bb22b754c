/* ipc/child_process.h - a forked child process: start, liveness, reaping.
 *
 * Owns: fork and the child's entry (the child never returns into the
 * parent's frames: it _exit()s with its entry's status), the parent's
 * liveness probe (waitpid WNOHANG, the status decoded once into a message
 * naming the signal or the exit code, and cached), the bounded reap (wait,
 * then SIGKILL, then wait), and the child's check that its parent is alive.
 * Must never: signal or wait for a pid it did not start, signal a pid after
 * it was reaped (pid reuse), or block without a deadline.
 */
#ifndef STRATA_IPC_CHILD_PROCESS_H
#define STRATA_IPC_CHILD_PROCESS_H

#include <stdint.h>
#include <sys/types.h>

#include "strata/status.h"

typedef struct st_child {
    pid_t pid;     /* 0 once reaped (or never started) */
    int exited;    /* 1 once the probe or the reap saw it end */
    int status;    /* the raw wait status once exited */
    int killed;    /* 1 once st_child_reap had to SIGKILL it */
    char why[128]; /* "exited with status 3", "killed by signal 9 (SIGKILL)" once exited */
    char label[64];
} st_child;

/* The child's entry: runs in the child process; its return value is the
 * child's exit status. */
typedef int (*st_child_entry)(void *arg);

/* Fork a child labelled `label` that runs entry(arg) and _exit()s.
 * STRATA_OK, or STRATA_ENOMEM with a message (fork failed). */
int st_child_spawn(st_child *c, const char *label, st_child_entry entry, void *arg);

/* 1 if the child is still running, 0 if it ended (c->why says how). Never
 * blocks. */
int st_child_alive(st_child *c);

/* Wait until the child exits or deadline_ns (monotonic) passes; then kill it
 * (SIGKILL) and wait for it. Idempotent. Returns 1 if it exited by itself in
 * time, 0 if it had to be killed. */
int st_child_reap(st_child *c, uint64_t deadline_ns);

/* In the child: the pid of the parent captured at spawn (getppid() then). */
pid_t st_child_parent_pid(void);
/* In the child: 1 while the parent that spawned us is alive. */
int st_child_parent_alive(void);

/* In a child: end the process now with `status` (coverage builds dump their
 * counters first). No handler runs: for a child that must not linger. */
_Noreturn void st_child_exit(int status);

#endif
