/* Launch dimensions (ctl/dims.c): n=COUNT with the occupancy answer, and
 * without one (the host backend's fixed answer); grid=auto caps the grid;
 * explicit grid and block pass through; every limit is refused with a Fix. */
#include "ctl/dims.h"
#include "ctl/parse.h"
#include "tests/unit/support.h"

static vy_device_info dev = {.multiprocessors = 132,
			     .max_threads_per_block = 1024,
			     .max_block = {1024, 1024, 64},
			     .max_grid = {2147483647, 65535, 65535}};

/* The dims `text` (one launch) gets, or the error. */
static vy_err dims(const char *text, const vy_function_info *info, unsigned grid[3], unsigned block[3], vy_error *e)
{
	vy_ctl_plan plan;
	size_t used;
	vy_ctl_error perr;
	vy_err rc = vy_ctl_parse(text, strlen(text), 1, &plan, &used, &perr);
	if (rc != VY_OK || plan.nsteps != 1) {
		fprintf(stderr, "  '%s' does not parse: %s\n", text, perr.e.msg);
		vy_test_failures++;
		vy_ctl_plan_free(&plan);
		return VY_EINVAL;
	}
	rc = vy_launch_dims(&plan.steps[0], info, &dev, grid, block, e);
	vy_ctl_plan_free(&plan);
	return rc;
}

static void chosen_from_the_occupancy_answer(void)
{
	vy_function_info info = {.max_threads = 1024, .max_dynamic_shared = 0, .occ_block = 768, .occ_grid = 264};
	unsigned g[3], b[3];
	MUST(dims("launch m.k n=1 a\n", &info, g, b, E));
	CHECK(g[0] == 1 && g[1] == 1 && g[2] == 1 && b[0] == 768 && b[1] == 1 && b[2] == 1);
	MUST(dims("launch m.k n=1000003 a\n", &info, g, b, E));
	CHECK_EQ(g[0], 1303); /* ceil(1000003 / 768): one thread per element */
	CHECK_EQ(b[0], 768);
	MUST(dims("launch m.k n=768 a\n", &info, g, b, E));
	CHECK_EQ(g[0], 1);
	MUST(dims("launch m.k n=769 a\n", &info, g, b, E));
	CHECK_EQ(g[0], 2);
	MUST(dims("launch m.k n=1000003 grid=auto a\n", &info, g, b, E));
	CHECK_EQ(g[0], 264); /* one device-filling wave */
	MUST(dims("launch m.k n=1000 grid=auto a\n", &info, g, b, E));
	CHECK_EQ(g[0], 2); /* fewer elements than a wave: no idle blocks */
}

/* The host backend has no occupancy calculator: a fixed answer. */
static void a_fixed_answer_without_one(void)
{
	vy_function_info info = {.max_threads = 1024};
	unsigned g[3], b[3];
	MUST(dims("launch m.k n=1000003 a\n", &info, g, b, E));
	CHECK_EQ(b[0], VY_DIMS_FALLBACK_BLOCK);
	CHECK_EQ(g[0], (1000003 + 255) / 256);
	MUST(dims("launch m.k n=1000003 grid=auto a\n", &info, g, b, E));
	CHECK_EQ(g[0], 132 * VY_DIMS_FALLBACK_BLOCKS_PER_SM);
	info.max_threads = 100; /* a kernel limited below 256: a whole number of warps */
	MUST(dims("launch m.k n=1000 a\n", &info, g, b, E));
	CHECK_EQ(b[0], 96);
	CHECK_EQ(g[0], 11);
}

static void explicit_dims_pass_through(void)
{
	vy_function_info info = {.max_threads = 1024, .max_dynamic_shared = 4096, .occ_block = 768, .occ_grid = 264};
	unsigned g[3], b[3];
	MUST(dims("launch m.k grid=7,2 block=32,4 shared=4K a\n", &info, g, b, E));
	CHECK(g[0] == 7 && g[1] == 2 && g[2] == 1 && b[0] == 32 && b[1] == 4 && b[2] == 1);
}

static void limits_are_refused_with_a_fix(void)
{
	vy_function_info info = {.max_threads = 512, .max_dynamic_shared = 0, .occ_block = 1, .occ_grid = 8};
	unsigned g[3], b[3];
	/* 2^40 elements at one thread each need more blocks than the device has. */
	MUST_FAIL(VY_EINVAL, dims("launch m.k n=1T a\n", &info, g, b, E));
	CHECK(strstr(vy_test_last_error.msg, "n=1099511627776 needs 1099511627776 blocks") != NULL);
	CHECK(strstr(vy_test_last_error.msg, "grid=auto") != NULL);
	MUST(dims("launch m.k n=1T grid=auto a\n", &info, g, b, E)); /* a grid-stride kernel: fine */
	CHECK_EQ(g[0], 8);
	MUST_FAIL(VY_EINVAL, dims("launch m.k grid=1 block=1024 a\n", &info, g, b, E));
	CHECK(strstr(vy_test_last_error.msg, "over this kernel's 512") != NULL);
	MUST_FAIL(VY_EINVAL, dims("launch m.k grid=1 block=1,1,65 a\n", &info, g, b, E));
	MUST_FAIL(VY_EINVAL, dims("launch m.k grid=1,65536 block=1 a\n", &info, g, b, E));
	MUST_FAIL(VY_EINVAL, dims("launch m.k grid=1 block=1 shared=1 a\n", &info, g, b, E));
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(chosen_from_the_occupancy_answer),
		TEST_CASE(a_fixed_answer_without_one),
		TEST_CASE(explicit_dims_pass_through),
		TEST_CASE(limits_are_refused_with_a_fix),
	};
	return vy_test_main("ctl_dims", cases, sizeof(cases) / sizeof(cases[0]));
}
