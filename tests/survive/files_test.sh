#!/usr/bin/env bash
# survive=on (docs/survive.md): what a daemon kept in the state region is
# what its successor serves. Each test builds a tree, takes a snapshot of
# everything it is (tests/survive/snapshot.py: names, inode numbers, modes,
# owners, links, times, symlink targets, xattrs and ACLs, bytes), kills the
# daemon with SIGKILL, waits for the successor, and compares.
. tests/fs/lib.sh
SNAP="python3 $PWD/tests/survive/snapshot.py"
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-files.XXXXXX) || return 1
}

tearDown() {
	[ -n "$MNT" ] && [ "$MNT" != "$VY_NO_MOUNT" ] && ! vyrefs_live "$MNT" && fusermount3 -u "$MNT" 2>/dev/null
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}


# snap FILE: the tree's snapshot, .vyre/ left out.
snap() { $SNAP "$MNT" .vyre > "$1"; }

# kill_daemon: SIGKILL the serving daemon and wait for its successor. The
# kernel's cached names and attributes (1 s) go first, so what is read
# after comes from the successor.
kill_daemon() {
	local old
	old=$(stat_of pid)
	kill -9 "$old"
	wait_for 20 serving_pid_not "$old" && wait_for "its standby" standby_settled || return 1
	[ "$(id -u)" = 0 ] && echo 2 > /proc/sys/vm/drop_caches
	sleep 1.1 # past the entry and attribute timeouts: a bound, not a wait for an event
}

# A tree of every kind vyrefs keeps, with files of many shapes.
make_tree() {
	(
		cd "$MNT" || exit 1
		mkdir -p a/b/c d && echo hello > a/f && ln -s a/f s && ln -s /nowhere/at/all dangling
		ln a/f a/h && mkfifo p && mknod_ok=$([ "$(id -u)" = 0 ] && mknod cdev c 1 3 && echo y)
		python3 -c 'import os; os.setxattr("a/f", "user.colour", b"blue"); os.setxattr("a", "user.empty", b"")'
		chmod 640 a/f && chmod 1777 d && touch -d 2020-01-01 a/b && mv a/h a/h2
		for i in $(seq 1 40); do printf 'file %d\n' "$i" > a/b/c/n$i; done
		rm a/b/c/n7 && mv a/b/c/n8 a/n8 && mv -T a/b/c/n9 a/b/c/n10
		head -c 4097 /dev/urandom > page_and_one
		head -c $((1024 * 1024 + 1)) /dev/urandom > mib_and_one
		head -c $((3 * 1024 * 1024)) /dev/urandom > three_mib
		truncate -s 10M sparse && printf 'in the middle' | dd of=sparse bs=1 seek=5242880 conv=notrunc status=none
		: > empty
		command -v setfacl >/dev/null && setfacl -m u:65534:r a/f && setfacl -d -m g:65534:rx d
		true
	)
}

test_a_tree_survives_a_kill() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_tree || { fail "make the tree"; return; }
	local used inodes
	wait_for "a standby" standby_settled || return
	used=$(stat -f -c '%b %f %a' "$MNT") inodes=$(stat -f -c '%c %d' "$MNT")
	snap "$T/before"
	assertTrue "changes were kept" "[ $(stat_of kept_records) -gt 100 ]"
	assertEquals "nothing failed to be kept" 0 "$(stat_of kept_failures)"
	kill_daemon || { fail "no successor"; return; }
	snap "$T/after"
	assertEquals "the tree after the kill" "" "$(diff "$T/before" "$T/after")"
	assertEquals "df: the same blocks" "$used" "$(stat -f -c '%b %f %a' "$MNT")"
	assertEquals "df -i: the same inodes" "$inodes" "$(stat -f -c '%c %d' "$MNT")"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	assertContains "the successor says what it made" "$(cat "$VY_LOG")" "0 files lost their bytes"
	assertEquals "the bytes read back" "file 40" "$(cat "$MNT/a/b/c/n40")"
}

test_changes_between_three_kills_survive() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_tree || { fail "make the tree"; return; }
	local round
	for round in 1 2 3; do
		(
			cd "$MNT" || exit 1
			rm -r "a/b/c/n$((round + 10))" && mkdir "new$round" && echo "$round" > "new$round/x"
			mv a/n8 "a/n8.$round" 2>/dev/null || mv "a/n8.$((round - 1))" "a/n8.$round"
			chmod 600 "new$round/x" && truncate -s "$((round * 1000))" three_mib
			printf 'more' >> mib_and_one && python3 -c "import os; os.setxattr('a/f', 'user.round', b'$round')"
		) || { fail "changes of round $round"; return; }
		snap "$T/before"
		kill_daemon || { fail "no successor in round $round"; return; }
		snap "$T/after"
		assertEquals "the tree after kill $round" "" "$(diff "$T/before" "$T/after")"
	done
	assertEquals "takeovers" 3 "$(stat_of takeovers)"
}

# A 64K log is half full after a few hundred changes: the namespace is kept
# by checkpoints as well as by the log, across kills.
test_checkpoints_keep_the_namespace() {
	mount_vyrefs "survive=on,survive_log=64K" || { fail "mount"; return; }
	(
		cd "$MNT" && mkdir many || exit 1
		for i in $(seq 1 300); do echo "$i" > "many/f$i"; done
		for i in $(seq 1 300 3); do rm "many/f$i"; done
	) || { fail "make files"; return; }
	assertTrue "checkpoints were written" "[ $(stat_of kept_checkpoints) -gt 2 ]"
	snap "$T/before"
	kill_daemon || { fail "no successor"; return; }
	snap "$T/after"
	assertEquals "the tree after the kill" "" "$(diff "$T/before" "$T/after")"
	(cd "$MNT" && for i in $(seq 301 400); do echo "$i" > "many/f$i"; done) || fail "write after"
	assertTrue "the successor checkpoints too" "[ $(stat_of kept_checkpoints) -gt 0 ]"
	snap "$T/before"
	kill_daemon || { fail "no second successor"; return; }
	snap "$T/after"
	assertEquals "the tree after the second kill" "" "$(diff "$T/before" "$T/after")"
}

test_removed_files_stay_removed_and_their_memory_free() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	local empty
	wait_for "a standby" standby_settled || return
	empty=$(stat -f -c '%b %f %a %c %d' "$MNT")
	make_tree || { fail "make the tree"; return; }
	(cd "$MNT" && rm -rf ./* && [ -z "$(ls "$MNT")" ]) || { fail "remove the tree"; return; }
	kill_daemon || { fail "no successor"; return; }
	assertEquals "nothing listed" "" "$(ls -A "$MNT" | grep -v '^.vyre$')"
	assertEquals "df: as empty as at mount" "$empty" "$(stat -f -c '%b %f %a %c %d' "$MNT")"
	assertEquals "resident bytes" 0 "$(stat_of resident_bytes)"
}

# The keeper's open fds: each kept module image is one.
keeper_fds() { ls "/proc/$(stat_of keeper_pid)/fd" | wc -l; }

# Loaded modules are kept (fs/moddir_keep.c): the successor lists them with
# their numbers, bytes, modes, times and logs, has them loaded (a launch
# works on cuda), and a reader's handle reads on. A module being written
# at the death is not kept: its writer gets EBADF, never a mixed image.
test_loaded_modules_survive() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	local M="$MNT/.vyre/modules" fds0 before
	fds0=$(keeper_fds)
	cp tests/gpu/fixtures/kernels.ptx "$M/k.ptx" && cp tests/gpu/fixtures/kernels.ptx "$M/p.ptx" || { fail "copy modules"; return; }
	chmod 600 "$M/k.ptx" && touch -d 2021-02-03 "$M/p.ptx" || { fail "attributes"; return; }
	assertEquals "the keeper holds each module's image" $((fds0 + 2)) "$(keeper_fds)"
	# A log's times are its load's: the successor loads the module again.
	listing() { (cd "$M" && ls -i && stat -c '%n %a %s %Y %u' ./*.ptx && stat -c '%n %a %u' ./*.log && cat k.log); }
	before=$(listing)
	exec 8<"$M/k.ptx"
	head -c 100 <&8 >/dev/null
	# A writer that holds one fd (a close of any copy of it would load
	# what it wrote so far).
	python3 - "$M/w.ptx" "$T" >"$T/writer.out" 2>&1 <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b".version 8.0\n")
open(sys.argv[2] + "/wrote", "w").close()
while not os.path.exists(sys.argv[2] + "/go"):
    time.sleep(0.05)
try:
    os.write(fd, b".target sm_90\n")
    print("written")
except OSError as e:
    print(os.strerror(e.errno))
try:
    os.close(fd)
except OSError as e:
    print("close:", os.strerror(e.errno))
PY
	local writer=$!
	wait_for "the writer wrote" test -e "$T/wrote" || return
	kill_daemon || { fail "no successor"; return; }
	assertEquals "modules/ as it was" "" "$(diff <(echo "$before") <(listing))"
	cmp tests/gpu/fixtures/kernels.ptx "$M/k.ptx" || fail "the module's bytes"
	assertEquals "the reader reads on" "$(tail -c +101 tests/gpu/fixtures/kernels.ptx | head -c 50)" "$(head -c 50 <&8)"
	exec 8<&-
	touch "$T/go"
	wait "$writer"
	assertEquals "the writer of a module not yet loaded gets an error" "Bad file descriptor
close: Bad file descriptor" "$(cat "$T/writer.out")"
	assertFalse "what it wrote is not a module" "[ -e '$M/w.ptx' ]"
	assertContains "the log counts them" "$(cat "$VY_LOG")" "2 modules loaded again (0 lost)"
	if [ "$backend" = cuda ]; then
		python3 -c 'import struct,sys; sys.stdout.buffer.write(struct.pack("1024f", *[1.5] * 1024))' >"$MNT/y"
		echo "launch k.scale grid=4 block=256 y f32:2 u64:1024" >"$MNT/.vyre/ctl" || fail "a launch of the kept module"
		assertEquals "its kernel ran" "3.0" "$(python3 -c 'import struct,sys; v=set(struct.unpack("1024f", open(sys.argv[1],"rb").read())); print(*v)' "$MNT/y")"
		rm "$MNT/y" # its memory's fd leaves the keeper too
	fi
	local fds
	fds=$(keeper_fds)
	rm "$M/k.ptx" || fail "rm a kept module"
	assertEquals "its image leaves the keeper" $((fds - 1)) "$(keeper_fds)"
	kill_daemon || { fail "no second successor"; return; }
	assertEquals "the removed module stays removed" "p.log p.ptx" "$(ls "$M" | tr '\n' ' ' | sed 's/ $//')"
	fds=$(keeper_fds)
	cp tests/gpu/fixtures/kernels.ptx "$M/p.ptx" || fail "replace a kept module"
	assertEquals "a replaced module's old image goes" "$fds" "$(keeper_fds)"
}

test_survive_off_keeps_nothing() {
	mount_vyrefs "survive=off" || { fail "mount"; return; }
	echo x > "$MNT/f"
	assertEquals "no records" 0 "$(stat_of kept_records)"
}

. tests/shunit.sh
