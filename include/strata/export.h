/* strata/export.h - the marker that puts a function into libstrata's
 * public interface, and the compiler attributes public declarations use.
 *
 * Owns: STRATA_API and STRATA_PRINTF_LIKE. libstrata is built with
 * -fvisibility=hidden, so a function is exported from libstrata.so exactly
 * when its public declaration carries STRATA_API (tests/abi/check_exports.cmake
 * checks both directions).
 * Must never: include another header or declare anything; every public
 * header that declares a libstrata function includes it.
 */
#ifndef STRATA_EXPORT_H
#define STRATA_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define STRATA_API __attribute__((visibility("default")))
#define STRATA_PRINTF_LIKE(fmt_index, first_arg)                                                   \
    __attribute__((format(printf, fmt_index, first_arg)))
#else
#define STRATA_API
#define STRATA_PRINTF_LIKE(fmt_index, first_arg)
#endif

#endif /* STRATA_EXPORT_H */
