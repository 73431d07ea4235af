"""The helper of tests/client/place_test.sh: safetensors files as their
writers lay them out, and where a mount puts their tensors.

  place_check.py make FILE KIB [split]   a safetensors file of about KIB KiB whose
                                         data starts at 8 mod 16; `split`: its first
                                         8 bytes written alone, as safetensors' own
                                         writer sends a long header
  place_check.py where FILE...           per file: the data section's address mod
                                         4096, the tensors at a multiple of 512 in it
                                         that sit off 512, and misaligned()'s count, on
                                         stdout; its AlignmentWarning, each time, on
                                         stderr (whatever PYTHONWARNINGS says)
"""
import json
import os
import random
import struct
import sys
import warnings


def make(path, kib, split=False):
    rng = random.Random(kib)
    header, off = {}, 0
    sizes = [512 * rng.randint(1, 2 * kib) for _ in range(6)] + [6, 1018]  # two odd tails
    for i, n in enumerate(sizes):
        code, item = ("F16", 2) if n % 4 else ("F32", 4)
        header["t%d" % i] = {"dtype": code, "shape": [n // item], "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text))) % 16)  # the data starts at 8 mod 16, as a writer may leave it
    head = struct.pack("<Q", len(text))
    with open(path, "wb", buffering=0) as f:
        if split:
            f.write(head)
            f.write(text + rng.randbytes(off))
        else:
            f.write(head + text + rng.randbytes(off))


def where(paths):
    import vyrefs
    import vyrefs.safetensors as st
    # The warning is what the test reads: said for every file, whatever the
    # user's or CI's filter (PYTHONWARNINGS=ignore would hide it, error
    # raise it, the default say it once).
    warnings.simplefilter("always", st.AlignmentWarning)
    for p in paths:
        start, entries, _ = st.read_header(p)
        with vyrefs.map(p) as m:
            data = m.ptr + start
            off = sum(1 for _, _, a, b in entries.values() if b > a and a % 512 == 0 and (data + a) % 512)
            print(os.path.basename(p), "data %% 4096 = %d" % (data % 4096), "off 512: %d" % off,
                  "misaligned %d" % st.misaligned(m, start, entries)[0])
            st.say_misaligned(p, m, start, entries, stacklevel=2)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4 and sys.argv[4] == "split")
    else:
        where(sys.argv[2:])
