#!/usr/bin/env bash
# The install story end to end (docs/plugin-authors.md and the README's Install), without
# rebuilding anything:
#   1. `meson install` into a staging DESTDIR;
#   2. the example plugin (examples/plugin-template) built against the staged
#      prefix with nothing but pkg-config;
#   3. dropped into a BACKPLANE_PLUGIN_PATH directory, then into the installed
#      plugin directory: `backplane info --json` lists it as available and
#      `backplane conformance` passes on it;
#   4. a C program (backplane.h) and a C++ program (including every public C++
#      header, so each installed header is self-contained) built with
#      `pkg-config --cflags --libs backplane` list the backends;
#   5. the same plugin and a C++ program built with CMake through
#      find_package(backplane CONFIG);
#   6. the whole prefix moved elsewhere: the CLI still finds its own plugins
#      next to the library, and CMake still finds the package.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR BINDIR
set -euo pipefail

build_dir=$1 source_dir=$2 prefix=$3 libdir=$4 bindir=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/backplane-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# No user settings may leak in.
# meson test points LD_LIBRARY_PATH at the build tree; the installed tree must not need it.
unset LD_LIBRARY_PATH
unset BACKPLANE_PLUGIN_PATH BACKPLANE_CONFIG BACKPLANE_BACKENDS BACKPLANE_DEFAULT_DEVICE BACKPLANE_LOG
export XDG_CONFIG_HOME=$work/xdg

step "meson install into DESTDIR=$work/stage"
DESTDIR=$work/stage meson install -C "$build_dir" --no-rebuild --quiet >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "meson install"; }
root=$work/stage$prefix
[[ $libdir = /* ]] && libdir=${libdir#"$prefix"/}
[[ $bindir = /* ]] && bindir=${bindir#"$prefix"/}
for file in "$libdir/libbackplane.so" "$bindir/backplane" "$libdir/backplane/plugins/backplane-cpu.so" \
            "$libdir/backplane/backplane-probe" \
            include/backplane/plugin.h include/backplane/backplane.h include/backplane/backplane.hpp \
            "$libdir/pkgconfig/backplane.pc" "$libdir/pkgconfig/backplane-plugin.pc" \
            "$libdir/cmake/backplane/backplaneConfig.cmake" "$libdir/cmake/backplane/backplaneConfigVersion.cmake"; do
  [ -e "$root/$file" ] || fail "not installed: $file"
done
soname=$(objdump -p "$root/$libdir/libbackplane.so" | awk '/SONAME/ {print $2}')
[[ $soname == libbackplane.so.* ]] || fail "libbackplane.so has no versioned soname ($soname)"

step "pkg-config against the staged prefix"
export PKG_CONFIG_PATH=$root/$libdir/pkgconfig
pkg_config=(pkg-config)
if [ "$(realpath -m "$(pkg-config --variable=prefix backplane-plugin)")" != "$(realpath -m "$root")" ]; then
  # Only a relocatable .pc (-Dpkgconfig.relocatable=true) follows DESTDIR by itself.
  echo "   the .pc files name prefix $(pkg-config --variable=prefix backplane-plugin): using --define-variable"
  pkg_config=(pkg-config "--define-variable=prefix=$root")
fi
plugindir=$("${pkg_config[@]}" --variable=plugindir backplane-plugin)
[ "$(realpath -m "$plugindir")" = "$(realpath -m "$root/$libdir/backplane/plugins")" ] ||
  fail "plugindir is $plugindir"
"${pkg_config[@]}" --libs backplane-plugin | grep -q -- '-l' && fail "backplane-plugin must not link a library"

step "build examples/plugin-template with pkg-config only"
cp -r "$source_dir/examples/plugin-template" "$work/template"
make -s -C "$work/template" PKG_CONFIG="${pkg_config[*]}" CFLAGS="-O2 -Werror" >"$work/make.log" 2>&1 ||
  { cat "$work/make.log" >&2; fail "make"; }
plugin=$work/template/backplane-hostmem.so

backend_field() {  # backend_field JSON_FILE NAME FIELD
  python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
hit = [b for b in d["backends"] if b["name"] == sys.argv[2]]
print(hit[0][sys.argv[3]] if hit else "missing")' "$@"
}
expect_backend() {  # expect_backend JSON_FILE NAME STATUS PATH_PREFIX
  local status path
  status=$(backend_field "$1" "$2" status)
  path=$(backend_field "$1" "$2" plugin)
  [ "$status" = "$3" ] || fail "$2 is '$status', expected '$3' ($(backend_field "$1" "$2" reason))"
  [[ $path == "$4"* ]] || fail "$2 was loaded from $path, expected under $4"
  echo "   $2: $status from $path ($(backend_field "$1" "$2" origin))"
}

step "BACKPLANE_PLUGIN_PATH directory"
mkdir -p "$work/plugins" && chmod 755 "$work/plugins" && cp "$plugin" "$work/plugins/"
BACKPLANE_PLUGIN_PATH=$work/plugins "$root/$bindir/backplane" info --json >"$work/info-env.json"
expect_backend "$work/info-env.json" hostmem available "$work/plugins/"
expect_backend "$work/info-env.json" cpu available "$root/"

step "backplane conformance on the example plugin"
"$root/$bindir/backplane" conformance "$work/plugins/backplane-hostmem.so" >"$work/conformance.log" ||
  { cat "$work/conformance.log" >&2; fail "conformance"; }
tail -n 1 "$work/conformance.log" | sed 's/^/   /'

step "make install into the installed plugin directory"
make -s -C "$work/template" PKG_CONFIG="${pkg_config[*]}" install >/dev/null
"$root/$bindir/backplane" info --json >"$work/info-installed.json"
expect_backend "$work/info-installed.json" hostmem available "$root/"

step "C and C++ programs built with pkg-config --cflags --libs backplane"
cat >"$work/list.c" <<'EOF'
#include <backplane/backplane.h>
#include <stdio.h>
int main(void) {
  bp_runtime* runtime = NULL;
  size_t count = 0;
  if (bp_runtime_create(NULL, &runtime) != BP_OK || bp_backend_count(runtime, &count) != BP_OK) {
    fprintf(stderr, "error: %s\n", bp_last_error());
    return 1;
  }
  for (size_t index = 0; index < count; ++index) {
    bp_backend_info info = {0};
    info.struct_size = sizeof(info);
    if (bp_backend_get(runtime, index, &info) != BP_OK) return 1;
    printf("%s %s\n", info.name, info.status_name);
  }
  bp_runtime_destroy(runtime);
  return 0;
}
EOF
cat >"$work/list.cpp" <<'EOF'
#include <backplane/array.hpp>
#include <backplane/backplane.hpp>
#include <backplane/conformance.hpp>
#include <backplane/dtype.hpp>
#include <backplane/safetensors.hpp>
#include <iostream>
int main() {
  backplane::Runtime runtime;
  for (const auto& backend : runtime.backends()) {
    std::cout << backend.name << ' ' << backplane::to_string(backend.status) << '\n';
  }
}
EOF
libdir_flag=-Wl,-rpath,$("${pkg_config[@]}" --variable=libdir backplane)
# shellcheck disable=SC2046 # word splitting of pkg-config output is intended
cc -std=c11 -Wall -Wextra -pedantic -Werror ${SANITIZER_FLAGS:-} $("${pkg_config[@]}" --cflags backplane) \
  "$work/list.c" -o "$work/list-c" $("${pkg_config[@]}" --libs backplane) "$libdir_flag"
# shellcheck disable=SC2046
c++ -std=c++20 -Wall -Wextra -pedantic -Werror ${SANITIZER_FLAGS:-} $("${pkg_config[@]}" --cflags backplane) \
  "$work/list.cpp" -o "$work/list-cpp" $("${pkg_config[@]}" --libs backplane) "$libdir_flag"
for program in list-c list-cpp; do
  "$work/$program" >"$work/$program.out"
  grep -qx 'cpu available' "$work/$program.out" || fail "$program: $(cat "$work/$program.out")"
  grep -qx 'hostmem available' "$work/$program.out" || fail "$program: $(cat "$work/$program.out")"
  echo "   $program: $(tr '\n' ' ' <"$work/$program.out")"
done

step "CMake: find_package(backplane CONFIG) for the plugin template and a C++ program"
# The plugin (C) is built plain, as with make; the program (C++) links the
# library, so it is sanitized when the library is.
cmake_build() {  # cmake_build SOURCE BUILD PREFIX: configure and build, quietly unless it fails
  { cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$3" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-Werror \
      -DCMAKE_CXX_FLAGS="-Werror ${SANITIZER_FLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${SANITIZER_FLAGS:-}" &&
    cmake --build "$2"; } >"$2.log" 2>&1 || { cat "$2.log" >&2; fail "cmake build of $1"; }
}
cp -r "$source_dir/examples/plugin-template" "$work/cmake-template"
rm -f "$work/cmake-template/backplane-hostmem.so"
cmake_build "$work/cmake-template" "$work/cmake-template-build" "$root"
mkdir -p "$work/cmake-plugins" && chmod 755 "$work/cmake-plugins"
cp "$work/cmake-template-build/backplane-hostmem.so" "$work/cmake-plugins/"
"$root/$bindir/backplane" conformance "$work/cmake-plugins/backplane-hostmem.so" >"$work/cmake-conformance.log" ||
  { cat "$work/cmake-conformance.log" >&2; fail "conformance of the CMake-built plugin"; }
echo "   plugin: $(tail -n 1 "$work/cmake-conformance.log")"
mkdir -p "$work/cmake-client"
cp "$work/list.cpp" "$work/cmake-client/"
cat >"$work/cmake-client/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(list_backends CXX)
find_package(backplane 0.1 CONFIG REQUIRED)
add_executable(list-cmake list.cpp)
target_link_libraries(list-cmake PRIVATE backplane::backplane)
EOF
cmake_build "$work/cmake-client" "$work/cmake-client-build" "$root"
BACKPLANE_PLUGIN_PATH=$work/cmake-plugins "$work/cmake-client-build/list-cmake" >"$work/list-cmake.out"
grep -qx 'cpu available' "$work/list-cmake.out" || fail "list-cmake: $(cat "$work/list-cmake.out")"
grep -qx 'hostmem available' "$work/list-cmake.out" || fail "list-cmake: $(cat "$work/list-cmake.out")"
echo "   list-cmake: $(tr '\n' ' ' <"$work/list-cmake.out")"
# A project asking for a version this install is not is refused, by the version file.
sed 's/find_package(backplane 0.1 /find_package(backplane 7.0 /' "$work/cmake-client/CMakeLists.txt" \
  >"$work/cmake-client/CMakeLists.v7" && mkdir -p "$work/cmake-v7" &&
  cp "$work/list.cpp" "$work/cmake-v7/" && mv "$work/cmake-client/CMakeLists.v7" "$work/cmake-v7/CMakeLists.txt"
if cmake -S "$work/cmake-v7" -B "$work/cmake-v7-build" -DCMAKE_PREFIX_PATH="$root" >"$work/cmake-v7.log" 2>&1; then
  fail "find_package(backplane 7.0) accepted this install"
fi
grep -q 'compatible with requested version "7.0"' "$work/cmake-v7.log" || { cat "$work/cmake-v7.log" >&2; fail "no version refusal"; }

step "relocation: the prefix moved to $work/moved"
mv "$root" "$work/moved"
"$work/moved/$bindir/backplane" info --json >"$work/info-moved.json" 2>"$work/info-moved.err"
# info probes in a separate process: the helper is found next to the library.
if grep -q "backplane-probe" "$work/info-moved.err"; then cat "$work/info-moved.err" >&2; fail "the moved install did not find its probe helper"; fi
expect_backend "$work/info-moved.json" cpu available "$work/moved/"
expect_backend "$work/info-moved.json" hostmem available "$work/moved/"
if [ ${#pkg_config[@]} -eq 1 ]; then
  moved_plugindir=$(PKG_CONFIG_PATH=$work/moved/$libdir/pkgconfig pkg-config --variable=plugindir backplane-plugin)
  [ "$(realpath -m "$moved_plugindir")" = "$work/moved/$libdir/backplane/plugins" ] ||
    fail "relocated plugindir is $moved_plugindir"
  echo "   pkg-config follows the move: plugindir=$moved_plugindir"
fi
cmake_build "$work/cmake-client" "$work/cmake-client-moved" "$work/moved"
"$work/cmake-client-moved/list-cmake" >"$work/list-cmake-moved.out"
grep -qx 'cpu available' "$work/list-cmake-moved.out" || fail "list-cmake (moved): $(cat "$work/list-cmake-moved.out")"
found=$(sed -n 's/^backplane_DIR:PATH=//p' "$work/cmake-client-moved/CMakeCache.txt")
[[ $found == "$work/moved/"* ]] || fail "CMake found the package at $found, outside the moved prefix"
echo "   CMake finds the moved package: $found"
echo "install test passed"
