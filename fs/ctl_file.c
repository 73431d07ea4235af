/* The control file: text in, sequences run, replies and a log out. */
#include "fs/file.h"
#include "fs/backed.h"
#include "fs/ctl_file.h"
#include "fs/kind.h"
#include "fs/seqlog.h"
#include "fs/readahead.h"
#include "fs/wbehind.h"
#include "ctl/exec.h"
#include "daemon/log.h"
#include "persist/request.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PENDING_MAX (1u << 20) /* unfinished text one open file may hold */
/* Line numbers stop short of INT_MAX by what one write's text may add (the
 * parser counts on from next_line): a file written past that many lines
 * says this number from then on, never one that wrapped (undefined, and a
 * control file's state the kept state refuses: issue "survive 2"). */
#define LINE_MOST (INT_MAX - (int)PENDING_MAX - 1)

/* ---- the executor's view of files --------------------------------------- */

static vy_err files_lookup(void *ctx, const char *path, void **file, uint64_t *ino, vy_error *e)
{
	vy_fs *fs = ctx;
	char *copy = strdup(path);
	if (!copy)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot copy a path");
	pthread_mutex_lock(&fs->ns);
	vy_inode *at = vy_u64map_get(&fs->inodes, FUSE_ROOT_ID);
	vy_err rc = VY_OK;
	char *save = NULL;
	for (char *part = strtok_r(copy, "/", &save); part && rc == VY_OK; part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, ".") || !strcmp(part, "..")) {
			rc = vy_fail(e, VY_EINVAL, "name files from the mount root without . or ..",
				     "path '%s' has . or ..", path);
		} else if (at->kind != VY_DIR) {
			rc = vy_fail(e, VY_EINVAL, "name a file under directories only", "'%s': not a directory on the way",
				     path);
		} else {
			vy_dirent *d = vy_dir_find(&at->dir, part);
			vy_inode *dir = at;
			at = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
			if (!at && fs->tier)
				at = vy_backed_lookup(fs, dir, part); /* backing=DIR: a name not looked up yet */
			if (!at)
				rc = vy_fail(e, VY_ENOENT, "create it first (paths are relative to the mount root)",
					     "no file '%s'", path);
		}
	}
	if (rc == VY_OK && at->kind != VY_FILE)
		rc = vy_fail(e, VY_EINVAL, "name a regular file: only those hold buffers", "'%s' is not a regular file",
			     path);
	if (rc == VY_OK) {
		at->opens++; /* held like an open file until released */
		*file = at;
		*ino = at->ino;
	}
	pthread_mutex_unlock(&fs->ns);
	free(copy);
	return rc;
}

/* chattr +a and +i hold for sequences as for write(2): EPERM. */
static vy_err files_writable(void *ctx, void *file, const char *path, vy_error *e)
{
	vy_fs *fs = ctx;
	vy_inode *in = file;
	(void)fs;
	pthread_mutex_lock(&in->meta); /* chattr's flags are kept under meta */
	unsigned flags = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	if (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL))
		return vy_fail(e, VY_EPERM, flags & FS_IMMUTABLE_FL ? "chattr -i it first (as root)" : "chattr -a it first (as root)",
			       "'%s' is %s: a sequence may not write it", path,
			       flags & FS_IMMUTABLE_FL ? "immutable (chattr +i)" : "append-only (chattr +a)");
	return VY_OK;
}

/* backing=DIR: a sequence reaches every byte: all of it loaded. */
static vy_err files_ready(void *ctx, void *file, vy_error *e)
{
	vy_fs *fs = ctx;
	vy_inode *in = file;
	if (!in->tier)
		return VY_OK;
	if (vy_backed_prepare(fs, in) != 0)
		return vy_fail(e, VY_EBUSY, "write the sequence again", "inode %llu is gone from the backing directory",
			       (unsigned long long)in->ino);
	return vy_backed_load_room(fs, in, 0, in->size, e);
}

static vy_err files_share(void *ctx, void *file, vy_error *e)
{
	vy_fs *fs = ctx;
	vy_inode *in = file;
	/* Most files are shareable already (large, or moved before): then no
	 * write lock on the way of every sequence. A buffer replaced after
	 * this look is caught by the check under the read locks (exec.c). */
	pthread_rwlock_rdlock(&in->lock);
	bool done = in->size <= in->cap && (!in->buf || vy_store_shareable(vy_fs_core(fs, in)->store, in->buf));
	pthread_rwlock_unlock(&in->lock);
	if (done)
		return VY_OK;
	pthread_rwlock_wrlock(&in->lock);
	vy_err rc = VY_OK;
	/* Nothing else may use the buffer while it moves or gets memory. */
	if (in->size > in->cap || (in->buf && !vy_store_shareable(vy_fs_core(fs, in)->store, in->buf)))
		rc = vy_file_share(fs, in, e);
	pthread_rwlock_unlock(&in->lock);
	return rc;
}

static void files_lock(void *ctx, void *file)
{
	(void)ctx;
	pthread_rwlock_rdlock(&((vy_inode *)file)->lock);
}

static void files_unlock(void *ctx, void *file)
{
	(void)ctx;
	pthread_rwlock_unlock(&((vy_inode *)file)->lock);
}

static vy_err files_state(void *ctx, void *file, vy_handle *handle, uint64_t *size, unsigned *dev, vy_error *e)
{
	vy_inode *in = file;
	*handle = in->buf;
	*size = in->size;
	*dev = in->dev;
	if (!vy_backed_present(in, 0, in->size)) /* given back between files_ready and the lock: rare */
		return vy_fail(e, VY_EBUSY, "write the sequence again (or pin the file: setfattr -n user.vyre.pin -v 1)",
			       "inode %llu's bytes went back to its backing directory while the sequence was prepared",
			       (unsigned long long)in->ino);
	return vy_wbehind_settle(ctx, in, e); /* kernels see every written byte */
}

static void files_written(void *ctx, void *file, uint64_t ino)
{
	vy_fs *fs = ctx;
	vy_inode *in = file;
	vy_inode_touch(in, true);
	vy_persist_inode(fs, in);
	/* Under the lock: a truncation to zero frees the readahead state. */
	pthread_rwlock_wrlock(&in->lock);
	vy_readahead_forget(in);
	vy_backed_suspect(fs, in); /* backing=DIR: what it wrote goes back */
	pthread_rwlock_unlock(&in->lock);
	/* The kernel may hold pages of the old bytes: drop them. -ENOENT
	 * means it holds nothing of this inode. */
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

static void files_release(void *ctx, void *file)
{
	vy_fs *fs = ctx;
	pthread_mutex_lock(&fs->ns);
	((vy_inode *)file)->opens--;
	vy_inode_reap(fs, file);
	pthread_mutex_unlock(&fs->ns);
}

/* ---- replies and the log ------------------------------------------------ */

/* The core's errno, except that every refusal of the sequence itself (an
 * unknown file or module, a range, a launch the backend cannot run) is
 * EINVAL, as the design gives write() four classes. */
static int errno_of(vy_err rc)
{
	int err = vy_err_errno(rc);
	return err == 0 || err == ENOSPC || err == EBUSY || err == EIO || err == ENOMEM || err == ETIMEDOUT ||
			       err == EINTR
		       ? err
		       : EINVAL;
}

/* Whole microseconds (the reply's figures): integer formatting, as %.0f of a
 * double costs a microsecond of its own on a launch that takes thirty. */
static unsigned long long whole_us(double us)
{
	return us > 0 && us < 1e18 ? (unsigned long long)(us + 0.5) : 0;
}

/* Set the open file's reply (and log it). */
static void answer(vy_fs *fs, vy_open *h, uint64_t seq, pid_t pid, vy_err rc, const vy_ctl_error *err,
		   const vy_ctl_result *res)
{
	char *text = NULL, *outcome = NULL;
	int n;
	if (rc == VY_OK) {
		char body[96];
		n = snprintf(body, sizeof(body), "steps=%" PRIu64 " device_us=%llu wall_us=%llu", res->steps,
			     whole_us(res->device_us), whole_us(res->wall_us));
		if (n >= 0 && (size_t)n < sizeof(body))
			n = asprintf(&outcome, "ok %s", body);
		else
			n = -1;
		if (n >= 0)
			n = asprintf(&text, "ok seq=%" PRIu64 " %s\n", seq, body);
	} else {
		n = asprintf(&outcome, "error line %d: %s", err->line, err->e.msg);
		if (n >= 0)
			n = asprintf(&text, "error seq=%" PRIu64 " line %d: %s\n", seq, err->line, err->e.msg);
	}
	if (n < 0) {
		free(outcome);
		return;
	}
	free(h->reply);
	h->reply = text;
	h->reply_len = (size_t)n;
	h->reply_pos = 0;
	vy_seqlog_add(&fs->seqlog, seq, pid, outcome);
	free(outcome);
	if (rc != VY_OK)
		vy_log(LOG_NOTICE, ".vyre/ctl: %s", err->e.msg);
}

/* The next line is n lines on. */
static void lines_on(vy_open *h, size_t n)
{
	if (h->next_line >= LINE_MOST || n >= (size_t)(LINE_MOST - h->next_line))
		h->next_line = LINE_MOST;
	else
		h->next_line += (int)n;
}

static void drop_pending(vy_open *h, size_t used)
{
	size_t lines = 0;
	for (size_t i = 0; i < used; i++)
		lines += h->pending[i] == '\n';
	lines_on(h, lines);
	memmove(h->pending, h->pending + used, h->plen - used);
	h->plen -= used;
}

/* In a successor (vy_ctlfile_adopt): the resend of the write whose
 * sequence the dead daemon was running is refused, not run twice, and so is
 * the first write after an unfinished statement it lost (with the rest of
 * its line). True: this write is answered, *result its errno. */
static bool refused_after_restart(vy_fs *fs, vy_open *h, const char *buf, size_t size, pid_t pid, int *result)
{
	vy_ctl_error err = {.line = h->next_line};
	uint64_t seq = 0;
	if (h->interrupted && h->interrupted == vy_persist_serving()) {
		h->interrupted = 0;
		seq = h->interrupted_seq; /* its own number: it is that sequence's answer */
		vy_fail(&err.e, VY_EDEVICE, "check the files it writes, and run it again if that is safe",
			"the daemon restarted while this sequence ran (a crash, a kill or vyrefs --upgrade): some of its "
			"steps may have run");
	} else if (h->lost_text) {
		vy_fail(&err.e, VY_EDEVICE, "write the statement again, whole",
			"the daemon restarted (a crash, a kill or vyrefs --upgrade) and lost the unfinished statement this "
			"file held (%u bytes): nothing of it ran, and this write is refused up to its first newline",
			h->lost_text);
		h->lost_text = 0;
		h->discard = !memchr(buf, '\n', size);
	} else {
		return false;
	}
	answer(fs, h, seq ? seq : vy_seqlog_next(&fs->seqlog), pid, VY_EDEVICE, &err, NULL);
	*result = EIO;
	return true;
}

int vy_ctlfile_write(vy_fs *fs, vy_open *h, const char *buf, size_t size, pid_t pid, const _Atomic uint32_t *stop)
{
	pthread_mutex_lock(&h->ctl);
	/* survive=on: what this write leaves goes with its answer, so the
	 * kernel's resend of it is answered, never run again. */
	vy_persist_with_answer(fs);
	int result = 0;
	uint64_t seq = 0;
	if (refused_after_restart(fs, h, buf, size, pid, &result))
		goto out;
	if (h->discard) {
		/* The rest of a line refused for its length is not statements. */
		const char *nl = memchr(buf, '\n', size);
		if (!nl)
			goto out;
		h->discard = false;
		lines_on(h, 1);
		size -= (size_t)(nl + 1 - buf);
		buf = nl + 1;
		if (!size)
			goto out;
	}
	if (h->plen + size > PENDING_MAX) {
		vy_ctl_error err = {.line = h->next_line};
		vy_fail(&err.e, VY_EINVAL, "end statements with a newline; a sequence may hold at most 1 MiB of text",
			"unfinished text over 1 MiB");
		answer(fs, h, vy_seqlog_next(&fs->seqlog), pid, VY_EINVAL, &err, NULL);
		drop_pending(h, h->plen);
		/* This write is refused whole; a line it leaves unfinished is
		 * dropped up to its newline in later writes too, or its rest
		 * would run as statements of its own. */
		h->discard = !memchr(buf, '\n', size);
		result = EINVAL;
		goto out;
	}
	char *p = realloc(h->pending, h->plen + size + 1);
	if (!p) {
		result = ENOMEM;
		goto out;
	}
	h->pending = p;
	memcpy(h->pending + h->plen, buf, size);
	h->plen += size;
	vy_ctl_plan plan;
	vy_ctl_error err;
	size_t used = 0;
	vy_err rc = vy_ctl_parse(h->pending, h->plen, h->next_line, &plan, &used, &err);
	if (rc == VY_OK && plan.ngroups == 0) {
		drop_pending(h, used); /* blanks and comments, or waiting text */
		vy_ctl_plan_free(&plan);
		goto out;
	}
	seq = vy_seqlog_next(&fs->seqlog);
	vy_ctl_result res = {0};
	if (rc == VY_OK) {
		/* Kept before it runs: a successor refuses this write's resend. */
		vy_persist_ctl(fs, h, vy_persist_serving(), seq, (uint32_t)(h->plen - used));
		vy_ctl_files files = {.ctx = fs,
				      .lookup = files_lookup,
				      .ready = files_ready,
				      .share = files_share,
				      .lock = files_lock,
				      .unlock = files_unlock,
				      .state = files_state,
				      .writable = files_writable,
				      .written = files_written,
				      .release = files_release,
				      .stop = stop};
		vy_ctl_device dev[VY_DEVICES_MAX];
		for (unsigned d = 0; d < fs->ndev; d++)
			dev[d] = (vy_ctl_device){fs->dev[d].core, fs->dev[d].modules, fs->dev[d].runner};
		vy_ctl_devices devs = {.dev = dev, .n = fs->ndev, .direct = fs->direct,
				       .move_hint = "setfattr -n user.vyre.device -v"};
		atomic_fetch_add(&fs->seqlog.running, 1);
		rc = vy_ctl_run(&devs, &files, &plan, &res, &err);
		atomic_fetch_sub(&fs->seqlog.running, 1);
	}
	vy_ctl_plan_free(&plan);
	answer(fs, h, seq, pid, rc, &err, &res);
	drop_pending(h, used);
	result = errno_of(rc);
out:
	vy_persist_ctl(fs, h, 0, seq, (uint32_t)h->plen);
	pthread_mutex_unlock(&h->ctl);
	return result;
}

int vy_ctlfile_flush(vy_fs *fs, vy_open *h, pid_t pid)
{
	pthread_mutex_lock(&h->ctl);
	int result = 0;
	if (h->plen) {
		vy_ctl_error err;
		vy_err rc = vy_ctl_parse_leftover(h->pending, h->plen, h->next_line, &err);
		if (rc != VY_OK) {
			answer(fs, h, vy_seqlog_next(&fs->seqlog), pid, rc, &err, NULL);
			result = errno_of(rc);
		}
		drop_pending(h, h->plen);
		vy_persist_ctl(fs, h, 0, 0, 0);
	}
	pthread_mutex_unlock(&h->ctl);
	return result;
}

void vy_ctlfile_adopt(vy_fs *fs, vy_open *h, uint64_t running, uint64_t seq, uint32_t pending, int next_line,
		      const char *reply, size_t reply_len)
{
	pthread_mutex_lock(&h->ctl);
	vy_seqlog_after(&fs->seqlog, seq);
	h->next_line = next_line < LINE_MOST ? next_line : LINE_MOST; /* the kept state's: 1 at least */
	h->interrupted = running;
	h->interrupted_seq = seq;
	h->lost_text = pending;
	char *text = NULL;
	int n = -1;
	if (running) /* its writer may read before the resend comes */
		n = asprintf(&text, "error seq=%" PRIu64 " line %d: the daemon restarted while this sequence ran (a crash, a "
				    "kill or vyrefs --upgrade): some of its steps may have run\n",
			     seq, next_line);
	else if (reply_len && (text = malloc(reply_len)))
		memcpy(text, reply, (size_t)(n = (int)reply_len));
	if (n >= 0) {
		free(h->reply);
		h->reply = text;
		h->reply_len = (size_t)n;
		h->reply_pos = 0;
	}
	pthread_mutex_unlock(&h->ctl);
}

size_t vy_ctlfile_read(vy_open *h, char *buf, size_t size)
{
	pthread_mutex_lock(&h->ctl);
	size_t n = 0;
	if (h->reply && h->reply_pos < h->reply_len) {
		n = h->reply_len - h->reply_pos < size ? h->reply_len - h->reply_pos : size;
		memcpy(buf, h->reply + h->reply_pos, n);
		h->reply_pos += n;
	}
	pthread_mutex_unlock(&h->ctl);
	return n;
}

/* The control file's table (kind.h): written in statements, read as the
 * reply of its open file's last sequence, never cached; its size is 0. */
static bool ctl_open(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi)
{
	(void)req;
	(void)fs;
	(void)h;
	fi->direct_io = 1; /* replies differ per open file: never cached */
	return true;
}

static void ctl_read(fuse_req_t req, vy_fs *fs, vy_open *h, size_t size, off_t off)
{
	(void)fs;
	(void)off;
	/* The reply of this file's last sequence, once; not by offset. */
	char reply[4096];
	fuse_reply_buf(req, reply, vy_ctlfile_read(h, reply, size < sizeof(reply) ? size : sizeof(reply)));
}

static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	atomic_store((_Atomic uint32_t *)data, 1);
}

static void ctl_write(fuse_req_t req, vy_fs *fs, vy_open *h, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	(void)off;
	(void)fi;
	/* A signal to the writer (FUSE sends INTERRUPT) stops its sequence
	 * at the next step; the write then fails with EINTR. */
	_Atomic uint32_t stop = 0;
	fuse_req_interrupt_func(req, on_interrupt, &stop);
	int err = vy_ctlfile_write(fs, h, buf, size, fuse_req_ctx(req)->pid, &stop);
	fuse_req_interrupt_func(req, NULL, NULL);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

/* An unfinished statement left at close is an error. */
static void ctl_flush(fuse_req_t req, vy_fs *fs, vy_open *h)
{
	fuse_reply_err(req, vy_ctlfile_flush(fs, h, fuse_req_ctx(req)->pid));
}

/* The control file takes no change (it is fixed) but one: `echo ... >
 * .vyre/ctl` truncates it to nothing, which is nothing to do. */
bool vy_ctl_truncated_only(fuse_req_t req, vy_fs *fs, vy_inode *in, off_t size, bool *resized)
{
	(void)fs;
	(void)in;
	*resized = false;
	if (size != 0)
		fuse_reply_err(req, EPERM);
	return size == 0;
}

const vy_kind_ops vy_ctl_kind = {
	.no_data = EINVAL,
	.uncached = true,
	.open = ctl_open,
	.read = ctl_read,
	.write = ctl_write,
	.flush = ctl_flush,
	.resize = vy_ctl_truncated_only,
};
