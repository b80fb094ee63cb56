#!/usr/bin/env bash
# Build CPython for WASI (python.wasm plus a stdlib of .pyc files), with
# numpy linked in, for flowrun's sandbox, reproducibly, on a Debian 12
# (bookworm) machine with apt.
#
# Usage: build.sh OUTDIR
#
# OUTDIR must not exist or be empty. It receives:
#   python.wasm            the interpreter with numpy's extension modules
#                          built in, stripped
#   python-snapshot.wasm   the same as a reactor entered at flowrun_snapshot.c's
#                          flowrun_init and flowrun_call (the file must sit
#                          beside this script), stripped
#   lib/python3.13/        the standard library and numpy as .pyc files (no
#                          sources)
#   VERSION                version, source sha256, build date, toolchain
#
# The guest finds its stdlib, with no environment, when OUTDIR/lib/python3.13
# is mounted read-only at /usr/local/lib/python3.13 (the build's prefix is
# /usr/local).
#
# Source: the upstream tarball as shipped in Debian trixie's python3.13
# source package, fetched with apt-get source through a temporary deb-src
# entry (removed again on exit), and checked against the sha256 below.
# To build from a tarball fetched some other way, set
# FLOWRUN_PYTHON_TARBALL=/path/to/python3.13_3.13.5.orig.tar.xz (or
# Python-3.13.5.tar.xz: the same file).
#
# numpy and Cython: see numpy_build below.
#
# Toolchain: bookworm's clang and lld 14, llvm, wasi-libc,
# libclang-rt-14-dev-wasm32, and for numpy libc++/libc++abi for wasm32 and
# ninja, installed if missing (needs root or sudo).
#
# Environment:
#   FLOWRUN_PYTHON_TARBALL  use this source tarball instead of apt-get source
#   FLOWRUN_NUMPY_TARBALL   use this numpy source archive instead of PyPI's
#   FLOWRUN_CYTHON_TARBALL  use this Cython source archive instead of PyPI's
#   FLOWRUN_BUILD_DIR       scratch directory, kept (default: a new one under
#                           TMPDIR, removed on success or when stopped, kept
#                           for inspection on failure)
#   FLOWRUN_KEEP_BUILD=1    keep the default scratch directory on success too
set -euo pipefail

PY_VERSION=3.13.5
PY_MINOR=3.13
SRC_PACKAGE=python3.13
SRC_TARBALL=python3.13_${PY_VERSION}.orig.tar.xz
SRC_SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
DEB_SRC_SUITE=trixie
DEB_SRC_ENTRY=/etc/apt/sources.list.d/flowrun-python-build-${DEB_SRC_SUITE}-src.sources
PACKAGES=(clang lld llvm wasi-libc libclang-rt-14-dev-wasm32 gcc libc6-dev make xz-utils
  libc++-14-dev-wasm32 libc++abi-14-dev-wasm32 ninja-build curl ca-certificates)
# Recorded in VERSION; sandbox/install.go's pythonBuildRevision must match.
# An installation with an older revision is rebuilt by flowrun sandbox
# install python. 2: numpy; 3: python-snapshot.wasm.
BUILD_REVISION=3
PREFIX=/usr/local
# Removed from the stdlib: tests, the GUI, pip's bootstrap, and packages that
# cannot work in WASI: their C parts are not built for it (curses, sqlite3,
# ctypes), or they need processes (multiprocessing, venv). Modules that only
# need sockets or threads stay: they import fine (email, urllib, logging and
# asyncio import them) and fail at the call, with a clearer error.
TRIM=(
  test idlelib tkinter turtledemo turtle.py ensurepip
  curses sqlite3 ctypes multiprocessing venv
  __phello__ site-packages
)

# ---------------------------------------------------------------------------
# numpy, statically linked into python.wasm.
#
# WASI has no dynamic loading, so numpy's extension modules are compiled to
# objects with numpy's own meson build (its vendored fork: numpy 2.x needs
# its features module) and linked into the interpreter, each registered as
# a built-in module under its dotted name (BuiltinImporter answers for
# submodules too). Cython runs from its source tree as pure Python.
#
# Sources, each checked against a pinned sha256: the release archives
# published on PyPI (Debian's numpy source package strips vendored-meson),
# or a local copy named by FLOWRUN_NUMPY_TARBALL / FLOWRUN_CYTHON_TARBALL,
# which may also be an archive of the release's git tag with its submodules.

NUMPY_VERSION=2.2.4
NUMPY_URL=https://files.pythonhosted.org/packages/source/n/numpy/numpy-$NUMPY_VERSION.tar.gz
# The PyPI sdist, then an archive of the v2.2.4 tag with its submodules.
NUMPY_SHA256S=(
  9ba03692a45d3eef66559efe1d1096c4b9b75c0986b5dff5530c378fb8331d4f
  90ad853e92a045b27b8fd01fa79efb605a69c0a15dfa2efe1b16f0119c582735
)
CYTHON_VERSION=3.0.11
CYTHON_URL=https://files.pythonhosted.org/packages/source/c/cython/cython-$CYTHON_VERSION.tar.gz
CYTHON_SHA256S=(
  7146dd2af8682b4ca61331851e6aebce9fe5158e75300343f80c07ca80b1faff
  b6f9c0a0ee898481863b809e8271bd744fc03e86ab59ba560a55e88202be39ce
)
# Built-in modules (dotted name, init function) and where meson leaves the
# objects of each. Left out: numpy's test-only extensions and _simd.
NUMPY_MODULES=(
  "numpy._core._multiarray_umath PyInit__multiarray_umath"
  "numpy.linalg._umath_linalg PyInit__umath_linalg"
  "numpy.linalg.lapack_lite PyInit_lapack_lite"
  "numpy.fft._pocketfft_umath PyInit__pocketfft_umath"
  "numpy.random._common PyInit__common"
  "numpy.random.bit_generator PyInit_bit_generator"
  "numpy.random._bounded_integers PyInit__bounded_integers"
  "numpy.random._mt19937 PyInit__mt19937"
  "numpy.random._philox PyInit__philox"
  "numpy.random._pcg64 PyInit__pcg64"
  "numpy.random._sfc64 PyInit__sfc64"
  "numpy.random._generator PyInit__generator"
  "numpy.random.mtrand PyInit_mtrand"
)
# numpy's own tests kept in the installation, so that the sandbox's tests
# can run them in the guest (the rest of numpy's tests are removed).
NUMPY_KEPT_TESTS=(
  _core/tests/_natype.py # numpy.testing imports it
  _core/tests/test_shape_base.py
  lib/tests/__init__.py
  lib/tests/test_arraypad.py
  lib/tests/test_arraysetops.py
  lib/tests/test_shape_base.py
  lib/tests/test_index_tricks.py
)

# What relink_python adds to the interpreter: objects, archives and linker
# flags appended to CPython's own link command, and built-in modules as
# "dotted.name PyInit_function" pairs. Each step appends its own.
PYTHON_LINK_EXTRA=()
INITTAB=()

# fetch_checked NAME URL VAR SHA256...: sets FETCHED to a source archive
# whose sha256 is one of those given: the file named by the environment
# variable VAR when set, else the one downloaded from URL.
fetch_checked() {
  local name=$1 url=$2 var=$3 file got want
  shift 3
  file=${!var:-}
  if [ -n "$file" ]; then
    [ -f "$file" ] || die "$var=$file: no such file"
    say "$name source from $var: $file"
  else
    file=$WORK/src/${url##*/}
    say "downloading $url"
    curl -fsSL --retry 3 -o "$file" "$url" ||
      die "downloading $url failed; fetch it another way (sha256 $1) and set $var to its path"
  fi
  got=$(sha256sum "$file" | cut -d' ' -f1)
  for want in "$@"; do
    if [ "$got" = "$want" ]; then
      say "sha256 ok: $got"
      FETCHED=$file
      return
    fi
  done
  die "sha256 mismatch for $file: got $got, want one of: $*"
}

# unpack ARCHIVE DIR: sets UNPACKED to the single top-level directory of
# ARCHIVE, extracted into the new directory DIR.
unpack() {
  mkdir -p "$2"
  tar -xf "$1" -C "$2" || die "cannot extract $1"
  local top=("$2"/*)
  [ ${#top[@]} = 1 ] && [ -d "${top[0]}" ] || die "$1: expected one top-level directory"
  UNPACKED=${top[0]}
}

# numpy_patch SRC DIR: the changes numpy 2.2.4 needs for wasm32-wasi. Each
# checks that it applied, so a new numpy version fails here, not later.
numpy_patch() {
  local src=$1 dir=$2 f
  # npy_cpu.h knows wasm only as __EMSCRIPTEN__ ("#error Unknown CPU");
  # numpy fixed it the same way upstream (PR 29053).
  f=$src/numpy/_core/include/numpy/npy_cpu.h
  sed -i 's/^#elif defined(__EMSCRIPTEN__)$/#elif defined(__EMSCRIPTEN__) || defined(__wasm__)/' "$f"
  grep -q 'defined(__wasm__)' "$f" || die "patching $f failed"
  # mtrand compiles its own copy of distributions.c with NP_RANDOM_LEGACY
  # (where RAND_INT_TYPE is long, not int64_t). In separate shared
  # libraries that is harmless; linked into one binary the two copies'
  # symbols collide and the wrong ABI gets called (Generator.poisson
  # crashes). Rename the legacy copy's symbols in mtrand's C files only.
  f=$src/numpy/random/meson.build
  sed -i "s|\['-DNP_RANDOM_LEGACY=1'\], \[npymath_lib\]|['-DNP_RANDOM_LEGACY=1', '-include', '$dir/legacy-names.h'], [npymath_lib]|" "$f"
  grep -q 'legacy-names.h' "$f" || die "patching $f failed"
  # libc++ built without threads has no <shared_mutex>; numpy's C++ only
  # takes its locks, and the interpreter runs a single thread.
  mkdir -p "$dir/compat"
  cat >"$dir/compat/shared_mutex" <<'EOF'
// flowrun: a lock-free std::shared_mutex for a single-threaded wasm32 build.
#pragma once
namespace std {
class shared_mutex {
 public:
  void lock() {}
  bool try_lock() { return true; }
  void unlock() {}
  void lock_shared() {}
  bool try_lock_shared() { return true; }
  void unlock_shared() {}
};
}  // namespace std
EOF
}

numpy_build() {
  local nb=$WORK/numpy np cy pybuilddir sysconfigdata obj
  mkdir -p "$nb"
  fetch_checked numpy "$NUMPY_URL" FLOWRUN_NUMPY_TARBALL "${NUMPY_SHA256S[@]}"
  NUMPY_SOURCE=$FETCHED
  NUMPY_SOURCE_SHA256=$(sha256sum "$FETCHED" | cut -d' ' -f1)
  unpack "$FETCHED" "$nb/src"
  np=$UNPACKED
  NUMPY_SRC=$np
  fetch_checked Cython "$CYTHON_URL" FLOWRUN_CYTHON_TARBALL "${CYTHON_SHA256S[@]}"
  CYTHON_SOURCE_SHA256=$(sha256sum "$FETCHED" | cut -d' ' -f1)
  unpack "$FETCHED" "$nb/cython-src"
  cy=$UNPACKED
  [ -f "$np/vendored-meson/meson/meson.py" ] || die "$NUMPY_SOURCE has no vendored-meson/meson (numpy's meson fork is required)"
  [ -f "$cy/cython.py" ] || die "$FETCHED has no cython.py"
  grep -q "^version = \"$NUMPY_VERSION\"" "$np/pyproject.toml" || die "$NUMPY_SOURCE is not numpy $NUMPY_VERSION"
  numpy_patch "$np" "$nb"

  # meson asks "python" about the host: the native build-python answering
  # with the WASI build's configuration (sizes, pyconfig.h, includes).
  pybuilddir=$(cat "$WORK/build-wasi/pybuilddir.txt")
  sysconfigdata=$(cd "$WORK/build-wasi/$pybuilddir" && ls _sysconfigdata_*.py)
  cat >"$nb/host-python" <<EOF
#!/bin/sh
export _PYTHON_SYSCONFIGDATA_NAME=${sysconfigdata%.py}
export _PYTHON_PROJECT_BASE=$WORK/build-wasi
export _PYTHON_HOST_PLATFORM=wasi-wasm32
export PYTHONPATH=$WORK/build-wasi/$pybuilddir
exec $BUILD_PYTHON "\$@"
EOF
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$BUILD_PYTHON" "$cy/cython.py" >"$nb/cython-run"
  chmod +x "$nb/host-python" "$nb/cython-run"
  # CPython's pthread stubs use C99 restrict, which C++ lacks.
  cat >"$nb/wasi.cross" <<EOF
[binaries]
c = ['clang', '--target=wasm32-wasi', '--sysroot=$SYSROOT']
cpp = ['clang++', '--target=wasm32-wasi', '--sysroot=$SYSROOT']
ar = 'llvm-ar'
strip = 'llvm-strip'
python = '$nb/host-python'
pkg-config = 'false'

[properties]
needs_exe_wrapper = true
skip_sanity_check = true
longdouble_format = 'IEEE_QUAD_LE'

[built-in options]
c_args = ['-ffile-prefix-map=$WORK=/flowrun-build']
cpp_args = ['-ffile-prefix-map=$WORK=/flowrun-build', '-Drestrict=__restrict', '-isystem', '$nb/compat']

[host_machine]
system = 'wasi'
cpu_family = 'wasm32'
cpu = 'wasm32'
endian = 'little'
EOF
  printf "[binaries]\ncython = '%s'\n" "$nb/cython-run" >"$nb/native.ini"

  say "numpy $NUMPY_VERSION: meson setup (next: compiling numpy)"
  # No BLAS (numpy's f2c lapack_lite instead), no SIMD dispatch, no threads.
  (cd "$np" && "$BUILD_PYTHON" vendored-meson/meson/meson.py setup "$nb/build" \
    --cross-file "$nb/wasi.cross" --native-file "$nb/native.ini" \
    --buildtype=release -Db_ndebug=if-release \
    -Dblas=none -Dlapack=none -Dallow-noblas=true \
    -Ddisable-svml=true -Ddisable-highway=true -Ddisable-intel-sort=true \
    -Ddisable-threading=true -Ddisable-optimization=true \
    -Dcpu-baseline=none -Dcpu-dispatch=none) >"$nb/setup.log" 2>&1 ||
    { tail -n 40 "$nb/setup.log" >&2; die "numpy meson setup failed (log: $nb/setup.log)"; }

  say "numpy: building libnpyrandom, then the legacy copy's renames"
  ninja -C "$nb/build" numpy/random/libnpyrandom.a >"$nb/ninja.log" 2>&1 ||
    { tail -n 40 "$nb/ninja.log" >&2; die "numpy build failed (log: $nb/ninja.log)"; }
  obj=$(find "$nb/build/numpy/random" -path '*libnpyrandom*' -name '*distributions_distributions.c.o')
  [ -f "$obj" ] || die "no distributions.c object in libnpyrandom"
  { echo "/* flowrun: mtrand's legacy copy of distributions.c, renamed. */"
    llvm-nm --defined-only --extern-only -j "$obj" | sed 's/.*/#define & flowrun_legacy_&/'
  } >"$nb/legacy-names.h"
  grep -q '#define random_poisson ' "$nb/legacy-names.h" || die "no random_poisson in $obj"

  # Only the objects, static libraries and generated Python files: the
  # extension modules' shared library links cannot work for wasm32.
  say "numpy: compiling (ninja, about 10 minutes on 2 cores; next: linking python.wasm)"
  ninja -C "$nb/build" -t targets all | sed -n 's/^\(numpy\/[^:]*\.\(o\|a\|py\)\): .*/\1/p' |
    grep -Ev '_tests|_simd|_examples' >"$nb/targets" || die "no numpy targets"
  xargs -a "$nb/targets" ninja -C "$nb/build" >>"$nb/ninja.log" 2>&1 ||
    { tail -n 40 "$nb/ninja.log" >&2; die "numpy build failed (log: $nb/ninja.log)"; }
}

# numpy_collect: what numpy_build made, for relink_python (objects,
# archives, built-in modules) and for the stdlib directory (NUMPY_PY).
numpy_collect() {
  local nb=$WORK/numpy m name init base objdir obj f
  for m in "${NUMPY_MODULES[@]}"; do
    read -r name init <<<"$m"
    base=${name//.//}
    objdir=$(ls -d "$nb/build/$base".*.p 2>/dev/null | head -n1)
    [ -d "$objdir" ] || die "no objects for $name (looked for $nb/build/$base.*.p)"
    if [ "$name" = numpy.linalg.lapack_lite ]; then
      # Its f2c LAPACK objects are the same as _umath_linalg's.
      PYTHON_LINK_EXTRA+=("$objdir/lapack_litemodule.c.o")
    else
      while IFS= read -r obj; do PYTHON_LINK_EXTRA+=("$obj"); done < <(find "$objdir" -name '*.o' | sort)
    fi
    INITTAB+=("$name $init")
  done
  # pocketfft's C++ throws on failed allocations; the wasm32 libc++abi has
  # no exception support, so a throw stops the guest with this message.
  cat >"$nb/cxa_throw.c" <<'EOF'
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static void no_exceptions(void) {
  fputs("numpy: a C++ exception was thrown, and WASI builds cannot catch one\n", stderr);
  abort();
}
void *__cxa_allocate_exception(size_t size) { (void)size; no_exceptions(); return NULL; }
void __cxa_throw(void *e, void *type, void (*dtor)(void *)) { (void)e; (void)type; (void)dtor; no_exceptions(); }
EOF
  clang --target=wasm32-wasi --sysroot="$SYSROOT" -O2 -c -o "$nb/cxa_throw.o" "$nb/cxa_throw.c" ||
    die "compiling $nb/cxa_throw.c failed"
  PYTHON_LINK_EXTRA+=("$nb/cxa_throw.o")
  # The archives _multiarray_umath links (its mtargets archive holds the
  # objects of the per-CPU-feature ones); wasm-ld 14 has no --start-group:
  # listing them twice resolves their references to each other.
  local archives=("$nb/build/numpy/_core/lib_multiarray_umath_mtargets.a" "$nb/build/numpy/_core/libnpymath.a"
    "$nb/build/numpy/random/libnpyrandom.a")
  for obj in "${archives[@]}"; do [ -f "$obj" ] || die "numpy build made no $obj"; done
  PYTHON_LINK_EXTRA+=("${archives[@]}" "${archives[@]}" -lc++ -lc++abi -lc-printscan-long-double -lm)

  say "numpy: Python files"
  "$BUILD_PYTHON" "$NUMPY_SRC/vendored-meson/meson/meson.py" install -C "$nb/build" --no-rebuild \
    --tags python-runtime --destdir "$nb/install" >"$nb/install.log" 2>&1 ||
    { tail -n 40 "$nb/install.log" >&2; die "numpy meson install failed (log: $nb/install.log)"; }
  NUMPY_PY=$(find "$nb/install" -type d -name numpy -path '*-packages/numpy' | head -n1)
  [ -f "$NUMPY_PY/__init__.py" ] && [ -f "$NUMPY_PY/version.py" ] || die "meson install left no numpy/__init__.py and version.py"
  rm -rf "$NUMPY_PY/f2py" "$NUMPY_PY/_pyinstaller" "$NUMPY_PY/distutils"
  find "$NUMPY_PY" -depth -type d -name tests -exec rm -rf {} +
  find "$NUMPY_PY" -type f ! -name '*.py' ! -name 'LICENSE*' -delete
  for f in "${NUMPY_KEPT_TESTS[@]}"; do
    mkdir -p "$(dirname "$NUMPY_PY/$f")"
    cp "$NUMPY_SRC/numpy/$f" "$NUMPY_PY/$f"
  done
  # The build configuration numpy.show_config() prints names the scratch
  # directory: map it, as for the interpreter.
  sed -i "s|$WORK|/flowrun-build|g" "$NUMPY_PY/__config__.py"
}

# relink_python OUT [ENTRY_C]: links the interpreter into OUT with CPython's
# own link command, plus PYTHON_LINK_EXTRA and a Modules/config.c listing
# INITTAB. With ENTRY_C, that file takes Programs/python.c's place (compiled
# with its command) and OUT is a reactor (-mexec-model=reactor): no main,
# entered at the functions ENTRY_C exports.
# Fails on any symbol defined twice among the objects and archives linked:
# wasm-ld would silently take one, whatever its signature.
relink_python() {
  local out=$1 entry_c=${2:-} bw=$WORK/build-wasi dir=$WORK/link entry name init compile link
  mkdir -p "$dir"
  {
    sed '/ADDMODULE MARKER 1/q' "$bw/Modules/config.c"
    for entry in "${INITTAB[@]}"; do read -r name init <<<"$entry"; echo "extern PyObject* $init(void);"; done
    sed -n '/ADDMODULE MARKER 1/,/ADDMODULE MARKER 2/{/ADDMODULE MARKER 1/d;p}' "$bw/Modules/config.c" | sed '$d'
    for entry in "${INITTAB[@]}"; do read -r name init <<<"$entry"; echo "    {\"$name\", $init},"; done
    sed -n '/ADDMODULE MARKER 2/,$p' "$bw/Modules/config.c"
  } >"$dir/config.c"
  [ "$(grep -c 'PyInit_' "$dir/config.c")" -ge $(( $(grep -c 'PyInit_' "$bw/Modules/config.c") + 2 * ${#INITTAB[@]} )) ] ||
    die "generating $dir/config.c failed"
  compile=$(make -C "$bw" -s -n -W Modules/config.c Modules/config.o | grep -- '-o Modules/config.o Modules/config.c$') ||
    die "no compile command for Modules/config.o in $bw"
  link=$(make -C "$bw" -s -n -W Programs/python.o python.wasm | grep -- ' -o python.wasm ') ||
    die "no link command for python.wasm in $bw"
  compile=${compile/-o Modules\/config.o Modules\/config.c/-o $dir/config.o $dir/config.c}
  link=${link/ -o python.wasm / -o $out }
  link=${link/ Modules\/config.o / $dir/config.o }
  (cd "$bw" && eval "$compile") || die "compiling $dir/config.c failed"
  if [ -n "$entry_c" ]; then
    local main
    main=$(make -C "$bw" -s -n -W "../src/Python-$PY_VERSION/Programs/python.c" Programs/python.o | grep -F -- '-o Programs/python.o ') ||
      die "no compile command for Programs/python.o in $bw"
    main=${main/"-o Programs/python.o ../src/Python-$PY_VERSION/Programs/python.c"/-o $dir/entry.o $entry_c}
    (cd "$bw" && eval "$main") || die "compiling $entry_c failed"
    link=${link/ -o $out Programs\/python.o / -mexec-model=reactor -o $out $dir/entry.o }
    [[ $link == *"$dir/entry.o"* ]] || die "no Programs/python.o in python.wasm's link command"
  fi
  local inputs=() w
  for w in $link "${PYTHON_LINK_EXTRA[@]}"; do
    case $w in *.o | *.a) inputs+=("$w") ;; esac
  done
  local dups
  dups=$(cd "$bw" && printf '%s\n' "${inputs[@]}" | sort -u | xargs llvm-nm --defined-only --extern-only -P 2>/dev/null |
    awk '$2 !~ /^[wWvV]$/ {print $1}' | sort | uniq -d)
  [ -z "$dups" ] || die "symbols defined more than once in the interpreter's link: $(echo $dups | head -c 2000)"
  say "linking $out (next: ${LINK_NEXT:-the stdlib})"
  (cd "$bw" && eval "$link \"\${PYTHON_LINK_EXTRA[@]}\"") >"$dir/link.log" 2>&1 ||
    { tail -n 40 "$dir/link.log" >&2; die "linking $out failed (log: $dir/link.log)"; }
  if grep -q 'signature mismatch' "$dir/link.log"; then
    cat "$dir/link.log" >&2
    die "linking $out: function signature mismatch (log: $dir/link.log)"
  fi
}

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
started=$(date +%s)
say() { printf '[python-build %3ds] %s\n' "$(( $(date +%s) - started ))" "$*"; }
die() { printf 'python-build: %s\n' "$*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build.sh OUTDIR"
OUT=$1
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  die "$OUT exists and is not empty"
fi

command -v apt-get >/dev/null 2>&1 && [ -f /etc/debian_version ] ||
  die "not a Debian-like machine with apt: build elsewhere and install with 'flowrun sandbox install python --from DIR'"

SUDO=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "needs root (or sudo) to install packages with apt-get"
  SUDO=(sudo)
fi

own_work=0
if [ -n "${FLOWRUN_BUILD_DIR:-}" ]; then
  WORK=$FLOWRUN_BUILD_DIR # the caller's: never removed
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/flowrun-python-build.XXXXXX")
  own_work=1
fi
WORK=$(cd "$WORK" && pwd)

ok=0
stopped=0
cleanup() {
  if [ -f "$DEB_SRC_ENTRY" ]; then
    "${SUDO[@]}" rm -f "$DEB_SRC_ENTRY" || true
  fi
  if [ "$own_work" = 1 ] && { [ "$stopped" = 1 ] || { [ "$ok" = 1 ] && [ "${FLOWRUN_KEEP_BUILD:-}" != 1 ]; }; }; then
    rm -rf "$WORK"
  elif [ "$ok" != 1 ] && [ "$stopped" != 1 ]; then
    echo "python-build: failed; scratch directory kept for inspection: $WORK" >&2
  fi
  if [ "$stopped" = 1 ]; then echo "python-build: stopped" >&2; fi
}
trap cleanup EXIT
trap 'stopped=1; exit 130' INT TERM

say "CPython $PY_VERSION for WASI; scratch directory $WORK"

# 1. Packages (idempotent: only what is missing is installed).
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
need_source=1
if [ -n "${FLOWRUN_PYTHON_TARBALL:-}" ]; then need_source=0; fi

if [ "$need_source" = 1 ]; then
  say "adding a temporary deb-src entry for $DEB_SRC_SUITE ($DEB_SRC_ENTRY)"
  "${SUDO[@]}" tee "$DEB_SRC_ENTRY" >/dev/null <<EOF
# Temporary, added by flowrun's sandbox/python/build.sh; removed when it ends.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $DEB_SRC_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
if [ "$need_source" = 1 ] || [ ${#missing[@]} -gt 0 ]; then
  say "apt-get update"
  "${SUDO[@]}" apt-get update -qq >"$WORK/apt-update.log" 2>&1 ||
    { cat "$WORK/apt-update.log" >&2; die "apt-get update failed"; }
fi
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >"$WORK/apt-install.log" 2>&1 || { cat "$WORK/apt-install.log" >&2; die "apt-get install failed"; }
else
  say "packages present: ${PACKAGES[*]}"
fi

# 2. Source.
mkdir -p "$WORK/src"
if [ "$need_source" = 1 ]; then
  say "apt-get source --download-only $SRC_PACKAGE ($DEB_SRC_SUITE)"
  (cd "$WORK/src" && apt-get source --download-only "$SRC_PACKAGE") >"$WORK/apt-source.log" 2>&1 ||
    { cat "$WORK/apt-source.log" >&2; die "apt-get source $SRC_PACKAGE failed"; }
  "${SUDO[@]}" rm -f "$DEB_SRC_ENTRY"
  say "removed the temporary deb-src entry"
  tarball=$WORK/src/$SRC_TARBALL
  if [ ! -f "$tarball" ]; then
    got=$(cd "$WORK/src" && ls ./*.orig.tar.* 2>/dev/null | head -n1 || true)
    die "$DEB_SRC_SUITE's $SRC_PACKAGE no longer ships $SRC_TARBALL (got: ${got:-nothing}); fetch $SRC_TARBALL (sha256 $SRC_SHA256) another way and set FLOWRUN_PYTHON_TARBALL"
  fi
else
  tarball=$FLOWRUN_PYTHON_TARBALL
  [ -f "$tarball" ] || die "FLOWRUN_PYTHON_TARBALL=$tarball: no such file"
  say "source tarball from FLOWRUN_PYTHON_TARBALL: $tarball"
fi
got_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
[ "$got_sha" = "$SRC_SHA256" ] || die "sha256 mismatch for $tarball: got $got_sha, want $SRC_SHA256"
say "sha256 ok: $SRC_SHA256"
tar -xJf "$tarball" -C "$WORK/src"
SRC=$WORK/src/Python-$PY_VERSION
[ -x "$SRC/configure" ] || die "unexpected tarball layout: no $SRC/configure"

# 3. Native build-python (same version, needed to cross-build).
say "native build-python: configure (next: make)"
mkdir -p "$WORK/build-native"
(cd "$WORK/build-native" && "$SRC/configure" --prefix="$WORK/native-prefix" --disable-test-modules) \
  >"$WORK/native-configure.log" 2>&1 || { tail -n 40 "$WORK/native-configure.log" >&2; die "native configure failed (log: $WORK/native-configure.log)"; }
say "native build-python: make -j$(nproc) (next: the WASI build)"
make -C "$WORK/build-native" -j"$(nproc)" >"$WORK/native-make.log" 2>&1 ||
  { tail -n 40 "$WORK/native-make.log" >&2; die "native make failed (log: $WORK/native-make.log)"; }
BUILD_PYTHON=$WORK/build-native/python
"$BUILD_PYTHON" -c 'import sys; assert sys.version.startswith("'"$PY_VERSION"'"), sys.version' ||
  die "build-python is not $PY_VERSION"

# 4. WASI build.
say "WASI: configure (next: make)"
mkdir -p "$WORK/build-wasi"
BUILD_TRIPLE=$("$SRC/config.guess")
# A sysroot holding only wasi-libc: with --sysroot=/usr, clang also searches
# /usr/include, and configure (through pkg-config too) would take the host's
# libffi, zlib, readline, linux/*.h... for the guest's.
SYSROOT=$WORK/wasi-sysroot
mkdir -p "$SYSROOT/include" "$SYSROOT/lib"
ln -sfn /usr/include/wasm32-wasi "$SYSROOT/include/wasm32-wasi"
ln -sfn /usr/lib/wasm32-wasi "$SYSROOT/lib/wasm32-wasi"
# wasi-libc 0.0~git20220510 has no pthread.h: tell configure the pthread
# types' sizes, or Python/thread_pthread.h stops the build with #error.
# configure is run by a relative path so that the source path compiled in
# (getpath's VPATH, __FILE__) does not name the scratch directory.
(cd "$WORK/build-wasi" && CONFIG_SITE="$SRC/Tools/wasm/config.site-wasm32-wasi" \
  PKG_CONFIG_PATH="" PKG_CONFIG_LIBDIR="$SYSROOT/lib/pkgconfig" \
  "../src/Python-$PY_VERSION/configure" \
    --host=wasm32-unknown-wasi \
    --build="$BUILD_TRIPLE" \
    --with-build-python="$BUILD_PYTHON" \
    --prefix="$PREFIX" \
    --disable-test-modules \
    CC="clang --target=wasm32-wasi --sysroot=$SYSROOT" \
    CFLAGS="-ffile-prefix-map=$WORK=/flowrun-build" \
    AR=llvm-ar \
    RANLIB=llvm-ranlib \
    ac_cv_have_pthread_t=yes \
    ac_cv_sizeof_pthread_t=4 \
    ac_cv_sizeof_pthread_key_t=4 \
    ac_cv_pthread_key_t_is_arithmetic_type=yes) \
  >"$WORK/wasi-configure.log" 2>&1 || { tail -n 40 "$WORK/wasi-configure.log" >&2; die "WASI configure failed (log: $WORK/wasi-configure.log)"; }
# Reproducible output: the scratch path is kept out (above), and the build
# date in sys.version is the release's, not today's.
cat >"$WORK/reproducible.mk" <<'EOF'
Modules/getbuildinfo.o: PY_CORE_CFLAGS += '-DDATE="Jun 11 2025"' '-DTIME="00:00:00"'
EOF
say "WASI: make -j$(nproc) (next: numpy)"
make -C "$WORK/build-wasi" -f Makefile -f "$WORK/reproducible.mk" -j"$(nproc)" >"$WORK/wasi-make.log" 2>&1 ||
  { tail -n 40 "$WORK/wasi-make.log" >&2; die "WASI make failed (log: $WORK/wasi-make.log)"; }
[ -f "$WORK/build-wasi/python.wasm" ] || die "WASI make made no python.wasm"

# 5. numpy, built for WASI and linked into the interpreter (see numpy_build),
# and the same interpreter as a WASI reactor entered at flowrun_snapshot.c's
# flowrun_init and flowrun_call, from which the sandbox makes its
# pre-initialised snapshot.
numpy_build
numpy_collect
LINK_NEXT=python-snapshot.wasm relink_python "$WORK/python.wasm"
ENTRY_C=$SCRIPT_DIR/flowrun_snapshot.c
[ -f "$ENTRY_C" ] || die "no $ENTRY_C beside build.sh"
relink_python "$WORK/python-snapshot.wasm" "$ENTRY_C"

# 6. Assemble OUTDIR in a staging directory.
STAGE=$WORK/stage
LIB=$STAGE/lib/python$PY_MINOR
mkdir -p "$LIB"
cp "$WORK/python.wasm" "$STAGE/python.wasm"
unstripped=$(stat -c %s "$STAGE/python.wasm")
llvm-strip "$STAGE/python.wasm"
llvm-strip -o "$STAGE/python-snapshot.wasm" "$WORK/python-snapshot.wasm"
say "WASI: stripped python.wasm from $unstripped to $(stat -c %s "$STAGE/python.wasm") bytes"

say "stdlib: copying and trimming"
cp -a "$SRC/Lib/." "$LIB/"
pybuilddir=$(cat "$WORK/build-wasi/pybuilddir.txt")
# Build paths in the config data name the scratch directory: map them too.
sysconfigdata=$(cd "$WORK/build-wasi/$pybuilddir" && ls _sysconfigdata_*.py)
sed "s|$WORK|/flowrun-build|g" "$WORK/build-wasi/$pybuilddir/$sysconfigdata" >"$LIB/$sysconfigdata"
cp "$SRC/LICENSE" "$LIB/LICENSE.txt"
for t in "${TRIM[@]}"; do rm -rf "${LIB:?}/$t"; done
# getpath warns on stderr at every start without a lib-dynload (all
# extension modules are built in, so it stays empty).
mkdir -p "$LIB/site-packages" "$LIB/lib-dynload"
# Test packages nested elsewhere in the stdlib, and files of no use at run time.
find "$LIB" -depth -type d \( -name test -o -name tests -o -name idle_test \) -exec rm -rf {} +
find "$LIB" -depth -type d -name __pycache__ -exec rm -rf {} +
find "$LIB" -type f \( -name mypy.ini -o -name '*.rst' \) -delete
# numpy after the trimming, which would take the tests kept on purpose.
cp -a "$NUMPY_PY" "$LIB/numpy"

say "stdlib: compiling to .pyc (next: checking that python.wasm runs)"
# Legacy layout (foo.pyc where foo.py was), so that the sources can go;
# paths in code objects name the guest's path; hashes instead of mtimes
# keep the output reproducible. Optimisation level 0: -OO would drop
# docstrings and asserts while sys.flags.optimize says 0 (help() shows
# nothing), for 12% less disk and no measurable start-up gain.
"$BUILD_PYTHON" -E -Wi -m compileall -q -b -j0 -f \
  -s "$LIB" -p "$PREFIX/lib/python$PY_MINOR" \
  --invalidation-mode unchecked-hash \
  "$LIB" >"$WORK/compileall.log" 2>&1 || { tail -n 40 "$WORK/compileall.log" >&2; die "compileall failed"; }
find "$LIB" -type f -name '*.py' -delete
find "$LIB" -depth -type d -empty ! -path "$LIB/site-packages" ! -path "$LIB/lib-dynload" -delete
[ -f "$LIB/os.pyc" ] || die "stdlib has no os.pyc"

wasm_sha=$(sha256sum "$STAGE/python.wasm" | cut -d' ' -f1)
snapshot_sha=$(sha256sum "$STAGE/python-snapshot.wasm" | cut -d' ' -f1)
cat >"$STAGE/VERSION" <<EOF
version=$PY_VERSION
build_revision=$BUILD_REVISION
packages=python $PY_VERSION, numpy $NUMPY_VERSION
source=$SRC_TARBALL (Debian $DEB_SRC_SUITE source package $SRC_PACKAGE)
source_sha256=$SRC_SHA256
python_wasm_sha256=$wasm_sha
python_snapshot_wasm_sha256=$snapshot_sha
prefix=$PREFIX
stdlib=lib/python$PY_MINOR (.pyc only; mount it read-only at $PREFIX/lib/python$PY_MINOR in the guest)
trimmed=${TRIM[*]} */test */tests */idle_test mypy.ini *.rst
toolchain=$(clang --version | head -n1); wasi-libc $(dpkg-query -W -f='${Version}' wasi-libc)
numpy_source=$(basename "$NUMPY_SOURCE")
numpy_source_sha256=$NUMPY_SOURCE_SHA256
cython_source_sha256=$CYTHON_SOURCE_SHA256
numpy_modules=built in: ${INITTAB[*]%% *}
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF

mkdir -p "$OUT"
cp -a "$STAGE/." "$OUT/"
ok=1
say "done: $OUT: python.wasm $(du -h "$OUT/python.wasm" | cut -f1), stdlib $(du -sh "$OUT/lib" | cut -f1) in $(find "$OUT/lib" -type f | wc -l) files; $(( $(date +%s) - started ))s in all"
