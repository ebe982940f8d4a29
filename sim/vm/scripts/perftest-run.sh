# In-VM side of perftest runs against our side (sim::rxe::perftest), one after the other in one boot.
# The Rust side prepends the variables, for each run i in 0 .. PT_N-1:
#   PT_CMD_i      the full perftest command line (e.g. "ib_write_bw -d rxe0 -x $RNIC_GID -F -n 200 -s 4096
#                 -m 1024 -p 18515 10.0.0.2"; $RNIC_GID, the GID index, comes from the prelude gid.sh)
#   PT_TIMEOUT_i  seconds before the tool is killed
#   PT_RETRY_i    1: the tool is the client and our side may not listen yet; while it fails with "Couldn't
#                 connect" and time is left, it starts again
# For each run: a marker, the tool's output between markers, its exit status, then rxe's hw_counters (since
# boot), the kernel's rxe warnings since the last run (a bad ICRC shows up only there) and the netdev's
# counters. Exits with the first failing run's status.
final=0
i=0
while [ "$i" -lt "$PT_N" ]; do
    eval "PT_CMD=\$PT_CMD_$i; PT_TIMEOUT=\$PT_TIMEOUT_$i; PT_RETRY=\$PT_RETRY_$i"
    echo "=== PERFTEST_ITEM $i ==="
    eval "set -- $PT_CMD"
    echo "=== PERFTEST_CMD $* ==="
    end=$(( $(cut -d. -f1 /proc/uptime) + PT_TIMEOUT ))
    while :; do
        left=$(( end - $(cut -d. -f1 /proc/uptime) ))
        [ "$left" -ge 1 ] || left=1
        timeout "$left" "$@" > /tmp/perftest.out 2>&1
        rc=$?
        if [ "$rc" -ne 0 ] && [ "$PT_RETRY" = 1 ] && grep -q "Couldn't connect" /tmp/perftest.out &&
           [ "$(cut -d. -f1 /proc/uptime)" -lt "$end" ]; then
            sleep 0.2
            continue
        fi
        break
    done
    echo "=== PERFTEST_OUTPUT_BEGIN ==="
    cat /tmp/perftest.out
    echo "=== PERFTEST_OUTPUT_END ==="
    echo "=== PERFTEST_RC rc=$rc ==="
    for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "hw_counter ${f##*/} $(cat $f)"; done
    # frames rxe sent that the VM's own network stack dropped before they reached the link (qdisc, driver)
    for f in tx_packets tx_dropped tx_errors; do echo "netdev_counter $f $(cat /sys/class/net/eth0/statistics/$f)"; done
    echo "netdev_counter default_qdisc $(cat /proc/sys/net/core/default_qdisc 2>/dev/null)"
    /usr/bin/tc -s qdisc show dev eth0 2>/dev/null | sed 's/^/qdisc /'
    dmesg -c | grep -i -E 'rxe|icrc' | grep -v -E 'rdma_rxe: loaded|rxe0: added' | sed 's/^/kmsg /' | tail -n 20
    [ "$rc" -ne 0 ] && [ "$final" -eq 0 ] && final=$rc
    i=$((i + 1))
done
exit $final
