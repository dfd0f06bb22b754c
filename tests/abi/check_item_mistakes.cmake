# tests/abi/check_item_mistakes.cmake - the argument item macros refuse, at
# compile time, the mistakes C can see (tests/abi/item_mistakes.c): case 0
# compiles, cases 1..6 each fail to compile, naming the offending selection
# or conversion.
#
# Owns: the expected outcome of each case. Must never: accept a case that
# fails for another reason (a missing header fails case 0 first), or compile
# with the project's flags (a user's program has none of them; -Werror stands
# for "a user who reads warnings").
#
# Run with cmake -P and: CC, INCLUDE_DIR, SOURCE (item_mistakes.c).
cmake_minimum_required(VERSION 3.20)
set(failures "")
foreach(mistake RANGE 0 6)
  execute_process(
    COMMAND ${CC} -std=c11 -Wall -Wextra -Werror -fsyntax-only -I${INCLUDE_DIR}
            -DMISTAKE=${mistake} ${SOURCE}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(mistake EQUAL 0)
    if(NOT rc EQUAL 0)
      list(APPEND failures "case 0 (correct use) does not compile:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    list(APPEND failures "mistake ${mistake} compiled")
  # gcc: "... in _Generic ..." / "discards 'const' qualifier"; clang: "not
  # compatible with any generic association type" / "discards qualifiers".
  elseif(NOT err MATCHES "error: [^\n]*(_Generic|generic association|discards [^\n]*qualifier)")
    list(APPEND failures "mistake ${mistake} failed for an unexpected reason:\n${err}")
  else()
    message(STATUS "mistake ${mistake}: refused at compile time")
  endif()
endforeach()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
