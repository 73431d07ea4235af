#!/usr/bin/env bash
# The documents against the code (issue "newcomer 3"). docs/manual.md and
# the man page are the reference, and each of their tables is the code's own: the
# settings are made from config/options.c, the telemetry keys and the
# .vyre/ entries are those a mount shows, the packages those
# scripts/install-deps.sh installs; docs/layout.md names every folder.
# A test writes only in the mounts it makes.
. tests/fs/lib.sh
MANUAL=docs/manual.md

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

. tests/shunit.sh
