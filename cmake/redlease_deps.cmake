# SPDX-License-Identifier: MIT
# Dependencies, all from Debian packages (scripts/install-deps.sh installs them).
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)

# Standalone Asio ships no CMake package: a find_path-based INTERFACE target.
if(NOT TARGET redlease::asio)
  find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
  add_library(redlease_asio INTERFACE)
  add_library(redlease::asio ALIAS redlease_asio)
  target_include_directories(redlease_asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
  # ASIO_DISABLE_STD_ALIGNED_ALLOC: Asio picks aligned_alloc or operator new depending on which headers
# came first in a translation unit; fixing the choice keeps the library and its users' inline Asio
# code allocating and freeing the same way (an ODR violation ASan reports otherwise).
target_compile_definitions(redlease_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED ASIO_DISABLE_STD_ALIGNED_ALLOC)
endif()
