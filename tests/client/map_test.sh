#!/usr/bin/env bash
# Mapping files into programs (client/, sock/mapsrv.c) on the host backend:
# the same protocol as on a GPU, over memfd. numpy sees and writes the
# file's bytes with no copy; writes show through the mount after sync and
# after unmap; two processes share one mapping's memory; a killed client
# releases its mapping; a mapped file cannot be resized and is freed at the
# last unmap after unlink; another user without write permission gets
# EACCES; an fd of another filesystem, a read-only fd and bogus messages on
# the socket are refused without harm.
. tests/fs/lib.sh
VYMAP=${BUILD}/tests/client/vymap
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}

# A python with numpy: the one on PATH, else Debian's (python3-numpy).
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3

setUp() {
	mount_vyrefs "$(others_opt)" || { fail "mount"; return 1; }
	chmod 1777 "$MNT"
}

py() { $PY - "$MNT" "$@"; }

test_socket_is_named_in_vyre() {
	name=$(cat "$MNT/.vyre/socket")
	if [ "$(id -u)" = 0 ]; then
		# root's daemon: a socket under /run/vyrefs, which only root may
		# write; everyone's with allow_other
		# (under survive=on named for the keeper too: vyrefs-kKEEPER-PID-N)
		case "$name" in
		"/run/vyrefs/vyrefs-$VY_DAEMON-"* | "/run/vyrefs/vyrefs-k$(stat_of keeper_pid)-$VY_DAEMON-"*) ;;
		*) fail "root's daemon's socket: $name" ;;
		esac
		assertEquals "srw-rw-rw-" "$(stat -c %A "$name")"
	else
		# a user's: in their own runtime dir, theirs alone (0600), where
		# there is one; else abstract (clients check it by SO_PEERCRED)
		case "$name" in
		"@vyrefs-$VY_DAEMON-"* | "@vyrefs-k"*"-$VY_DAEMON-"*) ;;
		"${XDG_RUNTIME_DIR:-/nonexistent}/vyrefs/vyrefs-$VY_DAEMON-"* | "${XDG_RUNTIME_DIR:-/nonexistent}/vyrefs/vyrefs-k"*"-$VY_DAEMON-"*) assertEquals "srw-------" "$(stat -c %A "$name")" ;;
		*) fail "a user's daemon's socket: $name" ;;
		esac
	fi
	assertEquals "-r--r--r--" "$(stat -c %A "$MNT/.vyre/socket")"
}

host_only() {
	[ "$backend" = host ] || { skip_test "host memory numpy can address (tests/gpu/gpu_map_test.sh has the GPU's)"; return 1; }
}

test_numpy_sees_and_writes_the_file_with_no_copy() {
	host_only || return 0
	$PY -c 'import numpy' 2>/dev/null || { skip_test "needs numpy (python3-numpy)"; return; }
	head -c 3000000 /dev/urandom >"$MNT.src"
	cp "$MNT.src" "$MNT/w" || fail "cp"
	h2d=$(stat_of h2d_bytes)
	d2h=$(stat_of d2h_bytes)
	out=$(py <<'PY'
import sys, hashlib, numpy as np, vyrefs
mnt = sys.argv[1]
with vyrefs.map(mnt + "/w") as m:
    a = np.asarray(m)
    assert a.ctypes.data == m.ptr, "a copy"
    print(hashlib.sha256(a.tobytes()).hexdigest(), m.size, m.device, m.shape)
    st = dict(l.split() for l in open(mnt + "/.vyre/stats"))
    print(st["h2d_bytes"], st["d2h_bytes"])
    a[:8] = np.arange(8, dtype=np.uint8)
    m.sync()
    print(open(mnt + "/w", "rb").read(8).hex())
    f = vyrefs.map(mnt + "/w", dtype="float32", shape=(100, 3))
    print(np.asarray(f).shape, np.asarray(f).dtype, np.asarray(f).ctypes.data == f.ptr)
    f.close()
    a[:8] = 7
print(open(mnt + "/w", "rb").read(8).hex())
PY
)
	assertEquals "$(sha256sum <"$MNT.src" | cut -d' ' -f1) 3000000 -1 (3000000,)
$h2d $d2h
0001020304050607
(100, 3) float32 True
0707070707070707" "$out"
	# ("$h2d $d2h" above: mapping and reading 3 MB moved no byte.)
	assertEquals 2 "$(stat_of maps)"
	assertEquals "every mapping ended" 0 "$(stat_of mapped_bytes)"
	rm -f "$MNT.src"
}

test_c_program_maps_fills_and_unmaps() {
	host_only || return 0
	truncate -s 5M "$MNT/f"
	assertEquals "5242880 -1" "$($VYMAP info "$MNT/f")"
	$VYMAP fill "$MNT/f" 171 || fail "fill"
	assertEquals "every byte written" 5242880 "$(tr -d '\253' <"$MNT/f" | wc -c | xargs -I{} expr 5242880 - {})"
	assertEquals "6291456 bytes held for it (whole 2 MiB granules)" 6291456 "$(stat_of resident_bytes)"
	printf 'x' >"$MNT/tiny"
	assertEquals "1 -1" "$($VYMAP info "$MNT/tiny")"
	assertEquals "the tiny file moved to memory of its own" 1 "$(stat_of share_moves)"
	: >"$MNT/empty"
	err=$($VYMAP info "$MNT/empty" 2>&1)
	assertEquals "an empty file has no memory: EINVAL" 22 $?
	assertContains "$err" "truncate -s"
}

test_two_processes_share_one_file() {
	host_only || return 0
	$PY -c 'import numpy' 2>/dev/null || { skip_test "needs numpy (python3-numpy)"; return; }
	truncate -s 4M "$MNT/shared"
	out=$(py <<'PY'
import sys, subprocess, numpy as np, vyrefs
mnt = sys.argv[1]
with vyrefs.map(mnt + "/shared", dtype="uint32") as m:
    a = np.asarray(m)
    a[12345] = 0xdeadbeef
    child = "import sys, numpy as np, vyrefs\n" \
            "m = vyrefs.map(sys.argv[1], dtype='uint32'); a = np.asarray(m)\n" \
            "print(hex(a[12345])); a[7] = 42; m.close()\n"
    print(subprocess.run([sys.executable, "-c", child, mnt + "/shared"], capture_output=True, text=True).stdout.strip())
    print(a[7])
PY
)
	assertEquals "0xdeadbeef
42" "$out"
}

test_killed_client_releases_its_mapping() {
	truncate -s 8M "$MNT/k"
	$VYMAP hold "$MNT/k" 60 >"$MNT.out" &
	holder=$!
	for _ in $(seq 100); do grep -q mapped "$MNT.out" 2>/dev/null && break; sleep 0.05; done
	assertEquals 8388608 "$(stat_of mapped_bytes)"
	# It grows in place (the program keeps its 8 MiB), but does not shrink.
	truncate -s 16M "$MNT/k" || fail "a mapped file grows"
	assertEquals 8388608 "$(stat_of mapped_bytes)"
	err=$(truncate -s 4M "$MNT/k" 2>&1)
	assertContains "a mapped file does not shrink: $err" "$err" "Device or resource busy"
	assertEquals 16777216 "$(stat -c %s "$MNT/k")"
	kill -9 "$holder"
	wait "$holder" 2>/dev/null
	for _ in $(seq 100); do [ "$(stat_of mapped_bytes)" = 0 ] && break; sleep 0.05; done
	assertEquals "the mapping ended with the process" 0 "$(stat_of mapped_bytes)"
	truncate -s 4M "$MNT/k" || fail "shrink once unmapped"
	rm -f "$MNT.out"
}

test_unlinked_mapped_file_is_freed_at_the_last_unmap() {
	truncate -s 6M "$MNT/gone"
	$VYMAP hold "$MNT/gone" 2 >"$MNT.out" &
	holder=$!
	for _ in $(seq 100); do grep -q mapped "$MNT.out" 2>/dev/null && break; sleep 0.05; done
	rm "$MNT/gone"
	assertEquals "still held while mapped" 6291456 "$(stat_of resident_bytes)"
	wait "$holder"
	assertEquals 0 $?
	for _ in $(seq 100); do [ "$(stat_of resident_bytes)" = 0 ] && break; sleep 0.05; done
	assertEquals "freed at the unmap" 0 "$(stat_of resident_bytes)"
	rm -f "$MNT.out"
	unmount_vyrefs
	assertReleased
}

test_another_user_without_write_permission_gets_eacces() {
	need setpriv || return 0
	nobody_bins || return 1
	truncate -s 2M "$MNT/private"
	chmod 644 "$MNT/private"
	err=$(as_nobody "$NOBODY_VYMAP" info "$MNT/private" 2>&1)
	assertEquals "EACCES" 13 $?
	assertContains "$err" "Permission denied"
	assertContains "$err" "(Fix: "
	chmod 666 "$MNT/private"
	assertEquals "with write permission it maps" "2097152 $([ "$backend" = host ] && echo -1 || echo 0)" \
		"$(as_nobody "$NOBODY_VYMAP" info "$MNT/private")"
}

# Issue 67 (edges) 4: a reader maps a 0644 root file read-only (the host
# backend; tests/gpu/gpu_map_test.sh has the GPU's refusal): its bytes read
# exactly, a write through the mapping kills only the process that made it
# (a forked child: SIGSEGV, the parent reads on), and the file never
# changes. A read-write mapping still needs write permission.
test_a_reader_maps_read_only_and_a_write_faults_in_its_process_only() {
	host_only || return 0
	need setpriv || return 0
	nobody_bins || return 1
	head -c 3000000 /dev/urandom >"$MNT.src"
	cp "$MNT.src" "$MNT/model" && chmod 644 "$MNT/model" || fail "cp"
	as_nobody "$NOBODY_VYMAP" ro-cat "$MNT/model" >"$MNT.out"
	assertEquals "the reader maps it" 0 $?
	cmp -s "$MNT.src" "$MNT.out" || fail "the reader's mapping holds other bytes than the file"
	first=$(od -An -tu1 -N1 "$MNT.src" | tr -d ' ')
	out=$(as_nobody "$NOBODY_VYMAP" ro-write "$MNT/model")
	assertEquals "the write faults in the child only" "child: signal 11
parent: reads $first" "$out"
	cmp -s "$MNT.src" "$MNT/model" || fail "the file changed"
	err=$(as_nobody "$NOBODY_VYMAP" info "$MNT/model" 2>&1)
	assertEquals "read-write still needs write permission" 13 $?
	assertContains "$err" "VY_MAP_READONLY"
	assertEquals "no mapping left" 0 "$(stat_of mapped_bytes)"
	rm -f "$MNT.src" "$MNT.out"
}

# The daemon's own checks, with the protocol spoken by hand.
test_daemon_refuses_foreign_and_read_only_fds_and_bogus_messages() {
	truncate -s 2M "$MNT/f"
	out=$(python3 - "$MNT" <<'PY'
import os, socket, struct, sys
mnt = sys.argv[1]
name = open(mnt + "/.vyre/socket").read().strip()
HDR = struct.Struct("<IHHQ")
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + name[1:] if name.startswith("@") else name)
    return s
def recv_all(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b
def request(s, op, body, fds=()):
    msg = HDR.pack(HDR.size + len(body), op, len(fds), 1) + body
    socket.send_fds(s, [msg], list(fds)) if fds else s.sendall(msg)
    h = recv_all(s, HDR.size)
    if h is None:
        return "closed"
    ln, rop, nfds, _ = HDR.unpack(h)
    body = recv_all(s, ln - HDR.size)
    rc, = struct.unpack_from("<i", body)
    return "rc=%d %s" % (rc, body[8:520].split(b"\0")[0].decode())
hello = struct.pack("<IIIiQ", 2, 0, 0, 0, 0)
s = connect()
print(request(s, 17, struct.pack("<II", 0, 0)))            # MAP before HELLO
s = connect(); print(request(s, 16, hello)[:4])
tmp = open("/proc/self/exe", "rb")
print(request(s, 17, struct.pack("<II", 0, 0), [tmp.fileno()]))   # another filesystem
s = connect(); request(s, 16, hello)
ro = os.open(mnt + "/f", os.O_RDONLY)
print(request(s, 17, struct.pack("<II", 0, 0), [ro]))             # read-only
s = connect(); request(s, 16, hello)
print(request(s, 999, b"junk"))                                   # unknown request
s = connect()
s.sendall(HDR.pack(8, 16, 0, 1))                                  # a length under the header
print(recv_all(s, 1) is None)
s = connect()
s.sendall(b"\xff" * 64)                                           # garbage
print(recv_all(s, 1) is None)
s = connect()
s.sendall(HDR.pack(60 << 20, 16, 0, 1))                           # a 60 MiB request
print(recv_all(s, 1) is None)
s = connect(); request(s, 16, hello)
rw = os.open(mnt + "/f", os.O_RDWR)
print(request(s, 17, struct.pack("<II", 0, 0), [rw])[:4])         # and a good one still works
PY
)
	assertContains "$out" "rc=1 request 17 before HELLO"
	assertContains "$out" "rc=0"
	assertContains "$out" "the passed file is not on this mount"
	assertContains "$out" "opened read-only"
	assertContains "$out" "unknown request 999"
	assertEquals "3 cut connections" 3 "$(echo "$out" | grep -c '^True$')"
	assertEquals "the daemon lives" "$(cat "$MNT/.vyre/socket")" "$(cat "$MNT/.vyre/socket")"
	assertEquals 1 "$(stat_of maps)"
	assertEquals 0 "$(stat_of mapped_bytes)"
}

. tests/shunit.sh
