#!/usr/bin/env bash
# A mount over a directory (-o backing=DIR, docs/tier.md), through real
# mounts over a DIR in the test's own temp dir on disk: the tree and its
# metadata as DIR's with nothing loaded, a ranged read loading its units
# only, prefetch and evict, metadata changes in DIR when they return,
# write-back after the delay and at fsync and unmount, eviction in least
# recently used order sparing open, dirty and pinned files, a file larger
# than the device served from DIR, fsync failing and keeping the bytes when
# DIR is full, two mounts over one DIR, and DIR's symlinks never followed.
. tests/fs/lib.sh
. tests/fs/posix_lib.sh
. tests/tier/lib.sh

tearDown() {
	unmount_vyrefs
	[ -n "${MNT2:-}" ] && { fusermount3 -u "$MNT2" 2>/dev/null; rmdir "$MNT2" 2>/dev/null; MNT2=""; }
	[ -n "${SMALL:-}" ] && { umount "$SMALL" 2>/dev/null; rmdir "$SMALL" 2>/dev/null; SMALL=""; }
	rm -rf "$DIR" "$WORK"
	drop_log
}

# mount_over [OPTIONS]: a mount over $DIR (write-back held for an hour
# unless the options say otherwise: the tests say when it happens).
mount_over() {
	mount_vyrefs "backing=$DIR,writeback_delay=1h${1:+,$1}"
}

# Nothing dirty on the mount (a state to wait for).
all_clean() { [ "$(stat_of tier_dirty_bytes)" = 0 ]; }

# The tree as find lists it: path, type, mode, owner, group, size, mtime,
# link target; for DIR and the mount alike (the mount's .vyre left out).
tree_of() {
	(cd "$1" && find . -path ./.vyre -prune -o -printf '%p %y %m %U %G %s %T@ %l %n\n' | sort)
}

test_the_tree_is_dirs_and_looking_loads_nothing() {
	mkdir -p "$DIR/a/b" "$DIR/empty"
	make_data "$DIR/a/b/w.bin" $((5 * MB + 7))
	echo hello >"$DIR/a/hello"
	ln -s hello "$DIR/a/link"
	ln "$DIR/a/hello" "$DIR/a/hard"
	chmod 640 "$DIR/a/hello"
	chmod 1777 "$DIR/empty"
	setfattr -n user.origin -v dir "$DIR/a/hello"
	touch -d '2001-02-03 04:05:06.789' "$DIR/a/b/w.bin"
	if [ "$(id -u)" = 0 ]; then chown 65534:65534 "$DIR/a/b"; fi
	mount_over || return
	assertEquals "the tree" "$(tree_of "$DIR")" "$(tree_of "$MNT")"
	ls -lR "$MNT" >/dev/null
	du -s "$MNT" >/dev/null
	stat "$MNT/a/b/w.bin" >/dev/null
	assertEquals "nothing loaded" 0 "$(stat_of tier_loaded_bytes)"
	assertEquals "no load" 0 "$(stat_of tier_loads)"
	assertEquals "a symlink reads as DIR's" hello "$(readlink "$MNT/a/link")"
	assertEquals "two names, one inode" "$(stat -c %i "$MNT/a/hello")" "$(stat -c %i "$MNT/a/hard")"
	assertEquals "not resident" no "$(getfattr -n user.vyre.resident --only-values "$MNT/a/b/w.bin")"
	assertEquals "DIR's xattrs" dir "$(getfattr -n user.origin --only-values "$MNT/a/hello")"
	# df says where files live: DIR's filesystem.
	assertEquals "df" "$(df -B1 --output=size "$DIR" | tail -n 1)" "$(df -B1 --output=size "$MNT" | tail -n 1)"
}

test_a_ranged_read_loads_only_its_units() {
	make_data "$DIR/big" $((20 * MB + 123))
	mount_over || return
	# One 4 KiB read in the middle: its 2 MiB unit, no more.
	dd if="$MNT/big" of="$WORK/mid" bs=4k skip=$((9 * MB / 4096)) count=1 iflag=direct status=none || fail "dd"
	cmp "$WORK/mid" <(dd if="$DIR/big" bs=4k skip=$((9 * MB / 4096)) count=1 status=none) || fail "mid bytes"
	assertEquals "one unit loaded" $UNIT "$(stat_of tier_loaded_bytes)"
	assertEquals "partial" "partial $UNIT" "$(getfattr -n user.vyre.resident --only-values "$MNT/big")"
	# head -c 16: the first unit.
	assertEquals "head" "$(head -c 16 "$DIR/big" | od -An -tx1)" "$(head -c 16 "$MNT/big" | od -An -tx1)"
	assertEquals "two units loaded" $((2 * UNIT)) "$(stat_of tier_loaded_bytes)"
	# The whole file: the rest, each byte once, and the same bytes.
	cmp "$DIR/big" "$MNT/big" || fail "whole"
	assertEquals "every byte loaded once" $((20 * MB + 123)) "$(stat_of tier_loaded_bytes)"
	assertEquals "resident" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/big")"
	assertEquals "no error" 0 "$(stat_of tier_errors)"
}

test_prefetch_loads_whole_files_and_evict_gives_them_back() {
	mkdir "$DIR/m"
	make_data "$DIR/m/a" $((3 * MB))
	make_data "$DIR/m/b" 1000
	mount_over || return
	"$VYREFS" prefetch -r -q "$MNT/m" || fail "prefetch"
	assertEquals "loaded" $((3 * MB + 1000)) "$(stat_of tier_loaded_bytes)"
	assertEquals "a resident" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/m/a")"
	cmp "$DIR/m/a" "$MNT/m/a" || fail "a"
	assertEquals "read from the device" $((3 * MB + 1000)) "$(stat_of tier_loaded_bytes)"
	"$VYREFS" evict "$MNT/m/a" || fail "evict"
	assertEquals "a evicted" no "$(getfattr -n user.vyre.resident --only-values "$MNT/m/a")"
	assertEquals "one eviction" 1 "$(stat_of tier_evictions)"
	cmp "$DIR/m/a" "$MNT/m/a" || fail "a again"
	out=$("$VYREFS" prefetch "$WORK" 2>&1)
	assertEquals "a directory without -r: nothing, no error" "" "$out"
	echo x >"$WORK/plain"
	out=$("$VYREFS" prefetch "$WORK/plain" 2>&1) && fail "prefetch of a file elsewhere passed"
	assertContains "$out" "Fix:"
}

test_names_modes_owners_and_times_reach_dir_when_they_return() {
	mkdir "$DIR/d"
	echo old >"$DIR/d/f"
	mount_over || return
	mkdir "$MNT/d/new" || fail mkdir
	assertTrue "mkdir" "[ -d '$DIR/d/new' ]"
	echo hi >"$MNT/d/new/g" || fail create
	assertTrue "create" "[ -f '$DIR/d/new/g' ]"
	ln -s g "$MNT/d/new/s" && assertEquals "symlink" g "$(readlink "$DIR/d/new/s")"
	ln "$MNT/d/f" "$MNT/d/f2" && assertEquals "link" 2 "$(stat -c %h "$DIR/d/f")"
	mv "$MNT/d/f" "$MNT/d/new/moved" || fail mv
	assertTrue "rename" "[ -f '$DIR/d/new/moved' ] && [ ! -e '$DIR/d/f' ]"
	rm "$MNT/d/f2" && assertTrue "unlink" "[ ! -e '$DIR/d/f2' ]"
	assertEquals "the other name still reads" old "$(cat "$MNT/d/new/moved")"
	chmod 604 "$MNT/d/new/moved" && assertEquals "chmod" 604 "$(stat -c %a "$DIR/d/new/moved")"
	touch -d '2002-03-04 05:06:07' "$MNT/d/new/moved" &&
		assertEquals "utimes" "$(date -d '2002-03-04 05:06:07' +%s)" "$(stat -c %Y "$DIR/d/new/moved")"
	truncate -s 2 "$MNT/d/new/moved" && assertEquals "truncate" 2 "$(stat -c %s "$DIR/d/new/moved")"
	setfattr -n user.k -v v "$MNT/d/new/moved" && assertEquals "setxattr" v "$(getfattr -n user.k --only-values "$DIR/d/new/moved")"
	setfattr -x user.k "$MNT/d/new/moved" && assertFalse "removexattr" "getfattr -n user.k '$DIR/d/new/moved' 2>/dev/null"
	if [ "$(id -u)" = 0 ]; then
		chown 65534:65534 "$MNT/d/new/moved" && assertEquals "chown" "65534 65534" "$(stat -c '%u %g' "$DIR/d/new/moved")"
	fi
	rm "$MNT/d/new/s" "$MNT/d/new/g" "$MNT/d/new/moved"
	rmdir "$MNT/d/new" && assertTrue "rmdir" "[ ! -e '$DIR/d/new' ]"
	# DIR's own refusal: a directory DIR holds a file in is not empty.
	echo behind >"$DIR/d/behind"
	rmdir "$MNT/d" 2>/dev/null && fail "rmdir of a directory DIR holds a file in"
	assertEquals "a name made behind the mount is found" behind "$(cat "$MNT/d/behind")"
}

test_writes_reach_dir_at_fsync_after_the_delay_and_at_unmount() {
	make_data "$DIR/f" $((5 * MB))
	make_data "$WORK/new" $((3 * MB + 5))
	mount_over || return
	# Over an existing file, not at its start: the rest stays DIR's.
	dd if="$WORK/new" of="$MNT/f" bs=64k seek=17 conv=notrunc,fsync status=none || fail "dd"
	cp "$DIR/f" "$WORK/want"
	assertEquals "fsync: DIR holds it" "$(sum_of "$MNT/f")" "$(sum_of "$DIR/f")"
	assertEquals "clean" 0 "$(getfattr -n user.vyre.dirty --only-values "$MNT/f")"
	# Without fsync: dirty until unmount, which writes it back.
	cp "$WORK/new" "$MNT/g" || fail "cp"
	assertNotSame "not yet written back" "$(sum_of "$WORK/new")" "$(sum_of "$DIR/g")"
	assertTrue "dirty" "[ $(stat_of tier_dirty_bytes) -gt 0 ]"
	unmount_vyrefs
	assertEquals "unmount wrote it back" "$(sum_of "$WORK/new")" "$(sum_of "$DIR/g")"
	# The delay: the thread writes it back by itself.
	mount_over "writeback_delay=100ms" || return
	cp "$WORK/new" "$MNT/h" || fail "cp h"
	wait_for "write-back of h" all_clean
	assertEquals "written back" "$(sum_of "$WORK/new")" "$(sum_of "$DIR/h")"
	assertTrue "counted" "[ $(stat_of tier_writebacks) -ge 1 ]"
	# fsync of the root writes back every file.
	unmount_vyrefs
	mount_over || return
	cp "$WORK/new" "$MNT/i" || fail "cp i"
	python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$MNT" || fail "fsync of the root"
	assertEquals "fsyncdir wrote it back" "$(sum_of "$WORK/new")" "$(sum_of "$DIR/i")"
}

# mount_gated GATE_VAR: a mount over $DIR whose write-back the shim holds
# at $WORK/gate (KILLSHIM_FSYNC_GATE: at DIR's fsync; KILLSHIM_PWRITE_GATE:
# before its first write to a file of DIR's), written back 100 ms after.
mount_gated() {
	export LD_PRELOAD=$PWD/$BUILD/tests/survive/killshim.so "$1=$WORK/gate" KILLSHIM_PWRITE_UNDER=$DIR/
	mount_over "writeback_delay=100ms"
	local rc=$?
	unset LD_PRELOAD "$1" KILLSHIM_PWRITE_UNDER
	return $rc
}

# held_write_back GATE_VAR BYTES: such a mount, $MNT/f written from
# $WORK/old (BYTES of data), and its write-back held at the gate; 1 (the
# gate opened) when it never got there.
held_write_back() {
	make_data "$WORK/old" "$2"
	mount_gated "$1" || return 1
	touch "$WORK/gate"
	cp "$WORK/old" "$MNT/f" || fail "cp"
	wait_for "the write-back held at the gate" test -e "$WORK/gate.held" && return 0
	touch "$WORK/gate.open"
	return 1
}

# A write-back holds the file only while it reads a chunk back and writes
# it to DIR: a write that comes while DIR fsyncs (the background
# write-back, held there by the shim's gate) is answered at once, and stays dirty
# after that write-back, so the next one writes it (before, the write
# waited for DIR's fsync). A program's own fsync is not the case: the
# kernel holds the file's lock through FUSE's fsync, as through a write.
test_a_write_during_a_write_back_is_answered_and_stays_dirty() {
	make_data "$WORK/new" $((2 * MB))
	local gate=$WORK/gate
	held_write_back KILLSHIM_FSYNC_GATE $((4 * MB)) || return
	timeout 30 dd if="$WORK/new" of="$MNT/f" bs=1M conv=notrunc status=none
	assertEquals "a write while DIR fsyncs is answered" 0 $?
	assertEquals "all of it dirty while held" $((4 * MB)) "$(xattr_of "$MNT/f" user.vyre.dirty)"
	touch "$gate.open"
	wait_for "the write-backs" all_clean
	cp "$WORK/old" "$WORK/want"
	dd if="$WORK/new" of="$WORK/want" bs=1M conv=notrunc status=none
	assertEquals "DIR holds the write made meanwhile" "$(sum_of "$WORK/want")" "$(sum_of "$DIR/f")"
	assertEquals "clean" 0 "$(xattr_of "$MNT/f" user.vyre.dirty)"
	assertTrue "written back twice at least" "[ $(stat_of tier_writebacks) -ge 2 ]"
}

# A truncate that comes while a write-back holds a chunk read back and not
# yet written (review of bd9e2f7): it waits for that chunk, so the chunk's
# old bytes never land in DIR after it. Shrunk and grown back, DIR holds
# the zeros the mount does (before: the old bytes came back in DIR, the
# file clean).
test_a_truncate_during_a_write_back_is_never_undone_by_it() {
	held_write_back KILLSHIM_PWRITE_GATE $((6 * MB)) || return
	(timeout 60 truncate -s $((3 * MB)) "$MNT/f" && timeout 60 truncate -s $((6 * MB)) "$MNT/f") &
	local t=$!
	# Held 2 s at most (a bound: the truncates either end or wait for it).
	for _ in $(seq 40); do kill -0 $t 2>/dev/null || break; sleep 0.05; done
	touch "$WORK/gate.open"
	wait $t || fail "the truncates"
	wait_for "the write-backs" all_clean
	head -c $((3 * MB)) "$WORK/old" >"$WORK/want"
	head -c $((3 * MB)) /dev/zero >>"$WORK/want"
	assertEquals "the mount" "$(sum_of "$WORK/want")" "$(sum_of "$MNT/f")"
	assertEquals "DIR" "$(sum_of "$WORK/want")" "$(sum_of "$DIR/f")"
}

# A truncate to 0 while a write-back waits on DIR's fsync: the file turns
# clean, and the truncate's answer no longer waits for the write-back
# holding the namespace (a mkdir elsewhere waited for all of it).
test_a_truncate_during_dirs_fsync_keeps_the_namespace_answering() {
	held_write_back KILLSHIM_FSYNC_GATE $((4 * MB)) || return
	timeout 30 truncate -s 0 "$MNT/f"
	assertEquals "the truncate answered" 0 $?
	timeout 30 mkdir "$MNT/other"
	assertEquals "a mkdir elsewhere answered" 0 $?
	touch "$WORK/gate.open"
	wait_for "the write-back" all_clean
	assertEquals "DIR's file" 0 "$(stat -c %s "$DIR/f")"
	assertTrue "DIR's directory" "[ -d '$DIR/other' ]"
}

# A copy stuck in its client's file at unmount (a source on a filesystem
# that does not answer: the shim holds the daemon's pread of it): the
# daemon exits without teardown, and still writes back what is dirty
# first (before: those bytes were lost).
test_an_unmount_with_a_stuck_copy_still_writes_back() {
	need_daemon_sees "$WORK" || return 0
	make_data "$WORK/new" $((3 * MB))
	make_data "$WORK/src" $((2 * MB))
	export LD_PRELOAD=$PWD/$BUILD/tests/survive/killshim.so KILLSHIM_PREAD_HOLD=$WORK/src
	mount_over
	local rc=$?
	unset LD_PRELOAD KILLSHIM_PREAD_HOLD
	[ $rc = 0 ] || return
	cp "$WORK/new" "$MNT/f" || fail "cp"
	assertEquals "dirty" $((3 * MB)) "$(xattr_of "$MNT/f" user.vyre.dirty)"
	"$VYREFS" cp "$WORK/src" "$MNT/g" >/dev/null 2>&1 &
	local copier=$!
	wait_for "the copy held in its source" test -e "$WORK/src.held" || { touch "$WORK/src.open"; wait $copier; return; }
	unmount_vyrefs
	touch "$WORK/src.open"
	wait $copier
	assertContains "it exited without teardown" "$(cat "$VY_LOG")" "exiting without teardown"
	assertEquals "DIR holds the dirty file" "$(sum_of "$WORK/new")" "$(sum_of "$DIR/f")"
}

test_a_sequence_loads_its_files_and_what_it_wrote_goes_back_alone() {
	make_data "$DIR/f" $((6 * MB + 100))
	cp "$DIR/f" "$WORK/want"
	mount_over || return
	echo 'fill f 0x2a 4096 4096' >"$MNT/.vyre/ctl" || fail "fill: $(tail -n 1 "$MNT/.vyre/log")"
	assertEquals "loaded whole first" $((6 * MB + 100)) "$(stat_of tier_loaded_bytes)"
	printf '\x2a%.0s' $(seq 4096) | dd of="$WORK/want" bs=4096 seek=1 conv=notrunc status=none
	cmp "$WORK/want" "$MNT/f" || fail "the sequence's bytes and DIR's around them"
	python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$MNT" || fail "fsync of the root"
	cmp "$WORK/want" "$DIR/f" || fail "DIR holds what the sequence wrote"
	# Only the unit that changed was written: the others' sums matched.
	assertEquals "one unit written" $UNIT "$(stat_of tier_written_bytes)"
}

# From a review: each of these lost or changed bytes before its fix.
test_an_append_to_a_file_not_loaded_keeps_dirs_bytes() {
	printf 'line one\n' >"$DIR/log"
	make_data "$DIR/big" $((3 * MB))
	cp "$DIR/big" "$WORK/big"
	mount_over || return
	echo 'line two' >>"$MNT/log" || fail "append"
	printf X >>"$MNT/big" || fail "append big"
	printf X >>"$WORK/big"
	python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' "$MNT" || fail "fsync of the root"
	assertEquals "DIR's line and the new one" "$(printf 'line one\nline two')" "$(cat "$DIR/log")"
	cmp "$WORK/big" "$DIR/big" || fail "DIR's 3 MiB and the appended byte"
}

test_vyrefs_cp_out_of_a_file_not_loaded_copies_dirs_bytes() {
	make_data "$DIR/f" $((20 * MB + 1))
	mount_over || return
	"$VYREFS" cp "$MNT/f" "$WORK/out" || fail "vyrefs cp"
	cmp "$DIR/f" "$WORK/out" || fail "its bytes"
}

test_the_mounts_bytes_win_over_a_file_replaced_behind_it() {
	echo v1 >"$DIR/f"
	mount_over || return
	echo "the mount's v2" >"$MNT/f" || fail "write"
	echo v3 >"$DIR/f.tmp" && mv "$DIR/f.tmp" "$DIR/f" # another host's save by rename
	dd if=/dev/null of="$MNT/f" conv=notrunc,fsync status=none || fail "fsync"
	assertEquals "DIR holds the mount's bytes" "the mount's v2" "$(cat "$DIR/f")"
	assertEquals "the mount too" "the mount's v2" "$(cat "$MNT/f")"
}

test_the_mounts_own_changes_are_no_reason_to_load_again() {
	make_data "$DIR/f" $((8 * MB))
	mount_over || return
	cmp "$DIR/f" "$MNT/f" || fail "read"
	chmod 600 "$MNT/f" && touch "$MNT/f" && setfattr -n user.a -v b "$MNT/f" || fail "changes"
	cmp "$DIR/f" "$MNT/f" || fail "read again"
	assertEquals "loaded once" $((8 * MB)) "$(stat_of tier_loaded_bytes)"
	assertEquals "no reload" 0 "$(stat_of tier_reloads)"
}

# The host's death, stood in for by kill -9 of every process of the
# mount (keeper, daemon, standby): DIR holds what fsync promised, and
# every other unit its old bytes or its new ones, never another file's.
test_a_kill_after_fsync_leaves_dir_with_what_fsync_promised() {
	make_data "$DIR/f" $((6 * MB))
	cp "$DIR/f" "$WORK/old"
	make_data "$WORK/new" $((6 * MB))
	mount_over || return
	dd if="$WORK/new" of="$MNT/f" bs=1M count=2 conv=notrunc,fsync status=none || fail "the fsynced write"
	dd if="$WORK/new" of="$MNT/f" bs=1M skip=2 seek=2 count=4 conv=notrunc status=none || fail "the rest"
	local pids
	pids=$(pgrep -f -- "$MNT") || fail "no process of the mount (Fix: install procps)"
	kill -9 $pids
	wait "$VY_PID" 2>/dev/null
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	cmp -n $((2 * MB)) "$WORK/new" "$DIR/f" || fail "what fsync returned for is in DIR"
	for u in 1 2; do
		got=$(dd if="$DIR/f" bs=2M skip=$u count=1 status=none | sha256sum)
		old=$(dd if="$WORK/old" bs=2M skip=$u count=1 status=none | sha256sum)
		new=$(dd if="$WORK/new" bs=2M skip=$u count=1 status=none | sha256sum)
		assertTrue "unit $u: its old or its new bytes" "[ '$got' = '$old' ] || [ '$got' = '$new' ]"
	done
	rmdir "$MNT" 2>/dev/null
	MNT=""
}

test_eviction_takes_the_least_recently_used_clean_closed_file() {
	for f in a b c d e; do make_data "$DIR/$f" $((6 * MB)); done
	make_data "$WORK/dirty" $((6 * MB))
	# Room for about four of them: 28 MiB of files.
	mount_over "host_memory=32M,resident_budget=28M,pool_budget=0" || return
	cat "$DIR/a" >/dev/null
	cmp "$DIR/a" "$MNT/a" && cmp "$DIR/b" "$MNT/b" || fail "a b"
	exec 7<"$MNT/b" # b stays open
	cp "$WORK/dirty" "$MNT/dirty" || fail "dirty" # dirty: never evicted
	cmp "$DIR/c" "$MNT/c" || fail "c"
	cmp "$DIR/d" "$MNT/d" || fail "d" # a full device: a goes, the oldest clean closed one
	assertEquals "a evicted" no "$(getfattr -n user.vyre.resident --only-values "$MNT/a")"
	assertEquals "b open: kept" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/b")"
	assertEquals "dirty: kept" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/dirty")"
	cmp "$DIR/e" "$MNT/e" || fail "e" # then c
	assertEquals "c evicted" no "$(getfattr -n user.vyre.resident --only-values "$MNT/c")"
	assertEquals "b still" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/b")"
	assertEquals "evictions as few as the budget forced" 2 "$(stat_of tier_evictions)"
	cmp "$DIR/a" "$MNT/a" || fail "a loads again"
	exec 7<&-
	cmp "$WORK/dirty" "$MNT/dirty" || fail "the dirty file's bytes"
	assertEquals "no ENOSPC, no error" 0 "$(stat_of tier_errors)"
}

test_a_pinned_file_is_never_evicted() {
	for f in a b c d e; do make_data "$DIR/$f" $((6 * MB)); done
	mount_over "host_memory=32M,resident_budget=28M,pool_budget=0" || return
	cmp "$DIR/a" "$MNT/a" || fail "a"
	setfattr -n user.vyre.pin -v 1 "$MNT/a" || fail "pin"
	assertEquals "pinned" 1 "$(getfattr -n user.vyre.pin --only-values "$MNT/a")"
	for f in b c d e; do cmp "$DIR/$f" "$MNT/$f" || fail "$f"; done
	assertEquals "a pinned: kept" yes "$(getfattr -n user.vyre.resident --only-values "$MNT/a")"
	assertEquals "b, the oldest unpinned, went" no "$(getfattr -n user.vyre.resident --only-values "$MNT/b")"
	"$VYREFS" evict "$MNT/a" 2>/dev/null && fail "evicted a pinned file"
	setfattr -x user.vyre.pin "$MNT/a" || fail "unpin"
	"$VYREFS" evict "$MNT/a" || fail "evict once unpinned"
	assertEquals "a gone" no "$(getfattr -n user.vyre.resident --only-values "$MNT/a")"
}

test_a_file_larger_than_the_device_is_read_from_dir() {
	make_data "$DIR/huge" $((40 * MB))
	mount_over "host_memory=16M,resident_budget=12M,pool_budget=0" || return
	cmp "$DIR/huge" "$MNT/huge" || fail "cmp"
	assertTrue "read from DIR" "[ $(stat_of tier_direct_reads) -gt 0 ]"
	"$VYREFS" prefetch "$MNT/huge" 2>"$WORK/err" && fail "prefetch of a file larger than the device passed"
	assertContains "$(cat "$WORK/err")" "Fix:"
}

test_fsync_fails_with_dirs_errno_and_keeps_the_bytes_when_dir_is_full() {
	need_root "it mounts a small tmpfs as DIR" || return 0
	SMALL=$(mktemp -d /tmp/vyrefs-small.XXXXXX)
	mount -t tmpfs -o size=4m tmpfs "$SMALL" || { fail "tmpfs"; return; }
	rmdir "$DIR"
	DIR=$SMALL/d
	mkdir "$DIR"
	make_data "$WORK/big" $((8 * MB))
	mount_over || return
	cp "$WORK/big" "$MNT/big" || fail "cp: the device takes it"
	err=$(dd if=/dev/null of="$MNT/big" conv=notrunc,fsync status=none 2>&1) && fail "fsync passed on a full DIR"
	assertContains "DIR's errno" "$err" "No space left on device"
	cmp "$WORK/big" "$MNT/big" || fail "the bytes are kept"
	assertTrue "still dirty" "[ $(getfattr -n user.vyre.dirty --only-values "$MNT/big") -gt 0 ]"
	assertTrue "said in the log" "grep -q 'write-back of inode .* failed: No space left' '$VY_LOG'"
	mount -o remount,size=64m "$SMALL" || fail "room again"
	dd if=/dev/null of="$MNT/big" conv=notrunc,fsync status=none || fail "fsync once DIR has room"
	cmp "$WORK/big" "$DIR/big" || fail "DIR holds it"
	unmount_vyrefs
	umount "$SMALL" && rmdir "$SMALL"
	SMALL=""
	DIR=$(mktemp -d /var/tmp/vyrefs-dir.XXXXXX)
}

test_two_mounts_over_one_dir_see_each_others_synced_files_at_open() {
	echo one >"$DIR/f"
	mount_over || return
	local first=$MNT first_pid=$VY_PID first_log=$VY_LOG
	mount_over || return
	MNT2=$MNT
	local second_pid=$VY_PID second_log=$VY_LOG
	assertEquals "both read" one "$(cat "$first/f")$(cat "$MNT2/f" >/dev/null)"
	echo two >"$first/f"
	dd if=/dev/null of="$first/f" conv=notrunc,fsync status=none || fail "fsync"
	assertEquals "the other's next open" two "$(cat "$MNT2/f")"
	echo three >"$MNT2/new"
	dd if=/dev/null of="$MNT2/new" conv=notrunc,fsync status=none || fail "fsync new"
	assertEquals "a new file, found by name" three "$(cat "$first/new")"
	assertTrue "a reload counted" "[ $(stat_of tier_reloads) -ge 1 ] || [ $(awk '\$1 == \"tier_reloads\" { print \$2 }' "$first/.vyre/stats") -ge 1 ]"
	fusermount3 -u "$MNT2"
	wait "$second_pid" 2>/dev/null
	rmdir "$MNT2"
	MNT2=""
	rm -f "$second_log"
	MNT=$first VY_PID=$first_pid VY_LOG=$first_log
}

test_changes_behind_the_mount_show_at_the_next_listing_and_open() {
	mkdir "$DIR/d"
	echo a >"$DIR/d/gone"
	echo b >"$DIR/d/kept"
	echo c >"$DIR/d/swapped"
	mount_over || return
	assertEquals "listed" "gone kept swapped" "$(ls "$MNT/d" | tr '\n' ' ' | sed 's/ $//')"
	cat "$MNT/d/swapped" >/dev/null
	rm "$DIR/d/gone"
	rm "$DIR/d/swapped" && echo "another file" >"$DIR/d/swapped"
	echo new >"$DIR/d/new"
	assertEquals "the next listing" "kept new swapped" "$(ls "$MNT/d" | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "the other file under the same name" "another file" "$(cat "$MNT/d/swapped")"
	exec 7<"$MNT/d/kept"
	rm "$DIR/d/kept"
	assertEquals "an open file stays" "kept new swapped" "$(ls "$MNT/d" | tr '\n' ' ' | sed 's/ $//')"
	exec 7<&-
}

test_a_symlink_planted_in_dir_is_never_followed() {
	echo mine >"$DIR/f"
	echo secret >"$WORK/secret"
	chmod 600 "$WORK/secret"
	mount_over || return
	stat "$MNT/f" >/dev/null # known to the mount as a regular file
	rm "$DIR/f"
	ln -s "$WORK/secret" "$DIR/f" # swapped behind the mount
	got=$(cat "$MNT/f" 2>/dev/null)
	assertNotEquals "the link's target is not read" secret "$got"
	mkdir "$DIR/sub"
	echo x >"$DIR/sub/g"
	ls "$MNT/sub" >/dev/null
	rm -r "$DIR/sub"
	ln -s "$WORK" "$DIR/sub" # a directory swapped for a link out of DIR
	got=$(cat "$MNT/sub/secret" 2>/dev/null)
	assertNotEquals "nothing outside DIR" secret "$got"
	echo new >"$MNT/sub/planted" 2>/dev/null
	assertFalse "nothing written outside DIR" "[ -e '$WORK/planted' ]"
}

test_files_a_user_makes_are_the_users_in_dir() {
	need_root "it makes files as another user on a root mount" || return 0
	chmod 1777 "$DIR"
	mount_over "$(others_opt)" || return
	as_nobody sh -c "echo x >'$MNT/theirs' && mkdir '$MNT/theirdir'" || fail "as nobody"
	assertEquals "file" "65534 65534" "$(stat -c '%u %g' "$DIR/theirs")"
	assertEquals "dir" "65534 65534" "$(stat -c '%u %g' "$DIR/theirdir")"
	echo root >"$DIR/rootfile"
	chmod 600 "$DIR/rootfile"
	as_nobody cat "$MNT/rootfile" 2>/dev/null && fail "nobody read root's 0600 file"
	as_nobody "$VYREFS" prefetch "$MNT/rootfile" 2>/dev/null && fail "nobody loaded root's 0600 file"
	assertEquals "nothing loaded for nobody" 0 "$(stat_of tier_loaded_bytes)"
}

# issue tier: "pjdfstest on a backing mount: as many failures as on DIR
# itself". pjdfstest is not packaged in Debian; the project's own POSIX
# script (tests/fs/posix_probe.c: every file type through create, chmod,
# chown, utimes, truncate, open, link, rename, unlink, rmdir, permissions,
# sticky and setgid directories; each step's errno, times changed and link
# counts) runs on DIR itself and through the mount, as root and as a user.
test_posix_steps_on_the_mount_are_dirs_own() {
	need_root "it runs the script as root and as another user" || return 0
	need setpriv || return 0
	local plain
	plain=$(mktemp -d /var/tmp/vyrefs-plain.XXXXXX) || return
	chmod 755 "$plain"
	mount_over "allow_other=on" || return
	# The one difference that is the mount's own: a FUSE mount is nodev
	# (libfuse's default), so a character device on it does not open.
	for who in root user; do
		want=$(posix_script "$plain" $who | grep -v '^chr open\|^chr append')
		got=$(posix_script "$MNT" $who | grep -v '^chr open\|^chr append')
		assertEquals "$who: steps" 214 "$(echo "$want" | wc -l)"
		assertEquals "$who: differences from DIR's own filesystem" "" "$(diff <(echo "$want") <(echo "$got"))"
	done
	rm -rf "$plain"
}

# The attacker: an unprivileged user against a root mount with
# allow_other, who may also write DIR's shared directory directly.
test_a_user_reaches_nothing_outside_dir_nor_what_dir_denies_them() {
	need_root "it attacks a root mount as another user" || return 0
	need setpriv || return 0
	nobody_bins || return
	mkdir "$DIR/pub" && chmod 1777 "$DIR/pub"
	echo "root's" >"$DIR/secret" && chmod 600 "$DIR/secret"
	echo outside >"$WORK/outside" && chmod 600 "$WORK/outside"
	chmod 755 "$WORK"
	mount_over "allow_other=on" || return
	as_nobody cat "$MNT/secret" 2>/dev/null && fail "read root's 0600 file"
	as_nobody "$NOBODY_VYREFS" prefetch "$MNT/secret" 2>/dev/null && fail "loaded root's 0600 file"
	as_nobody "$NOBODY_VYREFS" evict "$MNT/secret" 2>/dev/null && fail "evicted root's 0600 file"
	# A link through the mount to a file DIR denies them: the kernel
	# resolves it with their rights.
	as_nobody ln -s ../secret "$MNT/pub/l" || fail "a symlink of theirs"
	as_nobody cat "$MNT/pub/l" 2>/dev/null && fail "read root's file through a symlink"
	# Their own file, known to the mount, swapped in DIR for a symlink to a
	# root-only file outside DIR: the daemon never follows it.
	as_nobody sh -c "echo mine >'$MNT/pub/f'" || fail "their file"
	assertEquals "theirs" mine "$(as_nobody cat "$MNT/pub/f")"
	as_nobody sh -c "rm '$DIR/pub/f' && ln -s '$WORK/outside' '$DIR/pub/f'" || fail "the swap"
	got=$(as_nobody cat "$MNT/pub/f" 2>/dev/null)
	assertNotEquals "the daemon followed the planted link" outside "$got"
	got=$(cat "$MNT/pub/f" 2>/dev/null) # root, reading what the user planted
	assertNotEquals "root's read followed the planted link" outside "$got"
	# A directory of theirs swapped for a link out of DIR: nothing is
	# made there through the mount.
	as_nobody mkdir "$MNT/pub/d" || fail "their dir"
	as_nobody sh -c "rmdir '$DIR/pub/d' && ln -s '$WORK' '$DIR/pub/d'" || fail "the dir swap"
	echo planted >"$MNT/pub/d/planted" 2>/dev/null
	assertFalse "root's write landed outside DIR" "[ -e '$WORK/planted' ]"
	assertEquals "nothing of root's loaded" 0 "$(stat_of tier_loaded_bytes)"
}

# Their file, known to the mount, whose name in DIR they give behind the
# mount to a root-only file of their directory: a chmod, utimes or
# setxattr through the mount reaches their file or nothing, never root's
# (the daemon acts as root in DIR).
test_a_change_never_reaches_another_file_put_under_the_name_behind_the_mount() {
	need_root "it attacks a root mount as another user" || return 0
	need setpriv || return 0
	nobody_bins || return
	mkdir "$DIR/theirs" && chown 65534:65534 "$DIR/theirs"
	echo "root's" >"$DIR/theirs/roots" && chmod 600 "$DIR/theirs/roots"
	touch -d '2001-01-01' "$DIR/theirs/roots"
	mount_over "allow_other=on" || return
	as_nobody sh -c "echo mine >'$MNT/theirs/mine'" || fail "their file"
	as_nobody sh -c "mv '$DIR/theirs/mine' '$DIR/theirs/old' && mv '$DIR/theirs/roots' '$DIR/theirs/mine'" ||
		fail "the swap behind the mount"
	as_nobody chmod 666 "$MNT/theirs/mine" 2>/dev/null
	as_nobody touch -m -d '2030-01-01' "$MNT/theirs/mine" 2>/dev/null
	as_nobody setfattr -n user.planted -v 1 "$MNT/theirs/mine" 2>/dev/null
	assertEquals "root's mode" 600 "$(stat -c %a "$DIR/theirs/mine")"
	assertEquals "root's owner" 0 "$(stat -c %u "$DIR/theirs/mine")"
	assertEquals "root's mtime" "$(date -d 2001-01-01 +%s)" "$(stat -c %Y "$DIR/theirs/mine")"
	assertEquals "root's xattrs" "" "$(getfattr -d "$DIR/theirs/mine" 2>/dev/null)"
	assertEquals "root's bytes" "root's" "$(cat "$DIR/theirs/mine")"
}

test_a_bad_backing_directory_is_refused_with_a_fix() {
	out=$("$VYREFS" -f -o "backend=$backend,backing=$DIR/none" "$WORK" 2>&1) && fail "mounted over a missing DIR"
	assertContains "$out" "Fix:"
	out=$("$VYREFS" -f -o "backend=$backend,backing=relative" "$WORK" 2>&1) && fail "a relative DIR"
	assertContains "$out" "absolute path"
	if mountpoint -q "$WORK"; then fail "something mounted"; fi
}

. tests/shunit.sh
