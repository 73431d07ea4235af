#!/usr/bin/env python3
"""The tree's two layout rules (the project's standards): no circle between
files, and no .c or .h file over 800 lines.

A file calls another when it names a function, global variable, type or
struct that the other alone defines, not static (read with Universal
Ctags); a header's static inline functions are its own, so naming one calls
that header. A .c and the .h of the same name are one file here; what a
header names is its .c files' business (one header may declare a family of
.c files, as core/store.h does), so only .c files make calls. This is the
rule of ../shared/tools/circles.py. Prints each circle with one name that makes
each of its steps, each file over the limit, and a last line; exits 1 on
either, 2 when it cannot read the tree.

usage: tools/layout_check.py [--max N] [--root DIR] [FOLDER...]
  (default: every top-level folder of DIR with .c files, but tests, bench,
  tools and build folders)."""
import os
import re
import subprocess
import sys
from collections import defaultdict

SKIP = {"tests", "bench", "tools", "kernels", "docs", "scripts"}


def usage(msg):
    print("layout_check: %s (Fix: tools/layout_check.py [--max N] [--root DIR] [FOLDER...])" % msg, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    limit, root, folders = 800, ".", []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--max", "--root"):
            if i + 1 >= len(argv):
                usage("%s needs a value" % a)
            if a == "--max":
                if not argv[i + 1].isdigit():
                    usage("--max takes a number of lines, not '%s'" % argv[i + 1])
                limit = int(argv[i + 1])
            else:
                root = argv[i + 1]
            i += 2
        elif a.startswith("-"):
            usage("unknown option '%s'" % a)
        else:
            folders.append(a.rstrip("/"))
            i += 1
    return limit, root, folders


def source_files(root, folders):
    if not folders:
        folders = sorted(d for d in os.listdir(root)
                         if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
                         and d not in SKIP and not d.startswith("build")
                         and any(f.endswith(".c") for f in os.listdir(os.path.join(root, d))))
    files = []
    for d in folders:
        path = os.path.join(root, d)
        if not os.path.isdir(path):
            usage("no folder '%s' under %s" % (d, root))
        files += [os.path.join(d, f) for f in sorted(os.listdir(path)) if f.endswith((".c", ".h"))]
    return files


def definitions(root, files):
    """name -> the one file that defines it (not static; a type, a struct
    or a header's static inline function counts), and the (name, file)
    pairs a .c file defines static: there the name is the file's own."""
    try:
        out = subprocess.run(["ctags", "-x", "--c-kinds=fvts", "--extras=+F", "--language-force=C"] + files,
                             cwd=root, capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        usage("ctags is not installed (Fix: apt-get install universal-ctags)")
    except subprocess.CalledProcessError as err:
        usage("ctags failed: %s" % err.stderr.strip())
    owners = defaultdict(set)
    static = set()
    for line in out.splitlines():
        # NAME KIND LINE FILE TEXT
        parts = line.split(None, 4)
        if len(parts) < 5 or parts[1] not in ("function", "variable", "typedef", "struct"):
            continue
        name, _, _, path, text = parts
        # A type a .c file defines is its own, as a static function is.
        local = parts[1] in ("typedef", "struct") or re.match(r"\s*static\b", text)
        if local and path.endswith(".c"):
            static.add((name, path))
            continue
        if re.match(r"\s*extern\b", text):
            continue
        owners[name].add(path)
    return {name: next(iter(paths)) for name, paths in owners.items() if len(paths) == 1}, static


# Comments, strings and character constants name nothing.
NOISE = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def unit(path):
    return path[:-2]


def calls(root, files, owner, static):
    """unit -> {unit it calls: one name that makes the call}; and line counts."""
    edges = defaultdict(dict)
    lines = {}
    for path in files:
        with open(os.path.join(root, path), errors="replace") as f:
            text = f.read()
        lines[path] = text.count("\n")
        if path.endswith(".h"):
            continue
        for name in sorted(set(IDENT.findall(NOISE.sub(" ", text)))):
            other = owner.get(name)
            if other and unit(other) != unit(path) and (name, path) not in static:
                edges[unit(path)].setdefault(unit(other), name)
    return edges, lines


def circles(nodes, edges):
    """Strongly connected components of two or more units (Tarjan, without
    recursion)."""
    index, low, on, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            step = next(it, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter
                    counter += 1
                    stack.append(step)
                    on.add(step)
                    work.append((step, iter(sorted(edges.get(step, {})))))
                elif step in on:
                    low[v] = min(low[v], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def main():
    limit, root, folders = parse_args(sys.argv[1:])
    files = source_files(root, folders)
    if not files:
        usage("no .c or .h files under %s" % root)
    owner, static = definitions(root, files)
    edges, lines = calls(root, files, owner, static)
    found = circles(sorted({unit(p) for p in files}), edges)
    for comp in found:
        members = set(comp)
        steps = ["%s -> %s (%s)" % (a, b, name) for a in comp for b, name in sorted(edges[a].items()) if b in members]
        print("circle of %d files: %s" % (len(comp), " ".join(comp)))
        for s in steps:
            print("  " + s)
    long_files = sorted((p for p, n in lines.items() if n > limit), key=lambda p: -lines[p])
    for p in long_files:
        print("over %d lines: %s (%d)" % (limit, p, lines[p]))
    if found:
        print("Fix: move what one file of each circle calls into a file below both, or hand it in as a "
              "function pointer (fs->socket_name, vy_acl_caller)")
    if long_files:
        print("Fix: split each long file along its seams (as core/store.c and core/store_shape.c)")
    biggest = sorted(lines, key=lambda p: -lines[p])[:3]
    print("layout: %d files, %d circles, %d over %d lines; largest %s" % (
        len(files), len(found), len(long_files), limit, ", ".join("%s %d" % (p, lines[p]) for p in biggest)))
    return 1 if found or long_files else 0


if __name__ == "__main__":
    sys.exit(main())
