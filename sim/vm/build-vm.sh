#!/bin/bash
# Build the soft-RoCE (rdma_rxe) peer VM used by sim::rxe: a stock Debian 12 kernel plus a busybox +
# rdma-core + perftest initramfs. Everything comes from Debian packages (the lab's verbs agent, agent/rxe-verbs.c, is
# compiled here against libibverbs-dev); nothing else is downloaded.
#
# Outputs (git-ignored):  $OUT/vmlinux (uncompressed ELF, booted by qemu through the PVH entry),
#                         $OUT/vmlinuz, $OUT/initramfs.cpio.gz, $OUT/stamp, $OUT/kernel-version
# Scratch:                $WORK (the kernel .deb, the extracted kernel, the rootfs)
# Env:  OUT, WORK         override the directories (default: sim/vm/out, sim/vm/work)
#       KPKG              kernel package to use (default: the linux-image-6.1 that linux-image-amd64 depends on)
#       FORCE=1           rebuild even when $OUT is up to date
#
# Idempotent: when $OUT/stamp matches this script, the init, the kernel package and the installed versions of
# the userspace packages, it only prints "up to date" (well under a second).
#
# The init inside the VM reads from the kernel command line:
#   rnic.ip=10.0.0.1/24  rnic.mtu=1500  rnic.name=rxevm
# and runs the script that qemu passes as  -fw_cfg name=opt/rnic/script,file=FILE  after rxe0 is up, printing
#   "=== RNIC_READY uptime=<s> ===" before and "=== SCRIPT_EXIT rc=<N> ===" after it, then powers off.
# Without a script it starts an interactive shell on the serial console.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SELF=$HERE/$(basename "$0")
OUT=${OUT:-$HERE/out}
WORK=${WORK:-$HERE/work}
KPKG=${KPKG:-}
mkdir -p "$OUT" "$WORK"

# One build at a time (tests may call this concurrently).
exec 9>"$WORK/.build.lock"
flock 9

# ---- 0. host packages ---------------------------------------------------------------------------------------
HOST_PKGS="qemu-system-x86 busybox-static rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils iproute2 kmod cpio xz-utils libibverbs-dev gcc libc6-dev"
missing=""
for p in $HOST_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    cmd="apt-get install -y --no-install-recommends$missing"
    if [ "$(id -u)" != 0 ]; then
        echo "build-vm.sh: missing host packages:$missing" >&2
        echo "build-vm.sh: run as root:  apt-get update && DEBIAN_FRONTEND=noninteractive $cmd" >&2
        exit 1
    fi
    echo "build-vm.sh: installing:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $cmd >/dev/null
fi

# ---- 1. which kernel --------------------------------------------------------------------------------------
cd "$WORK"
if [ -z "$KPKG" ]; then
    KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}' || true)
fi
if [ -z "$KPKG" ]; then
    # no apt lists: fall back to a kernel package downloaded earlier
    deb=$(ls -t linux-image-[0-9]*_*.deb 2>/dev/null | head -1 || true)
    [ -n "$deb" ] || { echo "build-vm.sh: cannot resolve linux-image-amd64 (run apt-get update)" >&2; exit 1; }
    KPKG=${deb%%_*}
fi
deb=$(ls ${KPKG}_*.deb 2>/dev/null | head -1 || true)

# ---- cache check --------------------------------------------------------------------------------------------
versions=$(dpkg-query -W -f='${Package}=${Version}\n' $HOST_PKGS 2>/dev/null | sort)
AGENT=$HERE/agent/rxe-verbs.c
key=$( { cat "$SELF" "$AGENT"; echo "$KPKG"; echo "$versions"; } | sha256sum | cut -d' ' -f1)
if [ -z "${FORCE:-}" ] && [ -n "$deb" ] && [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$key" ] &&
   [ -f "$OUT/vmlinux" ] && [ -f "$OUT/initramfs.cpio.gz" ]; then
    echo "build-vm.sh: $OUT up to date ($KPKG)"
    exit 0
fi
rm -f "$OUT/stamp"

if [ -z "$deb" ]; then
    echo "build-vm.sh: apt-get download $KPKG"
    apt-get download "$KPKG" >/dev/null
    deb=$(ls ${KPKG}_*.deb | head -1)
fi
echo "build-vm.sh: kernel package $deb"
rm -rf kroot && dpkg-deb -x "$deb" kroot
KVER=$(ls kroot/lib/modules | head -1)
depmod -b kroot "$KVER"      # the .deb ships no modules.dep
cp kroot/boot/vmlinuz-"$KVER" "$OUT/vmlinuz"
# Uncompressed ELF for PVH direct boot: skips the real-mode setup and the XZ decompressor under TCG.
set +o pipefail   # head / xz --single-stream close their input early
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$OUT/vmlinuz" | head -1 | cut -d: -f1)
tail -c +$((off + 1)) "$OUT/vmlinuz" | xz -dc --single-stream > "$OUT/vmlinux.tmp"
set -o pipefail
mv "$OUT/vmlinux.tmp" "$OUT/vmlinux"
echo "$KVER" > "$OUT/kernel-version"

# ---- 2. modules, in insmod order (dependencies resolved by modprobe against the extracted tree) -------------
# crc32_generic / crc32-pclmul: rxe calls crypto_alloc_shash("crc32") for the ICRC; that is a crypto alias, not
# a modules.dep dependency, so they are loaded explicitly.
# 8021q: the runs on an 802.1Q VLAN (rnic.vlan=VID puts the address on eth0.VID).
MODS="virtio_pci virtio_net crc32_generic crc32_pclmul rdma_rxe ib_uverbs rdma_ucm ib_umad qemu_fw_cfg 8021q"
R=$WORK/rootfs
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,etc,proc,sys,dev,tmp,root,usr/bin,usr/sbin,lib/modules/$KVER,lib64,run,var}
: > "$R/etc/modules.order"
for m in $MODS; do
    modprobe -d "$WORK/kroot" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}' |
    while read -r ko; do
        rel=${ko#$WORK/kroot/lib/modules/$KVER/}
        if ! grep -qxF "$rel" "$R/etc/modules.order"; then
            echo "$rel" >> "$R/etc/modules.order"
            mkdir -p "$R/lib/modules/$KVER/$(dirname "$rel")"
            cp "$ko" "$R/lib/modules/$KVER/$rel"
        fi
    done
done
echo "build-vm.sh: $(wc -l < "$R/etc/modules.order") modules"

# ---- 3. userspace -----------------------------------------------------------------------------------------
cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
BINS="ibv_devinfo ibv_devices ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong
      ib_send_bw ib_send_lat ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_atomic_bw ib_atomic_lat
      rdma rping ucmatose udaddy rdma_server rdma_client rdma_xserver rdma_xclient tc"
libs=""
for b in $BINS; do
    p=$(command -v "$b") || { echo "build-vm.sh: missing $b" >&2; exit 1; }
    cp -L "$p" "$R/usr/bin/"
    libs="$libs $p"
done
# the lab's verbs agent (sim::rxe::verbs_agent), built here against libibverbs
gcc -O2 -Wall -Werror -o "$R/usr/bin/rxe-verbs" "$AGENT" -libverbs
libs="$libs $R/usr/bin/rxe-verbs"
# the rxe provider is dlopen()ed by libibverbs: copy it and its driver file explicitly
PROV=$(dpkg -L ibverbs-providers | grep 'librxe-rdmav.*\.so$' | head -1)
mkdir -p "$R$(dirname "$PROV")"
cp -L "$PROV" "$R$PROV"
libs="$libs $PROV"
mkdir -p "$R/etc/libibverbs.d" && cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
for f in $libs; do
    ldd "$f" | awk '/=> \//{print $3} /^\s*\/lib64/{print $1}'
done | sort -u | while read -r lib; do
    mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
# glibc dlopen()s libgcc_s for pthread_exit: without it rping, ucmatose and cmtime abort at exit (rc 134)
mkdir -p "$R/lib/x86_64-linux-gnu" && cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/lib/x86_64-linux-gnu/"
# merged /usr: make /lib/x86_64-linux-gnu and /usr/lib/x86_64-linux-gnu the same directory
if [ -d "$R/lib/x86_64-linux-gnu" ]; then
    mkdir -p "$R/usr/lib/x86_64-linux-gnu"
    cp -a "$R/lib/x86_64-linux-gnu/." "$R/usr/lib/x86_64-linux-gnu/" && rm -rf "$R/lib/x86_64-linux-gnu"
    ln -s ../usr/lib/x86_64-linux-gnu "$R/lib/x86_64-linux-gnu"
fi
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
echo "root:x:0:" > "$R/etc/group"
printf '127.0.0.1 localhost\n' > "$R/etc/hosts"

# ---- 4. init ----------------------------------------------------------------------------------------------
cat > "$R/init" <<'EOF'
#!/bin/sh
# rnic soft-RoCE peer VM init. Kernel command line: rnic.ip=A.B.C.D/N rnic.mtu=N rnic.name=NAME [rnic.vlan=VID]
# (with rnic.vlan the address is on eth0.VID, an 802.1Q VLAN device, and eth0 has none: rxe0 stays on eth0, as
# rxe_newlink refuses a VLAN device, and takes its GIDs from the VLAN device above it)
# Test script: qemu -fw_cfg name=opt/rnic/script,file=FILE (run after rxe0 is up, then poweroff).
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /tmp
IP=10.0.0.1/24; MTU=1500; NAME=rxevm; VLAN=
for a in $(cat /proc/cmdline); do case $a in
    rnic.ip=*) IP=${a#rnic.ip=};; rnic.mtu=*) MTU=${a#rnic.mtu=};; rnic.name=*) NAME=${a#rnic.name=};;
    rnic.vlan=*) VLAN=${a#rnic.vlan=};; esac; done
hostname "$NAME"
while read -r m; do insmod "/lib/modules/$(uname -r)/$m" || echo "RNIC_INSMOD_FAILED $m"; done < /etc/modules.order
ip link set lo up
ip link set eth0 mtu "$MTU"
ip link set eth0 up                 # the rxe port state follows the netdev: up before rdma link add
export RNIC_DEV=eth0                # the tool scripts' netdev (gid.sh)
if [ -n "$VLAN" ]; then
    RNIC_DEV=eth0.$VLAN
    ip link add link eth0 name "$RNIC_DEV" type vlan id "$VLAN" || echo "RNIC_VLAN_FAILED $VLAN"
    ip link set "$RNIC_DEV" mtu "$MTU"; ip link set "$RNIC_DEV" up
fi
ip addr add "$IP" dev "$RNIC_DEV"
if [ -e /sys/class/net/eth1 ]; then  # the management NIC (qemu user networking), when the run has one
    ip addr add 10.0.2.15/24 dev eth1 && ip link set eth1 up
fi
rdma link add rxe0 type rxe netdev eth0 || echo "RNIC_RXE_LINK_ADD_FAILED"
i=0; while [ $i -lt 50 ]; do grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break; sleep 0.1; i=$((i+1)); done
echo "=== RNIC_READY name=$NAME ip=$IP mtu=$MTU dev=$RNIC_DEV uptime=$(cut -d' ' -f1 /proc/uptime) ==="
rdma link show
for g in /sys/class/infiniband/rxe0/ports/1/gids/[0-3]; do
    i=${g##*/}
    echo "GID[$i] $(cat "$g") $(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)"
done
S=/sys/firmware/qemu_fw_cfg/by_name/opt/rnic/script/raw
if [ -r $S ]; then
    cat $S > /tmp/script.sh
    echo "=== RNIC_SCRIPT_START ==="
    sh /tmp/script.sh; rc=$?
    echo "=== SCRIPT_EXIT rc=$rc ==="
    sync; poweroff -f
fi
echo "no fw_cfg script; interactive shell (poweroff -f to quit)"
exec setsid cttyhack sh
EOF
chmod +x "$R/init"

(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$OUT/initramfs.cpio.gz.tmp"
mv "$OUT/initramfs.cpio.gz.tmp" "$OUT/initramfs.cpio.gz"
echo "$key" > "$OUT/stamp"
echo "build-vm.sh: built $OUT/vmlinux ($KVER), initramfs $(du -h "$OUT/initramfs.cpio.gz" | cut -f1)"
