#!/usr/bin/env bash
# run.sh: long (minutes: it starts first)
# survive=on under load (docs/survive.md, "Chaos"): for VY_CHAOS_SECONDS
# (60) the daemon is SIGKILLed every 2 s while fio writes with crc32c
# verify (8 jobs), a tree of VY_CHAOS_FILES (10,000) small files is untarred
# and its directories renamed about, a program holds a mapping, .vyre/ctl
# sequences fill and copy, `vyrefs cp` copies in and out, and (as root)
# another user attacks the mount as trust_test.sh does. Afterwards:
# fio verified every block, no program saw an error (a ctl sequence the
# daemon died under gets EIO that says so: it is run again), the tree
# equals a copy made by the same steps on local disk (names, modes, owners,
# sizes, bytes, file times, xattrs, links), the mapping's bytes are there,
# and once everything is removed the accounting is back at zero.
. tests/fs/lib.sh
. tests/survive/lib.sh
VYMAP=${BUILD}/tests/client/vymap
SECS=${VY_CHAOS_SECONDS:-60}
FILES=${VY_CHAOS_FILES:-10000}
T=""
MPID=""
WORKERS=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-chaos.XXXXXX) || return 1
}

tearDown() {
	touch "$T/stop"
	[ -n "$MPID" ] && kill "$MPID" 2>/dev/null
	MPID=""
	exec 7>&- 2>/dev/null
	# shellcheck disable=SC2086 # the pids, one word each
	[ -n "$WORKERS" ] && wait $WORKERS 2>/dev/null
	WORKERS=""
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

stopped() { [ -e "$T/stop" ]; }
err() { echo "$*" >>"$T/errors"; }

# The tree: FILES small files in 100 directories, with modes, an xattr
# each tenth, a symlink and a hard link each hundredth; as a tar.
make_tree() {
	mkdir -p "$T/src/tree"
	local d i
	for d in $(seq 0 99); do
		mkdir "$T/src/tree/d$d"
		for i in $(seq 0 $((FILES / 100 - 1))); do
			printf 'file %d of %d\n' "$i" "$d" >"$T/src/tree/d$d/f$i"
		done
		chmod 640 "$T/src/tree/d$d/f0"
		setfattr -n user.k -v "v$d" "$T/src/tree/d$d/f1" 2>/dev/null
		ln -s f2 "$T/src/tree/d$d/s"
		ln "$T/src/tree/d$d/f3" "$T/src/tree/d$d/h"
	done
	tar --xattrs -C "$T/src" -cf "$T/tree.tar" tree
}

# untar, then rename directories about, the same steps in DIR and the mount.
tree_worker() {
	tar --xattrs -C "$T/shadow" -xf "$T/tree.tar" || err "untar to disk"
	tar --xattrs -C "$MNT" -xf "$T/tree.tar" 2>>"$T/errors" || err "untar into the mount"
	local n=0
	while ! stopped; do
		local a=$((n % 100)) where
		for where in "$T/shadow" "$MNT"; do
			if [ -d "$where/tree/d$a" ]; then
				mv "$where/tree/d$a" "$where/tree/r$a" 2>>"$T/errors" || err "rename d$a in $where"
			else
				mv "$where/tree/r$a" "$where/tree/d$a" 2>>"$T/errors" || err "rename r$a in $where"
			fi
		done
		n=$((n + 1))
	done
}

# .vyre/ctl: fill then copy, again and again; a sequence the daemon died
# under is refused with EIO and a reply that says so, and run again.
ctl_worker() {
	truncate -s 1M "$MNT/a" "$MNT/b" || err "truncate a b"
	local n=0 v
	while ! stopped; do
		v=$((n % 250 + 1))
		if ! printf 'fill a %d\ncopy a b\n' "$v" >"$MNT/.vyre/ctl" 2>"$T/ctl.err"; then
			grep -q "Input/output error" "$T/ctl.err" || err "ctl: $(cat "$T/ctl.err")"
			continue # the daemon died under it: run again
		fi
		[ "$(od -An -tu1 -N1 -j 524288 "$MNT/b" | tr -d ' ')" = "$v" ] || err "ctl: b does not hold $v"
		n=$((n + 1))
	done
	echo "$n" >"$T/ctl.done"
}

# vyrefs cp in and out, each copy checked.
cp_worker() {
	make_data "$T/data" $((3 << 20)) 5
	local n=0
	while ! stopped; do
		"$VYREFS" cp "$T/data" "$MNT/c" 2>>"$T/errors" || err "vyrefs cp in"
		"$VYREFS" cp "$MNT/c" "$T/back" 2>>"$T/errors" || err "vyrefs cp out"
		cmp -s "$T/data" "$T/back" || err "vyrefs cp: the copy differs"
		n=$((n + 1))
	done
	echo "$n" >"$T/cp.done"
}

# As root (a root mount with allow_other): trust_test.sh's attacks, as
# mallory (uid 65534), against the same mount while it is killed (issue
# "survive 2"): request ids the state's loader refuses (item 1), an xattr
# near what a record holds (2), --upgrade and .vyre/upgrade, which are not
# hers (3), a second HELLO and messages with extra fds, and copies of her
# own file in and out (5). Each is refused or done as hers; the checks
# after the run say none of it stopped the mount keeping (kept_failures
# 0), took it over (takeovers = kills) or changed what it serves.
MALLORY=65534
as_mallory() { setpriv --reuid=$MALLORY --regid=$MALLORY --clear-groups "$@"; }
attack_worker() {
	local n=0 id c big
	as_mallory sh -c 'head -c 65536 /dev/zero | tr "\0" m >"$1/pub/hers"' - "$MNT" || err "attack: her file"
	as_mallory touch "$T/pub/out" || err "attack: her file out of the mount"
	big=$(head -c 40000 /dev/zero | tr '\0' x)
	while ! stopped; do
		for id in 0x8000000000000001 0xffffffffffffffff 0; do
			echo "map $id: $(VYATTACK_UNIQUE=$id as_mallory "$T/bin/vyattack" "$MNT" map-fd "$MNT/pub/hers" O_RDWR 2>&1)" >>"$T/attack.out"
		done
		as_mallory setfattr -n user.big -v "$big" "$MNT/pub/hers" 2>/dev/null
		echo "upgrade: $(as_mallory "$T/bin/vyrefs" --upgrade "$MNT" 2>&1 && echo SUCCEEDED)" >>"$T/attack.out"
		as_mallory sh -c 'echo now >"$1/.vyre/upgrade"' - "$MNT" 2>/dev/null && err "attack: mallory wrote .vyre/upgrade"
		as_mallory "$T/bin/vyattack" "$MNT" hello-twice >/dev/null 2>&1
		for c in "17 3" "20 5" "18 2"; do
			# shellcheck disable=SC2086 # opcode and count, two words
			as_mallory "$T/bin/vyattack" "$MNT" extra-fds $c >/dev/null 2>&1
		done
		as_mallory "$T/bin/vyattack" "$MNT" copy-out "$MNT/pub/hers" O_RDONLY "$T/pub/out" O_WRONLY >/dev/null 2>&1
		as_mallory "$T/bin/vyattack" "$MNT" copy-into "$MNT/pub/hers" O_RDWR "$T/pub/out" O_RDONLY >/dev/null 2>&1
		n=$((n + 1))
	done
	echo "$n" >"$T/attack.done"
}

# SIGKILL the serving daemon every 2 s; count the takeovers.
killer() {
	local n=0 old
	while ! stopped; do
		sleep 2
		old=$(stat_of pid)
		[ -n "$old" ] || { err "killer: no pid in .vyre/stats"; continue; }
		kill -9 "$old"
		for _ in $(seq 600); do serving_pid_not "$old" && break; sleep 0.05; done
		serving_pid_not "$old" || err "killer: no successor within 30 s of killing $old"
		n=$((n + 1))
	done
	echo "$n" >"$T/kills"
}

# What a tree is, less what two copies made apart differ in (inode numbers,
# directories' times): one line per path.
listing() {
	# A directory's size is its filesystem's own (the shadow's /tmp may be
	# tmpfs): only the others' sizes are compared.
	(cd "$1" && find . \( -type d -printf '%p %y %m %U %G dir %l\n' \) -o -printf '%p %y %m %U %G %s %l\n' | sort)
	(cd "$1" && find . -type f -printf '%p %n %T@\n' | sort)
	(cd "$1" && find . -type f -exec sha256sum {} + | sort -k2)
	(cd "$1" && getfattr -R -d -m - --absolute-names . 2>/dev/null | grep -v '^$' | sort)
}

test_everything_goes_on_through_a_kill_every_two_seconds() {
	command -v fio >/dev/null || { skip_test "needs fio (Fix: apt-get install fio; make test-deps does)"; return; }
	make_tree
	mkdir "$T/shadow"
	local attacking="" opts="survive=on"
	if [ "$(id -u)" = 0 ] && command -v setfattr >/dev/null; then
		attacking=1 opts+=",allow_other=on"
		mkdir -p "$T/bin" "$T/pub"
		cp "$BUILD/tests/client/vyattack" "$VYREFS" "$T/bin/" || { fail "copy the attacker's binaries"; return; }
		chmod 755 "$T" "$T/bin" "$T/bin/vyattack" "$T/bin/vyrefs"
		chown "$MALLORY:$MALLORY" "$T/pub"
	else
		echo "the attacks are left out: they act as another user against a root mount (needs root, and setfattr)"
	fi
	mount_vyrefs "$opts" || { fail "mount"; return; }
	if [ -n "$attacking" ]; then
		mkdir "$MNT/pub" && chmod 1777 "$MNT/pub" || { fail "pub"; return; }
	fi
	local used0
	wait_for "a standby" standby_settled || return
	used0=$(df --output=used "$MNT" | tail -1)
	# Written, not truncated: a hole has no memory to map (cuda refuses it).
	dd if=/dev/zero of="$MNT/m" bs=1M count=4 status=none || { fail "write m"; return; }
	mkfifo "$T/go"
	# On the host backend the holder writes byte 3 through its mapping at
	# the end; vymap has no CUDA context, so on cuda it only holds it.
	local byte=3
	[ "$backend" = cuda ] && byte=""
	"$VYMAP" wait "$MNT/m" $byte <"$T/go" >"$T/map.out" 2>&1 &
	MPID=$!
	exec 7>"$T/go"
	wait_for "the file is mapped" grep -q mapped "$T/map.out" || { fail "vymap: $(cat "$T/map.out")"; return; }
	local mapped
	mapped=$(stat_of mapped_bytes)
	mkdir "$MNT/fio"
	fio --name=chaos --directory="$MNT/fio" --rw=randwrite --bs=4k --size=4M --numjobs=8 --ioengine=psync \
		--verify=crc32c --verify_backlog=64 --verify_fatal=1 --time_based --runtime="$SECS" \
		--verify_state_save=0 --group_reporting >"$T/fio.out" 2>&1 &
	local fio=$!
	WORKERS=$fio
	tree_worker &
	WORKERS="$WORKERS $!"
	ctl_worker &
	WORKERS="$WORKERS $!"
	cp_worker &
	WORKERS="$WORKERS $!"
	killer &
	WORKERS="$WORKERS $!"
	if [ -n "$attacking" ]; then
		attack_worker &
		WORKERS="$WORKERS $!"
	fi
	wait "$fio"
	local fio_rc=$?
	touch "$T/stop"
	# shellcheck disable=SC2086 # the pids, one word each
	wait $WORKERS
	WORKERS=""
	assertEquals "fio: $(grep -iE 'err|verify' "$T/fio.out" | head -5)" 0 "$fio_rc"
	assertNotContains "fio verified every block" "$(cat "$T/fio.out")" "verify: bad"
	assertEquals "no program saw an error" "" "$(head -c 2000 "$T/errors" 2>/dev/null)"
	local kills
	kills=$(cat "$T/kills")
	assertTrue "the daemon was killed about every 2 s ($kills)" "[ $kills -ge $((SECS / 4)) ]"
	assertEquals "every kill was taken over" "$kills" "$(stat_of takeovers)"
	assertTrue "ctl sequences ran ($(cat "$T/ctl.done"))" "[ $(cat "$T/ctl.done") -gt 0 ]"
	assertTrue "copies ran ($(cat "$T/cp.done"))" "[ $(cat "$T/cp.done") -gt 0 ]"
	if [ -n "$attacking" ]; then
		assertTrue "attacks ran ($(cat "$T/attack.done"))" "[ $(cat "$T/attack.done") -gt 0 ]"
		# Each kind of attack reached a serving daemon and was refused there.
		assertContains "a request id the loader refuses ends her connection" "$(cat "$T/attack.out")" \
			"map 0x8000000000000001: closed"
		# Refused by the kernel's permissions: at .vyre/upgrade, or sooner
		# where she may not even look at the mount's binary (a clone under
		# /root: "not trusted: ...: Permission denied").
		assertContains "her --upgrade is refused by the kernel's permissions" "$(grep '^upgrade: ' "$T/attack.out")" \
			"Permission denied"
		assertNotContains "no --upgrade of hers went through" "$(cat "$T/attack.out")" "SUCCEEDED"
		assertEquals "no attack stopped the mount keeping" 0 "$(stat_of kept_failures)"
		assertEquals "her file is hers, as she made it" "$MALLORY 65536" "$(stat -c '%u %s' "$MNT/pub/hers")"
	fi
	[ "$(id -u)" = 0 ] && echo 3 >/proc/sys/vm/drop_caches
	listing "$T/shadow/tree" >"$T/want"
	listing "$MNT/tree" >"$T/got"
	assertEquals "the tree equals the one on disk: $(diff "$T/want" "$T/got" | head -5)" "" \
		"$(diff "$T/want" "$T/got" | head -1)"
	assertEquals "the mapping outlived every kill" "$mapped" "$(stat_of mapped_bytes)"
	exec 7>&-
	wait "$MPID"
	local map_rc=$?
	MPID=""
	assertEquals "vymap: $(cat "$T/map.out")" 0 "$map_rc"
	assertEquals "the bytes written through the mapping" "$(head -c 4194304 /dev/zero | tr '\0' "\\${byte:-0}" | sum_of /dev/stdin)" \
		"$(sum_of "$MNT/m")"
	rm -rf "${MNT:?}"/* || fail "rm -r"
	wait_for "every byte freed" stat_is resident_bytes 0
	wait_for "a standby" standby_settled
	assertEquals "no mapping left" 0 "$(stat_of mapped_bytes)"
	assertEquals "df as at the start" "$used0" "$(df --output=used "$MNT" | tail -1)"
	assertNotContains "no file lost its bytes" "$(cat "$VY_LOG")" "lost its bytes"
}

. tests/shunit.sh
