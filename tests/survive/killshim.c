/* LD_PRELOAD shim for keeper_test: kills a vyrefs daemon at chosen points,
 * so a takeover happens where the test wants it. Loaded into every process
 * of the mount (the keeper passes its environment on); each part acts only
 * where it matches.
 *  KILLSHIM_OPCODE=N KILLSHIM_NAME=S KILLSHIM_ARM=FILE: a daemon that has
 *    just read a FUSE request of opcode N that carries the name S (empty:
 *    any; in a WRITE: the written text, with no NUL) SIGKILLs itself, once FILE exists; it removes FILE first, so only
 *    one dies. With KILLSHIM_AT=reply it dies instead as it is about to
 *    write that request's reply: the change made and kept, not answered;
 *    with KILLSHIM_AT=replied, just after it wrote it: answered, and dead
 *    before anyone acts on the answer (a socket's name read, not reached).
 *  KILLSHIM_ADOPT=1: every successor (vyrefs --adopt) SIGKILLs itself as
 *    it starts.
 *  KILLSHIM_IO=FILE: a daemon SIGKILLs itself at its first pread or pwrite
 *    of a copy's thread (vy-copy: the serving daemon's, never a standby's
 *    or the keeper's own I/O) once FILE exists (removed first): `vyrefs
 *    cp`'s copy, half done.
 *  KILLSHIM_FSYNC=FILE: a process SIGKILLs itself at its first fsync once
 *    FILE exists (removed first): a backing mount's write-back whose bytes
 *    are in DIR's file, neither fsynced nor marked written (tier_test).
 *  KILLSHIM_FSYNC_GATE=FILE: a process that comes to an fsync once FILE
 *    exists (removed first) makes FILE.held and waits there until
 *    FILE.open exists (60 s at most): a backing mount's write-back held
 *    at DIR's fsync, its bytes written (tier_test).
 *  KILLSHIM_PREAD_HOLD=FILE: a pread of FILE (an fd that names it, as a
 *    copy's of its client's source) makes FILE.held and waits until
 *    FILE.open exists (60 s at most): a copy stuck in its client's file
 *    (a filesystem that does not answer).
 *  KILLSHIM_PWRITE_GATE=FILE KILLSHIM_PWRITE_UNDER=DIR/: a pwrite to a
 *    file under DIR/ once FILE exists (removed first) makes FILE.held and
 *    waits until FILE.open exists (60 s at most): a backing mount's
 *    write-back between its read-back and DIR's write (tier_test).
 *  KILLSHIM_AFTER_RENAME=FILE: a process SIGKILLs itself just after a
 *    renameat2 returned 0, once FILE exists (removed first): a backing
 *    mount's rename made in DIR, not yet in the namespace (tier).
 *  KILLSHIM_AFTER_MAKE=FILE: a process SIGKILLs itself just after a
 *    mkdirat, symlinkat, mknodat or linkat returned 0, or an fchmod (a backing
 *    mount's create: after its O_CREAT), once FILE exists (removed first):
 *    a name made in DIR, not yet in the namespace nor answered (tier).
 *  KILLSHIM_FDS=FILE KILLSHIM_FDS_TYPE=stream|seqpacket: a process
 *    SIGKILLs itself at its first sendmsg that passes fds on a socket of
 *    that type once FILE exists (removed first): a MAP's reply to its
 *    client (stream), or a client socket on its way to the keeper
 *    (seqpacket).
 *  KILLSHIM_DROP=FILE: a process SIGKILLs itself right after it sent its
 *    keeper a DROP (memory freed: the keeper lets go of its slot), once
 *    FILE exists (removed first).
 *  KILLSHIM_RECVFD=FILE: a process SIGKILLs itself as a recvmsg on a
 *    stream socket hands it fds, once FILE exists (removed first): a
 *    daemon that dies holding a client's fd of its own mount, whose close
 *    at exit waits on the mount (FLUSH).
 *  KILLSHIM_HOLD=FILE: a successor (vyrefs --adopt) makes FILE.held at its
 *    first fuse_session_receive_buf (its replayed INIT, or its session
 *    loop's first read), then waits there until FILE exists (60 s at most):
 *    a takeover held before it serves the kernel. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../keeper/wire.h" /* (built without -I.: Makefile) */
#include "shim_adopt.h"

static bool successor; /* this process is vyrefs --adopt */

__attribute__((constructor)) static void at_start(void)
{
	if (!getenv("KILLSHIM_ADOPT") && !getenv("KILLSHIM_HOLD"))
		return;
	successor = shim_is_successor();
	if (successor && getenv("KILLSHIM_ADOPT"))
		kill(getpid(), SIGKILL);
}

/* Make `path`.held, then wait until `open` exists, 60 s at most. */
static void hold_until(const char *path, const char *open_when)
{
	char mark[4096];
	snprintf(mark, sizeof(mark), "%s.held", path);
	int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 6000 && access(open_when, F_OK) != 0; i++)
		usleep(10000);
}

/* KILLSHIM_FSYNC_GATE: held until FILE.open exists. */
static void hold_at(const char *gate)
{
	char open_when[4096];
	snprintf(open_when, sizeof(open_when), "%s.open", gate);
	hold_until(gate, open_when);
}

/* KILLSHIM_HOLD (libfuse's, declared here: the shim needs no libfuse). */
struct fuse_session;
struct fuse_buf;
int fuse_session_receive_buf(struct fuse_session *se, struct fuse_buf *buf)
{
	static int (*real)(struct fuse_session *, struct fuse_buf *);
	static atomic_bool held;
	if (!real)
		real = (int (*)(struct fuse_session *, struct fuse_buf *))dlsym(RTLD_NEXT, "fuse_session_receive_buf");
	const char *hold = getenv("KILLSHIM_HOLD");
	if (successor && hold && !atomic_exchange(&held, true))
		hold_until(hold, hold);
	return real(se, buf);
}

/* KILLSHIM_IO: die now if armed and this is a copy's thread (the arm
 * removed, so one dies). */
static void io_armed(void)
{
	const char *arm = getenv("KILLSHIM_IO");
	char name[17] = "";
	if (arm && prctl(PR_GET_NAME, name) == 0 && !strcmp(name, "vy-copy") && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);
	if (!real)
		real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
	io_armed();
	const char *hold = getenv("KILLSHIM_PREAD_HOLD");
	char link[64], path[4096];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = hold ? readlink(link, path, sizeof(path) - 1) : -1;
	if (n > 0 && (path[n] = '\0', !strcmp(path, hold))) {
		char open_when[4096];
		snprintf(open_when, sizeof(open_when), "%s.open", hold);
		hold_until(hold, open_when);
	}
	return real(fd, buf, len, off);
}

int renameat2(int from, const char *name, int to, const char *newname, unsigned flags)
{
	static int (*real)(int, const char *, int, const char *, unsigned);
	if (!real)
		real = (int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2");
	int rc = real(from, name, to, newname, flags);
	const char *arm = getenv("KILLSHIM_AFTER_RENAME");
	if (rc == 0 && arm && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
	return rc;
}

/* KILLSHIM_AFTER_MAKE: die now if `rc` is a success and it is armed. */
static int made(int rc)
{
	const char *arm = getenv("KILLSHIM_AFTER_MAKE");
	if (rc == 0 && arm && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
	return rc;
}

int mkdirat(int at, const char *name, mode_t mode)
{
	static int (*real)(int, const char *, mode_t);
	if (!real)
		real = (int (*)(int, const char *, mode_t))dlsym(RTLD_NEXT, "mkdirat");
	return made(real(at, name, mode));
}

int symlinkat(const char *target, int at, const char *name)
{
	static int (*real)(const char *, int, const char *);
	if (!real)
		real = (int (*)(const char *, int, const char *))dlsym(RTLD_NEXT, "symlinkat");
	return made(real(target, at, name));
}

int mknodat(int at, const char *name, mode_t mode, dev_t rdev)
{
	static int (*real)(int, const char *, mode_t, dev_t);
	if (!real)
		real = (int (*)(int, const char *, mode_t, dev_t))dlsym(RTLD_NEXT, "mknodat");
	return made(real(at, name, mode, rdev));
}

int linkat(int at, const char *name, int to, const char *newname, int flags)
{
	static int (*real)(int, const char *, int, const char *, int);
	if (!real)
		real = (int (*)(int, const char *, int, const char *, int))dlsym(RTLD_NEXT, "linkat");
	return made(real(at, name, to, newname, flags));
}

int fchmod(int fd, mode_t mode)
{
	static int (*real)(int, mode_t);
	if (!real)
		real = (int (*)(int, mode_t))dlsym(RTLD_NEXT, "fchmod");
	return made(real(fd, mode));
}

int fsync(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	const char *arm = getenv("KILLSHIM_FSYNC");
	if (arm && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
	const char *gate = getenv("KILLSHIM_FSYNC_GATE");
	if (gate && unlink(gate) == 0)
		hold_at(gate);
	return real(fd);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	static ssize_t (*real)(int, const void *, size_t, off_t);
	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
	io_armed();
	const char *gate = getenv("KILLSHIM_PWRITE_GATE"), *under = getenv("KILLSHIM_PWRITE_UNDER");
	char link[64], path[4096];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = gate && under ? readlink(link, path, sizeof(path) - 1) : -1;
	if (n > 0 && (path[n] = '\0', !strncmp(path, under, strlen(under))) && unlink(gate) == 0)
		hold_at(gate);
	return real(fd, buf, len, off);
}

/* KILLSHIM_DROP: whether `mh` is a DROP to the keeper (keeper/wire.h). */
static bool keeper_drop(int fd, const struct msghdr *mh)
{
	int type = 0;
	socklen_t len = sizeof(type);
	const vy_keeper_msg *m = mh->msg_iovlen ? mh->msg_iov[0].iov_base : NULL;
	return m && mh->msg_iov[0].iov_len >= sizeof(*m) && m->magic == VY_KEEPER_MAGIC && m->op == VY_KEEPER_DROP &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET;
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	if (!real)
		real = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	const char *arm = getenv("KILLSHIM_FDS"), *want = getenv("KILLSHIM_FDS_TYPE");
	int type = 0;
	socklen_t len = sizeof(type);
	if (arm && want && mh->msg_controllen && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
	    type == (!strcmp(want, "seqpacket") ? SOCK_SEQPACKET : SOCK_STREAM) && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
	const char *drop = getenv("KILLSHIM_DROP");
	if (drop && keeper_drop(fd, mh) && access(drop, F_OK) == 0) {
		ssize_t n = real(fd, mh, flags);
		if (unlink(drop) == 0)
			kill(getpid(), SIGKILL);
		return n;
	}
	return real(fd, mh, flags);
}

ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, struct msghdr *, int);
	if (!real)
		real = (ssize_t (*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
	ssize_t n = real(fd, mh, flags);
	const char *arm = getenv("KILLSHIM_RECVFD");
	int type = 0;
	socklen_t len = sizeof(type);
	if (arm && n > 0 && mh->msg_controllen && CMSG_FIRSTHDR(mh) && CMSG_FIRSTHDR(mh)->cmsg_type == SCM_RIGHTS &&
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM && unlink(arm) == 0)
		kill(getpid(), SIGKILL);
	return n;
}

/* KILLSHIM_AT=reply: the request this thread read, to die at its reply
 * (replied: right after it). */
static __thread uint64_t doomed;
static __thread bool after_reply;

ssize_t writev(int fd, const struct iovec *iov, int count)
{
	static ssize_t (*real)(int, const struct iovec *, int);
	if (!real)
		real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
	if (doomed && count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
	    ((const struct fuse_out_header *)iov[0].iov_base)->unique == doomed) {
		if (after_reply)
			real(fd, iov, count);
		kill(getpid(), SIGKILL);
	}
	return real(fd, iov, count);
}

ssize_t read(int fd, void *buf, size_t len)
{
	static ssize_t (*real)(int, void *, size_t);
	if (!real)
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	ssize_t n = real(fd, buf, len);
	const char *op = getenv("KILLSHIM_OPCODE"), *name = getenv("KILLSHIM_NAME"), *arm = getenv("KILLSHIM_ARM");
	if (!op || !name || !arm || n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	const struct fuse_in_header *in = buf;
	size_t nlen = strlen(name), with_nul = nlen + (in->opcode != FUSE_WRITE);
	if (in->len != (uint32_t)n || in->opcode != (uint32_t)atoi(op) ||
	    (nlen && !memmem(in + 1, (size_t)n - sizeof(*in), name, with_nul)))
		return n;
	if (unlink(arm) != 0) /* not armed, or another took it */
		return n;
	const char *at = getenv("KILLSHIM_AT");
	if (at && (!strcmp(at, "reply") || !strcmp(at, "replied"))) {
		doomed = in->unique; /* dies at the reply, or after it */
		after_reply = !strcmp(at, "replied");
	}
	else
		kill(getpid(), SIGKILL); /* dies holding the request */
	return n;
}
