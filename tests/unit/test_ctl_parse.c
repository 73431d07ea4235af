/* The control language parser: every statement form, every error class,
 * quoting and comments, repeat groups, and text that waits for more. */
#include "ctl/parse.h"
#include "tests/unit/support.h"

#include <math.h>
#include <stdlib.h>

static vy_ctl_plan plan;
static vy_ctl_error perr;
static size_t used;

static vy_err parse(const char *text)
{
	vy_ctl_plan_free(&plan);
	return vy_ctl_parse(text, strlen(text), 1, &plan, &used, &perr);
}

/* The text must be refused at `line` with a message holding `want`. */
static void refused(const char *text, int line, const char *want, int at)
{
	vy_err rc = parse(text);
	if (rc != VY_EINVAL || perr.line != line || !strstr(perr.e.msg, want) || !strstr(perr.e.msg, "(Fix: ") ||
	    used != strlen(text) || plan.nsteps != 0) {
		fprintf(stderr, "  line %d: '%s' gave %s at line %d: %s\n", at, text, vy_err_name(rc), perr.line, perr.e.msg);
		vy_test_failures++;
	}
}

static void launch_with_every_argument_form(void)
{
	CHECK_EQ(parse("launch saxpy.saxpy grid=4096 block=256 y w+4096 f32:2.0 u32:16777216 i32:-5 u64:0x10 i64:-9 "
		       "f64:0.5 size:y \"dir/with space\"\n"),
		 VY_OK);
	CHECK_EQ(used, strlen("launch saxpy.saxpy grid=4096 block=256 y w+4096 f32:2.0 u32:16777216 i32:-5 u64:0x10 "
			      "i64:-9 f64:0.5 size:y \"dir/with space\"\n"));
	CHECK_EQ(plan.nsteps, 1);
	CHECK_EQ(plan.ngroups, 1);
	vy_ctl_step *s = &plan.steps[0];
	CHECK_EQ(s->kind, VY_STEP_LAUNCH);
	CHECK(!strcmp(s->module, "saxpy") && !strcmp(s->entry, "saxpy"));
	CHECK(s->grid[0] == 4096 && s->grid[1] == 1 && s->grid[2] == 1);
	CHECK(s->block[0] == 256 && s->block[1] == 1);
	CHECK_EQ(s->nargs, 10);
	CHECK(s->args[0].kind == VY_ARG_BUFFER && !strcmp(s->args[0].path, "y") && s->args[0].offset == 0);
	CHECK(s->args[1].kind == VY_ARG_BUFFER && !strcmp(s->args[1].path, "w") && s->args[1].offset == 4096);
	float f;
	memcpy(&f, s->args[2].value, 4);
	CHECK(s->args[2].size == 4 && f == 2.0f);
	uint32_t u;
	memcpy(&u, s->args[3].value, 4);
	CHECK_EQ(u, 16777216);
	int32_t i;
	memcpy(&i, s->args[4].value, 4);
	CHECK(i == -5);
	uint64_t u64;
	memcpy(&u64, s->args[5].value, 8);
	CHECK(s->args[5].size == 8 && u64 == 16);
	int64_t i64;
	memcpy(&i64, s->args[6].value, 8);
	CHECK(i64 == -9);
	double d;
	memcpy(&d, s->args[7].value, 8);
	CHECK(d == 0.5);
	CHECK(s->args[8].kind == VY_ARG_SIZE && !strcmp(s->args[8].path, "y"));
	CHECK(!strcmp(s->args[9].path, "dir/with space"));
	CHECK_EQ(parse("launch m.k grid=2,3,4 block=8,8 shared=4K /abs+1K\n"), VY_OK);
	s = &plan.steps[0];
	CHECK(s->grid[1] == 3 && s->grid[2] == 4 && s->block[1] == 8 && s->block[2] == 1 && s->shared == 4096);
	CHECK(!strcmp(s->args[0].path, "abs") && s->args[0].offset == 1024);
}

/* n=COUNT: vyrefs chooses grid and block (ctl/dims.c); grid=auto caps
 * the grid for grid-stride kernels. */
static void launch_with_an_element_count(void)
{
	CHECK_EQ(parse("launch std.fill_f32 n=1000003 y f32:1.5 u64:1000003\n"), VY_OK);
	vy_ctl_step *s = &plan.steps[0];
	CHECK(s->has_count && s->count == 1000003 && !s->grid_auto);
	CHECK_EQ(s->nargs, 3);
	CHECK(!strcmp(s->module, "std") && !strcmp(s->entry, "fill_f32"));
	CHECK_EQ(parse("launch std.sum_f32 out grid=auto x n=1M u64:1048576\n"), VY_OK);
	s = &plan.steps[0];
	CHECK(s->has_count && s->count == 1048576 && s->grid_auto);
	CHECK_EQ(s->nargs, 3); /* out x u64: the keywords are not arguments */
	CHECK_EQ(parse("launch m.k n=0x10 a\n"), VY_OK);
	CHECK_EQ(plan.steps[0].count, 16);
	CHECK_EQ(parse("launch m.k grid=2 block=32 a\n"), VY_OK);
	CHECK(!plan.steps[0].has_count && !plan.steps[0].grid_auto);
}

static void fill_clear_copy_forms(void)
{
	CHECK_EQ(parse("fill a 7\nfill b 0xff 16\nfill c 1 4K 1M\nclear d\ncopy x y\ncopy x y 1 2 3\n"), VY_OK);
	CHECK_EQ(plan.nsteps, 6);
	CHECK_EQ(plan.ngroups, 6);
	vy_ctl_step *s = plan.steps;
	CHECK(s[0].kind == VY_STEP_FILL && s[0].byte == 7 && !s[0].has_offset);
	CHECK(s[1].byte == 255 && s[1].has_offset && s[1].offset == 16 && !s[1].has_length);
	CHECK(s[2].offset == 4096 && s[2].has_length && s[2].length == 1048576);
	CHECK(s[3].kind == VY_STEP_FILL && s[3].byte == 0 && !strcmp(s[3].path, "d"));
	CHECK(s[4].kind == VY_STEP_COPY && !strcmp(s[4].path, "x") && !strcmp(s[4].path2, "y") && !s[4].has_length);
	CHECK(s[5].offset == 1 && s[5].offset2 == 2 && s[5].length == 3 && s[5].has_length);
	CHECK_EQ(s[5].line, 6);
}

static void comments_blanks_and_quotes(void)
{
	CHECK_EQ(parse("# a comment\n\n   \t\nfill \"a # b\" 1 # trailing\nfill \"q\\\"uote\" 2\n"), VY_OK);
	CHECK_EQ(plan.nsteps, 2);
	CHECK(!strcmp(plan.steps[0].path, "a # b"));
	CHECK(!strcmp(plan.steps[1].path, "q\"uote"));
	CHECK_EQ(plan.steps[0].line, 4);
}

static void repeat_groups(void)
{
	CHECK_EQ(parse("fill a 1\nrepeat 1000\nlaunch m.k grid=1 block=1 a\nfill a 2\nend\nclear a\n"), VY_OK);
	CHECK_EQ(plan.ngroups, 3);
	CHECK(plan.groups[1].times == 1000 && plan.groups[1].first == 1 && plan.groups[1].count == 2);
	CHECK_EQ(plan.groups[1].line, 2);
	CHECK_EQ(vy_ctl_plan_steps(&plan), 1 + 2000 + 1);
	CHECK_EQ(parse("repeat 0\nfill a 1\nend\n"), VY_OK);
	CHECK_EQ(vy_ctl_plan_steps(&plan), 0);
}

/* What is not finished waits: a partial line, an open repeat. */
static void unfinished_text_waits(void)
{
	const char *t = "fill a 1\nfill b";
	CHECK_EQ(parse(t), VY_OK);
	CHECK_EQ(plan.nsteps, 1);
	CHECK_EQ(used, strlen("fill a 1\n"));
	t = "fill a 1\nrepeat 3\nfill b 2\n";
	CHECK_EQ(parse(t), VY_OK);
	CHECK_EQ(plan.nsteps, 1); /* the block waits */
	CHECK_EQ(plan.ngroups, 1);
	CHECK_EQ(used, strlen("fill a 1\n"));
	CHECK_EQ(parse("repeat 3\nfill b 2\n"), VY_OK);
	CHECK_EQ(used, 0);
	CHECK_EQ(plan.nsteps, 0);
	/* Across writes: the rest, continued, parses whole. */
	CHECK_EQ(parse("repeat 3\nfill b 2\nend\n"), VY_OK);
	CHECK_EQ(vy_ctl_plan_steps(&plan), 3);
	/* At close, leftovers are an error; blanks and comments are not. */
	vy_ctl_error le;
	CHECK_EQ(vy_ctl_parse_leftover("fill a", 6, 4, &le), VY_EINVAL);
	CHECK(strstr(le.e.msg, "unfinished") && le.line == 4);
	CHECK_EQ(vy_ctl_parse_leftover("repeat 2\nfill a 1\n", 18, 1, &le), VY_EINVAL);
	CHECK_EQ(vy_ctl_parse_leftover("  # only a comment\n\n", 20, 1, &le), VY_OK);
}

static void every_error_class(void)
{
	refused("frobnicate a\n", 1, "unknown statement 'frobnicate'", __LINE__);
	refused("fill a 1\nfill a 256\n", 2, "bad byte '256'", __LINE__);
	refused("fill a x\n", 1, "bad byte 'x'", __LINE__);
	refused("fill a 1 -4\n", 1, "bad offset '-4'", __LINE__);
	refused("fill a 1 0 1.5\n", 1, "bad length '1.5'", __LINE__);
	refused("fill a\n", 1, "fill takes", __LINE__);
	refused("clear\n", 1, "clear takes one path", __LINE__);
	refused("copy a\n", 1, "copy takes", __LINE__);
	refused("copy a b 1 2\n", 1, "copy takes", __LINE__);
	refused("copy a b 1 x 3\n", 1, "bad number", __LINE__);
	refused("repeat 2\nrepeat 3\n", 2, "repeat inside repeat", __LINE__);
	refused("repeat x\n", 1, "bad repeat", __LINE__);
	refused("repeat -1\n", 1, "bad repeat", __LINE__);
	refused("end\n", 1, "end without repeat", __LINE__);
	refused("repeat 1\nend now\n", 2, "end takes nothing", __LINE__);
	refused("launch\n", 1, "needs a MODULE.ENTRY", __LINE__);
	refused("launch saxpy grid=1 block=1\n", 1, "not MODULE.ENTRY", __LINE__);
	refused("launch .k grid=1 block=1\n", 1, "not MODULE.ENTRY", __LINE__);
	refused("launch m.k block=1\n", 1, "needs grid= and block=", __LINE__);
	refused("launch m.k a\n", 1, "needs grid= and block=, or n=COUNT", __LINE__);
	refused("launch m.k n=0 a\n", 1, "bad n '0'", __LINE__);
	refused("launch m.k n= a\n", 1, "bad n ''", __LINE__);
	refused("launch m.k n=-5 a\n", 1, "bad n '-5'", __LINE__);
	refused("launch m.k n=lots a\n", 1, "bad n 'lots'", __LINE__);
	refused("launch m.k n=18446744073709551616 a\n", 1, "bad n", __LINE__);
	refused("launch m.k n=10 grid=4 a\n", 1, "n= with grid=", __LINE__);
	refused("launch m.k n=10 block=32 a\n", 1, "n= with block=", __LINE__);
	refused("launch m.k n=10 grid=auto block=32 a\n", 1, "n= with block=", __LINE__);
	refused("launch m.k n=10 shared=1K a\n", 1, "n= with shared=", __LINE__);
	refused("launch m.k grid=auto block=32 a\n", 1, "grid=auto needs n=COUNT", __LINE__);
	refused("launch m.k grid=auto\n", 1, "grid=auto needs n=COUNT", __LINE__);
	refused("launch m.k grid=0 block=1\n", 1, "bad grid '0'", __LINE__);
	refused("launch m.k grid=1,2,3,4 block=1\n", 1, "bad grid", __LINE__);
	refused("launch m.k grid=1, block=1\n", 1, "bad grid", __LINE__);
	refused("launch m.k grid=1 block=4294967296\n", 1, "bad block", __LINE__);
	refused("launch m.k grid=1 block=1 shared=lots\n", 1, "bad shared", __LINE__);
	refused("launch m.k grid=1 block=1 u16:3\n", 1, "unknown argument type", __LINE__);
	refused("launch m.k grid=1 block=1 u32:4294967296\n", 1, "bad number '4294967296' for u32", __LINE__);
	refused("launch m.k grid=1 block=1 i32:2147483648\n", 1, "for i32", __LINE__);
	refused("launch m.k grid=1 block=1 i64:-9223372036854775809\n", 1, "for i64", __LINE__);
	refused("launch m.k grid=1 block=1 f32:1e39\n", 1, "for f32", __LINE__);
	refused("launch m.k grid=1 block=1 f64:abc\n", 1, "for f64", __LINE__);
	refused("launch m.k grid=1 block=1 u32:\n", 1, "for u32", __LINE__);
	refused("launch m.k grid=1 block=1 size:\n", 1, "empty path", __LINE__);
	refused("fill \"open 1\n", 1, "unterminated quote", __LINE__);
	refused("fill / 1\n", 1, "empty path", __LINE__);
	/* One bad line refuses the whole text: nothing of it runs. */
	refused("fill a 1\nclear b\nbogus\n", 3, "unknown statement", __LINE__);
	vy_ctl_plan_free(&plan);
}

static void extremes_do_not_break_it(void)
{
	/* 256 arguments fit; 257 do not. */
	char *text = malloc(8 * 300 + 64);
	CHECK(text != NULL);
	if (!text)
		return;
	strcpy(text, "launch m.k grid=1 block=1");
	for (int i = 0; i < 256; i++)
		strcat(text, " u32:1");
	strcat(text, "\n");
	CHECK_EQ(parse(text), VY_OK);
	CHECK_EQ(plan.steps[0].nargs, 256);
	text[strlen(text) - 1] = '\0';
	strcat(text, " u32:1\n");
	CHECK_EQ(parse(text), VY_EINVAL);
	free(text);
	CHECK_EQ(parse("repeat 18446744073709551615\nfill a 1\nfill b 1\nend\n"), VY_OK);
	CHECK_EQ(vy_ctl_plan_steps(&plan), UINT64_MAX); /* saturates, no wrap */
	vy_ctl_plan_free(&plan);
	CHECK_EQ(vy_ctl_parse("fill a 1\n\0x\n", 12, 1, &plan, &used, &perr), VY_EINVAL);
	vy_ctl_plan_free(&plan);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(launch_with_every_argument_form),
		TEST_CASE(launch_with_an_element_count),
		TEST_CASE(fill_clear_copy_forms),
		TEST_CASE(comments_blanks_and_quotes),
		TEST_CASE(repeat_groups),
		TEST_CASE(unfinished_text_waits),
		TEST_CASE(every_error_class),
		TEST_CASE(extremes_do_not_break_it),
	};
	return vy_test_main("ctl_parse", cases, sizeof(cases) / sizeof(cases[0]));
}
