#!/usr/bin/env bash
# Run every suite on one backend and end with `N passed, N failed`.
#   tests/run.sh host   C unit suites + shunit2 suites on the host backend
#   tests/run.sh cuda   the same on the cuda backend, plus tests/gpu/
# Exit status 0 only when nothing failed.
set -u
backend=${1:-host}
case "$backend" in host|cuda) ;; *) echo "usage: tests/run.sh host|cuda" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
export VY_TEST_BACKEND=$backend
export VYREFS=${VYREFS:-$PWD/build/vyrefs}
export SHUNIT2=${SHUNIT2:-/usr/bin/shunit2}
export SHUNIT_COLOR=none
build=${BUILD:-build}
log=$(mktemp -d /tmp/vyrefs-tests.XXXXXX)
passed=0 failed=0 skipped=0

# C suites print `N passed, N failed, N skipped` last.
run_c() {
	local bin=$1 name out
	name=$(basename "$bin")
	out="$log/$name.log"
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
	echo "$name: $line"
}

# shunit2 suites print each test's name, then ASSERT/ERROR lines for its
# failures, and `Ran N tests.` last. (Its FAILED line counts asserts, not
# tests, so failed tests are counted from the per-test lines.)
run_sh() {
	local suite=$1 name out ran fails
	name=$(basename "$suite")
	out="$log/$name.log"
	bash "$suite" >"$out" 2>&1
	local rc=$?
	ran=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	if [ -z "$ran" ]; then
		failed=$((failed + 1))
		echo "$name: no summary (exit $rc)"
		tail -n 20 "$out"
		return
	fi
	fails=$(awk '/^test_/ { t = $1 } /^(ASSERT|ERROR)/ && t != "" && !(t in bad) { bad[t] = 1; n++ } END { print n + 0 }' "$out")
	skips=$(awk '/^test_/ { t = $1 } /^(ASSERT|ERROR)/ { bad[t] = 1 } /^SKIPPED/ { s[t] = 1 } END { for (t in s) if (!(t in bad)) n++; print n + 0 }' "$out")
	[ $rc != 0 ] && [ "$fails" = 0 ] && fails=1
	passed=$((passed + ran - fails - skips))
	failed=$((failed + fails))
	skipped=$((skipped + skips))
	[ "$fails" != 0 ] && grep -B1 '^ASSERT\|^ERROR' "$out"
	grep -B1 '^SKIPPED' "$out" | grep -v '^--' | paste - - | sed 's/^/  skip /'
	echo "$name: $ran run, $fails failed, $skips skipped"
}

for bin in "$build"/tests/unit/test_*; do
	[ -x "$bin" ] && run_c "$bin"
done
for suite in tests/cli/*_test.sh tests/fs/*_test.sh tests/ctl/*_test.sh tests/client/*_test.sh; do
	[ -f "$suite" ] && run_sh "$suite"
done
if [ "$backend" = cuda ]; then
	for bin in "$build"/tests/gpu/test_*; do
		[ -x "$bin" ] && run_c "$bin"
	done
	for suite in tests/gpu/*_test.sh; do
		[ -f "$suite" ] && run_sh "$suite"
	done
fi
echo "logs: $log"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
