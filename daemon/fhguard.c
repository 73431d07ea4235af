/* The adopted session's handle guard (fhguard.h). */
#include "daemon/fhguard.h"
#include "core/u64map.h"
#include "daemon/log.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

static struct {
	atomic_bool on;
	pthread_mutex_t lock;
	vy_u64map handles; /* fh -> (void *)1: given out by this process */
	vy_u64map opening; /* unique -> opcode: an open whose reply names its fh */
	bool said;         /* out of memory, said once */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

void vy_fhguard_start(void)
{
	vy_u64map_init(&g.handles);
	vy_u64map_init(&g.opening);
	atomic_store(&g.on, true);
}

static void remember(vy_u64map *m, uint64_t key, uintptr_t value)
{
	if (key && !vy_u64map_put(m, key, (void *)value) && !g.said) {
		g.said = true;
		vy_log(LOG_WARNING, "out of memory tracking file handles: a file opened now may fail with EBADF "
				    "(Fix: free memory on the host)");
	}
}

bool vy_fhguard_request(const void *buf, size_t n, int *err)
{
	if (!atomic_load(&g.on) || n < sizeof(struct fuse_in_header))
		return false;
	const struct fuse_in_header *in = buf;
	const uint8_t *arg = (const uint8_t *)(in + 1);
	size_t have = n - sizeof(*in);
	uint64_t fh[2] = {0, 0};
	unsigned nfh = 0;
	bool release = false;
	*err = EBADF;
	switch (in->opcode) {
	case FUSE_OPEN:
	case FUSE_CREATE:
	case FUSE_OPENDIR:
		pthread_mutex_lock(&g.lock);
		remember(&g.opening, in->unique, in->opcode);
		pthread_mutex_unlock(&g.lock);
		return false;
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
		release = true;
		/* fall through */
	case FUSE_FLUSH:
		*err = 0;
		/* fall through */
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
	case FUSE_FALLOCATE:
	case FUSE_LSEEK:
		nfh = 1; /* each of their arguments starts with the fh */
		break;
	case FUSE_COPY_FILE_RANGE:
		nfh = 2;
		break;
	default:
		return false;
	}
	if (have < (nfh == 2 ? sizeof(struct fuse_copy_file_range_in) : sizeof(uint64_t)))
		return false; /* libfuse refuses a short request itself */
	memcpy(&fh[0], arg, sizeof(uint64_t));
	if (nfh == 2)
		memcpy(&fh[1], arg + offsetof(struct fuse_copy_file_range_in, fh_out), sizeof(uint64_t));
	pthread_mutex_lock(&g.lock);
	bool known = fh[0] && vy_u64map_get(&g.handles, fh[0]) && (nfh < 2 || (fh[1] && vy_u64map_get(&g.handles, fh[1])));
	if (known && release)
		vy_u64map_remove(&g.handles, fh[0]); /* the kernel sends nothing more on it */
	pthread_mutex_unlock(&g.lock);
	return !known;
}

void vy_fhguard_reply(const struct iovec *iov, int count)
{
	if (!atomic_load(&g.on) || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return;
	const struct fuse_out_header *out = iov[0].iov_base;
	if (out->unique == 0)
		return;
	pthread_mutex_lock(&g.lock);
	uintptr_t op = (uintptr_t)vy_u64map_remove(&g.opening, out->unique);
	pthread_mutex_unlock(&g.lock);
	if (!op || out->error != 0)
		return;
	/* The body's first bytes: fuse_open_out, after fuse_entry_out for a create. */
	size_t at = op == FUSE_CREATE ? sizeof(struct fuse_entry_out) : 0;
	uint8_t body[sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)];
	size_t got = 0;
	for (int i = 1; i < count && got < sizeof(body); i++) {
		size_t take = iov[i].iov_len < sizeof(body) - got ? iov[i].iov_len : sizeof(body) - got;
		memcpy(body + got, iov[i].iov_base, take);
		got += take;
	}
	if (got < at + sizeof(uint64_t))
		return;
	uint64_t fh;
	memcpy(&fh, body + at, sizeof(fh));
	pthread_mutex_lock(&g.lock);
	remember(&g.handles, fh, 1);
	pthread_mutex_unlock(&g.lock);
}
