#!/usr/bin/env bash
# One mount over several devices (docs/devices.md): the host backend
# presents three (host_devices=3), each with its own budget, so placement,
# moves, copies between devices and their accounting run here as on GPUs.
. tests/fs/lib.sh

BUDGET=$((64 << 20))
DEVS="host_devices=3,host_memory=256M,resident_budget=64M"


mount_devices() {
	[ "$backend" = host ] || { skip_test "host_devices is the host backend's (tests/gpu/gpu_devices_test.sh has the GPUs')"; return 1; }
	mount_vyrefs "$DEVS${1:+,$1}" || { fail "mount"; return 1; }
}

test_a_mount_of_three_devices_shows_their_sum() {
	mount_devices || return 0
	assertEquals "df: three budgets" $((3 * BUDGET)) "$(df -B1 --output=size "$MNT" | tail -1 | tr -d ' ')"
	assertEquals "df: all of it free" $((3 * BUDGET)) "$(df -B1 --output=avail "$MNT" | tail -1 | tr -d ' ')"
	assertEquals ".vyre/device lists each" "0 1 2" "$(awk '$1 == "ordinal" { printf "%s%s", s, $2; s = " " }' "$MNT/.vyre/device")"
	assertEquals "peers" "peers 1 2" "$(grep '^peers' "$MNT/.vyre/device" | head -1)"
	assertEquals "the budget total" $((3 * BUDGET)) "$(stat_of budget_bytes)"
	for d in 0 1 2; do
		assertEquals "dev$d budget" "$BUDGET" "$(stat_of dev$d.budget_bytes)"
	done
	if command -v python3 >/dev/null; then
		# The totals in .vyre/metrics are .vyre/stats' totals, in the strict format.
		m=$(mktemp) st=$(mktemp)
		cat "$MNT/.vyre/metrics" >"$m"
		# kept_records (survive=on) counts these very opens: it moves.
		grep -v '^dev[0-9]*\.\|^kept_records ' "$MNT/.vyre/stats" >"$st"
		out=$(python3 tests/fs/prom_check.py "$m" "$st")
		assertEquals "$out" 0 $?
		assertEquals "a series per device" 3 "$(grep -c '^vyrefs_device_info{' "$m")"
		rm -f "$m" "$st"
	fi
	unmount_vyrefs
	assertReleased
	assertEquals "every device back to its baseline" 3 "$(grep -c 'device memory back to baseline (device' "$VY_LOG")"
}

test_placement_by_directory_and_by_free_room() {
	mount_devices || return 0
	head -c 16M /dev/urandom >"$MNT/first"
	assertEquals "all empty: the first device" 0 "$(dev_of "$MNT/first")"
	head -c 8M /dev/urandom >"$MNT/second"
	assertEquals "a directory's files stay together" 0 "$(dev_of "$MNT/second")"
	mkdir "$MNT/other" "$MNT/third"
	head -c 1M /dev/urandom >"$MNT/other/x"
	assertEquals "a directory's first file: the most free room" 1 "$(dev_of "$MNT/other/x")"
	: >"$MNT/third/y"
	assertEquals "then the one still empty" 2 "$(dev_of "$MNT/third/y")"
	: >"$MNT/fourth"
	assertEquals "the root's next file beside its newest" 0 "$(dev_of "$MNT/fourth")"
	mkdir -p "$MNT/on2" "$MNT/plain"
	setfattr -n user.vyre.device -v 2 "$MNT/on2"
	assertEquals "the directory's setting" 2 "$(dev_of "$MNT/on2")"
	mkdir "$MNT/on2/sub"
	assertEquals "a subdirectory takes it" 2 "$(dev_of "$MNT/on2/sub")"
	head -c 4M /dev/urandom >"$MNT/on2/sub/w"
	assertEquals "a file in it goes there" 2 "$(dev_of "$MNT/on2/sub/w")"
	getfattr -n user.vyre.device "$MNT/plain" >/dev/null 2>&1
	assertNotEquals "a directory without a setting has none" 0 $?
	assertEquals "and the second" $((24 << 20)) "$(stat_of dev0.resident_bytes)"
	assertEquals "dev1 holds x" $((1 << 20)) "$(stat_of dev1.resident_bytes)"
	assertEquals "dev2 holds w" $((4 << 20)) "$(stat_of dev2.resident_bytes)"
	assertEquals "the total" $((29 << 20)) "$(stat_of resident_bytes)"
	setfattr -x user.vyre.device "$MNT/on2"
	getfattr -n user.vyre.device "$MNT/on2" >/dev/null 2>&1
	assertNotEquals "removed" 0 $?
	setfattr -n user.vyre.device -v 7 "$MNT/plain" 2>/dev/null
	assertNotEquals "a device the mount lacks is refused" 0 $?
	assertContains "$(cat "$VY_LOG")" "'7' is not a device of this mount (Fix: give one of 0, 1, 2"
	setfattr -x user.vyre.device "$MNT/first" 2>/dev/null
	assertNotEquals "a file always has a device" 0 $?
	rm -rf "$MNT"/*
	for d in 0 1 2; do
		assertEquals "dev$d back to nothing" 0 "$(stat_of dev$d.resident_bytes)"
	done
	unmount_vyrefs
	assertReleased
}

# A model's shards in one directory: together on one device while it has
# room; a file that outgrows its device spills to the one with the most
# room, whole, and the directory's next files follow it there. A file
# whose place was asked for stays, and gets ENOSPC.
test_a_directory_stays_together_and_spills_when_full() {
	mount_devices || return 0
	mkdir "$MNT/model"
	src=$(mktemp)
	head -c 50M /dev/urandom >"$src"
	head -c 30M /dev/urandom >"$MNT/model/a"
	assertEquals "the first shard" 0 "$(dev_of "$MNT/model/a")"
	cp "$src" "$MNT/model/b" || fail "b spills rather than failing"
	assertEquals "b outgrew device 0 and moved" 1 "$(dev_of "$MNT/model/b")"
	assertEquals "its bytes, whole" "$(sum_of "$src")" "$(sum_of "$MNT/model/b")"
	assertEquals "dev0.spills" 1 "$(stat_of dev0.spills)"
	assertEquals "spills" 1 "$(stat_of spills)"
	assertContains "$(cat "$VY_LOG")" "moved from device 0 to 1: device 0 has no room for"
	: >"$MNT/model/c"
	assertEquals "device 1 lacks room for another like b: the next file goes where there is" 2 "$(dev_of "$MNT/model/c")"
	assertEquals "dev0: a" $((30 << 20)) "$(stat_of dev0.resident_bytes)"
	cap=$(getfattr --only-values -n user.vyre.capacity "$MNT/model/b")
	assertTrue "b's capacity holds it: $cap" "[ $cap -ge $((50 << 20)) ]"
	assertEquals "dev1: b, all of it" "$cap" "$(stat_of dev1.resident_bytes)"
	mkdir "$MNT/pinned"
	setfattr -n user.vyre.device -v 2 "$MNT/pinned"
	head -c 30M /dev/urandom >"$MNT/pinned/a"
	cp "$src" "$MNT/pinned/b" 2>/dev/null
	assertNotEquals "asked for device 2: no spill" 0 $?
	assertEquals "b stays on 2" 2 "$(dev_of "$MNT/pinned/b")"
	head -c 30M /dev/urandom >"$MNT/model/moved"
	setfattr -n user.vyre.device -v 0 "$MNT/model/moved" || fail "move"
	dd if=/dev/zero of="$MNT/model/moved" bs=1M count=8 seek=30 conv=notrunc status=none 2>/dev/null
	assertNotEquals "moved by hand: pinned, no spill" 0 $?
	assertEquals "still on 0" 0 "$(dev_of "$MNT/model/moved")"
	assertEquals "spills, still" 1 "$(stat_of spills)"
	rm -f "$src"
	rm -rf "$MNT"/*
	assertEquals "nothing left" 0 "$(stat_of resident_bytes)"
	unmount_vyrefs
	assertReleased
}

# vyrefs cp -r copies a directory in name order, so a model larger than
# one device fills them in shard (layer) order, whatever order the source
# lists its files in.
test_vyrefs_cp_fills_devices_in_shard_order() {
	mount_devices || return 0
	src=$(mktemp -d)
	for k in 5 3 1 4 2; do
		head -c 20M /dev/urandom >"$src/model-0000$k-of-00005.safetensors"
	done
	"$VYREFS" cp -r "$src" "$MNT/m" || fail "vyrefs cp -r"
	got=$(for k in 1 2 3 4 5; do printf '%s ' "$(dev_of "$MNT/m/model-0000$k-of-00005.safetensors")"; done)
	assertEquals "three on device 0, then the roomiest" "0 0 0 1 1 " "$got"
	for k in 1 2 3 4 5; do
		assertEquals "shard $k" "$(sum_of "$src/model-0000$k-of-00005.safetensors")" "$(sum_of "$MNT/m/model-0000$k-of-00005.safetensors")"
	done
	assertEquals "no spill was needed" 0 "$(stat_of spills)"
	rm -rf "$src" "$MNT/m"
	unmount_vyrefs
	assertReleased
}

# Readers read straight from the daemon (O_DIRECT) while the file moves
# round the three devices: every read is the file's bytes, whole.
test_a_move_under_concurrent_readers() {
	mount_devices || return 0
	src=$(mktemp)
	head -c 24M /dev/urandom >"$src"
	cp "$src" "$MNT/f"
	want=$(sum_of "$src")
	assertEquals 0 "$(dev_of "$MNT/f")"
	p0=$(stat_of peer_bytes) h0=$(stat_of h2d_bytes)
	bad=$(mktemp)
	start_readers "$MNT/f" "$want" 12 "$bad"
	moves=0
	for to in 1 2 0 2 1 0; do
		setfattr -n user.vyre.device -v $to "$MNT/f" || fail "move to $to"
		moves=$((moves + 1))
		assertEquals "on $to" "$to" "$(dev_of "$MNT/f")"
	done
	wait "${readers[@]}"
	assertEquals "every read saw the whole file: $(cat "$bad")" 0 "$(wc -c <"$bad")"
	assertEquals "the bytes after" "$want" "$(sum_of "$MNT/f")"
	assertEquals "each move one peer copy of the file" $((moves * (24 << 20))) $(($(stat_of peer_bytes) - p0))
	assertEquals "no byte from the host" "$h0" "$(stat_of h2d_bytes)"
	assertEquals "the old memory freed: dev0 holds it" $((24 << 20)) "$(stat_of dev0.resident_bytes)"
	assertEquals "dev1 nothing" 0 "$(stat_of dev1.resident_bytes)"
	assertEquals "dev2 nothing" 0 "$(stat_of dev2.resident_bytes)"
	setfattr -n user.vyre.device -v 0 "$MNT/f"
	assertEquals "a move to where it is copies nothing" $((moves * (24 << 20))) $(($(stat_of peer_bytes) - p0))
	rm -f "$src" "$bad"
	unmount_vyrefs
	assertReleased
}

# A sparse file keeps its holes when it moves: only its data is copied.
test_a_sparse_file_moves_its_data_only() {
	mount_devices || return 0
	truncate -s 40M "$MNT/s"
	printf 'head' | dd of="$MNT/s" conv=notrunc status=none
	printf 'tail' | dd of="$MNT/s" bs=1 seek=$((40 << 20 - 4)) conv=notrunc status=none
	want=$(sum_of "$MNT/s")
	p0=$(stat_of peer_bytes)
	setfattr -n user.vyre.device -v 1 "$MNT/s" || fail "move"
	assertEquals "$want" "$(sum_of "$MNT/s")"
	assertEquals "two granules of data copied" $((4 << 20)) $(($(stat_of peer_bytes) - p0))
	assertEquals "and held" $((4 << 20)) "$(stat_of dev1.resident_bytes)"
	unmount_vyrefs
	assertReleased
}

test_copies_between_devices_are_peer_copies() {
	need python3 || return 0
	mount_devices || return 0
	mkdir "$MNT/a" "$MNT/b"
	setfattr -n user.vyre.device -v 0 "$MNT/a"
	setfattr -n user.vyre.device -v 2 "$MNT/b"
	src=$(mktemp)
	head -c $((5 << 20)) /dev/urandom >"$src"
	cp "$src" "$MNT/a/x"
	h0=$(stat_of h2d_bytes) d0=$(stat_of d2h_bytes) p0=$(stat_of peer_bytes)
	python3 -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY); o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
n, left = 0, os.fstat(i).st_size
while left:
    k = os.copy_file_range(i, o, left)
    assert k > 0
    left -= k
' "$MNT/a/x" "$MNT/b/y"
	assertEquals "peer bytes" $((5 << 20)) $(($(stat_of peer_bytes) - p0))
	assertEquals "no host-to-device byte" "$h0" "$(stat_of h2d_bytes)"
	assertEquals "no device-to-host byte" "$d0" "$(stat_of d2h_bytes)"
	assertEquals "copy_file_range: on device 2" 2 "$(dev_of "$MNT/b/y")"
	cmp "$src" "$MNT/b/y"
	assertEquals "byte-exact" 0 $?
	# ctl copy with offsets, between devices, in a sequence with fills on
	# both sides: steps in order, one part per stretch on one device.
	truncate -s 1M "$MNT/b/z"
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY); os.write(fd, sys.argv[2].encode()); os.close(fd)' \
		"$MNT/.vyre/ctl" $'fill a/x 17 0 4096\ncopy a/x b/z 0 8192 8192\nfill b/z 34 0 4096\n'
	assertEquals "the sequence ran" 0 $?
	assertContains "$(tail -1 "$MNT/.vyre/log")" "ok steps=3"
	exp=$(mktemp)
	{ head -c 4096 /dev/zero | tr '\0' '\042'; head -c 4096 /dev/zero; head -c 4096 /dev/zero | tr '\0' '\021'; tail -c +4097 "$src" | head -c 4096; head -c $((1048576 - 16384)) /dev/zero; } >"$exp"
	cmp "$exp" "$MNT/b/z"
	assertEquals "fill, peer copy, fill: byte-exact" 0 $?
	assertEquals "peer bytes of the ctl copy" $(((5 << 20) + 8192)) $(($(stat_of peer_bytes) - p0))
	rm -f "$src" "$exp"
	unmount_vyrefs
	assertReleased
}

test_peer_off_copies_through_host_memory() {
	need python3 || return 0
	mount_devices peer=off || return 0
	assertEquals "no peers" "peers" "$(grep '^peers' "$MNT/.vyre/device" | head -1)"
	mkdir "$MNT/a"
	setfattr -n user.vyre.device -v 1 "$MNT/a"
	head -c $((3 << 20)) /dev/urandom >"$MNT/x"
	h0=$(stat_of h2d_bytes) d0=$(stat_of d2h_bytes)
	python3 -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY); o = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o644)
assert os.copy_file_range(i, o, 3 << 20) == 3 << 20' "$MNT/x" "$MNT/a/y"
	assertEquals "staged, said so" $((3 << 20)) "$(stat_of peer_staged_bytes)"
	assertEquals "no peer bytes" 0 "$(stat_of peer_bytes)"
	assertEquals "up from the host" $((3 << 20)) $(($(stat_of h2d_bytes) - h0))
	assertEquals "down to the host" $((3 << 20)) $(($(stat_of d2h_bytes) - d0))
	cmp "$MNT/x" "$MNT/a/y"
	assertEquals "byte-exact" 0 $?
	unmount_vyrefs
	assertReleased
}

test_a_launch_over_two_devices_is_refused_before_it_runs() {
	mount_devices || return 0
	mkdir "$MNT/one"
	setfattr -n user.vyre.device -v 1 "$MNT/one"
	head -c 4096 /dev/zero >"$MNT/one/y"
	head -c 4096 /dev/zero >"$MNT/x"
	assertEquals 0 "$(dev_of "$MNT/x")"
	s0=$(stat_of steps)
	out=$(echo 'launch std.axpy_f32 n=1024 one/y x f32:2 u64:1024' 2>&1 >"$MNT/.vyre/ctl")
	assertNotEquals "refused" 0 $?
	assertContains "$(cat "$MNT/.vyre/log")" "launch std.axpy_f32 names buffers on two devices: 'one/y' is on device 1, 'x' on device 0 (Fix: move them to one device first, e.g. setfattr -n user.vyre.device -v 1 x)"
	assertEquals "nothing ran" "$s0" "$(stat_of steps)"
	assertEquals "x untouched" "$(head -c 4096 /dev/zero | sha256sum)" "$(sha256sum <"$MNT/x")"
	unmount_vyrefs
	assertReleased
}

test_a_full_device_says_which_and_where_there_is_room() {
	mount_devices || return 0
	mkdir "$MNT/d1"
	setfattr -n user.vyre.device -v 1 "$MNT/d1"
	head -c 16M /dev/urandom >"$MNT/d1/keep"
	want=$(sum_of "$MNT/d1/keep")
	head -c 60M /dev/zero >"$MNT/d1/big" 2>/dev/null
	assertNotEquals "ENOSPC" 0 $?
	assertContains "$(cat "$VY_LOG")" "device 1 is full"
	assertContains "$(cat "$VY_LOG")" "device 0 has $BUDGET bytes free, device 2 has $BUDGET bytes free"
	assertContains "$(cat "$VY_LOG")" "Fix: move it to a device with room: setfattr -n user.vyre.device -v N FILE"
	rm -f "$MNT/d1/big"
	head -c 56M /dev/zero >"$MNT/fill0"
	assertEquals 0 "$(dev_of "$MNT/fill0")"
	setfattr -n user.vyre.device -v 0 "$MNT/d1/keep" 2>/dev/null
	assertNotEquals "no room on device 0 for the move" 0 $?
	assertContains "$(cat "$VY_LOG")" "from device 1 to 0: device 0 has no room for the file"
	assertEquals "the file stays where it was" 1 "$(dev_of "$MNT/d1/keep")"
	assertEquals "intact" "$want" "$(sum_of "$MNT/d1/keep")"
	assertEquals "device 1 holds it still" $((16 << 20)) "$(stat_of dev1.resident_bytes)"
	rm -f "$MNT/d1/keep" "$MNT/fill0"
	assertEquals "back to the baseline" 0 "$(stat_of resident_bytes)"
	unmount_vyrefs
	assertReleased
}

test_devices_picks_some_and_refuses_what_is_not_there() {
	[ "$backend" = host ] || { skip_test "host_devices is the host backend's"; return 0; }
	mount_vyrefs "host_devices=3,host_memory=256M,devices=0,2" || { fail "mount"; return 1; }
	assertEquals "the two named" "0 2" "$(awk '$1 == "ordinal" { printf "%s%s", s, $2; s = " " }' "$MNT/.vyre/device")"
	: >"$MNT/f"
	setfattr -n user.vyre.device -v 2 "$MNT/f"
	assertEquals 2 "$(dev_of "$MNT/f")"
	setfattr -n user.vyre.device -v 1 "$MNT/f" 2>/dev/null
	assertNotEquals "device 1 is not mounted" 0 $?
	unmount_vyrefs
	assertReleased
	dir=$(mktemp -d) || return 1
	out=$("$VYREFS" -f -o backend=host,host_devices=2,devices=0+5 "$dir" 2>&1)
	assertNotEquals "refused" 0 $?
	rmdir "$dir"
	assertContains "$out" "device 5: the host backend presents 2 device(s) (host_devices) (Fix: name devices below host_devices"
}

. tests/shunit.sh
