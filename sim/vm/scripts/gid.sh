# In-VM prelude of the tool scripts (sim::rxe::vm::GID_SCRIPT, prepended by the Rust side): sets RNIC_GID to
# the index of rxe0's RoCE v2 GID that is its netdev's ($RNIC_DEV from init: eth0, or eth0.VID on a VLAN) IPv4 address (IPv4-mapped, ::ffff:a.b.c.d; or its IPv6 one, below), the GID the
# tools must use (ibv_rc_pingpong -g, perftest -x). rxe fills its GID table from netdev address events:
# index 0 is the default (link-local) GID and index 1 is usually the IPv4 one, but the IPv6 link-local
# address's event can come first (CI, 2026-12-02: GID[1] fe80::5054:ff:fe00:1 and the IPv4 GID at 2, in one
# VM boot of 50), so the index is looked up, waiting up to 5 s for it to appear.
RNIC_IP4=10.0.0.1
for a in $(cat /proc/cmdline); do case $a in rnic.ip=*) RNIC_IP4=${a#rnic.ip=}; RNIC_IP4=${RNIC_IP4%/*};; esac; done
RNIC_WANT=$(echo "$RNIC_IP4" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}')
# RoCEv2 over IPv6 (sim::rxe::vm::ipv6_prelude sets RNIC_IP6=ADDR/LEN and RNIC_GID6, the address as sysfs
# spells a GID): the netdev gets the address, without duplicate address detection (a tentative address is no source
# for rxe's path), and the tools use its GID instead
if [ -n "${RNIC_IP6:-}" ]; then
    D=${RNIC_DEV:-eth0}
    echo 0 > "/proc/sys/net/ipv6/conf/$D/accept_dad"
    ip -6 addr add "$RNIC_IP6" dev "$D" || echo "=== RNIC_IPV6_ADDR_FAILED $RNIC_IP6 ==="
    RNIC_WANT=$RNIC_GID6
    # the kernel sends a neighbour solicitation from the link-local address only: until that exists and has
    # left its own DAD (about a second after it appears) rxe's path resolution sends none and modify-QP-to-RTR
    # (or create-AH) fails, so wait (up to 8 s) until the netdev has a link-local address and none of its addresses is
    # tentative (flag 0x40 in if_inet6). The link-local address may not exist yet when this runs (seen: it
    # appeared after the script had started).
    n=0
    while [ $n -lt 80 ] && awk -v d="$D" '$6 == d && $1 ~ /^fe80/ { ll = 1 } $6 == d && $5 ~ /^[4567cdef]/ { t = 1 }
                                END { exit !(!ll || t) }' /proc/net/if_inet6; do
        sleep 0.1; n=$((n + 1))
    done
fi
RNIC_GID=
n=0
while [ -z "$RNIC_GID" ] && [ $n -lt 50 ]; do
    for g in /sys/class/infiniband/rxe0/ports/1/gids/[0-9]; do
        i=${g##*/}
        if [ "$(cat "$g" 2>/dev/null)" = "$RNIC_WANT" ] &&
            [ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ]; then
            RNIC_GID=$i
            break
        fi
    done
    [ -n "$RNIC_GID" ] || { sleep 0.1; n=$((n + 1)); }
done
if [ -z "$RNIC_GID" ]; then
    echo "=== RNIC_NO_GID want=$RNIC_WANT (using index 1) ==="
    RNIC_GID=1
fi
echo "=== RNIC_GID index=$RNIC_GID gid=$RNIC_WANT ==="
