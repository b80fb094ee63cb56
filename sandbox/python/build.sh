#!/usr/bin/env bash
# Build CPython for WASI (python.wasm plus a stdlib of .pyc files) for
# flowrun's sandbox, reproducibly, on a Debian 12 (bookworm) machine with apt.
#
# Usage: build.sh OUTDIR
#
# OUTDIR must not exist or be empty. It receives:
#   python.wasm            the interpreter, stripped
#   python-snapshot.wasm   the same as a reactor (flowrun_snapshot.c, which
#                          must sit beside this script), stripped
#   lib/python3.13/        the standard library as .pyc files (no sources)
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
# Toolchain: bookworm's clang and lld 14, llvm, wasi-libc and
# libclang-rt-14-dev-wasm32, installed if missing (needs root or sudo).
#
# Environment:
#   FLOWRUN_PYTHON_TARBALL  use this source tarball instead of apt-get source
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
PACKAGES=(clang lld llvm wasi-libc libclang-rt-14-dev-wasm32 gcc libc6-dev make xz-utils)
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
say "native build-python: configure"
mkdir -p "$WORK/build-native"
(cd "$WORK/build-native" && "$SRC/configure" --prefix="$WORK/native-prefix" --disable-test-modules) \
  >"$WORK/native-configure.log" 2>&1 || { tail -n 40 "$WORK/native-configure.log" >&2; die "native configure failed (log: $WORK/native-configure.log)"; }
say "native build-python: make -j$(nproc)"
make -C "$WORK/build-native" -j"$(nproc)" >"$WORK/native-make.log" 2>&1 ||
  { tail -n 40 "$WORK/native-make.log" >&2; die "native make failed (log: $WORK/native-make.log)"; }
BUILD_PYTHON=$WORK/build-native/python
"$BUILD_PYTHON" -c 'import sys; assert sys.version.startswith("'"$PY_VERSION"'"), sys.version' ||
  die "build-python is not $PY_VERSION"

# 4. WASI build.
say "WASI: configure"
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
say "WASI: make -j$(nproc)"
make -C "$WORK/build-wasi" -f Makefile -f "$WORK/reproducible.mk" -j"$(nproc)" >"$WORK/wasi-make.log" 2>&1 ||
  { tail -n 40 "$WORK/wasi-make.log" >&2; die "WASI make failed (log: $WORK/wasi-make.log)"; }
[ -f "$WORK/build-wasi/python.wasm" ] || die "WASI make made no python.wasm"

# 4b. The same interpreter as a WASI reactor entered at flowrun_snapshot.c's
# flowrun_init and flowrun_call, from which the sandbox makes its
# pre-initialised snapshot: python.wasm's own compile and link commands (as
# make prints them), with flowrun_snapshot.c for Programs/python.c.
# Anything linked into python.wasm after this step must be linked here too.
say "WASI: linking python-snapshot.wasm (reactor)"
ENTRY_C=$SCRIPT_DIR/flowrun_snapshot.c
[ -f "$ENTRY_C" ] || die "no $ENTRY_C beside build.sh"
(
  cd "$WORK/build-wasi"
  compile=$(make -n -W "../src/Python-$PY_VERSION/Programs/python.c" Programs/python.o | grep -F -- '-o Programs/python.o ')
  link=$(make -n -W Programs/python.o python.wasm | grep -F -- '-o python.wasm ')
  [ -n "$compile" ] && [ -n "$link" ] || die "make -n printed no compile or link command for python.wasm"
  compile=${compile/"-o Programs/python.o ../src/Python-$PY_VERSION/Programs/python.c"/-o Programs/flowrun_snapshot.o "$ENTRY_C"}
  link=${link/"-o python.wasm Programs/python.o"/-mexec-model=reactor -o python-snapshot.wasm Programs/flowrun_snapshot.o}
  eval "$compile" && eval "$link"
) >"$WORK/snapshot-link.log" 2>&1 || { tail -n 40 "$WORK/snapshot-link.log" >&2; die "linking python-snapshot.wasm failed (log: $WORK/snapshot-link.log)"; }

# 5. Assemble OUTDIR in a staging directory.
STAGE=$WORK/stage
LIB=$STAGE/lib/python$PY_MINOR
mkdir -p "$LIB"
cp "$WORK/build-wasi/python.wasm" "$STAGE/python.wasm"
unstripped=$(stat -c %s "$STAGE/python.wasm")
llvm-strip "$STAGE/python.wasm"
llvm-strip -o "$STAGE/python-snapshot.wasm" "$WORK/build-wasi/python-snapshot.wasm"
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

say "stdlib: compiling to .pyc"
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
source=$SRC_TARBALL (Debian $DEB_SRC_SUITE source package $SRC_PACKAGE)
source_sha256=$SRC_SHA256
python_wasm_sha256=$wasm_sha
python_snapshot_wasm_sha256=$snapshot_sha
prefix=$PREFIX
stdlib=lib/python$PY_MINOR (.pyc only; mount it read-only at $PREFIX/lib/python$PY_MINOR in the guest)
trimmed=${TRIM[*]} */test */tests */idle_test mypy.ini *.rst
toolchain=$(clang --version | head -n1); wasi-libc $(dpkg-query -W -f='${Version}' wasi-libc)
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
EOF

mkdir -p "$OUT"
cp -a "$STAGE/." "$OUT/"
ok=1
say "done: $OUT: python.wasm $(du -h "$OUT/python.wasm" | cut -f1), stdlib $(du -sh "$OUT/lib" | cut -f1) in $(find "$OUT/lib" -type f | wc -l) files; $(( $(date +%s) - started ))s in all"
