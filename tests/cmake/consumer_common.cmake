# SPDX-License-Identifier: MIT
# The steps the install consumer tests share (consumer_test.cmake, pkgconfig_consumer_test.cmake).
# They read BUILD (the build dir), WORK (a scratch dir) and VERSION (the project version).

# Empties WORK and installs BUILD into WORK/prefix.
function(redlease_install_into_work)
  file(REMOVE_RECURSE ${WORK})
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "install failed: ${rc}")
  endif()
endfunction()

# Runs the consumer program `exe`, which must succeed and print "redlease VERSION ...".
function(redlease_run_consumer exe)
  execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "consumer: ${out}")
  if(rc)
    message(FATAL_ERROR "the consumer failed: ${rc}")
  endif()
  if(NOT out MATCHES "^redlease ${VERSION} ")
    message(FATAL_ERROR "the consumer printed \"${out}\", expected version ${VERSION}")
  endif()
endfunction()
