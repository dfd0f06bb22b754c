/* strata/status.h - status codes and the per-thread "last error" message.
 *
 * Owns: the strata_status enumeration and the calls that describe a failure.
 * Must never: depend on any other strata header but export.h (everything else
 * includes it).
 */
#ifndef STRATA_STATUS_H
#define STRATA_STATUS_H

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every strata call returns one of these. 0 is success; each failure class is
 * a distinct negative value so callers may switch on it. The human message of
 * the most recent failure on the calling thread is strata_error_message(). */
typedef enum strata_status {
    STRATA_OK = 0,
    STRATA_EINVAL = -1,    /* invalid argument (NULL, out of range, bad view, ...) */
    STRATA_ESTATE = -2,    /* call not allowed in the object's current state */
    STRATA_ETIMEDOUT = -3, /* a bounded wait expired; the object is unchanged */
    STRATA_ETASK = -4,     /* a task (or the orchestration function) failed */
    STRATA_EENDPOINT = -5, /* a worker endpoint failed or rejected the task */
    STRATA_ECLOSED = -6,   /* the object was closed */
    STRATA_ESTALE = -7,    /* a handle or reference from an older generation */
    STRATA_EPOISONED = -8, /* refused because an earlier failure poisoned the object */
    STRATA_ECAPACITY = -9, /* a fixed capacity was exceeded */
    STRATA_EABI = -10,     /* ABI version mismatch between loader and backend */
    STRATA_EDEVICE = -11,  /* the device (backend) reported an error */
    STRATA_ENOMEM = -12,   /* out of memory */
    STRATA_ECANCELED = -13 /* the task was cancelled before it started */
} strata_status;

/* Short stable name of a status ("STRATA_EINVAL"); never NULL. */
STRATA_API const char *strata_status_name(int status);

/* Message of the last failed strata call on this thread ("" if none yet).
 * The pointer stays valid until the next strata call on this thread. */
STRATA_API const char *strata_error_message(void);

/* Propagate a failure from an expression that yields a strata_status. */
#define STRATA_TRY(expr)                                                                           \
    do {                                                                                           \
        int strata_try_rc_ = (expr);                                                               \
        if (strata_try_rc_ != STRATA_OK)                                                           \
            return strata_try_rc_;                                                                 \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* STRATA_STATUS_H */
