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
  place_check.py write HOW SRC DST       SRC's bytes into DST as a writer that does not
                                         write from the start would: `sized` sizes DST
                                         (ftruncate) then writes it front to back;
                                         `header-last` sizes it, writes the data, then
                                         the header; `threads` has 8 threads, each on its
                                         own fd, write their eighths, the last eighth's
                                         thread first and each range back to front
  place_check.py save DST                a model's tensors saved by safetensors'
                                         own save_file (exit 3 without torch and
                                         safetensors)
  place_check.py hold FILE               FILE mapped until standard input ends
                                         ("mapped" on stdout once it is)
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


CHUNK = 65536


def write_range(fd, data, lo, hi, backwards=False):
    offs = range(lo, hi, CHUNK)
    for at in reversed(offs) if backwards else offs:
        end = min(at + CHUNK, hi)
        if os.pwrite(fd, data[at:end], at) != end - at:
            raise OSError("short write at %d" % at)


def write(how, src, dst):
    import threading
    data = open(src, "rb").read()
    start = 8 + struct.unpack("<Q", data[:8])[0]
    if how == "threads":
        n = 8
        cuts = [len(data) * i // n for i in range(n + 1)]
        errors = []

        def one(i):
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                write_range(fd, data, cuts[i], cuts[i + 1], backwards=True)
            except OSError as e:
                errors.append(e)
            finally:
                os.close(fd)
        threads = [threading.Thread(target=one, args=(i,)) for i in reversed(range(n))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, len(data))
        if how == "sized":
            write_range(fd, data, 0, len(data))
        else:  # header-last
            write_range(fd, data, start, len(data))
            write_range(fd, data, 0, start)
        if os.environ.get("ARM"):  # place_test's kills: armed between the last write and the close
            open(os.environ["ARM"], "w").close()
    finally:
        os.close(fd)


def save(dst):
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        sys.exit(3)
    g = torch.Generator().manual_seed(7)
    tensors = {"embed.weight": torch.randn(1000, 96, generator=g, dtype=torch.float16),
               "layer.0.weight": torch.randn(96, 96, generator=g),
               "layer.0.bias": torch.randn(96, generator=g),
               "norm.weight": torch.randn(3, generator=g, dtype=torch.bfloat16),
               "head.weight": torch.randn(512, 96, generator=g, dtype=torch.bfloat16)}
    save_file(tensors, dst, metadata={"format": "pt", "note": "x" * 37})


def hold(path):
    import vyrefs
    with vyrefs.map(path):
        print("mapped", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), len(sys.argv) > 4 and sys.argv[4] == "split")
    elif sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "save":
        save(sys.argv[2])
    elif sys.argv[1] == "hold":
        hold(sys.argv[2])
    else:
        where(sys.argv[2:])
