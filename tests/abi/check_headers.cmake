# tests/abi/check_headers.cmake - every public header compiles on its own as
# C11 and as C++11, and a program including <strata/strata.h> links against
# libstrata and runs in both languages.
#
# Owns: the list of languages and warning flags public headers must pass
# (-pedantic -Wall -Wextra -Werror), the self-containedness check (one
# translation unit per header that includes nothing else), and running the
# layering rules of header_layering.c.
# Must never: stop at the first failure (every header and language is tried,
# then all failures are reported) or compile with the project's own flags (a
# user's program has none of them).
#
# Run with cmake -P and: CC, CXX (may be empty: then only C is checked),
# INCLUDE_DIR, LIBSTRATA, PROGRAM (header_program.c), LAYERING
# (header_layering.c: which header may include which), WORK_DIR, and
# optionally SAN_FLAGS (the sanitizer flags libstrata was built with).
cmake_minimum_required(VERSION 3.20)
foreach(v CC INCLUDE_DIR LIBSTRATA PROGRAM LAYERING WORK_DIR)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "check_headers.cmake: ${v} is not set")
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})
separate_arguments(san UNIX_COMMAND "${SAN_FLAGS}")
set(warn -pedantic -Wall -Wextra -Werror)
set(c_cmd ${CC} -x c -std=c11 ${warn})
set(langs c)
if(CXX)
  set(cxx_cmd ${CXX} -x c++ -std=c++11 ${warn})
  list(APPEND langs cxx)
endif()

set(failures "")
# try(LABEL COMMAND...): runs the command, records LABEL and its output on failure.
function(try label)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message("---- ${label} failed:\n${out}${err}")
    set(failures "${failures};${label}" PARENT_SCOPE)
  endif()
endfunction()

file(GLOB headers ${INCLUDE_DIR}/strata/*.h)
list(LENGTH headers nheaders)
foreach(h ${headers})
  get_filename_component(name ${h} NAME_WE)
  set(src ${WORK_DIR}/alone_${name}.c)
  file(WRITE ${src} "#include <strata/${name}.h>\n#include <strata/${name}.h> /* include guard */\nint main(void) { return 0; }\n")
  foreach(lang ${langs})
    try("${name}.h alone (${lang})" ${${lang}_cmd} -I${INCLUDE_DIR} -c ${src}
        -o ${WORK_DIR}/alone_${name}_${lang}.o)
  endforeach()
endforeach()

foreach(rule CHECK_BACKEND_H CHECK_STRATA_H)
  foreach(lang ${langs})
    try("layering ${rule} (${lang})" ${${lang}_cmd} -D${rule} -I${INCLUDE_DIR} -c ${LAYERING}
        -o ${WORK_DIR}/layering_${rule}_${lang}.o)
  endforeach()
endforeach()

get_filename_component(libdir ${LIBSTRATA} DIRECTORY)
foreach(lang ${langs})
  set(exe ${WORK_DIR}/header_program_${lang})
  file(REMOVE ${exe})
  try("header_program (${lang}) build" ${${lang}_cmd} ${san} -I${INCLUDE_DIR} ${PROGRAM}
      -x none ${LIBSTRATA} -Wl,-rpath,${libdir} -o ${exe})
  if(EXISTS ${exe})
    try("header_program (${lang}) run" ${exe})
  endif()
endforeach()

list(REMOVE_ITEM failures "")
list(JOIN langs " and " langs)
if(failures)
  list(JOIN failures "\n  " t)
  message(FATAL_ERROR "public headers failed:\n  ${t}")
endif()
message(STATUS "${nheaders} public headers compile alone as ${langs}; header_program runs as ${langs}")
