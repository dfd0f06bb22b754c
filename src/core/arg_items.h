/* core/arg_items.h - one argument item into a builder, the hot case inline.
 *
 * Owns: st_add_item, which copies a plain tensor item (the item almost every
 * task has) in place and hands every other item, and every refusal, to
 * core/arg_items.c. Inline because a submit of the one-call form makes one
 * such call per argument: out of line they cost it more than the
 * argument-list form's adds.
 * Must never: accept an item st_add_item_slow would refuse.
 */
#ifndef STRATA_CORE_ARG_ITEMS_H
#define STRATA_CORE_ARG_ITEMS_H

#include <stddef.h>

#include "strata/args.h"
#include "strata/status.h"

/* Item `pos` into builder a (one member), any kind; errors name pos. */
int st_add_item_slow(strata_task_args *a, const strata_arg *it, size_t pos, const char *what);

static inline int st_add_item(strata_task_args *a, const strata_arg *it, size_t pos,
                              const char *what) {
    if (it->kind == STRATA_ARG_TENSOR && it->v.tensor && it->tag <= STRATA_NO_DEP &&
        a->ntensors < STRATA_MAX_TENSORS) {
        a->tensors[a->ntensors] = *it->v.tensor;
        a->tags[a->ntensors++] = it->tag;
        return STRATA_OK;
    }
    return st_add_item_slow(a, it, pos, what);
}

#endif
