#!/usr/bin/env bash
# Run every suite on one backend and end with `N passed, N failed, N skipped`.
#   tests/run.sh host [SUITE...]   C unit suites + shunit2 suites on the host backend
#   tests/run.sh cuda [SUITE...]   the same on the cuda backend, plus tests/gpu/
# SUITE names pick some: `unit` (the C suites) or a shunit2 suite's name
# (cli_test, mount_test, ...). As a user every suite runs (FUSE mounts go
# through fusermount3); tests that need root skip themselves with the
# reason. Each suite says when it starts and how long it took. Exit status
# 0 only when nothing failed.
set -u
backend=${1:-host}
case "$backend" in host|cuda) ;; *) echo "usage: tests/run.sh host|cuda [SUITE...]" >&2; exit 2 ;; esac
shift
only=" $* "
cd "$(dirname "$0")/.."
export VY_TEST_BACKEND=$backend
build=${BUILD:-build}
export BUILD=$build
export VYREFS=${VYREFS:-$PWD/$build/vyrefs}
export SHUNIT2=${SHUNIT2:-/usr/bin/shunit2}
export SHUNIT_COLOR=none
# The cuda backend's suites need a GPU: without one they would test
# nothing (and once wrote into plain directories). Ask the binary itself
# first, before any suite runs.
if [ "$backend" = cuda ]; then
	if ! why=$("$VYREFS" -o backend=cuda --self-check 2>&1 >/dev/null); then
		why=$(printf '%s\n' "$why" | grep -m 1 . )
		echo "tests/run.sh cuda: no usable GPU here, nothing run: ${why:-$VYREFS -o backend=cuda --self-check failed} (make test runs the suites on the host backend)" >&2
		exit 1
	fi
fi
log=$(mktemp -d /tmp/vyrefs-tests.XXXXXX) || exit 1
passed=0 failed=0 skipped=0

# C suites print `N passed, N failed, N skipped` last.
run_c() {
	local bin=$1 name out
	name=$(basename "$bin")
	out="$log/$name.log"
	local start=$SECONDS
	"$bin" >"$out" 2>&1
	local rc=$? line
	line=$(tail -n 1 "$out")
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
		skipped=$((skipped + BASH_REMATCH[3]))
	else
		failed=$((failed + 1)) # crashed before its summary
		echo "$name: no summary (exit $rc)"
	fi
	if [ $rc != 0 ]; then
		grep -v '^ok \|^skip ' "$out"
	fi
	echo "$name: $line ($((SECONDS - start)) s)"
}

# shunit2 suites (through tests/shunit.sh) print `@setUp` before each
# test's setUp, the test's name when its body starts, ASSERT and
# shunit2:ERROR lines for its failures, SKIPPED lines, and `Ran N tests.`
# last. A failure after `@setUp` and before the name belongs to the test
# that comes next. A test passes only when its body ran and failed nothing;
# a test whose body never ran (its setUp failed, the suite stopped at a
# shunit2:FATAL or crashed) counts as failed, never as passed.
run_sh() {
	local suite=$1 name out want ran fails skips notrun
	name=$(basename "$suite")
	out="$log/$name.log"
	local start=$SECONDS
	case "$name" in bench_test.sh) echo "$name: running (about 2 minutes)" ;; *) echo "$name: running" ;; esac
	VY_LOG_DIR="$log/$name.d" bash "$suite" >"$out" 2>&1
	local rc=$?
	want=$(tests_in "$suite")
	read -r ran fails skips < <(awk '
		/^@setUp$/ { t = ""; pend = 1; pbad = 0; pskip = 0; next }
		/^test_[A-Za-z0-9_]*$/ { t = $1; ran++; pend = 0; if (pbad) bad[t] = 1; if (pskip) s[t] = 1; next }
		/^(ASSERT|ERROR)|^shunit2:(ERROR|FATAL)/ { if (pend) pbad = 1; else if (t != "") bad[t] = 1 }
		/^SKIPPED/ { if (pend) pskip = 1; else if (t != "") s[t] = 1 }
		END { for (x in bad) nb++; for (x in s) if (!(x in bad)) ns++; print ran + 0, nb + 0, ns + 0 }' "$out")
	notrun=$((want > ran ? want - ran : 0))
	# A suite that failed with every test that ran passing: count it once.
	[ $rc != 0 ] && [ "$fails" = 0 ] && [ "$notrun" = 0 ] && fails=1
	passed=$((passed + ran - fails - skips))
	failed=$((failed + fails + notrun))
	skipped=$((skipped + skips))
	[ "$fails" != 0 ] && grep -B1 '^ASSERT\|^ERROR\|^shunit2:\(ERROR\|FATAL\)' "$out" | grep -v '^@setUp$'
	[ "$notrun" != 0 ] && { echo "  $notrun of $want tests never ran (exit $rc):"; grep '^shunit2:FATAL' "$out" | sed 's/^/  /'; tail -n 5 "$out" | sed 's/^/  | /'; }
	awk '/^@setUp$/ { t = ""; r = "" } /^SKIPPED/ { if (t == "") r = $0; else print "  skip " t ": " $0 }
		/^test_[A-Za-z0-9_]*$/ { t = $1; if (r != "") print "  skip " t ": " r; r = "" }' "$out"
	local nr=""
	[ "$notrun" != 0 ] && nr=" ($notrun not run)"
	echo "$name: $want tests: $((ran - fails - skips)) passed, $((fails + notrun)) failed$nr, $skips skipped ($((SECONDS - start)) s)"
}

# tests_in SUITE: how many tests it defines (shunit2 runs every test_*).
tests_in() {
	grep -c '^test_[A-Za-z0-9_]*()' "$1"
}

# picked NAME: the suite was asked for (or none were named).
picked() {
	[ "$only" = "  " ] || [[ $only == *" $1 "* ]]
}

# skip_suite SUITE REASON: count its tests as skipped, saying why.
skip_suite() {
	local n
	n=$(tests_in "$1")
	skipped=$((skipped + n))
	echo "$(basename "$1"): $n skipped: $2"
}

# Without shunit2 no shell suite can run: each is skipped, saying so.
if [ ! -r "$SHUNIT2" ]; then
	echo "no shunit2 ($SHUNIT2): the shell suites are skipped (Fix: apt-get install shunit2, as root)"
fi

# A user mounts through fusermount3 as root does directly: every suite runs
# as a user, and a test that needs root (mount(8), fstab, acting as another
# user, allow_other without user_allow_other) skips itself, saying why.
run_suite() {
	picked "$(basename "$1" .sh)" || return 0
	if [ ! -r "$SHUNIT2" ]; then
		skip_suite "$1" "needs shunit2"
		return 0
	fi
	run_sh "$1"
}

if picked unit; then
	echo "unit suites: running"
	for bin in "$build"/tests/unit/test_*; do
		[ -x "$bin" ] && run_c "$bin"
	done
fi
for suite in tests/cli/*_test.sh tests/fs/*_test.sh tests/ctl/*_test.sh tests/client/*_test.sh tests/survive/*_test.sh; do
	[ -f "$suite" ] && run_suite "$suite"
done
if [ "$backend" = cuda ]; then
	if picked unit; then
		for bin in "$build"/tests/gpu/test_*; do
			[ -x "$bin" ] && run_c "$bin"
		done
	fi
	for suite in tests/gpu/*_test.sh; do
		[ -f "$suite" ] && run_suite "$suite"
	done
fi
echo "logs: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
