# Sourced by the shunit2 suites: skip a test whose tools this machine lacks.
# The runner (tests/run.sh) counts a test that printed SKIPPED and failed
# nothing as skipped, not passed.

# skip_test REASON: skip the rest of this test's asserts.
skip_test() {
	echo "SKIPPED: $1"
	startSkipping
}

# need TOOL...: skip the test unless every tool is on PATH.
need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || { skip_test "needs $t"; return 1; }
	done
}
