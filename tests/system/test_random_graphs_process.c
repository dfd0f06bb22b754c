/* tests/system/test_random_graphs_process.c - test_random_graphs.c's scenarios with
 * process-hosted sub workers (sub_mode = STRATA_HOST_PROCESS): the same
 * source, built a second time. Forks: not a concurrency (TSan) test.
 */
#define TS_SUB_MODE STRATA_HOST_PROCESS
#include "test_random_graphs.c"
