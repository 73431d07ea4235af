#!/usr/bin/env bash
# How the client library finds and trusts its daemon, and what `vyrefs cp`
# gives away (issue 25, client side), on a root mount with allow_other:
# - a bind mount of a subdirectory holding a user's .vyre/socket never
#   sends root's fds to the user's server (finding 4): the client uses the
#   real daemon, or refuses where it sees no mount of the root;
# - the mount is found by mountinfo, its escapes (\040 ...) decoded;
# - a server that is not the mount's uid (SO_PEERCRED) gets nothing, over
#   an abstract socket or a path; one nobody serves is "cannot reach";
# - `vyrefs cp` makes modes as GNU cp (finding 5);
# - a dead daemon and a full fd table are named as such, never "the
#   launcher", and EMFILE stays EMFILE (finding 13).
# The unprivileged side is uid 65534 (setpriv); the client binaries run
# from a copy others can read, with LD_LIBRARY_PATH.
. tests/fs/lib.sh
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# vymap info's second word: the device ordinal, -1 on the host backend.
ORD=$([ "${VY_TEST_BACKEND:-host}" = host ] && echo -1 || echo 0)

oneTimeSetUp() {
	BIN=$(mktemp -d /tmp/vyrefs-trust-bin.XXXXXX)
	chmod 755 "$BIN"
	cp "$VYREFS" "$BUILD/libvyrefs.so" "$BUILD/tests/client/vymap" "$BIN/" || return 1
	chmod 755 "$BIN"/*
	export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} # and what the machine needs (libfuse3 off the standard path)
	VYMAP=$BIN/vymap
	CP=("$BIN/vyrefs" cp)
	# A server of uid 65534 that speaks just enough of the protocol
	# (HELLO's reply) to be sent a MAP or COPY, and notes every fd it gets.
	cat >"$BIN/fake_server.py" <<'PY'
import os, socket, struct, sys
name, log = sys.argv[1], sys.argv[2]
HDR = struct.Struct("<IHHQ")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + name[1:] if name.startswith("@") else name)
if not name.startswith("@"):
    os.chmod(name, 0o777)
s.listen(16)
out = open(log, "a", buffering=1)
out.write("ready\n")
while True:
    c, _ = s.accept()
    out.write("connect\n")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(c, 1 << 16, 16)
        except OSError:
            break
        for fd in fds:
            out.write("fd %s\n" % os.readlink("/proc/self/fd/%d" % fd))
            os.close(fd)
        if len(msg) < HDR.size:
            break
        ln, op, nfds, uniq = HDR.unpack_from(msg)
        out.write("op %d\n" % op)
        if op == 16:  # HELLO: protocol 2.2, the host backend
            body = struct.pack("<ii512sIIIiQ", 0, -1, b"", 2, 2, 2, -1, 2 << 20)
        else:
            body = struct.pack("<ii512s", 1, -1, b"fake")
        c.sendall(HDR.pack(HDR.size + len(body), op | 0x8000, 0, uniq) + body)
    c.close()
PY
	chmod 644 "$BIN/fake_server.py"
}

oneTimeTearDown() {
	rm -rf "$BIN"
}

setUp() {
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	chmod 1777 "$MNT"
	SRC=$(mktemp -d /tmp/vyrefs-trust.XXXXXX)
	chmod 1777 "$SRC"
	FAKE_PID=""
	BIND=""
}

tearDown() {
	[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
	[ -n "$BIND" ] && { umount "$BIND" 2>/dev/null; rmdir "$BIND"; }
	rm -rf "$SRC"
	unmount_vyrefs
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ]; then rm -f "$VY_LOG"; fi
	VY_LOG=""
}

# start_fake NAME: uid 65534's server on NAME ("@abstract" or a path), its
# notes in $SRC/fake.log; returns once it listens.
start_fake() {
	: >"$SRC/fake.log"
	chown 65534 "$SRC/fake.log"
	"${NOBODY[@]}" /usr/bin/python3 "$BIN/fake_server.py" "$1" "$SRC/fake.log" 2>>"$SRC/fake.err" &
	FAKE_PID=$!
	for _ in $(seq 200); do grep -q ready "$SRC/fake.log" && return 0; sleep 0.05; done
	fail "the fake server did not start: $(cat "$SRC/fake.err")"
	return 1
}

# What the fake server was sent: its notes but "ready".
fake_got() { grep -v '^ready$' "$SRC/fake.log"; }

# A secret of root's (0600) and a file to copy in, in uid 65534's directory
# sub/, which holds a .vyre/socket of 65534's naming $1.
attacker_tree() {
	"${NOBODY[@]}" mkdir -p "$MNT/sub/.vyre" || fail "mkdir as 65534"
	echo "$1" | "${NOBODY[@]}" tee "$MNT/sub/.vyre/socket" >/dev/null
	head -c 3000000 /dev/urandom >"$SRC/secret"
	cp "$SRC/secret" "$MNT/sub/secret"
	chmod 600 "$MNT/sub/secret" "$SRC/secret"
}

test_a_bind_mount_of_a_subdirectory_sends_no_fd_to_a_users_socket() {
	need_daemon_sees "$SRC" || return 0
	need setpriv || return 0
	need_mount_ns || return 0
	name="@mallory-$$-$RANDOM"
	attacker_tree "$name"
	start_fake "$name" || return
	BIND=$(mktemp -d /tmp/vyrefs-bind.XXXXXX)
	mount --bind "$MNT/sub" "$BIND" || { fail "mount --bind"; return; }
	maps=$(stat_of maps)
	# The mount's root is in sight: the real daemon maps and copies.
	assertEquals "3000000 $ORD" "$("$VYMAP" info "$BIND/secret" 2>&1)"
	assertEquals "the real daemon mapped it" $((maps + 1)) "$(stat_of maps)"
	out=$("${CP[@]}" -v "$BIND/secret" "$SRC/out" 2>&1)
	assertContains "$out" "(by the daemon, around FUSE, 3000000 of 3000000 bytes moved"
	cmp "$SRC/secret" "$SRC/out" || fail "out through the bind"
	out=$("${CP[@]}" -v "$SRC/secret" "$BIND/in" 2>&1)
	assertContains "$out" "(by the daemon, around FUSE, 3000000 of 3000000 bytes moved"
	cmp "$SRC/secret" "$MNT/sub/in" || fail "in through the bind"
	# Where only the bind is in sight (a container's volume): refused, and
	# cp goes through the mount, saying why.
	err=$(unshare -m sh -c 'umount -l "$1" && exec "$2" info "$3"' - "$MNT" "$VYMAP" "$BIND/secret" 2>&1)
	assertEquals "ENOTSUP: $err" 95 $?
	assertContains "$err" "is on a bind mount of /sub, a subdirectory of a vyrefs mount"
	assertContains "$err" "(Fix: "
	out=$(unshare -m sh -c 'umount -l "$1" && exec "$2" cp -v "$3" "$4"' - "$MNT" "$BIN/vyrefs" "$BIND/secret" "$SRC/out2" 2>&1)
	assertEquals "cp through the mount: $out" 0 $?
	assertContains "$out" "(plain read and write"
	assertContains "$out" "is on a bind mount of /sub"
	cmp "$SRC/secret" "$SRC/out2" || fail "plain copy's bytes"
	assertEquals "the fake server was sent nothing" "" "$(fake_got)"
	assertEquals "the secret is as it was" "$(sum_of "$SRC/secret")" "$(sum_of "$MNT/sub/secret")"
}

# In a mount namespace of its own, root covers the mount's .vyre/socket
# with a file of the same mount naming NAME: the name is read from the
# mount's device, so only SO_PEERCRED can tell the server is not the
# daemon. Runs the rest of the arguments there.
with_socket_named() {
	local name=$1
	shift
	echo "$name" >"$MNT/sub/named"
	unshare -m sh -c 'mount --bind "$1/sub/named" "$1/.vyre/socket" && shift && exec "$@"' - "$MNT" "$@"
}

test_a_server_not_of_the_mounts_uid_is_sent_nothing() {
	need setpriv || return 0
	need_mount_ns || return 0
	name="@mallory-$$-$RANDOM"
	attacker_tree "@unused"
	start_fake "$name" || return
	err=$(with_socket_named "$name" "$VYMAP" info "$MNT/sub/secret" 2>&1)
	assertEquals "EPERM: $err" 1 $?
	assertContains "$err" "vyrefs: the server of $name (uid 65534, pid "
	assertContains "$err" "is not the daemon of $MNT (uid 0, who mounted it): refused, and nothing was sent to it (Fix: "
	out=$(with_socket_named "$name" "${CP[@]}" -v "$MNT/sub/secret" "$SRC/out" 2>&1)
	assertEquals "cp goes through the mount: $out" 0 $?
	assertContains "$out" "(plain read and write"
	assertContains "$out" "is not the daemon of $MNT"
	cmp "$SRC/secret" "$SRC/out" || fail "plain bytes"
	assertEquals "connected twice, and sent nothing" "connect
connect" "$(fake_got)"
}

test_a_path_socket_is_checked_as_an_abstract_one() {
	need setpriv || return 0
	need_mount_ns || return 0
	attacker_tree "@unused"
	dir=$(mktemp -d /tmp/vyrefs-sock.XXXXXX)
	chown 65534 "$dir"
	start_fake "$dir/s.sock" || return
	err=$(with_socket_named "$dir/s.sock" "$VYMAP" info "$MNT/sub/secret" 2>&1)
	assertEquals "EPERM: $err" 1 $?
	assertContains "$err" "the server of $dir/s.sock (uid 65534"
	assertEquals "connected once, and sent nothing" "connect" "$(fake_got)"
	kill "$FAKE_PID"
	wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=""
	rm -rf "$dir"
}

test_a_socket_nobody_serves_is_unreachable() {
	need_mount_ns || return 0
	attacker_tree "@unused"
	err=$(with_socket_named "@nobody-serves-$$-$RANDOM" "$VYMAP" info "$MNT/sub/secret" 2>&1)
	assertEquals "ECONNREFUSED: $err" 111 $?
	assertContains "$err" "vyrefs: cannot reach the daemon of $MNT at @nobody-serves-"
	assertNotContains "$err" "launcher"
	err=$(with_socket_named "not a socket name" "$VYMAP" info "$MNT/sub/secret" 2>&1)
	assertEquals "EPROTO: $err" 71 $?
	assertContains "$err" "does not name a socket (Fix: remount $MNT)"
}

# mountinfo writes a blank as \040 and a backslash as \134: the root is
# found where only a mount point so named is in sight.
test_a_mount_point_with_blanks_and_backslashes_is_found() {
	need_mount_ns || return 0
	truncate -s 2M "$MNT/f"
	BIND=$(mktemp -d "/tmp/vyrefs-a b\\c	d.XXXXXX")
	mount --bind "$MNT" "$BIND" || { fail "mount --bind"; return; }
	out=$(unshare -m sh -c 'umount -l "$1" && exec "$2" info "$3"' - "$MNT" "$VYMAP" "$BIND/f" 2>&1)
	assertEquals "2097152 $ORD" "$out"
	assertContains "$(grep -F "$(basename "$BIND" | cut -c1-8)" /proc/self/mountinfo)" 'vyrefs-a\040b\134c\011d'
}

# cp's own modes, as a reference: the same copy on the same machine.
ref_mode() { stat -c %A "$1"; }

test_cp_modes_are_cps() {
	need setpriv || return 0
	head -c 70000 /dev/urandom >"$SRC/suid"
	chown 65534:65534 "$SRC/suid"
	chmod 6755 "$SRC/suid"
	# Without -p: mode & 0777 & ~umask, no setuid or setgid, into and out.
	(umask 022 && "${CP[@]}" "$SRC/suid" "$MNT/a" && cp "$SRC/suid" "$SRC/a.ref" && "${CP[@]}" "$MNT/a" "$SRC/a.out") ||
		fail "cp umask 022"
	assertEquals "-rwxr-xr-x" "$(stat -c %A "$MNT/a")"
	assertEquals "as cp" "$(ref_mode "$SRC/a.ref")" "$(stat -c %A "$MNT/a")"
	assertEquals "out of the mount" "-rwxr-xr-x" "$(stat -c %A "$SRC/a.out")"
	assertEquals "root's now" "root" "$(stat -c %U "$MNT/a")"
	(umask 077 && "${CP[@]}" "$SRC/suid" "$MNT/b" && "${CP[@]}" "$MNT/b" "$SRC/b.out") || fail "cp umask 077"
	assertEquals "-rwx------" "$(stat -c %A "$MNT/b")"
	assertEquals "-rwx------" "$(stat -c %A "$SRC/b.out")"
	cmp "$SRC/suid" "$MNT/b" || fail "bytes"
	# An existing destination keeps its mode (and takes the bytes).
	printf 'old' >"$MNT/e"
	chmod 640 "$MNT/e"
	"${CP[@]}" "$SRC/suid" "$MNT/e" || fail "cp over e"
	assertEquals "-rw-r-----" "$(stat -c %A "$MNT/e")"
	cmp "$SRC/suid" "$MNT/e" || fail "bytes of e"
	# -p as root keeps the owner, so setuid and setgid too.
	"${CP[@]}" -p "$SRC/suid" "$MNT/p" || fail "cp -p"
	assertEquals "-rwsr-sr-x nobody" "$(stat -c '%A %U' "$MNT/p")"
	# -p as a user who cannot keep root's ownership: no setuid or setgid,
	# as cp -p (which says nothing of it either).
	cp "$SRC/suid" "$SRC/rootsuid" && chown root:root "$SRC/rootsuid" && chmod 6755 "$SRC/rootsuid"
	"${NOBODY[@]}" "${CP[@]}" -p "$SRC/rootsuid" "$MNT/q" || fail "cp -p as 65534"
	"${NOBODY[@]}" cp -p "$SRC/rootsuid" "$SRC/q.ref" 2>/dev/null
	assertEquals "-rwxr-xr-x nobody" "$(stat -c '%A %U' "$MNT/q")"
	assertEquals "as cp -p" "$(ref_mode "$SRC/q.ref")" "$(stat -c %A "$MNT/q")"
	# -r: directories made get mode & 0777 & ~umask.
	mkdir -p "$SRC/tree/sub"
	chmod 2775 "$SRC/tree"
	chmod 777 "$SRC/tree/sub"
	cp "$SRC/suid" "$SRC/tree/sub/f" && chmod 4777 "$SRC/tree/sub/f"
	(umask 027 && "${CP[@]}" -r "$SRC/tree" "$MNT/tree") || fail "cp -r"
	assertEquals "-rwxr-x--- drwxr-x--- drwxr-x---" \
		"$(stat -c %A "$MNT/tree/sub/f") $(stat -c %A "$MNT/tree/sub") $(stat -c %A "$MNT/tree")"
}

test_a_dead_daemon_is_named_not_the_launcher() {
	unmount_vyrefs # a death with no keeper to take over: survive=off
	mount_vyrefs "allow_other=on,survive=off" || { fail "mount"; return 1; }
	chmod 1777 "$MNT"
	truncate -s 2M "$MNT/f"
	mkfifo "$SRC/go"
	"$VYMAP" wait "$MNT/f" <"$SRC/go" >"$SRC/out" 2>"$SRC/err" &
	holder=$!
	exec 7>"$SRC/go"
	for _ in $(seq 200); do grep -q mapped "$SRC/out" && break; sleep 0.05; done
	assertEquals "mapped" "$(cat "$SRC/out")"
	kill -9 "$VY_PID"
	wait "$VY_PID" 2>/dev/null
	exec 7>&- # the holder unmaps now, with no daemon
	wait "$holder"
	rc=$?
	err=$(cat "$SRC/err")
	assertEquals "ECONNRESET: $err" 104 $rc
	assertContains "$err" "vyrefs: the daemon of $MNT (pid $VY_PID) has exited (Fix: "
	assertNotContains "$err" "launcher"
	err=$("$VYMAP" info "$MNT/f" 2>&1)
	assertEquals "ENOTCONN: $err" 107 $?
	assertContains "$err" "the daemon of its mount has exited"
	assertNotContains "$err" "launcher"
}

test_a_full_fd_table_is_emfile() {
	# The CUDA driver needs fds of its own to start (cuInit fails with a
	# handful): the fd counts below are the host backend's.
	[ "$backend" = host ] || { skip_test "fd counts of the host backend (the CUDA driver opens its own)"; return 0; }
	truncate -s 2M "$MNT/f"
	# 0-2, the file and the socket fit; the daemon's reply's fd does not.
	err=$(ulimit -n 5 && exec "$VYMAP" info "$MNT/f" 2>&1)
	assertEquals "EMFILE: $err" 24 $?
	assertEquals "vyrefs: receiving the daemon's answer: too many open files in this process (Fix: raise the open-file limit, ulimit -n, or close files)" "$err"
	err=$(ulimit -n 4 && exec "$VYMAP" info "$MNT/f" 2>&1)
	assertEquals "EMFILE: $err" 24 $?
	assertContains "$err" "too many open files in this process (Fix: "
	assertEquals "with room it maps" "2097152 $ORD" "$(ulimit -n 6 && exec "$VYMAP" info "$MNT/f" 2>&1)"
	assertEquals "nothing left mapped" 0 "$(stat_of mapped_bytes)"
}

# Every test here mounts as root with allow_other and acts as another user.
only_as_root "a root mount with allow_other, attacked as another user"

. tests/shunit.sh
