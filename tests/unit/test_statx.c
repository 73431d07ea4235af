/* FUSE_STATX through libfuse 3.14 (fs/statx.c): a STATX request becomes a
 * GETATTR, and its reply a statx reply with the btime and chattr's flags
 * in stx_attributes and their mask, as tmpfs gives them. (Linux 6.18 still
 * drops a FUSE server's attributes: the reply is checked here, where the
 * kernel cannot hide it.) */
#include "fs/statx.h"
#include "tests/unit/support.h"

#include <linux/fs.h>
#include <linux/fuse.h>
#include <linux/stat.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUSE_STATX_OP 52
/* fuse_statx_out: 32 bytes of header, then fuse_statx; its attributes at
 * 8, attributes_mask at 56, btime's seconds at 112 (include/uapi/linux/fuse.h). */
#define OUT_ATTRS (32 + 8)
#define OUT_MASK (32 + 56)
#define OUT_BTIME (32 + 64 + 16)

static uint64_t u64_at(const unsigned char *b, size_t off)
{
	uint64_t v;
	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* The reply written for a STATX of unique 7, given chattr's `flags`. */
static bool reply_for(unsigned flags, unsigned char *out, size_t cap)
{
	unsigned char req[sizeof(struct fuse_in_header) + 24] = {0};
	struct fuse_in_header in = {.len = sizeof(req), .opcode = FUSE_STATX_OP, .unique = 7};
	memcpy(req, &in, sizeof(in));
	vy_statx_request(req, (ssize_t)sizeof(req));
	memcpy(&in, req, sizeof(in));
	CHECK_EQ(in.opcode, FUSE_GETATTR);
	struct timespec bt = {.tv_sec = 1234, .tv_nsec = 5};
	vy_statx_of(&bt, flags);
	struct fuse_out_header hdr = {.len = sizeof(hdr) + sizeof(struct fuse_attr_out), .unique = 7};
	struct fuse_attr_out ao = {.attr = {.mode = S_IFREG | 0644, .nlink = 1, .size = 3}};
	struct iovec iov[2] = {{&hdr, sizeof(hdr)}, {&ao, sizeof(ao)}};
	int p[2];
	if (pipe(p) != 0)
		return false;
	ssize_t res = 0;
	bool took = vy_statx_reply(p[1], iov, 2, &res);
	ssize_t n = read(p[0], out, cap);
	close(p[0]);
	close(p[1]);
	CHECK(took);
	CHECK_EQ(res, sizeof(hdr) + sizeof(ao)); /* what libfuse checks it sent */
	return n == (ssize_t)(sizeof(hdr) + 288);
}

static void statx_reports_chattr_flags_as_tmpfs(void)
{
	unsigned char out[512];
	const uint64_t three = STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE | STATX_ATTR_NODUMP;
	CHECK(reply_for(FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL, out, sizeof(out)));
	const unsigned char *body = out + sizeof(struct fuse_out_header);
	CHECK_EQ(u64_at(body, OUT_ATTRS), STATX_ATTR_APPEND | STATX_ATTR_NODUMP);
	CHECK_EQ(u64_at(body, OUT_MASK), three);
	CHECK_EQ(u64_at(body, OUT_BTIME), 1234);
	CHECK(reply_for(FS_IMMUTABLE_FL, out, sizeof(out)));
	CHECK_EQ(u64_at(body, OUT_ATTRS), STATX_ATTR_IMMUTABLE);
	CHECK(reply_for(0, out, sizeof(out)));
	CHECK_EQ(u64_at(body, OUT_ATTRS), 0);
	CHECK_EQ(u64_at(body, OUT_MASK), three);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(statx_reports_chattr_flags_as_tmpfs),
	};
	return vy_test_main("statx", cases, sizeof(cases) / sizeof(cases[0]));
}
