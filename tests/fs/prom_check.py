#!/usr/bin/env python3
"""A strict reader of the Prometheus text exposition format (0.0.4), for
.vyre/metrics, and the check that its counters match .vyre/stats.

  prom_check.py METRICS            parse; exit 1 naming the first fault
  prom_check.py METRICS STATS      also: every stats key has its metric with
                                   the same value (microseconds as seconds)

Beyond the format, it holds vyrefs's own rules: every name starts with
vyrefs_, every family has # HELP and # TYPE before its samples, counters
end in _total, and no name ends in a non-base unit (_us, _ms, _kb, ...)."""
import re
import sys
from decimal import Decimal, InvalidOperation

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
NON_BASE = ("_us", "_ms", "_ns", "_microseconds", "_milliseconds", "_kb", "_mb", "_gb", "_kib", "_mib")


class Fault(Exception):
    pass


def parse_value(s, where):
    if s in ("NaN", "+Inf", "-Inf", "Inf"):
        return s
    if not re.fullmatch(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)", s):
        raise Fault(f"{where}: bad value {s!r}")
    try:
        return Decimal(s)
    except InvalidOperation:
        raise Fault(f"{where}: bad value {s!r}")


def parse_labels(s, where):
    """s is the text between { and }; returns a tuple of (name, value)."""
    labels, i = [], 0
    while i < len(s):
        m = re.match(LABEL + r'="', s[i:])
        if not m:
            raise Fault(f"{where}: bad label at {s[i:]!r}")
        name = s[i:i + m.end() - 2]
        i += m.end()
        value = []
        while True:
            if i >= len(s):
                raise Fault(f"{where}: unterminated label value")
            c = s[i]
            if c == "\\":
                if i + 1 >= len(s) or s[i + 1] not in '\\"n':
                    raise Fault(f"{where}: bad escape in label {name}")
                value.append({"\\": "\\", '"': '"', "n": "\n"}[s[i + 1]])
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise Fault(f"{where}: newline in label value")
            else:
                value.append(c)
                i += 1
        if name in dict(labels):
            raise Fault(f"{where}: label {name} twice")
        labels.append((name, "".join(value)))
        if i < len(s):
            if s[i] != ",":
                raise Fault(f"{where}: expected , after label {name}")
            i += 1
    return tuple(labels)


def parse(text):
    if not text.endswith("\n"):
        raise Fault("the text does not end with a newline")
    helps, types, samples, order, done = {}, {}, {}, [], set()
    current = None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}"
        if line == "":
            raise Fault(f"{where}: empty line")
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (" + NAME + r") (.*)", line)
            if not m:
                if re.match(r"#\s*(HELP|TYPE)\b", line):
                    raise Fault(f"{where}: malformed {line!r}")
                continue  # a plain comment
            kind, name, rest = m.groups()
            if name != current:
                if name in done or name in helps or name in types:
                    raise Fault(f"{where}: family {name} is not contiguous")
                if current is not None:
                    done.add(current)
                current = name
                order.append(name)
            if kind == "HELP":
                if name in helps:
                    raise Fault(f"{where}: second HELP for {name}")
                if "\\" in re.sub(r"\\[\\n]", "", rest):
                    raise Fault(f"{where}: bad escape in HELP of {name}")
                if not rest.strip():
                    raise Fault(f"{where}: empty HELP for {name}")
                helps[name] = rest
            else:
                if name in types:
                    raise Fault(f"{where}: second TYPE for {name}")
                if rest not in TYPES:
                    raise Fault(f"{where}: unknown type {rest!r}")
                if any(s[0] == name for s in samples):
                    raise Fault(f"{where}: TYPE of {name} after its samples")
                types[name] = rest
            continue
        m = re.fullmatch(r"(" + NAME + r")(?:\{(.*)\})? (\S+)(?: (-?\d+))?", line)
        if not m:
            raise Fault(f"{where}: not a sample: {line!r}")
        name, labels, value, _ts = m.groups()
        if name != current:
            raise Fault(f"{where}: sample {name} outside its family (# HELP and # TYPE first)")
        key = (name, parse_labels(labels or "", where))
        if key in samples:
            raise Fault(f"{where}: {name} twice with the same labels")
        samples[key] = parse_value(value, where)
    for name in order:
        if name not in helps or name not in types:
            raise Fault(f"family {name} lacks # HELP or # TYPE")
        if not name.startswith("vyrefs_"):
            raise Fault(f"{name}: no vyrefs_ prefix")
        if name.lower().endswith(NON_BASE) or any(name.lower().endswith(u + "_total") for u in NON_BASE):
            raise Fault(f"{name}: not in a base unit")
        if types[name] == "counter":
            if not name.endswith("_total"):
                raise Fault(f"counter {name} does not end in _total")
        elif name.endswith("_total"):
            raise Fault(f"{name} ends in _total but is a {types[name]}")
        if not any(s[0] == name for s in samples):
            raise Fault(f"family {name} has no samples")
    for (name, _), v in samples.items():
        if types[name] == "counter" and (not isinstance(v, Decimal) or v < 0):
            raise Fault(f"counter {name} is {v}")
    return types, samples


def check_stats(types, samples, stats_text):
    plain = {name: v for (name, labels), v in samples.items() if not labels}
    checked = 0
    for line in stats_text.splitlines():
        key, value = line.split(" ")
        want = Decimal(value)
        if key.endswith("_us"):
            key, want = key[:-3] + "_seconds", want / Decimal(1000000)
        elif key.endswith("_ms"):
            key, want = key[:-3] + "_seconds", want / Decimal(1000)
        for name in ("vyrefs_" + key + "_total", "vyrefs_" + key):
            if name in plain:
                break
        else:
            raise Fault(f"stats key {line.split()[0]} has no metric")
        if plain[name] != want:
            raise Fault(f"{name} is {plain[name]}, .vyre/stats says {want}")
        checked += 1
    return checked


def main(argv):
    try:
        with open(argv[1]) as f:
            types, samples = parse(f.read())
        counters = sum(1 for t in types.values() if t == "counter")
        if len(argv) > 2:
            with open(argv[2]) as f:
                n = check_stats(types, samples, f.read())
            print(f"ok: {len(types)} families, {counters} counters, {n} stats keys match")
        else:
            print(f"ok: {len(types)} families, {counters} counters")
        return 0
    except Fault as e:
        print(f"metrics: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
