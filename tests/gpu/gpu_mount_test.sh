#!/usr/bin/env bash
# run.sh: alone (it reads the whole GPU's memory: nvidia-smi or torch.cuda.mem_get_info)
# GPU-only mount checks: device memory seen from outside the process
# (nvidia-smi) grows with files and is back to its value before the mount
# once vyrefs exits, and the daemon's own check says so at unmount (with
# survive=on too: the keeper releases the memory it holds and ends its
# standby first); a large file round-trips byte-exact.
. tests/fs/lib.sh

gpu_used_mib() {
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '
}

test_driver_memory_back_to_before_the_mount() {
	memory_back_after survive=off
	memory_back_after survive=on
}

# memory_back_after OPTS: a 1 GiB file shows on the GPU, and the GPU is
# back where it was once the mount is gone.
memory_back_after() {
	local before during after
	before=$(gpu_used_mib)
	mount_vyrefs "backend=cuda,$1" || { fail "mount $1"; return 1; }
	head -c $((1024 * 1024 * 1024)) /dev/zero >"$MNT/gig" || fail "$1: write 1 GiB"
	wait_for "$1: the standby is ready" standby_settled || return 1
	during=$(gpu_used_mib)
	assertTrue "$1: 1 GiB file shows on the GPU: $before -> $during MiB" "[ $((during - before)) -ge 1024 ]"
	unmount_vyrefs
	assertReleased
	assertNotContains "$1: the keeper released" "$(cat "$VY_LOG")" "did not say it released"
	after=$(gpu_used_mib)
	assertEquals "$1: MiB used on the GPU before the mount and after" "$before" "$after"
}

# survive= not given, a GPU that cannot share memory with another process
# (VY_NO_SHARE=1: as one without VMM's POSIX fd handles) mounts with
# survive off, saying so; survive=on asked for, the mount fails with a Fix.
test_a_gpu_that_cannot_share_mounts_survive_off_unless_asked() {
	VY_NO_SHARE=1 mount_vyrefs "backend=cuda" || { fail "mount by default"; return 1; }
	assertContains "said once" "$(cat "$VY_LOG")" "survive is off on this mount: device 0 cannot share"
	assertEquals "no keeper holds it" 0 "$(stat_of keeper_pid)"
	printf 'x%.0s' $(seq 5000) >"$MNT/f" || fail "write"
	assertEquals 5000 "$(stat -c %s "$MNT/f")"
	unmount_vyrefs
	assertReleased
	assertEquals "the mount ends with status 0" 0 "$VY_STATUS"
	local out
	out=$(mktemp /tmp/vyrefs-out.XXXXXX) || { fail "mktemp"; return 1; }
	if VY_NO_SHARE=1 mount_vyrefs "backend=cuda,survive=on" >"$out"; then
		fail "survive=on asked for on a GPU that cannot share: mounted"
		unmount_vyrefs
	fi
	assertContains "$(cat "$out")" "cannot keep its memory for a successor"
	assertContains "$(cat "$out")" "Fix: mount with survive=off"
	rm -f "$out"
}

test_large_file_round_trip_on_the_gpu() {
	mount_vyrefs "backend=cuda" || { fail "mount"; return 1; }
	src=$(mktemp /tmp/vyrefs-big.XXXXXX)
	head -c $((768 * 1024 * 1024 + 12345)) /dev/urandom >"$src"
	cp "$src" "$MNT/big" || fail "cp in"
	assertEquals "$(sha256sum <"$src")" "$(sha256sum <"$MNT/big")"
	cp "$MNT/big" "$MNT/big2"
	cmp "$src" "$MNT/big2" || fail "device copy differs"
	assertContains "$(cat "$MNT/.vyre/device")" "backend cuda"
	rm -f "$src"
}

. tests/shunit.sh
