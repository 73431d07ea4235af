/* nullfs: a RAM-backed FUSE filesystem run with vyrefs' libfuse settings
 * (daemon/session.h). The benchmark uses it as the FUSE ceiling: the fastest a
 * FUSE filesystem with the same settings goes on this machine.
 *
 *   nullfs [-f] MOUNTPOINT [-o max_write=BYTES]
 *
 * Always in the foreground; SIGTERM or SIGINT unmounts. */
#include "daemon/session.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT 1.0 /* entry and attr timeouts, as vyrefs */
#define NAME_LEN 255
#define HBUCKETS 65536 /* fixed: chains stay short up to ~10^6 names */
#define MAX_FILE ((uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX)
#define FH(fi) ((struct node *)(uintptr_t)(fi)->fh)

struct node {
	fuse_ino_t ino;
	bool dir;            /* fixed at birth, read without locks */
	/* under ns: */
	struct node *parent; /* NULL for the root and once removed */
	char *name;
	struct node *hnext;  /* chain in htab, keyed by (parent, name) */
	size_t nkids;
	nlink_t nlink;
	uint64_t nlookup;    /* the kernel's references */
	unsigned nopen;      /* open file and directory handles */
	/* under lock: */
	pthread_rwlock_t lock;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime, ctime;
	char *data;
	size_t size, cap;
};

/* Lock order: ns, then one node's lock; two nodes' locks by ino. */
static pthread_mutex_t ns = PTHREAD_MUTEX_INITIALIZER;
static struct node **inodes; /* indexed by ino; inos are never reused */
static size_t ninodes, live;
static fuse_ino_t next_ino = FUSE_ROOT_ID;
static struct node *htab[HBUCKETS];
static atomic_size_t used;   /* bytes of file buffers */
static size_t limit;         /* 3/4 of RAM: past it ENOSPC, rather than the OOM killer */
static size_t max_write = 1048576;

/* Locking a valid lock cannot fail; if it does, stop loudly. */
static void must(int rc)
{
	if (rc) {
		fprintf(stderr, "nullfs: lock: %s\n", strerror(rc));
		abort();
	}
}
static void lock_ns(void) { must(pthread_mutex_lock(&ns)); }
static void unlock_ns(void) { must(pthread_mutex_unlock(&ns)); }
static void rd(struct node *n) { must(pthread_rwlock_rdlock(&n->lock)); }
static void wr(struct node *n) { must(pthread_rwlock_wrlock(&n->lock)); }
static void unl(struct node *n) { must(pthread_rwlock_unlock(&n->lock)); }

static struct timespec now(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_REALTIME, &t) != 0)
		t = (struct timespec){0};
	return t;
}

/* ---- namespace, ns held ---- */

static struct node *get(fuse_ino_t ino) { return ino < ninodes ? inodes[ino] : NULL; }

static struct node **bucket(fuse_ino_t parent, const char *name)
{
	uint64_t h = 14695981039346656037ull ^ parent; /* FNV-1a */
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return &htab[(h ^ (h >> 32)) % HBUCKETS];
}

static struct node *find(struct node *d, const char *name)
{
	for (struct node *n = *bucket(d->ino, name); n; n = n->hnext)
		if (n->parent == d && !strcmp(n->name, name))
			return n;
	return NULL;
}

/* The directory ino, if it is one and has not been removed. */
static int live_dir(fuse_ino_t ino, struct node **d)
{
	*d = get(ino);
	if (!*d || (ino != FUSE_ROOT_ID && !(*d)->parent))
		return ENOENT;
	return (*d)->dir ? 0 : ENOTDIR;
}

static void stamp(struct node *n, bool mtime)
{
	wr(n);
	n->ctime = now();
	if (mtime)
		n->mtime = n->ctime;
	unl(n);
}

static void link_in(struct node *d, struct node *n)
{
	struct node **b = bucket(d->ino, n->name);
	n->parent = d;
	n->hnext = *b;
	*b = n;
	d->nkids++;
	d->nlink += n->dir;
	stamp(d, true);
}

static void link_out(struct node *n)
{
	struct node *d = n->parent, **p = bucket(d->ino, n->name);
	while (*p != n)
		p = &(*p)->hnext;
	*p = n->hnext;
	d->nkids--;
	d->nlink -= n->dir;
	n->parent = NULL;
	stamp(d, true);
}

static void free_node(struct node *n)
{
	atomic_fetch_sub(&used, n->cap);
	must(pthread_rwlock_destroy(&n->lock));
	free(n->data);
	free(n->name);
	free(n);
}

/* A removed node lives on until the kernel forgets it and the last handle closes. */
static void maybe_free(struct node *n)
{
	if (n->nlink || n->nlookup || n->nopen)
		return;
	inodes[n->ino] = NULL;
	live--;
	free_node(n);
}

static void remove_node(struct node *n)
{
	link_out(n);
	n->nlink = 0;
	stamp(n, false);
	maybe_free(n);
}

static void forget_one(fuse_ino_t ino, uint64_t count)
{
	struct node *n = get(ino);
	if (n) {
		n->nlookup -= count < n->nlookup ? count : n->nlookup;
		maybe_free(n);
	}
}

static struct node *new_node(const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	if (next_ino >= ninodes) {
		size_t cap = ninodes ? ninodes * 2 : 1024;
		struct node **t = realloc(inodes, cap * sizeof(*t));
		if (!t)
			return NULL;
		memset(t + ninodes, 0, (cap - ninodes) * sizeof(*t));
		inodes = t;
		ninodes = cap;
	}
	struct node *n = calloc(1, sizeof(*n));
	char *copy = name ? strdup(name) : NULL;
	if (!n || (name && !copy) || pthread_rwlock_init(&n->lock, NULL) != 0) {
		free(copy);
		free(n);
		return NULL;
	}
	n->ino = next_ino++;
	n->dir = S_ISDIR(mode);
	n->name = copy;
	n->nlink = n->dir ? 2 : 1;
	n->mode = mode;
	n->uid = uid;
	n->gid = gid;
	n->atime = n->mtime = n->ctime = now();
	inodes[n->ino] = n;
	live++;
	return n;
}

/* ---- data, the node's lock held for writing ---- */

/* Room for need bytes. Doubling keeps appends amortised O(1); near the
 * limit take just what is needed. */
static int reserve(struct node *n, uint64_t need)
{
	if (need <= n->cap)
		return 0;
	if (need > MAX_FILE)
		return EFBIG;
	size_t cap = n->cap ? n->cap : 4096;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? (size_t)need : cap * 2;
	for (;; cap = (size_t)need) {
		size_t was = atomic_fetch_add(&used, cap - n->cap);
		if (was + (cap - n->cap) <= limit && was + (cap - n->cap) >= was)
			break;
		atomic_fetch_sub(&used, cap - n->cap);
		if (cap == need)
			return ENOSPC;
	}
	char *p = realloc(n->data, cap);
	if (!p) {
		atomic_fetch_sub(&used, cap - n->cap);
		return ENOMEM;
	}
	n->data = p;
	n->cap = cap;
	return 0;
}

/* Growth reads back as zeros: bytes past size are not kept zero, so zero them here. */
static int resize(struct node *n, uint64_t size)
{
	int err = reserve(n, size);
	if (err)
		return err;
	if (size > n->size)
		memset(n->data + n->size, 0, size - n->size);
	else if (size < n->cap / 4) { /* give most of it back, if the allocator lets us */
		char *p = size ? realloc(n->data, size) : NULL;
		if (p || !size) {
			if (!size)
				free(n->data);
			atomic_fetch_sub(&used, n->cap - size);
			n->data = p;
			n->cap = size;
		}
	}
	n->size = size;
	return 0;
}

/* Store len bytes at off, from src or, copying within the file, from
 * *self_off: read only after reserve may have moved the buffer. */
static int put(struct node *n, const char *src, size_t len, off_t off, const off_t *self_off)
{
	if (off < 0)
		return EINVAL;
	if (len > MAX_FILE || (uint64_t)off > MAX_FILE - len)
		return EFBIG;
	if (len == 0)
		return 0;
	int err = reserve(n, (uint64_t)off + len);
	if (err)
		return err;
	if ((uint64_t)off > n->size)
		memset(n->data + n->size, 0, (uint64_t)off - n->size);
	memmove(n->data + off, self_off ? n->data + *self_off : src, len); /* ranges may overlap in one file */
	if ((uint64_t)off + len > n->size)
		n->size = (uint64_t)off + len;
	n->mtime = n->ctime = now();
	return 0;
}

static void fill(struct node *n, nlink_t nlink, struct stat *st) /* n's lock held */
{
	*st = (struct stat){.st_ino = n->ino, .st_mode = n->mode, .st_nlink = nlink, .st_uid = n->uid,
			    .st_gid = n->gid, .st_size = n->dir ? 4096 : (off_t)n->size,
			    .st_blksize = (blksize_t)max_write, /* cp and dd size their I/O by it, as on vyrefs */
			    .st_blocks = (blkcnt_t)((n->cap + 511) / 512),
			    .st_atim = n->atime, .st_mtim = n->mtime, .st_ctim = n->ctime};
}

/* libfuse asks for atomic O_TRUNC, so it arrives in the open flags. */
static void open_file(struct node *n, struct fuse_file_info *fi)
{
	if ((fi->flags & O_TRUNC) && (fi->flags & O_ACCMODE) != O_RDONLY) {
		wr(n);
		if (n->size && resize(n, 0) == 0) /* shrinking cannot fail */
			n->mtime = n->ctime = now();
		unl(n);
	}
	fi->fh = (uintptr_t)n;
	fi->keep_cache = 1; /* vyrefs' default page_cache=on */
}

/* Drop references: a release, or a reply that did not reach the kernel. */
static void drop(struct node *n, uint64_t lookups, unsigned opens)
{
	lock_ns();
	n->nlookup -= lookups;
	n->nopen -= opens;
	maybe_free(n);
	unlock_ns();
}

/* ---- operations ---- */

/* Reply with n's entry and, for create, an open handle. Called with ns
 * held, drops it: the counts keep n alive. */
static void reply_entry(fuse_req_t req, struct node *n, struct fuse_file_info *fi)
{
	struct fuse_entry_param e = {.ino = n->ino, .attr_timeout = TIMEOUT, .entry_timeout = TIMEOUT};
	n->nlookup++;
	n->nopen += fi != NULL;
	nlink_t nlink = n->nlink;
	unlock_ns();
	if (fi)
		open_file(n, fi);
	rd(n);
	fill(n, nlink, &e.attr);
	unl(n);
	if ((fi ? fuse_reply_create(req, &e, fi) : fuse_reply_entry(req, &e)) != 0)
		drop(n, 1, fi != NULL);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	vy_session_conn(conn, max_write);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct node *d, *n = NULL;
	lock_ns();
	int err = live_dir(parent, &d);
	if (!err && !(n = find(d, name)))
		err = ENOENT;
	if (err) {
		unlock_ns();
		fuse_reply_err(req, err);
	} else
		reply_entry(req, n, NULL);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	lock_ns();
	forget_one(ino, nlookup);
	unlock_ns();
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	lock_ns();
	for (size_t i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	unlock_ns();
	fuse_reply_none(req);
}

/* n for ino, with its link count; the kernel's reference keeps it alive once ns is dropped. */
/* The node and its link count, or NULL once ENOENT is replied. */
static struct node *node_of(fuse_req_t req, fuse_ino_t ino, nlink_t *nlink)
{
	lock_ns();
	struct node *n = get(ino);
	*nlink = n ? n->nlink : 0;
	unlock_ns();
	if (!n)
		fuse_reply_err(req, ENOENT);
	return n;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	nlink_t nlink;
	struct node *n = node_of(req, ino, &nlink);
	if (!n)
		return;
	struct stat st;
	rd(n);
	fill(n, nlink, &st);
	unl(n);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int set, struct fuse_file_info *fi)
{
	(void)fi;
	nlink_t nlink;
	struct node *n = node_of(req, ino, &nlink);
	if (!n)
		return;
	struct stat st;
	struct timespec t = now();
	int err = 0;
	wr(n);
	if (set & FUSE_SET_ATTR_SIZE) {
		err = n->dir ? EISDIR : a->st_size < 0 ? EINVAL : resize(n, (uint64_t)a->st_size);
		n->mtime = err ? n->mtime : t;
	}
	if (!err) { /* uid and gid: accepted, ignored */
		if (set & FUSE_SET_ATTR_MODE)
			n->mode = (n->mode & S_IFMT) | (a->st_mode & 07777);
		if (set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW)) /* UTIME_OMIT sets neither */
			n->atime = (set & FUSE_SET_ATTR_ATIME_NOW) ? t : a->st_atim;
		if (set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
			n->mtime = (set & FUSE_SET_ATTR_MTIME_NOW) ? t : a->st_mtim;
		n->ctime = (set & FUSE_SET_ATTR_CTIME) ? a->st_ctim : t;
	}
	fill(n, nlink, &st);
	unl(n);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

/* Create name in parent (ns held); on EEXIST *out is the node already there. */
static int make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct node **out)
{
	struct node *d;
	int err = live_dir(parent, &d);
	if (err)
		return err;
	if (strlen(name) > NAME_LEN)
		return ENAMETOOLONG;
	if ((*out = find(d, name)))
		return EEXIST;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (!(*out = new_node(name, mode, ctx->uid, ctx->gid)))
		return ENOMEM;
	link_in(d, *out);
	return 0;
}

static void create_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	struct node *n = NULL;
	lock_ns();
	int err = make(req, parent, name, mode, &n);
	if (err == EEXIST && fi && !(fi->flags & O_EXCL)) /* lost a race to create it: open it */
		err = n->dir ? EISDIR : 0;
	if (err) {
		unlock_ns();
		fuse_reply_err(req, err);
	} else
		reply_entry(req, n, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	create_node(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	create_node(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

/* Count an open handle on ino: a file for open, a directory for opendir. */
static int hold(fuse_ino_t ino, bool dir, struct node **n)
{
	lock_ns();
	*n = get(ino);
	int err = !*n ? ENOENT : (*n)->dir == dir ? 0 : dir ? ENOTDIR : EISDIR;
	if (!err)
		(*n)->nopen++;
	unlock_ns();
	return err;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n;
	int err = hold(ino, false, &n);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	open_file(n, fi);
	if (fuse_reply_open(req, fi) != 0) /* no release will come */
		drop(n, 0, 1);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct node *n = FH(fi);
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	rd(n);
	size_t len = (uint64_t)off < n->size ? n->size - (size_t)off : 0;
	len = len < size ? len : size;
	fuse_reply_buf(req, len ? n->data + off : NULL, len); /* copies it out before we unlock */
	unl(n);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	struct node *n = FH(fi);
	wr(n);
	int err = put(n, buf, size, off, NULL);
	unl(n);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

/* flush and fsync: nothing is buffered, and RAM is as durable as it gets here. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	op_flush(req, ino, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	drop(FH(fi), 0, 1);
	fuse_reply_err(req, 0);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct node *d, *n = NULL;
	lock_ns();
	int err = live_dir(parent, &d);
	if (!err && !(n = find(d, name)))
		err = ENOENT;
	else if (!err)
		err = n->dir != dir ? (dir ? ENOTDIR : EISDIR) : n->nkids ? ENOTEMPTY : 0;
	if (!err)
		remove_node(n);
	unlock_ns();
	fuse_reply_err(req, err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_entry(req, parent, name, false); }
static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { remove_entry(req, parent, name, true); }

static int do_rename(fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname)
{
	struct node *d, *nd, *n, *old;
	int err = live_dir(parent, &d);
	if (err || (err = live_dir(newparent, &nd)))
		return err;
	if (!(n = find(d, name)))
		return ENOENT;
	if (strlen(newname) > NAME_LEN)
		return ENAMETOOLONG;
	if ((old = find(nd, newname)) == n)
		return 0;
	for (struct node *p = nd; n->dir && p; p = p->parent)
		if (p == n)
			return EINVAL; /* a directory into itself */
	if (old && (n->dir != old->dir || old->nkids))
		return n->dir != old->dir ? (n->dir ? ENOTDIR : EISDIR) : ENOTEMPTY;
	char *copy = strdup(newname);
	if (!copy)
		return ENOMEM;
	if (old)
		remove_node(old);
	link_out(n);
	free(n->name);
	n->name = copy;
	link_in(nd, n);
	stamp(n, false);
	return 0;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	int err = EINVAL; /* RENAME_NOREPLACE, RENAME_EXCHANGE: the benchmark needs neither */
	if (!flags) {
		lock_ns();
		err = do_rename(parent, name, newparent, newname);
		unlock_ns();
	}
	fuse_reply_err(req, err);
}

/* A directory handle: a listing taken at offset 0, so that offsets stay
 * valid while entries come and go. */
struct listing {
	struct node *dir;
	size_t n;
	struct dent { fuse_ino_t ino; mode_t type; char *name; } *e;
};

static void drop_listing(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->e[i].name);
	free(l->e);
	l->e = NULL;
	l->n = 0;
}

static int add(struct listing *l, fuse_ino_t ino, bool dir, const char *name)
{
	char *copy = strdup(name);
	if (!copy)
		return ENOMEM;
	l->e[l->n++] = (struct dent){ino, dir ? S_IFDIR : S_IFREG, copy};
	return 0;
}

/* ".", "..", then the children, found by a scan of the name table: readdir
 * is rare next to lookup, so directories keep no child list. ns held. */
static int list(struct listing *l)
{
	struct node *d = l->dir;
	drop_listing(l);
	if (!(l->e = calloc(d->nkids + 2, sizeof(*l->e))))
		return ENOMEM;
	int err = add(l, d->ino, true, ".");
	err = err ? err : add(l, d->parent ? d->parent->ino : d->ino, true, "..");
	for (size_t b = 0; b < HBUCKETS && !err; b++)
		for (struct node *k = htab[b]; k && !err; k = k->hnext)
			if (k->parent == d)
				err = add(l, k->ino, k->dir, k->name);
	if (err)
		drop_listing(l);
	return err;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct listing *l = calloc(1, sizeof(*l));
	int err = l ? hold(ino, true, &l->dir) : ENOMEM;
	if (err) {
		free(l);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uintptr_t)l;
	if (fuse_reply_open(req, fi) != 0) {
		drop(l->dir, 0, 1);
		free(l);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct listing *l = (struct listing *)(uintptr_t)fi->fh;
	int err = 0;
	if (off == 0 || !l->e) { /* a fresh listing at each rewind */
		lock_ns();
		err = list(l);
		unlock_ns();
	}
	char *buf = err ? NULL : malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, err ? err : ENOMEM);
		return;
	}
	size_t at = 0;
	for (size_t i = off < 0 ? l->n : (size_t)off; i < l->n; i++) {
		struct stat st = {.st_ino = l->e[i].ino, .st_mode = l->e[i].type};
		size_t len = fuse_add_direntry(req, buf + at, size - at, l->e[i].name, &st, (off_t)i + 1);
		if (len > size - at)
			break; /* full: the kernel asks again from here */
		at += len;
	}
	fuse_reply_buf(req, buf, at);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct listing *l = (struct listing *)(uintptr_t)fi->fh;
	drop(l->dir, 0, 1);
	drop_listing(l);
	free(l);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	size_t u = atomic_load(&used);
	struct statvfs sv = {.f_bsize = 4096, .f_frsize = 4096, .f_blocks = limit / 4096,
			     .f_files = (fsfilcnt_t)1 << 32, .f_namemax = NAME_LEN};
	sv.f_bfree = sv.f_bavail = u < limit ? (limit - u) / 4096 : 0;
	lock_ns();
	sv.f_ffree = sv.f_favail = sv.f_files - live;
	unlock_ns();
	fuse_reply_statfs(req, &sv);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	struct node *n = FH(fi);
	int err = mode & ~FALLOC_FL_KEEP_SIZE ? EOPNOTSUPP : off < 0 || len <= 0 ? EINVAL
		: (uint64_t)off > MAX_FILE - (uint64_t)len ? EFBIG : 0;
	uint64_t end = (uint64_t)off + (uint64_t)len;
	if (!err) {
		wr(n);
		if (mode & FALLOC_FL_KEEP_SIZE)
			err = reserve(n, end); /* the bytes are zeroed when size reaches them */
		else if (end > n->size && !(err = resize(n, end)))
			n->mtime = n->ctime = now();
		unl(n);
	}
	fuse_reply_err(req, err);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
			       int flags)
{
	(void)ino_in;
	(void)ino_out;
	struct node *src = FH(fi_in), *dst = FH(fi_out);
	if (flags || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* By ino, so that two copies in opposite directions cannot deadlock. */
	if (src != dst && src->ino < dst->ino)
		rd(src);
	wr(dst);
	if (src != dst && src->ino > dst->ino)
		rd(src);
	size_t n = (uint64_t)off_in < src->size ? src->size - (size_t)off_in : 0;
	n = n < len ? n : len;
	int err = src == dst ? put(dst, NULL, n, off_out, &off_in) : put(dst, src->data + off_in, n, off_out, NULL);
	unl(dst);
	if (src != dst)
		unl(src);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, n);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init, .lookup = op_lookup, .forget = op_forget, .forget_multi = op_forget_multi,
	.getattr = op_getattr, .setattr = op_setattr, .mkdir = op_mkdir, .unlink = op_unlink,
	.rmdir = op_rmdir, .rename = op_rename, .open = op_open, .read = op_read, .write = op_write,
	.flush = op_flush, .release = op_release, .fsync = op_fsync, .opendir = op_opendir,
	.readdir = op_readdir, .releasedir = op_releasedir, .statfs = op_statfs, .create = op_create,
	.fallocate = op_fallocate, .copy_file_range = op_copy_file_range,
};

static unsigned idle_threads = 2; /* vyrefs' default */

/* NAME=N within [lo, hi] into *out. */
static bool number_opt(const char *opt, const char *name, unsigned long long lo, unsigned long long hi,
		       unsigned long long *out)
{
	size_t n = strlen(name);
	if (strncmp(opt, name, n) != 0 || opt[n] != '=')
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(opt + n + 1, &end, 10);
	if (errno || end == opt + n + 1 || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_opt(const char *opt)
{
	unsigned long long v;
	if (number_opt(opt, "max_write", 4096, 1048576, &v)) {
		max_write = (size_t)v;
		return true;
	}
	if (number_opt(opt, "idle_threads", 0, VY_SESSION_WORKERS, &v) && v != 1) {
		idle_threads = (unsigned)v;
		return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	const char *mountpoint = NULL;
	bool ok = true;
	for (int i = 1; i < argc && ok; i++) {
		if (!strcmp(argv[i], "-f"))
			continue; /* always in the foreground: the bench script backgrounds us */
		if (!strcmp(argv[i], "-o"))
			ok = ++i < argc && parse_opt(argv[i]);
		else if (!strncmp(argv[i], "-o", 2))
			ok = parse_opt(argv[i] + 2);
		else if ((ok = argv[i][0] != '-' && !mountpoint))
			mountpoint = argv[i];
	}
	if (!ok || !mountpoint) {
		fprintf(stderr, "usage: nullfs [-f] MOUNTPOINT [-o max_write=BYTES] [-o idle_threads=N]\n"
				"  max_write 4096..1048576 (default 1048576); idle_threads 2..10 (default 2; 0: libfuse's loop)\n"
				"Runs in the foreground; SIGTERM or SIGINT unmounts.\n");
		return 2;
	}
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	limit = pages > 0 && page > 0 ? (size_t)pages / 4 * 3 * (size_t)page : (size_t)1 << 34;
	if (!new_node(NULL, S_IFDIR | 0755, getuid(), getgid())) { /* the root: ino 1 */
		fprintf(stderr, "nullfs: out of memory\n");
		return 1;
	}

	char *fargv[] = {argv[0], "-o", "default_permissions,fsname=nullfs,subtype=nullfs", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	fuse_opt_free_args(&args);
	int status = 1;
	if (!se)
		fprintf(stderr, "nullfs: cannot start a FUSE session\n");
	else if (fuse_set_signal_handlers(se) != 0)
		fprintf(stderr, "nullfs: cannot install signal handlers\n");
	else {
		if (vy_session_mount(se, mountpoint) != 0)
			fprintf(stderr, "nullfs: cannot mount on %s\n", mountpoint);
		else {
			int rc = vy_session_loop(se, idle_threads);
			fuse_session_unmount(se);
			if (rc < 0)
				fprintf(stderr, "nullfs: the FUSE session ended with %s\n", strerror(-rc));
			status = rc < 0;
		}
		fuse_remove_signal_handlers(se);
	}
	if (se)
		fuse_session_destroy(se);
	for (size_t i = 0; i < ninodes; i++) /* so that valgrind shows only real leaks */
		if (inodes[i])
			free_node(inodes[i]);
	free(inodes);
	return status;
}
