/* python/strata/_strata_fork.c - the interpreter across strata's forks.
 *
 * Owns: the pthread_atfork handlers that tell CPython about a fork made by
 * strata_worker_init (a process-hosted child): PyOS_BeforeFork, then
 * PyOS_AfterFork_Parent in the parent and PyOS_AfterFork_Child in the
 * child, whose one thread (strata's serve loop) is the thread that forked
 * and so holds the GIL; it releases it at once, so whichever thread of the
 * child runs a Python function takes it for the call. Armed only on the
 * thread inside spy_with_fork_hooks, which holds the GIL.
 * Also owns the fork generation every fork's child counts up (the objects
 * of an ancestor process are disowned by it), and after a fork it did not
 * arm (os.fork, multiprocessing) the private copies of the callables'
 * shared tables.
 * Must never: tell the interpreter about a fork it did not arm (os.fork
 * and subprocess run their own hooks; a fork from a thread without the GIL
 * would corrupt the interpreter), or call Python in the handlers of a fork
 * it did not arm.
 */
#include "_strata.h"

#include <pthread.h>

static _Thread_local int armed; /* this thread is in spy_with_fork_hooks */

static void before(void) {
    if (armed)
        PyOS_BeforeFork();
}

static void after_parent(void) {
    if (armed)
        PyOS_AfterFork_Parent();
}

unsigned spy_fork_generation;

static void after_child(void) {
    spy_fork_generation++; /* one thread in the child: no race */
    if (!armed) {
        spy_callables_after_foreign_fork();
        return;
    }
    armed = 0;
    PyOS_AfterFork_Child(); /* this thread now holds the GIL of the child's interpreter */
    /* ... and lets it go: the child's serve loop is C, and the thread that
     * runs a function there (the loop itself, or a chip's serving thread)
     * takes the GIL for the call, as a thread of the parent does. */
    (void)PyEval_SaveThread();
}

int spy_with_fork_hooks(int (*f)(strata_worker *), strata_worker *w) {
    armed = 1;
    int rc = f(w);
    armed = 0;
    return rc;
}

int spy_fork_init(void) {
    if (pthread_atfork(before, after_parent, after_child) != 0) {
        PyErr_SetString(PyExc_ImportError, "strata: pthread_atfork failed");
        return -1;
    }
    return 0;
}
