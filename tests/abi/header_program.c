/* tests/abi/header_program.c - a program that includes <strata/strata.h>
 * and is built both as C11 and as C++11 by check_headers.cmake.
 *
 * Owns: proof that a C++ program links against libstrata through the public
 * headers (extern "C" linkage, exported names) and that the inline helpers
 * compile in both languages.
 * Must never: use C-only syntax (designated initializers, implicit void *
 * conversions); it is compiled as C++ too.
 */
#include <stdio.h>
#include <string.h>

#include <strata/strata.h>

static int check(int ok, const char *what) {
    if (!ok)
        printf("FAILED: %s\n", what);
    return ok ? 0 : 1;
}

int main(void) {
    int failures = 0;
    failures += check(strcmp(strata_status_name(STRATA_EINVAL), "STRATA_EINVAL") == 0,
                      "strata_status_name");
    failures += check(strata_dtype_size(STRATA_F32) == 4, "strata_dtype_size");

    strata_worker_config cfg;
    strata_worker_config_init(&cfg);
    cfg.sub_workers = 0;
    strata_worker *w = NULL;
    failures += check(strata_worker_create(&cfg, &w) == STRATA_OK, "strata_worker_create");
    strata_buffer *b = NULL;
    failures += check(strata_buffer_create(w, 64, &b) == STRATA_OK, "strata_buffer_create");
    int64_t shape[1] = {16};
    strata_tensor t;
    failures += check(strata_tensor_contiguous(b, STRATA_F32, 1, shape, &t) == STRATA_OK,
                      "strata_tensor_contiguous");
    failures += check(strata_tensor_data(&t) == strata_buffer_data(b), "strata_tensor_data");
    strata_task_args a;
    strata_args_init(&a);
    failures += check(strata_args_add_tensor(&a, &t, STRATA_IN) == STRATA_OK, "add_tensor");
    strata_task_view v = strata_args_view(&a);
    strata_task_view copy = v; /* a view is copied by assignment */
    failures += check(copy.ntensors == 1 && copy.tensors == a.tensors, "strata_args_view");
    failures += check(strata_args_data(&copy, 0) == strata_buffer_data(b), "strata_args_data");
    failures +=
        check(strata_program_arg_ptr(&copy, 0) == (uint64_t)(uintptr_t)strata_buffer_data(b),
              "strata_program_arg_ptr");
    strata_buffer_destroy(b);
    strata_worker_destroy(w);
    printf("%s\n", failures ? "header program failed" : "header program ok");
    return failures ? 1 : 0;
}
