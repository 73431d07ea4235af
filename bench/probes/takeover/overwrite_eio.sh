#!/usr/bin/env bash
# Fixed in session 12 (docs/survive.md): a 4 KiB random overwrite of an
# existing file across a SIGKILL of a survive=on daemon got EIO in 1 run of
# 8 to 1 of 2 (a new worker's read buffer not present; the kernel's copy
# into it failed with the SIGKILL pending). Usage: overwrite_eio.sh survive_standby=on|off
# (root, from the checkout, host backend). Prints fio's exit status and error.
o=$1; m=$(mktemp -d); build/vyrefs -f -o survive=on,host_memory=3G,backend=host,$o $m > /tmp/fk.log 2>&1 & k=$!
sleep 0.5
A="--name=gap --directory=$m --rw=randwrite --bs=4k --size=64M --ioengine=psync --time_based --runtime=2 --fallocate=none --output-format=terse"
fio $A >/dev/null 2>&1
(sleep 1; kill -9 $(awk '$1=="pid"{print $2}' $m/.vyre/stats)) & kp=$!
fio $A > /dev/null 2>/tmp/fk.err; echo "$o fio rc $? $(head -c 150 /tmp/fk.err)"
wait $kp; umount $m; wait $k
