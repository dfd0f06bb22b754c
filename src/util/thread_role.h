/* util/thread_role.h - which worker's task bodies the calling thread runs.
 *
 * Owns: one thread-local word naming the worker a thread serves: a sub worker
 * thread or a chip endpoint thread for its whole life, a waiting caller while
 * it runs a task lent to it. Calls that would wait for that same worker (close,
 * submit, waiting on one of its unfinished runs) check it and refuse instead
 * of deadlocking.
 * Must never: be read as anything but an identity (it is an opaque pointer:
 * util knows no worker type), or be left set after the task or thread ends.
 */
#ifndef STRATA_UTIL_THREAD_ROLE_H
#define STRATA_UTIL_THREAD_ROLE_H

/* Mark the calling thread as serving `worker` (NULL: none); returns the
 * previous mark so nested roles can be restored. */
const void *st_thread_serve(const void *worker);

/* The worker the calling thread serves, NULL if none. */
const void *st_thread_served(void);

#endif
