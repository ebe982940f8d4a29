# In-VM side of sim::rxe::pingpong: the stock ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong against our
# side (10.0.0.2).
# sim::rxe::pingpong prepends the parameters as shell variables:
#   PP_TOOL   ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong (the same options, but ibv_ud_pingpong has
#             no -m: its path is rxe's active MTU; default ibv_rc_pingpong)
#   PP_MODE=server|client  the VM tool's role (the opposite of ours)
#   PP_PEER   our address (used when PP_MODE=client)
#   PP_PORT   TCP port of the QPN/PSN/GID exchange (18515)
#   PP_MTU PP_SIZE PP_ITERS PP_RXDEPTH   the tool's -m -s -n -r
#   (the GID index, RNIC_GID, comes from the prelude gid.sh: eth0's IPv4-mapped RoCE v2 GID)
#   PP_TIMEOUT  seconds before the tool is killed (so the counters still get printed)
# Prints the tool's output between PINGPONG_BEGIN/END markers, its exit status, then rxe's hw_counters
# ("hw_counter NAME VALUE") and any rxe kernel messages; exits with the tool's status.
#   PP_PINGS PP_OUR_IP  ICMP echo requests to our address first (0: none), their summary line "ping ..."
if [ "${PP_PINGS:-0}" -gt 0 ]; then
    ping -c "$PP_PINGS" -i 0.2 -W 5 "$PP_OUR_IP" 2>&1 | grep -e 'packets transmitted' -e 'rtt' | sed 's/^/ping /'
fi
PP_TOOL=${PP_TOOL:-ibv_rc_pingpong}
echo "=== PINGPONG_BEGIN tool=$PP_TOOL mode=$PP_MODE mtu=$PP_MTU size=$PP_SIZE iters=$PP_ITERS ==="
echo "active_mtu $(ibv_devinfo -d rxe0 | awk '/active_mtu/ {print $2}')"
PP_MTU_ARG="-m $PP_MTU"
if [ "$PP_TOOL" = ibv_ud_pingpong ]; then PP_MTU_ARG=; fi
if [ "$PP_MODE" = server ]; then
    timeout "$PP_TIMEOUT" "$PP_TOOL" -d rxe0 -g "$RNIC_GID" -p "$PP_PORT" $PP_MTU_ARG \
        -s "$PP_SIZE" -n "$PP_ITERS" -r "$PP_RXDEPTH" 2>&1
    rc=$?
else
    timeout "$PP_TIMEOUT" "$PP_TOOL" -d rxe0 -g "$RNIC_GID" -p "$PP_PORT" $PP_MTU_ARG \
        -s "$PP_SIZE" -n "$PP_ITERS" -r "$PP_RXDEPTH" "$PP_PEER" 2>&1
    rc=$?
fi
echo "=== PINGPONG_END rc=$rc ==="
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "hw_counter ${f##*/} $(cat "$f")"; done
dmesg | grep -i -e rxe -e icrc | sed 's/^/kmsg /' | tail -20
exit $rc
