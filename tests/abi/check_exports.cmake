# tests/abi/check_exports.cmake - what libstrata.so and libstrata_sim.so
# export, against what the public headers declare.
#
# Owns: the check that the dynamic symbol table of libstrata.so is exactly the
# set of functions declared (not static inline) in include/strata/*.h, and
# that the sim backend exports nothing but the backend entry point named by
# STRATA_BACKEND_ENTRY_SYMBOL in backend.h.
# Must never: keep a hand-written list of names. The declared set comes from
# the compiler itself (GCC's -aux-info over a file including every public
# header), so a function added to a header without STRATA_API, or an internal
# symbol that leaks out, fails here.
#
# Run with cmake -P and: CC (GCC), NM, INCLUDE_DIR (the directory holding
# strata/), LIBSTRATA, LIBSIM, WORK_DIR.
cmake_minimum_required(VERSION 3.20)
foreach(v CC NM INCLUDE_DIR LIBSTRATA LIBSIM WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_exports.cmake: ${v} is not set")
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})
file(REAL_PATH ${INCLUDE_DIR}/strata public_dir)

# ---- declared: every non-static function of every public header ------------
file(GLOB headers ${public_dir}/*.h)
set(tu "")
foreach(h ${headers})
  get_filename_component(name ${h} NAME)
  string(APPEND tu "#include <strata/${name}>\n")
endforeach()
file(WRITE ${WORK_DIR}/all_headers.c "${tu}")
file(REMOVE ${WORK_DIR}/all_headers.aux)
execute_process(
  COMMAND ${CC} -std=c11 -I${INCLUDE_DIR} -fsyntax-only -aux-info ${WORK_DIR}/all_headers.aux
          ${WORK_DIR}/all_headers.c
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compiling the public headers failed:\n${err}")
endif()
file(STRINGS ${WORK_DIR}/all_headers.aux aux_lines)
set(declared "")
foreach(line IN LISTS aux_lines)
  # /* FILE:LINE:FLAGS */ extern RET NAME (PARAMS);
  if(NOT line MATCHES "^/\\* ([^:]+):[0-9]+:[A-Za-z]+ \\*/ (.*)$")
    continue()
  endif()
  set(file ${CMAKE_MATCH_1})
  set(decl ${CMAKE_MATCH_2})
  get_filename_component(dir ${file} DIRECTORY)
  file(REAL_PATH ${dir} dir)
  if(NOT dir STREQUAL public_dir OR decl MATCHES "^static ")
    continue() # a system header's function, or an inline helper (never exported)
  endif()
  if(NOT decl MATCHES "([A-Za-z_][A-Za-z0-9_]*) \\(")
    message(FATAL_ERROR "cannot find the function name in: ${line}")
  endif()
  list(APPEND declared ${CMAKE_MATCH_1})
endforeach()
list(REMOVE_DUPLICATES declared)
list(LENGTH declared ndeclared)
if(ndeclared LESS 10)
  message(FATAL_ERROR "only ${ndeclared} public functions found in ${public_dir}: the "
                      "-aux-info output was not understood")
endif()

# ---- exported: defined dynamic symbols of a shared object --------------------
function(exported_symbols lib out)
  execute_process(COMMAND ${NM} -D --defined-only ${lib} RESULT_VARIABLE rc
                  OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D --defined-only ${lib} failed:\n${err}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(l IN LISTS lines)
    if(l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^@ ]+)")
      list(APPEND names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  # A coverage build (STRATA_COVERAGE) links GCC's gcov runtime into every
  # shared object, and it exports a few names of its own: not ours.
  list(FILTER names EXCLUDE REGEX "^(__gcov_.*|mangle_path)$")
  set(${out} ${names} PARENT_SCOPE)
endfunction()

set(failed 0)
exported_symbols(${LIBSTRATA} exported)
set(extra ${exported})
list(REMOVE_ITEM extra ${declared})
set(missing ${declared})
if(exported)
  list(REMOVE_ITEM missing ${exported})
endif()
if(extra)
  list(JOIN extra "\n  " t)
  message(SEND_ERROR "libstrata.so exports symbols no public header declares:\n  ${t}")
  set(failed 1)
endif()
if(missing)
  list(JOIN missing "\n  " t)
  message(SEND_ERROR "public functions libstrata.so does not export (missing STRATA_API?):\n  ${t}")
  set(failed 1)
endif()

file(STRINGS ${public_dir}/backend.h entry_line REGEX "#define STRATA_BACKEND_ENTRY_SYMBOL \"")
if(NOT entry_line MATCHES "\"([A-Za-z_][A-Za-z0-9_]*)\"")
  message(FATAL_ERROR "STRATA_BACKEND_ENTRY_SYMBOL not found in backend.h")
endif()
set(entry ${CMAKE_MATCH_1})
exported_symbols(${LIBSIM} sim_exported)
if(NOT sim_exported STREQUAL entry)
  list(JOIN sim_exported " " t)
  message(SEND_ERROR "libstrata_sim.so must export only ${entry}; it exports: ${t}")
  set(failed 1)
endif()

if(failed)
  message(FATAL_ERROR "export check failed")
endif()
message(STATUS "libstrata.so exports exactly the ${ndeclared} public functions; "
               "libstrata_sim.so exports only ${entry}")
