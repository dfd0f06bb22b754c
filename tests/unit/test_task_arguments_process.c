/* tests/unit/test_task_arguments_process.c - test_task_arguments.c's cases
 * with process-hosted sub workers (sub_mode = STRATA_HOST_PROCESS): every
 * argument kind, 64 tensors and the typed-read failures cross the mailbox
 * (ipc/wire_args.c) to a forked child. Forks: not a concurrency test.
 */
#define TS_SUB_MODE STRATA_HOST_PROCESS
#include "test_task_arguments.c"
