/* util/thread_role.c - the thread-local "serves this worker" mark.
 *
 * Owns: the mark only (see util/thread_role.h).
 * Must never: hold anything but a pointer compared for identity.
 */
#include "util/thread_role.h"

static _Thread_local const void *tls_served;

const void *st_thread_serve(const void *worker) {
    const void *prev = tls_served;
    tls_served = worker;
    return prev;
}

const void *st_thread_served(void) {
    return tls_served;
}
