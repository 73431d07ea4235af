#!/usr/bin/env python3
"""Every kernel of the std module against numpy, on a mounted vyrefs.

    std_check.py MOUNT GROUP [N ...]

GROUP is fill, iota, arith, convert, reduce, compare or forms (the
n=COUNT forms against explicit grid and block). Each case writes its inputs
into files of the mount, runs one launch through .vyre/ctl, reads the output
back and compares it with what numpy computes here. Output files are filled
with garbage first and carry 64 guard bytes past the last element, so a
kernel that skips elements or writes past n fails. Prints `ok ...` or
`FAIL ...` per case and `N cases, F failed` last; exits 1 on a failure.
"""
import os
import sys

import numpy as np

M = sys.argv[1]
GROUP = sys.argv[2]
SIZES = [int(s) for s in sys.argv[3:]] or [1, 1000003]
CTL = os.path.join(M, ".vyre", "ctl")
GUARD = 64
rng = np.random.default_rng(15)
cases = failed = 0


def path(name):
    return os.path.join(M, name)


def put(name, arr):
    with open(path(name), "wb") as f:
        f.write(np.ascontiguousarray(arr).tobytes())


def blank(name, dtype, n):
    """An output file: garbage, then the guard bytes."""
    size = n * np.dtype(dtype).itemsize + GUARD
    junk = rng.integers(0, 256, size, dtype=np.uint8)
    put(name, junk)
    return junk


def get(name, dtype, n):
    raw = np.fromfile(path(name), dtype=np.uint8)
    return raw[: n * np.dtype(dtype).itemsize].view(dtype), raw[n * np.dtype(dtype).itemsize:]


def last_log():
    with open(os.path.join(M, ".vyre", "log")) as f:
        return f.read().strip().splitlines()[-1]


def run(text):
    """Write one sequence; None when it ran, else why not."""
    fd = os.open(CTL, os.O_WRONLY)
    try:
        os.write(fd, (text + "\n").encode())
        return None
    except OSError as e:
        return "%s: %s" % (e.strerror, last_log())
    finally:
        os.close(fd)


def report(name, why):
    global cases, failed
    cases += 1
    if why:
        failed += 1
        print("FAIL %s: %s" % (name, why))
    else:
        print("ok %s" % name)


def form(n, how):
    """The launch's dimensions: n=COUNT, n=COUNT grid=auto, or explicit."""
    if how == "n":
        return "n=%d" % n
    if how == "auto":
        return "n=%d grid=auto" % n
    return how  # "grid=... block=..."


def same_bits(got, want, nan_too=False):
    """Where got and want differ (as bit patterns; NaNs only by NaN-ness)."""
    if got.dtype.kind == "f" or nan_too:
        with np.errstate(invalid="ignore"):
            gn, wn = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
        gb = got.view(np.dtype("u%d" % got.itemsize))
        wb = want.view(np.dtype("u%d" % want.itemsize))
        bad = ((gb != wb) & ~(gn & wn)) | (gn != wn)
    else:
        bad = got != want
    return np.flatnonzero(bad)


def check_array(name, out, dtype, n, want, junk, half_float=False):
    got, guard = get(out, dtype, n)
    if half_float:  # 16-bit patterns of f16/bf16: compare NaN-ness apart
        want = want.astype(np.uint16)
        gf, wf = f16_or_bf16_isnan(got, half_float), f16_or_bf16_isnan(want, half_float)
        bad = np.flatnonzero(((got != want) & ~(gf & wf)) | (gf != wf))
    else:
        bad = same_bits(got, want.astype(dtype))
    why = None
    if len(bad):
        i = bad[0]
        why = "%d of %d elements differ; first at %d: got %r, want %r" % (len(bad), n, i, got[i], want[i])
    elif not np.array_equal(guard, junk[n * np.dtype(dtype).itemsize:]):
        why = "wrote past element %d" % n
    report(name, why)


def f16_or_bf16_isnan(bits, kind):
    bits = bits.astype(np.uint32)
    if kind == "f16":
        return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)
    return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)


def bf16_value(p):
    """The magnitude of bf16 patterns, as f64 (0x7f80 counts as 2^128)."""
    p = p.astype(np.int64)
    e, m = (p >> 7) & 0xFF, p & 0x7F
    return np.where(e == 0, m * 2.0**-133, (128 + m) * np.exp2((e - 134).astype(np.float64)))


def to_bf16(f32):
    """f32 -> bf16 by choosing the nearer neighbour (ties to the even one):
    an algorithm of its own, not the kernel's bit trick."""
    x = f32.view(np.uint32)
    lo = ((x & 0x7FFFFFFF) >> 16).astype(np.uint32)
    hi = lo + 1
    with np.errstate(invalid="ignore"):
        v = np.abs(f32.astype(np.float64))
        dl, dh = v - bf16_value(lo), bf16_value(hi) - v
    pick = np.where((dh < dl) | ((dh == dl) & (lo % 2 == 1)), hi, lo)
    pick = np.minimum(pick, 0x7F80) | ((x >> 16) & 0x8000)
    nan = np.isnan(f32)
    pick[nan] = 0x7FC0
    return pick.astype(np.uint16)


def to_f16(f32):
    with np.errstate(all="ignore"):
        return f32.astype(np.float16).view(np.uint16)


def floats(n, scale=100.0):
    return (rng.standard_normal(n) * scale).astype(np.float32)


def f32_edge(n):
    """f32 values across f16's and bf16's range, their edges first."""
    edges = np.array([0.1, 0.0, -0.0, 65504, 65519.996, 65520, -65520, 2**-24, 2**-25, 1.5 * 2**-25,
                      2**-25 * 1.0000001, 2**-14, 2**-14 * 0.99, 1.00390625, 1.01171875, 3.3895e38,
                      np.inf, -np.inf, np.nan], dtype=np.float32)
    parts = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32),
             rng.uniform(-70000, 70000, n).astype(np.float32),
             rng.uniform(-1e-4, 1e-4, n).astype(np.float32)]
    mix = np.concatenate([edges, np.stack(parts, 1).reshape(-1)])
    return np.ascontiguousarray(mix[:n])


# ---- groups -------------------------------------------------------------------

def g_fill(n, how="n"):
    for t, dtype, arg, want in [
        ("f32", np.float32, "f32:1.5", np.float32(1.5)),
        ("f64", np.float64, "f64:-2.25", np.float64(-2.25)),
        ("i32", np.int32, "i32:-7", np.int32(-7)),
        ("u32", np.uint32, "u32:4000000000", np.uint32(4000000000)),
        ("i64", np.int64, "i64:-9000000000", np.int64(-9000000000)),
        ("u64", np.uint64, "u64:18000000000000000000", np.uint64(18000000000000000000)),
        ("u8", np.uint8, "u32:200", np.uint8(200)),
    ]:
        junk = blank("y", dtype, n)
        why = run("launch std.fill_%s %s y %s u64:%d" % (t, form(n, how), arg, n))
        if why:
            report("fill_%s n=%d" % (t, n), why)
            continue
        check_array("fill_%s n=%d" % (t, n), "y", dtype, n, np.full(n, want, dtype=dtype), junk)
    for t, ref in [("f16", to_f16), ("bf16", to_bf16)]:
        for v in ["0.1", "-65520", "1e-7", "3.4e38"]:
            junk = blank("y", np.uint16, n)
            why = run("launch std.fill_%s %s y f32:%s u64:%d" % (t, form(n, how), v, n))
            if why:
                report("fill_%s(%s) n=%d" % (t, v, n), why)
                continue
            want = np.full(n, ref(np.array([float(v)], dtype=np.float32))[0], dtype=np.uint16)
            check_array("fill_%s(%s) n=%d" % (t, v, n), "y", np.uint16, n, want, junk, half_float=t)


def g_iota(n, how="n"):
    i = np.arange(n, dtype=np.float64)
    u = np.arange(n, dtype=np.uint64)
    for t, dtype, args, want in [
        ("f32", np.float32, "f32:-3.5 f32:0.1",
         (np.float64(np.float32(-3.5)) + np.float64(np.float32(0.1)) * i).astype(np.float32)),
        ("f64", np.float64, "f64:1e6 f64:-0.1", np.float64(1e6) + np.float64(-0.1) * i),
        ("i32", np.int32, "i32:2147483000 i32:7",
         ((np.uint64(2147483000) + np.uint64(7) * u) & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)),
        ("u32", np.uint32, "u32:5 u32:4294967295",
         ((np.uint64(5) + np.uint64(4294967295) * u) & np.uint64(0xFFFFFFFF)).astype(np.uint32)),
        ("i64", np.int64, "i64:-5 i64:-3000000000", np.int64(-5) + np.int64(-3000000000) * u.astype(np.int64)),
    ]:
        junk = blank("y", dtype, n)
        why = run("launch std.iota_%s %s y %s u64:%d" % (t, form(n, how), args, n))
        if why:
            report("iota_%s n=%d" % (t, n), why)
            continue
        check_array("iota_%s n=%d" % (t, n), "y", dtype, n, want, junk)


def g_arith(n, how="n"):
    for t, dtype in [("f32", np.float32), ("f64", np.float64)]:
        x, y = floats(n).astype(dtype), floats(n).astype(dtype)
        a = dtype(2.5)
        for k, line, want in [
            ("axpy", "y x %s:2.5" % t, a * x + y),  # numpy rounds the product, then the sum
            ("scale", "y %s:2.5" % t, a * y),
            ("add", "z x y", x + y),
            ("mul", "z x y", x * y),
        ]:
            put("x", x)
            yj = np.concatenate([y.view(np.uint8), rng.integers(0, 256, GUARD, dtype=np.uint8)])
            put("y", yj)
            out = "y" if k in ("axpy", "scale") else "z"
            junk = yj if out == "y" else blank("z", dtype, n)
            why = run("launch std.%s_%s %s %s u64:%d" % (k, t, form(n, how), line, n))
            if why:
                report("%s_%s n=%d" % (k, t, n), why)
                continue
            check_array("%s_%s n=%d" % (k, t, n), out, dtype, n, want.astype(dtype), junk)


def g_convert(n, how="n"):
    f32 = f32_edge(n)
    h = (np.arange(n, dtype=np.uint64) * 7919 % 65536).astype(np.uint16)  # every f16/bf16 pattern
    with np.errstate(all="ignore"):
        h_as_f32 = h.view(np.float16).astype(np.float32)
    b_as_f32 = (h.astype(np.uint32) << 16).view(np.float32)
    f64 = np.concatenate([np.array([1e39, -1e39, 1e-50, np.nan, 1 + 2.0**-24, 1 + 3 * 2.0**-24]),
                          rng.standard_normal(n) * 1e3])[:n]
    with np.errstate(all="ignore"):
        f64_f32 = f64.astype(np.float32)
    u8 = rng.integers(0, 256, n, dtype=np.uint8)
    i32 = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    for k, src, odt, want, half in [
        ("f32_to_f16", f32, np.uint16, to_f16(f32), "f16"),
        ("f16_to_f32", h, np.float32, h_as_f32, None),
        ("f32_to_bf16", f32, np.uint16, to_bf16(f32), "bf16"),
        ("bf16_to_f32", h, np.float32, b_as_f32, None),
        ("f16_to_bf16", h, np.uint16, to_bf16(h_as_f32), "bf16"),
        ("bf16_to_f16", h, np.uint16, to_f16(b_as_f32), "f16"),
        ("f32_to_f64", floats(n), np.float64, None, None),
        ("f64_to_f32", f64, np.float32, f64_f32, None),
        ("u8_to_f32", u8, np.float32, u8.astype(np.float32), None),
        ("i32_to_f32", i32, np.float32, i32.astype(np.float32), None),
    ]:
        if want is None:
            want = src.astype(np.float64)
        put("x", src)
        junk = blank("y", odt, n)
        why = run("launch std.%s %s y x u64:%d" % (k, form(n, how), n))
        if why:
            report("%s n=%d" % (k, n), why)
            continue
        check_array("%s n=%d" % (k, n), "y", odt, n, want, junk, half_float=half)


def reduce_cases(n):
    f32 = floats(n)
    f32n = f32.copy()
    if n > 10:
        f32n[n // 3] = np.nan  # min and max pass over NaN
    f64 = rng.standard_normal(n) * 1e3
    i32 = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    fsum = float(np.sum(f32.astype(np.float64)))
    scale = float(np.sum(np.abs(f32.astype(np.float64))))
    return [
        # name, input, out dtype, want, tolerance (0: exact)
        ("sum_f32", f32, np.float32, np.float32(fsum), abs(fsum) * 2**-23 + scale * 1e-12),
        ("min_f32", f32n, np.float32, np.nanmin(f32n), 0),
        ("max_f32", f32n, np.float32, np.nanmax(f32n), 0),
        ("sum_f64", f64, np.float64, np.float64(np.sum(f64)), float(np.sum(np.abs(f64))) * 1e-13),
        ("min_f64", f64, np.float64, np.min(f64), 0),
        ("max_f64", f64, np.float64, np.max(f64), 0),
        ("sum_i32", i32, np.int64, np.int64(sum(int(v) for v in i32.astype(np.int64).tolist())), 0),
        ("min_i32", i32, np.int32, np.min(i32), 0),
        ("max_i32", i32, np.int32, np.max(i32), 0),
    ]


def check_scalar(name, out, dtype, want, tol, junk):
    got, guard = get(out, dtype, 1)
    got = got[0]
    if tol:
        ok = abs(float(got) - float(want)) <= tol
    else:
        ok = got.tobytes() == np.array([want], dtype=dtype).tobytes()
    why = None if ok else "got %r, want %r (tolerance %g)" % (got, want, tol)
    if ok and not np.array_equal(guard, junk[np.dtype(dtype).itemsize:]):
        why = "wrote past the result"
    report(name, why)


def g_reduce(n, how="auto"):
    for k, src, odt, want, tol in reduce_cases(n):
        put("x", src)
        junk = blank("out", odt, 1)
        # Twice in one sequence: the second finds the slots and the
        # count as the first left them.
        line = "launch std.%s %s out x u64:%d" % (k, form(n, how), n)
        why = run(line + "\n" + line)
        if why:
            report("%s n=%d" % (k, n), why)
            continue
        check_scalar("%s n=%d %s" % (k, n, how), "out", odt, want, tol, junk)


def compare_inputs(n, dtype):
    a = floats(n).astype(dtype) if dtype in (np.float32, np.float64) else \
        rng.integers(0, np.iinfo(dtype).max, n, dtype=np.uint64).astype(dtype)
    b = a.copy()
    idx = rng.permutation(n)
    k = min(n, 1000)
    if dtype in (np.float32, np.float64):
        b[idx[:k // 4]] += dtype(0.5)   # beyond tol
        b[idx[k // 4: k // 2]] += dtype(0.1)  # within tol
        if n > 10:
            a[idx[k // 2]] = b[idx[k // 2]] = np.nan  # two NaNs match
            b[idx[k // 2 + 1]] = np.nan  # one does not
            a[idx[k // 2 + 2]] = b[idx[k // 2 + 2]] = np.inf  # equal infinities match
        with np.errstate(invalid="ignore"):
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
            match = (a == b) | (np.isnan(a) & np.isnan(b)) | (d <= 0.25)
        return a, b, int(np.sum(~match))
    b[idx[: k // 2]] ^= 1
    return a, b, int(np.sum(a != b))


def g_compare(n, how="auto"):
    for t, dtype, tol in [("f32", np.float32, " f32:0.25"), ("f64", np.float64, " f64:0.25"),
                          ("u8", np.uint8, ""), ("u32", np.uint32, "")]:
        a, b, want = compare_inputs(n, dtype)
        put("a", a)
        put("b", b)
        junk = blank("out", np.uint64, 1)
        why = run("launch std.compare_%s %s out a b%s u64:%d" % (t, form(n, how), tol, n))
        if why:
            report("compare_%s n=%d" % (t, n), why)
            continue
        check_scalar("compare_%s n=%d" % (t, n), "out", np.uint64, np.uint64(want), 0, junk)


def g_forms(n):
    """Elementwise kernels give the same bytes under every form; exact
    reductions the same result (blocks of 96 and 100 threads leave warps
    part-full; 5000 blocks are more than the 4096 slots)."""
    g = (n + 255) // 256
    elementwise = ["grid=%d block=256" % g, "grid=7 block=96", "grid=3 block=16,4", "n", "auto"]
    x = floats(n)
    put("x", x)
    for k, line, dtype in [("fill_f32", "y f32:3.25", np.float32), ("iota_i32", "y i32:-9 i32:3", np.int32),
                           ("f32_to_bf16", "y x", np.uint16)]:
        outs = []
        for how in elementwise:
            blank("y", dtype, n)
            why = run("launch std.%s %s %s u64:%d" % (k, form(n, how), line, n))
            outs.append(why or get("y", dtype, n)[0].tobytes())
        report("%s n=%d, %d forms alike" % (k, n, len(outs)),
               None if all(o == outs[0] and isinstance(o, bytes) for o in outs) else
               "results differ: %s" % [o if isinstance(o, str) else len(o) for o in outs])
    i32 = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    put("x", i32)
    want = sum(int(v) for v in i32.astype(np.int64).tolist())
    for how in ["grid=%d block=256" % g, "grid=5000 block=100", "grid=1 block=1", "grid=7 block=96",
                "n", "auto"]:
        junk = blank("out", np.int64, 1)
        why = run("launch std.sum_i32 %s out x u64:%d" % (form(n, how), n))
        if why:
            report("sum_i32 n=%d %s" % (n, how), why)
            continue
        check_scalar("sum_i32 n=%d %s" % (n, how), "out", np.int64, np.int64(want), 0, junk)


GROUPS = {"fill": g_fill, "iota": g_iota, "arith": g_arith, "convert": g_convert, "reduce": g_reduce,
          "compare": g_compare, "forms": g_forms}

for n in SIZES:
    GROUPS[GROUP](n)
print("%d cases, %d failed" % (cases, failed))
sys.exit(1 if failed else 0)
