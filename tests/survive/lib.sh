# The survive suites' kill shim (killshim.c): sourced after tests/fs/lib.sh.
SHIM=$PWD/$BUILD/tests/survive/killshim.so
RESIDENT_SHIM=$PWD/$BUILD/tests/survive/residentshim.so # resend_test's
DEVICEGATE=$PWD/$BUILD/tests/survive/devicegate.so # keeper_test's: a standby's devices held shut

# mount_shimmed VAR=VALUE...: a survive=on mount whose processes load the
# kill shim with those settings (killshim.c says what each does); the test
# process itself does not keep them.
mount_shimmed() {
	local kv rc
	for kv in "LD_PRELOAD=$SHIM" "$@"; do export "${kv?}"; done
	mount_vyrefs "survive=on"
	rc=$?
	for kv in "LD_PRELOAD=$SHIM" "$@"; do unset "${kv%%=*}"; done
	return $rc
}

stat_is() { [ "$(stat_of "$1")" = "$2" ]; }

# kill_daemon: SIGKILL the serving daemon; wait for its successor.
kill_daemon() {
	local old
	old=$(stat_of pid)
	kill -9 "$old"
	wait_for "a successor serves" serving_pid_not "$old" && wait_for "its standby" standby_settled
}
