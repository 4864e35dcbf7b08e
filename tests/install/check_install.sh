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
#   5. the whole prefix moved elsewhere: the CLI still finds its own plugins
#      next to the library.
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
            "$libdir/pkgconfig/backplane.pc" "$libdir/pkgconfig/backplane-plugin.pc"; do
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
echo "install test passed"
