#!/usr/bin/env bash
# fresh_machine.sh - run the README's two commands on a "fresh machine": a
# copy-on-write view of this machine from which the optional libraries and
# tools are removed, so a build or test that only works because a developer
# already had them fails here.
#
#   bash tests/fresh_machine.sh first   fresh clone; `make && build/shardsim
#                                        train --check ddp --steps 20` without
#                                        jansson, protobuf-c, cmocka, OpenMPI, CUDA
#   bash tests/fresh_machine.sh test    fresh clone; `make deps test` starting
#                                        from the same stripped machine: make deps
#                                        must install everything the tests use
#
# How: an overlay mount of / (upper layer on a tmpfs) in a private mount
# namespace, chrooted into. Inside it the packages `make deps` installs are
# removed with dpkg and CUDA's toolkit is deleted, so they vanish from the
# view only; the real machine is untouched and everything is gone when the
# namespace ends. The clone is of this checkout's HEAD (commit first).
# Needs root and overlayfs (CI runs as root); without them it fails, it never
# skips. Not a container: the kernel, network and /proc are the machine's.
set -euo pipefail

mode=${1:-}
case "$mode" in first|test) ;; *) echo "usage: $0 first|test" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SHS_SHARED_DIR:-$(cd "$repo/.." && pwd)/shared}

if [ "$(id -u)" != 0 ]; then echo "fresh_machine.sh: error: needs root (overlay mount, chroot)" >&2; exit 1; fi
[ -d "$shared" ] || { echo "fresh_machine.sh: error: shared data not found at $shared (set SHS_SHARED_DIR)" >&2; exit 1; }

# What `make deps` installs: the Makefile's DEPS_PKGS_ lines.
optional_pkgs=$(sed -n 's/^DEPS_PKGS_[A-Z_]* *:= *//p' "$repo/Makefile" | tr '\n' ' ')
[ -n "${optional_pkgs// /}" ] || { echo "fresh_machine.sh: error: no DEPS_PKGS_ lines in $repo/Makefile" >&2; exit 1; }

base=$(mktemp -d /tmp/shs-fresh.XXXXXX)
log=$(mktemp /tmp/shs-fresh-log.XXXXXX)
trap 'rm -rf "$base" "$log"' EXIT

unshare -m --propagation private bash -s "$mode" "$repo" "$shared" "$base" "$optional_pkgs" <<'INNER' | tee "$log"
set -euo pipefail
mode=$1 repo=$2 shared=$3 base=$4 optional_pkgs=$5
mount -t tmpfs -o size=8g tmpfs "$base"
mkdir -p "$base"/{upper,work,root}
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
root=$base/root
mount -t proc proc "$root/proc"
for d in sys dev; do mount --rbind "/$d" "$root/$d"; done
mount -t tmpfs tmpfs "$root/tmp"
mount -t tmpfs tmpfs "$root/dev/shm"
# the checkout and the shared data may sit on other mounts than /, which the
# overlay of / does not show: bind them in, read-only
mkdir -p "$root/tmp/shared" "$root/tmp/repo"
mount --bind "$shared" "$root/tmp/shared" && mount -o remount,bind,ro "$root/tmp/shared"
mount --bind "$repo" "$root/tmp/repo" && mount -o remount,bind,ro "$root/tmp/repo"

chroot "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive bash -s "$mode" "$optional_pkgs" <<'CHROOT'
set -euo pipefail
mode=$1 optional_pkgs=$2
# this script is read from standard input: every command below gets
# /dev/null as its input, or one that reads (mpirun, apt) eats the script

echo "== fresh machine: removing what make deps installs, and CUDA (in the overlay only)"
installed=$(dpkg-query -W -f='${Package} ${Status}\n' $optional_pkgs 2>/dev/null | awk '/ installed$/{print $1}' || true)
# apt-get purge also removes what depends on them (libpng-dev needs zlib1g-dev), so
# the package state stays consistent as on a machine that never had them; forcing
# dpkg past the dependencies leaves a state in which make deps' apt-get refuses
if [ -n "$installed" ]; then
    apt-get purge -y -q $installed </dev/null >/dev/null 2>&1 ||
        { echo "fresh_machine.sh: error: apt-get purge $installed failed" >&2; exit 1; }
fi
rm -rf /usr/local/cuda* /usr/local/bin/nvcc /etc/alternatives/mpi* /etc/alternatives/*mpirun* 2>/dev/null || true
mkdir -p /usr/local/cuda
for f in /usr/include/jansson.h /usr/include/cmocka.h /usr/include/protobuf-c /usr/include/zlib.h; do
    if [ -e "$f" ]; then echo "fresh_machine.sh: error: $f is still visible" >&2; exit 1; fi
done
for t in mpicc mpirun protoc-c nvcc; do
    if command -v "$t" >/dev/null 2>&1; then echo "fresh_machine.sh: error: $t is still on PATH" >&2; exit 1; fi
done
echo "   hidden: jansson.h cmocka.h protobuf-c/ zlib.h mpicc mpirun protoc-c nvcc; /usr/local/cuda empty"

mkdir -p /tmp/ws
git -c safe.directory='*' clone -q /tmp/repo /tmp/ws/main </dev/null
cd /tmp/ws/main
echo "== fresh clone of $(git log -1 --format='%h %s' | cut -c1-72)"
if [ "$mode" = first ]; then
    echo "== README command 1: make && build/shardsim train --check ddp --steps 20"
    make -j2 </dev/null >/tmp/make.log 2>&1 || { tail -30 /tmp/make.log; echo "fresh_machine.sh: error: make failed"; exit 1; }
    grep -E '^(✓|✗)' /tmp/make.log
    for lib in jansson protobuf-c mpi nvcc; do
        grep -q "^✗ $lib" /tmp/make.log || { echo "fresh_machine.sh: error: the build did not report $lib as skipped"; exit 1; }
    done
    build/shardsim train --check ddp --steps 20 </dev/null >/tmp/train.log 2>&1 || { tail -20 /tmp/train.log; echo "fresh_machine.sh: error: train failed"; exit 1; }
    echo "   last line: $(tail -1 /tmp/train.log)"
    grep -q 'matched DDP bit for bit at all 20 steps' /tmp/train.log || { echo "fresh_machine.sh: error: no bit-for-bit verdict"; exit 1; }
    # a feature that needs a skipped library says which package to install
    if build/shardsim bench --format json </dev/null >/tmp/json.log 2>&1; then echo "fresh_machine.sh: error: bench --format json succeeded without jansson"; exit 1; fi
    echo "   without jansson: $(head -1 /tmp/json.log)"
    grep -q 'libjansson-dev' /tmp/json.log || { echo "fresh_machine.sh: error: the message does not name libjansson-dev"; exit 1; }
else
    ln -s /tmp/shared /tmp/ws/shared
    echo "== README command 2: make deps test"
    rc=0; make deps test </dev/null >/tmp/test.log 2>&1 || rc=$?
    grep -E '^(✓|✗|FAILED|some tests|all test)' /tmp/test.log || true
    if [ "$rc" != 0 ]; then tail -60 /tmp/test.log; echo "fresh_machine.sh: error: make deps test failed"; exit 1; fi
    echo "   $(grep -c '^\[  PASSED  \]' /tmp/test.log) test binaries passed"
fi
echo "== fresh machine ($mode): passed"
CHROOT
INNER
# the scripts above are read from standard input: only their last line says
# that all of them ran
grep -qx "== fresh machine ($mode): passed" "$log" || { echo "fresh_machine.sh: error: stopped before its end" >&2; exit 1; }
