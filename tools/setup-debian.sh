#!/usr/bin/env bash
# Installs the Debian 12 packages Tributary builds and tests with (idempotent; root or sudo).
set -euo pipefail
PACKAGES=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev libbenchmark-dev
  libucx-dev ucx-utils libhwloc-dev libibverbs-dev libopenmpi-dev openmpi-bin libgloo-dev)
# The RDMA test guest (tests/vm/): qemu, a static busybox for its initramfs, kmod for the module
# order, rdma-core's verbs programs and perftest inside it.
PACKAGES+=(qemu-system-x86 busybox-static cpio kmod ibverbs-utils perftest)
PACKAGES+=(python3-torch libtorch-dev pybind11-dev)  # the PyTorch backend (python/, docs/PYTORCH.md)
PACKAGES+=(python3-matplotlib)  # tools/plot_busbw.py (docs/PLANNER.md "Pictures")
PACKAGES+=(ccache)  # compiler cache: rebuilds (and CI's three builds of one tree) skip unchanged files
PACKAGES+=(lld)  # a faster linker for the ~240 test and tool binaries (CMakeLists.txt TRIB_USE_LLD)
PACKAGES+=(libssl-dev)  # libcrypto: the store's and switch's HMAC challenge-response (docs/SECURITY.md)
PACKAGES+=(clang libclang-rt-14-dev)  # the libFuzzer targets (tests/fuzz, docs/FUZZING.md)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
