#!/usr/bin/env bash
# .vyre/metrics: the Prometheus text exposition format, read by a strict
# parser (tests/fs/prom_check.py), each value the same as in .vyre/stats.
. tests/fs/lib.sh
CHECK=tests/fs/prom_check.py

# Move bytes every way the host backend can: upload, readback, device copy,
# fill, and a control sequence.
traffic() {
	head -c 3000000 /dev/urandom >"$MNT/a"
	cat "$MNT/a" >/dev/null
	cp "$MNT/a" "$MNT/b"
	truncate -s 1M "$MNT/c"
	echo 'fill c 0x41 0 4096' >"$MNT/.vyre/ctl"
	dd if="$MNT/b" of=/dev/null bs=4k skip=10 count=1 iflag=direct status=none
	rm "$MNT/b"
}

test_metrics_parse_and_match_stats() {
	need python3 || return 0
	mount_vyrefs || { fail "mount"; return 1; }
	traffic
	m=$(mktemp) s1=$(mktemp) s2=$(mktemp)
	# kept_records (survive=on) counts these very opens and closes: the
	# one line reading moves.
	grep -v '^kept_records ' "$MNT/.vyre/stats" >"$s1"
	cat "$MNT/.vyre/metrics" >"$m"
	grep -v '^kept_records ' "$MNT/.vyre/stats" >"$s2"
	assertEquals "nothing moved while reading" "$(cat "$s1")" "$(cat "$s2")"
	assertNotEquals "bytes moved" 0 "$(awk '$1 == "h2d_bytes" { print $2 }' "$s1")"
	out=$(python3 "$CHECK" "$m" "$s1")
	assertEquals "$out" 0 $?
	assertContains "$out" "stats keys match"
	assertEquals "every stats line checked: $out" "$(wc -l <"$s1") stats keys match" "$(echo "$out" | grep -o '[0-9]* stats keys match')"
	assertContains "$(cat "$m")" "# TYPE vyrefs_h2d_bytes_total counter"
	assertContains "$(cat "$m")" "# TYPE vyrefs_device_time_seconds_total counter"
	assertContains "$(cat "$m")" "vyrefs_device_info{backend=\"$backend\","
	assertEquals "mode" "444" "$(stat -c %a "$MNT/.vyre/metrics")"
	rm -f "$m" "$s1" "$s2"
	unmount_vyrefs
	assertReleased
}

# The parser is strict: each of these breaks one rule and must be refused.
test_the_parser_refuses_what_the_format_forbids() {
	need python3 || return 0
	f=$(mktemp)
	ok='# HELP vyrefs_x_total x\n# TYPE vyrefs_x_total counter\nvyrefs_x_total 1\n'
	printf "$ok" >"$f"
	python3 "$CHECK" "$f" >/dev/null
	assertEquals "a good text passes" 0 $?
	for bad in \
		'# TYPE vyrefs_x_total counter\nvyrefs_x_total 1\n' \
		'# HELP vyrefs_x_total x\nvyrefs_x_total 1\n' \
		'# HELP vyrefs_x x\n# TYPE vyrefs_x counter\nvyrefs_x 1\n' \
		'# HELP x_total x\n# TYPE x_total counter\nx_total 1\n' \
		'# HELP vyrefs_t_us x\n# TYPE vyrefs_t_us gauge\nvyrefs_t_us 1\n' \
		'# HELP vyrefs_x_total x\n# TYPE vyrefs_x_total counter\nvyrefs_x_total -1\n' \
		'# HELP vyrefs_x_total x\n# TYPE vyrefs_x_total counter\nvyrefs_x_total 1\nvyrefs_x_total 2\n' \
		'# HELP vyrefs_x_total x\n# TYPE vyrefs_x_total counter\nvyrefs_x_total one\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\nvyrefs_g{a="\\q"} 1\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\nvyrefs_g{a="b} 1\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\nvyrefs_g{a="1",a="2"} 1\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\nvyrefs_g 1\n# HELP vyrefs_h x\n# TYPE vyrefs_h gauge\nvyrefs_h 1\nvyrefs_g 2\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\n\nvyrefs_g 1\n' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g gauge\nvyrefs_g 1' \
		'# HELP vyrefs_g x\n# TYPE vyrefs_g meter\nvyrefs_g 1\n'; do
		printf "$bad" >"$f"
		out=$(python3 "$CHECK" "$f")
		assertEquals "refused: $bad ($out)" 1 $?
	done
	# A value that differs from .vyre/stats is caught.
	printf "$ok" >"$f"
	printf 'x 2\n' >"$f.stats"
	out=$(python3 "$CHECK" "$f" "$f.stats")
	assertEquals "a mismatch fails: $out" 1 $?
	printf 'y 1\n' >"$f.stats"
	out=$(python3 "$CHECK" "$f" "$f.stats")
	assertEquals "a stats key without a metric fails: $out" 1 $?
	rm -f "$f" "$f.stats"
}

. tests/shunit.sh
