/* The store's memory to the keeper (keeper_memory.h). */
#include "daemon/keeper_memory.h"
#include "daemon/log.h"
#include "core/slab.h"
#include "keeper/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* The keeper's own fds (its socketpair, signalfd, syslog, stdio) beside
 * its table: a slot past limit - MARGIN could not be received. */
#define MARGIN 64u
#define TABLE_MAX (1u << 20)

/* The fds a table may have under the soft limit rl, at most TABLE_MAX. */
static uint64_t table_of(const struct rlimit *rl)
{
	return rl->rlim_cur == RLIM_INFINITY || rl->rlim_cur > TABLE_MAX ? TABLE_MAX : rl->rlim_cur;
}

static bool is_used(const vy_keeper_memory *m, uint32_t s)
{
	return m->used[s / 8] & (1u << (s % 8));
}

static void set_used(vy_keeper_memory *m, uint32_t s, bool on)
{
	if (on)
		m->used[s / 8] |= (uint8_t)(1u << (s % 8));
	else
		m->used[s / 8] &= (uint8_t)~(1u << (s % 8));
}

static void failed(vy_keeper_memory *m, const char *what, int err)
{
	atomic_fetch_add(&m->failures, 1);
	if (!atomic_exchange(&m->failed, true))
		vy_log(LOG_WARNING, "cannot %s the keeper (pid %d): %s; files written from now on may not survive this "
				    "daemon's death (Fix: see the keeper's log; umount and mount again to have a keeper)",
		       what, (int)m->pid, strerror(err));
}

/* A slot to hand out, marked used; 0 when none is left. Lock held. */
static uint32_t take_slot(vy_keeper_memory *m)
{
	uint32_t s = 0;
	if (m->nfree)
		s = m->free[--m->nfree];
	else if (m->next < m->limit)
		s = m->next++;
	if (s)
		set_used(m, s, true);
	return s;
}

/* Slot s is free again (DROP sent, or never held). Lock held. */
static void give_slot(vy_keeper_memory *m, uint32_t s)
{
	set_used(m, s, false);
	if (m->nfree == m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 64;
		uint32_t *f = realloc(m->free, (size_t)cap * sizeof(*f));
		if (!f)
			return; /* that slot is not used again: a bounded loss */
		m->free = f;
		m->cap = cap;
	}
	m->free[m->nfree++] = s;
}

/* Memory the keeper does not hold: lost at a death, so the mount stops
 * surviving one (fails closed) and kept_failures counts it. */
static void not_kept(vy_keeper_memory *m, const char *why)
{
	struct vy_fs *fs = atomic_load(&m->lost_fs);
	if (fs && m->lost)
		m->lost(fs, why);
}

uint64_t vy_keeper_memory_slots_for(const uint64_t *bytes, unsigned ndev)
{
	uint64_t need = VY_KEEPER_SLOT_MEMORY + VY_KEEPER_OTHER_FDS;
	for (unsigned d = 0; d < ndev; d++)
		need += bytes[d] / VY_SLAB_MAX + 1 + VY_SLAB_CLASSES;
	return need;
}

void vy_keeper_memory_raise_limit(void)
{
	struct rlimit rl;
	unsigned long nr_open = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	rlim_t want = nr_open > TABLE_MAX || nr_open == 0 ? TABLE_MAX : (rlim_t)nr_open;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want)
		return;
	rl.rlim_cur = rl.rlim_max = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && errno != EPERM)
		vy_log(LOG_NOTICE, "cannot raise the open-file limit to %llu: %s", (unsigned long long)want,
		       strerror(errno));
}

/* The slots a table leaves for what is not file memory (the map server's
 * 256 connections, modules, write-behind's buffers): VY_KEEPER_OTHER_FDS,
 * a quarter of a small table, never under VY_KEEPER_OTHERS_MIN. Those
 * take slots with no room check: running out of them would fail closed. */
static uint64_t others_of(uint64_t table)
{
	if (table >= 4 * (uint64_t)VY_KEEPER_OTHER_FDS)
		return VY_KEEPER_OTHER_FDS;
	return table / 4 > VY_KEEPER_OTHERS_MIN ? table / 4 : VY_KEEPER_OTHERS_MIN;
}

/* The pieces of file memory a table of `table` fds holds. */
static uint64_t room_of(uint64_t table)
{
	uint64_t fixed = MARGIN + VY_KEEPER_SLOT_MEMORY + others_of(table);
	return table > fixed ? table - fixed : 0;
}

/* The least open-file limit whose table holds `pieces` of file memory
 * (from pieces + 70 up: at most VY_KEEPER_OTHER_FDS steps). */
static uint64_t limit_for(uint64_t pieces)
{
	uint64_t l = pieces + MARGIN + VY_KEEPER_SLOT_MEMORY;
	while (room_of(l) < pieces)
		l++;
	return l < VY_KEEPER_MIN_FDS ? VY_KEEPER_MIN_FDS : l;
}

/* The pieces of file memory `need` slots (vy_keeper_memory_slots_for) hold. */
static uint64_t pieces_of(uint64_t need)
{
	uint64_t fixed = VY_KEEPER_SLOT_MEMORY + VY_KEEPER_OTHER_FDS;
	return need > fixed ? need - fixed : 0;
}

int vy_keeper_memory_reserve(uint64_t need, char *why, size_t cap)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(why, cap, "cannot read the open-file limit: %s (Fix: mount with survive=off)", strerror(errno));
		return -1;
	}
	uint64_t have = table_of(&rl), pieces = pieces_of(need), want = limit_for(pieces);
	if (want > TABLE_MAX)
		want = TABLE_MAX; /* the keeper's table stops there: past it, ENOSPC */
	if (have < VY_KEEPER_MIN_FDS) {
		snprintf(why, cap, "survive=on: the keeper needs an open-file limit of %u or more, and it is %llu (Fix: "
				   "raise it: ulimit -n %llu, which as a user needs a hard limit that high (limits.conf "
				   "nofile, or LimitNOFILE= in a unit); or mount with survive=off)",
			 VY_KEEPER_MIN_FDS, (unsigned long long)have, (unsigned long long)want);
		return -1;
	}
	uint64_t room = room_of(have);
	why[0] = '\0';
	if (pieces > room)
		snprintf(why, cap, "survive=on: the open-file limit (%llu) lets the keeper hold %llu pieces of file memory "
				   "(a file over 1 MiB is one, smaller ones share 2 MiB pieces); filling this mount's budget "
				   "may take up to %llu: past them, new allocations (a file's memory, made or grown) get "
				   "ENOSPC (Fix: raise the limit to %llu: ulimit -n, limits.conf nofile or LimitNOFILE=)",
			 (unsigned long long)have, (unsigned long long)room, (unsigned long long)pieces,
			 (unsigned long long)want);
	return 0;
}

/* Whether one more allocation may take a slot, leaving the others'
 * share: a store refuses it otherwise (core/device_keep.h). */
static bool sink_room(void *ctx, char *why, size_t cap)
{
	vy_keeper_memory *m = ctx;
	if (atomic_load(&m->failed) || atomic_load(&m->refused))
		return true; /* nothing is kept any more: the mount fails closed already */
	pthread_mutex_lock(&m->lock);
	uint64_t left = (uint64_t)(m->limit - m->next) + m->nfree;
	uint64_t held = (uint64_t)(m->next - VY_KEEPER_SLOT_MEMORY) - m->nfree;
	pthread_mutex_unlock(&m->lock);
	if (left > m->others)
		return true;
	snprintf(why, cap, "the keeper holds %llu fds, all that the open-file limit (%u) leaves for file memory",
		 (unsigned long long)held, m->limit + MARGIN);
	if (!atomic_exchange(&m->full_logged, true))
		vy_log(LOG_WARNING, "survive=on: %s: new allocations get ENOSPC until files are removed (Fix: raise the "
				    "open-file limit the mount starts with (ulimit -n, LimitNOFILE=), then umount and mount "
				    "again)",
		       why);
	return false;
}

/* Hand no more memory (frees still DROP): logged once. */
static void refuse(vy_keeper_memory *m, const char *why)
{
	if (!atomic_exchange(&m->refused, true))
		vy_log(LOG_WARNING, "keeper (pid %d): %s; files written from now on may not survive this daemon's death "
				    "(Fix: raise the open-file limit the mount starts with (see the keeper's log), then "
				    "umount and mount again)", (int)m->pid, why);
}

void vy_keeper_memory_not_held(vy_keeper_memory *m, uint32_t n)
{
	if (!m)
		return;
	atomic_fetch_add(&m->failures, n ? n : 1);
	refuse(m, "it could not hold memory handed to it (its open-file limit?)");
	not_kept(m, "the keeper could not hold it");
}

static vy_keep_slot sink_add(void *ctx, int fd)
{
	vy_keeper_memory *m = ctx;
	if (atomic_load(&m->failed) || atomic_load(&m->refused)) {
		not_kept(m, "the keeper failed or refused before");
		return 0; /* a keeper that failed once is not waited on again */
	}
	pthread_mutex_lock(&m->lock);
	uint32_t s = take_slot(m);
	pthread_mutex_unlock(&m->lock);
	if (!s) {
		atomic_fetch_add(&m->failures, 1);
		refuse(m, "no slot left under this daemon's open-file limit");
		not_kept(m, "no slot left under the open-file limit");
		return 0;
	}
	vy_keeper_msg msg;
	vy_keeper_msg_init(&msg, VY_KEEPER_ADD);
	msg.count = 1;
	msg.slot[0] = s;
	if (vy_keeper_send(m->sock, &msg, &fd) != 0) {
		int err = errno;
		pthread_mutex_lock(&m->lock);
		give_slot(m, s); /* nothing was sent: the keeper holds nothing there */
		pthread_mutex_unlock(&m->lock);
		failed(m, "hand memory to", err);
		not_kept(m, strerror(err));
		return 0;
	}
	atomic_fetch_add(&m->adds, 1);
	return s;
}

/* DROP slot s; the slot is free once the message is out (a later ADD of
 * it then follows it on the socket). Lock held. */
static void drop_locked(vy_keeper_memory *m, uint32_t s)
{
	if (s < VY_KEEPER_SLOT_MEMORY || s >= m->limit || !is_used(m, s)) {
		vy_log(LOG_ERR, "keeper slot %u dropped but not held (Fix: report this bug)", s);
		return;
	}
	vy_keeper_msg msg;
	vy_keeper_msg_init(&msg, VY_KEEPER_DROP);
	msg.count = 1;
	msg.slot[0] = s;
	/* A keeper written to no more (or that this send fails) may still
	 * hold the slot: it is never used again. */
	if (atomic_load(&m->failed) || vy_keeper_send(m->sock, &msg, NULL) != 0) {
		if (!atomic_load(&m->failed))
			failed(m, "drop memory at", errno);
		set_used(m, s, false);
		return;
	}
	atomic_fetch_add(&m->drops, 1);
	give_slot(m, s);
}

/* This thread's drops held for a layout change (sink hold and release):
 * a change frees at most a buffer's allocations and a slab; past that,
 * a drop goes at once, as before holding. */
#define HELD_MAX (2 * VY_CHUNKS_MAX)
static __thread struct {
	unsigned depth;
	uint32_t n;
	vy_keep_slot slot[HELD_MAX];
} held;

static void sink_drop(void *ctx, vy_keep_slot s)
{
	vy_keeper_memory *m = ctx;
	if (held.depth && held.n < HELD_MAX) {
		held.slot[held.n++] = s;
		return;
	}
	pthread_mutex_lock(&m->lock);
	drop_locked(m, s);
	pthread_mutex_unlock(&m->lock);
}

static void sink_hold(void *ctx)
{
	(void)ctx;
	held.depth++;
}

static void sink_release(void *ctx)
{
	vy_keeper_memory *m = ctx;
	if (!held.depth || --held.depth)
		return;
	pthread_mutex_lock(&m->lock);
	for (uint32_t i = 0; i < held.n; i++)
		drop_locked(m, held.slot[i]);
	pthread_mutex_unlock(&m->lock);
	held.n = 0;
}

int vy_keeper_memory_init(vy_keeper_memory *m, int sock, pid_t pid, const vy_keep_fds *handed, char *why, size_t cap)
{
	memset(m, 0, sizeof(*m));
	m->sock = sock;
	m->pid = pid;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		snprintf(why, cap, "cannot read the open-file limit: %s (Fix: mount with survive=off)", strerror(errno));
		return -1;
	}
	uint64_t table = table_of(&rl);
	m->limit = table > VY_KEEPER_SLOT_MEMORY + MARGIN ? (uint32_t)(table - MARGIN) : VY_KEEPER_SLOT_MEMORY;
	m->others = others_of(table);
	m->next = VY_KEEPER_SLOT_MEMORY;
	/* Blocking sends, bounded: a keeper that stops reading fails them
	 * after a while instead of holding every allocation forever. */
	struct timeval tv = {.tv_sec = VY_KEEPER_MEMORY_SEND_S};
	int fl = fcntl(sock, F_GETFL);
	m->used = calloc(m->limit / 8 + 1, 1);
	if (!m->used || fl < 0 || (fl & O_NONBLOCK && fcntl(sock, F_SETFL, fl & ~O_NONBLOCK) != 0) ||
	    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 || pthread_mutex_init(&m->lock, NULL) != 0) {
		snprintf(why, cap, "cannot set up the keeper's memory slots: %s (Fix: mount with survive=off)",
			 m->used ? strerror(errno) : "out of memory");
		free(m->used);
		m->used = NULL;
		return -1;
	}
	for (uint32_t s = 0; handed && s < handed->n; s++) {
		if (handed->fd[s] < 0)
			continue;
		if (s >= m->limit) { /* a keeper with a larger table: never reached then */
			snprintf(why, cap, "the keeper handed slot %u, past the %u this daemon may use (Fix: give the successor "
					   "the keeper's open-file limit)", s, m->limit);
			vy_keeper_memory_destroy(m);
			return -1;
		}
		if (s >= VY_KEEPER_SLOT_MEMORY)
			set_used(m, s, true);
		if (s >= m->next)
			m->next = s + 1;
	}
	/* Slots under next that were not handed are free. */
	for (uint32_t s = m->next; s-- > VY_KEEPER_SLOT_MEMORY;)
		if (!is_used(m, s))
			give_slot(m, s);
	m->sink = (vy_keep_sink){.ctx = m, .add = sink_add, .drop = sink_drop, .room = sink_room, .hold = sink_hold,
				 .release = sink_release};
	return 0;
}

void vy_keeper_memory_settle(vy_keeper_memory *m, vy_keep_fds *fds)
{
	pthread_mutex_lock(&m->lock);
	for (uint32_t s = 0; s < fds->n; s++) {
		if (fds->fd[s] < 0)
			continue;
		close(fds->fd[s]);
		fds->fd[s] = -1;
		if (s >= VY_KEEPER_SLOT_MEMORY && s < m->limit && is_used(m, s))
			drop_locked(m, s);
	}
	pthread_mutex_unlock(&m->lock);
	free(fds->fd);
	fds->fd = NULL;
	fds->n = 0;
}

void vy_keeper_memory_destroy(vy_keeper_memory *m)
{
	if (!m->used)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->used);
	free(m->free);
	m->used = NULL;
	m->free = NULL;
}

void vy_keeper_memory_quiet(vy_keeper_memory *m)
{
	atomic_store(&m->lost_fs, NULL); /* unmounting: nothing is kept, nothing lost */
	atomic_store(&m->failed, true); /* as after a failure, without its log line */
}
