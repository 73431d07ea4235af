#!/usr/bin/env bash
# The documents against the code (issue "newcomer 3"). README.md is the
# front page: it says what a machine without a GPU gets before the Quick
# start, and its first session runs as written. docs/manual.md and the man
# page are the reference, and each of their tables is the code's own: the
# settings are made from config/options.c, the telemetry keys and the
# .vyre/ entries are those a mount shows, the packages those
# scripts/install-deps.sh installs; docs/layout.md names every folder.
# A test writes only in its own temp dir and the mounts it makes there.
. tests/fs/lib.sh
MANUAL=docs/manual.md
SD="" # a test's own directory: the sessions' ~/gpu is $SD/gpu

setUp() {
	SD=$(mktemp -d /tmp/vyrefs-docs.XXXXXX) || return 1
	chmod 755 "$SD"
}

tearDown() {
	if [ -n "$SD" ]; then
		if mountpoint -q "$SD/gpu" 2>/dev/null; then
			fusermount3 -u "$SD/gpu" 2>/dev/null || umount -l "$SD/gpu"
		fi
		wait_gone "vyrefs.*$SD/gpu" || fail "a daemon on $SD/gpu is still running"
		mountpoint -q "$SD/gpu" 2>/dev/null || rm -rf "$SD"
		SD=""
	fi
	unmount_vyrefs
	drop_log
}

# section FILE HEADING: the lines under the `## ` heading that starts with
# HEADING, up to the next `# ` or `## ` heading (its `###` parts included).
section() {
	awk -v h="$2" 'index($0, h) == 1 { on = 1; next } on && /^(# |## )/ { exit } on' "$1"
}

# first_cells: of a markdown table's rows on stdin, the `name`s of each
# row's first cell, one a line (a cell may name several; `modules/` is
# modules).
first_cells() {
	sed -n 's/^| \([^|]*\) |.*/\1/p' | grep -o '`[a-z0-9_]*/*`' | tr -d '`/'
}

help_keys() {
	"$VYREFS" --help | sed -n 's/^     \([a-z_]*\)=.*/\1/p' | sort
}

# fenced FILE MARK: the lines of the fenced block that follows the line
# `<!-- MARK -->`.
fenced() {
	awk -v m="<!-- $2 -->" '$0 == m { want = 1; next } want && /^```/ { if (on) exit; on = 1; next } on { print }' "$1"
}

# matches TEXT WANT: the pieces of WANT between `...` appear in TEXT, in
# order (`...` stands for anything, as README's `→` comments write it).
matches() {
	local text=$1 rest=$2 piece
	while :; do
		piece=${rest%%...*}
		[[ $text == *"$piece"* ]] || return 1
		text=${text#*"$piece"}
		[ "$piece" = "$rest" ] && return 0
		rest=${rest#*...}
	done
}

# as_written SESSION [REFUSED]: run a README session's commands one by one,
# each as written but for the names: ~/gpu is $SD/gpu, ./build/vyrefs the
# binary under test (and the mount, `./build/vyrefs ~/gpu`, is given
# backend=$backend, so the test runs on the backend under test whatever
# the machine has), /tmp/vyrefs-example.bin is $SD/example.bin. Each must
# exit 0 and print what its `# → ...` comment says; with REFUSED, a line
# that contains REFUSED must fail instead, and no `→` is checked. The
# first line that exits otherwise ends the session. OUTS[N] keeps line
# N's output.
OUTS=()
as_written() {
	local session=$1 refused=${2:-} line cmd want rc n=0
	OUTS=()
	while IFS= read -r line; do
		n=$((n + 1))
		[ -n "$line" ] || continue
		cmd=$(printf '%s\n' "$line" | sed "s|\./build/vyrefs ~/gpu|./build/vyrefs -o backend=$backend ~/gpu|; s|~/gpu|$SD/gpu|g; s|\./build/vyrefs|$VYREFS|g; s|/tmp/vyrefs-example\.bin|$SD/example.bin|g")
		case "$cmd" in *'~'*)
			fail "line $n uses ~ for something other than ~/gpu: $line"
			return 1
			;;
		esac
		OUTS[n]=$(bash -o pipefail -c "$cmd" 2>&1)
		rc=$?
		if [ -n "$refused" ] && [[ $line == *"$refused"* ]]; then
			assertNotEquals "line $n is refused on the $backend backend: $line" 0 "$rc"
			continue
		fi
		assertEquals "line $n exits 0: $line: ${OUTS[n]}" 0 "$rc"
		# The lines after a failed one would only fail for it (or, after a
		# failed mount, write into the bare directory): stop.
		[ "$rc" = 0 ] || return 1
		[ -z "$refused" ] || continue
		case "$cmd" in *'# → '*)
			want=$(printf '%s' "${cmd##*# → }" | sed 's/[[:space:]]*$//')
			matches "${OUTS[n]}" "$want"
			assertTrue "line $n prints '$want', as README says: $line: ${OUTS[n]}" $?
			;;
		esac
	done <<<"$session"
	assertNotEquals "the session has commands" 0 "$n"
}

# The man page's settings are made from the settings table, and the
# committed page is what that table makes now; groff finds nothing to warn of.
test_man_page_is_made_from_the_settings_table() {
	tool=${BUILD:-build}/tools/man_options
	assertTrue "$tool is built (Fix: make)" "[ -x '$tool' ]"
	diff=$("$tool" <docs/vyrefs.8.in | diff - docs/vyrefs.8)
	assertEquals "docs/vyrefs.8 is what docs/vyrefs.8.in and the settings table make (Fix: make man): $diff" 0 $?
	keys=$(help_keys)
	assertNotEquals "--help lists settings" "" "$keys"
	assertEquals "the man page's settings are --help's" "$keys" \
		"$(sed -n 's/^\\fB\([a-z_]*\)=\\fP.*/\1/p' docs/vyrefs.8 | sort)"
	for section in NAME SYNOPSIS DESCRIPTION OPTIONS SETTINGS "THE CONTROL DIRECTORY" "THE CONTROL LANGUAGE" \
		SIGNALS "EXIT STATUS" FILES EXAMPLES; do
		assertTrue "section $section" "grep -qx '.SH $section' docs/vyrefs.8"
	done
	need groff || return 0
	warn=$(groff -ww -z -man docs/vyrefs.8 2>&1)
	assertEquals "groff -ww -z -man docs/vyrefs.8 warns" "" "$warn"
}

# The manual's settings table is made from the same table (issue "newcomer
# 3": vyre_dir and survive_standby were missing from the README's, and its
# write_behind row once said what the code no longer did): the committed
# manual is what `make man` makes, and the table names every setting.
test_manual_settings_are_made_from_the_settings_table() {
	local tool=${BUILD:-build}/tools/man_options diff keys
	assertTrue "$tool is built (Fix: make)" "[ -x '$tool' ]"
	diff=$("$tool" --markdown <"$MANUAL" | diff "$MANUAL" -)
	assertEquals "$MANUAL's settings are what the settings table makes (Fix: make man): $diff" 0 $?
	keys=$(section "$MANUAL" "## Settings" | first_cells | sort)
	assertNotEquals "$MANUAL has a settings table" "" "$keys"
	assertEquals "$MANUAL's settings are --help's" "$(help_keys)" "$keys"
}

# The manual's list of what `make` and `make test` need is what
# scripts/install-deps.sh installs: an administrator who installs exactly
# that list gets every suite run.
test_manual_lists_the_packages_the_scripts_install() {
	local build test row pkg
	build=$(sed -n '/^if \[ "$mode" = test \]/q; s/.*missing+=(\([a-z0-9.+-]*\)).*/\1/p' scripts/install-deps.sh)
	test=$(sed -n '/^if \[ "$mode" = test \]/,/^fi$/ s/.*missing+=(\([a-z0-9.+-]*\)).*/\1/p' scripts/install-deps.sh)
	assertTrue "the script names its packages" "[ $(echo "$build" | wc -w) -ge 6 ] && [ $(echo "$test" | wc -w) -ge 10 ]"
	grep -q 'libclang-rt-$major-dev' scripts/install-deps.sh && test="$test libclang-rt-N-dev"
	row=$(section "$MANUAL" "## Building" | grep '^| `make` |')
	assertNotEquals "$MANUAL's Building has a make row" "" "$row"
	for pkg in $build; do
		assertContains "$MANUAL's make row names $pkg" "$row" "$pkg"
	done
	row=$(section "$MANUAL" "## Building" | grep '^| `make test` |')
	for pkg in $test; do
		assertContains "$MANUAL's make test row names $pkg" "$row" "$pkg"
	done
}

# The manual's telemetry table names every key .vyre/stats shows, once,
# and no other (issue "newcomer 3": copy_timeouts and client_refusals were
# missing); a survive=on mount shows them all, and devN.KEY are the keys
# again. Each key's kind is the TYPE .vyre/metrics gives it (a setting is
# a gauge there; _us are _seconds).
test_manual_telemetry_keys_are_the_mounts() {
	mount_vyrefs "survive=on" || { fail "mount"; return 1; }
	local keys rows documented metrics row kind key name want bad=""
	keys=$(awk '{ print $1 }' "$MNT/.vyre/stats" | grep -v '^dev[0-9]*\.' | sort -u)
	assertNotEquals ".vyre/stats has keys" "" "$keys"
	rows=$(section "$MANUAL" "## Telemetry keys" | grep '^| `')
	documented=$(printf '%s\n' "$rows" | first_cells | sort)
	assertEquals "keys $MANUAL lists twice" "" "$(printf '%s\n' "$documented" | uniq -d)"
	assertEquals "$MANUAL's telemetry keys are .vyre/stats' (Fix: add or remove rows)" "$keys" "$(printf '%s\n' "$documented" | sort -u)"
	metrics=$(cat "$MNT/.vyre/metrics")
	while IFS= read -r row; do
		kind=$(printf '%s\n' "$row" | awk -F'|' '{ gsub(/ /, "", $3); print $3 }')
		for key in $(printf '%s\n' "$row" | first_cells); do
			name=$key
			[ "${key%_us}" != "$key" ] && name=${key%_us}_seconds
			case "$kind" in
			counter) want="# TYPE vyrefs_${name}_total counter" ;;
			gauge | setting) want="# TYPE vyrefs_$name gauge" ;;
			*) want="a kind of counter, gauge or setting" ;;
			esac
			grep -qxF "$want" <<<"$metrics" || bad="$bad $key($kind)"
		done
	done <<<"$rows"
	assertEquals "keys whose kind in $MANUAL is not .vyre/metrics' TYPE" "" "$bad"
}

# The manual's .vyre/ table, and the man page's THE CONTROL DIRECTORY,
# name each entry the mount makes (fs/vyre.c's table) with its mode, and no
# other (issue "newcomer 3": upgrade was missing).
test_manual_and_man_page_vyre_entries_are_the_mounts() {
	mount_vyrefs || { fail "mount"; return 1; }
	local live names f
	live=$(cd "$MNT/.vyre" && for f in *; do echo "$f 0$(stat -c %a "$f")"; done | sort)
	names=$(printf '%s\n' "$live" | cut -d' ' -f1)
	assertNotEquals ".vyre has entries" "" "$names"
	assertEquals "$MANUAL's .vyre/ table is the directory, name and mode (Fix: add or remove rows)" "$live" \
		"$(section "$MANUAL" "## The control directory" | sed -n 's/^| `\([a-z_]*\)\/*` | \(0[0-7]*\)[ ,|].*/\1 \2/p' | sort)"
	assertEquals "the man page's .vyre/ entries are the directory, name and mode" "$live" \
		"$(sed -n '/^\.SH THE CONTROL DIRECTORY/,/^\.SH /p' docs/vyrefs.8 |
			awk '/^\.I \.vyre\// { n = substr($2, 7); sub(/\/$/, "", n); next }
				n != "" && /^\(0[0-7][0-7][0-7]/ { print n, substr($0, 2, 4) } { n = "" }' | sort)"
}

# docs/layout.md names every top-level folder of the tree.
test_layout_names_every_folder() {
	local d missing=""
	[ -n "$(git ls-files 2>/dev/null | head -n 1)" ] || { skip_test "needs a git checkout"; return; }
	for d in $(git ls-files | sed -n 's|^\([^/.][^/]*\)/.*|\1|p' | sort -u); do
		section docs/layout.md "## Layout" | grep -q "^$d/ " || missing="$missing $d/"
	done
	assertEquals "folders docs/layout.md's Layout lacks" "" "$missing"
}

# The front page says, before the Quick start, what a machine without a
# GPU gets; it stays a front page; and every file it or the manual names
# is in the tree.
test_readme_is_a_front_page() {
	local before lines p missing=""
	before=$(sed '/^## Quick start/q' README.md)
	assertContains "README.md has a Quick start" "$before" "## Quick start"
	assertContains "before the Quick start: the host backend" "$before" "host backend"
	assertContains "before the Quick start: files in host memory" "$before" "host memory"
	assertContains "before the Quick start: no kernels" "$before" "kernels cannot launch"
	lines=$(wc -l <README.md)
	assertTrue "README.md is $lines lines: a front page is at most 200 (Fix: the reference goes in $MANUAL)" "[ $lines -le 200 ]"
	for p in $(grep -ohE '(^|[^A-Za-z0-9_./-])(docs|examples|scripts|tools|tests|client|kernels|bench)/[A-Za-z0-9_./-]*' README.md "$MANUAL" docs/layout.md |
		sed -E 's/^[^a-z]//; s/[.,:]+$//' | sort -u); do
		[ -e "$p" ] || missing="$missing $p"
	done
	assertEquals "files README.md, $MANUAL or docs/layout.md name that are not in the tree" "" "$missing"
}

# README's first session (<!-- first-session -->) runs as written, command
# by command, on the backend under test, and prints what README says it
# prints; it mounts, and unmounts at its end.
test_readme_first_session_runs_as_written() {
	need fusermount3 || return 0
	local session
	session=$(fenced README.md first-session)
	assertNotEquals "README.md marks its first session (<!-- first-session --> before its block)" "" "$session"
	assertContains "the session mounts" "$session" "./build/vyrefs ~/gpu"
	assertContains "the session uses the control file" "$session" ".vyre/ctl"
	as_written "$session" || return
	assertFalse "the session unmounted ~/gpu" "mountpoint -q '$SD/gpu'"
	assertEquals "the session left nothing but ~/gpu" "gpu" "$(ls -A "$SD")"
}

# README's GPU step (<!-- gpu-session -->) runs as written on the cuda
# backend. On the host backend it does what README says: every launch is
# refused (a write error), every other line runs, and .vyre/log says the
# launch needs the cuda backend.
test_readme_gpu_step_does_what_it_says() {
	need fusermount3 || return 0
	local session n log=""
	session=$(fenced README.md gpu-session)
	assertNotEquals "README.md marks its GPU step (<!-- gpu-session -->)" "" "$session"
	assertContains "the step uses the module examples/ ships" "$session" "examples/saxpy.cu"
	if [ "$backend" = cuda ]; then
		as_written "$session"
		return
	fi
	as_written "$session" "launch " || return
	for n in "${!OUTS[@]}"; do
		[[ ${OUTS[n]} == *"write error: Invalid argument"* ]] && log="$log w"
		[[ ${OUTS[n]} == *"launching needs the cuda backend"* ]] && log="$log l"
	done
	assertContains "a launch fails with a write error, as README says" "$log" "w"
	assertContains ".vyre/log says a launch needs the cuda backend, as README says" "$log" "l"
}

. tests/shunit.sh
