#!/usr/bin/env bash
# `vyrefs cp` on the host backend (the same mapping protocol as a GPU's):
# byte-exact into and out of the mount for awkward sizes; a sparse source's
# holes are not read; -rp keeps modes and times as cp -rp does; no write
# permission on the destination gives EACCES as cp does; SIGINT leaves
# nothing mapped; without a mapping it falls back to read and write, with
# the same bytes.
. tests/fs/lib.sh

setUp() {
	mount_vyrefs "$(others_opt)" || { fail "mount"; return 1; }
	chmod 1777 "$MNT"
	SRC=$(mktemp -d /tmp/vyrefs-cp.XXXXXX) || return 1
	chmod 755 "$SRC"
}

tearDown() {
	rm -rf "$SRC"
	unmount_vyrefs
	drop_log
}

test_round_trips_are_byte_exact() {
	need_daemon_sees "$SRC" || return 0
	for size in 0 1 4095 $((1048576 + 7)) $((67108864 + 3)); do
		head -c "$size" /dev/urandom >"$SRC/f$size"
		h2d=$(stat_of h2d_bytes)
		"$VYREFS" cp "$SRC/f$size" "$MNT/f$size" || fail "cp in $size"
		assertEquals "in: each byte crossed to the device once ($size)" $((h2d + size)) "$(stat_of h2d_bytes)"
		cmp "$SRC/f$size" "$MNT/f$size" || fail "in: $size differs"
		d2h=$(stat_of d2h_bytes)
		"$VYREFS" cp "$MNT/f$size" "$SRC/back$size" || fail "cp out $size"
		assertEquals "out: and back once ($size)" $((d2h + size)) "$(stat_of d2h_bytes)"
		cmp "$SRC/f$size" "$SRC/back$size" || fail "out: $size differs"
	done
	assertEquals "nothing mapped" 0 "$(stat_of maps)"
	out=$("$VYREFS" cp -v "$SRC/f4095" "$MNT/g" 2>&1)
	assertContains "$out" "(by the daemon, around FUSE, 4095 of 4095 bytes moved"
	out=$("$VYREFS" cp -v "$MNT/g" "$MNT/g2" 2>&1)
	assertContains "$out" "(in the mount, device to device"
	cmp "$SRC/f4095" "$MNT/g2" || fail "in the mount"
}

test_sparse_source_holes_are_not_read() {
	need_daemon_sees "$SRC" || return 0
	truncate -s 100M "$SRC/sparse"
	printf 'hello' | dd of="$SRC/sparse" bs=1 seek=50000000 conv=notrunc status=none
	out=$("$VYREFS" cp -v "$SRC/sparse" "$MNT/sparse")
	moved=$(echo "$out" | sed -n 's/.*around FUSE, \([0-9]*\) of 104857600 bytes moved.*/\1/p')
	assertTrue "only the data was read: $out" "[ -n '$moved' ] && [ '$moved' -le 1048576 ]"
	cmp "$SRC/sparse" "$MNT/sparse" || fail "the holes read as zeros"
}

test_recursive_with_p_keeps_modes_and_times() {
	mkdir -p "$SRC/tree/sub"
	head -c 3000 /dev/urandom >"$SRC/tree/a"
	head -c 3000000 /dev/urandom >"$SRC/tree/sub/b"
	ln -s a "$SRC/tree/link"
	chmod 640 "$SRC/tree/a"
	chmod 750 "$SRC/tree/sub"
	touch -d '2020-01-02 03:04:05' "$SRC/tree/a" "$SRC/tree/sub/b" "$SRC/tree/sub"
	"$VYREFS" cp -rp "$SRC/tree" "$MNT/" || fail "cp -rp"
	cp -rp "$SRC/tree" "$SRC/ref"
	for f in a sub sub/b link; do
		# A directory's size is its filesystem's own (tmpfs /tmp: 40 + 20
		# an entry; vyrefs: 4096): only files' sizes are compared.
		fmt='%A %Y %s'
		[ -d "$SRC/ref/$f" ] && fmt='%A %Y'
		assertEquals "$f" "$(cd "$SRC/ref" && stat -c "$fmt" "$f")" "$(cd "$MNT/tree" && stat -c "$fmt" "$f")"
	done
	cmp "$SRC/tree/sub/b" "$MNT/tree/sub/b" || fail "bytes"
	assertEquals "a" "$(readlink "$MNT/tree/link")"
	err=$("$VYREFS" cp "$SRC/tree" "$MNT/t2" 2>&1)
	assertEquals "a directory without -r" 1 $?
	assertContains "$err" "omitting directory"
	"$VYREFS" cp -n "$SRC/tree/a" "$MNT/tree/sub/b" || fail "-n"
	cmp "$SRC/tree/sub/b" "$MNT/tree/sub/b" || fail "-n overwrote"
}

test_no_write_permission_gets_eacces_as_cp() {
	need setpriv || return 0
	nobody_bins || return 1
	head -c 5000 /dev/urandom >"$SRC/x"
	mkdir "$MNT/ro"
	chmod 755 "$MNT/ro"
	err=$(as_nobody "$NOBODY_VYREFS" cp "$SRC/x" "$MNT/ro/x" 2>&1)
	assertEquals "exit status as cp's" 1 $?
	assertContains "$err" "Permission denied"
	ref=$(setpriv --reuid=65534 --regid=65534 --clear-groups cp "$SRC/x" "$MNT/ro/x" 2>&1)
	assertContains "cp says the same: $ref" "$ref" "Permission denied"
}

test_read_permission_is_enough_to_copy_out_and_plain_files_fall_back() {
	need_daemon_sees "$SRC" || return 0
	need setpriv || return 0
	nobody_bins || return 1
	head -c 3000000 /dev/urandom >"$SRC/y"
	chmod 1777 "$SRC"
	cp "$SRC/y" "$MNT/y"
	chmod 644 "$MNT/y" # nobody may read it, not write or map it
	out=$(as_nobody "$NOBODY_VYREFS" cp -v "$MNT/y" "$SRC/y2" 2>&1)
	assertEquals 0 $?
	assertContains "$out" "(by the daemon, around FUSE, 3000000 of 3000000 bytes moved"
	cmp "$SRC/y" "$SRC/y2" || fail "out as another user"
	out=$("$VYREFS" cp -v "$SRC/y" "$SRC/y3" 2>&1)
	assertContains "no mount on either side: $out" "$out" "(plain read and write"
	cmp "$SRC/y" "$SRC/y3" || fail "plain bytes"
}

# The daemon's reads of the source wait until the daemon itself has seen
# its client go (tests/client/copygate.c), so the SIGINT always comes while
# the first piece is being read: the daemon copies that piece (4 MiB, one
# thread) and stops, whatever the machine's load.
test_sigint_stops_the_copy_and_the_mount_goes_on() {
	need_daemon_sees "$SRC" || return 0
	unmount_vyrefs
	local gate=$SRC/z
	COPYGATE_FILE=$gate LD_PRELOAD=$PWD/$BUILD/tests/client/copygate.so mount_vyrefs || { fail "mount"; return 1; }
	head -c $((64 << 20)) /dev/zero >"$gate"
	h2d=$(stat_of h2d_bytes)
	# A background job starts with SIGINT ignored; a terminal's would not.
	env --default-signal=INT "$VYREFS" cp --threads=1 "$gate" "$MNT/z" &
	pid=$!
	wait_for "the daemon reads the source" test -e "$gate.reading" || { kill "$pid"; return 1; }
	kill -INT "$pid"
	# Bounded: a client whose close waits for the copy never exits.
	wait_for "vyrefs cp exits on SIGINT" exited "$pid" || return 1
	wait "$pid"
	assertEquals "interrupted: killed by SIGINT" 130 $?
	# The daemon ends the copy (and closes the source) once it saw that.
	wait_for "the daemon ends the copy" source_closed "$gate" || return 1
	assertFalse "the daemon saw its client go" "[ -e '$gate.timedout' ]"
	assertEquals "the daemon copied the piece it was reading, then stopped" $((h2d + (4 << 20))) "$(stat_of h2d_bytes)"
	assertEquals "nothing left mapped" 0 "$(stat_of mapped_bytes)"
	"$VYREFS" cp "$gate" "$MNT/z" || fail "a copy after"
	cmp "$gate" "$MNT/z" || fail "bytes after"
	assertEquals 0 "$(stat_of mapped_bytes)"
}

# source_closed FILE: the daemon holds no descriptor of FILE.
source_closed() {
	! ls -l /proc/"$VY_DAEMON"/fd 2>/dev/null | awk -v f="$1" '$NF == f { n++ } END { exit !n }'
}

# Issue "newcomer 3": a source the daemon refuses to read (a file of the
# kernel's state, here sysfs, whose size is not its bytes) fails with the
# daemon's Fix, and leaves nothing at the destination.
test_a_refused_copy_leaves_nothing_behind() {
	local sys
	sys=$(find /sys/kernel -maxdepth 1 -type f -readable -size +0 2>/dev/null | head -n 1)
	[ -n "$sys" ] || { skip_test "no readable sysfs file of a nonzero size here"; return 0; }
	out=$("$VYREFS" cp "$sys" "$MNT/from-sys" 2>&1)
	assertNotEquals "refused" 0 $?
	assertContains "$out" "a filesystem of the kernel's state"
	assertContains "$out" "Fix:"
	assertFalse "nothing left at the destination" "[ -e '$MNT/from-sys' ]"
}

# The plain way reads the source's data only and keeps its holes, as cp's
# --sparse=auto (a 1 TiB sparse file copied out of a chroot's mount took
# hours of zeros before).
test_the_plain_way_keeps_holes() {
	truncate -s 1G "$SRC/sparse"
	printf 'hello' | dd of="$SRC/sparse" bs=1 seek=500000000 conv=notrunc status=none
	printf 'end' | dd of="$SRC/sparse" bs=1 seek=$((1024 * 1024 * 1024 - 3)) conv=notrunc status=none
	truncate -s 512M "$SRC/tail-hole"
	printf 'head' | dd of="$SRC/tail-hole" conv=notrunc status=none
	local f out
	for f in sparse tail-hole; do
		out=$("$VYREFS" cp -v "$SRC/$f" "$SRC/$f.copy" 2>&1)
		assertContains "no mount on either side: $out" "$out" "(plain read and write"
		assertEquals "$f: its size" "$(stat -c %s "$SRC/$f")" "$(stat -c %s "$SRC/$f.copy")"
		assertTrue "$f: holes stay holes ($(stat -c %b "$SRC/$f.copy") blocks)" "[ $(stat -c %b "$SRC/$f.copy") -le 1024 ]"
		cmp "$SRC/$f" "$SRC/$f.copy" || fail "$f: the bytes"
	done
}

# A source on a filesystem the daemon cannot see (a chroot's root, a mount
# of another namespace: not in its mountinfo) is copied the plain way, as
# cp after copy_file_range's EXDEV, -v saying why (issue "newcomer 3": the
# copy failed and left an empty file). A tmpfs mounted in a mount
# namespace of the copy's own stands in for a chroot's root.
test_a_file_the_daemon_cannot_see_goes_the_plain_way() {
	need_root "a mount namespace of the copy's own" || return 0
	need_mount_ns || return 0
	local out
	out=$(unshare -m --propagation private sh -c '
		d=$(mktemp -d /tmp/vyrefs-ns.XXXXXX) && mount -t tmpfs none "$d" &&
		head -c 3000001 /dev/urandom >"$d/f" &&
		"$1" cp -v "$d/f" "$2/f" && cmp "$d/f" "$2/f" && echo same &&
		"$1" cp -v "$2/f" "$d/back" && cmp "$d/f" "$d/back" && echo back
		umount "$d"; rmdir "$d"' sh "$VYREFS" "$MNT" 2>&1)
	assertContains "into the mount: $out" "$out" "plain read and write"
	assertContains "$out" "not in the daemon's /proc/self/mountinfo"
	assertContains "the bytes" "$out" "same"
	assertContains "and out" "$out" "back"
	assertEquals "3000001" "$(stat -c %s "$MNT/f")"
}

. tests/shunit.sh
