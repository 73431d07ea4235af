#!/usr/bin/env bash
# POSIX and Linux filesystem behaviour as tmpfs gives it (issue 19): special
# files, long names, sizes past the device, readdir under renames, coherence after direct
# writes, suid/sgid clearing, file handles, POSIX ACLs, statx btime, and an
# NFS export (skipped, with the reason, where the kernel has no nfsd).
# Issue "posix 2"'s comparisons are tests/fs/posix2_test.sh.
. tests/fs/lib.sh
. tests/fs/posix_lib.sh
WORK=""
TMPFS=""

setUp() {
	WORK=$(mktemp -d /tmp/vyrefs-work.XXXXXX) || return 1
	mount_vyrefs "${VY_OPTS:-}" || { fail "mount"; return 1; }
}

tearDown() {
	unmount_vyrefs
	if [ -n "$TMPFS" ]; then
		umount "$TMPFS" 2>/dev/null
		rmdir "$TMPFS"
		TMPFS=""
	fi
	rm -rf "$WORK"
	drop_log
}

test_special_files_keep_mode_and_rdev() {
	need_root "device nodes and chown" || return 0
	mkfifo -m 640 "$MNT/fifo" || fail "mkfifo"
	mknod -m 600 "$MNT/null" c 1 3 || fail "mknod c"
	mknod "$MNT/blk" b 7 200 || fail "mknod b"
	assertEquals "fifo 640" "fifo 640" "$(stat -c '%F %a' "$MNT/fifo")"
	assertEquals "character special file 1 3 600" "$(stat -c '%F %Hr %Lr %a' "$MNT/null")"
	assertEquals "block special file 7 200" "$(stat -c '%F %Hr %Lr' "$MNT/blk")"
	# The kernel gives them their behaviour: a pipe; a device node is not
	# opened on a nodev mount (libfuse's default), as on tmpfs -o nodev.
	(echo through >"$MNT/fifo") &
	local writer=$!
	assertEquals "through" "$(timeout 5 cat "$MNT/fifo")"
	wait $writer
	assertEquals "nodev" "Permission denied" "$(cat "$MNT/null" 2>&1 | sed 's/.*: //')"
	assertEquals "socket ok" "$("$PROBE" socket "$MNT/sock")"
	assertEquals "socket" "$(stat -c %F "$MNT/sock")"
	# No buffers: nothing resident.
	assertEquals 0 "$(stat_of resident_buffers)"
	# Links, renames, chmod, chown, times and unlink, as for any file.
	ln "$MNT/fifo" "$MNT/fifo2" || fail "link"
	assertEquals 2 "$(stat -c %h "$MNT/fifo")"
	mv "$MNT/blk" "$MNT/blk2" || fail "rename"
	chmod 604 "$MNT/blk2" && chown 12:34 "$MNT/blk2" || fail "chmod/chown"
	touch -d @1000000000 "$MNT/blk2" || fail "utimes"
	assertEquals "604 12 34 1000000000 7 200" "$(stat -c '%a %u %g %Y %Hr %Lr' "$MNT/blk2")"
	assertEquals "fifo2 sock" "$(cd "$MNT" && ls -d fifo2 sock | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "p c b s" "$(cd "$MNT" && find fifo null blk2 sock -printf '%y ' | sed 's/ $//')"
	rm "$MNT/fifo" "$MNT/fifo2" "$MNT/null" "$MNT/blk2" "$MNT/sock" || fail "unlink"
	assertEquals "" "$(ls -A "$MNT")"
	unmount_vyrefs
	assertReleased
}

test_tar_and_rsync_trees_with_special_files() {
	need_root "device nodes and chown" || return 0
	need tar rsync || return 0
	mkdir -p "$WORK/src/d"
	mkfifo -m 600 "$WORK/src/d/fifo"
	mknod -m 640 "$WORK/src/d/tty" c 5 0
	mknod "$WORK/src/blk" b 8 1
	printf 'data' >"$WORK/src/f"
	chown 7:8 "$WORK/src/d/tty"
	touch -h -d @1500000000 "$WORK/src/d/fifo" "$WORK/src/d/tty" "$WORK/src/blk"
	# Compared with the same on tmpfs (tar keeps whole seconds).
	listing() { (cd "$1" && find . -mindepth 1 -printf '%p %y %m %U %G %Ts ' -exec stat -c '%Hr,%Lr' {} \; | sort); }
	tar -C "$WORK/src" -cf "$WORK/t.tar" . || fail "tar -c"
	mount_tmpfs || return 0
	for root in "$MNT" "$TMPFS"; do
		mkdir "$root/t"
		tar -C "$root/t" -xpf "$WORK/t.tar" || fail "tar -x"
		rsync -a "$WORK/src/" "$root/r/" || fail "rsync -a"
	done
	assertEquals "tar -x" "$(listing "$TMPFS/t")" "$(listing "$MNT/t")"
	assertContains "$(listing "$MNT/t")" "./d/tty c 640 7 8 1500000000 5,0"
	assertEquals "rsync -a" "$(listing "$TMPFS/r")" "$(listing "$MNT/r")"
}

test_names_over_255_bytes_are_enametoolong() {
	local n255 n256 n1000 out
	n255=$(printf 'a%.0s' $(seq 255))
	n256=$(printf 'b%.0s' $(seq 256))
	n1000=$(printf 'c%.0s' $(seq 1000))
	: >"$MNT/$n255" || fail "a 255-byte name"
	mkdir "$MNT/d"
	: >"$MNT/f"
	for long in "$n256" "$n1000"; do
		out=""
		for op in stat chmod truncate rm rmdir "mv-from" "mv-to" "ln-to" "ln-s" mkdir mkfifo create; do
			case $op in
			stat) stat "$MNT/$long" ;;
			chmod) chmod 600 "$MNT/$long" ;;
			truncate) truncate -s 0 "$MNT/$long" ;;
			rm) rm "$MNT/$long" ;;
			rmdir) rmdir "$MNT/$long" ;;
			mv-from) mv "$MNT/$long" "$MNT/x" ;;
			mv-to) mv "$MNT/f" "$MNT/d/$long" ;;
			ln-to) ln "$MNT/f" "$MNT/d/$long" ;;
			ln-s) ln -s f "$MNT/d/$long" ;;
			mkdir) mkdir "$MNT/d/$long" ;;
			mkfifo) mkfifo "$MNT/d/$long" ;;
			create) : >"$MNT/d/$long" ;;
			esac 2>"$WORK/err"
			grep -q "File name too long" "$WORK/err" && out="$out $op" || out="$out $op:$(tr '\n' ' ' <"$WORK/err")"
		done
		assertEquals "${#long}-byte names" " stat chmod truncate rm rmdir mv-from mv-to ln-to ln-s mkdir mkfifo create" "$out"
	done
	assertTrue "[ -f '$MNT/f' ]"
	assertEquals "nothing made" "" "$(ls -A "$MNT/d")"
}

# errno's text from a command's stderr.
why() { "$@" 2>&1 >/dev/null | sed 's/.*: //' | head -n 1; }

# Sparse files (issue "posix"): a truncate up or a far write leaves holes
# that cost no device memory; a write into a hole gets memory for its
# granule only; SEEK_DATA and SEEK_HOLE say where; a punched hole gives
# whole pieces back; a sequence, a copy and a mapping see every byte
# backed; every byte reads as written or as zero.
test_sparse_files_keep_holes_free() {
	need fallocate || return 0
	unmount_vyrefs
	mount_vyrefs "resident_budget=64M" || { fail "mount"; return 1; }
	fallocate -l 32M "$MNT/a" || fail "fallocate"
	truncate -s 64M "$MNT/b" || fail "truncate past what is left"
	assertEquals "holes cost nothing" "67108864 0 33554432" \
		"$(stat -c '%s %b' "$MNT/b") $(stat_of resident_bytes)"
	head -c 4096 /dev/urandom >"$MNT.blk"
	dd if="$MNT.blk" of="$MNT/b" bs=4k seek=$((41 * 256)) conv=notrunc status=none || fail "write into a hole"
	assertEquals "one granule of memory" 4096 "$(stat -c %b "$MNT/b")"
	cmp -s -i 0:$((41 << 20)) -n 4096 "$MNT.blk" "$MNT/b" || fail "the bytes written"
	cmp -s -n $((41 << 20)) "$MNT/b" /dev/zero || fail "zeros before"
	assertEquals "data from 0, a hole at 0, data at 41M, the hole after it, nothing past" "41943040 0 42991616 44040192 ENXIO" "$(python3 - "$MNT/b" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
out = [os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE), os.lseek(fd, 41 << 20, os.SEEK_DATA),
       os.lseek(fd, 41 << 20, os.SEEK_HOLE)]
try:
    os.lseek(fd, 44 << 20, os.SEEK_DATA)
    out.append("data")
except OSError as e:
    out.append("ENXIO" if e.errno == 6 else str(e))
print(*out)
PY
)"
	# Truncated below its only piece, then up again: no memory, zeros.
	cp --sparse=always "$MNT/b" "$MNT/b2" 2>/dev/null || dd if="$MNT/b" of="$MNT/b2" bs=1M conv=sparse status=none
	truncate -s 10M "$MNT/b2" && truncate -s 50M "$MNT/b2"
	assertEquals "cut below its piece, grown again" "52428800 0" "$(stat -c '%s %b' "$MNT/b2")"
	cmp -s -n 52428800 "$MNT/b2" /dev/zero || fail "zeros after the cut"
	rm "$MNT/b2"
	fallocate -p -o 40M -l 4M "$MNT/b" || fail "punch"
	assertEquals "the punched piece went back" "0 33554432" "$(stat -c %b "$MNT/b") $(stat_of resident_bytes)"
	cmp -s -n 67108864 "$MNT/b" /dev/zero || fail "zeros after the punch"
	# A copy into a hole, and a sequence over holes, get memory first.
	python3 -c "import os; s = os.open('$MNT/a', os.O_RDONLY); d = os.open('$MNT/b', os.O_WRONLY); print(os.copy_file_range(s, d, 1 << 20, 0, 8 << 20))" >/dev/null || fail "copy_file_range"
	assertEquals "a granule for the copy" 4096 "$(stat -c %b "$MNT/b")"
	truncate -s 8M "$MNT/c"
	echo "fill c 7" >"$MNT/.vyre/ctl" || fail "fill: $(tail -n 2 "$VY_LOG")"
	assertEquals "a sequence backs every byte" 16384 "$(stat -c %b "$MNT/c")"
	assertEquals "filled" 8388608 "$(tr -d '\007' <"$MNT/c" | wc -c | awk -v n=8388608 '{ print n - $1 }')"
	# Writes in order into a truncated file (write-behind and readahead
	# copies in flight while holes get memory), and a cut between two
	# pieces: every byte and seek as written.
	assertEquals "in-order writes into holes, a cut between pieces" "ok 2097152 ENXIO 52428800" "$(python3 - "$MNT/d" <<'PY'
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT)
os.ftruncate(fd, 20 << 20)
blk = bytes(range(256)) * 16
for i in range(5120):
    os.pwrite(fd, blk, i * 4096)
os.close(fd)
fd = os.open(p, os.O_RDWR)
assert os.pread(fd, 4096, 7 << 20) == blk and os.pread(fd, 4096, (20 << 20) - 4096) == blk
for k in range(4):
    os.pread(fd, 128 << 10, k << 17) # readahead in flight
os.pwrite(fd, blk, 1 << 20)
os.pwrite(fd, blk, 90 << 20)         # a piece far away
os.ftruncate(fd, 1 << 20)
os.pwrite(fd, blk, 0)
os.pwrite(fd, blk, 90 << 20)
os.ftruncate(fd, 50 << 20)           # cut between the two pieces
assert os.pread(fd, 4096, 40 << 20) == bytes(4096)
out = ["ok", os.lseek(fd, 0, os.SEEK_HOLE)]
try:
    os.lseek(fd, 40 << 20, os.SEEK_DATA)
    out.append("data")
except OSError as e:
    out.append("ENXIO" if e.errno == 6 else str(e))
out.append(os.fstat(fd).st_size)
print(*out)
PY
)"
	rm "$MNT/a" "$MNT/b" "$MNT/c" "$MNT/d" "$MNT.blk"
	assertEquals "memory back to none" 0 "$(stat_of resident_bytes)"
}

# Sizes past the device's memory are holes, as tmpfs keeps them (issue
# "posix 2"): truncate, a far write and fallocate far out work; memory
# that is not there is ENOSPC (fallocate, a write), and comes back; only
# the kernel's own limit is EFBIG.
test_sizes_past_the_device_are_holes_and_no_room_is_enospc() {
	need fallocate || return 0
	unmount_vyrefs
	mount_vyrefs "resident_budget=64M" || { fail "mount"; return 1; }
	truncate -s 999999999999999 "$MNT/f" || fail "truncate far"
	dd if=/dev/zero of="$MNT/f" bs=4k count=1 seek=16M conv=notrunc status=none || fail "a write at 64 GiB"
	assertEquals "one granule for the far write" "999999999999999 4096" "$(stat -c '%s %b' "$MNT/f")"
	# Data past 1 TiB (or 8 times the device): holes before it would be
	# mapped granule by granule on a GPU, so it is refused with its Fix.
	assertEquals "data past 1 TiB" "File too large" \
		"$(why dd if=/dev/zero of="$MNT/f" bs=4k count=1 seek=1G conv=notrunc status=none)"
	# 1 TiB, or 8 times a device larger than 128 GiB (an H200: 1.1 TiB).
	reach=$(sed -n 's/.*this device maps holes up to byte \([0-9]*\) at most (Fix: keep data below that byte.*/\1/p' "$VY_LOG" | head -n 1)
	assertTrue "the refusal says how far data may lie: '$reach'" "[ '${reach:-0}' -ge 1099511627776 ] && [ '${reach:-0}' -lt 4398046511104 ]"
	assertEquals "past the kernel's limit" "File too large" \
		"$(why dd if=/dev/zero of="$MNT/f" bs=1 count=2 seek=9223372036854775806 conv=notrunc status=none)"
	truncate -s 65M "$MNT/f" || fail "a size past the budget is holes"
	assertEquals "holes cost nothing" "68157440 0" "$(stat -c '%s %b' "$MNT/f")"
	assertEquals "fallocate past the budget" "No space left on device" "$(why fallocate -l 65M "$MNT/g")"
	assertEquals "fallocate -n past the budget" "No space left on device" "$(why fallocate -n -l 65M "$MNT/g")"
	assertContains "$(cat "$VY_LOG")" "this mount's whole resident budget is 67108864 bytes (Fix: keep the file under the budget, or mount with a larger one"
	rm -f "$MNT/f" "$MNT/g"
	# Room that is taken now: ENOSPC for memory, holes still free; it comes back.
	fallocate -l 40M "$MNT/a" || fail "fallocate a"
	truncate -s 40M "$MNT/b" || fail "holes while 24M are left"
	assertEquals "no room now" "No space left on device" "$(why fallocate -l 40M "$MNT/b")"
	dd if=/dev/zero of="$MNT/b" bs=1M count=1 seek=39 conv=notrunc status=none || fail "a write into a hole"
	assertEquals "one granule of memory for it" 4096 "$(stat -c %b "$MNT/b")"
	rm "$MNT/a"
	fallocate -l 40M "$MNT/b" || fail "room again"
	assertEquals "40M of memory" 81920 "$(stat -c %b "$MNT/b")"
	assertEquals 41943040 "$(stat -c %s "$MNT/b")"
}

test_readdir_ends_while_its_entries_are_renamed() {
	for n in 10 3000; do
		mkdir "$MNT/d$n"
		(cd "$MNT/d$n" && seq 0 $((n - 1)) | xargs touch) || fail "make $n files"
		assertEquals "$n files" "readdir originals=$n repeats=0 new=0" "$(timeout 60 "$PROBE" readdir "$MNT/d$n" $n)"
		assertEquals "all renamed" "$n" "$(ls "$MNT/d$n" | grep -c '\.r$')"
	done
	# A new stream (and a rewind) sees the directory as it is now.
	assertEquals "$(seq 0 9 | sed 's/$/.r/' | sort)" "$(ls "$MNT/d10" | sort)"
}

test_buffered_reads_see_a_direct_write_that_ran_beside_them() {
	unmount_vyrefs
	mount_vyrefs "page_cache=on" || { fail "mount"; return 1; }
	# 4 buffered readers run while another fd writes 4 MiB with O_DIRECT
	# AIO; then the open fd and a fresh open read every byte new, 30 times.
	assertEquals "dio stale=0" "$(timeout 120 "$PROBE" dio "$MNT/f" 30)"
}

# suid_matrix DIR: for each mode, caller and operation, the mode after it.
# Callers: root; uid 1000 outside the file's group 0; uid 1000 in it.
suid_matrix() {
	local dir=$1 mode who op f n=0 run
	for mode in 6777 6767 4777 2777 2767 2757 0777; do
		for who in root user ingroup; do
			case $who in
			root) run="" ;;
			user) run="setpriv --reuid=1000 --regid=1000 --clear-groups" ;;
			ingroup) run="setpriv --reuid=1000 --regid=1000 --groups=0" ;;
			esac
			for op in write truncate fallocate fallocate-n chown chgrp-owner; do
				n=$((n + 1))
				f="$dir/s$n"
				printf 'abc' >"$f"
				if [ "$op" = chgrp-owner ]; then chown 1000:1000 "$f"; fi
				chmod "$mode" "$f"
				case $op in
				write) $run dd if=/dev/zero of="$f" bs=1 count=1 seek=1 conv=notrunc status=none ;;
				truncate) $run truncate -s 10 "$f" ;;
				fallocate) $run fallocate -l 8192 "$f" ;;
				fallocate-n) $run fallocate -n -l 8192 "$f" ;;
				chown) chown 1000:0 "$f" ;;
				chgrp-owner) $run chgrp 0 "$f" ;;
				esac 2>/dev/null
				echo "$mode $who $op rc=$? -> $(stat -c %a "$f")"
			done
		done
	done
}

test_suid_and_sgid_are_cleared_as_on_tmpfs() {
	need setpriv fallocate || return 0
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	local want got
	want=$(suid_matrix "$TMPFS")
	got=$(suid_matrix "$MNT")
	assertEquals "$want" "$got"
	# The kernel's rules, pinned (tmpfs on this kernel gives the same).
	for line in "6767 user write rc=0 -> 767" "6767 ingroup write rc=0 -> 2767" \
		"2767 user truncate rc=0 -> 767" "6777 root write rc=0 -> 6777" \
		"6777 user fallocate-n rc=0 -> 777" "2767 ingroup fallocate rc=0 -> 2767" \
		"6777 root chown rc=0 -> 777" "6767 root chown rc=0 -> 2767" \
		"2757 ingroup chgrp-owner rc=0 -> 757" "0777 user write rc=0 -> 777"; do
		assertContains "$got" "$line"
	done
}

test_file_handles_outlive_the_kernels_caches() {
	need_root "/proc/sys/vm/drop_caches" || return 0
	mkdir -p "$MNT/a/b"
	make_data "$WORK/data" 300000
	cp "$WORK/data" "$MNT/a/b/f" || fail "cp"
	local sum
	sum=$("$PROBE" sum "$WORK/data") || fail "sum"
	# name_to_handle_at, drop the kernel's dentries and inodes, then
	# open_by_handle_at reads the same bytes; a directory's handle finds
	# its path again through "..".
	assertEquals "handle ok $sum" "$(cd / && "$OLDPWD/$PROBE" handle "$MNT" "$MNT/a/b/f")"
	assertEquals "handle ok dir 3" "$(cd / && "$OLDPWD/$PROBE" handle "$MNT" "$MNT/a/b")"
	# A file removed before the handle is used: ESTALE.
	assertEquals "handle gone ESTALE" "$(cd / && "$OLDPWD/$PROBE" handle-gone "$MNT" "$MNT/a/b/f")"
}


test_posix_script_matches_tmpfs_as_root_and_as_another_user() {
	need setpriv || return 0
	# Every file type through create, chmod, chown, utimes, truncate, open,
	# link, rename (noreplace, exchange, corners), unlink and rmdir, plus
	# permissions, sticky and setgid directories, symlinks and open flags:
	# each step's errno, whether the parent's and the child's mtime and
	# ctime changed, and link counts.
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	local who want got
	for who in root user; do
		want=$(posix_script "$TMPFS" $who)
		got=$(posix_script "$MNT" $who)
		assertEquals "$who: steps" 217 "$(echo "$want" | wc -l)"
		assertEquals "$who: differences from tmpfs" "" "$(diff <(echo "$want") <(echo "$got"))"
	done
}

# punch_and_zero DIR: holes punched (and ranges zeroed: refused, as tmpfs
# refuses them) in a written file, each followed by its size and checksum.
punch_and_zero() {
	local f=$1/pz
	head -c 300000 "$WORK/data" >"$f"
	for op in "--punch-hole -o 4096 -l 8192" "--punch-hole -o 100 -l 50" "--punch-hole -o 290000 -l 100000" \
		"--zero-range -o 20000 -l 5000" "--zero-range -o 299000 -l 10000" \
		"--zero-range --keep-size -o 305000 -l 4096" "--zero-range --keep-size -o 150000 -l 9999999"; do
		# shellcheck disable=SC2086
		fallocate $op "$f" 2>&1 | sed 's/.*: //'
		echo "$op: $(stat -c %s "$f") $(cksum <"$f")"
	done
	fallocate --punch-hole -o 0 -l 4096 "$f" 2>&1 | sed 's/.*: //' # without --keep-size: fallocate(1) adds it
	echo "collapse: $(fallocate --collapse-range -o 0 -l 4096 "$f" 2>&1 | sed 's/.*: //')"
}

test_punched_holes_and_zeroed_ranges_read_as_on_tmpfs() {
	need fallocate || return 0
	make_data "$WORK/data" 300000
	mount_tmpfs || return 0
	local want
	want=$(punch_and_zero "$TMPFS")
	assertContains "$want" "--punch-hole -o 100 -l 50: 300000 "
	assertEquals "$want" "$(punch_and_zero "$MNT")"
	# write-behind: gathered bytes land before the zeros
	unmount_vyrefs
	mount_vyrefs "write_behind=on" || { fail "mount"; return 1; }
	assertEquals "$want" "$(punch_and_zero "$MNT")"
}

# whiteouts DIR: renames that leave a whiteout (what overlayfs needs).
whiteouts() {
	local d=$1 r="$BUILD/tests/fs/renameat2"
	printf 'A' >"$d/a"
	printf 'C' >"$d/c"
	mkdir "$d/dir"
	echo "a->b: $("$r" "$d/a" "$d/b" whiteout)"
	echo "b->c: $("$r" "$d/b" "$d/c" whiteout)"
	echo "dir->dir2: $("$r" "$d/dir" "$d/dir2" whiteout)"
	echo "c->a (a whiteout): $("$r" "$d/c" "$d/a" whiteout)"
	(cd "$d" && for f in *; do echo "$f $(stat -c '%F %a %u %g %Hr %Lr %h' "$f")"; done)
}

test_rename_whiteout_leaves_a_whiteout_as_on_tmpfs() {
	mount_tmpfs || return 0
	local want
	want=$(whiteouts "$TMPFS")
	assertContains "$want" "b character special file 0 0 0 0 0 1"
	assertEquals "$want" "$(whiteouts "$MNT")"
	assertEquals "A" "$(cat "$MNT/a")"
	rm "$MNT/b" "$MNT/c" "$MNT/dir" || fail "whiteouts are removed as files"
}

# xattr_namespaces DIR: which namespaces are stored, and when a file's
# capabilities (security.capability) go.
xattr_namespaces() {
	local f=$1/x
	printf 'x' >"$f"
	for a in user.a trusted.b security.c system.d; do
		echo "$a: $(setfattr -n "$a" -v "v-$a" "$f" 2>&1 | sed 's/.*: //') $(getfattr --absolute-names --only-values -n "$a" "$f" 2>/dev/null)"
	done
	echo "listed: $(getfattr --absolute-names -d -m - "$f" | grep -v '^#' | tr '\n' ' ')"
	echo "trusted as a user: $(setpriv --reuid=1000 --regid=1000 --clear-groups setfattr -n trusted.e -v 1 "$f" 2>&1 | sed 's/.*: //')"
	for op in "printf y >>$f" "truncate -s 1 $f" "truncate -s 1 $f" "fallocate -n -l 8192 $f" "chown 0:0 $f" "chmod 755 $f" \
		"cat $f"; do
		setcap cap_net_raw+ep "$f" || echo "setcap failed"
		sh -c "$op" >/dev/null
		echo "caps after $op: $(getcap "$f" | sed 's/.* //')"
	done | sed "s|$1/||g"
}

test_trusted_and_security_xattrs_and_caps_as_on_tmpfs() {
	need setpriv setfattr getfattr setcap getcap || return 0
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	local want
	want=$(xattr_namespaces "$TMPFS")
	assertContains "$want" "trusted.b:  v-trusted.b"
	assertEquals "a write drops caps" "" "$(echo "$want" | sed -n 's/^caps after printf y >>x: //p')"
	assertContains "$want" "caps after chmod 755 x: cap_net_raw=ep"
	assertEquals "$want" "$(xattr_namespaces "$MNT")"
}

test_remount_changes_flags_and_refuses_settings_by_name() {
	need_root "mount -o remount" || return 0
	need findmnt || return 0
	unmount_vyrefs
	mount_vyrefs "noexec,noatime" || { fail "mount"; return 1; }
	assertContains "generic flags reach the kernel" "$(findmnt -no OPTIONS "$MNT")" "rw,nosuid,nodev,noexec,noatime"
	printf 'kept' >"$MNT/a"
	# As mount.fuse3 runs it for `mount -o remount,ro`.
	"$VYREFS" vyrefs "$MNT" -o remount,ro,user_id=0 || fail "remount ro"
	assertContains "$(findmnt -no OPTIONS "$MNT")" "ro,nosuid,nodev,noexec,noatime"
	assertEquals "Read-only file system" "$(why touch "$MNT/b")"
	assertEquals "Read-only file system" "$(why sh -c "echo x >>'$MNT/a'")"
	assertEquals "kept" "$(cat "$MNT/a")"
	"$VYREFS" "$MNT" -o remount,rw,exec,page_cache=on || fail "remount rw, a setting as it is"
	assertContains "$(findmnt -no OPTIONS "$MNT")" "rw,nosuid,nodev,noatime"
	printf 'new' >"$MNT/b" || fail "writable again"
	assertEquals "vyrefs: 'page_cache=off' cannot change on a live mount (Fix: leave it out of the remount, or unmount and mount again with it)" \
		"$("$VYREFS" "$MNT" -o remount,page_cache=off 2>&1)"
	exec 3>>"$MNT/b"
	assertContains "open for writing" "$("$VYREFS" "$MNT" -o remount,ro 2>&1)" "Device or resource busy (Fix: close the files open for writing on it first)"
	exec 3>&-
	assertContains "$("$VYREFS" "$WORK" -o remount,ro 2>&1)" "is not a vyrefs mount"
	unmount_vyrefs
	assertReleased
}

# chattr_matrix DIR: what each operation answers on a file (and in a
# directory) with chattr +i and +a, and lsattr's view.
chattr_matrix() {
	local d=$1 flag op
	for flag in i a; do
		for op in "echo x >>f" "echo x >f" "truncate -s 0 f" "rm f" "mv f g" "ln f g" "chmod 600 f" \
			"chown 1:1 f" "touch f" "touch -d @5 f" "setfattr -n user.x -v 1 f" "fallocate -l 8192 f" \
			"fallocate -n -l 8192 f" "cat f" "touch dir/new" "rm dir/old" "mv dir/old dir/o2" "mkdir dir/sub"; do
			rm -rf "$d/w" && mkdir -p "$d/w/dir" && printf 'abc' >"$d/w/f" && printf 'o' >"$d/w/dir/old"
			chattr "+$flag" "$d/w/f" "$d/w/dir" || echo "chattr +$flag failed"
			echo "+$flag $op: $(cd "$d/w" && sh -c "$op" 2>&1 >/dev/null | sed 's/.*: //')"
			chattr "-$flag" "$d/w/f" "$d/w/dir"
		done
	done
	lsattr -d "$d/w/f" | cut -c1-22
	chattr +dA "$d/w/f" && lsattr -d "$d/w/f" | cut -c1-22
	echo "+c: $(chattr +c "$d/w/f" 2>&1 | sed 's/.*: //; s/ while.*//')"
}

test_chattr_immutable_and_append_only_as_on_tmpfs() {
	need chattr lsattr setfattr || return 0
	mount_tmpfs || return 0
	local want
	want=$(chattr_matrix "$TMPFS")
	assertContains "$want" "+i echo x >>f: Operation not permitted"
	assertContains "$want" "+a echo x >>f: "
	assertEquals "$want" "$(chattr_matrix "$MNT")"
}

test_o_tmpfile_as_on_tmpfs() {
	mount_tmpfs || return 0
	local want
	want=$("$PROBE" tmpfile "$TMPFS")
	assertContains "$want" "linked: nlink=1 size=5 mode=100640 bytes=hello"
	assertEquals "$want" "$("$PROBE" tmpfile "$MNT")"
	assertEquals "named" "$(ls "$MNT")"
	# The O_EXCL one, never named, is gone with its buffer.
	assertEquals 1 "$(stat_of resident_buffers)"
	unmount_vyrefs
	assertReleased
}

# acl_matrix DIR: POSIX ACLs as the kernel enforces them over what the
# filesystem keeps: a named user granted and denied, chmod moving the
# mask, an ACL the mode can say kept as the mode, default ACLs inherited
# (no umask then) and the umask without one, set-group-ID, and what is
# stored and listed. getfacl's view and each access's errno.
acl_matrix() {
	local d=$1/acl nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
	local u1000="setpriv --reuid=1000 --regid=1000 --clear-groups" r
	r=$(realpath "$BUILD/tests/fs/renameat2")
	mkdir "$d" && chmod 755 "$d" && cd "$d" || return
	acls() { getfacl -c "$@" 2>&1 | tr '\n\t' '  '; }
	try() { "$@" 2>&1 >/dev/null | sed 's/.*: //'; }
	printf 'secret' >f && chmod 600 f
	echo "600, nobody reads: $(try $nobody cat f)"
	echo "setfacl u:nobody:r: $(try setfacl -m u:65534:r f) mode $(stat -c %a f)"
	echo "nobody reads: $(try $nobody cat f) writes: $(try $nobody sh -c 'echo x >>f')"
	echo "acl: $(acls f)"
	chmod 600 f
	echo "chmod 600: $(acls f) nobody reads: $(try $nobody cat f)"
	chmod 674 f
	echo "chmod 674: $(acls f) mode $(stat -c %a f) nobody reads: $(try $nobody cat f) writes: $(try $nobody sh -c 'echo x >>f')"
	# (a mask of --- would leave the ACL unread: the kernel checks it only
	# when the mode has group bits)
	setfacl -m u:65534:-,g::r f
	echo "u:nobody:- over other r: $(try $nobody cat f) mode $(stat -c %a f)"
	setfacl -m g:65534:rw f
	echo "group entry: $(acls f)"
	echo "listed: $(getfattr -d -m - --absolute-names f 2>/dev/null | grep -o '^[a-z.]*_[a-z_]*' | tr '\n' ' ')"
	setfacl -b f
	echo "setfacl -b: $(acls f) mode $(stat -c %a f) stored: $(try getfattr -n system.posix_acl_access f)"
	setfacl -m u::rw,g::r,o::- f
	echo "as the mode: mode $(stat -c %a f) stored: $(try getfattr -n system.posix_acl_access f)"
	echo "default on a file: $(try setfacl -d -m u:65534:r f)"
	# set-group-ID goes when the owner setting an ACL is outside the group
	: >g && chown 1000:0 g && chmod 2775 g
	echo "sgid, owner outside the group: $(try $u1000 setfacl -m u:65534:r g) mode $(stat -c %a g)"
	: >g2 && chown 1000:1000 g2 && chmod 2775 g2
	echo "sgid, owner in the group: $(try $u1000 setfacl -m u:65534:r g2) mode $(stat -c %a g2)"
	# Default ACLs: inherited, no umask; a directory inherits the default too
	mkdir dd && setfacl -d -m u:65534:rwx,g::rx,o::- dd && setfacl -m u:65534:rwx dd
	(umask 077 && : >dd/f && mkdir dd/sub && mkfifo dd/p && mknod dd/c c 1 3 && ln -s f dd/l)
	echo "default: $(acls dd)"
	for n in f sub p c; do echo "inherited $n: $(stat -c %a "dd/$n") $(acls "dd/$n")"; done
	echo "symlink: $(stat -c %a dd/l) $(try getfattr -h -n system.posix_acl_access dd/l)"
	(umask 077 && : >dd/sub/deeper)
	echo "two levels down: $(stat -c %a dd/sub/deeper) $(acls dd/sub/deeper)"
	printf 'w' >dd/w && "$r" dd/w dd/w2 whiteout >/dev/null
	echo "whiteout: $(stat -c '%a %F' dd/w) $(acls dd/w)"
	echo "nobody creates in dd: $(try $nobody touch dd/n) $(stat -c '%a %u' dd/n 2>&1)"
	mkdir dd2 && setfacl -d -m u::rw,g::r,o::r dd2
	(umask 077 && : >dd2/f)
	echo "default as a mode: $(stat -c %a dd2/f) $(acls dd2/f)"
	setfacl -k dd
	(umask 027 && : >dd/after && mkdir dd/afterdir)
	echo "default removed, umask 027: $(stat -c %a dd/after dd/afterdir | tr '\n' ' ')"
	(umask 027 && : >plain && mkdir plaindir)
	echo "no default, umask 027: $(stat -c %a plain plaindir | tr '\n' ' ')"
	cd / || return
}

test_posix_acls_as_on_tmpfs() {
	need setfacl getfacl setpriv getfattr || return 0
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	local want got
	want=$(acl_matrix "$TMPFS")
	got=$(acl_matrix "$MNT")
	# The kernel's rules, pinned (tmpfs on this kernel answers the same).
	assertContains "$want" "600, nobody reads: Permission denied"
	assertContains "$want" "nobody reads:  writes: Permission denied"
	assertContains "$want" "u:nobody:- over other r: Permission denied"
	assertContains "$want" "inherited f: 660 "
	assertContains "$want" "as the mode: mode 640 stored: No such attribute"
	assertContains "$want" "nobody creates in dd:  660 65534"
	assertContains "$want" "sgid, owner outside the group:  mode 775"
	assertEquals "$want" "$got"
	# ACLs count in the xattr budget and leave with their files.
	rm -rf "$MNT/acl" || fail "rm"
	unmount_vyrefs
	assertReleased
}

test_acls_count_in_the_xattr_budget() {
	need setfacl || return 0
	unmount_vyrefs
	mount_vyrefs "xattr_budget=1K" || { fail "mount"; return 1; }
	# u::rw,u:N:r,g::r,m::r,o::r is 44 bytes, and its name 24: 15 fit 1 KiB.
	local n=0 i
	for i in $(seq 30); do
		: >"$MNT/f$i"
		setfacl -m "u:$((1000 + i)):r" "$MNT/f$i" 2>/dev/null && n=$((n + 1))
	done
	assertEquals "ACLs set in 1 KiB" 15 "$n"
	assertEquals "No space left on device" "$(why setfacl -m u:5:r "$MNT/f30")"
	rm -f "$MNT"/f*
	# Inherited ACLs count too: the default (69 bytes) and 14 files' access
	# ACLs fit; the next create fails and leaves nothing behind.
	mkdir "$MNT/d" && setfacl -d -m u:5:r "$MNT/d" || fail "default ACL"
	n=0
	for i in $(seq 20); do (: >"$MNT/d/f$i") 2>/dev/null && n=$((n + 1)); done
	assertEquals "files made with an inherited ACL" 14 "$n"
	assertEquals "No space left on device" "$(why touch "$MNT/d/one-more")"
	assertFalse "[ -e '$MNT/d/one-more' ]"
	rm -f "$MNT"/d/f*
	: >"$MNT/d/again" || fail "room again"
	assertContains "$(getfacl -cn "$MNT/d/again" 2>/dev/null)" "user:5:r--"
}

# btime_steps DIR: statx's creation time (btime) of a file, a directory and
# a FIFO: there, between the times around its making, and unchanged by a
# write, chmod, chown, utimes, rename, link and the kernel forgetting it.
btime_steps() {
	local d=$1 t0 t1 n b
	t0=$(date +%s%N)
	printf 'x' >"$d/f" && mkdir "$d/dir" && mkfifo "$d/p"
	t1=$(date +%s%N)
	for n in f dir p; do
		b=$(stat -c %w "$d/$n")
		[ "$b" != - ] || { echo "$n: no btime"; continue; } # stat's word for none
		b=$(date -d "$b" +%s%N)
		# The kernel's and the daemon's coarse clocks lag up to a tick (4 ms
		# at HZ=250, found once across a second's boundary): 20 ms before t0.
		echo "$n: made then $([ "$b" -ge "$(((t0 - 20000000) / 1000000000 * 1000000000))" ] && [ "$b" -le "$t1" ] && echo yes || echo "no: $t0 <= $b <= $t1")"
	done
	b=$(stat -c %w "$d/f")
	sleep 1.1
	printf 'more' >>"$d/f" && chmod 600 "$d/f" && chown 5:5 "$d/f" && touch -d @1000000000 "$d/f" &&
		mv "$d/f" "$d/g" && ln "$d/g" "$d/h" && echo 2 >/proc/sys/vm/drop_caches || echo "a step failed"
	echo "after changes: $([ "$(stat -c %w "$d/g")" = "$b" ] && [ "$(stat -c %w "$d/h")" = "$b" ] && echo same || echo "moved: $b -> $(stat -c %w "$d/g")")"
	printf 'y' >"$d/later"
	echo "later file later: $([ "$(stat -c %W "$d/later")" -gt "$(stat -c %W "$d/g")" ] && echo yes || echo no)"
}

test_statx_btime_is_the_creation_time_as_on_tmpfs() {
	mount_tmpfs || return 0
	local want
	want=$(btime_steps "$TMPFS")
	assertEquals "$(printf 'f: made then yes\ndir: made then yes\np: made then yes\nafter changes: same\nlater file later: yes')" "$want"
	assertEquals "$want" "$(btime_steps "$MNT")"
	# libfuse's own loop (idle_threads=0) replies from the reading thread too.
	unmount_vyrefs
	mount_vyrefs "idle_threads=0" || { fail "mount"; return 1; }
	assertEquals "libfuse's loop" "$want" "$(btime_steps "$MNT")"
}

# nfs_missing: why the kernel NFS server cannot export a mount here (empty
# when it can): the kernel's nfsd and NFS client (built in, or modules),
# and nfs-kernel-server's tools. The VMs and containers this runs on
# lacked nfsd: CONFIG_NFSD unset and no module support (checked in
# /proc/config.gz; `mount -t nfsd` said "unknown filesystem type").
nfs_missing() {
	local fs
	for fs in nfsd nfs4; do
		if ! grep -qw "$fs" /proc/filesystems; then
			modprobe "$fs" 2>/dev/null
			grep -qw "$fs" /proc/filesystems || {
				echo "this kernel has no $fs (not in /proc/filesystems, no module to load; Fix: a kernel with CONFIG_NFSD and CONFIG_NFS_V4, as Debian's)"
				return
			}
		fi
	done
	local t
	for t in exportfs rpc.nfsd rpc.mountd mount.nfs; do
		command -v "$t" >/dev/null 2>&1 || {
			echo "needs $t (Fix: apt-get install nfs-kernel-server nfs-common)"
			return
		}
	done
}

test_nfs_export_reads_writes_and_outlives_the_caches() {
	local why
	why=$(nfs_missing)
	if [ -n "$why" ]; then
		skip_test "the kernel NFS server: $why"
		return 0
	fi
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	local client mountd="" nfsd=""
	client=$(mktemp -d /tmp/vyrefs-nfs.XXXXXX) || return 1
	# A FUSE filesystem has no device number of its own to name it by: the
	# export gives one (fsid=).
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || fail "mount nfsd"
	if ! pgrep -x rpc.mountd >/dev/null; then
		rpc.mountd -F -N 2 -N 3 & # NFSv4 only: no rpcbind
		mountd=$!
	fi
	exportfs -o rw,sync,fsid=4711,no_subtree_check,no_root_squash "127.0.0.1:$MNT" || fail "exportfs"
	if [ "$(cat /proc/fs/nfsd/threads 2>/dev/null)" = 0 ]; then
		rpc.nfsd -N 2 -N 3 4 && nfsd=1 || fail "rpc.nfsd"
	fi
	if mount -t nfs4 -o vers=4.2,proto=tcp,sync 127.0.0.1:"$MNT" "$client"; then
		make_data "$WORK/data" 3000000
		local sum
		sum=$(cksum <"$WORK/data")
		# Written through NFS, read on the mount; written on the mount,
		# read through NFS; both byte-exact, sizes and modes alike.
		cp "$WORK/data" "$client/via-nfs" && sync || fail "write through NFS"
		assertEquals "read on the mount" "$sum" "$(cksum <"$MNT/via-nfs")"
		cp "$WORK/data" "$MNT/direct" && chmod 640 "$MNT/direct" || fail "write on the mount"
		assertEquals "read through NFS" "$sum" "$(cksum <"$client/direct")"
		assertEquals "3000000 640" "$(stat -c '%s %a' "$client/direct")"
		mkdir "$client/d" && printf 'x' >"$client/d/f" || fail "mkdir through NFS"
		# The server's dentries and inodes go: NFS's file handles are
		# decoded through vyrefs's export support ("." of a node id).
		echo 2 >/proc/sys/vm/drop_caches
		assertEquals "after drop_caches" "$sum" "$(cksum <"$client/via-nfs")"
		assertEquals "x" "$(cat "$client/d/f")"
		assertEquals "handle ok $("$PROBE" sum "$WORK/data")" "$(cd / && "$OLDPWD/$PROBE" handle "$MNT" "$MNT/direct")"
		umount "$client" || umount -l "$client"
	else
		fail "mount -t nfs4 127.0.0.1:$MNT"
	fi
	exportfs -u "127.0.0.1:$MNT"
	[ -z "$nfsd" ] || rpc.nfsd 0
	if [ -n "$mountd" ]; then kill "$mountd" && wait "$mountd"; fi
	rmdir "$client"
}

. tests/shunit.sh
