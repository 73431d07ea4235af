#!/bin/bash
# holes probe: time a 3-byte write at the end of a sparse file of 256 GiB,
# 1 TiB and 2 TiB on a cuda mount, and its removal (run from the checkout,
# after make).   sudo bench/probes/holes/far_write.sh
M=$(mktemp -d /tmp/holes.XXXXXX)
build/vyrefs -o backend=cuda "$M" || exit 1
for G in 256 1024 2048; do
	T=$((G << 30))
	truncate -s $T "$M/big"
	s=$(date +%s%N)
	printf end | dd of="$M/big" bs=1 seek=$((T - 3)) conv=notrunc status=none
	echo "$G GiB: write exit $?, $(( ($(date +%s%N) - s) / 1000000 )) ms, size and blocks $(stat -c '%s %b' "$M/big")"
	s=$(date +%s%N)
	rm -f "$M/big"
	echo "$G GiB: rm $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
umount "$M" && rmdir "$M"
