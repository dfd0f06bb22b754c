/* util/version.c - the library's version at run time.
 *
 * Owns: strata_version(), so a program (the Python module) built against
 * one set of headers can refuse a library of another version.
 * Must never: differ from the STRATA_VERSION_* macros it is compiled with.
 */
#include "strata/strata.h"

unsigned strata_version(void) {
    return ((unsigned)STRATA_VERSION_MAJOR << 16) | ((unsigned)STRATA_VERSION_MINOR << 8) |
           (unsigned)STRATA_VERSION_PATCH;
}
