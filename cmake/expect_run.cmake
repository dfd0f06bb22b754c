# cmake/expect_run.cmake - a CTest check of a program's command line: runs it
# once and compares its exit status, stdout and stderr with what is expected.
#
# Owns: nothing but that comparison (CTest itself can only tell zero from
# non-zero, and a usage error must exit 2, not merely fail).
# Must never: pass when the status differs or an expected pattern is absent.
#
# cmake -DPROGRAM=path -DARGS="a b" -DSTATUS=N [-DSTDOUT=regex] [-DSTDERR=regex]
#       -P expect_run.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND "${PROGRAM}" ${args}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(what "${PROGRAM} ${ARGS}")
if(NOT status STREQUAL "${STATUS}")
  message(FATAL_ERROR "${what}: exit status ${status}, expected ${STATUS}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
  message(FATAL_ERROR "${what}: stdout does not match '${STDOUT}':\n${out}")
endif()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  message(FATAL_ERROR "${what}: stderr does not match '${STDERR}':\n${err}")
endif()
