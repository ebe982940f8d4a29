# In-VM smoke test (run by the init after rxe0 is ACTIVE; the VM is 10.0.0.1, our side 10.0.0.2).
# Pings our side, then prints the RDMA device and its counters.
set -x
ping -c 3 -W 2 10.0.0.2 || exit 11
ibv_devinfo -v || exit 12
for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do echo "hw_counter ${f##*/} $(cat $f)"; done
rdma statistic show link rxe0/1
ip neigh show
exit 0
