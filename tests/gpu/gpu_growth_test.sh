#!/usr/bin/env bash
# run.sh: alone (it reads the whole GPU's memory: nvidia-smi or torch.cuda.mem_get_info)
# Growth in place on the GPU (issue "hardening"): a file written in small
# pieces grows by mapping VMM memory at its end, with no device copy past
# its first 2 MiB; the launcher and PyTorch map all its pieces as one range;
# growth to a full 256 MiB budget reaches 99% of df's available; and the
# GPU is back at its baseline after unmount.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}

gpu_used_mib() {
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '
}

setUp() {
	BASE_MIB=$(gpu_used_mib)
}

tearDown() {
	unmount_vyrefs
	drop_log
}

test_a_grown_file_is_one_range_for_the_launcher_and_torch() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	# 40 MB of float32 in 64 KiB writes: it grows in several pieces.
	python3 -c "import numpy as np; np.arange(10_000_000, dtype=np.float32).tofile('$MNT.src')"
	dd if="$MNT.src" of="$MNT/x" bs=64K status=none || fail "dd"
	assertTrue "it grew in place: $(stat_of grows)" "[ $(stat_of grows) -ge 2 ]"
	assertTrue "copies below 2 MiB only: $(stat_of d2d_bytes)" "[ $(stat_of d2d_bytes) -lt 2097152 ]"
	if python3 -c 'import torch' 2>/dev/null; then
		out=$(python3 - "$MNT/x" <<'PY'
import sys, torch, vyrefs
with vyrefs.map(sys.argv[1], dtype=torch.float32) as m:
    t = torch.as_tensor(m, device="cuda")
    print(t.numel(), float(t.double().sum()), float(t[-1]))
    del t
PY
)
		assertEquals "torch sees every piece" "10000000 49999995000000.0 9999999.0" "$out"
	fi
	# A sequence over the whole file: the launcher maps all its pieces.
	echo "fill x 0 0 40000000" >"$MNT/.vyre/ctl" || fail "fill: $(tail -n 2 "$MNT/.vyre/log")"
	assertEquals "every byte of every piece set" 0 "$(tr -d '\0' <"$MNT/x" | wc -c)"
	rm -f "$MNT.src"
}

test_growth_to_a_full_budget_and_back_to_the_baseline() {
	mount_vyrefs "backend=cuda,resident_budget=256M" || { fail "mount"; return 1; }
	avail=$(df -B1 --output=avail "$MNT" | tail -n 1 | tr -d " ")
	# Bounded: 1 MiB past the 256 MiB budget, so it ends at ENOSPC or there.
	timeout 300 dd if=/dev/zero of="$MNT/fill" bs=4k count=$(((256 + 1) * 256)) status=none 2>/dev/null
	size=$(stat -c %s "$MNT/fill")
	assertTrue "the file has $size of the $avail bytes df showed" "[ $((size * 100)) -ge $((avail * 99)) ]"
	assertTrue "copies below 2 MiB only: $(stat_of d2d_bytes)" "[ $(stat_of d2d_bytes) -lt 2097152 ]"
	unmount_vyrefs
	assertReleased
	assertEquals "MiB used on the GPU before the mount and after" "$BASE_MIB" "$(gpu_used_mib)"
}

. tests/shunit.sh
