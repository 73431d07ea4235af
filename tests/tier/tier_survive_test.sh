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
	fsync_of "$MNT/ckpt.bin" || fail "fsync"
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
	mount_armed KILLSHIM_FSYNC || return
	cp "$WORK/new" "$MNT/f" || fail "the write"
	# fsync: the daemon dies at DIR's fsync; the kernel resends the
	# request to the successor, which writes the file back and answers.
	across_the_death fsync_of "$MNT/f" || fail "fsync across the death"
	assertEquals "clean" 0 "$(xattr_of "$MNT/f" user.vyre.dirty)"
	cmp "$WORK/new" "$DIR/f" || fail "DIR holds the bytes"
}

# mount_armed VAR: a survive=on backing mount whose processes load the
# kill shim with VAR=$ARM (armed once the test makes the file).
mount_armed() {
	ARM=$WORK/arm
	export LD_PRELOAD=$SHIM "$1=$ARM"
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on"
	local rc=$?
	unset LD_PRELOAD "$1"
	return $rc
}

# across_the_death CMD...: the shim armed, CMD run (the daemon dies in
# it), and a successor serving after it; CMD's status.
across_the_death() {
	local old rc
	old=$(stat_of pid)
	touch "$ARM"
	"$@"
	rc=$?
	assertFalse "the daemon died in: $*" "[ -e '$ARM' ]"
	assertNotEquals "a successor serves" "$old" "$(stat_of pid)"
	return $rc
}

fsync_of() { python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$1"; }

# A save by rename (write tmp, rename it final) whose daemon dies after
# DIR's rename and before the namespace's: the kernel's resend finds DIR's
# rename done, and the written bytes reach DIR under the new name.
test_a_rename_across_a_death_after_dirs_rename_completes() {
	make_data "$WORK/new" $((3 * MB))
	mount_armed KILLSHIM_AFTER_RENAME || return
	cp "$WORK/new" "$MNT/tmp" || fail "the write"
	across_the_death mv "$MNT/tmp" "$MNT/final" || fail "the rename across the death"
	assertEquals "the mount's names" final "$(ls "$MNT")"
	cmp "$WORK/new" "$MNT/final" || fail "final through the mount"
	fsync_of "$MNT/final" || fail "fsync"
	cmp "$WORK/new" "$DIR/final" || fail "DIR/final"
	assertFalse "DIR/tmp" "[ -e '$DIR/tmp' ]"
}

# A mkdir, a symlink, an exclusive create and a link whose daemon dies after DIR
# made the name and before the namespace kept it: the kernel's resend
# finds DIR's half, takes it for its own, and succeeds (before: EEXIST,
# for a name the program never had).
test_a_make_across_a_death_after_dirs_make_succeeds() {
	mount_armed KILLSHIM_AFTER_MAKE || return
	across_the_death mkdir "$MNT/d" || fail "mkdir across the death"
	across_the_death ln -s some/where "$MNT/l" || fail "symlink across the death"
	across_the_death python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))' \
		"$MNT/f" || fail "create across the death"
	across_the_death ln "$MNT/f" "$MNT/g" || fail "link across the death"
	assertEquals "the mount's names" "d f g l" "$(ls "$MNT" | xargs)"
	assertEquals "DIR's names" "d f g l" "$(ls "$DIR" | xargs)"
	assertEquals "f and g one file in DIR" "$(stat -c %i "$DIR/f")" "$(stat -c %i "$DIR/g")"
	assertEquals "f's links on the mount" 2 "$(stat -c %h "$MNT/f")"
	assertTrue "d a directory in DIR" "[ -d '$DIR/d' ]"
	assertEquals "l's target in DIR" some/where "$(readlink "$DIR/l")"
	assertEquals "f's mode in DIR" 640 "$(stat -c %a "$DIR/f")"
	echo more >"$MNT/f" || fail "a write to f"
	fsync_of "$MNT/f" || fail "fsync"
	assertEquals "DIR's f" more "$(cat "$DIR/f")"
	# A name DIR had before that the resend did not make stays: EEXIST.
	mkdir "$DIR/x" && echo keep >"$DIR/x/y"
	mkdir "$MNT/x" 2>/dev/null && fail "a mkdir over DIR's own directory"
	assertEquals "DIR's x kept" keep "$(cat "$DIR/x/y")"
}

# A file mapped across a death and unmapped after: its units are suspect
# and the successor has no sums (none are kept), so it compares them with
# DIR's own bytes rather than write them back whole (before: the whole
# file written again, DIR's mtime changed, and another host's next open
# loading it all again).
test_a_mapping_unmapped_after_a_death_is_compared_with_dir_not_rewritten() {
	make_data "$DIR/m" $((6 * MB))
	touch -d @1000000000 "$DIR/m"
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	mkfifo "$WORK/go"
	"$PWD/$BUILD/tests/client/vymap" wait "$MNT/m" <"$WORK/go" >"$WORK/out" 2>&1 &
	local mpid=$!
	exec 7>"$WORK/go"
	wait_for "the file is mapped" grep -q mapped "$WORK/out" || { exec 7>&-; wait $mpid; return; }
	kill_daemon || { exec 7>&-; wait $mpid; return; }
	exec 7>&- # vymap unmaps (it writes nothing)
	wait $mpid
	assertEquals "vymap: $(cat "$WORK/out")" 0 $?
	fsync_of "$MNT/m" || fail "fsync"
	assertEquals "clean" 0 "$(xattr_of "$MNT/m" user.vyre.dirty)"
	assertEquals "no byte written to DIR" 0 "$(stat_of tier_written_bytes)"
	assertEquals "DIR's file untouched" 1000000000 "$(stat -c %Y "$DIR/m")"
	assertEquals "its bytes" "$(sum_of "$DIR/m")" "$(sum_of "$MNT/m")"
}

# DIR's file replaced behind the mount, then a listing that takes the new
# file under its name, then a write to it and a death: the successor has
# the name and the new file, and writes the write back to it.
test_a_name_taken_again_at_a_listing_is_kept_through_a_death() {
	make_data "$DIR/x" $((3 * MB))
	make_data "$WORK/new" $((3 * MB))
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	cat "$MNT/x" >/dev/null
	make_data "$DIR/x.tmp" $((3 * MB)) && mv "$DIR/x.tmp" "$DIR/x" # another host's save
	ls "$MNT" >/dev/null
	dd if="$WORK/new" of="$MNT/x" conv=notrunc status=none || fail "the write"
	kill_daemon || return
	cmp "$WORK/new" "$MNT/x" || fail "x through the mount"
	fsync_of "$MNT/x" || fail "fsync after the takeover"
	cmp "$WORK/new" "$DIR/x" || fail "DIR/x"
}

# DIR's file replaced behind the mount while the mount holds a dirty unit
# of it, then a death: the successor opens DIR's file by name, finds
# another file there, and neither loads from it nor writes one unit into
# it (a file of two files' bytes): fsync says ESTALE, DIR's file is
# untouched, the mount's bytes stay.
test_a_successor_never_mixes_the_mounts_file_with_one_replacing_it() {
	make_data "$DIR/f" $((8 * MB))
	make_data "$WORK/unit" $UNIT
	mount_vyrefs "backing=$DIR,writeback_delay=1h,survive=on" || return
	head -c 16 "$MNT/f" >/dev/null
	dd if="$WORK/unit" of="$MNT/f" bs=2M seek=1 conv=notrunc status=none || fail "the write"
	make_data "$DIR/f.tmp" $((8 * MB)) && mv "$DIR/f.tmp" "$DIR/f" # another host's save
	cp "$DIR/f" "$WORK/other"
	kill_daemon || return
	fsync_of "$MNT/f" 2>/dev/null && fail "fsync wrote the mount's unit into another file"
	cmp "$WORK/other" "$DIR/f" || fail "DIR's new file changed"
	assertEquals "still dirty" $UNIT "$(xattr_of "$MNT/f" user.vyre.dirty)"
	assertContains "$(cat "$VY_LOG")" "another file holds its name"
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
