#!/usr/bin/env bash
# A mount over a directory survives its daemon (docs/tier.md "A daemon's
# death"): through real survive=on mounts over a DIR in the test's own temp
# dir on disk, a kill -9 of the daemon keeps what was not yet written back
# (the successor serves it and writes it back), keeps what was loaded (no
# second load), dies in the middle of a write-back and the successor
# finishes it, and a successor over another directory refuses.
. tests/fs/lib.sh
. tests/survive/lib.sh
. tests/tier/lib.sh

tearDown() {
	unmount_vyrefs
	rm -rf "$DIR" "$WORK"
	rm -f "${ARM:-/nonexistent}"
	drop_log
}

# A unit's bytes of FILE: its sha256.
unit_sum() { dd if="$1" bs=2M skip="$2" count=1 status=none | sha256sum | cut -d' ' -f1; }

test_a_takeover_keeps_what_is_not_written_back_and_writes_it_back() {
	make_data "$DIR/model.bin" $((8 * MB))
	make_data "$DIR/ckpt.bin" $((6 * MB))
	make_data "$WORK/new" $((6 * MB))
	cp "$DIR/ckpt.bin" "$WORK/old"
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	cmp "$DIR/model.bin" "$MNT/model.bin" || fail "read before"
	assertEquals "loaded once" $((8 * MB)) "$(stat_of tier_loaded_bytes)"
	# Units 1 and 2 of the checkpoint written, held on the device.
	dd if="$WORK/new" of="$MNT/ckpt.bin" bs=1M skip=2 seek=2 count=4 conv=notrunc status=none || fail "the write"
	assertEquals "dirty before" $((2 * UNIT)) "$(xattr_of "$MNT/ckpt.bin" user.vyre.dirty)"
	assertEquals "DIR still old" "$(unit_sum "$WORK/old" 1)" "$(unit_sum "$DIR/ckpt.bin" 1)"
	kill_daemon || return
	# The successor serves the written bytes, keeps them dirty, and has
	# the model's bytes without loading them again.
	assertEquals "dirty after" $((2 * UNIT)) "$(xattr_of "$MNT/ckpt.bin" user.vyre.dirty)"
	assertEquals "written back after" 0 "$(stat_of tier_writebacks)"
	assertEquals "resident" yes "$(xattr_of "$MNT/model.bin" user.vyre.resident)"
	cmp "$DIR/model.bin" "$MNT/model.bin" || fail "read after"
	for u in 1 2; do
		assertEquals "unit $u as written" "$(unit_sum "$WORK/new" $u)" "$(unit_sum "$MNT/ckpt.bin" $u)"
	done
	assertEquals "not loaded again" 0 "$(stat_of tier_loaded_bytes)"
	assertEquals "unit 0 as DIR's" "$(unit_sum "$WORK/old" 0)" "$(unit_sum "$MNT/ckpt.bin" 0)"
	assertEquals "unit 0 loaded now" $UNIT "$(stat_of tier_loaded_bytes)"
	assertEquals "DIR still old after" "$(unit_sum "$WORK/old" 1)" "$(unit_sum "$DIR/ckpt.bin" 1)"
	# fsync: DIR holds them.
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$MNT/ckpt.bin" || fail "fsync"
	assertEquals "clean" 0 "$(xattr_of "$MNT/ckpt.bin" user.vyre.dirty)"
	assertEquals "unit 0 in DIR" "$(unit_sum "$WORK/old" 0)" "$(unit_sum "$DIR/ckpt.bin" 0)"
	for u in 1 2; do
		assertEquals "unit $u in DIR" "$(unit_sum "$WORK/new" $u)" "$(unit_sum "$DIR/ckpt.bin" $u)"
	done
}

test_the_successor_writes_back_after_the_delay_and_at_unmount() {
	make_data "$DIR/a" $((3 * MB))
	make_data "$WORK/new" $((3 * MB))
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	cp "$WORK/new" "$MNT/a" || fail "the write"
	cp "$WORK/new" "$MNT/b" || fail "a new file"
	mkdir "$MNT/d" && cp "$WORK/new" "$MNT/d/c" || fail "a new file in a new directory"
	kill_daemon || return
	assertEquals "dirty bytes" $((3 * 2 * UNIT)) "$(stat_of tier_dirty_bytes)"
	unmount_vyrefs
	cmp "$WORK/new" "$DIR/a" || fail "a"
	cmp "$WORK/new" "$DIR/b" || fail "b"
	cmp "$WORK/new" "$DIR/d/c" || fail "d/c"
}

# The daemon dies in the middle of a write-back: the bytes are in DIR's
# file, neither fsynced nor marked written. The successor finds them
# dirty and writes them back again.
test_a_death_in_the_middle_of_a_write_back_is_finished_by_the_successor() {
	make_data "$DIR/f" $((4 * MB))
	make_data "$WORK/new" $((4 * MB))
	ARM=$WORK/arm
	export LD_PRELOAD=$SHIM KILLSHIM_FSYNC=$ARM
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on"
	local rc=$?
	unset LD_PRELOAD KILLSHIM_FSYNC
	[ $rc = 0 ] || return
	cp "$WORK/new" "$MNT/f" || fail "the write"
	local old
	old=$(stat_of pid)
	touch "$ARM"
	# fsync: the daemon dies at DIR's fsync; the kernel resends the
	# request to the successor, which writes the file back and answers.
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$MNT/f" || fail "fsync across the death"
	assertFalse "the daemon died in the write-back" "[ -e '$ARM' ]"
	assertNotEquals "a successor serves" "$old" "$(stat_of pid)"
	assertEquals "clean" 0 "$(xattr_of "$MNT/f" user.vyre.dirty)"
	cmp "$WORK/new" "$DIR/f" || fail "DIR holds the bytes"
}

test_a_successor_over_another_directory_refuses_and_the_mount_ends() {
	make_data "$DIR/f" $MB
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	cat "$MNT/f" >/dev/null
	# DIR's path now names another directory: a successor must not mix
	# the kept files with it.
	mv "$DIR" "$DIR.moved" && mkdir "$DIR" || fail "the swap"
	kill -9 "$VY_DAEMON"
	wait_exit "$VY_PID" "$VY_EXIT_BOUND" || fail "the keeper did not end"
	assertContains "$(cat "$VY_LOG")" "another directory"
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	rmdir "$MNT" 2>/dev/null
	MNT=""
	rmdir "$DIR" && mv "$DIR.moved" "$DIR"
	assertEquals "DIR untouched" $MB "$(stat -c %s "$DIR/f")"
}

. tests/shunit.sh
