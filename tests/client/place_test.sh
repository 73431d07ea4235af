#!/usr/bin/env bash
# Placement (issue "exact", docs/core.md "Placement"): a safetensors file
# whose data starts at 8 mod 16 (as save_pretrained may leave it) is placed
# by the mount, so in a mapping its data section starts on a 4 KiB boundary
# and every tensor at a multiple of 512 sits on 512 bytes, where PyTorch's
# allocator would put it. However it came in (a program's writes, its
# first 8 bytes alone as safetensors' writer sends them, cp, vyrefs cp,
# tar, a copy inside the mount), after it grows, moves to another device or
# outlives its daemon; its bytes stay exactly what they are. Other files
# are not placed; a file that could not be placed is said, never copied.
# The helper is tests/client/place_check.py.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}
CHECK="python3 $PWD/tests/client/place_check.py"
T=""

setUp() {
	T=$(mktemp -d /tmp/vyrefs-place.XXXXXX) || return 1
}

tearDown() {
	[ -n "$MNT" ] && [ "$MNT" != "$VY_NO_MOUNT" ] && ! vyrefs_live "$MNT" && fusermount3 -u "$MNT" 2>/dev/null
	unmount_vyrefs
	rm -rf "$T"
}

# placed FILE...: each file's line as place_check.py prints it when placed.
placed() {
	local f
	for f in "$@"; do echo "$(basename "$f") data % 4096 = 0 off 512: 0 misaligned 0"; done
}

# where_is FILE...: place_check.py's line for each file, from its stdout;
# what it said on stderr (its AlignmentWarning) is in $T/said. Apart: a
# pipe's stdout comes at exit, a warning at once, so the two merged come in
# an order that is the interpreter's, not the code's under test.
where_is() {
	$CHECK where "$@" 2>"$T/said"
}

# assertPlaced FILE...: each file is placed, and nothing is said of it.
assertPlaced() {
	assertEquals "$(placed "$@")" "$(where_is "$@")"
	assertEquals "nothing said" "" "$(cat "$T/said")"
}

# same_bytes SRC FILE...: each FILE is SRC, byte for byte.
same_bytes() {
	local src=$1 f
	shift
	for f in "$@"; do
		cmp -s "$src" "$f" || fail "$(basename "$f") is not $(basename "$src")"
		[ "$(sha256sum < "$src")" = "$(sha256sum < "$f")" ] || fail "sha256 of $(basename "$f")"
	done
}

test_every_way_in_is_placed_and_exact() {
	[ "$backend" = host ] || { skip_test "host memory (tests/gpu/gpu_attach_test.sh has the GPU's)"; return; }
	mount_vyrefs || { fail "mount"; return; }
	$CHECK make "$T/big.st" 3000 || fail "make"    # about 9 MiB: pieces, growth in place
	$CHECK make "$T/small.st" 40 || fail "make"    # under a granule: one allocation
	$CHECK make "$MNT/written.st" 3000             # a program's writes
	$CHECK make "$MNT/split.st" 3000 split         # its first 8 bytes alone
	$CHECK make "$T/split-small.st" 40 split && $CHECK make "$MNT/split-small.st" 40 split
	cp "$T/big.st" "$MNT/cp.st" || fail "cp"
	cp "$T/small.st" "$MNT/cp-small.st" || fail "cp"
	"$VYREFS" cp "$T/big.st" "$MNT/vycp.st" || fail "vyrefs cp"
	"$VYREFS" cp "$T/small.st" "$MNT/vycp-small.st" || fail "vyrefs cp"
	tar -C "$T" -cf "$T/t.tar" big.st && mkdir "$MNT/tar" && tar -C "$MNT/tar" -xf "$T/t.tar" || fail "tar"
	cp "$MNT/cp.st" "$MNT/inside.st" || fail "cp inside the mount"
	same_bytes "$T/big.st" "$MNT"/{written,split,cp,vycp,inside}.st "$MNT/tar/big.st"
	same_bytes "$T/small.st" "$MNT"/{cp-small,vycp-small}.st
	same_bytes "$T/split-small.st" "$MNT/split-small.st"
	files=("$MNT"/{written,split,split-small,cp,cp-small,vycp,vycp-small,inside}.st "$MNT/tar/big.st")
	assertPlaced "${files[@]}"
	# Reads through the mount are the file's, and grow with it: the
	# placement lives below the file's bytes.
	head -c 5000000 "$T/big.st" | cmp -s - <(head -c 5000000 "$MNT/cp.st") || fail "a read's bytes"
	cat "$T/small.st" >> "$MNT/cp.st" && cat "$T/big.st" "$T/small.st" | cmp -s - "$MNT/cp.st" || fail "appended"
	assertPlaced "$MNT/cp.st" # grown, still placed
}

test_other_files_are_not_placed_and_a_late_header_is_said() {
	[ "$backend" = host ] || { skip_test "host memory"; return; }
	mount_vyrefs || { fail "mount"; return; }
	# Not a safetensors file: byte 0 stays at the memory's start.
	head -c 3000000 /dev/urandom > "$MNT/raw"
	assertEquals "raw 0" "$(python3 -c 'import sys, vyrefs
with vyrefs.map(sys.argv[1]) as m: print("raw", m.ptr % 4096)' "$MNT/raw")"
	# The header written last, over a file that has its bytes: not placed
	# (it would cost a copy of the file), and said with its Fix.
	$CHECK make "$T/big.st" 3000
	truncate -s "$(stat -c %s "$T/big.st")" "$MNT/late.st"
	dd if="$T/big.st" of="$MNT/late.st" bs=4096 skip=1 seek=1 conv=notrunc status=none
	dd if="$T/big.st" of="$MNT/late.st" bs=4096 count=1 conv=notrunc status=none
	same_bytes "$T/big.st" "$MNT/late.st"
	out=$(where_is "$MNT/late.st")
	said=$(cat "$T/said")
	# Its data at 8 mod 16: the seven tensors at a multiple of 512 sit
	# off it (the 1018-byte one after the 6-byte one is at 6 mod 8: as
	# aligned as its place allows).
	assertEquals "late.st off 512: 7 misaligned 7" "$(sed 's/data % 4096 = [0-9]* //' <<<"$out")"
	data=$(sed -n 's/^late.st data % 4096 = \([0-9]*\) .*/\1/p' <<<"$out")
	assertEquals "8 mod 16" 8 "$(( ${data:-0} % 16 ))" # no line: 0, never a shell error
	assertContains "$said" "AlignmentWarning: vyrefs: $MNT/late.st: 7 of 8 tensors sit less aligned than their place in the file allows"
	assertContains "$said" "(Fix: write the file into the mount again from its first byte"
	# Written again from its first byte, it is placed.
	cp "$T/big.st" "$MNT/late.st"
	assertPlaced "$MNT/late.st"
}

# A file not placed whose data starts at an odd byte (209): the float32
# at its start is off its element size and cannot be viewed in place; it
# is copied, said, and exact. The int8 (off 64, as aligned as it needs)
# and the bfloat16 (on 2) are views of the file's bytes, in place. Placed,
# the same file maps at an odd address: each dtype is viewed from its
# first aligned byte; the float32 and the int8 are in place, and the
# bfloat16, at an odd offset of the data, is copied and said.
test_a_tensor_off_its_element_size_is_copied_said_and_exact() {
	[ "$backend" = host ] || { skip_test "host memory"; return; }
	local py=python3
	$py -c 'import torch' 2>/dev/null || py=/usr/bin/python3
	$py -c 'import torch' 2>/dev/null || { skip_test "needs torch (Fix: apt-get install python3-torch)"; return; }
	mount_vyrefs || { fail "mount"; return; }
	python3 - "$T/odd.st" <<'PY' || fail "make"
import json, struct, sys
header = {"f32": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]},
          "i8": {"dtype": "I8", "shape": [5], "data_offsets": [64, 69]},
          "bf16": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [69, 81]}}
text = json.dumps(header).encode()
text += b" " * ((-(8 + len(text)) % 16) + 1)  # the data at 1 mod 16
data = struct.pack("<16f", *[k / 7 for k in range(16)]) + bytes(range(5)) + bytes(range(100, 112))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data + bytes(4096 * 3))
PY
	truncate -s "$(stat -c %s "$T/odd.st")" "$MNT/odd.st"
	dd if="$T/odd.st" of="$MNT/odd.st" bs=4096 skip=1 seek=1 conv=notrunc status=none
	dd if="$T/odd.st" of="$MNT/odd.st" bs=4096 count=1 conv=notrunc status=none
	# Each program's lines on stdout; stderr apart (it says only what went
	# wrong: what vyrefs says is recorded, whatever PYTHONWARNINGS says).
	out=$($py - "$MNT/odd.st" "$T/odd.st" 2>"$T/err" <<'PY'
import sys, warnings, torch, vyrefs.torch, vyrefs.safetensors as st
start, entries, _ = st.read_header(sys.argv[2])
with open(sys.argv[2], "rb") as f:
    raw = f.read()
want = {n: torch.frombuffer(bytearray(raw[start + a:start + b]), dtype=st.torch_dtype(c)).view(s)
        for n, (c, s, a, b) in entries.items()}
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    sd = vyrefs.torch.load_state_dict(sys.argv[1])
print("equal", all(torch.equal(sd[n], want[n]) and sd[n].dtype == want[n].dtype for n in want))
print("said", [str(w.message).split("(Fix")[0].split(": ", 2)[2] for w in said])
base = sd.mappings[0].ptr
print("in place", {n: sd[n].data_ptr() == base + start + entries[n][2] for n in sorted(want)})
PY
)
	# The same file written from its first byte: placed, its data on a
	# page, so the mapping starts at an odd address and every tensor is
	# aligned: all viewed in place, nothing said.
	cp "$T/odd.st" "$MNT/placed.st" || fail "cp"
	err=$(cat "$T/err")
	placed=$($py - "$MNT/placed.st" "$T/odd.st" 2>"$T/err" <<'PY'
import sys, warnings, torch, vyrefs.torch, vyrefs.safetensors as st
start, entries, _ = st.read_header(sys.argv[2])
with open(sys.argv[2], "rb") as f:
    raw = f.read()
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    sd = vyrefs.torch.load_state_dict(sys.argv[1])
base = sd.mappings[0].ptr
print("ptr odd", base % 2 == 1, "data on a page", (base + start) % 4096 == 0, "said", [str(w.message).split(": ", 2)[2] for w in said])
print("equal", all(bytes(sd[n].contiguous().view(torch.uint8).flatten().tolist()) == raw[start + a:start + b]
                   for n, (_, _, a, b) in entries.items()))
print("in place", {n: sd[n].data_ptr() == base + start + entries[n][2] for n in sorted(entries)})
PY
)
	assertEquals "not placed: $err" "equal True
said [\"2 of 3 tensors sit less aligned than their place in the file allows (its data starts at byte 209 of a 4096-byte page, not placed for its format); GPU kernels compute them slower and round otherwise than for the framework's own load; tensors copied to be viewed at all (off their element size): 1 \"]
in place {'bf16': True, 'f32': False, 'i8': True}" "$out"
	assertEquals "placed: $(cat "$T/err")" "ptr odd True data on a page True said ['tensors copied to be viewed at all (off their element size): 1 (Fix: save it with vyrefs.torch.save, which aligns every tensor)']
equal True
in place {'bf16': False, 'f32': True, 'i8': True}" "$placed"
}

test_a_move_between_devices_keeps_the_placement() {
	[ "$backend" = host ] || { skip_test "host_devices is the host backend's (tests/gpu/gpu_devices_test.sh has the GPUs')"; return; }
	need setfattr || return 0
	mount_vyrefs "host_devices=2" || { fail "mount"; return; }
	$CHECK make "$T/big.st" 3000
	$CHECK make "$T/small.st" 40
	cp "$T/big.st" "$MNT/big.st" && cp "$T/small.st" "$MNT/small.st" || fail "cp"
	for f in big small; do
		to=$((1 - $(getfattr --only-values -n user.vyre.device "$MNT/$f.st")))
		setfattr -n user.vyre.device -v "$to" "$MNT/$f.st" || fail "move $f"
		assertEquals "$f moved" "$to" "$(getfattr --only-values -n user.vyre.device "$MNT/$f.st")"
	done
	same_bytes "$T/big.st" "$MNT/big.st"
	same_bytes "$T/small.st" "$MNT/small.st"
	assertPlaced "$MNT"/{big,small}.st
}

test_a_takeover_keeps_the_placement() {
	[ "$backend" = host ] || { skip_test "host memory (tests/gpu/gpu_survive_test.sh has the GPU's)"; return; }
	mount_vyrefs "survive=on" || { fail "mount"; return; }
	$CHECK make "$T/big.st" 3000
	$CHECK make "$T/small.st" 40
	cp "$T/big.st" "$MNT/big.st" && cp "$T/small.st" "$MNT/small.st" || fail "cp"
	$CHECK make "$MNT/split.st" 3000 split
	cp "$MNT/split.st" "$T/split.st"
	old=$(stat_of pid)
	kill -9 "$old"
	wait_for 20 serving_pid_not "$old" && wait_for "its standby" standby_settled || { fail "no successor"; return; }
	same_bytes "$T/big.st" "$MNT/big.st"
	same_bytes "$T/small.st" "$MNT/small.st"
	same_bytes "$T/split.st" "$MNT/split.st"
	assertPlaced "$MNT"/{big,small,split}.st
	# The successor grows it placed too.
	cat "$T/small.st" >> "$MNT/big.st"
	assertPlaced "$MNT/big.st"
}

# A mapping covers the lead too: it holds zeros, never the bytes its
# memory held before (the pool's). A client of protocol 2.2 would take the
# lead for byte 0: it is refused a placed file, not another.
test_the_lead_holds_zeros_and_older_clients_are_refused() {
	[ "$backend" = host ] || { skip_test "host memfds (a GPU's fds do not mmap here)"; return; }
	mount_vyrefs || { fail "mount"; return; }
	head -c 16M /dev/zero | tr '\0' '\377' > "$MNT/old" && rm "$MNT/old" # the pool keeps its memory
	$CHECK make "$T/big.st" 3000
	cp "$T/big.st" "$MNT/big.st"
	head -c 3000000 /dev/urandom > "$MNT/raw"
	out=$("$BUILD/tests/client/vyattack" "$MNT" map-fd "$MNT/big.st" O_RDWR dump)
	lead=$(echo "$out" | sed -n 's/.* lead=\([0-9]*\)$/\1/p')
	assertEquals "the lead puts the data on a page" 0 "$(( (lead + $(python3 -c 'import sys, vyrefs.safetensors as st
print(st.read_header(sys.argv[1])[0])' "$T/big.st")) % 4096 ))"
	assertContains "$out" "content: $(head -c 32 "$T/big.st" | tr -c '[:print:]' '.' | tr -d '\n')"
	assertContains "zeros only outside the file's bytes" "$out" " nonzero=0 "
	out=$(VYATTACK_MINOR=2 "$BUILD/tests/client/vyattack" "$MNT" map-fd "$MNT/big.st" O_RDWR)
	assertContains "$out" "refused EINVAL: the file's byte 0 is $lead bytes into its memory"
	assertContains "$out" "(Fix: use libvyrefs 2.3 or newer"
	out=$(VYATTACK_MINOR=2 "$BUILD/tests/client/vyattack" "$MNT" map-fd "$MNT/raw" O_RDWR)
	assertContains "an unplaced file maps as before" "$out" "lead=0"
}

. tests/shunit.sh
