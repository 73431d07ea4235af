#!/usr/bin/env bash
# run.sh: alone (it reads the whole GPU's memory: nvidia-smi or torch.cuda.mem_get_info)
# A bad kernel costs only its sequence: three kernels written as a new user
# writes them (an out-of-bounds write, a trap, an endless loop) each fail
# their write with the documented errno and message, three files written
# before (through cp, through ctl, through write-behind) keep their bytes,
# new writes and launches work in a new launcher, and the GPU's memory is
# back at its baseline after unmount, the launcher gone with it.
. tests/fs/lib.sh
FIX=tests/gpu/fixtures

gpu_used_mib() {
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '
}

setUp() {
	BASE_MIB=$(gpu_used_mib)
	mount_vyrefs "backend=cuda,launch_timeout=2s" || { fail "mount"; return 1; }
	cp "$FIX/kernels.ptx" "$MNT/.vyre/modules/kernels.ptx" || fail "module load"
	cp "$FIX/faults.ptx" "$MNT/.vyre/modules/faults.ptx" || fail "module load"
	# Three files, written three ways, before the bad kernel.
	SRC=$(mktemp /tmp/vyrefs-src.XXXXXX)
	head -c $((16 * 1024 * 1024)) /dev/urandom >"$SRC"
	cp "$SRC" "$MNT/by_cp" || fail "cp"
	truncate -s 3M "$MNT/by_ctl"
	echo "fill by_ctl 0x5a" >"$MNT/.vyre/ctl" || fail "fill"
	head -c 100000 /dev/urandom | dd of="$MNT/by_wb" bs=4k status=none || fail "write-behind"
	SUMS=$(cd "$MNT" && sha256sum by_cp by_ctl by_wb)
	truncate -s 1M "$MNT/victim"
}

tearDown() {
	rm -f "$SRC"
	unmount_vyrefs
	drop_log
}

# LAUNCH ERRNO_TEXT: the bad launch fails as documented; then everything
# else is as it was and the mount goes on.
bad_kernel_costs_only_its_sequence() {
	restarts=$(stat_of launcher_restarts)
	old=$(launcher_pid)
	err=$( (echo "$1" >"$MNT/.vyre/ctl") 2>&1)
	assertContains "$1: $err" "$err" "$2"
	log=$(tail -n 1 "$MNT/.vyre/log")
	BAD_LOG=$log
	echo "  log: $log"
	assertContains "$log" "'victim' may hold partial results; every other file is intact"
	assertContains "$log" "(Fix: "
	assertEquals "three files intact" "$SUMS" "$(cd "$MNT" && sha256sum by_cp by_ctl by_wb)"
	assertFalse "the old launcher is gone" "[ -d /proc/$old ]"
	truncate -s 4096 "$MNT/y"
	echo "launch kernels.scale grid=4 block=256 y f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "launch after"
	head -c 8192 /dev/urandom >"$MNT/new" || fail "write after"
	assertEquals "one new launcher" $((restarts + 1)) "$(stat_of launcher_restarts)"
	assertEquals "$(cd "$MNT" && sha256sum by_cp by_ctl by_wb)" "$SUMS"
	cp "$MNT/by_cp" "$MNT/by_cp2" && cmp "$SRC" "$MNT/by_cp2" || fail "device copy after the fault"
}

test_out_of_bounds_write() {
	bad_kernel_costs_only_its_sequence "launch faults.oob grid=1 block=32 victim" "Input/output error"
	assertContains "$BAD_LOG" "CUDA_ERROR_ILLEGAL_ADDRESS"
	assertContains "$BAD_LOG" "it ran faults.oob (line 1)"
	assertContains "$BAD_LOG" "(Fix: fix the kernel"
}

test_trap() {
	bad_kernel_costs_only_its_sequence "launch faults.trap grid=1 block=32 victim" "Input/output error"
	assertContains "$BAD_LOG" "CUDA_ERROR_"
	assertContains "$BAD_LOG" "it ran faults.trap (line 1)"
}

test_endless_loop() {
	start=$(date +%s)
	bad_kernel_costs_only_its_sequence "launch faults.spin grid=1 block=1 victim" "Connection timed out"
	assertContains "$BAD_LOG" "ran past launch_timeout (2000 ms)"
	assertContains "$BAD_LOG" "it ran faults.spin (line 1)"
	assertTrue "stopped within seconds" "[ $(($(date +%s) - start)) -lt 30 ]"
}

test_memory_back_to_baseline_after_faults() {
	echo "launch faults.oob grid=1 block=32 victim" >"$MNT/.vyre/ctl" 2>/dev/null
	echo "launch faults.spin grid=1 block=1 victim" >"$MNT/.vyre/ctl" 2>/dev/null
	echo "launch kernels.scale grid=4 block=256 victim f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "launch after"
	unmount_vyrefs
	assertReleased
	for _ in $(seq 50); do
		[ "$(gpu_used_mib)" = "$BASE_MIB" ] && break
		sleep 0.1
	done
	assertEquals "MiB used on the GPU before the mount and after" "$BASE_MIB" "$(gpu_used_mib)"
	assertEquals "no vyrefs process left on the GPU" "" \
		"$(nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | grep vyrefs)"
}

. tests/shunit.sh
