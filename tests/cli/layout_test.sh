#!/usr/bin/env bash
# The tree's layout rules (tools/layout_check.py): no circle between files
# and no .c or .h file over 800 lines, on this tree; and the check fails on
# a copy of it given a circle or a long file on purpose. Writes only in its
# own temp dir.
. tests/skip.sh
CHECK=tools/layout_check.py

setUp() {
	scratch=$(mktemp -d)
}

tearDown() {
	rm -rf "$scratch"
}

# copy_tree: the source folders of this tree (.c and .h only) into $scratch.
copy_tree() {
	local d
	for d in */; do
		d=${d%/}
		case "$d" in tests | bench | tools | build*) continue ;; esac
		ls "$d"/*.c >/dev/null 2>&1 || continue
		mkdir -p "$scratch/$d"
		cp "$d"/*.c "$d"/*.h "$scratch/$d/" 2>/dev/null
	done
}

test_this_tree_has_no_circle_and_no_long_file() {
	need ctags python3 || return 0
	out=$(python3 "$CHECK" 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" " 0 circles, 0 over 800 lines;"
}

test_a_circle_made_on_purpose_fails() {
	need ctags python3 || return 0
	copy_tree
	# fs/file.c reaps through the namespace (vy_ns_reap); the namespace
	# calling back into file data closes a circle.
	assertContains "$(cat "$scratch/fs/file.c")" "vy_ns_reap("
	printf '\nvoid vy_layout_test_back(vy_fs *fs, vy_inode *in)\n{\n\tvy_file_drop(fs, in);\n}\n' >>"$scratch/ns/inode.c"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 1 $?
	assertContains "$out" "circle of 2 files: fs/file ns/inode"
	assertContains "$out" "ns/inode -> fs/file (vy_file_drop)"
	assertContains "$out" "fs/file -> ns/inode ("
	assertContains "$out" " 1 circles, 0 over 800 lines;"
	assertContains "$out" "Fix: "
}

test_a_circle_of_three_files_fails() {
	need ctags python3 || return 0
	mkdir -p "$scratch/x"
	printf 'int b(void);\nint a(void) { return b(); }\n' >"$scratch/x/a.c"
	printf 'int c(void);\nint b(void) { return c(); }\n' >"$scratch/x/b.c"
	printf 'int a(void);\nint c(void) { return a(); }\n' >"$scratch/x/c.c"
	printf 'int a(void);\nint d(void) { return a(); }\n' >"$scratch/x/d.c" # calls in, no circle
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 1 $?
	assertContains "$out" "circle of 3 files: x/a x/b x/c"
	assertNotContains "$out" "x/d "
}

test_static_names_and_comments_make_no_call() {
	need ctags python3 || return 0
	mkdir -p "$scratch/x"
	printf 'static int a(void) { return 1; }\nint use_b(void);\nint f(void) { return a(); }\n' >"$scratch/x/a.c"
	printf '/* f() */\nstatic int f(void) { return 2; }\nconst char *s = "f()";\nint use_b(void) { return f(); }\n' >"$scratch/x/b.c"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" " 0 circles,"
}

test_types_and_inline_functions_make_calls() {
	need ctags python3 || return 0
	mkdir -p "$scratch/x"
	# a.c names b.h's type, b.c calls a.h's static inline function
	printf 'typedef struct a_thing { int n; } a_thing;\nstatic inline int a_twice(int n) { return 2 * n; }\n' >"$scratch/x/a.h"
	printf 'typedef struct b_thing { int n; } b_thing;\n' >"$scratch/x/b.h"
	printf '#include "a.h"\n#include "b.h"\nint a_use(b_thing *t) { return t->n; }\n' >"$scratch/x/a.c"
	printf '#include "a.h"\nint b_use(int n) { return a_twice(n); }\n' >"$scratch/x/b.c"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 1 $?
	assertContains "$out" "circle of 2 files: x/a x/b"
	assertContains "$out" "x/a -> x/b (b_thing)"
	assertContains "$out" "x/b -> x/a (a_twice)"
}

test_a_type_of_a_c_file_and_a_header_declaring_others_make_no_call() {
	need ctags python3 || return 0
	mkdir -p "$scratch/x"
	# a.c and b.c each define a struct of the same name for themselves;
	# one header declares both files' functions (a family, as core/store.h).
	printf 'int a_f(void);\nint b_f(void);\n' >"$scratch/x/a.h"
	printf '#include "a.h"\nstruct job { int n; };\nint a_f(void) { struct job j = { 1 }; return j.n; }\n' >"$scratch/x/a.c"
	printf '#include "a.h"\nstruct job { int m; };\nint b_f(void) { struct job j = { 2 }; return j.m + a_f(); }\n' >"$scratch/x/b.c"
	printf 'struct only { int n; };\nint c_f(void) { struct only o = { 3 }; return o.n; }\n' >"$scratch/x/c.c"
	printf 'int only;\nint d_f(void) { return only; }\n' >"$scratch/x/d.c"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 0 $?
	assertContains "$out" " 0 circles,"
}

test_a_file_over_800_lines_fails_and_800_pass() {
	need ctags python3 || return 0
	mkdir -p "$scratch/x"
	for i in $(seq 1 800); do echo "int v$i;"; done >"$scratch/x/ok.c"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 0 $?
	for i in $(seq 1 801); do echo "int w$i;"; done >"$scratch/x/long.h"
	out=$(python3 "$CHECK" --root "$scratch" 2>&1)
	assertEquals "$out" 1 $?
	assertContains "$out" "over 800 lines: x/long.h (801)"
	assertNotContains "$out" "over 800 lines: x/ok.c"
}

test_bad_arguments_say_what_to_do() {
	need python3 || return
	out=$(python3 "$CHECK" --max many 2>&1)
	assertEquals "$out" 2 $?
	assertContains "$out" "Fix: "
	out=$(python3 "$CHECK" --root "$scratch" nosuchfolder 2>&1)
	assertEquals "$out" 2 $?
	assertContains "$out" "no folder 'nosuchfolder'"
}

. tests/shunit.sh
