/* A request's records kept together with its answer (request.h). */
#include "persist/request.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "persist/answers.h"
#include "persist/format.h"
#include "persist/writer_parts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one record of a group is while it waits: its bytes, or the inode to
 * read them from when the group is kept. */
typedef struct entry {
	uint16_t type; /* 0: forgotten (its inode was freed) */
	uint16_t live; /* 1: `in` follows, not bytes */
	uint32_t len;  /* of the bytes that follow (live: sizeof(live_ref)) */
} entry;

typedef struct live_ref {
	vy_inode *in; /* the request holds a reference the kernel or a name has on it until its reply */
	uint64_t ino;
} live_ref;

/* The largest record a live entry becomes: an inode and a symlink's target. */
#define LIVE_MAX (sizeof(vy_p_inode) + 4096u)

/* A thread's two buffers: the entries waiting, and the group built from
 * them. Made at its first group, grown as needed, freed with the thread. */
typedef struct bufs {
	uint8_t *buf, *out;
	size_t cap, out_cap;
} bufs;

static __thread struct {
	vy_persist *p;   /* the writer the request's records are for */
	uint64_t unique; /* 0: none waits for a reply */
	uint32_t thread; /* gettid(): answers are kept by thread */
	bufs *b;
	size_t used;
	uint32_t n, live;
	uint64_t answered; /* the request whose answer this thread kept last, until it is sent */
} tg;

static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;

static void bufs_free(void *v)
{
	bufs *b = v;
	free(b->buf);
	free(b->out);
	free(b);
}

static void bufs_key_make(void)
{
	(void)pthread_key_create(&bufs_key, bufs_free);
}

/* `*p` holds at least `need` bytes (its contents kept). */
static bool grow(uint8_t **p, size_t *cap, size_t need)
{
	if (*cap >= need)
		return true;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	uint8_t *n = realloc(*p, c);
	if (!n)
		return false;
	*p = n;
	*cap = c;
	return true;
}

static bool have_bufs(void)
{
	if (tg.b)
		return true;
	pthread_once(&bufs_once, bufs_key_make);
	tg.b = calloc(1, sizeof(*tg.b));
	if (tg.b && pthread_setspecific(bufs_key, tg.b) != 0) {
		free(tg.b);
		tg.b = NULL;
	}
	return tg.b != NULL;
}

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

bool vy_group_on(const vy_persist *p)
{
	return tg.unique && tg.p == p;
}

/* Room for `more` bytes of entries; false (the change is lost for a
 * successor) when host memory is out. */
static bool room(size_t more)
{
	return have_bufs() && grow(&tg.b->buf, &tg.b->cap, tg.used + more);
}

static void push(const entry *h, const void *bytes)
{
	memcpy(tg.b->buf + tg.used, h, sizeof(*h));
	memcpy(tg.b->buf + tg.used + sizeof(*h), bytes, h->len);
	memset(tg.b->buf + tg.used + sizeof(*h) + h->len, 0, pad8(h->len) - h->len);
	tg.used += sizeof(*h) + pad8(h->len);
	tg.n++;
}

static void lost(vy_persist *p, bool locked)
{
	vy_error e;
	vy_fail(&e, VY_ENOMEM, "free host memory", "no memory to keep a request's changes");
	if (!locked)
		pthread_mutex_lock(&p->lock);
	vy_persist_lose(p, &e);
	if (!locked)
		pthread_mutex_unlock(&p->lock);
}

void vy_group_add(vy_persist *p, uint16_t type, const void *payload, uint32_t len)
{
	if (!room(sizeof(entry) + pad8(len))) {
		lost(p, true);
		return;
	}
	push(&(entry){.type = type, .len = len}, payload);
}

void vy_group_add_live(vy_persist *p, uint16_t type, vy_inode *in)
{
	for (size_t at = 0; at < tg.used;) { /* read once, when kept */
		const entry *h = (const void *)(tg.b->buf + at);
		if (h->live && h->type == type && ((const live_ref *)(h + 1))->in == in)
			return;
		at += sizeof(*h) + pad8(h->len);
	}
	if (!room(sizeof(entry) + sizeof(live_ref))) {
		lost(p, false);
		return;
	}
	live_ref r = {.in = in, .ino = in->ino};
	push(&(entry){.type = type, .live = 1, .len = sizeof(r)}, &r);
	tg.live++;
}

void vy_group_gone(vy_persist *p, uint64_t ino)
{
	for (size_t at = 0; at < tg.used;) {
		entry *h = (void *)(tg.b->buf + at);
		if (h->live && ((const live_ref *)(h + 1))->ino == ino)
			h->type = 0; /* freed: nothing to read */
		at += sizeof(*h) + pad8(h->len);
	}
	vy_p_gone r = {.ino = ino};
	vy_group_add(p, VY_P_GONE, &r, sizeof(r));
}

/* The group as one VY_P_GROUP record, its live entries read now, with
 * `reply` (NULL: no answer). Lock held. */
static void keep(vy_persist *p, const void *reply, size_t reply_len)
{
	if (reply_len > VY_P_REPLY_MAX)
		reply_len = 0; /* no such reply to a request kept in groups: run again if resent */
	size_t cap = sizeof(vy_p_group) + pad8(reply_len) + tg.used + (size_t)tg.live * LIVE_MAX;
	if (!grow(&tg.b->out, &tg.b->out_cap, cap)) {
		lost(p, true);
		return;
	}
	uint8_t *out = tg.b->out;
	vy_p_group g = {.unique = tg.unique, .thread = tg.thread, .takeover = p->takeover,
			.reply_len = reply ? (uint32_t)reply_len : 0};
	size_t at = sizeof(g);
	memcpy(out + at, reply, g.reply_len);
	memset(out + at + g.reply_len, 0, pad8(g.reply_len) - g.reply_len);
	at += pad8(g.reply_len);
	for (size_t in = 0; in < tg.used;) {
		const entry *h = (const void *)(tg.b->buf + in);
		in += sizeof(*h) + pad8(h->len);
		if (!h->type)
			continue;
		const void *bytes = h + 1;
		uint32_t len = h->len;
		if (h->live) {
			vy_inode *node = ((const live_ref *)bytes)->in;
			bytes = p->scratch;
			if (h->type == VY_P_INODE) {
				len = vy_persist_inode_record(node, p->scratch);
			} else {
				vy_persist_lookup_record(node, p->scratch);
				len = sizeof(vy_p_lookup);
			}
		}
		vy_p_head rh = {.len = len, .type = h->type};
		memcpy(out + at, &rh, sizeof(rh));
		memcpy(out + at + sizeof(rh), bytes, len);
		memset(out + at + sizeof(rh) + len, 0, pad8(len) - len);
		at += sizeof(rh) + pad8(len);
		g.records++;
	}
	if (g.records == 0 && g.reply_len != pad8(g.reply_len))
		at = sizeof(g) + g.reply_len; /* no records: the reply unpadded, as the framing wants */
	memcpy(out, &g, sizeof(g));
	uint64_t before = p->counts.records;
	vy_persist_commit(p, VY_P_GROUP, out, (uint32_t)at);
	if (p->counts.records > before) /* a group counts as the records it holds */
		p->counts.records += g.records - 1;
}

static void reset(void)
{
	tg.unique = 0;
	tg.p = NULL;
	tg.used = 0;
	tg.n = tg.live = 0;
}

void vy_persist_request(struct vy_fs *fs, uint64_t unique)
{
	vy_persist *p = fs->persist;
	if (tg.n && tg.p) { /* an earlier request of this thread went unanswered */
		pthread_mutex_lock(&tg.p->lock);
		keep(tg.p, NULL, 0);
		pthread_mutex_unlock(&tg.p->lock);
	}
	reset();
	if (!p || !unique)
		return;
	if (!tg.thread)
		tg.thread = (uint32_t)gettid();
	tg.p = p;
	tg.unique = unique;
}

void vy_persist_reply(struct vy_fs *fs, uint64_t unique, const struct iovec *iov, int count)
{
	vy_persist *p = fs->persist;
	if (!p || !vy_group_on(p))
		return;
	if (tg.n) {
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
		bool ours = tg.unique == unique && len <= sizeof(reply);
		pthread_mutex_lock(&p->lock);
		keep(p, ours ? reply : NULL, ours ? len : 0);
		pthread_mutex_unlock(&p->lock);
		tg.answered = ours ? unique : 0;
	}
	reset();
}

void vy_persist_sent(struct vy_fs *fs, uint64_t unique)
{
	vy_persist *p = fs->persist;
	if (!p || !unique || tg.answered != unique)
		return;
	tg.answered = 0;
	pthread_mutex_lock(&p->lock);
	vy_answers_sent(&p->shadow.answers, p->takeover, tg.thread, unique);
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
