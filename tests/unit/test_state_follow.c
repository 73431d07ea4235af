/* Following a region another writer appends to (state/follow.h), as a
 * standby does: each step hands over exactly the records since the last,
 * a checkpoint makes the next step start afresh from the image, laps of a
 * small ring with checkpoints between steps stay exact, and at a takeover
 * the records after the follower's last are all a successor lacks. */
#include "state/follow.h"
#include "tests/unit/state_support.h"

#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0)

static void model_reset(void *ctx)
{
	state_model *m = ctx;
	*m = (state_model){0};
}

static const vy_state_follow_fns fns = {.reset = model_reset, .section = model_section, .record = model_record};

/* A follower of s, over copies of its fds (the keeper's). */
static void follow_open(const vy_state *s, vy_state_follow *f)
{
	vy_state_fds fds = state_dup_fds(s);
	MUST(vy_state_follow_open(&fds, f, E));
}

static void steps_hand_over_what_is_new(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	vy_state_follow f;
	follow_open(s, &f);
	state_model m = {0};
	MUST(vy_state_follow_step(&f, &fns, &m, E)); /* an empty log */
	CHECK(f.loaded);
	CHECK_EQ(f.seq, 0);
	CHECK_EQ(m.len, 0);
	CHECK(state_append_str(s, 1, 0, "a") && state_append_str(s, 1, 0, "b"));
	MUST(vy_state_follow_step(&f, &fns, &m, E));
	CHECK_STR(m.text, "a,b,");
	CHECK_EQ(f.seq, 2);
	CHECK(state_append_str(s, 1, 0, "c"));
	MUST(vy_state_follow_step(&f, &fns, &m, E));
	CHECK_STR(m.text, "a,b,c,");
	CHECK_EQ(m.records, 3);
	CHECK(!m.bad_order);
	uint64_t steps = f.steps;
	MUST(vy_state_follow_step(&f, &fns, &m, E)); /* nothing new: no step */
	CHECK_EQ(f.steps, steps);
	CHECK_EQ(f.fresh, 1);
	CHECK_EQ(m.records, 3);
	vy_state_follow_close(&f);
	vy_state_close(s);
}

static void checkpoint_starts_afresh(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	vy_state_follow f;
	follow_open(s, &f);
	state_model m = {0}, want = {0};
	CHECK(state_append_str(s, 1, 0, "a") && state_append_str(s, 1, 0, "b"));
	MUST(vy_state_follow_step(&f, &fns, &m, E));
	model_add(&want, "a", 1);
	model_add(&want, "b", 1);
	MUST(state_checkpoint(s, &want, E));
	CHECK(state_append_str(s, 1, 0, "c"));
	MUST(vy_state_follow_step(&f, &fns, &m, E));
	CHECK_EQ(f.fresh, 2);
	CHECK_EQ(m.sections, 1);
	CHECK_STR(m.text, "a,b,c,");
	CHECK_EQ(f.seq, 3);
	CHECK_EQ(f.root.seq, 2);
	vy_state_follow_close(&f);
	vy_state_close(s);
}

/* Laps around a 4096-byte ring with a checkpoint whenever the log asks and
 * a step after every few appends: the follower's model is the writer's. */
static void laps_stay_exact(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	vy_state_follow f;
	follow_open(s, &f);
	state_model m = {0}, want = {0};
	unsigned checkpoints = 0;
	for (unsigned i = 0; i < 400; i++) {
		char p[32];
		int n = snprintf(p, sizeof(p), "rec%u-%.*s", i, (int)(i % 23), "xxxxxxxxxxxxxxxxxxxxxxx");
		if (vy_state_log_wants_checkpoint(s)) {
			MUST(state_checkpoint(s, &want, E));
			checkpoints++;
		}
		CHECK(state_append_str(s, 1, 0, p));
		model_add(&want, p, (size_t)n);
		if (i % 7 == 6) {
			MUST(vy_state_follow_step(&f, &fns, &m, E));
			CHECK_STR(m.text, want.text);
			CHECK_EQ(f.seq, vy_state_log_last_seq(s));
		}
	}
	CHECK(checkpoints >= 5);
	CHECK(!m.bad_order);
	vy_state_follow_close(&f);
	vy_state_close(s);
}

/* The writer dies; a successor adopts the region. The follower's copy is
 * current (the same root), and the records after its last make the rest:
 * the same model a whole load gives. After a checkpoint it is not current. */
static void takeover_applies_the_rest(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	vy_state_follow f;
	follow_open(s, &f);
	state_model m = {0};
	CHECK(state_append_str(s, 1, 0, "a") && state_append_str(s, 1, 0, "b"));
	MUST(vy_state_follow_step(&f, &fns, &m, E));
	CHECK(state_append_str(s, 1, 0, "c") && state_append_str(s, 1, 0, "d"));
	vy_state_fds fds = state_dup_fds(s);
	vy_state *t;
	MUST(vy_state_adopt(&fds, &t, NULL, E));
	CHECK(vy_state_follow_current(&f, t));
	vy_state_scan sc;
	MUST(vy_state_log_scan(t, 0, f.seq, model_record, &m, &sc, E));
	CHECK_EQ(sc.delivered, 2);
	CHECK_STR(m.text, "a,b,c,d,");
	state_model whole = {0};
	vy_state_loaded l;
	MUST(vy_state_load(t, model_section, model_record, &whole, &l, E));
	CHECK_STR(whole.text, m.text);
	MUST(state_checkpoint(t, &whole, E));
	CHECK(!vy_state_follow_current(&f, t));
	vy_state_close(t);
	vy_state_follow_close(&f);
	vy_state_close(s);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(steps_hand_over_what_is_new),
		TEST_CASE(checkpoint_starts_afresh),
		TEST_CASE(laps_stay_exact),
		TEST_CASE(takeover_applies_the_rest),
	};
	return vy_test_main("state_follow", cases, sizeof(cases) / sizeof(*cases));
}
