/* tkfs: the daemon of the takeover probe, a libfuse low-level filesystem
 * with a root directory and two files whose content is a counter:
 *   /counter  answered at once;
 *   /stall    a first READ at offset 0 stalls forever (the daemon read the
 *             request and never answers), so the driver can kill it there;
 *             the same request resent after a takeover is answered.
 * Every READ at offset 0 answered adds one to the counter, which lives in the
 * state memfd and so outlives the daemon.
 *
 *   tkfs mount MOUNTPOINT GEN SOCK EVFD   mount, hand /dev/fuse to the keeper
 *   tkfs adopt MOUNTPOINT GEN SOCK EVFD   take /dev/fuse from the keeper, no mount
 *
 * The adopting daemon's libfuse session sees a synthetic INIT (the kernel's
 * own, kept in the region) through the custom io's read hook; its reply is
 * swallowed by the write hook. Then FUSE_NOTIFY_RESEND asks the kernel to
 * queue again every request the dead daemon had read and not answered.
 * TKFS_NO_RESEND=1 in the environment leaves the notification out (the
 * control: the stalled reader then waits until the driver gives up). */
#define FUSE_USE_VERSION 312
#include "tk.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#ifndef FUSE_NOTIFY_RESEND
#define FUSE_NOTIFY_RESEND 7 /* Linux 6.9; Debian 12's headers stop at 7.38 */
#endif
#define TK_UNIQUE_RESEND (1ULL << 63) /* the kernel marks resent requests so */
#define TK_HAS_RESEND_FLAGS2 (1u << 7) /* FUSE_HAS_RESEND, bit 39 of the INIT flags */
#define SYNTH_UNIQUE 0x5e5e5e5e5e5e5e5eULL /* even, and never one of the kernel's */
#define FILE_LEN 48
#define STABLE_FH 0x7f00d /* a handle is an id, the same in every generation */

static struct tk_state *st;
static int evfd = -1, fusefd = -1;
static unsigned gen;
static bool adopting;
static int reads;              /* calls of the read hook */
static uint64_t cur_unique;    /* the request being handled (one thread) */
static uint64_t init_unique;   /* the kernel's INIT, in the first generation */
static bool answered_first;

static void content(char *buf)
{
	uint64_t n = atomic_fetch_add(&st->counter, 1) + 1;
	int len = snprintf(buf, FILE_LEN + 1, "count=%010llu gen=%03u pid=%08d", (unsigned long long)n,
			   gen, (int)getpid());
	memset(buf + len, ' ', (size_t)(FILE_LEN - 1 - len));
	buf[FILE_LEN - 1] = '\n';
}

static int fill_attr(fuse_ino_t ino, struct stat *s)
{
	memset(s, 0, sizeof(*s));
	s->st_ino = ino;
	if (ino == 1) {
		s->st_mode = S_IFDIR | 0755;
		s->st_nlink = 2;
	} else if (ino == 2 || ino == 3) {
		s->st_mode = S_IFREG | 0444;
		s->st_nlink = 1;
		s->st_size = FILE_LEN;
	} else {
		return ENOENT;
	}
	return 0;
}

static void tk_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = {0};
	fuse_ino_t ino = parent != 1 ? 0 : !strcmp(name, "counter") ? 2 : !strcmp(name, "stall") ? 3 : 0;
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = ino;
	e.generation = 1;
	fill_attr(ino, &e.attr);
	fuse_reply_entry(req, &e); /* timeouts 0: every stat reaches the daemon */
}

static void tk_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat s;
	int err = fill_attr(ino, &s);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &s, 0);
}

static void tk_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != 2 && ino != 3) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->fh = STABLE_FH;
	fi->direct_io = 1; /* every read reaches the daemon */
	fuse_reply_open(req, fi);
}

static void tk_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	if (fi->fh != STABLE_FH) {
		fuse_reply_err(req, EBADF); /* a handle the successor does not know */
		return;
	}
	if (off != 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (ino == 3 && !(cur_unique & TK_UNIQUE_RESEND)) {
		tk_event(evfd, "stalled gen=%u pid=%d unique=%llu t=%llu", gen, (int)getpid(),
			 (unsigned long long)cur_unique, (unsigned long long)tk_now_ns());
		for (;;)
			pause(); /* read, never answered: the driver kills us here */
	}
	char buf[FILE_LEN + 1];
	content(buf);
	fuse_reply_buf(req, buf, size < FILE_LEN ? size : FILE_LEN);
}

static void tk_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = tk_lookup,
	.getattr = tk_getattr,
	.open = tk_open,
	.read = tk_read,
	.release = tk_release,
};

/* The successor's first read is the synthetic INIT; its second first asks
 * the kernel to resend. The first daemon keeps the kernel's INIT. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	reads++;
	if (adopting && reads == 1) {
		if (st->init_in_len < sizeof(struct fuse_in_header) || st->init_in_len > len) {
			errno = EPROTO;
			return -1;
		}
		memcpy(buf, st->init_in, st->init_in_len);
		((struct fuse_in_header *)buf)->unique = SYNTH_UNIQUE;
		tk_event(evfd, "synthetic-init gen=%u t=%llu", gen, (unsigned long long)tk_now_ns());
		return st->init_in_len;
	}
	if (adopting && reads == 2 && getenv("TKFS_NO_RESEND")) {
		tk_event(evfd, "resend gen=%u rc=0 skipped=1 t=%llu", gen, (unsigned long long)tk_now_ns());
	} else if (adopting && reads == 2) {
		/* the notification is a header alone: unique 0, the code in `error` */
		struct fuse_out_header oh = {.len = sizeof(oh), .error = FUSE_NOTIFY_RESEND, .unique = 0};
		ssize_t w = write(fd, &oh, sizeof(oh));
		tk_event(evfd, "resend gen=%u rc=%zd errno=%d t=%llu", gen, w, w < 0 ? errno : 0,
			 (unsigned long long)tk_now_ns());
	}
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;
	if (n < (ssize_t)sizeof(*in))
		return n;
	cur_unique = in->unique;
	if (!adopting && in->opcode == FUSE_INIT && (size_t)n <= TK_INIT_MAX) {
		memcpy(st->init_in, buf, (size_t)n);
		st->init_in_len = (uint32_t)n;
		init_unique = in->unique;
		const struct fuse_init_in *arg = (const void *)(in + 1);
		tk_event(evfd, "init gen=%u proto=%u.%u flags=0x%x flags2=0x%x has_resend=%d", gen, arg->major,
			 arg->minor, arg->flags, arg->flags2, (arg->flags2 & TK_HAS_RESEND_FLAGS2) != 0);
	}
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	const struct fuse_out_header *out = iov[0].iov_base;
	size_t body = 0;
	for (int i = 1; i < count; i++)
		body += iov[i].iov_len;
	if (adopting && out->unique == SYNTH_UNIQUE) {
		/* libfuse's answer to our INIT: the kernel never asked, so it
		 * goes nowhere; it must match what the first daemon sent */
		bool same = count == 2 && out->error == 0 && body == st->init_out_len &&
			    !memcmp(iov[1].iov_base, st->init_out, body);
		tk_event(evfd, "init-swallowed gen=%u same_as_first=%d error=%d", gen, same, out->error);
		return (ssize_t)(iov[0].iov_len + body);
	}
	if (!adopting && out->unique == init_unique && count == 2 && body <= TK_INIT_MAX) {
		memcpy(st->init_out, iov[1].iov_base, body);
		st->init_out_len = (uint32_t)body;
		const struct fuse_init_out *o = iov[1].iov_base;
		tk_event(evfd, "init-reply gen=%u flags=0x%x flags2=0x%x max_write=%u max_pages=%u", gen, o->flags,
			 o->flags2, o->max_write, o->max_pages);
	}
	ssize_t w = writev(fd, iov, count);
	if (out->unique != 0 && !answered_first) {
		answered_first = true;
		tk_event(evfd, "first-answer gen=%u unique=%llu resent=%d rc=%zd t=%llu", gen,
			 (unsigned long long)out->unique, (out->unique & TK_UNIQUE_RESEND) != 0, w,
			 (unsigned long long)tk_now_ns());
	} else if (out->unique & TK_UNIQUE_RESEND) {
		tk_event(evfd, "resent-answer gen=%u unique=%llu rc=%zd t=%llu", gen, (unsigned long long)out->unique,
			 w, (unsigned long long)tk_now_ns());
	}
	return w;
}

int main(int argc, char **argv)
{
	if (argc != 6 || (strcmp(argv[1], "mount") && strcmp(argv[1], "adopt"))) {
		fprintf(stderr, "usage: tkfs mount|adopt MOUNTPOINT GEN SOCK EVFD\n");
		return 2;
	}
	uint64_t t0 = tk_now_ns();
	adopting = !strcmp(argv[1], "adopt");
	gen = (unsigned)atoi(argv[3]);
	int sock = atoi(argv[4]);
	evfd = atoi(argv[5]);
	int fds[2];
	if (tk_recv_fds(sock, fds, adopting ? 2 : 1) != 0) {
		fprintf(stderr, "tkfs: no fds from the keeper\n");
		return 1;
	}
	st = mmap(NULL, TK_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (st == MAP_FAILED) {
		perror("tkfs: map state");
		return 1;
	}
	if (adopting && (st->magic != TK_MAGIC || st->version != TK_VERSION)) {
		fprintf(stderr, "tkfs: state region of another format (magic %x version %u); leaving it\n",
			st->magic, st->version);
		return 1;
	}
	st->magic = TK_MAGIC;
	st->version = TK_VERSION;

	char *args_v[] = {argv[0], NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, args_v);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	static const struct fuse_custom_io io = {.read = io_read, .writev = io_writev};
	if (adopting) {
		fusefd = fds[1];
	} else {
		if (fuse_session_mount(se, argv[2]) != 0)
			return 1;
		fusefd = fuse_session_fd(se);
		if (tk_send_fds(sock, &fusefd, 1) != 0) {
			perror("tkfs: hand /dev/fuse to the keeper");
			fuse_session_unmount(se);
			return 1;
		}
	}
	close(sock);
	if (fuse_session_custom_io(se, &io, fusefd) != 0)
		return 1;
	tk_event(evfd, "serving gen=%u pid=%d mode=%s start=%llu t=%llu", gen, (int)getpid(), argv[1],
		 (unsigned long long)t0, (unsigned long long)tk_now_ns());
	int rc = fuse_session_loop(se);
	tk_event(evfd, "loop-end gen=%u rc=%d", gen, rc);
	fuse_session_destroy(se); /* closes /dev/fuse; the keeper still holds it */
	return 0;
}
