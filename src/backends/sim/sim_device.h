/* backends/sim/sim_device.h - one simulated device and its native runs.
 *
 * Owns: the state of one open sim device (memory, programs, kernel module,
 * simulated cores, injection knobs, the live native runs) and the layout of
 * a sim native run inside caller-owned storage.
 * Must never: keep state outside a device (no globals: every device is
 * independent; the one exception is the test-only allocation hook of the
 * library's copy of util/alloc.c), or spin: idle cores and waiters park.
 *
 * Lock order: sim_device.mu, then sim_memory.mu (never the reverse).
 */
#ifndef STRATA_SIM_DEVICE_H
#define STRATA_SIM_DEVICE_H

#include <pthread.h>
#include <stdint.h>

#include "sim_completion.h"
#include "sim_memory.h"
#include "strata/backend.h"

#define SIM_MAX_PROGRAMS 64
#define SIM_MAX_CORES 64
#define SIM_DEFAULT_CORES 2
#define SIM_RUN_MAGIC 0x314e55524d495353ull /* "SSIMRUN1" */

/* Which phase an injected fault hits (values match strata_sim_fault). */
typedef enum sim_fault {
    SIM_FAULT_NONE = 0,
    SIM_FAULT_PREPARE,
    SIM_FAULT_LAUNCH,
    SIM_FAULT_POLL,
    SIM_FAULT_WAIT,
    SIM_FAULT_FINALIZE,
    SIM_FAULT_KERNEL
} sim_fault;

typedef struct sim_injection {
    uint64_t prepare_delay_ns;
    uint64_t kernel_delay_ns;
    sim_fault fault;
    int32_t fault_code;
    uint32_t fault_run; /* 0 = every run, N = the N-th prepared run */
    char fault_kernel[STRATA_PROGRAM_NAME_MAX];
    uint32_t fault_block;
    int refuse_overlap;
} sim_injection;

typedef struct sim_program {
    int in_use;
    char name[STRATA_PROGRAM_NAME_MAX];
    strata_program_fn fn;
    void *user;
    uint32_t live_runs; /* prepared or executing runs of this program */
} sim_program;

/* One kernel launch a program enqueued. */
typedef struct sim_launch {
    strata_kernel_fn fn;
    char kernel[STRATA_PROGRAM_NAME_MAX];
    uint32_t blocks;
    uint32_t nargs;
    uint64_t args[STRATA_KERNEL_MAX_ARGS];
} sim_launch;

typedef enum sim_run_phase { SIM_RUN_PREPARED = 1, SIM_RUN_RUNNING = 2 } sim_run_phase;

/* A native run as it lies in strata_native_run storage. The magic is
 * written last at prepare and cleared at finalize. */
typedef struct sim_run {
    _Atomic uint64_t magic;
    struct sim_device *dev;
    uint64_t epoch;
    strata_native_run_desc desc;
    uint32_t program;
    sim_run_phase phase;
    char program_name[STRATA_PROGRAM_NAME_MAX];
    /* the fault this run carries (chosen at prepare from the knobs) */
    sim_fault fault;
    int32_t fault_code;
    uint32_t fault_block;
    char fault_kernel[STRATA_PROGRAM_NAME_MAX];
    uint64_t kernel_delay_ns;
    sim_launch *launches;
    uint32_t nlaunches;
    uint32_t cap;
    sim_completion done;
    /* execution progress: protected by dev->mu */
    uint32_t cur;            /* launch being executed */
    uint32_t next_block;     /* next block to hand out */
    uint32_t blocks_done;    /* blocks of `cur` finished */
    uint32_t blocks_running; /* blocks of `cur` on a core now */
    int aborting;            /* a block failed: hand out no more */
    uint64_t launch_start_ns;
    int32_t device_rc;                       /* first block failure */
    char device_err[STRATA_BACKEND_MSG_MAX]; /* its description */
} sim_run;

_Static_assert(sizeof(sim_run) <= STRATA_NATIVE_RUN_BYTES, "sim_run must fit the run storage");

typedef struct sim_device {
    int device_id;
    uint32_t ncores;
    void *kernel_lib; /* dlopen handle of the kernel module, or NULL */
    char kernel_path[256];
    sim_memory mem;
    /* mu protects programs, live, nlive, owner, job, inj, prepared_runs and
     * stop; cores and finalizers take it briefly, never across a kernel. */
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* idle cores park here until a block is available */
    sim_program programs[SIM_MAX_PROGRAMS];
    sim_run *live[STRATA_BACKEND_MAX_DEPTH]; /* prepared or executing, not finalized */
    uint32_t nlive;
    sim_run *owner; /* launched and not yet finalized: owns execution */
    sim_run *job;   /* the owner while its blocks are being executed */
    sim_injection inj;
    uint64_t prepared_runs;
    int stop;
    pthread_t cores[SIM_MAX_CORES];
    uint32_t started;
} sim_device;

/* Fill m (if any) and return rc. */
int sim_fail(strata_backend_msg *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* sim_device.c */
int sim_open(const strata_backend_open_params *p, void **dev, strata_backend_msg *m);
int sim_close(void *dev, strata_backend_msg *m);
int sim_configure(void *dev, const char *key, const char *value, strata_backend_msg *m);
int sim_mem_alloc(void *dev, uint64_t nbytes, void **addr, strata_backend_msg *m);
int sim_mem_free(void *dev, void *addr, strata_backend_msg *m);
int sim_copy_to(void *dev, void *dst, const void *src, uint64_t n, strata_backend_msg *m);
int sim_copy_from(void *dev, void *dst, const void *src, uint64_t n, strata_backend_msg *m);
uint64_t sim_committed(void *dev);
int sim_register_program(void *dev, const strata_backend_program *p, uint32_t *id,
                         strata_backend_msg *m);
int sim_unregister_program(void *dev, uint32_t id, strata_backend_msg *m);
/* Wait until a CLOCK_MONOTONIC deadline, ending on time: sleep (without
 * timer slack) to SIM_SPIN_TAIL_NS before it, spin the rest (sim_device.c). */
void sim_sleep_until_ns(uint64_t deadline_ns);
/* dev->mu held: start the cores not yet running (at the first launch, not
 * at open: see sim_open). 0, or a backend error (message in m). */
int sim_device_start_cores(sim_device *dev, strata_backend_msg *m);
/* Hand the launched run's blocks to the cores (mu held). */
void sim_device_start_job(sim_device *dev, sim_run *run);

/* sim_run.c */
int sim_prepare(void *dev, strata_native_run *run, uint32_t program, const strata_task_view *args,
                const strata_call_config *cfg, const strata_native_run_desc *desc,
                strata_backend_msg *m);
int sim_launch_run(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);
int sim_poll(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);
int sim_wait(void *dev, strata_native_run *run, uint64_t epoch, uint64_t deadline_ns,
             strata_backend_msg *m);
int sim_finalize(void *dev, strata_native_run *run, uint64_t epoch, strata_backend_msg *m);

#endif
