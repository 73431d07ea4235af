/* The kept answers (answers.h). */
#include "persist/answers.h"

#include <stdlib.h>
#include <string.h>

static uint64_t key_of(const vy_p_group *g)
{
	return (uint64_t)g->takeover << 32 | g->thread;
}

void vy_answers_destroy(vy_u64map *m)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(m);
}

bool vy_answers_set(vy_u64map *m, const vy_p_group *g)
{
	uint64_t k = key_of(g);
	if (g->reply_len == 0) { /* nothing to answer with; the thread's last answer was sent */
		free(vy_u64map_remove(m, k));
		return true;
	}
	vy_p_group *c = malloc(vy_answer_bytes(g));
	if (!c)
		return false;
	memcpy(c, g, vy_answer_bytes(g));
	c->records = 0; /* an answer alone */
	vy_p_group *old = vy_u64map_get(m, k);
	if (!vy_u64map_put(m, k, c)) {
		free(c);
		return false;
	}
	if (old != c)
		free(old);
	return true;
}

static bool find_key(const vy_u64map *m, uint64_t unique, uint64_t *key)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);) {
		if (((const vy_p_group *)v)->unique == unique) {
			*key = k;
			return true;
		}
	}
	return false;
}

const vy_p_group *vy_answers_find(const vy_u64map *m, uint64_t unique)
{
	uint64_t k;
	return find_key(m, unique, &k) ? vy_u64map_get(m, k) : NULL;
}

void vy_answers_sent(vy_u64map *m, uint64_t unique)
{
	uint64_t k;
	if (find_key(m, unique, &k))
		free(vy_u64map_remove(m, k));
}

void vy_answers_prune(vy_u64map *m, uint32_t now)
{
	uint64_t k;
	void *v;
	for (bool again = true; again;) { /* never remove while walking */
		again = false;
		for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);) {
			const vy_p_group *g = v;
			if ((uint64_t)g->takeover + VY_ANSWERS_TAKEOVERS < now) {
				free(vy_u64map_remove(m, k));
				again = true;
				break;
			}
		}
	}
}
