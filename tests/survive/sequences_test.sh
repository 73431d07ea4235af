#!/usr/bin/env bash
# survive=on (docs/survive.md, "Control sequences"): a program writing
# .vyre/ctl through the daemon's death gets the reply of a sequence that
# completed, or an error that says the daemon restarted; never a hang, and
# never a sequence run twice or in part without a word. Each test's program
# (ctlclient.py) holds the control file open, as a script does to read its
# replies.
. tests/fs/lib.sh
. tests/survive/lib.sh
FUSE_WRITE=16
FOREVER=10000000 # a sequence's most steps, a 1 MiB fill each: runs until the daemon dies
CLIENT="timeout 300 python3 $PWD/tests/survive/ctlclient.py"
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-seq.XXXXXX) || return 1
	[ -r "$SHIM" ] || { echo "no $SHIM (Fix: make)"; return 1; }
}

tearDown() {
	unmount_vyrefs
	drop_log
	rm -rf "$T"
}

# mount_killing AT TEXT: a survive=on mount whose daemon dies (AT: "read",
# holding the request; "reply", about to answer it) at the next write of
# TEXT to the control file once armed.
mount_killing() {
	mount_shimmed KILLSHIM_OPCODE=$FUSE_WRITE KILLSHIM_NAME="$2" KILLSHIM_ARM="$T/arm" KILLSHIM_AT="$1"
}

# A 1 MiB file f of byte 0x05.
make_f() {
	truncate -s 1M "$MNT/f" && echo 'fill f 5' >"$MNT/.vyre/ctl"
}

# bytes_of FILE: its distinct bytes, in hex.
bytes_of() { od -An -v -tx1 "$1" | tr -s ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' '; }

# killed_once OLD: the shim fired and a successor serves, once.
killed_once() {
	assertFalse "the shim fired (it removes the arm)" "[ -e '$T/arm' ]"
	assertNotEquals "a successor serves" "$1" "$(stat_of pid)"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
}

# lines LINE...: the client's output expected, one line each.
lines() { printf '%s\n' "$@"; }

test_a_sequence_done_before_the_death_is_answered_not_run_again() {
	mount_killing reply "fill f 0x07" || { fail "mount"; return; }
	make_f || { fail "make f"; return; }
	local old out
	old=$(stat_of pid)
	out=$($CLIENT "$MNT" arm:"$T/arm" 'write:fill f 0x07\n' read 2>&1)
	assertEquals "the write succeeds; its reply is the sequence's" \
		"$(lines armed written "ok seq=2 steps=1")" "$(sed 's/ device_us=.*//' <<<"$out")"
	killed_once "$old"
	assertEquals "answered with the dead daemon's reply, not run again" 1 "$(stat_of resends_answered)"
	assertEquals "the file holds what it wrote" "07 " "$(bytes_of "$MNT/f")"
	assertEquals "no sequence runs" 0 "$(stat_of sequences_running)"
}

test_a_sequence_killed_while_it_runs_fails_and_says_why() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_f || { fail "make f"; return; }
	local out
	out=$($CLIENT "$MNT" "start:repeat $FOREVER\\nfill f 0x09\\nend\\n" running kill join read \
		'write:fill f 0x0a\n' read 2>&1)
	assertEquals "the write fails with EIO, its reply says why; the open file goes on" \
		"$(lines running successor "error: Input/output error" \
			"error seq=2 line 1: the daemon restarted while this sequence ran (a crash, a kill or vyrefs --upgrade): some of its steps may have run (Fix: check the files it writes, and run it again if that is safe)" \
			written "ok seq=3 steps=1")" "$(sed 's/ device_us=.*//' <<<"$out")"
	assertEquals "takeovers" 1 "$(stat_of takeovers)"
	assertEquals "not run again" 0 "$(stat_of sequences_running)"
	assertEquals "no reply was kept for it" 0 "$(stat_of resends_answered)"
	assertEquals "the next sequence's bytes" "0a " "$(bytes_of "$MNT/f")"
}

test_a_sequence_read_but_not_begun_runs_once() {
	mount_killing read "fill f 0x0b" || { fail "mount"; return; }
	make_f || { fail "make f"; return; }
	local old out
	old=$(stat_of pid)
	out=$($CLIENT "$MNT" arm:"$T/arm" 'write:fill f 0x0b\n' read 2>&1)
	assertEquals "the write succeeds; its reply" "$(lines armed written "ok steps=1")" \
		"$(sed 's/ device_us=.*//; s/ok seq=[0-9]*/ok/' <<<"$out")"
	killed_once "$old"
	assertEquals "it ran anew" 0 "$(stat_of resends_answered)"
	assertEquals "its bytes" "0b " "$(bytes_of "$MNT/f")"
}

test_an_unfinished_statement_lost_is_refused_not_half_run() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_f || { fail "make f"; return; }
	local out
	out=$($CLIENT "$MNT" 'write:fill f' kill 'write: 0x0c\nfill f 0x0d 0 4\n' read 'write:fill f 0x0e\n' 2>&1)
	assertEquals "the rest is refused, and the reply says what was lost" \
		"$(lines written successor "error: Input/output error" \
			"error seq=2 line 1: the daemon restarted (a crash, a kill or vyrefs --upgrade) and lost the unfinished statement this file held (6 bytes): nothing of it ran, and this write is refused up to its first newline (Fix: write the statement again, whole)" \
			written)" "$out"
	assertEquals "the next whole statement ran, nothing before it" "0e " "$(bytes_of "$MNT/f")"
}

test_a_reply_not_yet_read_survives() {
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	make_f || { fail "make f"; return; }
	local out
	out=$($CLIENT "$MNT" 'write:fill f 0x0f\n' kill read 'write:fill f 0x10\n' read 2>&1)
	assertEquals "the reply is the dead daemon's; the next numbers on after it" \
		"$(lines written successor "ok seq=2 steps=1" written "ok seq=3 steps=1")" "$(sed 's/ device_us=.*//' <<<"$out")"
	assertEquals "its bytes" "10 " "$(bytes_of "$MNT/f")"
}

. tests/shunit.sh
