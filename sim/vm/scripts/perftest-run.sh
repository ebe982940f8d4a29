# In-VM side of one perftest run against our side (sim::rxe::perftest).
# The Rust side prepends the variables:
#   PT_CMD      the full perftest command line (e.g. "ib_write_bw -d rxe0 -x $RNIC_GID -F -n 200 -s 4096 -m 1024
#               -p 18515 10.0.0.2"; $RNIC_GID, the GID index, comes from the prelude gid.sh)
#   PT_TIMEOUT  seconds before the tool is killed
# Prints the tool's output between markers, its exit status, then rxe's hw_counters and the kernel's rxe
# warnings (a bad ICRC shows up only there), and exits with the tool's status.
eval "set -- $PT_CMD"
echo "=== PERFTEST_CMD $* ==="
timeout "$PT_TIMEOUT" "$@" > /tmp/perftest.out 2>&1
rc=$?
echo "=== PERFTEST_OUTPUT_BEGIN ==="
cat /tmp/perftest.out
echo "=== PERFTEST_OUTPUT_END ==="
echo "=== PERFTEST_RC rc=$rc ==="
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "hw_counter ${f##*/} $(cat $f)"; done
# frames rxe sent that the VM's own network stack dropped before they reached the link (qdisc, driver)
for f in tx_packets tx_dropped tx_errors; do echo "netdev_counter $f $(cat /sys/class/net/eth0/statistics/$f)"; done
echo "netdev_counter default_qdisc $(cat /proc/sys/net/core/default_qdisc 2>/dev/null)"
/usr/bin/tc -s qdisc show dev eth0 2>/dev/null | sed 's/^/qdisc /' 
dmesg | grep -i -E 'rxe|icrc' | grep -v -E 'rdma_rxe: loaded|rxe0: added' | sed 's/^/kmsg /' | tail -n 20
exit $rc
