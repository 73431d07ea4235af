# Sourced last by every shunit2 suite, in place of shunit2 itself: runs the
# suite's tests with shunit2 ($SHUNIT2, else /usr/bin/shunit2), and
#  - marks each setUp (`@setUp`), so tests/run.sh counts a failure there
#    against the test it was for, and counts as passed only a test whose
#    body ran and failed nothing;
#  - runs no test body after its setUp failed (a mount that did not come up,
#    a temp dir not made) or left $MNT set to something that is not a live
#    vyrefs mount: the test fails instead, saying why. A test never writes
#    where its mount should have been.
# shunit2 itself would run the body after a failed `fail` in setUp, and stop
# the whole suite when setUp returns non-zero.

vy_suite_setUp() { :; }
if declare -F setUp >/dev/null; then
	eval "vy_suite_setUp () $(declare -f setUp | tail -n +2)"
fi

setUp() {
	echo "@setUp"
	vy_suite_setUp
	local rc=$? why=""
	if [ $rc != 0 ]; then
		why="its setUp failed (exit $rc)"
	elif [ -n "${MNT:-}" ] && declare -F vyrefs_live >/dev/null && ! vyrefs_live "$MNT"; then
		why="\$MNT ($MNT) is not a live vyrefs mount"
	fi
	[ -z "$why" ] && return 0
	# shunit2 2.1 calls the test by the name in _shunit_test_; without it,
	# a non-zero setUp stops the suite (tests/run.sh counts the rest failed).
	[ -n "${_shunit_test_:-}" ] || return 1
	eval "${_shunit_test_}() { fail 'not run: $why'; return 1; }"
	return 0
}

# The suite's oneTimeTearDown, then the binaries copied for another user
# (tests/fs/lib.sh's nobody_bins) go.
vy_suite_oneTimeTearDown() { :; }
if declare -F oneTimeTearDown >/dev/null; then
	eval "vy_suite_oneTimeTearDown () $(declare -f oneTimeTearDown | tail -n +2)"
fi
oneTimeTearDown() {
	vy_suite_oneTimeTearDown
	[ -z "${NOBODY_DIR:-}" ] || rm -rf "$NOBODY_DIR"
}

. "${SHUNIT2:-/usr/bin/shunit2}"
