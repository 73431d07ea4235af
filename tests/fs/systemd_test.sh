#!/usr/bin/env bash
# The systemd unit (systemd/vyrefs@.service.in, docs/manual.md "Under
# systemd"), tested without systemd as PID 1: the unit as systemd-analyze
# verify reads it, and the notify protocol on a socket this test listens
# on (tests/fs/notify_listen.py): READY=1 only once the mount answers, the
# keeper as MAINPID under survive=on, the daemon once the keeper is gone.
. tests/fs/lib.sh
LISTEN=tests/fs/notify_listen.py
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-notify.XXXXXX) || return 1
}

tearDown() {
	unmount_vyrefs
	drop_log
	[ -n "${LISTENER:-}" ] && kill "$LISTENER" 2>/dev/null
	LISTENER=""
	rm -rf "$T"
}

# notify_mount ADDR COUNT [OPTIONS]: a listener at ADDR for COUNT
# messages (its lines in $T/said), then vyrefs -f with NOTIFY_SOCKET=ADDR
# on a fresh MNT, as systemd starts the unit's ExecStart.
notify_mount() {
	MNT=$(mktemp -d /tmp/vyrefs-mnt.XXXXXX) || return 1
	chmod 755 "$MNT"
	python3 "$LISTEN" "$1" "$MNT" "$2" 60 >"$T/said" &
	LISTENER=$!
	wait_for "the listener" grep -qx listening "$T/said" || return 1
	mkdir -p "${VY_LOG_DIR:-/tmp}" && VY_LOG=$(mktemp "${VY_LOG_DIR:-/tmp}/vyrefs-log.XXXXXX") || return 1
	local opts="backend=$backend,host_memory=1G${3:+,$3}"
	[ "${VY_TEST_GPU_SHARED:-0}" = 1 ] && opts+=",resident_budget=4G" # as mount_vyrefs, beside other suites
	NOTIFY_SOCKET=$1 env --default-signal=INT "$VYREFS" -f -o "$opts" "$MNT" 2>"$VY_LOG" &
	VY_PID=$!
}

# The listener's lines after "listening", in $SAID, once it has them all
# (or gave up).
listened() {
	wait_exit "$LISTENER" "$VY_EXIT_BOUND" || fail "the listener did not end"
	LISTENER=""
	SAID=$(sed 1d "$T/said")
}

test_ready_comes_once_the_mount_answers_naming_the_keeper() {
	notify_mount "$T/notify" 1 || return
	listened
	assertEquals "one message, as the mount answers" \
		"READY=1;MAINPID=$VY_PID;STATUS=serving $MNT mounted=1 answers=1" "$SAID"
	VY_DAEMON=$(stat_of pid)
	assertNotEquals "the main process is the keeper, not the daemon" "$VY_PID" "$VY_DAEMON"
	assertEquals "the keeper runs in the process systemd started" vyrefs-keeper "$(cat /proc/"$VY_PID"/comm)"
}

test_ready_on_an_abstract_socket_with_survive_off_names_the_daemon() {
	notify_mount "@vyrefs-test-$$-$RANDOM" 1 survive=off || return
	listened
	assertEquals "READY=1;MAINPID=$VY_PID;STATUS=serving $MNT mounted=1 answers=1" "$SAID"
	assertEquals "the daemon serves in the process systemd started" "$VY_PID" "$(stat_of pid)"
}

# The keeper killed: the daemon serves on, and tells systemd it is the
# main process now, so a stop reaches it (a clean unmount, not SIGKILL).
test_the_daemon_becomes_the_main_process_when_the_keeper_is_gone() {
	notify_mount "$T/notify" 2 || return
	wait_for "READY" grep -q '^READY=1' "$T/said" || return
	VY_DAEMON=$(stat_of pid)
	kill -9 "$VY_PID"
	wait_exit "$VY_PID" "$VY_EXIT_BOUND"
	listened
	assertEquals "READY=1;MAINPID=$VY_PID;STATUS=serving $MNT mounted=1 answers=1
MAINPID=$VY_DAEMON;STATUS=serving without a keeper: this daemon's death now ends the mount mounted=1 answers=1" "$SAID"
	echo still >"$MNT/f"
	assertEquals "the mount serves on" still "$(cat "$MNT/f")"
	kill -TERM "$VY_DAEMON" # systemctl stop, to the new main process
	wait_for "the daemon's clean exit" exited "$VY_DAEMON"
	assertFalse "it unmounted" "grep -q ' $MNT ' /proc/self/mounts"
	rmdir "$MNT"
	MNT=""
}

test_nothing_is_sent_without_notify_socket() {
	mount_vyrefs || return
	assertTrue "no NOTIFY_SOCKET: nothing said about it" "! grep -q NOTIFY_SOCKET '$VY_LOG'"
}

test_the_unit_verifies() {
	need systemd-analyze || return 0
	# The unit as make install writes it, its binary at the prefix.
	mkdir -p "$T/pfx/bin" "$T/units"
	ln -s "$(realpath "$VYREFS")" "$T/pfx/bin/vyrefs"
	sed "s|@PREFIX@|$T/pfx|g" systemd/vyrefs@.service.in >"$T/units/vyrefs@.service"
	local out
	out=$(cd "$T/units" && systemd-analyze verify --man=no ./vyrefs@mnt-gpu.service 2>&1)
	assertEquals "systemd-analyze verify exit status" 0 $?
	assertEquals "systemd-analyze verify says nothing" "" "$out"
	# The commands systemd runs: ExecStart for /mnt/gpu, reload, stop.
	local unit=$T/units/vyrefs@.service
	assertEquals "$T/pfx/bin/vyrefs -f -o \${VYREFS_OPTIONS} %f" "$(sed -n 's/^ExecStart=//p' "$unit")"
	assertEquals "$T/pfx/bin/vyrefs --upgrade %f" "$(sed -n 's/^ExecReload=//p' "$unit")"
	assertEquals notify "$(sed -n 's/^Type=//p' "$unit")"
	assertEquals mixed "$(sed -n 's/^KillMode=//p' "$unit")"
}

. tests/shunit.sh
