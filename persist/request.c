/* A request's records kept together with its answer (request.h). */
#include "persist/request.h"
#include "fs/fs.h"
#include "persist/answers.h"
#include "persist/format.h"
#include "persist/group.h"
#include "persist/writer_parts.h"

#include <pthread.h>
#include <string.h>

/* The request whose answer this thread kept last, until it is sent. */
static __thread uint64_t answered;
/* The request this thread serves. */
static __thread uint64_t serving;

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* The waiting records as one VY_P_GROUP record, the live ones read now,
 * with `reply` (NULL: no answer). Lock held. */
static void keep(vy_persist *p, const void *reply, size_t reply_len)
{
	if (!reply || reply_len > VY_P_REPLY_MAX)
		reply_len = 0; /* no answer: run again if resent */
	uint8_t *out = vy_group_out(vy_group_out_bound(reply_len));
	if (!out) {
		vy_persist_no_memory(p);
		return;
	}
	vy_p_group g = {.unique = vy_group_unique(), .thread = vy_group_thread(), .takeover = p->takeover,
			.reply_len = (uint32_t)reply_len};
	size_t at = sizeof(g);
	if (reply_len) /* no answer: reply may be NULL, which memcpy may not be given */
		memcpy(out + at, reply, reply_len);
	memset(out + at + reply_len, 0, pad8(reply_len) - reply_len);
	at += pad8(reply_len);
	uint16_t type;
	const void *bytes;
	uint32_t len;
	vy_inode *live;
	for (size_t c = 0; vy_group_next(&c, &type, &bytes, &len, &live);) {
		if (live) {
			bytes = p->scratch;
			if (type == VY_P_INODE) {
				len = vy_persist_inode_record(live, p->scratch);
			} else {
				vy_persist_lookup_record(live, p->scratch);
				len = sizeof(vy_p_lookup);
			}
		}
		vy_p_head rh = {.len = len, .type = type};
		memcpy(out + at, &rh, sizeof(rh));
		memcpy(out + at + sizeof(rh), bytes, len);
		memset(out + at + sizeof(rh) + len, 0, pad8(len) - len);
		at += sizeof(rh) + pad8(len);
		g.records++;
	}
	if (g.records == 0)
		at = sizeof(g) + g.reply_len; /* no records: the reply unpadded, as the framing wants */
	memcpy(out, &g, sizeof(g));
	uint64_t before = p->counts.records;
	vy_persist_commit(p, VY_P_GROUP, out, (uint32_t)at);
	if (p->counts.records > before) /* a group counts as the records it holds */
		p->counts.records += g.records - 1;
}

void vy_persist_request(struct vy_fs *fs, uint64_t unique, bool with_answer)
{
	vy_persist *p = fs->persist;
	if (p && vy_group_on(p) && vy_group_records()) { /* an earlier request of this thread went unanswered */
		pthread_mutex_lock(&p->lock);
		keep(p, NULL, 0);
		pthread_mutex_unlock(&p->lock);
	}
	serving = unique;
	vy_group_begin(p, p && with_answer ? unique : 0);
}

uint64_t vy_persist_serving(void)
{
	return serving;
}

void vy_persist_with_answer(struct vy_fs *fs)
{
	vy_persist *p = fs->persist;
	if (p && serving && !vy_group_on(p))
		vy_group_begin(p, serving);
}

void vy_persist_reply(struct vy_fs *fs, uint64_t unique, const struct iovec *iov, int count)
{
	vy_persist *p = fs->persist;
	if (!p || !vy_group_on(p))
		return;
	if (vy_group_records()) {
		uint8_t reply[VY_P_REPLY_MAX];
		size_t len = 0;
		for (int i = 0; i < count && len <= sizeof(reply); i++) {
			if (iov[i].iov_len > sizeof(reply) - len) {
				len = sizeof(reply) + 1; /* too large to keep */
				break;
			}
			memcpy(reply + len, iov[i].iov_base, iov[i].iov_len);
			len += iov[i].iov_len;
		}
		bool ours = vy_group_unique() == unique && len <= sizeof(reply);
		pthread_mutex_lock(&p->lock);
		keep(p, ours ? reply : NULL, ours ? len : 0);
		pthread_mutex_unlock(&p->lock);
		answered = ours ? unique : 0;
	}
	vy_group_end();
}

void vy_persist_sent(struct vy_fs *fs, uint64_t unique)
{
	vy_persist *p = fs->persist;
	if (!p || !unique || answered != unique)
		return;
	answered = 0;
	pthread_mutex_lock(&p->lock);
	vy_answers_sent(&p->shadow.answers, p->takeover, vy_group_thread(), unique);
	pthread_mutex_unlock(&p->lock);
}

size_t vy_persist_resent(struct vy_fs *fs, uint64_t unique, void *buf, size_t cap)
{
	vy_persist *p = fs->persist;
	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	const vy_p_group *g = vy_answers_find(&p->shadow.answers, unique);
	size_t len = g && g->reply_len <= cap ? g->reply_len : 0;
	if (len) {
		memcpy(buf, g + 1, len);
		p->counts.resends_answered++;
	}
	vy_answers_forget(&p->shadow.answers, unique); /* answered now, or never */
	pthread_mutex_unlock(&p->lock);
	return len;
}
