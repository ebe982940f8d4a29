# In-VM side of the management TCP check (busybox nc).
# Phase 1: listen on 18515; our side connects, sends "ping-from-host", we answer "pong-from-vm".
# Phase 2: connect to 10.0.0.2:18516, send "hello-from-vm", expect "hello-from-host".
echo pong-from-vm | nc -l -p 18515 > /tmp/got1; echo "nc1 rc=$?"
cat /tmp/got1
grep -q '^ping-from-host$' /tmp/got1 || exit 21
echo hello-from-vm | nc -w 10 10.0.0.2 18516 > /tmp/got2; echo "nc2 rc=$?"
cat /tmp/got2
grep -q '^hello-from-host$' /tmp/got2 || exit 22
exit 0
