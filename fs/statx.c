/* FUSE_STATX through libfuse 3.14 (see statx.h). */
#include "fs/statx.h"

#include <linux/fs.h>
#include <linux/fuse.h>
#include <linux/stat.h>
#include <stdint.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* FUSE 7.39's statx structures (include/uapi/linux/fuse.h, Linux 6.6):
 * Debian 12's headers stop at 7.38. Bit for bit the kernel's ABI. */
#define VY_FUSE_STATX 52

struct vy_fuse_sx_time {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};

struct vy_fuse_statx {
	uint32_t mask;
	uint32_t blksize;
	uint64_t attributes;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint16_t mode;
	uint16_t spare0[1];
	uint64_t ino;
	uint64_t size;
	uint64_t blocks;
	uint64_t attributes_mask;
	struct vy_fuse_sx_time atime, btime, ctime, mtime;
	uint32_t rdev_major;
	uint32_t rdev_minor;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint64_t spare2[14];
};

struct vy_fuse_statx_in {
	uint32_t getattr_flags;
	uint32_t reserved;
	uint64_t fh;
	uint32_t sx_flags;
	uint32_t sx_mask;
};

struct vy_fuse_statx_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec;
	uint32_t flags;
	uint64_t spare[2];
	struct vy_fuse_statx stat;
};

_Static_assert(sizeof(struct vy_fuse_statx) == 256, "fuse_statx is 256 bytes");
_Static_assert(sizeof(struct vy_fuse_statx_in) == 24, "fuse_statx_in is 24 bytes");
_Static_assert(sizeof(struct vy_fuse_statx_out) == 288, "fuse_statx_out is 288 bytes");
/* GETATTR's body is the first 16 bytes of STATX's: flags, padding, fh. */
_Static_assert(offsetof(struct vy_fuse_statx_in, fh) == offsetof(struct fuse_getattr_in, fh), "getattr_in prefix");

static _Thread_local uint64_t statx_unique; /* 0: the request is no STATX */
static _Thread_local bool have_btime;
static _Thread_local struct timespec btime;
static _Thread_local unsigned flags; /* chattr's FS_*_FL */

void vy_statx_request(void *buf, ssize_t n)
{
	struct fuse_in_header *in = buf;
	statx_unique = 0;
	have_btime = false;
	if (n < (ssize_t)(sizeof(*in) + sizeof(struct vy_fuse_statx_in)) || in->opcode != VY_FUSE_STATX)
		return;
	in->opcode = FUSE_GETATTR;
	statx_unique = in->unique;
}

void vy_statx_of(const struct timespec *t, unsigned fsflags)
{
	btime = *t;
	flags = fsflags;
	have_btime = true;
}

/* chattr's flags statx reports, as tmpfs (shmem_getattr) reports them. */
static const struct {
	unsigned fl;
	uint64_t attr;
} attrs[] = {{FS_APPEND_FL, STATX_ATTR_APPEND}, {FS_IMMUTABLE_FL, STATX_ATTR_IMMUTABLE}, {FS_NODUMP_FL, STATX_ATTR_NODUMP}};

static struct vy_fuse_sx_time sx_time(uint64_t sec, uint32_t nsec)
{
	return (struct vy_fuse_sx_time){.tv_sec = (int64_t)sec, .tv_nsec = nsec};
}

bool vy_statx_reply(int fd, const struct iovec *iov, int count, ssize_t *res)
{
	if (!statx_unique || count < 1 || iov[0].iov_len < sizeof(struct fuse_out_header))
		return false;
	const struct fuse_out_header *hdr = iov[0].iov_base;
	if (hdr->unique != statx_unique)
		return false;
	statx_unique = 0;
	if (hdr->error != 0 || count != 2 || iov[1].iov_len < sizeof(struct fuse_attr_out))
		return false; /* an error is an error for STATX too */
	const struct fuse_attr_out *ao = iov[1].iov_base;
	const struct fuse_attr *a = &ao->attr;
	struct vy_fuse_statx_out so;
	memset(&so, 0, sizeof(so));
	so.attr_valid = ao->attr_valid;
	so.attr_valid_nsec = ao->attr_valid_nsec;
	struct vy_fuse_statx *s = &so.stat;
	/* The kernel takes no reply without every basic field. */
	s->mask = STATX_BASIC_STATS;
	s->blksize = a->blksize;
	s->nlink = a->nlink;
	s->uid = a->uid;
	s->gid = a->gid;
	s->mode = (uint16_t)a->mode;
	s->ino = a->ino;
	s->size = a->size;
	s->blocks = a->blocks;
	s->atime = sx_time(a->atime, a->atimensec);
	s->mtime = sx_time(a->mtime, a->mtimensec);
	s->ctime = sx_time(a->ctime, a->ctimensec);
	s->rdev_major = major(a->rdev);
	s->rdev_minor = minor(a->rdev);
	if (have_btime) {
		s->mask |= STATX_BTIME;
		s->btime = sx_time((uint64_t)btime.tv_sec, (uint32_t)btime.tv_nsec);
		for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
			s->attributes_mask |= attrs[i].attr;
			s->attributes |= flags & attrs[i].fl ? attrs[i].attr : 0;
		}
	}
	struct fuse_out_header out = *hdr;
	out.len = (uint32_t)(sizeof(out) + sizeof(so));
	struct iovec v[2] = {{.iov_base = &out, .iov_len = sizeof(out)}, {.iov_base = &so, .iov_len = sizeof(so)}};
	*res = writev(fd, v, 2);
	/* libfuse checks that the whole reply went: say it did, in its size. */
	if (*res == (ssize_t)out.len)
		*res = (ssize_t)(iov[0].iov_len + iov[1].iov_len);
	return true;
}
