/* util/state_machine.h - the one way strata writes a state machine.
 *
 * Owns: the rule type of a transition table (the legal source states as a
 * bit mask, the target state, the transition's name), the check that a
 * named transition may fire from the current state, and the report of an
 * illegal one. Every state machine in the library (task slots, runs, the
 * worker, lane runs, native run slots, the chip worker) is an enum of
 * states, an enum of named transitions and a table of these rules; code
 * moves a machine only by naming a transition, never by assigning a state.
 * Must never: decide when a transition happens (the machine's owner does),
 * or check anything in Release builds (the check is an invariant, not input
 * validation; it compiles away with ST_ASSERT).
 */
#ifndef STRATA_UTIL_STATE_MACHINE_H
#define STRATA_UTIL_STATE_MACHINE_H

#include <stdint.h>

#define ST_SM_BIT(state) (1u << (state))

typedef struct st_sm_rule {
    uint32_t from_mask; /* legal source states, ST_SM_BIT(state) each */
    uint32_t to;        /* the target state */
    const char *name;   /* for the report of an illegal transition */
} st_sm_rule;

/* A machine: its name, the names of its states and its rules. */
typedef struct st_sm {
    const char *name;
    const char *const *state_names;
    uint32_t nstates;
    const st_sm_rule *rules;
    uint32_t nrules;
} st_sm;

/* 1 if transition t may fire from state `from`. */
static inline int st_sm_allows(const st_sm *m, uint32_t from, uint32_t t) {
    return t < m->nrules && from < 32 && (m->rules[t].from_mask & ST_SM_BIT(from)) != 0;
}

/* Report an illegal transition and abort (debug builds only). */
void st_sm_illegal(const st_sm *m, uint32_t from, uint32_t t, const char *what);

/* The state transition t leads to from `from`, checked in debug builds;
 * `what` names the object in the report (e.g. "slot 7"). */
static inline uint32_t st_sm_next(const st_sm *m, uint32_t from, uint32_t t, const char *what) {
#ifdef STRATA_DEBUG_ASSERT
    if (!st_sm_allows(m, from, t))
        st_sm_illegal(m, from, t, what);
#else
    (void)from, (void)what;
#endif
    return m->rules[t].to;
}

#endif
