/* The session's hooks into persist/request.h (resend.h). One session per
 * process. */
#include "daemon/resend.h"
#include "daemon/session.h"
#include "persist/request.h"

#include <linux/fuse.h>
#include <stdbool.h>


static struct vy_fs *kept;

/* The requests whose outcome is not the same when run twice: a name made
 * or removed (EEXIST, ENOENT the second time), an xattr made or removed
 * (XATTR_CREATE, ENODATA), and what counts the kernel's references and
 * handles (one too many). Their changes wait for their reply and go into
 * the log with it. The others (write, setattr, fallocate, release, ...)
 * are kept at once and give the same answer when run again. */
static bool kept_with_answer(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_LOOKUP:
	case FUSE_MKNOD:
	case FUSE_MKDIR:
	case FUSE_SYMLINK:
	case FUSE_LINK:
	case FUSE_UNLINK:
	case FUSE_RMDIR:
	case FUSE_RENAME:
	case FUSE_RENAME2:
	case FUSE_CREATE: /* and FUSE_TMPFILE, which session.c hands libfuse as a create */
	case FUSE_OPEN:
	case FUSE_OPENDIR:
	case FUSE_SETXATTR:
	case FUSE_REMOVEXATTR:
		return true;
	default:
		return false;
	}
}

static void on_read(const struct fuse_in_header *in)
{
	vy_persist_request(kept, in->unique & ~FUSE_UNIQUE_RESEND, kept_with_answer(in->opcode));
}

static void on_reply(uint64_t unique, const struct iovec *iov, int count)
{
	vy_persist_reply(kept, unique & ~FUSE_UNIQUE_RESEND, iov, count);
}

static void on_sent(uint64_t unique)
{
	vy_persist_sent(kept, unique & ~FUSE_UNIQUE_RESEND);
}

static size_t on_resent(uint64_t unique, void *buf, size_t cap)
{
	return vy_persist_resent(kept, unique, buf, cap);
}

static const vy_session_hooks hooks = {.read = on_read, .reply = on_reply, .sent = on_sent, .resent = on_resent};

void vy_resend_hook(struct vy_fs *fs)
{
	kept = fs;
	vy_session_hook(&hooks);
}
