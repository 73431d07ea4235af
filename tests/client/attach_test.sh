#!/usr/bin/env bash
# run.sh: long (minutes: it starts first)
# Whole models from a mount (vyrefs.torch) on the host backend, whose files
# are host memory: a torch.nn model saved sharded, with its index, attached
# in a new process bit for bit and with no copy; a tied weight written once
# and tied again; non-persistent buffers kept; two processes share one copy
# (resident bytes counted once); missing and unexpected names said exactly;
# a processed state dict saved and attached back; every error (not
# safetensors, a dtype torch lacks, shapes, no room, a bad index) has a Fix
# and leaves nothing mapped. tests/gpu/gpu_attach_test.sh has the GPU's.
# Needs torch (Debian: python3-torch) and numpy: skipped with the reason
# without them.
. tests/fs/lib.sh
export VYREFS_LIB=$PWD/${BUILD}/libvyrefs.so
export PYTHONPATH=$PWD/client/python:$PWD/tests/client${PYTHONPATH:+:$PYTHONPATH}

# A python with torch: the one on PATH, else Debian's (python3-torch).
PY=python3
$PY -c 'import torch' 2>/dev/null || PY=/usr/bin/python3

setUp() {
	mount_vyrefs || { fail "mount"; return 1; }
}

tearDown() {
	unmount_vyrefs
}

# needs_torch: skip the test unless torch and numpy import.
needs_torch() {
	[ "$backend" = host ] || { skip_test "host memory (tests/gpu/gpu_attach_test.sh has the GPU's)"; return 1; }
	$PY -c 'import torch, numpy' 2>/dev/null && return 0
	skip_test "needs torch and numpy (Fix: apt-get install python3-torch, or scripts/install-deps.sh test)"
	return 1
}

py() { $PY - "$MNT" "$@"; }

. tests/client/ranks_lib.sh
needs_ranks() {
	needs_torch || return 1
	$PY -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null && return 0
	skip_test "needs torch.distributed with gloo"
	return 1
}

test_sharded_save_attaches_bit_for_bit_in_a_new_process() {
	needs_torch || return 0
	out=$(py <<'PY'
import json, os, sys, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
vyrefs.torch.save(am.make(seed=4), mnt + "/net")  # an older save, one file: the sharded one replaces it
net = am.make(seed=3)
files = vyrefs.torch.save(net, mnt + "/net", max_shard_size=120_000)
print(sorted(os.listdir(mnt + "/net")))
index = json.load(open(mnt + "/net/model.safetensors.index.json"))
print("head.weight" in index["weight_map"], index["metadata"]["total_size"])
print(json.dumps(am.digests(net), sort_keys=True))
print(am.digest(net(am.ids())))
PY
)
	assertEquals "['model-00001-of-00004.safetensors', 'model-00002-of-00004.safetensors', 'model-00003-of-00004.safetensors', 'model-00004-of-00004.safetensors', 'model.safetensors.index.json']
False 330808" "$(echo "$out" | head -n 2)"
	# (330808 bytes: 512x64 + 3x(2x64 + 128x64 + 128 + 64x128) floats and 7 int64, the tied head once.)
	saved=$(echo "$out" | sed -n 3p) logits=$(echo "$out" | sed -n 4p)
	assertEquals 0 "$(stat_of mapped_bytes)"
	resident=$(stat_of resident_bytes)
	got=$(py <<'PY'
import json, sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
with vyrefs.torch.empty_weights():
    net = am.Net().eval()
print(net.emb.weight.device, net.table.device)
r = vyrefs.torch.attach(net, mnt + "/net")
print(r.missing_keys, r.unexpected_keys)
st = dict(l.split() for l in open(mnt + "/.vyre/stats"))
sd = vyrefs.torch.load_state_dict(mnt + "/net")
with vyrefs.torch.empty_weights():
    net2 = am.Net().eval()
vyrefs.torch.attach(net2, sd)
spans = [(m.ptr, m.ptr + m.size) for m in sd.mappings]
inside = all(any(a <= t.data_ptr() < b for a, b in spans) for t in net2.state_dict().values())
print("zero copy", inside, "tied", net.head.weight is net.emb.weight, type(net.head.weight).__name__)
print("table", net.table.device, float(net.table[0]), float(net.table[-1]))
print(json.dumps(am.digests(net), sort_keys=True))
print(am.digest(net(am.ids())))
print(st["mapped_bytes"], st["maps"])
PY
)
	assertEquals "meta cpu
[] []
zero copy True tied True Parameter
table cpu 0.5 1.5" "$(echo "$got" | head -n 4)"
	assertEquals "every tensor bit for bit" "$saved" "$(echo "$got" | sed -n 5p)"
	assertEquals "the logits bit for bit" "$logits" "$(echo "$got" | sed -n 6p)"
	assertEquals "four shards mapped (2 MiB each); nine maps, with the five of the saves" "8388608 9" "$(echo "$got" | sed -n 7p)"
	assertEquals "attaching held no more memory" "$resident" "$(stat_of resident_bytes)"
	assertEquals 0 "$(stat_of mapped_bytes)"
}

# Issue 67 (edges) 4: root's model, 0644, on a root mount with allow_other,
# attached by another user (uid 65534), who may only read it: the mappings
# are read-only, every tensor and the logits bit for bit, with no copy; a
# write into a weight kills only the process that wrote (a forked child:
# SIGSEGV), and the files are as root saved them.
test_another_user_attaches_a_root_model_read_only() {
	needs_torch || return 0
	need setpriv || return 0
	[ -n "$(others_opt)" ] || { skip_test "needs allow_other"; return; }
	nobody_bins || return 1
	unmount_vyrefs
	mount_vyrefs "$(others_opt)" || { fail "mount"; return; }
	out=$(py <<'PY'
import json, sys, vyrefs.torch, attach_models as am
net = am.make(seed=5)
vyrefs.torch.save(net, sys.argv[1] + "/net", max_shard_size=120_000)
print(json.dumps(am.digests(net), sort_keys=True))
print(am.digest(net(am.ids())))
PY
)
	chmod -R go-w,a+rX "$MNT/net"
	before=$(cd "$MNT/net" && sha256sum *)
	got=$(cd /tmp && HOME=/tmp VYREFS_LIB=$NOBODY_DIR/libvyrefs.so PYTHONPATH=$NOBODY_PYTHONPATH as_nobody $PY - "$MNT" <<'PY'
import json, os, sys, vyrefs.torch, attach_models as am
with vyrefs.torch.empty_weights():
    net = am.Net().eval()
sd = vyrefs.torch.load_state_dict(sys.argv[1] + "/net")
vyrefs.torch.attach(net, sd)
spans = [(m.ptr, m.ptr + m.size) for m in sd.mappings]
print("read-only", all(m.readonly for m in sd.mappings), "zero copy",
      all(any(a <= t.data_ptr() < b for a, b in spans) for t in net.state_dict().values()))
print(json.dumps(am.digests(net), sort_keys=True))
print(am.digest(net(am.ids())))
sys.stdout.flush()
child = os.fork()
if child == 0:
    net.blocks[0].up.weight.data[0, 0] = 1001.0
    os._exit(0)
_, st = os.waitpid(child, 0)
print("child", "signal %d" % os.WTERMSIG(st) if os.WIFSIGNALED(st) else "exit %d" % os.WEXITSTATUS(st),
      "parent reads", am.digest(net(am.ids())))
PY
)
	assertEquals "read-only True zero copy True" "$(echo "$got" | sed -n 1p)"
	assertEquals "every tensor bit for bit" "$(echo "$out" | sed -n 1p)" "$(echo "$got" | sed -n 2p)"
	assertEquals "the logits bit for bit" "$(echo "$out" | sed -n 2p)" "$(echo "$got" | sed -n 3p)"
	assertEquals "a write faults in its process only" "child signal 11 parent reads $(echo "$out" | sed -n 2p)" \
		"$(echo "$got" | sed -n 4p)"
	assertEquals "the files are as saved" "$before" "$(cd "$MNT/net" && sha256sum *)"
	assertEquals 0 "$(stat_of mapped_bytes)"
}

# The format, read here by hand: 8-byte little-endian length, JSON, data.
test_saved_file_is_safetensors_with_the_tie_written_once() {
	needs_torch || return 0
	out=$(py <<'PY'
import json, struct, sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
net = am.make(seed=5)
vyrefs.torch.save(net, mnt + "/one")
raw = open(mnt + "/one/model.safetensors", "rb").read()
n, = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__")
print(n % 8, len(raw) - 8 - n == max(v["data_offsets"][1] for v in h.values()), sorted(meta.items()))
print("emb.weight" in h, "head.weight" in h, h["steps"]["dtype"], h["emb.weight"]["shape"])
a, b = h["emb.weight"]["data_offsets"]
print(raw[8 + n + a:8 + n + b] == net.emb.weight.detach().numpy().tobytes())
sd = vyrefs.torch.load_state_dict(mnt + "/one")
print(sd["head.weight"] is sd["emb.weight"], sorted(sd) == sorted(net.state_dict()))
PY
)
	assertEquals "0 True [('format', 'pt'), ('vyrefs.tied', '{\"head.weight\": \"emb.weight\"}')]
True False I64 [512, 64]
True
True True" "$out"
}

# A model's headers are read with reads of their own size: a buffered read
# fills a buffer of the mount's st_blksize (2 MiB), which made each header
# 17 round trips through FUSE (a 4 MiB file: 16 of 128 KiB and one more)
# and a few ms of every attach. `ra_hits` counts the reads the daemon
# answered; the kernel's own readahead decides how many the first read
# becomes, so the bound is 4 (512 KiB), not an exact count.
test_a_header_is_read_with_reads_of_its_size() {
	needs_torch || return 0
	py <<'PY' || fail "save"
import sys, torch, vyrefs.torch
vyrefs.torch.save({"w": torch.ones(4 << 20, dtype=torch.uint8)}, sys.argv[1] + "/h")
PY
	before=$(stat_of ra_hits)
	out=$(py <<'PY'
import sys, vyrefs.safetensors as st
print(st.read_header(sys.argv[1] + "/h/model.safetensors"))
PY
)
	assertEquals "(4096, {'w': ('U8', [4194304], 0, 4194304)}, {'format': 'pt'})" "$out"
	reads=$(($(stat_of ra_hits) - before))
	assertTrue "the header took $reads reads of the daemon (17 before)" "[ $reads -ge 1 ] && [ $reads -le 4 ]"
}

test_two_processes_share_one_copy() {
	needs_torch || return 0
	py <<'PY' || fail "save"
import sys, vyrefs.torch, attach_models as am
vyrefs.torch.save(am.make(seed=2), sys.argv[1] + "/net")
PY
	resident=$(stat_of resident_bytes)
	out=$(py <<'PY'
import subprocess, sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
def stats():
    return {k: int(v) for k, v in (l.split() for l in open(mnt + "/.vyre/stats"))}
with vyrefs.torch.empty_weights():
    net = am.Net()
vyrefs.torch.attach(net, mnt + "/net")
one = stats()["mapped_bytes"]
child = ("import sys, torch, vyrefs.torch, attach_models as am\n"
         "with vyrefs.torch.empty_weights():\n    net = am.Net()\n"
         "vyrefs.torch.attach(net, sys.argv[1] + '/net')\n"
         "print(float(net.blocks[1].up.weight[2, 3]))\n"
         "with torch.no_grad():\n    net.blocks[0].down.weight[0, 0] = 1234.5\n"
         "print(open(sys.argv[1] + '/.vyre/stats').read().split('mapped_bytes ')[1].split()[0])\n")
r = subprocess.run([sys.executable, "-c", child, mnt], capture_output=True, text=True)
print(r.stderr.strip())
seen, both = r.stdout.split()
print(one, int(both) == one, float(seen) == float(net.blocks[1].up.weight[2, 3]))
print("the child's write is ours:", float(net.blocks[0].down.weight[0, 0]))
PY
)
	assertEquals "
2097152 True True
the child's write is ours: 1234.5" "$out"
	assertEquals "one copy: resident bytes as before" "$resident" "$(stat_of resident_bytes)"
}

test_missing_and_unexpected_names_are_said_exactly() {
	needs_torch || return 0
	out=$(py <<'PY'
import sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
vyrefs.torch.save(am.make(seed=4, layers=3), mnt + "/net")
def mapped():
    return open(mnt + "/.vyre/stats").read().split("mapped_bytes ")[1].split()[0]
with vyrefs.torch.empty_weights():
    bigger = am.Net(layers=4)
try:
    vyrefs.torch.attach(bigger, mnt + "/net")
except RuntimeError as e:
    print(e)
print("unchanged", bigger.blocks[0].up.weight.device, "mapped", mapped())
with vyrefs.torch.empty_weights():
    smaller = am.Net(layers=2)
try:
    vyrefs.torch.attach(smaller, mnt + "/net")
except RuntimeError as e:
    print(e)
r = vyrefs.torch.attach(bigger, mnt + "/net", strict=False)
print(r)
print(bigger.blocks[3].up.weight.device, float(bigger.blocks[3].up.weight.abs().sum()), bigger.head.weight is bigger.emb.weight)
r = vyrefs.torch.attach(smaller, mnt + "/net", strict=False)
print(r.missing_keys, len(r.unexpected_keys))
PY
)
	# (Unexpected names in the files' order: vyrefs.torch.save writes tensors whose size is a
	# multiple of 512 first, so each sits on 512 bytes: the norms' 256 bytes come last.)
	assertEquals "vyrefs: the model and the files differ: missing from the files: blocks.3.norm.weight, blocks.3.norm.bias, blocks.3.up.weight, blocks.3.up.bias, blocks.3.down.weight (Fix: build the model from the config the files were saved with, or pass strict=False to attach what matches)
unchanged meta mapped 0
vyrefs: the model and the files differ: not in the model: blocks.2.down.weight, blocks.2.up.bias, blocks.2.up.weight, blocks.2.norm.bias, blocks.2.norm.weight (Fix: build the model from the config the files were saved with, or pass strict=False to attach what matches)
AttachResult(missing_keys=['blocks.3.norm.weight', 'blocks.3.norm.bias', 'blocks.3.up.weight', 'blocks.3.up.bias', 'blocks.3.down.weight'], unexpected_keys=[])
cpu 0.0 True
[] 5" "$out"
}

test_processed_state_dict_saved_and_attached_back() {
	needs_torch || return 0
	out=$(py <<'PY'
import sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
net = am.make(seed=6)
# What an engine keeps after its processing: transposed, scaled, fused, cast.
sd = {name: t for name, t in net.state_dict().items()}
processed = {"up_t": sd["blocks.0.up.weight"].t(), "scaled": sd["blocks.1.down.weight"] * 0.125,
             "fused": torch.cat([sd["blocks.2.up.weight"], sd["blocks.2.down.weight"].t()]),
             "half": sd["emb.weight"].to(torch.bfloat16), "steps": sd["steps"]}
vyrefs.torch.save(processed, mnt + "/proc", max_shard_size="40KB")
back = vyrefs.torch.load_state_dict(mnt + "/proc")
print(sorted(back) == sorted(processed), all(back[k].dtype == v.dtype and torch.equal(back[k], v) for k, v in processed.items()))
print(back["up_t"].is_contiguous(), back["half"].dtype)
PY
)
	assertEquals "True True
True torch.bfloat16" "$out"
	assertEquals 0 "$(stat_of mapped_bytes)"
}

test_errors_have_a_fix_and_leave_nothing_mapped() {
	needs_torch || return 0
	out=$(py <<'PY'
import json, os, struct, sys, torch, vyrefs, vyrefs.torch, attach_models as am
from vyrefs import safetensors as st
mnt = sys.argv[1]
def mapped():
    return open(mnt + "/.vyre/stats").read().split("mapped_bytes ")[1].split()[0]
def err(f, *a, **k):
    try:
        f(*a, **k)
        return "no error"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)
open(mnt + "/text.safetensors", "w").write("this is a text file, not a model at all\n")
open(mnt + "/short.safetensors", "wb").write(b"\x01\x02")
def header_file(path, h, data=b""):
    text = json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)
header_file(mnt + "/notjson.safetensors", {}, b"")
open(mnt + "/notjson.safetensors", "r+b").write(struct.pack("<Q", 4) + b"{{{{")
header_file(mnt + "/outside.safetensors", {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
header_file(mnt + "/unknown.safetensors", {"w": {"dtype": "X9", "shape": [4], "data_offsets": [0, 4]}}, b"\0" * 4)
lacks = [c for c, (attr, _) in st.DTYPES.items() if not isinstance(getattr(torch, attr, None), torch.dtype)]
print("a dtype this torch lacks:", bool(lacks))
for code in lacks[:1]:
    size = st.DTYPES[code][1]
    header_file(mnt + "/lacks.safetensors", {"ok": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                             "w": {"dtype": code, "shape": [2], "data_offsets": [8, 8 + 2 * size]}},
                b"\0" * (8 + 2 * size))
    e = err(vyrefs.torch.load_state_dict, mnt + "/lacks.safetensors")
    print(e.startswith("TypeError: vyrefs: %s/lacks.safetensors: tensor 'w' is %s, a dtype this torch (%s) lacks (Fix: "
                       % (mnt, code, torch.__version__)), mapped())
for f in ("text", "short", "notjson", "outside"):
    print(err(vyrefs.torch.load_state_dict, mnt + "/%s.safetensors" % f).replace(mnt, "M"))
print(err(vyrefs.torch.load_state_dict, mnt + "/unknown.safetensors").replace(mnt, "M"))
# Shapes: files of a model of another width; the model stays as it was.
vyrefs.torch.save(am.make(d=32), mnt + "/narrow")
with vyrefs.torch.empty_weights():
    net = am.Net()
print(err(vyrefs.torch.attach, net, mnt + "/narrow").replace(mnt, "M"))
print(net.emb.weight.device, mapped())
# A state dict on meta has nothing to save; a non-tensor is refused.
print(err(vyrefs.torch.save, net, mnt + "/meta"), os.path.exists(mnt + "/meta/model.safetensors"))
print(err(vyrefs.torch.save, {"w": 3}, mnt + "/nt"))
# An index that names a shard that is not there, and a shard that lacks a name.
os.makedirs(mnt + "/idx")
json.dump({"weight_map": {"a": "model-1.safetensors"}}, open(mnt + "/idx/model.safetensors.index.json", "w"))
print(err(vyrefs.torch.load_state_dict, mnt + "/idx").replace(mnt, "M"))
vyrefs.torch.save({"b": torch.ones(3)}, mnt + "/idx2")
os.rename(mnt + "/idx2/model.safetensors", mnt + "/idx/model-1.safetensors")
print(err(vyrefs.torch.load_state_dict, mnt + "/idx").replace(mnt, "M"))
print(err(vyrefs.torch.load_state_dict, mnt + "/nt").replace(mnt, "M"))
print(err(vyrefs.torch.load_state_dict, mnt + "/meta").replace(mnt, "M"))
print("mapped", mapped())
PY
)
	assertContains "$out" "a dtype this torch lacks: "
	echo "$out" | grep -q "lacks: False" || assertContains "$out" "
True 0
"
	assertEquals "ValueError: vyrefs: M/text.safetensors is not a safetensors file: a header of 2338328219631577204 bytes in a file of 40 (Fix: give a file written by safetensors, save_pretrained or vyrefs.torch.save)
ValueError: vyrefs: M/short.safetensors is not a safetensors file: 2 bytes, under the 8 of the header's length (Fix: give a file written by safetensors, save_pretrained or vyrefs.torch.save)
ValueError: vyrefs: M/notjson.safetensors is not a safetensors file: its header is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)) (Fix: give a file written by safetensors, save_pretrained or vyrefs.torch.save)
ValueError: vyrefs: M/outside.safetensors is not a safetensors file: tensor 'w': {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]} (Fix: give a file written by safetensors, save_pretrained or vyrefs.torch.save)
TypeError: vyrefs: M/unknown.safetensors: tensor 'w' is X9, a dtype safetensors does not define (Fix: rewrite the file with a known dtype)
ShapesDiffer: vyrefs: shapes differ between the model and the files: emb.weight: the model's (512, 64), the file's (512, 32), blocks.0.norm.weight: the model's (64,), the file's (32,), blocks.0.norm.bias: the model's (64,), the file's (32,), blocks.0.up.weight: the model's (128, 64), the file's (64, 32), blocks.0.up.bias: the model's (128,), the file's (64,) and 11 more (Fix: build the model from the config the files were saved with)
meta 0
ValueError: vyrefs: 'emb.weight' is on the meta device, with no data to save (Fix: attach or load the weights first) False
TypeError: vyrefs: 'w' is int, not a tensor (Fix: save a model or a {name: tensor} dict)" \
		"$(echo "$out" | sed -n '/^ValueError: vyrefs: M\/text/,/^TypeError: vyrefs: .w. is/p')"
	assertContains "$out" "FileNotFoundError: vyrefs: M/idx/model.safetensors.index.json names M/idx/model-1.safetensors, which does not exist (Fix: copy every shard beside the index)"
	assertContains "$out" "ValueError: vyrefs: the index names a in M/idx/model-1.safetensors, which lacks it (Fix: write the model again, or copy the right shards)"
	assertContains "$out" "FileNotFoundError: vyrefs: no such file: M/nt (Fix: give a .safetensors file, a model.safetensors.index.json, or a directory holding one of them (save_pretrained or vyrefs.torch.save write them))"
	assertContains "$out" "FileNotFoundError: vyrefs: M/meta holds neither model.safetensors.index.json nor model.safetensors (Fix: "
	assertContains "$out" "mapped 0"
}

test_a_model_built_on_meta_without_its_buffers_is_refused() {
	needs_torch || return 0
	out=$(py <<'PY'
import sys, torch, vyrefs.torch, attach_models as am
mnt = sys.argv[1]
vyrefs.torch.save(am.make(), mnt + "/net")
net = am.make()
net.table = torch.empty(64, device="meta")  # what torch.device("meta") makes of it
try:
    vyrefs.torch.attach(net, mnt + "/net")
except ValueError as e:
    print(e)
print(open(mnt + "/.vyre/stats").read().split("mapped_bytes ")[1].split()[0])
PY
)
	assertEquals "vyrefs: the non-persistent buffers table are on the meta device, and no file holds them (Fix: build the model inside vyrefs.torch.empty_weights(), which keeps buffers real, not under torch.device('meta'))
0" "$out"
}

test_no_room_is_refused_before_writing() {
	needs_torch || return 0
	unmount_vyrefs
	mount_vyrefs "host_memory=32M" || { fail "mount"; return 1; }
	out=$(py <<'PY'
import os, sys, torch, vyrefs.torch
mnt = sys.argv[1]
try:
    vyrefs.torch.save({"w%d" % i: torch.zeros(4 << 20) for i in range(3)}, mnt + "/big", max_shard_size="20MB")
except OSError as e:
    print(e.errno, str(e).replace(mnt, "M").split(" has ")[0], "(Fix:" in str(e))
print(os.listdir(mnt + "/big"))
PY
)
	assertEquals "28 [Errno 28] vyrefs: the tensors take 50331648 bytes, M/big True
[]" "$out"
	assertEquals 0 "$(stat_of resident_bytes)"
}

# vyrefs.transformers.from_pretrained's plumbing (config, class, dtype, tie,
# generation_config, eval, refusals) against a stand-in transformers
# (tests/client/standin): Debian has none; the GPU suite runs the real one.
test_from_pretrained_plumbing_with_a_standin_transformers() {
	needs_torch || return 0
	out=$(PYTHONPATH=$PWD/tests/client/standin:$PYTHONPATH py <<'PY'
import sys, os, json, torch, transformers, vyrefs.torch, vyrefs.transformers
mnt = sys.argv[1]
cfg = transformers.Config(vocab=50, d=8, tie=True, architectures=["TinyLM"])
torch.manual_seed(0)
m = transformers.TinyLM(cfg).to(torch.bfloat16)
vyrefs.torch.save(m, mnt + "/tiny", max_shard_size=300)
json.dump({"max_length": 7}, open(mnt + "/tiny/generation_config.json", "w"))
print(sorted(os.listdir(mnt + "/tiny")))
x = torch.tensor([[1, 2, 3]])
ours = vyrefs.transformers.from_pretrained(mnt + "/tiny")
print(ours.training, ours.head.weight is ours.emb.weight, ours.generation_config.max_length, ours.emb.weight.dtype,
      ours.inv_freq.dtype, torch.equal(ours(x), m(x)))
for bad in (dict(device_map="cuda:1"), dict(foo=1), dict(dtype="nonsense")):
    try:
        vyrefs.transformers.from_pretrained(mnt + "/tiny", **bad)
        print("no error", bad)
    except Exception as e:
        print(type(e).__name__, str(e).split(" (Fix:")[0], "(Fix:" in str(e))
o32 = vyrefs.transformers.from_pretrained(mnt + "/tiny", torch_dtype=torch.float32)
print(o32.emb.weight.dtype, o32.head.weight is o32.emb.weight, torch.equal(o32.emb.weight, m.emb.weight.float()))
print("copied", ours.vyrefs_copied_bytes, o32.vyrefs_copied_bytes)
PY
)
	assertEquals "['config.json', 'generation_config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json']
False True 7 torch.bfloat16 torch.float32 True
ValueError vyrefs: device_map names cuda:1, which this process does not have True
TypeError vyrefs: from_pretrained does not take foo True
TypeError vyrefs: dtype 'nonsense' is not a torch dtype True
torch.float32 True True
copied 0 1888" "$out"
	# (1888: emb 50x8, lin 8x8 and its bias 8 as float32; the tied head is emb.)
}

# DLPack: a mapped tensor reaches numpy (and jax, cupy where installed)
# with no copy.
test_dlpack_reaches_numpy_with_no_copy() {
	needs_torch || return 0
	out=$(py <<'PY'
import sys, numpy as np, torch, vyrefs.torch
mnt = sys.argv[1]
vyrefs.torch.save({"w": torch.arange(1024, dtype=torch.float32).reshape(32, 32)}, mnt + "/d")
sd = vyrefs.torch.load_state_dict(mnt + "/d")
a = np.from_dlpack(sd["w"])
print(a.ctypes.data == sd["w"].data_ptr(), a.dtype, a.shape, float(a.sum()))
try:
    import jax, jax.dlpack
    j = jax.dlpack.from_dlpack(sd["w"])
    print("jax", float(j.sum()))
except ImportError:
    print("jax", float(a.sum()))
PY
)
	assertEquals "True float32 (32, 32) 523776.0
jax 523776.0" "$out"
}

# Issue "gpus": tensor-parallel ranks (tests/client/ranks_lib.sh), with
# gloo over two host devices.
test_tensor_parallel_ranks_keep_their_parts_resident() {
	needs_ranks || return 0
	unmount_vyrefs
	mount_vyrefs "host_devices=2" || { fail "mount"; return; }
	ranks_save_attach_refuse
}

test_a_two_rank_job_answers_through_a_kill_and_a_new_job_attaches() {
	needs_ranks || return 0
	unmount_vyrefs
	mount_vyrefs "host_devices=2,survive=on" || { fail "mount"; return; }
	ranks_through_a_kill
}

# save_moe SEED: a stand-in mixture of experts into $MNT/moe, one tensor
# per expert (experts.I.w), as transformers 5 fuses them at load.
save_moe() {
	PYTHONPATH="$PWD/tests/client/standin:$PYTHONPATH" py "$1" <<'PY'
import sys, torch, transformers, vyrefs.torch
mnt, seed = sys.argv[1], int(sys.argv[2])
cfg = transformers.Config(vocab=50, d=8, experts=4, tie=False, architectures=["TinyMoE"])
g = torch.Generator().manual_seed(seed)
t = {"emb.weight": torch.randn(50, 8, generator=g), "head.weight": torch.randn(50, 8, generator=g)}
t.update({"experts.%d.w" % i: torch.randn(8, 8, generator=g) for i in range(4)})
vyrefs.torch.save(t, mnt + "/moe")
cfg.save_pretrained(mnt + "/moe")
PY
}

# Issue "families": a checkpoint that transformers converts at load (here
# the stand-in's mixture of experts, one tensor per expert in the files,
# fused in the model) attaches through a converted copy kept beside it:
# made once by transformers' own load, used with no conversion by the next
# process, made again when a source file changed, made once by two
# processes at once; removable with rm -r.
test_a_converted_model_is_kept_beside_its_source_and_remade_when_stale() {
	needs_torch || return 0
	local moe="$PWD/tests/client/standin:$PYTHONPATH"
	attach() { PYTHONPATH=$moe py <<'PY'
import sys, torch, transformers, vyrefs.transformers
mnt = sys.argv[1]
ours = vyrefs.transformers.from_pretrained(mnt + "/moe")
made, built = len(transformers.CONVERSIONS), len(transformers.BUILDS)
theirs = transformers.TinyMoE.from_pretrained(mnt + "/moe")
x = torch.tensor([[1, 2, 3, 4]])
print("converted", made, "at", (ours.vyrefs_converted or "").replace(mnt, "MNT"), "equal", torch.equal(ours(x), theirs(x)),
      "built", built)
PY
	}
	save_moe 1
	assertEquals "the first attach converts (a model built for the files, one for the copy)" \
		"converted 1 at MNT/moe/vyrefs-converted equal True built 2" "$(attach)"
	local maps0
	maps0=$(stat_of maps)
	assertEquals "the next process uses the kept copy, one model built" \
		"converted 0 at MNT/moe/vyrefs-converted equal True built 1" "$(attach)"
	# The copy mapped, not the files: one file ours, one the stand-in's own load.
	assertEquals "the next process maps the copy, not the files" 2 $(($(stat_of maps) - maps0))
	assertTrue "a directory users see" "[ -f '$MNT/moe/vyrefs-converted/model.safetensors' ]"
	save_moe 2
	assertEquals "a source rewritten: made again, never the stale one" \
		"converted 1 at MNT/moe/vyrefs-converted equal True built 2" "$(attach)"
	rm -r "$MNT/moe/vyrefs-converted" || fail "rm -r"
	attach >"$MNT/a.out" & one=$!
	attach >"$MNT/b.out"
	wait $one
	assertEquals "two at once: made once" 1 "$(cat "$MNT/a.out" "$MNT/b.out" | awk '{ n += $2 } END { print n }')"
	assertEquals "both equal" 2 "$(grep -c 'equal True' "$MNT/a.out" "$MNT/b.out" | awk -F: '{ n += $2 } END { print n }')"
	rm -rf "$MNT/moe" "$MNT"/?.out
	assertEquals "nothing left" 0 "$(stat_of resident_bytes)"
}

# transformers' conversion out of device memory (a converted model larger
# than the GPU it is made on): a MemoryError that names the GPU and says
# what to do, no half-made copy left, nothing mapped.
test_a_conversion_out_of_device_memory_says_what_to_do() {
	needs_torch || return 0
	save_moe 3
	out=$(STANDIN_OOM=1 PYTHONPATH="$PWD/tests/client/standin:$PYTHONPATH" py 2>&1 <<'PY'
import sys, vyrefs.transformers
try:
    vyrefs.transformers.from_pretrained(sys.argv[1] + "/moe")
    print("no error")
except MemoryError as e:
    print(type(e).__name__, str(e).replace(sys.argv[1], "MNT"))
PY
)
	assertContains "$out" "MemoryError vyrefs: transformers converts MNT/moe at load, and its converted copy is made beside the files (on this device)"
	assertContains "$out" "which has no room for it: CUDA out of memory. Tried to allocate 2.00 GiB (stand-in) (Fix: "
	assertEquals "no copy, no half-made one (the lock stays, as after any conversion)" ".vyrefs-converted.lock config.json model.safetensors" "$(ls -A "$MNT/moe" | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "nothing mapped" 0 "$(stat_of mapped_bytes)"
	rm -rf "$MNT/moe"
}

# Files on two GPUs that transformers converts: the converted model is
# made spread as they are. Where each unit goes is a share of bytes (a
# conversion renames), in the files' order of GPUs, a tied unit with its
# tie; on one device, no map (converted there, as before). Fake tensors:
# the host has no GPU (gpu_devices_test runs it on two).
test_a_conversion_of_files_on_two_gpus_is_spread_as_they_are() {
	needs_torch || return 0
	out=$(py <<'PY'
import torch, vyrefs.placement as p
class Fake:
    def __init__(self, dev, n): self.device, self.n = torch.device(dev), n
    def numel(self): return self.n
    def element_size(self): return 1
class M(torch.nn.Module):
    _no_split_modules = ["Linear"]
    def __init__(self):
        super().__init__()
        for name in "abcd":
            setattr(self, name, torch.nn.Linear(10, 10, bias=False, device="meta"))
        self.head = torch.nn.Linear(10, 10, bias=False, device="meta")
        self.head.weight = self.a.weight
m = M()
x = Fake("cuda:1", 300)
sd = {"x": x, "x.tied": x, "y": Fake("cuda:0", 100), "z": Fake("cuda:1", 200)}  # a tied name: counted once
print(p.spread_like(m, sd))
print(p.spread_like(m, {"x": Fake("cuda:0", 3), "y": Fake("cuda:0", 4)}), p.spread_like(m, {"x": Fake("cpu", 3)}))
PY
)
	assertEquals "{'a': 1, 'b': 1, 'c': 1, 'd': 0, 'head': 1}
None None" "$out"
}

# A model transformers keeps partly in float32 (T5's wo), saved in
# float32 and attached in bfloat16: the first attach converts with no
# model built for the files first (the class says it keeps a module), and
# the next process finds the copy current (a build writes its dtype into
# the config: the copy's identity is taken before any build).
test_a_model_kept_partly_in_float32_converts_once_and_builds_once() {
	needs_torch || return 0
	local moe="$PWD/tests/client/standin:$PYTHONPATH"
	attach() { PYTHONPATH=$moe py <<'PY'
import sys, torch, transformers, vyrefs.transformers
mnt = sys.argv[1]
ours = vyrefs.transformers.from_pretrained(mnt + "/keep", dtype=torch.bfloat16)
made, built = len(transformers.CONVERSIONS), len(transformers.BUILDS)
theirs = transformers.TinyKeep.from_pretrained(mnt + "/keep", torch_dtype=torch.bfloat16)
x = torch.tensor([[1, 2, 3, 4]])
print("converted", made, "built", built, "equal", torch.equal(ours(x), theirs(x)), "head", ours.head.weight.dtype,
      "emb", ours.emb.weight.dtype)
PY
	}
	PYTHONPATH=$moe py <<'PY' || fail "save"
import sys, torch, transformers, vyrefs.torch
mnt = sys.argv[1]
g = torch.Generator().manual_seed(3)
vyrefs.torch.save({"emb.weight": torch.randn(50, 8, generator=g), "head.weight": torch.randn(50, 8, generator=g)},
                  mnt + "/keep")
transformers.Config(vocab=50, d=8, tie=False, architectures=["TinyKeep"]).save_pretrained(mnt + "/keep")
PY
	assertEquals "the first attach converts, one model built" \
		"converted 1 built 1 equal True head torch.float32 emb torch.bfloat16" "$(attach)"
	assertEquals "the next process: the copy, one model built" \
		"converted 0 built 1 equal True head torch.float32 emb torch.bfloat16" "$(attach)"
	rm -rf "$MNT/keep"
	assertEquals "nothing left" 0 "$(stat_of resident_bytes)"
}

# The conversion step for a program's own loader (issue "families"):
# vyrefs.transformers.converted_state_dict gives transformers' converted
# tensors, and vyrefs.derived.keep a loader's own conversion, each kept
# beside the source under its own name, attached by vyrefs.torch.attach,
# converted once, again when the source or the identity changed.
test_the_conversion_step_is_there_for_a_programs_own_loader() {
	needs_torch || return 0
	local moe="$PWD/tests/client/standin:$PYTHONPATH"
	own() { PYTHONPATH=$moe py "$1" <<'PY'
import sys, torch, transformers, vyrefs.derived, vyrefs.torch, vyrefs.transformers
mnt, version = sys.argv[1], sys.argv[2]
calls = []
def fuse(sd):  # the loader's own conversion: the experts stacked
    calls.append(1)
    return {"emb.weight": sd["emb.weight"], "head.weight": sd["head.weight"],
            "experts_w": torch.stack([sd["experts.%d.w" % i] for i in range(4)])}
kept = vyrefs.derived.keep(mnt + "/moe", fuse, {"loader": "mine", "version": version}, "mine")
cfg = transformers.AutoConfig.from_pretrained(mnt + "/moe")
with vyrefs.torch.empty_weights():
    model = transformers.TinyMoE(cfg)
vyrefs.torch.attach(model, kept)
theirs_sd = vyrefs.transformers.converted_state_dict(mnt + "/moe")
theirs = transformers.TinyMoE.from_pretrained(mnt + "/moe")
x = torch.tensor([[1, 2, 3, 4]])
print("own", len(calls), "transformers", len(transformers.CONVERSIONS) - 1, "equal", torch.equal(model(x), theirs(x)),
      "same", sorted(theirs_sd) == sorted(kept) and all(torch.equal(theirs_sd[k], kept[k]) for k in kept))
PY
	}
	save_moe 1
	assertEquals "converted once each" "own 1 transformers 1 equal True same True" "$(own 1)"
	assertEquals "kept for the next process" "own 0 transformers 0 equal True same True" "$(own 1)"
	assertTrue "each under its own name" "[ -f '$MNT/moe/vyrefs-converted-mine/model.safetensors' ] && [ -f '$MNT/moe/vyrefs-converted/model.safetensors' ]"
	assertEquals "another identity: converted again" "own 1 transformers 0 equal True same True" "$(own 2)"
	save_moe 2
	assertEquals "a source rewritten: both again" "own 1 transformers 1 equal True same True" "$(own 2)"
	err=$(PYTHONPATH=$moe py <<'PY' 2>&1
import sys, vyrefs.derived
vyrefs.derived.keep(sys.argv[1] + "/moe", lambda sd: dict(sd), {}, "../x")
PY
)
	assertContains "a name is one word" "$err" "Fix: name it after your loader"
	# A quantized checkpoint transformers cannot load here: said, with the
	# package it names and the quantization, nothing left behind. Its
	# quantizer's check fails (fp8): before any model is built; its own
	# load fails (gptq, which no quantizer here handles): no half-made copy.
	quant() { PYTHONPATH=$moe py "$1" "$2" <<'PY' 2>&1
import sys, json, transformers, vyrefs.transformers
d = sys.argv[1] + "/moe"
cfg = json.load(open(d + "/config.json"))
cfg.update(architectures=[sys.argv[3]], quantization_config={"quant_method": sys.argv[2]})
json.dump(cfg, open(d + "/config.json", "w"))
try:
    vyrefs.transformers.from_pretrained(d)
except ImportError as e:
    print(e)
print("built", len(transformers.BUILDS))
PY
	}
	err=$(quant fp8 TinyMoE)
	assertContains "$err" "transformers cannot load $MNT/moe on this machine"
	assertContains "$err" "requires the kernels package"
	assertContains "$err" "the checkpoint is quantized: fp8"
	assertContains "refused before any model is built" "$err" "built 0"
	err=$(quant gptq TinyQuant)
	assertContains "$err" "transformers cannot load $MNT/moe on this machine"
	assertContains "$err" "requires the optimum package"
	assertContains "$err" "the checkpoint is quantized: gptq"
	assertContains "its own load tried: a model was built for the files" "$err" "built 1"
	assertFalse "no half-made copy" "ls -a '$MNT/moe' | grep -q vyrefs-tmp"
	rm -rf "$MNT/moe"
	assertEquals "nothing left" 0 "$(stat_of resident_bytes)"
}

# A checkpoint saved quantized (the stand-in's "int8": an int8 weight and
# its float32 scale, as fine-grained FP8 stores a float8 weight and its
# block scales): built with transformers' quantizer, its stored tensors
# attach as they are (no dequantized copy, nothing converted), and it
# computes what the same model loaded by copy computes. A dtype asked
# converts only what is not quantized.
test_a_quantized_checkpoint_attaches_its_stored_tensors_as_they_are() {
	needs_torch || return 0
	out=$(PYTHONPATH="$PWD/tests/client/standin:$PYTHONPATH" py <<'PY'
import os, sys, torch, transformers, transformers.quantizers as tq, vyrefs.torch, vyrefs.transformers
mnt = sys.argv[1]
cfg = transformers.Config(vocab=50, d=8, tie=False, architectures=["TinyLM"], quantization_config={"quant_method": "int8"})
g = torch.Generator().manual_seed(5)
t = {"emb.weight": torch.randn(50, 8, generator=g), "head.weight": torch.randn(50, 8, generator=g),
     "lin.weight": torch.randint(-127, 128, (8, 8), generator=g, dtype=torch.int8),
     "lin.weight_scale_inv": torch.rand(8, 1, generator=g), "lin.bias": torch.randn(8, generator=g)}
vyrefs.torch.save(t, mnt + "/q")
cfg.save_pretrained(mnt + "/q")
ref = transformers.TinyLM(cfg)
ref.lin = tq.QLinear(8, 8)
ref.load_state_dict(t)
x = torch.tensor([[1, 2, 3, 4]])
ours = vyrefs.transformers.from_pretrained(mnt + "/q")
print("converted", ours.vyrefs_converted, "copied", ours.vyrefs_copied_bytes, "quantized", ours.is_quantized,
      "after-load", len(tq.POSTPROCESSED), "dtypes", ours.lin.weight.dtype, ours.lin.weight_scale_inv.dtype,
      "equal", torch.equal(ours(x), ref(x)), "left", sorted(os.listdir(mnt + "/q")))
half = vyrefs.transformers.from_pretrained(mnt + "/q", dtype=torch.float64)
print("asked float64:", half.emb.weight.dtype, half.lin.bias.dtype, half.lin.weight.dtype, half.lin.weight_scale_inv.dtype,
      "copied", half.vyrefs_copied_bytes)
print("replaced with", sorted(tq.PREPROCESSED[-1]))
PY
)
	assertEquals "attached as stored" "converted None copied 0 quantized True after-load 1 dtypes torch.int8 torch.float32 equal True left ['config.json', 'model.safetensors']" "$(echo "$out" | head -n 1)"
	assertEquals "a dtype converts what is not quantized" "asked float64: torch.float64 torch.float64 torch.int8 torch.float32 copied 6464" "$(echo "$out" | sed -n 2p)"
	# (6464: emb and head 50x8 and the bias 8, as float64.)
	assertEquals "the quantizer is told the config, dtype, placement and fp32-kept modules" \
		"replaced with ['config', 'device_map', 'dtype', 'keep_in_fp32_modules']" "$(echo "$out" | sed -n 3p)"
	rm -rf "$MNT/q"
	# dtype "auto" is the config's: a file whose header lists the float32
	# scale first (as safetensors' own writer orders F32 before BF16)
	# still gives a float64 model with no copy. A file holding a float
	# where the config says int8 is refused, nothing left mapped.
	out=$(PYTHONPATH="$PWD/tests/client/standin:$PYTHONPATH" py <<'PY' 2>&1
import json, os, sys, torch, transformers, vyrefs.transformers
mnt = sys.argv[1]
def write(d, tensors):  # a safetensors file, its header in this order
    os.makedirs(d)
    header, data = {}, b""
    for k, t in tensors.items():
        b = t.numpy().tobytes()
        header[k] = {"dtype": {torch.float64: "F64", torch.float32: "F32", torch.int8: "I8"}[t.dtype],
                     "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(d + "/model.safetensors", "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)
    transformers.Config(vocab=50, d=8, tie=False, architectures=["TinyLM"], torch_dtype="float64",
                        quantization_config={"quant_method": "int8"}).save_pretrained(d)
g = torch.Generator().manual_seed(6)
t = {"lin.weight_scale_inv": torch.rand(8, 1, generator=g), "emb.weight": torch.randn(50, 8, generator=g).double(),
     "head.weight": torch.randn(50, 8, generator=g).double(), "lin.bias": torch.randn(8, generator=g).double(),
     "lin.weight": torch.randint(-127, 128, (8, 8), generator=g, dtype=torch.int8)}
write(mnt + "/q1", t)
m = vyrefs.transformers.from_pretrained(mnt + "/q1")
print("auto:", m.emb.weight.dtype, m.lin.bias.dtype, m.lin.weight.dtype, m.lin.weight_scale_inv.dtype,
      "copied", m.vyrefs_copied_bytes)
t["lin.weight"] = torch.randn(8, 8, generator=g)
write(mnt + "/q2", t)
try:
    vyrefs.transformers.from_pretrained(mnt + "/q2")
except ValueError as e:
    print(e)
PY
)
	assertContains "auto: the config's dtype" "$out" "auto: torch.float64 torch.float64 torch.int8 torch.float32 copied 0"
	assertContains "$out" "vyrefs: the files do not hold the quantized tensors their config describes: lin.weight (the files' torch.float32, the model's torch.int8)"
	assertContains "$out" "(Fix: save the model again with its quantizer"
	rm -rf "$MNT/q1" "$MNT/q2"
	assertEquals "nothing left" 0 "$(stat_of resident_bytes)"
}

. tests/shunit.sh
