/* libFuzzer target for the control language parser: any bytes must parse
 * or be refused, never crash, leak or break the parser's promises. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	vy_ctl_plan plan;
	vy_ctl_error err;
	size_t used = 0;
	vy_err rc = vy_ctl_parse((const char *)data, size, 1, &plan, &used, &err);
	if (used > size)
		abort();
	if (rc == VY_OK) {
		/* Every group's steps lie inside the plan; every step names
		 * what it needs. */
		for (size_t g = 0; g < plan.ngroups; g++)
			if (plan.groups[g].first + plan.groups[g].count > plan.nsteps)
				abort();
		for (size_t i = 0; i < plan.nsteps; i++) {
			const vy_ctl_step *s = &plan.steps[i];
			if (!s->path && s->kind != VY_STEP_LAUNCH)
				abort();
			/* A launch has grid= and block=, or n=COUNT for vyrefs to
			 * choose them (ctl/dims.c). */
			if (s->kind == VY_STEP_LAUNCH &&
			    (!s->module || !s->entry || (!s->has_count && (s->grid[0] == 0 || s->block[0] == 0))))
				abort();
		}
		(void)vy_ctl_plan_steps(&plan);
	} else if (!strstr(err.e.msg, "(Fix: ")) {
		abort(); /* every refusal says what to do */
	}
	vy_ctl_plan_free(&plan);
	(void)vy_ctl_parse_leftover((const char *)data, size, 1, &err);
	return 0;
}
