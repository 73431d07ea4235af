#!/usr/bin/env bash
# Run every suite on one backend and end with `N passed, N failed, N skipped`.
#   tests/run.sh host [SUITE...]   C unit suites + shunit2 suites on the host backend
#   tests/run.sh cuda [SUITE...]   the same on the cuda backend, plus tests/gpu/
#   VY_TEST_JOBS=N tests/run.sh ... runs N suites side by side (make test-gpu:
#   6); a suite with a `# run.sh: alone` line (it reads the whole GPU's
#   memory) runs after the others, by itself, on the cuda backend, and one
#   with `# run.sh: quiet` (it counts its own threads' wakeups) on either;
#   one with `# run.sh: long` starts before the others. Side by side on the
#   cuda backend a suite sees VY_TEST_GPU_SHARED=1: other suites' memory
#   moves the GPU's free figure, so tests/fs/lib.sh gives its mounts a
#   budget and leaves the exact baseline at unmount to the suites alone.
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
# The suites' Python helpers run with Python's own warnings filters: a
# user's or CI's PYTHONWARNINGS (always, ignore, error::...) or
# PYTHONDEVMODE would add lines to what a test reads, hide a warning it
# asserts on, or turn one into an exception. A test that asserts on a
# warning also sets its own filter (tests/client/place_check.py).
unset PYTHONWARNINGS PYTHONDEVMODE
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

# C suites print `N passed, N failed, N skipped` last on stdout; the line
# is found by its form, not its place: what a suite writes to stderr as it
# exits may come after it.
run_c() {
	local bin=$1 name out
	name=$(basename "$bin")
	out="$log/$name.log"
	local start=$SECONDS
	"$bin" >"$out" 2>&1
	local rc=$? line
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" | tail -n 1)
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
		echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}" >"$log/$name.counts"
	else
		echo "0 1 0" >"$log/$name.counts" # crashed before its summary
		echo "$name: no summary (exit $rc)"
	fi
	if [ $rc != 0 ]; then
		grep -v '^ok \|^skip ' "$out" | tee "$log/$name.failures"
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
	echo "$((ran - fails - skips)) $((fails + notrun)) $skips" >"$log/$name.counts"
	[ "$fails" != 0 ] && grep -B1 '^ASSERT\|^ERROR\|^shunit2:\(ERROR\|FATAL\)' "$out" | grep -v '^@setUp$' | tee "$log/$name.failures"
	[ "$notrun" != 0 ] && { echo "  $notrun of $want tests never ran (exit $rc):"; grep '^shunit2:FATAL' "$out" | sed 's/^/  /'; tail -n 5 "$out" | sed 's/^/  | /'; } | tee -a "$log/$name.failures"
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
	echo "0 0 $n" >"$log/$(basename "$1").counts"
	echo "$(basename "$1"): $n skipped: $2"
}

# Without shunit2 no shell suite can run: each is skipped, saying so.
if [ ! -r "$SHUNIT2" ]; then
	echo "no shunit2 ($SHUNIT2): the shell suites are skipped (Fix: apt-get install shunit2, as root)"
fi

# Suites side by side: each one's report goes to $log/NAME.out and its
# counts to $log/NAME.counts; a report is printed whole when its suite
# ends, and the counts are added up at the end. A suite that leaves no
# counts (its runner itself died) counts as one failure.
jobs=${VY_TEST_JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]?$ ]] || { echo "tests/run.sh: VY_TEST_JOBS='$jobs': want 1 to 99 (Fix: VY_TEST_JOBS=4)" >&2; exit 2; }
running=0 names=() run_start=$SECONDS

# finish_one: wait for a suite started side by side, print its report.
finish_one() {
	local done_pid
	wait -n -p done_pid
	running=$((running - 1))
	cat "$log/${started[$done_pid]}.out"
}
declare -A started

# launch KIND PATH: run a C suite (c) or a shell suite (sh), side by side
# when VY_TEST_JOBS > 1 and the suite does not ask to run alone.
launch() {
	local kind=$1 path=$2 name shared
	name=$(basename "$path")
	names+=("$name")
	if [ "$jobs" != 1 ]; then
		while [ "$running" -ge "$jobs" ]; do finish_one; done
	fi
	# When it starts, counted from the run's start: where a long run's time went.
	case "$name" in
	bench_test.sh) echo "$name: running (from $((SECONDS - run_start)) s, about 2 minutes)" ;;
	*.sh) echo "$name: running (from $((SECONDS - run_start)) s)" ;;
	esac
	if [ "$jobs" = 1 ]; then
		VY_TEST_GPU_SHARED=0 "run_$kind" "$path"
		return
	fi
	shared=0
	[ "$backend" = cuda ] && shared=1
	VY_TEST_GPU_SHARED=$shared "run_$kind" "$path" >"$log/$name.out" 2>&1 &
	started[$!]=$name
	running=$((running + 1))
}

# `alone`: the reason is the GPU's (its whole free memory is read), so on
# the host backend such a suite runs beside the others; `quiet`: the suite
# counts its own threads' wakeups, on either backend.
alone() {
	grep -q '^# run.sh: quiet' "$1" || { [ "$backend" = cuda ] && grep -q '^# run.sh: alone' "$1"; }
}

# A suite with a `# run.sh: long` line (minutes where most take seconds)
# starts before the others, so the side-by-side run ends with short ones.
long() {
	grep -q '^# run.sh: long' "$1"
}

# A user mounts through fusermount3 as root does directly: every suite runs
# as a user, and a test that needs root (mount(8), fstab, acting as another
# user, allow_other without user_allow_other) skips itself, saying why.
run_suite() {
	picked "$(basename "$1" .sh)" || return 0
	if [ ! -r "$SHUNIT2" ]; then
		names+=("$(basename "$1")")
		skip_suite "$1" "needs shunit2"
		return 0
	fi
	launch sh "$1"
}

# On the cuda backend the C suites check the GPU's free memory: alone.
unit_now() {
	picked unit || return 0
	echo "unit suites: running"
	for bin in "$build"/tests/unit/test_*; do
		[ -x "$bin" ] && launch c "$bin"
	done
}
later=()
suites=(tests/cli/*_test.sh tests/fs/*_test.sh tests/ctl/*_test.sh tests/client/*_test.sh tests/survive/*_test.sh tests/tier/*_test.sh)
[ "$backend" = cuda ] && suites+=(tests/gpu/*_test.sh)
# A name that picks nothing would end in "0 passed, 0 failed": refused.
for want in $only; do
	[ "$want" = unit ] && continue
	found=0
	for suite in "${suites[@]}"; do [ "$(basename "$suite" .sh)" = "$want" ] && found=1; done
	[ $found = 1 ] || { rm -rf "$log"; echo "tests/run.sh: no $backend suite is named '$want' (Fix: a suite's file name without .sh, as keeper_test, or unit)" >&2; exit 2; }
done
ordered=()
for suite in "${suites[@]}"; do
	[ -f "$suite" ] && long "$suite" && ordered+=("$suite")
done
for suite in "${suites[@]}"; do
	[ -f "$suite" ] && ! long "$suite" && ordered+=("$suite")
done
for suite in ${ordered[@]+"${ordered[@]}"}; do
	if [ "$jobs" != 1 ] && alone "$suite"; then
		later+=("$suite")
	else
		run_suite "$suite"
	fi
done
[ "$backend" = host ] && unit_now # short: they fill in after the long suites
while [ "$running" -gt 0 ]; do finish_one; done
jobs=1 # the GPU's own C suites and the suites that read the whole GPU: one at a time
[ "$backend" = cuda ] && unit_now
if [ "$backend" = cuda ] && picked unit; then
	for bin in "$build"/tests/gpu/test_*; do
		[ -x "$bin" ] && launch c "$bin"
	done
fi
for suite in ${later[@]+"${later[@]}"}; do
	run_suite "$suite"
done
for name in ${names[@]+"${names[@]}"}; do
	read -r p f s 2>/dev/null <"$log/$name.counts" || { p=0 f=1 s=0; echo "$name: left no counts (its runner died)"; }
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done
# The failures again, last: a long run's tail (all a CI page may show)
# names what failed and why.
for name in ${names[@]+"${names[@]}"}; do
	[ -s "$log/$name.failures" ] || continue
	echo "FAILED in $name:"
	head -n 20 "$log/$name.failures" | sed 's/^/  /'
done
echo "logs: $log ($((SECONDS - run_start)) s in all)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
