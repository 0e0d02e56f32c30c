# SPDX-License-Identifier: MIT
# Installs the built library into a scratch prefix, then builds tests/cmake/consumer/main.cpp with the
# compiler alone and the flags of the installed redlease.pc, as the README says, both ways:
#   c++ -std=c++20 main.cpp $(pkg-config --cflags --libs redlease)            the shared library
#   c++ -std=c++20 main.cpp $(pkg-config --cflags --libs --static redlease)   the static library, with
#                                  -l:libredlease.a in place of -lredlease (which picks the shared one)
# with PKG_CONFIG_PATH pointing into the prefix, and runs each. The first must use libredlease.so
# (before, only the static library was installed, and the line failed without --static), the
# second must not.
# Script mode: -DBUILD=<build dir> -DSRC=<consumer dir> -DWORK=<dir> -DVERSION=<project version>
# -DCXX=<compiler> -DPKG_CONFIG=<pkg-config> -DLIBDIR=<lib dir under the prefix> -DSHARED=<bool>
# (SHARED: the build installs a shared library, its own or the twin of its static one)
cmake_minimum_required(VERSION 3.25)  # script mode: today's policies (if() does not dereference "static")
include(${CMAKE_CURRENT_LIST_DIR}/consumer_common.cmake)
redlease_install_into_work()
set(ENV{PKG_CONFIG_PATH} ${WORK}/prefix/${LIBDIR}/pkgconfig)
foreach(mode shared static)
  set(static_flag)
  set(rpath)
  if(mode STREQUAL "static")
    set(static_flag --static)
  else()
    # The scratch prefix is no directory the loader searches.
    set(rpath -Wl,-rpath,${WORK}/prefix/${LIBDIR})
  endif()
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${static_flag} redlease
    RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config ${static_flag} failed: ${rc} ${err}")
  endif()
  message(STATUS "pkg-config ${static_flag} redlease: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  if(mode STREQUAL "static")
    list(TRANSFORM flags REPLACE "^-lredlease$" "-l:libredlease.a")
  endif()
  execute_process(COMMAND ${CXX} -std=c++20 ${SRC}/main.cpp ${flags} ${rpath} -o ${WORK}/consumer-${mode}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "building the consumer with pkg-config ${static_flag} failed: ${rc}\n${err}")
  endif()
  redlease_run_consumer(${WORK}/consumer-${mode})
  file(GET_RUNTIME_DEPENDENCIES EXECUTABLES ${WORK}/consumer-${mode} RESOLVED_DEPENDENCIES_VAR deps
    DIRECTORIES ${WORK}/prefix/${LIBDIR})
  if(mode STREQUAL "shared" AND SHARED AND NOT deps MATCHES "libredlease\\.so")
    message(FATAL_ERROR "the consumer built without --static does not use libredlease.so: ${deps}")
  elseif(mode STREQUAL "static" AND deps MATCHES "libredlease\\.so")
    message(FATAL_ERROR "the consumer built with libredlease.a uses libredlease.so: ${deps}")
  endif()
endforeach()
