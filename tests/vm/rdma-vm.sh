#!/usr/bin/env bash
# Runs commands inside a throw-away virtual machine that has a real kernel RDMA stack: two
# soft-RoCE (rxe) devices on a veth pair, on a machine without an RDMA card (docs/VERBS.md).
#
#   tests/vm/rdma-vm.sh [--cache DIR] [--out DIR] [--timeout SEC] [--keep-going] COMMANDS
#
# COMMANDS holds one command per line, "name shell-command..." ('#' lines are ignored). The guest
# boots once, under qemu's software emulation (TCG: the KVM here cannot run a stock kernel), with
# this machine's root file system over 9p read-only, so the commands run the host's binaries and
# see the host's paths. Each command's output and exit status land in OUT/<name>.log and
# OUT/<name>.rc (124: it ran past its bound, TRIB_VM_CMD_TIMEOUT seconds, default 240).
# The kernel is Debian 12's stock one, downloaded (not installed) with apt-get, and a busybox
# initramfs is built from it; both are cached in DIR (default ./rdma-vm-cache).
#
# TRIB_VM_KERNEL_ARGS adds to the guest kernel's command line (perf.sh's runs use
# "clocksource=tsc tsc=reliable": the TSC instead of the emulated HPET the guest picks on its own).
#
# Exit status: 0 every command passed (--keep-going: the guest ran them all); 1 some failed; 2 the guest did not boot or finish within
# --timeout (default 900 s); 77 it cannot run here (no qemu, busybox, kmod or kernel package),
# with the reason on stderr and in OUT/skipped.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=$PWD/rdma-vm-cache
out=$PWD/rdma-vm-out
timeout_s=900
keep_going=0
while [ $# -gt 1 ]; do
  case $1 in
    --cache) cache=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [--cache DIR] [--out DIR] [--timeout SEC] COMMANDS" >&2; exit 64; }
commands=$(readlink -f "$1")
[ -r "$commands" ] || { echo "rdma-vm: cannot read $1" >&2; exit 64; }
mkdir -p "$cache" "$out"
cache=$(readlink -f "$cache")
out=$(readlink -f "$out")
rm -f "$out"/*.log "$out"/*.rc "$out"/skipped "$out"/summary "$out"/console "$out"/commands "$out"/devices

skip() {
  echo "rdma-vm: skipped: $*" | tee "$out/skipped" >&2
  exit 77
}

for tool in qemu-system-x86_64 kmod cpio; do
  command -v $tool > /dev/null || skip "$tool is not installed (tools/setup-debian.sh installs it)"
done
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! file -L "$busybox" 2> /dev/null | grep -q "statically linked"; then
  [ -x /bin/busybox ] && busybox=/bin/busybox
  ldd "$busybox" > /dev/null 2>&1 && skip "busybox is not the static one (install busybox-static)"
fi
[ -n "$busybox" ] || skip "busybox-static is not installed"

# ---- the kernel: Debian 12's stock package, extracted, with a modules.dep of its own ----------
# The modules the guest loads (with their dependencies): rxe and its UDP tunnels, user verbs,
# rdma_cm for rping, veth, crc32 through the crypto API, and virtio 9p for the host's files; netem
# and tbf for the fault tests (tests/faults/).
modules=(rdma_rxe ib_uverbs rdma_ucm veth crc32_generic virtio_pci 9pnet_virtio 9p sch_netem sch_tbf)
prepare_kernel() {
  local pkg deb
  pkg=${TRIB_VM_KERNEL_PACKAGE:-$(apt-cache depends linux-image-amd64 2> /dev/null |
    awk '/Depends: linux-image-[0-9]/ {print $2; exit}')}
  [ -n "$pkg" ] || skip "no linux-image-amd64 package known to apt (run apt-get update)"
  if [ ! -f "$cache/kernel.stamp" ] || [ "$(cat "$cache/kernel.stamp")" != "$pkg" ]; then
    rm -rf "$cache/kernel" "$cache"/*.deb "$cache/initrd.img"
    (cd "$cache" && apt-get download "$pkg" > "$cache/download.log" 2>&1) ||
      skip "apt-get download $pkg failed (see $cache/download.log)"
    deb=$(ls "$cache"/"$pkg"_*.deb 2> /dev/null | head -1)
    [ -n "$deb" ] || skip "apt-get download $pkg left no .deb"
    dpkg -x "$deb" "$cache/kernel" || skip "dpkg -x $deb failed"
    rm -f "$deb"
    echo "$pkg" > "$cache/kernel.stamp"
  fi
  kver=$(ls "$cache/kernel/lib/modules" | head -1)
  vmlinuz=$cache/kernel/boot/vmlinuz-$kver
  [ -f "$vmlinuz" ] || skip "the kernel package has no $vmlinuz"
  [ -f "$cache/kernel/lib/modules/$kver/modules.dep" ] || depmod -b "$cache/kernel" "$kver" ||
    skip "depmod -b failed"
}

prepare_initrd() {
  local stamp
  stamp="$kver $(sha256sum "$here/guest-init.sh" | cut -c1-16) ${modules[*]}"
  [ -f "$cache/initrd.img" ] && [ "$(cat "$cache/initrd.stamp" 2> /dev/null)" = "$stamp" ] && return
  local root=$cache/initrd
  rm -rf "$root"
  mkdir -p "$root/bin" "$root/modules"
  cp "$busybox" "$root/bin/busybox"
  cp "$here/guest-init.sh" "$root/init"
  chmod +x "$root/init"
  # Load order from kmod itself; each module once.
  local ko n=0
  : > "$root/modules.list"
  while read -r _ ko; do
    [ -n "$ko" ] || continue
    grep -qx "$(basename "$ko")" "$root/modules.list.names" 2> /dev/null && continue
    basename "$ko" >> "$root/modules.list.names"
    n=$((n + 1))
    cp "$ko" "$root/modules/$(printf %02d $n)-$(basename "$ko")"
    echo "/modules/$(printf %02d $n)-$(basename "$ko")" >> "$root/modules.list"
  done < <(for m in "${modules[@]}"; do
    modprobe -d "$cache/kernel" -S "$kver" --show-depends "$m" 2> /dev/null | grep '^insmod '
  done)
  rm -f "$root/modules.list.names"
  [ "$n" -gt 0 ] || skip "kmod found none of the modules ${modules[*]} in the kernel package"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 > "$cache/initrd.img") || skip "cpio failed"
  echo "$stamp" > "$cache/initrd.stamp"
}

prepare_kernel
prepare_initrd

cp "$commands" "$out/commands"
echo "rdma-vm: booting $kver under TCG (commands: $(grep -cv '^\s*\(#\|$\)' "$commands"))" >&2
start=$(date +%s)
# -nodefaults -nic none: no network device, so every packet stays inside the guest.
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 2G \
  -smp "${TRIB_VM_CPUS:-2}" -nodefaults -no-reboot -display none -serial stdio -nic none \
  -kernel "$vmlinuz" -initrd "$cache/initrd.img" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 TRIB_VM_OUT=$out TRIB_VM_GUEST=$here/guest.sh TRIB_VM_CMD_TIMEOUT=${TRIB_VM_CMD_TIMEOUT:-240} ${TRIB_VM_KERNEL_ARGS:-}" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$out",mount_tag=out,security_model=none \
  < /dev/null > "$out/console" 2>&1
qrc=$?
echo "rdma-vm: guest ran $(($(date +%s) - start)) s (qemu exit $qrc)" >&2
if [ ! -f "$out/summary" ]; then
  echo "rdma-vm: the guest did not finish (qemu exit $qrc; timeout ${timeout_s} s); its console:" >&2
  tail -40 "$out/console" >&2
  exit 2
fi
cat "$out/summary" >&2
[ $keep_going = 0 ] && grep -q ' FAIL' "$out/summary" && exit 1
exit 0
