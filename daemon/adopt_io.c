/* The adopted session's io (adopt_io.h). One session per process. */
#include "daemon/adopt_io.h"
#include "core/clock.h"
#include "daemon/log.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7 /* Linux 6.9, protocol 7.40; older headers stop before it */
#endif
/* The replayed INIT's unique: bit 63 clear (no resent request has it) and
 * far above any count the kernel reaches. */
#define REPLAY_UNIQUE 0x5e5e5e5e5e5e5e5eULL

enum stage { GIVE_INIT, INIT_GIVEN, RESEND, SERVING };

static struct {
	atomic_bool on;
	_Atomic int stage;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t req[512], reply[512];
	size_t req_len, reply_len;
	_Atomic uint64_t first_answer_ns;
	void (*on_first)(uint64_t ns);
} a = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

int vy_adopt_io_start(const void *init_req, size_t req_len, const void *init_reply, size_t reply_len)
{
	const struct fuse_in_header *in = init_req;
	if (req_len < sizeof(*in) + sizeof(struct fuse_init_in) || req_len > sizeof(a.req) || in->opcode != FUSE_INIT ||
	    in->len != req_len || reply_len < offsetof(struct fuse_init_out, max_write) + sizeof(uint32_t) ||
	    reply_len > sizeof(a.reply))
		return -1;
	memcpy(a.req, init_req, req_len);
	memcpy(a.reply, init_reply, reply_len);
	a.req_len = req_len;
	a.reply_len = reply_len;
	((struct fuse_in_header *)a.req)->unique = REPLAY_UNIQUE;
	atomic_store(&a.on, true);
	return 0;
}

bool vy_adopt_active(void)
{
	return atomic_load(&a.on);
}

uint64_t vy_adopt_first_answer_ns(void)
{
	return atomic_load(&a.first_answer_ns);
}

void vy_adopt_on_first_answer(void (*fn)(uint64_t ns))
{
	a.on_first = fn;
}

static void answered(void)
{
	uint64_t zero = 0, t = vy_monotonic_ns() | 1; /* nonzero: "answered" */
	if (atomic_compare_exchange_strong(&a.first_answer_ns, &zero, t) && a.on_first)
		a.on_first(t);
}

/* The notification is a header alone: unique 0, the code in `error`. */
static void write_resend(int fd)
{
	struct fuse_out_header oh = {.len = sizeof(oh), .error = FUSE_NOTIFY_RESEND, .unique = 0};
	ssize_t w;
	do
		w = write(fd, &oh, sizeof(oh));
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)sizeof(oh))
		vy_log(LOG_WARNING, "cannot ask the kernel to resend the requests the dead daemon had read: %s; a "
				    "program waiting on one of them waits until the mount ends (Fix: this kernel needs "
				    "FUSE_NOTIFY_RESEND, Linux 6.9 or later)",
		       w < 0 ? strerror(errno) : "short write");
}

/* Until the replayed INIT is answered, no other request may reach
 * libfuse (it would answer EIO before INIT); then one reader resends. */
static bool before_serving(int fd, void *buf, size_t len, ssize_t *n)
{
	pthread_mutex_lock(&a.lock);
	if (atomic_load(&a.stage) == GIVE_INIT) {
		atomic_store(&a.stage, INIT_GIVEN);
		pthread_mutex_unlock(&a.lock);
		if (len < a.req_len) {
			errno = EIO;
			*n = -1;
		} else {
			memcpy(buf, a.req, a.req_len);
			*n = (ssize_t)a.req_len;
		}
		return true;
	}
	while (atomic_load(&a.stage) == INIT_GIVEN)
		pthread_cond_wait(&a.cond, &a.lock);
	if (atomic_load(&a.stage) == RESEND) {
		write_resend(fd);
		atomic_store(&a.stage, SERVING);
	}
	pthread_mutex_unlock(&a.lock);
	return false;
}

ssize_t vy_adopt_io_read(int fd, void *buf, size_t len)
{
	if (!atomic_load(&a.on))
		return read(fd, buf, len);
	ssize_t n;
	if (atomic_load(&a.stage) != SERVING && before_serving(fd, buf, len, &n))
		return n;
	/* Handles the dead daemon gave out are this one's too (ids taken
	 * back by persist/replay_kernel.c); one it could not take back is an
	 * id no slot holds, answered EBADF by the operation itself. A resent
	 * request is answered from its kept reply, or runs anew (session.c,
	 * persist/request.h). */
	return read(fd, buf, len);
}

#define SAME(field, fmt)                                                                                       \
	do {                                                                                                    \
		if (got->field != want->field)                                                                  \
			vy_log(LOG_WARNING, "takeover: the INIT reply's " #field " is " fmt " here, " fmt           \
					    " in the first daemon's; the kernel keeps the first (Fix: run the same "   \
					    "vyrefs binary and options)",                                              \
			       got->field, want->field);                                                        \
	} while (0)

ssize_t vy_adopt_init_reply(const struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	uint8_t body[sizeof(a.reply)] = {0};
	size_t got_len = 0, total = iov[0].iov_len;
	for (int i = 1; i < count; i++) {
		size_t take = iov[i].iov_len < sizeof(body) - got_len ? iov[i].iov_len : sizeof(body) - got_len;
		memcpy(body + got_len, iov[i].iov_base, take);
		got_len += take;
		total += iov[i].iov_len;
	}
	struct fuse_init_out g = {0}, w = {0}, *got = &g, *want = &w;
	memcpy(&g, body, got_len < sizeof(g) ? got_len : sizeof(g));
	memcpy(&w, a.reply, a.reply_len < sizeof(w) ? a.reply_len : sizeof(w));
	if (out->error != 0)
		vy_log(LOG_WARNING, "takeover: libfuse refused the replayed INIT (%d); serving on with the first daemon's "
				    "settings", out->error);
	else if (got_len != a.reply_len || memcmp(body, a.reply, a.reply_len) != 0) {
		SAME(major, "%u");
		SAME(minor, "%u");
		SAME(max_readahead, "%u");
		SAME(flags, "0x%x");
		SAME(max_background, "%u");
		SAME(congestion_threshold, "%u");
		SAME(max_write, "%u");
		SAME(time_gran, "%u");
		SAME(max_pages, "%u");
		SAME(flags2, "0x%x");
		if (got_len != a.reply_len)
			vy_log(LOG_WARNING, "takeover: the INIT reply is %zu bytes here, %zu in the first daemon's",
			       got_len, a.reply_len);
	}
	pthread_mutex_lock(&a.lock);
	atomic_store(&a.stage, RESEND);
	pthread_cond_broadcast(&a.cond);
	pthread_mutex_unlock(&a.lock);
	return (ssize_t)total;
}

void vy_adopt_io_reply(void)
{
	if (!atomic_load(&a.on))
		return;
	if (atomic_load(&a.stage) == SERVING)
		answered();
}
