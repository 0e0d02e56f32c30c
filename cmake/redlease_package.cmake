# SPDX-License-Identifier: MIT
# Debian packages: `cpack -G DEB` in a build directory (included from CMakeLists.txt with the install
# rules, REDLEASE_INSTALL). Two packages, from the install rules' components:
#   redlease      (runtime) the tool, its man page and shell completion, the shared library
#   redlease-dev  (dev)     the headers, the static library and the shared one's link name, the CMake
#                           package and the pkg-config file; depends on redlease of the same version
#                           and on the Debian packages the headers and the static library need
#                           (prometheus-cpp-dev too when built with REDLEASE_WITH_PROMETHEUS)
# Each has its copyright file (packaging/copyright) under /usr/share/doc/<package>/.
# Files go under /usr (CPack's DEB default; the CMake package and the pkg-config file find their
# paths from where they are, so the build's install prefix does not matter); the libraries' directory
# is the build's CMAKE_INSTALL_LIBDIR: configure with -DCMAKE_INSTALL_PREFIX=/usr for Debian's multiarch
# directory (lib/x86_64-linux-gnu), else lib/. The runtime dependencies come from dpkg-shlibdeps
# (Debian's dpkg-dev) when it is there, else from the list below, right for Debian 12.
set(REDLEASE_PACKAGE_MAINTAINER "redlease maintainers <maintainers@users.noreply.a-seed-91c7d046.example>"
  CACHE STRING "The Maintainer field of the Debian packages")
set(REDLEASE_PACKAGE_RELEASE 1 CACHE STRING "The Debian revision of the packages (the N of VERSION-N)")

set(CPACK_PACKAGE_NAME redlease)
set(CPACK_PACKAGE_VENDOR redlease)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_CONTACT "${REDLEASE_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB)
# Executables and shared libraries stripped (a static library is only indexed).
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_COMPONENT_DEV_DEPENDS runtime)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${REDLEASE_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)  # redlease-dev: Depends: redlease (= VERSION-N)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME redlease)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS redis-server)
# The shlibs file (other packages' dpkg-shlibdeps then find libredlease.so.MAJOR.MINOR here; only
# the runtime package has a shared object). ldconfig runs on install and removal.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "The redlease command-line tool and the shared library.
`redlease run NAME -- COMMAND` runs a command while holding a Redis lock, kept alive by a watchdog
and released when the command exits; the command is stopped if the lock is lost. `status`, `unlock`
and `doctor` show locks, break them and check a deployment. The locks are Redisson's (reentrant,
fair, read-write), a SET NX mutex, or RedLock over several masters.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME redlease-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The public headers include Asio's; the static library needs OpenSSL's (find_package(redlease) and
# `pkg-config --static` ask for them).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libasio-dev, libssl-dev")
# Built with the Prometheus exposition: redlease::prometheus and its header need prometheus-cpp's.
if(TARGET redlease_prometheus)
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", prometheus-cpp-dev")
endif()
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "The development files of redlease, a C++20 distributed-lock library on Redis.
Headers, the static library and the shared one's link name, the CMake package (find_package(redlease):
redlease::redlease, redlease::redlease_shared) and a pkg-config file (redlease).")

find_program(REDLEASE_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(REDLEASE_FILE file)  # CPack finds the ELF files with it
mark_as_advanced(REDLEASE_DPKG_SHLIBDEPS REDLEASE_FILE)
if(REDLEASE_DPKG_SHLIBDEPS AND REDLEASE_FILE)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  # What dpkg-shlibdeps finds on Debian 12 for the tool and the shared library.
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "libc6 (>= 2.34), libgcc-s1 (>= 3.3.1), libssl3 (>= 3.0.0), libstdc++6 (>= 12)")
  if(TARGET redlease_prometheus)  # the tool's exporter
    string(APPEND CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS ", libprometheus-cpp-core1.0, libprometheus-cpp-pull1.0")
  endif()
  message(STATUS "redlease: no dpkg-shlibdeps or file (Debian's dpkg-dev, file): the Debian package's Depends "
                 "are Debian 12's")
endif()

# Debian policy 12.5: each package's copyright file (DEP-5, the project's MIT license).
install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/redlease
  COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/redlease-dev
  COMPONENT dev)

# `cpack --config CPackSourceConfig.cmake`: the sources, without build trees.
set(CPACK_SOURCE_GENERATOR TGZ)
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git(/|$)" "/build[^/]*/" "/Testing/" "/\\\\.cache/")
include(CPack)
