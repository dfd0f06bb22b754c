/* tests/system/test_run_isolation_process.c - test_run_isolation.c's scenarios with
 * process-hosted sub workers (sub_mode = STRATA_HOST_PROCESS): the same
 * source, built a second time. Forks: not a concurrency (TSan) test.
 */
#define TS_SUB_MODE STRATA_HOST_PROCESS
#include "test_run_isolation.c"
