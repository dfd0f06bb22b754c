/* util/state_machine.c - reporting an illegal transition.
 *
 * Owns: the one message every state machine's illegal transition prints.
 * Must never: return normally from a report in a debug build.
 */
#include "util/state_machine.h"

#include "util/assert.h"

static const char *state_name(const st_sm *m, uint32_t s) {
    return s < m->nstates && m->state_names && m->state_names[s] ? m->state_names[s] : "?";
}

void st_sm_illegal(const st_sm *m, uint32_t from, uint32_t t, const char *what) {
    ST_ASSERT(0, "%s %s: transition %s from state %s", m->name, what ? what : "",
              t < m->nrules && m->rules[t].name ? m->rules[t].name : "?", state_name(m, from));
    (void)m, (void)from, (void)t, (void)what, (void)state_name;
}
