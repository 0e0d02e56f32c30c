# SPDX-License-Identifier: MIT
# Installs the built library into a scratch prefix and builds and runs tests/cmake/consumer against
# it with find_package(redlease); the consumer sets no C++ standard (redlease's target brings C++20).
# Script mode: -DBUILD=<build dir> -DSRC=<consumer dir> -DWORK=<dir> -DVERSION=<project version>
# [-DCXX=<compiler>] [-DSHARED=<bool>: the build installs redlease_shared too]
# [-DPROMETHEUS=<bool>: the build installs redlease::prometheus too]
include(${CMAKE_CURRENT_LIST_DIR}/consumer_common.cmake)
redlease_install_into_work()
set(compiler)
if(CXX)
  set(compiler -DCMAKE_CXX_COMPILER=${CXX})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/build -DCMAKE_PREFIX_PATH=${WORK}/prefix ${compiler}
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
redlease_run_consumer(${WORK}/build/consumer)
# An installed static library comes with its shared twin, redlease::redlease_shared.
if(EXISTS ${WORK}/build/consumer_shared)
  redlease_run_consumer(${WORK}/build/consumer_shared)
elseif(SHARED)
  message(FATAL_ERROR "find_package(redlease) gave no redlease::redlease_shared")
endif()
if(EXISTS ${WORK}/build/consumer_prometheus)
  redlease_run_consumer(${WORK}/build/consumer_prometheus)
elseif(PROMETHEUS)
  message(FATAL_ERROR "find_package(redlease) gave no redlease::prometheus")
endif()
