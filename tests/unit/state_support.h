/* What the state region's suites share (header only: each suite is one
 * program): fds handed over as a keeper would, whole-file snapshots, a
 * model of the state the records build. */
#ifndef VY_TEST_STATE_SUPPORT_H
#define VY_TEST_STATE_SUPPORT_H

#include "state/state.h"
#include "tests/unit/support.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Copies of a region's fds, as the keeper holds them. */
static inline vy_state_fds state_dup_fds(const vy_state *s)
{
	vy_state_fds f = {dup(s->fds.region), {dup(s->fds.image[0]), dup(s->fds.image[1])}};
	if (f.region < 0 || f.image[0] < 0 || f.image[1] < 0) {
		perror("dup");
		exit(1);
	}
	return f;
}

static inline void state_close_fds(vy_state_fds *f)
{
	close(f->region);
	close(f->image[0]);
	close(f->image[1]);
}

/* Every byte of fd (malloc'd), its size in *n. */
static inline uint8_t *state_snapshot(int fd, size_t *n)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		perror("fstat");
		exit(1);
	}
	*n = (size_t)st.st_size;
	uint8_t *b = malloc(*n + 1);
	if (!b || pread(fd, b, *n, 0) != (ssize_t)*n) {
		perror("pread");
		exit(1);
	}
	return b;
}

/* Append a record of payload `p` (a string) with unique `u`, its reply
 * "r:" + p; the seq it got, or 0 on failure (reported). */
static inline uint64_t state_append_str(vy_state *s, uint16_t type, uint64_t u, const char *p)
{
	char reply[256];
	int n = snprintf(reply, sizeof(reply), "r:%s", p);
	vy_state_rec r = {.type = type, .flags = 7, .unique = u, .payload = p, .payload_len = (uint32_t)strlen(p),
			  .reply = reply, .reply_len = (uint32_t)n};
	uint64_t seq = 0;
	vy_error e;
	if (vy_state_append(s, &r, &seq, &e) != VY_OK) {
		fprintf(stderr, "  append of %s: %s\n", p, e.msg);
		return 0;
	}
	return seq;
}

/* A model of the namespace: the payloads applied, in order, as one string
 * ("a,b,c,"). Image sections and log records both append to it. */
typedef struct state_model {
	char text[1 << 16];
	size_t len;
	uint64_t last_seq, records, sections;
	bool bad_order;
} state_model;

static inline void model_add(state_model *m, const void *p, size_t n)
{
	if (m->len + n + 1 >= sizeof(m->text)) {
		m->bad_order = true;
		return;
	}
	memcpy(m->text + m->len, p, n);
	m->len += n;
	m->text[m->len++] = ',';
	m->text[m->len] = 0;
}

/* An image section holds the model's text as it was. */
static inline vy_err model_section(void *ctx, uint32_t type, const void *p, uint64_t len, vy_error *e)
{
	(void)e;
	state_model *m = ctx;
	m->sections++;
	if (type != 1 || len >= sizeof(m->text)) {
		m->bad_order = true;
		return VY_OK;
	}
	memcpy(m->text, p, len);
	m->len = len;
	m->text[len] = 0;
	return VY_OK;
}

/* A record: in seq order, its reply "r:" + payload. */
static inline vy_err model_record(void *ctx, const vy_state_rec *r, vy_error *e)
{
	(void)e;
	state_model *m = ctx;
	char want[256];
	int n = snprintf(want, sizeof(want), "r:%.*s", (int)r->payload_len, (const char *)r->payload);
	if ((m->last_seq && r->seq != m->last_seq + 1) || r->reply_len != (uint32_t)n || memcmp(r->reply, want, (size_t)n))
		m->bad_order = true;
	m->last_seq = r->seq;
	m->records++;
	model_add(m, r->payload, r->payload_len);
	return VY_OK;
}

/* A checkpoint holding the model's text as one section. */
static inline vy_err state_checkpoint(vy_state *s, const state_model *m, vy_error *e)
{
	vy_state_image_writer w;
	vy_err rc = vy_state_image_begin(s, &w, e);
	if (!rc)
		rc = vy_state_image_add(&w, 1, m->text, m->len, e);
	if (!rc)
		rc = vy_state_image_publish(&w, e);
	return rc;
}

#endif
