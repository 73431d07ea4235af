/* A request's records waiting in its thread (group.h). */
#include "persist/group.h"
#include "ns/ns.h"
#include "persist/format.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One waiting record: its bytes, or the inode to read them from. */
typedef struct entry {
	uint16_t type; /* 0: forgotten (its inode was freed) */
	uint16_t live; /* 1: a live_ref follows, not bytes */
	uint32_t len;  /* of what follows */
} entry;

typedef struct live_ref {
	vy_inode *in; /* the kernel or a name holds it until the request's reply */
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
	const void *owner;
	uint64_t unique; /* 0: none waits for a reply */
	uint32_t thread;
	bufs *b;
	size_t used;
	uint32_t n, live;
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

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
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

void vy_group_begin(const void *owner, uint64_t unique)
{
	vy_group_end();
	tg.owner = unique ? owner : NULL;
	tg.unique = owner ? unique : 0;
}

bool vy_group_on(const void *owner)
{
	return tg.unique && tg.owner == owner;
}

uint64_t vy_group_unique(void)
{
	return tg.unique;
}

uint32_t vy_group_records(void)
{
	return tg.n;
}

void vy_group_end(void)
{
	tg.owner = NULL;
	tg.unique = 0;
	tg.used = 0;
	tg.n = tg.live = 0;
}

static bool push(const entry *h, const void *bytes)
{
	if (!have_bufs() || !grow(&tg.b->buf, &tg.b->cap, tg.used + sizeof(*h) + pad8(h->len)))
		return false;
	uint8_t *at = tg.b->buf + tg.used;
	memcpy(at, h, sizeof(*h));
	memcpy(at + sizeof(*h), bytes, h->len);
	memset(at + sizeof(*h) + h->len, 0, pad8(h->len) - h->len);
	tg.used += sizeof(*h) + pad8(h->len);
	tg.n++;
	return true;
}

bool vy_group_add(uint16_t type, const void *payload, uint32_t len)
{
	return push(&(entry){.type = type, .len = len}, payload);
}

bool vy_group_add_live(uint16_t type, vy_inode *in)
{
	for (size_t at = 0; at < tg.used;) { /* read once, when kept */
		const entry *h = (const void *)(tg.b->buf + at);
		if (h->live && h->type == type && ((const live_ref *)(h + 1))->in == in)
			return true;
		at += sizeof(*h) + pad8(h->len);
	}
	live_ref r = {.in = in, .ino = in->ino};
	if (!push(&(entry){.type = type, .live = 1, .len = sizeof(r)}, &r))
		return false;
	tg.live++;
	return true;
}

bool vy_group_gone(uint64_t ino)
{
	for (size_t at = 0; at < tg.used;) {
		entry *h = (void *)(tg.b->buf + at);
		if (h->live && ((const live_ref *)(h + 1))->ino == ino)
			h->type = 0; /* freed: nothing to read */
		at += sizeof(*h) + pad8(h->len);
	}
	vy_p_gone r = {.ino = ino};
	return vy_group_add(VY_P_GONE, &r, sizeof(r));
}

bool vy_group_next(size_t *cursor, uint16_t *type, const void **bytes, uint32_t *len, vy_inode **live)
{
	while (*cursor < tg.used) {
		const entry *h = (const void *)(tg.b->buf + *cursor);
		*cursor += sizeof(*h) + pad8(h->len);
		if (!h->type)
			continue;
		*type = h->type;
		*bytes = h + 1;
		*len = h->len;
		*live = h->live ? ((const live_ref *)(h + 1))->in : NULL;
		return true;
	}
	return false;
}

size_t vy_group_out_bound(size_t reply_len)
{
	return sizeof(vy_p_group) + pad8(reply_len) + tg.used + (size_t)tg.live * LIVE_MAX;
}

uint8_t *vy_group_out(size_t cap)
{
	return have_bufs() && grow(&tg.b->out, &tg.b->out_cap, cap) ? tg.b->out : NULL;
}

uint32_t vy_group_thread(void)
{
	if (!tg.thread)
		tg.thread = (uint32_t)gettid();
	return tg.thread;
}
