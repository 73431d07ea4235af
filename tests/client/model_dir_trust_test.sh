#!/usr/bin/env bash
# What the Python client trusts in a model directory and how it writes
# there (issue "edges", 4, findings A, C1 and C2), replayed as the attacker
# (uid 65534 via setpriv) against root's loads, in a sticky shared
# directory of a root mount with allow_other:
# - A: a converted copy (vyrefs-converted-NAME/) or a rank's directory
#   (rank-0-of-1/) the attacker planted, with a record as the loader
#   would write it, is never attached: root converts afresh where only it
#   can write, or check() refuses with a Fix;
# - C1: a planted .vyrefs-converted-NAME.lock link makes root create
#   nothing where it points;
# - C2: a temporary directory swapped for a link while the conversion
#   writes changes nothing where the link points (a 0700 root directory).
# Copies root made in its own directory are used again, by root and by
# other users. vyrefs.derived.ensure and vyrefs.ranks.check run without
# torch: the conversion here is the test's own writer.
. tests/fs/lib.sh
export PYTHONPATH=$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

setUp() {
	# The module where uid 65534 can read it (a clone under /root is 0700).
	nobody_bins || return 1
	export PYTHONPATH=$NOBODY_PYTHONPATH
	mount_vyrefs "allow_other=on" || { fail "mount"; return 1; }
	chmod 1777 "$MNT"
	SH=$MNT/shared # root's, sticky, everyone writes: /tmp's shape
	mkdir "$SH" && chmod 1777 "$SH"
	echo '{"d": 4}' >"$SH/config.json"
	printf 'root weights' >"$SH/model.safetensors"
	T=$(mktemp -d /tmp/vyrefs-mdtrust.XXXXXX) # the test's own: the victim, fifos
	chmod 755 "$T"
	ATTACKER=""
}

tearDown() {
	[ -n "$ATTACKER" ] && kill "$ATTACKER" 2>/dev/null && wait "$ATTACKER" 2>/dev/null
	rm -rf "$T"
	unmount_vyrefs
	if [ -n "$VY_LOG" ] && [ -z "${VY_KEEP_LOGS:-}" ]; then rm -f "$VY_LOG"; fi
	VY_LOG=""
}

# ensure SOURCE [USER...]: vyrefs.derived.ensure of SOURCE's copy named
# vyrefs-converted-x, made by a writer of "honest" into model.safetensors
# (it waits for the attacker first where $T/ready is a fifo: C2). Prints
# "MADE WHAT-THE-COPY-HOLDS ITS-OWNER WHERE".
ensure() {
	local src=$1
	shift
	timeout 60 "$@" /usr/bin/python3 - "$src" "$T" <<'PY'
import os, stat, sys, warnings, vyrefs.derived as d
src, t = sys.argv[1], sys.argv[2]
warnings.showwarning = lambda m, *a, **k: print("warning:", m, file=sys.stderr)
def make(tmp):
    ready = os.path.join(t, "ready")
    if os.path.exists(ready) and stat.S_ISFIFO(os.stat(ready).st_mode):
        with open(ready, "w") as f:
            f.write(tmp + "\n")
        with open(os.path.join(t, "done")) as f:
            f.read()
    with open(os.path.join(tmp, "model.safetensors"), "w") as f:  # as a framework's save writes
        f.write("honest")
    index = os.path.join(tmp, "model.safetensors.index.json")
    if os.path.exists(index):  # a save as one file removes an older index
        os.unlink(index)
where, made = d.ensure(src, {"loader": "t"}, make, name="vyrefs-converted-x")
print(made, open(os.path.join(where, "model.safetensors")).read(), os.stat(where).st_uid, where)
PY
}

# The record vyrefs.derived writes for SOURCE's copy made now: anyone who
# can read the source's files can compute it.
record_of() {
	/usr/bin/python3 - "$1" <<'PY'
import json, sys, vyrefs.derived as d
print(json.dumps(d.record_of(sys.argv[1], {"loader": "t"}), indent=1, sort_keys=True, default=str))
PY
}

test_A_a_planted_converted_copy_is_not_attached() {
	need setpriv || return 0
	record_of "$SH" >"$T/rec.json"
	printf 'planted' >"$T/planted"
	"${NOBODY[@]}" sh -c 'mkdir "$1/vyrefs-converted-x" && cp "$2/rec.json" "$1/vyrefs-converted-x/vyrefs-converted.json" &&
		cp "$2/planted" "$1/vyrefs-converted-x/model.safetensors"' - "$SH" "$T" || fail "plant"
	out=$(ensure "$SH" 2>"$T/err")
	assertEquals "converted afresh, not the planted copy: $out $(cat "$T/err")" "True honest 0" "$(echo "$out" | cut -d' ' -f1-3)"
	assertEquals "said" "warning: vyrefs: $SH/vyrefs-converted-x is not used: $SH/vyrefs-converted-x is uid 65534's, mode 0755 (Fix: remove it; a copy is made where only this user can write)" "$(cat "$T/err")"
	where=$(echo "$out" | cut -d' ' -f4-)
	assertEquals "where only root writes" "$MNT/.vyrefs-uid-0" "$(echo "$where" | cut -d/ -f1-4)"
	assertEquals "drwx------ root" "$(stat -c '%A %U' "$MNT/.vyrefs-uid-0")"
	assertEquals "the planted copy is left as it was" "planted nobody" \
		"$(cat "$SH/vyrefs-converted-x/model.safetensors") $(stat -c %U "$SH/vyrefs-converted-x")"
	out=$(ensure "$SH" 2>/dev/null)
	assertEquals "root's copy is used again" "False honest 0 $where" "$out"
}

test_A_a_copy_root_made_in_its_own_directory_is_everyones() {
	need setpriv || return 0
	mkdir "$MNT/rootmodel" && cp "$SH/config.json" "$SH/model.safetensors" "$MNT/rootmodel/"
	out=$(umask 002 && ensure "$MNT/rootmodel" 2>&1)
	assertEquals "made beside its source" "True honest 0 $MNT/rootmodel/vyrefs-converted-x" "$out"
	assertEquals "shared, writable by root alone (made under umask 002)" "drwxr-xr-x -rw-r--r--" \
		"$(stat -c %A "$MNT/rootmodel/vyrefs-converted-x" "$MNT/rootmodel/vyrefs-converted-x/model.safetensors" | xargs)"
	assertEquals "used again" "False honest 0 $MNT/rootmodel/vyrefs-converted-x" "$(ensure "$MNT/rootmodel" 2>&1)"
	assertEquals "and by another user: root's copy" "False honest 0 $MNT/rootmodel/vyrefs-converted-x" \
		"$(ensure "$MNT/rootmodel" "${NOBODY[@]}" 2>&1)"
	# A copy another user can write is not root's to attach.
	chmod 666 "$MNT/rootmodel/vyrefs-converted-x/model.safetensors"
	out=$(ensure "$MNT/rootmodel" "${NOBODY[@]}" 2>"$T/err")
	assertContains "said" "$(cat "$T/err")" "model.safetensors is uid 0's, mode 0666 (Fix: remove it"
	assertEquals "a writable copy is not used: $out" "True honest 65534" "$(echo "$out" | cut -d' ' -f1-3)"
	assertEquals "$MNT/.vyrefs-uid-65534" "$(echo "$out" | cut -d' ' -f4- | cut -d/ -f1-4)"
}

test_A_a_planted_rank_directory_is_refused() {
	need setpriv || return 0
	mkdir "$SH/tp" && chmod 1777 "$SH/tp"
	gpu=$(getfattr --only-values -n user.vyre.device "$SH/tp" 2>/dev/null)
	printf '{"format": "vyrefs.ranks/1", "rank": 0, "world_size": 1, "gpu": %s, "save_id": null, "fingerprint": null, "tensors": {}}\n' \
		"${gpu:-0}" >"$T/rank.json"
	"${NOBODY[@]}" sh -c 'mkdir "$1/rank-0-of-1" && cp "$2/rank.json" "$1/rank-0-of-1/rank.json" &&
		printf None >"$1/rank-0-of-1/save-id"' - "$SH/tp" "$T" || fail "plant"
	out=$(LOCAL_RANK=${gpu:-0} /usr/bin/python3 - "$SH/tp" <<'PY' 2>&1
import sys, vyrefs.ranks
try:
    print("attached", vyrefs.ranks.check(None, sys.argv[1], rank=0, world_size=1)["rank"])
except ValueError as e:
    print(e)
PY
)
	assertEquals "vyrefs: $SH/tp/rank-0-of-1 was not saved by this user or root, or another user can change it ($SH/tp/rank-0-of-1 is uid 65534's, mode 0755): not attached (Fix: save the ranks again with vyrefs.ranks.save, as this user, into a directory others cannot write)" "$out"
}

# Another rank's save-id is read to check the ranks are of one save: a
# FIFO planted there held root's check forever.
test_A_another_ranks_planted_directory_is_refused_not_read() {
	need setpriv || return 0
	mkdir -p "$SH/tp/rank-0-of-2" && chmod 1777 "$SH/tp"
	gpu=$(getfattr --only-values -n user.vyre.device "$SH/tp/rank-0-of-2" 2>/dev/null)
	printf '{"format": "vyrefs.ranks/1", "rank": 0, "world_size": 2, "gpu": %s, "save_id": "s", "fingerprint": null, "tensors": {}}\n' \
		"${gpu:-0}" >"$SH/tp/rank-0-of-2/rank.json"
	echo s >"$SH/tp/rank-0-of-2/save-id"
	"${NOBODY[@]}" sh -c 'mkdir "$1/rank-1-of-2" && mkfifo "$1/rank-1-of-2/save-id"' - "$SH/tp" || fail "plant"
	out=$(LOCAL_RANK=${gpu:-0} timeout 20 /usr/bin/python3 - "$SH/tp" <<'PY' 2>&1
import sys, vyrefs.ranks
try:
    print("attached", vyrefs.ranks.check(None, sys.argv[1], rank=0, world_size=2)["rank"])
except ValueError as e:
    print(e)
PY
)
	assertEquals "refused, not held: $out" 0 $?
	assertEquals "vyrefs: $SH/tp/rank-1-of-2 was not saved by this user or root, or another user can change it ($SH/tp/rank-1-of-2 is uid 65534's, mode 0755): not attached (Fix: save the ranks again with vyrefs.ranks.save, as this user, into a directory others cannot write)" "$out"
}

# The private directory's name taken by another user (the mount's top is
# everyone's): refused with a Fix, nothing written through it.
test_A_a_private_directory_another_user_made_is_refused() {
	need setpriv || return 0
	"${NOBODY[@]}" mkdir -m 777 "$MNT/.vyrefs-uid-0" || fail "plant"
	out=$(ensure "$SH" 2>&1)
	assertEquals "PermissionError: $out" 1 $?
	assertContains "$out" "PermissionError: [Errno 13] vyrefs: $MNT/.vyrefs-uid-0 is not this user's private directory (uid 65534's, mode 0777): refused (Fix: remove it, rm -r $MNT/.vyrefs-uid-0; it is made again, 0700)"
	assertEquals "nothing in it" "" "$(ls -A "$MNT/.vyrefs-uid-0")"
}

test_C1_a_planted_lock_link_creates_nothing() {
	need setpriv || return 0
	"${NOBODY[@]}" ln -s "$T/made-by-root" "$SH/.vyrefs-converted-x.lock" || fail "plant"
	out=$(ensure "$SH" 2>&1)
	assertEquals "converted: $out" "True honest 0" "$(echo "$out" | cut -d' ' -f1-3)"
	assertFalse "nothing made where the link points" "[ -e '$T/made-by-root' ]"
	assertEquals "the link is left" "$T/made-by-root" "$(readlink "$SH/.vyrefs-converted-x.lock")"
}

test_C2_a_temporary_directory_swapped_for_a_link_changes_nothing_there() {
	need setpriv || return 0
	"${NOBODY[@]}" sh -c 'mkdir "$1/mal" && printf "weights" >"$1/mal/model.safetensors"' - "$SH" || fail "source"
	mkdir -m 700 "$T/victim"
	printf 'victim' >"$T/victim/model.safetensors"
	echo '{}' >"$T/victim/model.safetensors.index.json"
	mkfifo -m 666 "$T/ready" "$T/done"
	# The attacker: told the temporary directory's name by the writer
	# (it could watch for it), swaps it for a link to root's 0700 directory.
	"${NOBODY[@]}" sh -c 'read tmp <"$1/ready"; mv "$tmp" "$tmp.away" 2>/dev/null && ln -s "$1/victim" "$tmp"
		echo >"$1/done"' - "$T" &
	ATTACKER=$!
	out=$(ensure "$SH/mal" 2>&1)
	wait "$ATTACKER"
	ATTACKER=""
	assertEquals "converted: $out" "True honest 0" "$(echo "$out" | cut -d' ' -f1-3)"
	assertEquals "root's directory is as it was" "model.safetensors model.safetensors.index.json victim" \
		"$(ls "$T/victim" | xargs) $(cat "$T/victim/model.safetensors")"
}

only_as_root "root's loads, attacked as another user"

. tests/shunit.sh
