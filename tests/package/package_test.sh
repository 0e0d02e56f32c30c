#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian packages, end to end: `cpack -G DEB` in the build directory (packages written to a
# scratch directory), both packages extracted into a fresh root (dpkg-deb -x: no dpkg database, no
# root needed), their control fields and files checked, the man page rendered (when groff is there)
# and checked against the tool's --help, the shell completion checked against the tool's subcommands,
# options and actions, then examples/ configured and built against the root with find_package
# (CMAKE_PREFIX_PATH=<root>/usr) and examples/basic_lock.cpp with pkg-config, and each example run
# (against a closed port: no Redis server is needed, the run must reach the connection).
# Registered by tests/package/CMakeLists.txt (label `package`) when dpkg-deb is there. cpack builds
# the build directory's targets first (all of them: the preinstall target), so run it after a build.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR WORK_DIR VERSION LIBDIR CPACK CMAKE CXX [PKG_CONFIG]
set -euo pipefail
build=$1 src=$2 work=$3 version=$4 libdir=$5 cpack=$6 cmake=$7 cxx=$8 pkg_config=${9:-}

fail() {
  echo "package_test: FAIL: $*" >&2
  exit 1
}
step() { echo "package_test: $*"; }

rm -rf "$work"
mkdir -p "$work"
root=$work/root

step "cpack -G DEB"
(cd "$build" && "$cpack" -G DEB -B "$work/out" --config CPackConfig.cmake >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB failed"; }
shopt -s nullglob
runtime_deb=("$work/out/redlease_${version}-"*.deb)
dev_deb=("$work/out/redlease-dev_${version}-"*.deb)
shopt -u nullglob
((${#runtime_deb[@]} == 1 && ${#dev_deb[@]} == 1)) || fail "expected redlease_${version}-*.deb and redlease-dev_${version}-*.deb in $work/out: $(ls "$work/out")"

# field DEB NAME: a control field of a package.
field() { dpkg-deb -f "$1" "$2"; }
[[ $(field "${runtime_deb[0]}" Package) == redlease ]] || fail "runtime package name"
[[ $(field "${runtime_deb[0]}" Version) == "$version"-* ]] || fail "runtime version: $(field "${runtime_deb[0]}" Version)"
depends=$(field "${runtime_deb[0]}" Depends)
for lib in libc6 libstdc++6 libssl3; do
  [[ ", $depends" == *", $lib "* || ", $depends," == *", $lib,"* ]] || fail "redlease does not depend on $lib: $depends"
done
dev_depends=$(field "${dev_deb[0]}" Depends)
[[ $dev_depends == *"redlease (= $(field "${runtime_deb[0]}" Version))"* ]] || fail "redlease-dev's Depends lack redlease of its version: $dev_depends"
[[ $dev_depends == *libasio-dev* && $dev_depends == *libssl-dev* ]] || fail "redlease-dev's Depends: $dev_depends"
# Built with the Prometheus exposition (its library in the build), redlease-dev needs prometheus-cpp's.
if compgen -G "$build/libredlease_prometheus.*" >/dev/null; then
  [[ $dev_depends == *prometheus-cpp-dev* ]] || fail "redlease-dev is built with redlease::prometheus but does not depend on prometheus-cpp-dev: $dev_depends"
fi
for deb in "${runtime_deb[0]}" "${dev_deb[0]}"; do
  for f in Maintainer Description Section Architecture; do
    [[ -n $(field "$deb" $f) ]] || fail "$(basename "$deb") has no $f"
  done
done
control_files=$(dpkg-deb --ctrl-tarfile "${runtime_deb[0]}" | tar -t)  # not piped into grep -q: pipefail
grep -qx '\./shlibs' <<<"$control_files" || fail "redlease has no shlibs file"

step "dpkg-deb -x into $root"
mkdir -p "$root"
dpkg-deb -x "${runtime_deb[0]}" "$root"
dpkg-deb -x "${dev_deb[0]}" "$root"
# Every file where it belongs, in the package it belongs to.
runtime_files=$(dpkg-deb -c "${runtime_deb[0]}" | awk '{print $6}')
dev_files=$(dpkg-deb -c "${dev_deb[0]}" | awk '{print $6}')
soname=$(readelf -d "$root/usr/$libdir/libredlease.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libredlease.so.* ]] || fail "no SONAME in usr/$libdir/libredlease.so"
for f in usr/bin/redlease "usr/$libdir/$soname" usr/share/man/man1/redlease.1.gz \
  usr/share/bash-completion/completions/redlease usr/share/zsh/vendor-completions/_redlease \
  usr/share/doc/redlease/copyright; do
  grep -qx "\./$f" <<<"$runtime_files" || fail "redlease lacks $f"
done
for f in usr/include/redlease/redlease.hpp usr/include/redlease/version.hpp "usr/$libdir/libredlease.a" \
  "usr/$libdir/libredlease.so" "usr/$libdir/pkgconfig/redlease.pc" "usr/$libdir/cmake/redlease/redleaseConfig.cmake" \
  "usr/$libdir/cmake/redlease/redleaseConfigVersion.cmake" "usr/$libdir/cmake/redlease/redleaseTargets.cmake" \
  usr/share/doc/redlease-dev/copyright; do
  grep -qx "\./$f" <<<"$dev_files" || fail "redlease-dev lacks $f"
done
[[ -x $root/usr/bin/redlease ]] || fail "usr/bin/redlease is not executable"

tool=$root/usr/bin/redlease
out=$("$tool" --version)
[[ $out == "redlease $version" ]] || fail "redlease --version printed '$out'"

# The tool's subcommands (the --help list; hidden ones are not in it) and, per subcommand, its long
# options and the choices of its positionals ({a,b,c}: the actions of semaphore and latch).
subcommands=$("$tool" --help | sed -n '/^Subcommands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p')
[[ -n $subcommands ]] || fail "redlease --help lists no subcommands"
# (sed, not grep: grep fails when it finds nothing, and so would the pipeline.)
long_options() { "$tool" "$1" --help | sed -n '/^Options:/,/^$/s/^  \(-[a-zA-Z],\)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p'; }
choices() { "$tool" "$1" --help | sed -n '/^Positionals:/,/^$/s/.*{\([a-z,-]*\)}.*/\1/p' | tr ',' ' '; }

step "man page"
page=$(gzip -dc "$root/usr/share/man/man1/redlease.1.gz")
[[ $page == *'.TH REDLEASE 1 '*"redlease $version"* ]] || fail "the man page has no .TH REDLEASE 1 ... redlease $version"
for sub in $subcommands; do
  [[ $page == *".SS \"redlease $sub\""* ]] || fail "the man page has no section for redlease $sub"
  for opt in $(long_options "$sub"); do
    [[ $page == *"${opt//-/\\-}"* ]] || fail "the man page does not name $opt of redlease $sub"
  done
done
if command -v groff >/dev/null; then
  rendered=$(gzip -dc "$root/usr/share/man/man1/redlease.1.gz" | groff -man -Tutf8 -ww -P-cbou 2>"$work/groff.err")
  [[ ! -s $work/groff.err ]] || fail "groff warns about the man page: $(cat "$work/groff.err")"
  [[ $rendered == *"redlease run"* && $rendered == *"EXIT STATUS"* ]] || fail "the rendered man page lacks redlease run or EXIT STATUS"
else
  step "no groff: the man page is not rendered"
fi

step "bash completion"
bash -n "$root/usr/share/bash-completion/completions/redlease" || fail "bash -n on the completion"
# complete WORD...: what the completion offers for the last word (one per line).
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _redlease
           printf "%s\n" "${COMPREPLY[@]}"' _ "$root/usr/share/bash-completion/completions/redlease" redlease "$@"
}
offered=$(complete_words "")
# semaphore and latch are named whether or not this tool has them yet (another branch adds them).
for sub in $subcommands semaphore latch; do
  grep -qx "$sub" <<<"$offered" || fail "bash completion does not offer the subcommand $sub"
done
for sub in $subcommands; do
  acts=$(choices "$sub")
  offered=$(complete_words "$sub" --; complete_words "$sub" name --)
  if [[ -n $acts ]]; then
    offered_acts=$(complete_words "$sub" name "")
    for a in $acts; do
      grep -qx "$a" <<<"$offered_acts" || fail "bash completion does not offer the action $a of $sub"
      offered+=$'\n'$(complete_words "$sub" name "$a" --)
    done
  fi
  for opt in $(long_options "$sub"); do
    grep -qx -- "$opt" <<<"$offered" || fail "bash completion does not offer $opt of redlease $sub"
  done
done
[[ $(complete_words run name -- ech) == *echo* ]] || fail "bash completion does not complete the command of run"

step "zsh completion"
zsh_file=$root/usr/share/zsh/vendor-completions/_redlease
[[ $(head -1 "$zsh_file") == '#compdef redlease' ]] || fail "_redlease does not begin with #compdef redlease"
if command -v zsh >/dev/null; then
  zsh -n "$zsh_file" || fail "zsh -n on _redlease"
fi
for sub in $subcommands semaphore latch; do
  grep -q "'$sub:" "$zsh_file" || fail "zsh completion does not describe the subcommand $sub"
done
for sub in $subcommands; do
  for opt in $(long_options "$sub") $(choices "$sub"); do
    grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" "$zsh_file" || fail "zsh completion does not name $opt (redlease $sub)"
  done
done

# run_example EXE: runs an example against a port nothing listens on: it must start (its libraries
# load) and fail to connect.
run_example() {
  local rc=0 err
  err=$("$1" redis://127.0.0.1:1 2>&1 >/dev/null) || rc=$?
  if ((rc != 1)) || [[ $err != error:* ]]; then
    fail "$1 redis://127.0.0.1:1: exit $rc, '$err' (expected 1, error: ...)"
  fi
}

step "examples/ with find_package(redlease), CMAKE_PREFIX_PATH=$root/usr"
"$cmake" -S "$src/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_CXX_COMPILER="$cxx" \
  >"$work/examples-configure.log" 2>&1 || { cat "$work/examples-configure.log" >&2; fail "configuring examples/"; }
found=$(sed -n 's/^redlease_DIR:PATH=//p' "$work/examples/CMakeCache.txt")
[[ $found == "$root/usr/$libdir/cmake/redlease" ]] || fail "examples/ found redlease in '$found', not in the root"
"$cmake" --build "$work/examples" >"$work/examples-build.log" 2>&1 || { cat "$work/examples-build.log" >&2; fail "building examples/"; }
run_example "$work/examples/example_basic_lock"

if [[ -n $pkg_config ]]; then
  step "examples/basic_lock.cpp with pkg-config (the shared library)"
  export PKG_CONFIG_PATH=$root/usr/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  flags=$("$pkg_config" --cflags --libs redlease)
  # As a cross build would see it: the same root through PKG_CONFIG_SYSROOT_DIR.
  sysroot_flags=$(PKG_CONFIG_SYSROOT_DIR=$root "$pkg_config" --cflags --libs redlease)
  for f in "$flags" "$sysroot_flags"; do
    [[ " $f" == *" -I$root/"* && " $f" == *" -L$root/"* ]] || fail "pkg-config's paths are not in the root: $f"
  done
  # shellcheck disable=SC2086 # flags are words
  "$cxx" -std=c++20 "$src/examples/basic_lock.cpp" $flags -Wl,-rpath,"$root/usr/$libdir" -o "$work/basic_lock_shared" ||
    fail "building examples/basic_lock.cpp with pkg-config"
  libs=$(ldd "$work/basic_lock_shared")
  [[ $libs == *"$root/usr/$libdir/$soname"* ]] || fail "basic_lock_shared does not use the root's $soname: $libs"
  run_example "$work/basic_lock_shared"
fi
step "PASS"
