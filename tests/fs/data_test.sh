#!/usr/bin/env bash
# File bytes on the device through a real mount: round trips, ranged reads,
# appends, sparse writes, truncation, fallocate, device-side cp, parallel
# writers, ENOSPC, and every byte released at unmount.
. tests/fs/lib.sh
WORK=""

setUp() {
	WORK=$(mktemp -d /tmp/vyrefs-work.XXXXXX) || return 1
	mount_vyrefs || { fail "mount"; return 1; }
}

oneTimeTearDown() { :; }

tearDown() {
	unmount_vyrefs
	rm -rf "$WORK"
	drop_log
}

test_round_trips_are_byte_exact() {
	for size in 0 1 4095 4096 1048583 67108864; do
		make_data "$WORK/src" "$size"
		cp "$WORK/src" "$MNT/f$size" || fail "cp $size"
		assertEquals "size $size" "$size" "$(stat -c %s "$MNT/f$size")"
		cmp "$WORK/src" "$MNT/f$size" || fail "cmp $size"
		assertEquals "sha $size" "$(sha256sum <"$WORK/src")" "$(sha256sum <"$MNT/f$size")"
	done
	# Every byte written went to the device, in max_write pieces at most.
	assertEquals "h2d bytes" $((0 + 1 + 4095 + 4096 + 1048583 + 67108864)) "$(stat_of h2d_bytes)"
}

# A front-to-back write copies nothing once the file has 2 MiB: it grows in
# place (core/store.h). Below that it moves by doubling, so all the device
# copies of its whole life add up to under 2 MiB, and the fit at close
# gives back whole pieces, copying nothing either.
test_sequential_write_grows_in_place() {
	make_data "$WORK/src" 100000000
	d2d=$(stat_of d2d_bytes)
	dd if="$WORK/src" of="$MNT/grow" bs=64K status=none || fail "dd"
	fitted=$(((100000000 * 9 / 8 + 2 * 1048576) / 512))
	for _ in $(seq 100); do # RELEASE, and so the fit, comes after close returns
		[ "$(stat -c %b "$MNT/grow")" -le $fitted ] && break
		sleep 0.05
	done
	assertTrue "fitted at close: $(stat -c %b "$MNT/grow") blocks" "[ $(stat -c %b "$MNT/grow") -le $fitted ]"
	moved=$(($(stat_of d2d_bytes) - d2d))
	assertTrue "growth and fit copied $moved bytes for a 100 MB file" "[ $moved -lt 2097152 ]"
	assertTrue "it grew in place" "[ $(stat_of grows) -gt 0 ]"
	cmp "$WORK/src" "$MNT/grow" || fail "content"
}

# 4 KiB appends until ENOSPC on a 256 MiB mount: the file reaches 99% of
# what df showed available, and past its first 2 MiB no byte is copied and
# no file moves (issue "hardening": this was quadratic near the budget).
test_appends_fill_the_budget_in_place() {
	unmount_vyrefs
	mount_vyrefs "resident_budget=256M" || { fail "mount"; return 1; }
	avail=$(df -B1 --output=avail "$MNT" | tail -n 1 | tr -d " ")
	dd if=/dev/zero of="$MNT/fill" bs=4k count=513 status=none || fail "the first 2 MiB"
	d2d=$(stat_of d2d_bytes) moves=$(stat_of moves)
	assertTrue "a small file moves while it grows: $moves" "[ $moves -gt 0 ] && [ $d2d -lt 2097152 ]"
	# Bounded: 1 MiB past the 256 MiB budget, so it ends at ENOSPC or there.
	timeout 300 dd if=/dev/zero of="$MNT/fill" bs=4k count=$(((256 + 1) * 256 - 513)) oflag=append conv=notrunc status=none 2>"$WORK/err"
	assertNotEquals "dd ends at ENOSPC" 0 $?
	assertContains "$(cat "$WORK/err")" "No space left on device"
	size=$(stat -c %s "$MNT/fill")
	assertTrue "the file has $size of the $avail bytes df showed" "[ $((size * 100)) -ge $((avail * 99)) ]"
	assertEquals "no byte copied past 2 MiB" "$d2d" "$(stat_of d2d_bytes)"
	assertEquals "no move past 2 MiB" "$moves" "$(stat_of moves)"
	assertTrue "it grew in place" "[ $(stat_of grows) -gt 0 ]"
	cmp -s -n "$size" "$MNT/fill" /dev/zero || fail "content"
	rm "$MNT/fill"
	assertEquals 0 "$(stat_of resident_bytes)"
}

test_ranged_reads_at_odd_offsets() {
	make_data "$WORK/src" 3000017
	cp "$WORK/src" "$MNT/f"
	for range in "0 1" "1 4095" "4095 2" "4097 65537" "1048575 3" "2999999 18" "3000000 17"; do
		set -- $range
		want=$(tail -c +$(($1 + 1)) "$WORK/src" | head -c "$2" | sha256sum)
		got=$(dd if="$MNT/f" iflag=skip_bytes,count_bytes skip="$1" count="$2" status=none | sha256sum)
		assertEquals "range $1+$2" "$want" "$got"
	done
	# Past the end: nothing.
	assertEquals 0 "$(dd if="$MNT/f" iflag=skip_bytes skip=3000017 status=none | wc -c)"
	# One small read moves only what is needed: at most one max_read page run.
	before=$(stat_of d2h_bytes)
	dd if="$MNT/f" of=/dev/null iflag=direct bs=4096 skip=100 count=1 status=none
	assertEquals "d2h for one 4K direct read" 4096 $(($(stat_of d2h_bytes) - before))
}

# O_TRUNC truncates at open (libfuse asks for atomic O_TRUNC: no SETATTR).
test_shorter_overwrite_truncates() {
	printf 'abcdefgh' >"$MNT/o"
	printf 'x' >"$MNT/o"
	assertEquals "x" "$(cat "$MNT/o")"
	assertEquals 1 "$(stat -c %s "$MNT/o")"
	head -c 2000000 /dev/urandom >"$MNT/o"
	printf 'short' >"$MNT/o"
	assertEquals "short" "$(cat "$MNT/o")"
	: >"$MNT/o"
	assertEquals 0 "$(stat -c %s "$MNT/o")"
	assertEquals "no buffer once empty" 0 "$(stat_of resident_bytes)"
}

test_append_adds_at_the_end() {
	printf 'one\n' >"$MNT/log"
	printf 'two\n' >>"$MNT/log"
	for i in $(seq 3 50); do echo "line $i" >>"$MNT/log"; done
	assertEquals "one" "$(head -n 1 "$MNT/log")"
	assertEquals "two" "$(sed -n 2p "$MNT/log")"
	assertEquals "line 50" "$(tail -n 1 "$MNT/log")"
	assertEquals 50 "$(wc -l <"$MNT/log")"
}

test_sparse_writes_read_zeros_in_the_gap() {
	printf 'head' >"$MNT/s"
	printf 'tail' | dd of="$MNT/s" bs=1 seek=1000000 conv=notrunc status=none
	assertEquals 1000004 "$(stat -c %s "$MNT/s")"
	assertEquals "head" "$(head -c 4 "$MNT/s")"
	assertEquals "tail" "$(tail -c 4 "$MNT/s")"
	zeros=$(dd if="$MNT/s" iflag=skip_bytes,count_bytes skip=4 count=999996 status=none | tr -d '\0' | wc -c)
	assertEquals "gap is zeros" 0 "$zeros"
}

test_truncate_up_and_down() {
	make_data "$WORK/src" 200000
	cp "$WORK/src" "$MNT/t"
	truncate -s 100000 "$MNT/t"
	assertEquals 100000 "$(stat -c %s "$MNT/t")"
	cmp -n 100000 "$WORK/src" "$MNT/t" || fail "kept bytes"
	truncate -s 300000 "$MNT/t"
	assertEquals 300000 "$(stat -c %s "$MNT/t")"
	cmp -n 100000 "$WORK/src" "$MNT/t" || fail "kept bytes after growing"
	# The old bytes past 100000 must not come back: zeros.
	assertEquals 0 "$(tail -c 200000 "$MNT/t" | tr -d '\0' | wc -c)"
	truncate -s 0 "$MNT/t"
	assertEquals 0 "$(stat -c %s "$MNT/t")"
	assertEquals 0 "$(stat_of resident_bytes)"
	truncate -s 64M "$MNT/y"
	assertEquals 67108864 "$(stat -c %s "$MNT/y")"
	assertEquals 0 "$(tr -d '\0' <"$MNT/y" | wc -c)"
	assertEquals "truncate moved no host bytes" 200000 "$(stat_of h2d_bytes)"
}

# A freed buffer goes to the pool and comes back for the next file: its old
# bytes must never show. 2 MiB: on cuda with survive=on, buffers of 1 MiB or
# less are slab slots, never pooled (core/pool.c).
test_reused_buffers_never_show_old_bytes() {
	head -c 2097152 /dev/zero | tr '\0' '\377' >"$WORK/ones"
	for i in 1 2 3; do
		cp "$WORK/ones" "$MNT/a$i"
		rm "$MNT/a$i"
		truncate -s 2097152 "$MNT/b$i"
		assertEquals "b$i is zeros" 0 "$(tr -d '\0' <"$MNT/b$i" | wc -c)"
		printf 'x' | dd of="$MNT/c$i" bs=1 seek=2097151 status=none
		assertEquals "c$i gap is zeros" 1 "$(tr -d '\0' <"$MNT/c$i" | wc -c)"
	done
	assertTrue "the pool served some" "[ $(stat_of pool_hits) -gt 0 ]"
}

test_fallocate_modes() {
	fallocate -l 1000000 "$MNT/fa" || fail "fallocate"
	assertEquals 1000000 "$(stat -c %s "$MNT/fa")"
	assertEquals 0 "$(tr -d '\0' <"$MNT/fa" | wc -c)"
	printf 'abc' >"$MNT/fk"
	fallocate --keep-size -l 4000000 "$MNT/fk" || fail "keep size"
	assertEquals 3 "$(stat -c %s "$MNT/fk")"
	assertTrue "capacity reserved" "[ $(stat -c %b "$MNT/fk") -ge 7812 ]"
	# Punching holes and zeroing ranges: tests/fs/posix_test.sh. Collapse
	# and insert range are refused, as tmpfs refuses them.
	err=$(fallocate --collapse-range -o 0 -l 4096 "$MNT/fa" 2>&1)
	assertNotEquals 0 $?
	assertContains "$err" "Operation not supported"
	assertEquals 1000000 "$(stat -c %s "$MNT/fa")"
}

test_cp_inside_the_mount_stays_on_the_device() {
	make_data "$WORK/src" 5000000
	cp "$WORK/src" "$MNT/w"
	h2d=$(stat_of h2d_bytes)
	d2d=$(stat_of d2d_bytes)
	cp "$MNT/w" "$MNT/w2"
	cmp "$WORK/src" "$MNT/w2" || fail "copy differs"
	assertEquals "no host-to-device bytes" "$h2d" "$(stat_of h2d_bytes)"
	assertTrue "device-to-device bytes" "[ $(($(stat_of d2d_bytes) - d2d)) -ge 5000000 ]"
}

test_parallel_writers_lose_nothing() {
	for i in $(seq 8); do make_data "$WORK/p$i" $((1048576 + i * 4099)); done
	pids=""
	for i in $(seq 8); do
		cp "$WORK/p$i" "$MNT/p$i" &
		pids="$pids $!"
	done
	wait $pids # not a bare wait: vyrefs is a child of this shell too
	for i in $(seq 8); do cmp "$WORK/p$i" "$MNT/p$i" || fail "p$i"; done
	# Disjoint ranges of one file, written at once.
	make_data "$WORK/big" 8388608
	truncate -s 8388608 "$MNT/one"
	pids=""
	for i in $(seq 0 7); do
		dd if="$WORK/big" of="$MNT/one" bs=1M skip=$i seek=$i count=1 conv=notrunc status=none &
		pids="$pids $!"
	done
	wait $pids
	assertEquals "$(sha256sum <"$WORK/big")" "$(sha256sum <"$MNT/one")"
}

# More writers than streams (8), each with copies in flight: a writer
# never holds a stream between requests, so none waits on another forever
# (the first write-behind did, and hung fio with 8 jobs).
test_more_writers_than_streams() {
	local n=16 i pids=""
	for i in $(seq $n); do make_data "$WORK/w$i" $((24 << 20)); done
	for i in $(seq $n); do
		timeout 120 dd if="$WORK/w$i" of="$MNT/w$i" bs=1M status=none &
		pids="$pids $!"
	done
	for p in $pids; do wait $p || fail "a writer failed or hung (exit $?)"; done
	for i in $(seq $n); do cmp "$WORK/w$i" "$MNT/w$i" || fail "w$i"; done
}

test_readers_and_writers_at_once() {
	make_data "$WORK/stable" 3000000
	cp "$WORK/stable" "$MNT/stable"
	want=$(sha256sum <"$WORK/stable")
	for i in $(seq 4); do make_data "$WORK/w$i" 2000000; done
	pids=""
	for i in $(seq 4); do
		(for _ in 1 2 3; do sha256sum <"$MNT/stable"; done >"$WORK/r$i") &
		pids="$pids $!"
		(for k in 1 2 3; do cp "$WORK/w$i" "$MNT/w$i.$k"; done) &
		pids="$pids $!"
	done
	wait $pids
	for i in $(seq 4); do
		assertEquals "reader $i saw the file whole each time" 3 "$(grep -c "$want" "$WORK/r$i")"
		for k in 1 2 3; do cmp "$WORK/w$i" "$MNT/w$i.$k" || fail "w$i.$k"; done
	done
}

# Write-behind: 4 KiB writes gather in 4 MiB pinned slots, so 3072 writes
# are 3 device copies, counted exactly; with write_behind=off, 3072.
test_write_behind_gathers_small_writes() {
	make_data "$WORK/src" $((12 << 20))
	local ops0 bytes0 wb0
	ops0=$(stat_of h2d_ops) bytes0=$(stat_of h2d_bytes) wb0=$(stat_of wb_copies)
	dd if="$WORK/src" of="$MNT/wb" bs=4K status=none || fail "dd"
	assertEquals "slot copies" 3 $(($(stat_of wb_copies) - wb0))
	assertEquals "driver copies" 3 $(($(stat_of h2d_ops) - ops0))
	assertEquals "bytes" $((12 << 20)) $(($(stat_of h2d_bytes) - bytes0))
	cmp "$WORK/src" "$MNT/wb" || fail "content"
	unmount_vyrefs
	mount_vyrefs "write_behind=off" || { fail "mount"; return 1; }
	dd if="$WORK/src" of="$MNT/wb" bs=4K status=none || fail "dd"
	assertEquals "write_behind=off: one copy a write" 3072 "$(stat_of h2d_ops)"
	assertEquals 0 "$(stat_of wb_copies)"
	cmp "$WORK/src" "$MNT/wb" || fail "content"
}

# Gathered bytes are on the device before anything looks at them: a read
# through another open file, and a control sequence, while the writer still
# holds the file open; a fill lands after the write before it.
test_reads_and_sequences_see_gathered_writes() {
	exec 3>"$MNT/g"
	printf 'abcdef' >&3
	assertEquals "read while the writer is open" "abcdef" "$(cat "$MNT/g")"
	printf 'ghi' >&3
	echo "fill g 120 0 1" >"$MNT/.vyre/ctl" || fail "fill"
	assertEquals "the fill comes after the gathered write" "xbcdefghi" "$(cat "$MNT/g")"
	printf 'jk' >&3
	printf 'QQ' | dd of="$MNT/g" bs=1 seek=1 conv=notrunc status=none # a rewrite inside the slot
	sync "$MNT/g" 2>/dev/null || python3 -c "import os; os.fsync(3)" || fail "fsync"
	exec 3>&-
	assertEquals "xQQdefghijk" "$(cat "$MNT/g")"
}

# Readahead: a file read in order with 128 KiB O_DIRECT reads is copied from
# the device 2 MiB at a time, counted exactly; with readahead=off, once a read.
test_readahead_reads_in_order_with_few_copies() {
	make_data "$WORK/src" $((8 << 20))
	cp "$WORK/src" "$MNT/ra" || fail "cp"
	local ops0 bytes0
	ops0=$(stat_of d2h_ops) bytes0=$(stat_of d2h_bytes)
	dd if="$MNT/ra" of="$WORK/back" bs=128K iflag=direct status=none || fail "dd"
	cmp "$WORK/src" "$WORK/back" || fail "content"
	assertEquals "chunk copies" 4 "$(stat_of ra_copies)"
	assertEquals "driver copies" 4 $(($(stat_of d2h_ops) - ops0))
	assertEquals "bytes" $((8 << 20)) $(($(stat_of d2h_bytes) - bytes0))
	assertEquals "reads answered from readahead" 64 "$(stat_of ra_hits)"
	unmount_vyrefs
	mount_vyrefs "readahead=off" || { fail "mount"; return 1; }
	cp "$WORK/src" "$MNT/ra" || fail "cp"
	dd if="$MNT/ra" of="$WORK/back" bs=128K iflag=direct status=none || fail "dd"
	cmp "$WORK/src" "$WORK/back" || fail "content"
	assertEquals "readahead=off: one copy a read" 64 "$(stat_of d2h_ops)"
	assertEquals 0 "$(stat_of ra_hits)"
}

# A readahead chunk is a snapshot: after a write, a fill, a truncation or a
# copy into the bytes it holds, reads see the new bytes. The file stays open
# so the chunks stay (the last close gives them back).
test_readahead_never_serves_old_bytes() {
	local M=$((1 << 20))
	make_data "$WORK/model" $((8 * M))
	cp "$WORK/model" "$MNT/ra" || fail "cp"
	exec 3<"$MNT/ra"
	warm() { dd if="$MNT/ra" of=/dev/null bs=128K iflag=direct status=none || fail "warm"; }
	slice_is_model() { # MiB-offset, in 128 KiB blocks
		dd if="$MNT/ra" of="$WORK/got" bs=128K skip="$1" count=1 iflag=direct status=none || fail "read"
		dd if="$WORK/model" of="$WORK/want" bs=128K skip="$1" count=1 status=none
		cmp "$WORK/want" "$WORK/got" || fail "$2: old bytes served"
	}
	warm
	printf 'WRITE' | dd of="$WORK/model" bs=1 seek=$((6 * M + 1000)) conv=notrunc status=none
	printf 'WRITE' | dd of="$MNT/ra" bs=1 seek=$((6 * M + 1000)) conv=notrunc status=none || fail "write"
	slice_is_model 48 "after a write"
	warm
	echo "fill ra 66 $((6 * M + 2000)) 10" >"$MNT/.vyre/ctl" || fail "fill"
	printf 'BBBBBBBBBB' | dd of="$WORK/model" bs=1 seek=$((6 * M + 2000)) conv=notrunc status=none
	slice_is_model 48 "after a fill"
	warm
	truncate -s $((7 * M)) "$MNT/ra" "$WORK/model" && truncate -s $((8 * M)) "$MNT/ra" "$WORK/model" || fail "truncate"
	slice_is_model 56 "after truncation"
	warm
	python3 -c "
import os, sys
src, dst = os.open(sys.argv[1], os.O_RDONLY), os.open(sys.argv[2], os.O_WRONLY)
assert os.copy_file_range(src, dst, 4096, 0, $((6 * M + 8192))) == 4096
" "$MNT/ra" "$MNT/ra" || fail "copy_file_range"
	dd if="$WORK/model" of="$WORK/head" bs=4096 count=1 status=none
	dd if="$WORK/head" of="$WORK/model" bs=1 seek=$((6 * M + 8192)) conv=notrunc status=none
	slice_is_model 48 "after a copy into it"
	exec 3<&-
	cmp "$WORK/model" "$MNT/ra" || fail "whole file"
}

test_enospc_is_clean_and_says_why() {
	unmount_vyrefs
	mount_vyrefs "resident_budget=8M,pool_budget=0" || { fail "mount"; return 1; }
	dd if=/dev/zero of="$MNT/big" bs=1M count=16 status=none 2>"$WORK/err"
	assertNotEquals "dd must fail" 0 $?
	assertContains "$(cat "$WORK/err")" "No space left on device"
	assertContains "$(cat "$VY_LOG")" "no room for"
	assertContains "$(cat "$VY_LOG")" "(Fix: "
	size=$(stat -c %s "$MNT/big")
	assertTrue "some bytes landed" "[ $size -gt 0 ] && [ $size -le 8388608 ]"
	assertEquals "what landed is intact" 0 "$(tr -d '\0' <"$MNT/big" | wc -c)"
	rm "$MNT/big"
	assertEquals 0 "$(stat_of resident_bytes)"
	dd if=/dev/zero of="$MNT/again" bs=1M count=4 status=none || fail "room again after rm"
	avail=$(df -B1 --output=size "$MNT" | tail -n 1 | tr -d " ")
	assertEquals "df shows the budget" 8388608 "$avail"
}

test_unmount_releases_every_byte() {
	make_data "$WORK/src" 3000000
	cp "$WORK/src" "$MNT/k1"
	cp "$MNT/k1" "$MNT/k2"
	rm "$MNT/k1"
	unmount_vyrefs
	assertReleased
}

. tests/shunit.sh
