# SPDX-License-Identifier: MIT
# Installs the built library into a scratch prefix, then builds tests/cmake/consumer/main.cpp with the
# compiler alone and the flags of the installed redlease.pc:
#   c++ -std=c++20 main.cpp $(pkg-config --cflags --libs [--static] redlease)
# (--static for a static library) with PKG_CONFIG_PATH pointing into the prefix, and runs it.
# Script mode: -DBUILD=<build dir> -DSRC=<consumer dir> -DWORK=<dir> -DVERSION=<project version>
# -DCXX=<compiler> -DPKG_CONFIG=<pkg-config> -DLIBDIR=<lib dir under the prefix> -DSTATIC=<bool>
include(${CMAKE_CURRENT_LIST_DIR}/consumer_common.cmake)
redlease_install_into_work()
set(ENV{PKG_CONFIG_PATH} ${WORK}/prefix/${LIBDIR}/pkgconfig)
set(static)
if(STATIC)
  set(static --static)
endif()
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs ${static} redlease
  RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config failed: ${rc} ${err}")
endif()
message(STATUS "pkg-config ${static} redlease: ${flags}")
separate_arguments(flags UNIX_COMMAND "${flags}")
execute_process(COMMAND ${CXX} -std=c++20 ${SRC}/main.cpp ${flags} -o ${WORK}/consumer
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}\n${err}")
endif()
redlease_run_consumer(${WORK}/consumer)
