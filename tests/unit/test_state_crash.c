/* A writer killed at every store: for each step (an append, an append that
 * pads a lap's end, a checkpoint's publish to A and to B, the INIT record),
 * a forked child runs the step stopped after k store units (a byte of a
 * record or image, or one 8-byte publishing store; state/region.h's cut)
 * and _exits, for k = 0, 1, 2, ... until the step completes. After each,
 * the parent adopts the memfds as a successor and checks the invariant:
 * the change is there whole or not at all, the rest exactly as before, and
 * a further append is there after it. Then it puts the bytes back. */
#include "tests/unit/state_support.h"

#include <errno.h>
#include <sys/wait.h>

enum { CUT = 41, DONE = 42, BROKEN = 43 };

static void fire(void *ctx)
{
	(void)ctx;
	_exit(CUT);
}

/* The bytes of the region and both images, to put back after each cut. */
typedef struct saved {
	uint8_t *b[3];
	size_t n[3];
} saved;

static int fd_of(const vy_state *s, int i)
{
	return i == 0 ? s->fds.region : s->fds.image[i - 1];
}

static void save(const vy_state *s, saved *v)
{
	for (int i = 0; i < 3; i++)
		v->b[i] = state_snapshot(fd_of(s, i), &v->n[i]);
}

static void restore(const vy_state *s, const saved *v)
{
	for (int i = 0; i < 3; i++) {
		int fd = fd_of(s, i);
		if ((i && ftruncate(fd, (off_t)v->n[i]) != 0) || pwrite(fd, v->b[i], v->n[i], 0) != (ssize_t)v->n[i]) {
			perror("restore");
			exit(1);
		}
	}
}

static void unsave(saved *v)
{
	for (int i = 0; i < 3; i++)
		free(v->b[i]);
}

typedef struct step {
	void (*run)(vy_state *s, const struct step *st);
	const char *payload;      /* append: the record's */
	const state_model *model; /* publish: the image's contents */
} step;

static void run_append(vy_state *s, const step *st)
{
	if (state_append_str(s, 1, 5, st->payload) == 0)
		_exit(BROKEN);
}

static void run_publish(vy_state *s, const step *st)
{
	vy_error e;
	if (state_checkpoint(s, st->model, &e) != VY_OK)
		_exit(BROKEN);
}

static const uint8_t init_req[72] = {1, 2, 3, 4, 5}, init_reply[80] = {9, 8, 7};

static void run_init(vy_state *s, const step *st)
{
	(void)st;
	vy_error e;
	if (vy_state_set_init(s, init_req, sizeof(init_req), init_reply, sizeof(init_reply), &e) != VY_OK)
		_exit(BROKEN);
}

/* Run the step in a child that stops after k units: CUT, DONE or BROKEN. */
static int run_cut(vy_state *s, const step *st, uint64_t k)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		vy_state_cut c = {.left = k, .fire = fire};
		s->cut = &c;
		st->run(s, st);
		_exit(DONE);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("waitpid");
			exit(1);
		}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* What a successor finds: the model it loads and the root; then whether
 * an append of "next" after it is there too. */
typedef struct found {
	state_model m;
	vy_state_root root;
	bool next_ok;
} found;

static bool successor(const vy_state *s, found *f)
{
	vy_state_fds fds = state_dup_fds(s);
	vy_state *t;
	vy_error e;
	if (vy_state_adopt(&fds, &t, NULL, &e) != VY_OK) {
		fprintf(stderr, "  adopt: %s\n", e.msg);
		state_close_fds(&fds);
		return false;
	}
	vy_state_loaded l;
	f->m = (state_model){0};
	bool ok = vy_state_load(t, model_section, model_record, &f->m, &l, &e) == VY_OK && !f->m.bad_order;
	f->root = vy_state_root_get(t);
	if (ok) {
		uint64_t seq = state_append_str(t, 1, 6, "next");
		vy_state_fds fds2 = state_dup_fds(t);
		vy_state *u;
		state_model m2 = {0};
		vy_state_loaded l2;
		if (seq && vy_state_adopt(&fds2, &u, NULL, &e) == VY_OK) {
			char want[sizeof(m2.text) + 8];
			snprintf(want, sizeof(want), "%snext,", f->m.text);
			f->next_ok = vy_state_load(u, model_section, model_record, &m2, &l2, &e) == VY_OK &&
				     !strcmp(m2.text, want) && !l2.log.stopped;
			vy_state_close(u);
		} else {
			state_close_fds(&fds2);
		}
	}
	vy_state_close(t);
	return ok;
}

/* Sweep every cut of `st` over base state s (whose model is `before`):
 * each must leave `before` or `after`; it must be `after` exactly from
 * unit `commit_from` on (counted back from the step's last unit). */
static void sweep(vy_state *s, const step *st, const char *before, const char *after, uint64_t commit_back,
		  uint64_t min_units)
{
	saved v;
	save(s, &v);
	uint64_t k = 0, units = 0, bad = 0;
	int first_new = -1;
	for (;; k++) {
		int r = run_cut(s, st, k);
		if (r != CUT && r != DONE) {
			fprintf(stderr, "  cut %llu: the child ended %d\n", (unsigned long long)k, r);
			vy_test_failures++;
			break;
		}
		found f;
		bool ok = successor(s, &f);
		bool is_new = ok && !strcmp(f.m.text, after), is_old = ok && !strcmp(f.m.text, before);
		if (is_new && !is_old && first_new < 0)
			first_new = (int)k;
		if (!ok || !(is_new || is_old) || (first_new >= 0 && !is_new) || !f.next_ok) {
			if (bad++ < 3)
				fprintf(stderr, "  cut %llu: loaded \"%s\" (before \"%s\", after \"%s\"), next %s\n",
					(unsigned long long)k, ok ? f.m.text : "(refused)", before, after,
					f.next_ok ? "ok" : "lost");
		}
		restore(s, &v);
		if (r == DONE) {
			units = k;
			break;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK(units >= min_units); /* the sweep reached the step's every byte */
	if (strcmp(before, after))
		CHECK_EQ((uint64_t)first_new, units - commit_back);
	unsave(&v);
}

/* A checkpoint's publish: the root moves at the last-but-one unit; the
 * state loaded is the same on both sides of it. Checked on the root. */
static void sweep_root(vy_state *s, const step *st, uint64_t old_seq, uint64_t new_seq, unsigned new_which)
{
	saved v;
	save(s, &v);
	uint64_t k = 0, flips = 0, flip_at = 0, bad = 0;
	bool was_new = false;
	for (;; k++) {
		int r = run_cut(s, st, k);
		found f;
		bool ok = r == CUT || r == DONE ? successor(s, &f) : false;
		bool is_new = ok && f.root.set && f.root.seq == new_seq && f.root.which == new_which;
		bool is_old = ok && !is_new && (old_seq == UINT64_MAX ? !f.root.set : f.root.seq == old_seq);
		if (!(is_new || is_old) || !f.next_ok)
			bad++;
		if (is_new != was_new) {
			flips++;
			flip_at = k;
		}
		was_new = is_new;
		restore(s, &v);
		if (r != CUT)
			break;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(flips, 1);
	CHECK_EQ(flip_at, k - 1); /* the root store, then the head's */
	unsave(&v);
}

/* Two records committed, an image of them, a third after it: the base. */
static vy_state *base_state(state_model *m)
{
	vy_state *s;
	vy_error e;
	if (vy_state_create(4096, &s, &e) != VY_OK) {
		fprintf(stderr, "%s\n", e.msg);
		exit(1);
	}
	*m = (state_model){0};
	const char *p[] = {"mkdir d", "create d/f"};
	for (int i = 0; i < 2; i++) {
		state_append_str(s, 1, (uint64_t)i + 1, p[i]);
		model_add(m, p[i], strlen(p[i]));
	}
	if (state_checkpoint(s, m, &e) != VY_OK)
		exit(1);
	state_append_str(s, 1, 3, "setattr d/f");
	model_add(m, "setattr d/f", 11);
	return s;
}

static void append_cut_everywhere(void)
{
	state_model m;
	vy_state *s = base_state(&m);
	static char before[sizeof(m.text)], after[sizeof(m.text) + 64];
	snprintf(before, sizeof(before), "%s", m.text);
	snprintf(after, sizeof(after), "%srename d/f d/g,", m.text);
	step st = {.run = run_append, .payload = "rename d/f d/g"};
	/* 40 header bytes (the sum last), 14 payload, 16 reply, the tail store. */
	sweep(s, &st, before, after, 0, 40 + 14 + 16 + 1);
	vy_state_close(s);
}

/* The same where the record does not fit before the lap's end: a PAD
 * record first, then the record at the ring's start. */
static void append_with_pad_cut_everywhere(void)
{
	state_model m;
	vy_state *s = base_state(&m);
	vy_error e;
	/* Fill to 80 bytes before the lap's end, checkpointing on the way:
	 * records of 160 bytes (59 of payload, 61 of reply), the last sized
	 * to leave exactly 80. */
	char p[128];
	for (uint64_t room; (room = 4096 - (s->tail & 4095)) != 80;) {
		uint64_t stride = room < 160 + 80 + 48 ? room - 80 : 160;
		size_t n = (size_t)(stride - 42) / 2; /* 40 + n + (n + 2) == stride */
		memset(p, 'x', n);
		p[n] = 0;
		if (vy_state_log_wants_checkpoint(s) && state_checkpoint(s, &m, &e) != VY_OK)
			exit(1);
		if (!state_append_str(s, 1, 0, p))
			break;
		model_add(&m, p, n);
	}
	CHECK_EQ(4096 - (s->tail & 4095), 80);
	static char before[sizeof(m.text)], after[sizeof(m.text) + 64];
	snprintf(before, sizeof(before), "%s", m.text);
	const char *big = "a record of sixty-odd bytes, too long for the eighty left";
	snprintf(after, sizeof(after), "%s%s,", m.text, big);
	step st = {.run = run_append, .payload = big};
	sweep(s, &st, before, after, 0, 40 + 40 + strlen(big) * 2 + 2 + 1);
	vy_state_close(s);
}

static void publish_cut_everywhere(void)
{
	/* From no image to A, and from A to B. */
	for (int second = 0; second < 2; second++) {
		state_model m = {0};
		vy_state *s;
		if (second) {
			s = base_state(&m);
		} else {
			MUST(vy_state_create(4096, &s, E));
			state_append_str(s, 1, 1, "mkdir d");
			model_add(&m, "mkdir d", 7);
			state_append_str(s, 1, 2, "link d/x");
			model_add(&m, "link d/x", 8);
		}
		static char text[sizeof(m.text)];
		snprintf(text, sizeof(text), "%s", m.text);
		step st = {.run = run_publish, .model = &m};
		/* The state loaded is the same at every cut... */
		sweep(s, &st, text, text, 0, 48 + 16 + m.len + 2);
		/* ...and the root moves once, at its own store. */
		sweep_root(s, &st, second ? 2 : UINT64_MAX, second ? 3 : 2, second ? 1 : 0);
		vy_state_close(s);
	}
}

static void init_cut_everywhere(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	saved v;
	save(s, &v);
	step st = {.run = run_init};
	uint64_t k = 0, there = 0, bad = 0;
	for (;; k++) {
		int r = run_cut(s, &st, k);
		const uint8_t *rq, *rp;
		uint32_t a, b;
		if (vy_state_get_init(s, &rq, &a, &rp, &b)) {
			there++;
			if (a != sizeof(init_req) || b != sizeof(init_reply) || memcmp(rq, init_req, a) ||
			    memcmp(rp, init_reply, b))
				bad++;
		}
		restore(s, &v);
		if (r != CUT)
			break;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(k, sizeof(init_req) + sizeof(init_reply) + 1);
	CHECK_EQ(there, 1); /* only the run that stored the lengths */
	unsave(&v);
	vy_state_close(s);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(append_cut_everywhere), TEST_CASE(append_with_pad_cut_everywhere),
		TEST_CASE(publish_cut_everywhere), TEST_CASE(init_cut_everywhere),
	};
	return vy_test_main("state_crash", cases, sizeof(cases) / sizeof(*cases));
}
