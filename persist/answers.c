/* The kept answers (answers.h). Each (takeover, thread) has one entry of
 * VY_P_REPLY_MAX bytes, made at its first answer and written over in
 * place after that: no allocation per request. */
#include "persist/answers.h"

#include <stdlib.h>
#include <string.h>

static uint64_t key_of(uint32_t takeover, uint32_t thread)
{
	return (uint64_t)takeover << 32 | thread;
}

void vy_answers_destroy(vy_u64map *m)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(m);
}

bool vy_answers_set(vy_u64map *m, const vy_p_group *g, const void *reply)
{
	uint64_t k = key_of(g->takeover, g->thread);
	vy_p_group *c = vy_u64map_get(m, k);
	if (!c && g->reply_len == 0)
		return true; /* nothing to answer with, nothing to forget */
	if (!c) {
		c = malloc(sizeof(*c) + VY_P_REPLY_MAX);
		if (!c)
			return false;
		if (!vy_u64map_put(m, k, c)) {
			free(c);
			return false;
		}
	}
	*c = *g;
	c->records = 0; /* an answer alone */
	memcpy(c + 1, reply, g->reply_len <= VY_P_REPLY_MAX ? g->reply_len : 0);
	return true;
}

const vy_p_group *vy_answers_find(const vy_u64map *m, uint64_t unique)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);) {
		const vy_p_group *g = v;
		if (g->unique == unique && g->reply_len)
			return g;
	}
	return NULL;
}

void vy_answers_sent(vy_u64map *m, uint32_t takeover, uint32_t thread, uint64_t unique)
{
	vy_p_group *g = vy_u64map_get(m, key_of(takeover, thread));
	if (g && g->unique == unique)
		g->reply_len = 0;
}

void vy_answers_forget(vy_u64map *m, uint64_t unique)
{
	vy_p_group *g = (vy_p_group *)vy_answers_find(m, unique);
	if (g)
		g->reply_len = 0;
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
