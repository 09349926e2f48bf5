#!/bin/busybox sh
# /init of the RDMA test guest (tests/vm/rdma-vm.sh): loads the modules, mounts the host's root
# read-only and the output folder writable, and runs tests/vm/guest.sh chrooted into the host's
# root. The kernel passes TRIB_VM_* from its command line in the environment.
/bin/busybox mkdir -p /proc /sys /dev /host /usr/bin /sbin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do
  insmod "$m" || echo "vm: insmod $m failed"
done
msize=-omsize=262144
if mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose $msize hostroot /host; then
  mount -t proc proc /host/proc
  mount -t sysfs sys /host/sys
  mount -t devtmpfs dev /host/dev
  mkdir -p /host/dev/shm
  mount -t tmpfs shm /host/dev/shm
  # A writable /tmp that still shows the host's /tmp folders (read-only): the tree under test may
  # live there (a CI clone made by mktemp -d).
  mkdir -p /hosttmp
  mount -o bind /host/tmp /hosttmp
  mount -t tmpfs tmp /host/tmp
  for d in /hosttmp/*/ /hosttmp/.[!.]*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    mkdir -p "/host/tmp/$name" && mount -o bind "$d" "/host/tmp/$name"
  done
  mount -t tmpfs run /host/run
  # Last: the output folder may lie below one of the tmpfs mounts (/tmp).
  mkdir -p "/host$TRIB_VM_OUT" 2> /dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L $msize out "/host$TRIB_VM_OUT" || echo "vm: cannot mount the output folder"
  chroot /host /bin/bash "$TRIB_VM_GUEST" "$TRIB_VM_OUT"
else
  echo "vm: cannot mount the host's root over 9p"
fi
sync
poweroff -f
