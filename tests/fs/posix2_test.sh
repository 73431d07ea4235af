#!/usr/bin/env bash
# The last differences from tmpfs (issue "posix 2"), each run on tmpfs and
# on vyrefs in the same test: sizes past the device's memory (and a 1 TiB
# sparse file through every path that sizes from a file's length), chattr
# and ctime/statx, .vyre out of the root's listings, df's available,
# holes against st_blksize, mount(8)'s standard flags, and atime on reads
# under each flag (issue "posix 3"). The rest of the
# comparison is tests/fs/posix_test.sh.
. tests/fs/lib.sh
PROBE=${BUILD}/tests/fs/posix_probe
WORK=""
TMPFS=""

setUp() {
	WORK=$(mktemp -d /tmp/vyrefs-work.XXXXXX)
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
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ]; then rm -f "$VY_LOG"; fi
}

# errno's text from a command's stderr.
why() { "$@" 2>&1 >/dev/null | sed 's/.*: //' | head -n 1; }

# The issue's cases side by side: tmpfs and vyrefs of 64M take the same
# sparse sizes, far writes and far fallocates, and refuse the same memory.
big_sizes() {
	python3 - "$1" <<'PY'
import errno, os, sys
d, G, M = sys.argv[1], 1 << 30, 1 << 20
def run(name, f):
    try:
        r = f()
        print(name, "ok" if r is None else r)
    except OSError as e:
        print(name, errno.errorcode[e.errno])
def fd(n):
    return os.open(os.path.join(d, n), os.O_CREAT | os.O_RDWR)
a, b, c, e = fd("a"), fd("b"), fd("c"), fd("e")
run("truncate 3G", lambda: os.ftruncate(a, 3 * G))
run("falloc 1M at 2G", lambda: os.posix_fallocate(b, 2 * G, M))
run("pwrite at 2G+1", lambda: os.pwrite(c, b"x", 2 * G + 1) and None)
run("read there", lambda: os.pread(c, 3, 2 * G))
run("truncate 2^63-1", lambda: os.ftruncate(a, (1 << 63) - 1))
run("read at 2^62", lambda: os.pread(a, 4, 1 << 62))
run("SEEK_DATA in a", lambda: os.lseek(a, 0, os.SEEK_DATA))
run("SEEK_HOLE at 2^62", lambda: os.lseek(a, 1 << 62, os.SEEK_HOLE))
run("falloc 65M", lambda: os.posix_fallocate(e, 0, 65 * M))
run("pwrite 65M", lambda: os.pwrite(e, bytes(65 * M), 0) and None)
run("sizes", lambda: " ".join(str(os.fstat(x).st_size) for x in (a, b, c)))
PY
}

test_sizes_past_the_device_as_on_tmpfs() {
	unmount_vyrefs
	mount_vyrefs "resident_budget=64M" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	local want
	want=$(big_sizes "$TMPFS")
	assertContains "$want" "truncate 2^63-1 ok"
	assertContains "$want" "falloc 65M ENOSPC"
	assertEquals "$want" "$(big_sizes "$MNT")"
}

# A 1 TiB sparse file makes nothing allocate or walk its holes: reads and
# readahead at its end, SEEK, copy_file_range, a sequence and a mapping
# (ENOSPC with the budget, before anything), `vyrefs cp` out (data only)
# and a move to another device.
test_a_1tib_sparse_file_costs_nothing_anywhere() {
	# On a GPU the holes before the data map zeros: long runs one 64 MiB
	# allocation at a time (core/cuda.h, zrun), else 1 TiB of 2 MiB
	# granules runs the driver out of mappings (ENOSPC).
	unmount_vyrefs
	# Two devices where the host backend can make them (a move between
	# them is one of the paths); one GPU on cuda.
	local opts=""
	[ "${VY_TEST_BACKEND:-host}" = host ] && opts="host_devices=2,devices=0,1"
	mount_vyrefs "$opts" || { fail "mount"; return 1; }
	local T=$((1 << 40)) out
	truncate -s $T "$MNT/big" || fail "truncate 1T"
	printf 'end' | dd of="$MNT/big" bs=1 seek=$((T - 3)) conv=notrunc status=none || fail "write at its end"
	assertEquals "1099511627776 4096" "$(stat -c '%s %b' "$MNT/big")"
	out=$(timeout 60 python3 - "$MNT/big" <<'PY'
import os, sys
T = 1 << 40
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
import mmap
buf = mmap.mmap(-1, 1 << 20)
z = 0
for k in range(16):                       # readahead over the tail's start
    os.preadv(fd, [buf], (1 << 39) + (k << 20))
    z += buf[:] == bytes(1 << 20)
fd2 = os.open(sys.argv[1], os.O_RDONLY)
print(z, os.pread(fd2, 3, T - 3).decode(), os.lseek(fd2, 0, os.SEEK_DATA), os.lseek(fd2, 0, os.SEEK_HOLE))
d = os.open(sys.argv[1] + ".c", os.O_CREAT | os.O_RDWR)
print(os.copy_file_range(fd2, d, 4 << 20, T - (4 << 20), 0), os.pread(d, 3, (4 << 20) - 3).decode())
PY
)
	assertEquals "$(printf '16 end %s %s\n4194304 end' $((T - (2 << 20))) 0)" "$out"
	echo "fill big 7" 2>"$WORK/err" >"$MNT/.vyre/ctl"
	assertContains "a sequence: no room" "$(cat "$WORK/err")" "No space left on device"
	assertContains "$(cat "$VY_LOG")" ".vyre/ctl: no room for "
	out=$(timeout 60 "$BUILD/tests/client/vymap" info "$MNT/big" 2>&1)
	assertEquals "a mapping: ENOSPC ($out)" 28 $?
	assertContains "a mapping: no room" "$out" "no room for "
	timeout 60 "$VYREFS" cp "$MNT/big" "$WORK/big" || fail "vyrefs cp out"
	assertEquals "cp out: size, data only" "1099511627776 end" "$(stat -c %s "$WORK/big") $(tail -c 3 "$WORK/big")"
	assertTrue "cp out: holes stay holes" "[ $(stat -c %b "$WORK/big") -le 16384 ]"
	rm -f "$WORK/big"
	if [ -n "$opts" ]; then
		timeout 60 setfattr -n user.vyre.device -v 1 "$MNT/big" || fail "move"
		assertEquals "moved: 1 end 4096" "1 end 4096" "$(dev_of "$MNT/big") $(tail -c 3 "$MNT/big") $(stat -c %b "$MNT/big")"
	fi
	rm "$MNT/big" "$MNT/big.c"
	assertEquals "memory back to none" 0 "$(stat_of resident_bytes)"
}

# Every chattr change moves ctime (+A and -A too), and statx reports the
# flags in stx_attributes with them in its mask (issue "posix 2").
chattr_ctime() {
	local f=$1/cs step before
	printf 'abc' >"$f"
	for step in +A -A +a -a +i -i +d -d +dA =d +ai -ai =; do
		before=$(stat -c %.9Z "$f")
		chattr "$step" "$f" || echo "chattr $step failed"
		echo "$step: ctime $([ "$(stat -c %.9Z "$f")" != "$before" ] && echo moved || echo kept)" \
			"$(lsattr -d "$f" | cut -c1-22)"
	done
}

chattr_statx() {
	local f=$1/cs step
	for step in +a -a +i -i +d -d +ai =d =; do
		chattr "$step" "$f" && echo "$step: $("$PROBE" statx "$f")"
	done
	rm -f "$f"
}

test_chattr_moves_ctime_and_statx_reports_it_as_on_tmpfs() {
	need chattr lsattr || return 0
	mount_tmpfs || return 0
	local want got
	want=$(chattr_ctime "$TMPFS")
	assertContains "$want" "+A: ctime moved -------A"
	assertEquals "$want" "$(chattr_ctime "$MNT")"
	want=$(chattr_statx "$TMPFS")
	assertContains "$want" "+i: attrs=i mask=a,i,d"
	got=$(chattr_statx "$MNT")
	# Linux (6.18 too) copies a FUSE server's statx mask, btime and basic
	# fields, not its attributes: vyrefs sends them (test_statx checks the
	# reply); they show where the kernel passes them.
	if [ "$got" = "$(echo "$want" | sed 's/attrs=.*/attrs= mask=/')" ]; then
		skip_test "statx attributes: this kernel drops a FUSE server's stx_attributes (fuse_do_statx); tests/unit/test_statx checks vyrefs's reply"
		return 0
	fi
	assertEquals "$want" "$got"
}

# The control directory out of the root's listings (issue "posix 2"): the
# same tree on tmpfs and on vyrefs lists, finds, copies, tars and rsyncs
# the same, and the root's link count is the same; .vyre is still reached
# by name and cannot be removed by the usual sweeps. vyre_dir=visible
# lists it again.
vyre_tree() {
	mkdir -p "$1/d/e" && printf 'data' >"$1/d/f" && printf 'x' >"$1/.hidden" && ln -s d/f "$1/l"
}

vyre_listings() {
	local root=$1 out=$2
	echo "ls -a: $(LC_ALL=C ls -a "$root" | tr '\n' ' ')"
	echo "find: $(cd "$root" && find . | sort | tr '\n' ' ')"
	echo "nlink: $(stat -c %h "$root")"
	mkdir "$out/cp" && cp -a "$root/." "$out/cp/" && echo "cp -a: $(cd "$out/cp" && find . | sort | tr '\n' ' ')"
	echo "tar: $(tar -C "$root" -cf - . | tar -tf - | sort | tr '\n' ' ')"
	if command -v rsync >/dev/null; then
		rsync -a "$root/" "$out/rs/" && echo "rsync -a: $(cd "$out/rs" && find . | sort | tr '\n' ' ')"
	fi
	echo "du: $(du -a "$root" | wc -l)"
}

test_vyre_dir_is_not_listed_but_reached_by_name() {
	need tar || return 0
	mount_tmpfs || return 0
	vyre_tree "$TMPFS" && vyre_tree "$MNT" || fail "trees"
	mkdir "$WORK/t" "$WORK/v"
	local want
	want=$(vyre_listings "$TMPFS" "$WORK/t")
	assertEquals "$want" "$(vyre_listings "$MNT" "$WORK/v")"
	assertContains "$want" "ls -a: . .. .hidden d l "
	# By name: stat, cd, read, the control file.
	assertEquals "directory" "$(stat -c %F "$MNT/.vyre")"
	assertContains "$(cd "$MNT/.vyre" && ls)" "stats"
	assertContains "$(cat "$MNT/.vyre/stats")" "resident_bytes"
	assertEquals "vyre_dir = hidden" "$(grep '^vyre_dir' "$MNT/.vyre/config")"
	# The usual sweeps take everything else and leave it.
	rm -rf "$MNT"/* "$MNT"/.[!.]* 2>/dev/null
	assertEquals "rm -rf MNT/* MNT/.[!.]*" "" "$(ls -A "$MNT")"
	vyre_tree "$MNT"
	find "$MNT" -mindepth 1 -delete 2>/dev/null
	assertEquals "find -delete" "" "$(ls -A "$MNT")"
	rm -rf "$MNT/.vyre" 2>/dev/null
	assertTrue "rm -rf MNT/.vyre leaves it" "[ -f '$MNT/.vyre/stats' ]"
	unmount_vyrefs
	mount_vyrefs "vyre_dir=visible" || { fail "mount"; return 1; }
	assertEquals "visible" ".vyre" "$(ls -A "$MNT")"
	assertEquals "visible: its link counts" 3 "$(stat -c %h "$MNT")"
	assertEquals "vyre_dir = visible" "$(grep '^vyre_dir' "$MNT/.vyre/config")"
}

# df's available is what a new file can get (issue "posix 2"): on tmpfs
# and on vyrefs, after a small file, a new file's fallocate of exactly
# f_bavail works and one block more gets ENOSPC, until f_bavail is 0.
df_avail_steps() {
	python3 - "$1" <<'PY'
import errno, os, sys
d = sys.argv[1]
open(os.path.join(d, "small"), "w").write("x")
out = []
# 24 steps: on cuda with survive=on, under one granule only slab slots fit,
# so what is available halves (1 MiB, 512 KiB, ... 4 KiB) before it is 0.
for i in range(24):
    s = os.statvfs(d)
    a = s.f_bavail * s.f_frsize
    if a == 0:
        out.append("avail 0")
        break
    fd = os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, a + s.f_frsize)
        more = "fits"
    except OSError as e:
        more = errno.errorcode[e.errno]
    os.ftruncate(fd, 0)
    try:
        os.posix_fallocate(fd, 0, a)
        exact = "fits"
    except OSError as e:
        exact = errno.errorcode[e.errno]
    os.close(fd)
    if (more, exact) != ("ENOSPC", "fits"):
        out.append("avail %d: one block more %s, exactly %s" % (a, more, exact))
print(*out)
PY
}

test_df_available_is_what_a_new_file_can_fallocate_as_on_tmpfs() {
	unmount_vyrefs
	mount_vyrefs "resident_budget=64M" || { fail "mount"; return 1; }
	mount_tmpfs || return 0
	assertEquals "tmpfs" "avail 0" "$(df_avail_steps "$TMPFS")"
	assertEquals "vyrefs" "avail 0" "$(df_avail_steps "$MNT")"
}

# Holes, st_blksize, SEEK_DATA/SEEK_HOLE, st_blocks and punch agree (issue
# "posix 2"): the same writes, truncates and punches on tmpfs and on
# vyrefs; on each, every SEEK answer is on a st_blksize boundary (or the
# end), the data SEEK finds is held in st_blocks, holes read zeros, and
# the bytes are tmpfs's.
hole_steps() {
	python3 - "$1" <<'PY'
import hashlib, os, sys
p = os.path.join(sys.argv[1], "h")
fd = os.open(p, os.O_CREAT | os.O_RDWR)
M = 1 << 20
blk = bytes(range(1, 256)) * 32897  # 8 MiB and more, no zero byte
def check(step):
    st = os.fstat(fd)
    size, bs, off, data, bad = st.st_size, st.st_blksize, 0, 0, []
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        bad += [x for x in (d, h) if x % bs and x != size]
        data += h - d
        if d > off and os.pread(fd, 1, off) != b"\0":
            bad.append("hole not zero at %d" % off)
        off = h
    held = st.st_blocks * 512 >= data
    dig = hashlib.sha256()
    for at in range(0, size, 8 * M):
        dig.update(os.pread(fd, min(8 * M, size - at), at))
    print("%s: aligned=%s held=%s sha=%s" % (step, "yes" if not bad else bad, held, dig.hexdigest()[:12]))
os.pwrite(fd, blk[:3 * M], 0); check("write 3M")
os.fsync(fd); os.close(fd); fd = os.open(p, os.O_RDWR)
import fcntl, ctypes
libc = ctypes.CDLL(None, use_errno=True)
def punch(off, n):
    if libc.fallocate(fd, 3, ctypes.c_long(off), ctypes.c_long(n)) != 0:  # PUNCH_HOLE | KEEP_SIZE
        raise OSError(ctypes.get_errno(), "punch")
punch(1 * M, 1 * M); check("punch 1M at 1M")
os.ftruncate(fd, 64 * M); check("truncate 64M")
os.pwrite(fd, blk[:4096], 40 * M); check("4K at 40M")
punch(40 * M, 2 * M); check("punch 2M at 40M")
os.pwrite(fd, blk[:6 * M], 8 * M); check("6M at 8M")
punch(10 * M, 2 * M); check("punch 2M at 10M")
punch(0, 64 * M); check("punch all")
os.close(fd)
PY
}

test_holes_blksize_seek_and_blocks_agree_as_on_tmpfs() {
	mount_tmpfs || return 0
	local want got
	want=$(hole_steps "$TMPFS")
	got=$(hole_steps "$MNT")
	assertEquals 8 "$(echo "$want" | grep -c 'aligned=yes held=True')"
	assertEquals "$want" "$got"
	assertEquals "vyrefs: the granule" $((2 << 20)) "$(stat -c %o "$MNT/h")"
}

# mount(8)'s standard flags (issue "posix 2"): each through `mount -t`, on
# tmpfs and on vyrefs (mount(8), mount.fuse3, vyrefs), in a private mount
# namespace where a directory holding vyrefs covers /usr/local/sbin. Both
# start from nosuid,nodev (libfuse's default); the options the mount
# table shows, less each filesystem's own, must be the same.
STD_MOUNT_FLAGS="relatime norelatime strictatime nostrictatime lazytime nolazytime noatime atime nodiratime
diratime nosymfollow symfollow ro rw nosuid suid nodev dev noexec exec sync async dirsync silent loud
iversion noiversion mand nomand _netdev nofail auto noauto user nouser users defaults x-vyrefs.test
comment=vyrefs noatime,strictatime relatime,noatime nodiratime,diratime ro,rw nosymfollow,symfollow"

test_standard_mount_flags_as_on_tmpfs() {
	need_root "mount -t in a mount namespace of its own" || return 0
	[ -x /sbin/mount.fuse3 ] || [ -x /usr/sbin/mount.fuse3 ] || { skip_test "needs mount.fuse3 in /sbin (fuse3)"; return 0; }
	need unshare findmnt || return 0
	mountpoint -q / || { skip_test "needs / to be a mount point (a private mount namespace)"; return 0; }
	local bindir t v out
	bindir=$(mktemp -d) && t=$(mktemp -d) && v=$(mktemp -d)
	ln -s "$(realpath "$VYREFS")" "$bindir/vyrefs"
	# shellcheck disable=SC2016 # expanded by the inner shell
	out=$(unshare -m --propagation private bash -c '
		mount --bind "$1" /usr/local/sbin || exit 1
		opts() { findmnt -no OPTIONS "$1" | tr , "\n" |
			grep -Ev "^(size|nr_inodes|inode64|mode|user_id|group_id|default_permissions|allow_other)" | paste -sd, -; }
		for f in $4; do
			mount -t tmpfs -o "nosuid,nodev,$f" tmpfs "$2" 2>/dev/null; a=$?
			ta=$(opts "$2"); umount "$2" 2>/dev/null
			mount -t fuse.vyrefs vy "$3" -o "nosuid,nodev,$f,backend=$5,host_memory=64M" 2>&1; b=$?
			va=$(opts "$3"); umount "$3" 2>/dev/null
			echo "$f: tmpfs rc=$a $ta | vyrefs rc=$b $va"
		done' _ "$bindir" "$t" "$v" "$STD_MOUNT_FLAGS" "$backend" 2>&1)
	rm -rf "$bindir"
	rmdir "$t" "$v"
	local line n=0
	while read -r line; do
		n=$((n + 1))
		# mand: tmpfs shows it and does nothing (Linux has no mandatory
		# locks); FUSE refuses it, so vyrefs accepts and drops it.
		[ "${line%%: *}" = mand ] && line=${line/relatime,mand |/relatime |}
		assertEquals "$line" "${line%% | *}" "$(echo "${line#* | }" | sed 's/^vyrefs/tmpfs/' | sed "s/^/${line%%: *}: /")"
	done <<<"$out"
	assertEquals "every flag ran" "$(echo $STD_MOUNT_FLAGS | wc -w)" "$n"
	assertContains "$out" "relatime: tmpfs rc=0 rw,nosuid,nodev,relatime"
	assertContains "$out" "nosymfollow: tmpfs rc=0 rw,nosuid,nodev,relatime,nosymfollow"
}

# What reads do to atime in DIR, as words: a file whose atime is old read
# with cat, and with O_DIRECT; one whose atime is ahead of now (after its
# last change, under a day: only strictatime moves it); a directory listed.
atime_outcomes() {
	local f=$1/atime-f d=$1/atime-d a out=""
	echo data >"$f" && mkdir -p "$d" && : >"$d/x" || return 1
	moved() { [ "$(stat -c %X "$1")" != "$a" ] && echo moves || echo stays; }
	touch -a -d 2000-01-01 "$f"; a=$(stat -c %X "$f"); cat "$f" >/dev/null
	out="old:$(moved "$f")"
	touch -a -d 2000-01-01 "$f"; a=$(stat -c %X "$f"); dd if="$f" of=/dev/null bs=4096 iflag=direct status=none 2>/dev/null
	out="$out direct:$(moved "$f")"
	touch -a -d "@$(($(date +%s) + 3600))" "$f"; a=$(stat -c %X "$f"); cat "$f" >/dev/null
	out="$out ahead:$(moved "$f")"
	touch -a -d 2000-01-01 "$d"; a=$(stat -c %X "$d"); ls "$d" >/dev/null
	out="$out dir:$(moved "$d")"
	rm -rf "$f" "$d"
	echo "$out"
}

# Issue "posix 3": reads move atime as the mount's flags say, as on tmpfs.
test_atime_on_reads_as_the_flags_say_as_on_tmpfs() {
	need_root "it mounts a tmpfs with each flag" || return 0
	local f t v want
	for f in relatime strictatime noatime nodiratime; do
		case $f in
		relatime) want="old:moves direct:moves ahead:stays dir:moves" ;;
		strictatime) want="old:moves direct:moves ahead:moves dir:moves" ;;
		noatime) want="old:stays direct:stays ahead:stays dir:stays" ;;
		nodiratime) want="old:moves direct:moves ahead:stays dir:stays" ;;
		esac
		TMPFS=$(mktemp -d /tmp/vyrefs-tmpfs.XXXXXX)
		mount -t tmpfs -o "size=8m,$f" tmpfs "$TMPFS" || { fail "tmpfs $f"; continue; }
		t=$(atime_outcomes "$TMPFS")
		umount "$TMPFS" && rmdir "$TMPFS"
		TMPFS=""
		assertEquals "$f: tmpfs" "$want" "$t"
		unmount_vyrefs
		mount_vyrefs "$f" || { fail "mount $f"; continue; }
		v=$(atime_outcomes "$MNT")
		assertEquals "$f: vyrefs as tmpfs" "$t" "$v"
	done
	# A bind remount changes the mount's flags behind the daemon's back;
	# it reads them again at the next statfs (vyrefs's remount ends so).
	mount -o remount,bind,strictatime "$MNT" || fail "remount"
	stat -f "$MNT" >/dev/null
	assertEquals "remounted strictatime (nodiratime stays)" "old:moves direct:moves ahead:moves dir:stays" "$(atime_outcomes "$MNT")"
}

# Issue "posix 3": an idmapped bind mount (as a container runtime makes
# one: tests/fs/idmapped.c) shows the file system's uid 0 as 1000; what
# 1000 makes there is 0's; a write by 1000 drops a set-user-ID bit, root's
# keeps it, as on tmpfs. Root, whom the kernel then names only in requests
# that make an inode, still owns the whiteout of its rename and, on the
# cuda backend, reads user.vyre.device_ptr of its file, which nobody else
# may.
idmap_outcomes() { # DIR: one line of what each step gave
	local d=$1 v=$1.view
	mkdir "$v" || return 1
	echo root >"$d/f" && chmod 4755 "$d/f"
	echo root >"$d/g" && chmod 4755 "$d/g"
	"$BUILD/tests/fs/idmapped" "$d" "$v" 0 1000 || { rmdir "$v"; return 1; }
	local as1000="setpriv --reuid=1000 --regid=1000 --clear-groups"
	local seen made mine wrote kept dir
	seen=$(stat -c %u:%g "$v/f")
	$as1000 sh -c "echo mine >'$v/new' && mkdir '$v/d'" || echo "1000 could not make files" >&2
	made=$(stat -c %u:%g "$d/new" "$d/d" | tr '\n' ' ')
	mine=$($as1000 cat "$v/new")
	$as1000 sh -c "echo more >>'$v/f'" || echo "1000 could not write" >&2
	wrote=$(stat -c %a "$d/f")
	echo more >>"$d/g"
	kept=$(stat -c %a "$d/g")
	dir=$(stat -c %u "$v/d")
	umount "$v" && rmdir "$v"
	"$BUILD/tests/fs/renameat2" "$d/g" "$d/h" whiteout || echo "no whiteout" >&2
	local wh
	wh=$(stat -c "%u:%g %F" "$d/g")
	echo "seen $seen made $made mine $mine wrote $wrote kept $kept dir $dir whiteout $wh"
}

test_idmapped_mount_as_on_tmpfs() {
	need_root "an idmapped mount is root's, and it acts as uid 1000" || return 0
	need setpriv unshare || return 0
	# The mapping is a user namespace's: none can be made in a chroot, or
	# where user namespaces are off (user.max_user_namespaces=0).
	local why
	why=$(unshare -U true 2>&1) || { skip_test "needs a user namespace (unshare -U: ${why:-refused})"; return 0; }
	chmod 755 "$WORK"
	TMPFS=$(mktemp -d /tmp/vyrefs-tmpfs.XXXXXX)
	chmod 755 "$TMPFS"
	mount -t tmpfs -o size=8m tmpfs "$TMPFS" || { fail "tmpfs"; return; }
	local t v
	t=$(idmap_outcomes "$TMPFS")
	assertEquals "tmpfs" "seen 1000:1000 made 0:0 0:0  mine mine wrote 755 kept 4755 dir 1000 whiteout 0:0 character special file" "$t"
	unmount_vyrefs
	mount_vyrefs "allow_other=on" || { fail "mount"; return; }
	v=$(idmap_outcomes "$MNT" 2>&1)
	assertEquals "vyrefs as tmpfs" "$t" "$v"
	[ "$backend" = cuda ] || return 0
	local ptr='import os, sys; print(os.getxattr(sys.argv[1], "user.vyre.device_ptr").decode())'
	assertNotEquals "root reads its file's device pointer" "" "$(python3 -c "$ptr" "$MNT/h" 2>/dev/null)"
	assertEquals "nobody else" "" "$(setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c "$ptr" "$MNT/h" 2>/dev/null)"
}

. tests/shunit.sh
