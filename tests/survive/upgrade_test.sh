#!/usr/bin/env bash
# survive=on (docs/survive.md, "Upgrade"): `vyrefs --upgrade MOUNTPOINT`
# hands the mount to the binary now installed at the daemon's path, while
# a program works in it, and the program sees no error. The mount runs
# from a copy of the binaries in the test's own directory; the copy is
# replaced by one whose version string differs (the same bytes, the
# version patched), and .vyre/config then names the new version.
. tests/fs/lib.sh
T=""
WPID=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-upgrade.XXXXXX) || return 1
	mkdir "$T/bin" && cp "$VYREFS" "$(dirname "$VYREFS")/vyrefs-keeper" "$T/bin/" || return 1
	# Trusted for an upgrade whatever the umask (Debian 13 gives users
	# 002: the build's binaries and a new directory are group-writable).
	chmod 755 "$T/bin" "$T/bin/vyrefs" "$T/bin/vyrefs-keeper"
}

tearDown() {
	[ -n "$WPID" ] && kill "$WPID" 2>/dev/null
	WPID=""
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

version_of() { "$1" --version | awk '{ print $2 }'; }
served_version() { head -1 "$MNT/.vyre/config" | sed -n 's/^# served by vyrefs //p'; }

# install_other_version: the copy at $T/bin/vyrefs becomes a binary whose
# version string is its own with the last character changed (renamed into
# place, as a package manager installs: the running daemon keeps the old).
install_other_version() {
	python3 - "$T/bin/vyrefs" "$T/bin/vyrefs.new" <<'PY' || return 1
import sys
b = open(sys.argv[1], "rb").read()
import subprocess
v = subprocess.run([sys.argv[1], "--version"], capture_output=True, text=True).stdout.split()[1].encode()
w = v[:-1] + (b"9" if v[-1:] != b"9" else b"8")
old, new = b"\0" + v + b"\0", b"\0" + w + b"\0"
assert b.count(old) == 1, b.count(old)
open(sys.argv[2], "wb").write(b.replace(old, new))
PY
	chmod 755 "$T/bin/vyrefs.new" && mv "$T/bin/vyrefs.new" "$T/bin/vyrefs"
}

# A program that works in the mount until told to stop: every error it
# meets goes to $T/errors; its count of rounds to $T/rounds.
start_worker() {
	python3 - "$MNT" "$T" <<'PY' &
import os, sys
mnt, t = sys.argv[1], sys.argv[2]
rounds, errors = 0, []
keep = open(os.path.join(mnt, "held"), "r+b")  # a file held open across the handovers
while not os.path.exists(os.path.join(t, "stop")) and len(errors) < 10:
    try:
        d = os.path.join(mnt, "w%d" % rounds)
        os.mkdir(d)
        with open(os.path.join(d, "f"), "wb") as f:
            f.write(b"%d" % rounds * 100)
        os.rename(os.path.join(d, "f"), os.path.join(d, "g"))
        with open(os.path.join(d, "g"), "rb") as f:
            if f.read() != b"%d" % rounds * 100:
                errors.append("round %d: bytes differ" % rounds)
        os.unlink(os.path.join(d, "g"))
        os.rmdir(d)
        keep.seek(0)
        if keep.read(5) != b"held\n":
            errors.append("round %d: the held file reads wrong" % rounds)
        rounds += 1
        if rounds == 1:
            open(os.path.join(t, "working"), "w").close()
    except OSError as e:
        errors.append("round %d: %s" % (rounds, e))
open(os.path.join(t, "errors"), "w").write("\n".join(errors))
open(os.path.join(t, "rounds"), "w").write(str(rounds))
PY
	WPID=$!
}

test_upgrade_under_load_to_another_version() {
	VYREFS=$T/bin/vyrefs mount_vyrefs "survive=on" || { fail "mount"; return; }
	echo held > "$MNT/held"
	local first out rc i
	first=$(version_of "$T/bin/vyrefs")
	assertEquals "config names the version serving" "$first" "$(served_version)"
	start_worker
	for i in 1 2 3; do
		[ $i = 2 ] && { install_other_version || { fail "patch the version"; return; }; }
		out=$("$T/bin/vyrefs" --upgrade "$MNT" 2>&1)
		rc=$?
		assertEquals "upgrade $i: $out" 0 "$rc"
		assertContains "upgrade $i says so" "$out" "handed over"
		assertEquals "takeovers after upgrade $i" "$i" "$(stat_of takeovers)"
	done
	touch "$T/stop"
	wait "$WPID"
	WPID=""
	assertEquals "the program saw no error" "" "$(cat "$T/errors")"
	assertTrue "the program worked" "[ $(cat "$T/rounds") -gt 0 ]"
	assertNotEquals "another version" "$first" "$(version_of "$T/bin/vyrefs")"
	assertEquals "the new version serves" "$(version_of "$T/bin/vyrefs")" "$(served_version)"
	assertContains "the log names the handover" "$(cat "$VY_LOG")" "was handing over (vyrefs --upgrade)"
	assertEquals "nothing left of the rounds" "held" "$(ls "$MNT")"
}

# install_refusing: the copy at $T/bin/vyrefs becomes a stand-in for a
# vyrefs of another state format, which refuses the kept state as one does
# (exit 76, VY_EXIT_REFUSED, having touched nothing) and notes its
# arguments in $T/refused.
install_refusing() {
	printf '#!/bin/sh\necho "$*" >>"%s/refused"\necho "vyrefs: state format 6; this binary reads 7..7" >&2\nexit 76\n' \
		"$T" >"$T/bin/vyrefs.new" && chmod 755 "$T/bin/vyrefs.new" && mv "$T/bin/vyrefs.new" "$T/bin/vyrefs"
}

# The keeper's slot 3: a successor that refuses the state is replaced by
# the binary that wrote it, and a kill's successor is that binary too;
# the program working in the mount sees no error.
# How many standbys the keeper saw end before a takeover is N.
standbys_ended() {
	[ "$(grep -c 'standby successor .* before a takeover' "$VY_LOG")" = "$1" ]
}

test_a_refusing_binary_leaves_the_old_one_serving() {
	VYREFS=$T/bin/vyrefs mount_vyrefs "survive=on" || { fail "mount"; return; }
	echo held > "$MNT/held"
	local first out rc pid
	first=$(version_of "$T/bin/vyrefs")
	start_worker
	wait_for "the program works" test -e "$T/working" || return
	install_refusing || { fail "install the stand-in"; return; }
	out=$("$VYREFS" --upgrade "$MNT" 2>&1)
	rc=$?
	assertEquals "the upgrade did not happen: $out" 1 "$rc"
	assertContains "it says why" "$out" "did not take over"
	assertEquals "the old version serves on" "$first" "$(served_version)"
	assertEquals "takeovers: the refusal, then the old binary" 2 "$(stat_of takeovers)"
	assertContains "the stand-in was started as a successor" "$(cat "$T/refused")" "--adopt"
	pid=$(stat_of pid)
	kill -9 "$pid"
	wait_for "the old binary serves again after a kill" serving_pid_not "$pid" || return
	# A death (and every standby) runs the binary that serves, the
	# keeper's slot 3, never what is at the path now (issue "survive 2":
	# another user may have put it there): the stand-in ran once, for
	# the upgrade, and no standby ended.
	assertEquals "takeovers after the kill" 3 "$(stat_of takeovers)"
	assertEquals "the old version serves on" "$first" "$(served_version)"
	assertEquals "the stand-in ran once" 1 "$(wc -l < "$T/refused")"
	assertTrue "no standby ended" "standbys_ended 0"
	cp "$VYREFS" "$T/bin/vyrefs.new" && chmod 755 "$T/bin/vyrefs.new" && mv "$T/bin/vyrefs.new" "$T/bin/vyrefs" ||
		{ fail "install vyrefs again"; return; }
	out=$("$T/bin/vyrefs" --upgrade "$MNT" 2>&1)
	assertEquals "a binary that reads the state takes over: $out" 0 $?
	touch "$T/stop"
	wait "$WPID"
	WPID=""
	assertEquals "the program saw no error" "" "$(cat "$T/errors")"
	assertTrue "the program worked: $(cat "$T/rounds")" "[ $(cat "$T/rounds") -gt 0 ]"
	assertContains "the keeper names the refusal" "$(cat "$VY_LOG")" "refused the kept state"
	assertEquals "nothing left of the rounds" "held" "$(ls "$MNT")"
}

# Issue "survive 2", items 3 and 6: mounted from a directory others may
# write (a build directory), the binary at the path is swapped for
# someone's script, then removed. A death runs the binary that serves (the
# keeper's slot 3): never the script, and the mount goes on when the path
# is gone. An upgrade from there is refused: by --upgrade before anything
# happens (exit 1, a Fix), and by the keeper if .vyre/upgrade is written
# by hand (the old binary goes on).
test_a_swapped_or_removed_binary_never_runs() {
	mkdir "$T/open" && chmod 777 "$T/open" && cp "$T/bin/vyrefs" "$T/bin/vyrefs-keeper" "$T/open/" ||
		{ fail "setup"; return; }
	VYREFS=$T/open/vyrefs mount_vyrefs "survive=on" || { fail "mount"; return; }
	echo kept > "$MNT/f"
	printf '#!/bin/sh\ntouch "%s/ran"\nexec "%s" "$@"\n' "$T" "$T/bin/vyrefs" >"$T/open/vyrefs.new" &&
		chmod 755 "$T/open/vyrefs.new" && mv "$T/open/vyrefs.new" "$T/open/vyrefs" || { fail "swap"; return; }
	local pid out rc
	pid=$(stat_of pid)
	kill -9 "$pid"
	wait_for "a successor after the swap" serving_pid_not "$pid" || return
	assertEquals "kept" "$(cat "$MNT/f")"
	assertFalse "the swapped-in script never ran" "[ -e '$T/ran' ]"
	pid=$(stat_of pid)
	out=$("$T/bin/vyrefs" --upgrade "$MNT" 2>&1)
	rc=$?
	assertEquals "--upgrade refuses: $out" 1 "$rc"
	assertContains "$out" "the binary an upgrade would run is not trusted: $T/open may be written by its group or others"
	assertContains "$out" "(Fix: install vyrefs where only root (or the mounting user) may write it"
	assertEquals "nothing happened" "$pid" "$(stat_of pid)"
	echo now > "$MNT/.vyre/upgrade" # past the command's check: the keeper refuses too
	wait_for "the binary that serves goes on" serving_pid_not "$pid" || return
	assertFalse "the script never ran" "[ -e '$T/ran' ]"
	assertContains "$(cat "$VY_LOG")" "upgrade: the binary at $T/open/vyrefs is not run: $T/open may be written"
	rm "$T/open/vyrefs"
	pid=$(stat_of pid)
	kill -9 "$pid"
	wait_for "a successor with the path gone" serving_pid_not "$pid" || return
	assertEquals "kept" "$(cat "$MNT/f")"
	assertEquals "takeovers" 3 "$(stat_of takeovers)"
}

test_upgrade_refused_without_survive() {
	mount_vyrefs "survive=off" || { fail "mount"; return; }
	local out rc
	out=$("$VYREFS" --upgrade "$MNT" 2>&1)
	rc=$?
	assertEquals "exit status" 1 "$rc"
	assertContains "$out" "Fix: mount with -o survive=on"
	assertEquals "the same daemon serves" "$VY_PID" "$(stat_of pid)"
}

test_upgrade_of_no_mount() {
	local out rc
	out=$("$VYREFS" --upgrade "$T" 2>&1)
	rc=$?
	assertEquals "exit status" 1 "$rc"
	assertContains "$out" "not a vyrefs mount"
}

. tests/shunit.sh
