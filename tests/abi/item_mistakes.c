/* tests/abi/item_mistakes.c - argument item mistakes C can see, one per
 * MISTAKE value, for tests/abi/check_item_mistakes.cmake: MISTAKE 0 is the
 * correct use (it must compile), every other one must not.
 *
 * Owns: the list of mistakes the item macros (strata/args.h) turn into
 * compile errors. Must never: be built into a program (it is only compiled,
 * with -fsyntax-only).
 */
#include <strata/strata.h>

int submit(strata_orch *o, strata_callable fn, strata_tensor t, const strata_tensor ct);
int submit(strata_orch *o, strata_callable fn, strata_tensor t, const strata_tensor ct) {
    int n = 3;
    (void)n; /* each case uses only some of these: none may fail for that */
    (void)t;
    (void)ct;
#if MISTAKE == 0
    return strata_orch_sub(o, fn, STRATA_IN(ct), STRATA_INOUT(t), STRATA_I64(n), STRATA_F64(n),
                           STRATA_F32(1.5), STRATA_U64(7u), STRATA_BYTES(&n, sizeof n));
#elif MISTAKE == 1 /* a tensor where a scalar goes */
    return strata_orch_sub(o, fn, STRATA_I64(t));
#elif MISTAKE == 2 /* a tensor where a floating-point scalar goes */
    return strata_orch_sub(o, fn, STRATA_F64(t));
#elif MISTAKE == 3 /* a scalar where a tensor goes */
    return strata_orch_sub(o, fn, STRATA_IN(n));
#elif MISTAKE == 4 /* a pointer to a tensor where a tensor goes */
    strata_tensor *p = &t;
    return strata_orch_sub(o, fn, STRATA_INOUT(p));
#elif MISTAKE == 5 /* a pointer where an integer scalar goes */
    return strata_orch_sub(o, fn, STRATA_U64(&n));
#elif MISTAKE == 6 /* a written tensor that is const */
    return strata_orch_sub(o, fn, STRATA_OUT(ct));
#endif
}
