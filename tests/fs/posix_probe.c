/* posix_probe CHECK ARGS...: the checks of tests/fs/posix_test.sh that the
 * shell cannot make. Each prints one line of exact results and exits 0 when
 * the filesystem behaved, 1 when it did not, 2 on bad usage.
 *
 *   socket PATH          bind() a unix socket at PATH, connect to it and
 *                        pass a byte: "socket ok"
 *   handle MNT PATH      name_to_handle_at PATH, drop the kernel's caches,
 *                        open_by_handle_at and read: "handle ok BYTES" (a
 *                        directory: "handle ok dir ENTRIES")
 *   handle-gone MNT PATH the same, PATH removed before the caches drop:
 *                        "handle gone ESTALE"
 *   sum PATH             "BYTES SUM" of PATH, as handle prints them
 *   readdir DIR N        read DIR (files 0 .. N-1), renaming every entry
 *                        read, renamed ones too ("x" -> "x.r"):
 *                        "readdir originals=K repeats=R new=W"
 *   script DIR           a fixed script of POSIX operations in DIR, one
 *                        line a step (errno, parent and child times and
 *                        link counts), to compare with tmpfs
 *   tmpfile DIR          O_TMPFILE written, linked in by linkat; an O_EXCL
 *                        one linkat refuses
 *   statx PATH           statx's attributes and their mask, of the ones
 *                        chattr's flags give: "attrs=a,i,d mask=a,i,d"
 *   dio FILE ROUNDS      buffered readers run while another fd writes the
 *                        whole file with O_DIRECT AIO; afterwards every
 *                        buffered read must show the new bytes: "dio stale=0" */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>
#include <time.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static int fail(const char *what)
{
	printf("%s: %s\n", what, strerrorname_np(errno) ? strerrorname_np(errno) : strerror(errno));
	return 1;
}

static int check_socket(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path)) {
		printf("path too long for a socket\n");
		return 2;
	}
	strcpy(a.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM, 0), c = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s < 0 || c < 0)
		return fail("socket");
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		return fail("bind");
	if (listen(s, 1) != 0)
		return fail("listen");
	struct stat st;
	if (stat(path, &st) != 0)
		return fail("stat");
	if (!S_ISSOCK(st.st_mode)) {
		printf("not a socket: mode %o\n", (unsigned)st.st_mode);
		return 1;
	}
	if (connect(c, (struct sockaddr *)&a, sizeof(a)) != 0)
		return fail("connect");
	int t = accept(s, NULL, NULL);
	if (t < 0)
		return fail("accept");
	char b = 0;
	if (write(c, "x", 1) != 1 || read(t, &b, 1) != 1 || b != 'x')
		return fail("pass a byte");
	close(t);
	close(c);
	close(s);
	printf("socket ok\n");
	return 0;
}

static int drop_caches(void)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, "2", 1);
	close(fd);
	return n == 1 ? 0 : -1;
}

/* "BYTES SUM" of what fd reads to its end, or NULL on a read error. */
static const char *read_sum(int fd)
{
	static char out[64];
	char buf[65536];
	size_t total = 0;
	unsigned long sum = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0)
			return NULL;
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			sum = sum * 31 + (unsigned char)buf[i];
		total += (size_t)n;
	}
	snprintf(out, sizeof(out), "%zu %lx", total, sum);
	return out;
}

static int check_handle(const char *mnt, const char *path, bool gone)
{
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	if (!fh)
		return fail("malloc");
	fh->handle_bytes = MAX_HANDLE_SZ;
	int mount_id;
	if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0) != 0)
		return fail("name_to_handle_at");
	int mfd = open(mnt, O_RDONLY | O_DIRECTORY);
	if (mfd < 0)
		return fail("open mount");
	if (gone && unlink(path) != 0)
		return fail("unlink");
	if (drop_caches() != 0)
		return fail("drop_caches");
	int fd = open_by_handle_at(mfd, fh, O_RDONLY);
	if (fd < 0 && gone && errno == ESTALE) {
		printf("handle gone ESTALE\n");
		return 0;
	}
	if (fd < 0)
		return fail("open_by_handle_at");
	if (gone) {
		printf("handle of a removed file opened\n");
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0)
		return fail("fstat");
	if (S_ISDIR(st.st_mode)) {
		DIR *d = fdopendir(fd);
		if (!d)
			return fail("fdopendir");
		int n = 0;
		errno = 0;
		for (struct dirent *e; (e = readdir(d));)
			n++;
		if (errno)
			return fail("readdir");
		closedir(d);
		printf("handle ok dir %d\n", n);
	} else {
		const char *sum = read_sum(fd);
		if (!sum)
			return fail("read");
		close(fd);
		printf("handle ok %s\n", sum);
	}
	close(mfd);
	free(fh);
	return 0;
}

static int check_readdir(const char *dir, long n)
{
	DIR *d = opendir(dir);
	if (!d)
		return fail("opendir");
	char *seen = calloc((size_t)n, 1);
	if (!seen)
		return fail("calloc");
	long originals = 0, repeats = 0, fresh = 0, total = 0;
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			if (errno)
				return fail("readdir");
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (++total > 4 * n) {
			printf("readdir does not end: %ld entries from %ld files\n", total, n);
			return 1;
		}
		char *end;
		long i = strtol(e->d_name, &end, 10);
		if (*end != '\0' || i < 0 || i >= n)
			fresh++; /* a renamed entry: need not appear */
		else if (seen[i]++)
			repeats++;
		else
			originals++;
		char from[4096], to[4096];
		snprintf(from, sizeof(from), "%s/%s", dir, e->d_name);
		snprintf(to, sizeof(to), "%s/%s.r", dir, e->d_name);
		if (rename(from, to) != 0)
			return fail("rename");
	}
	closedir(d);
	free(seen);
	printf("readdir originals=%ld repeats=%ld new=%ld\n", originals, repeats, fresh);
	return repeats == 0 && originals == n ? 0 : 1;
}

#define DIO_SIZE (4u << 20)

static const char *dio_path;
static atomic_bool dio_stop;

static void *dio_reader(void *arg)
{
	(void)arg;
	char *buf = malloc(DIO_SIZE);
	int fd = open(dio_path, O_RDONLY);
	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return (void *)1;
	}
	while (!atomic_load(&dio_stop))
		for (off_t off = 0; off < DIO_SIZE && !atomic_load(&dio_stop); off += 65536)
			if (pread(fd, buf, 65536, off) < 0)
				break;
	close(fd);
	free(buf);
	return NULL;
}

/* Bytes of a buffered read of the whole file that are not `want`. */
static long stale_bytes(int fd, char want, char *buf)
{
	ssize_t n = pread(fd, buf, DIO_SIZE, 0);
	if (n != DIO_SIZE)
		return -1;
	long bad = 0;
	for (size_t i = 0; i < DIO_SIZE; i++)
		bad += buf[i] != want;
	return bad;
}

static int check_dio(const char *path, int rounds)
{
	dio_path = path;
	char *buf = NULL, *check = malloc(DIO_SIZE);
	if (posix_memalign((void **)&buf, 4096, DIO_SIZE) != 0 || !check)
		return fail("memory");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	memset(buf, 'a', DIO_SIZE);
	if (fd < 0 || pwrite(fd, buf, DIO_SIZE, 0) != DIO_SIZE)
		return fail("buffered write");
	int dfd = open(path, O_RDWR | O_DIRECT);
	if (dfd < 0)
		return fail("open O_DIRECT");
	aio_context_t ctx = 0;
	if (syscall(SYS_io_setup, 1, &ctx) != 0)
		return fail("io_setup");
	long stale = 0;
	for (int r = 0; r < rounds; r++) {
		char want = (char)('b' + r % 24);
		atomic_store(&dio_stop, false);
		pthread_t th[4];
		for (int i = 0; i < 4; i++)
			if (pthread_create(&th[i], NULL, dio_reader, NULL) != 0)
				return fail("pthread_create");
		usleep(20000);
		memset(buf, want, DIO_SIZE);
		struct iocb cb = {.aio_fildes = (uint32_t)dfd, .aio_lio_opcode = IOCB_CMD_PWRITE,
				  .aio_buf = (uint64_t)(uintptr_t)buf, .aio_nbytes = DIO_SIZE};
		struct iocb *cbs[1] = {&cb};
		if (syscall(SYS_io_submit, ctx, 1, cbs) != 1)
			return fail("io_submit");
		struct io_event ev;
		if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
			return fail("io_getevents");
		if (ev.res != DIO_SIZE) {
			printf("direct write: %lld\n", (long long)ev.res);
			return 1;
		}
		usleep(20000); /* readers go on after the write */
		atomic_store(&dio_stop, true);
		for (int i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		/* The open fd, and a fresh open (keep_cache keeps pages). */
		long a = stale_bytes(fd, want, check);
		int nfd = open(path, O_RDONLY);
		long b = nfd < 0 ? -1 : stale_bytes(nfd, want, check);
		if (nfd >= 0)
			close(nfd);
		if (a < 0 || b < 0)
			return fail("buffered read");
		stale += a + b;
	}
	syscall(SYS_io_destroy, ctx);
	close(dfd);
	close(fd);
	free(buf);
	free(check);
	printf("dio stale=%ld\n", stale);
	return stale == 0 ? 0 : 1;
}


/* script DIR: one fixed script of POSIX operations, run in DIR, one line a
 * step: what it answered, and whether the mtime (m) and ctime (c) of the
 * parent and of the child changed, with their link counts. Run on vyrefs
 * and on tmpfs, the lines must be the same. Paths are relative to DIR. */
static char *errname(int e)
{
	static char buf[32];
	const char *n = e ? strerrorname_np(e) : "OK";
	snprintf(buf, sizeof(buf), "%s", n ? n : "E?");
	return buf;
}

static void times_changed(char *out, const struct stat *a, const struct stat *b)
{
	out[0] = a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec ? 'm' : '-';
	out[1] = a->st_ctim.tv_sec != b->st_ctim.tv_sec || a->st_ctim.tv_nsec != b->st_ctim.tv_nsec ? 'c' : '-';
	out[2] = '\0';
}

static void report(const char *label, const char *parent, const struct stat *pb, bool ph, const char *child,
		   const struct stat *cb, bool ch, int err)
{
	struct stat pa, ca;
	bool pha = lstat(parent, &pa) == 0, cha = lstat(child, &ca) == 0;
	char pt[3] = "x", ct[3] = "x";
	if (ph && pha)
		times_changed(pt, pb, &pa);
	if (ch && cha)
		times_changed(ct, cb, &ca);
	else if (cha)
		strcpy(ct, "+");
	else if (ch)
		strcpy(ct, "0");
	printf("%-40s %-12s parent:%s n=%lu child:%s", label, errname(err), pt, pha ? (unsigned long)pa.st_nlink : 0ul,
	       ct);
	if (cha)
		printf(" n=%lu mode=%o", (unsigned long)ca.st_nlink, (unsigned)ca.st_mode);
	printf("\n");
	fflush(stdout);
}

#define STEP(label, parent, child, expr)                                                  \
	do {                                                                              \
		struct stat pb_, cb_;                                                     \
		bool ph_ = lstat(parent, &pb_) == 0, ch_ = lstat(child, &cb_) == 0;       \
		usleep(15000); /* past a coarse clock's tick (HZ=100) */                            \
		errno = 0;                                                                \
		int e_ = (expr) < 0 ? errno : 0;                                          \
		report(label, parent, &pb_, ph_, child, &cb_, ch_, e_);                   \
	} while (0)

static int create_excl(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	return fd < 0 ? -1 : close(fd);
}

static int open_close(const char *path, int flags)
{
	int fd = open(path, flags | O_NONBLOCK);
	return fd < 0 ? -1 : close(fd);
}

static int append(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, "abc", 3);
	int e = errno;
	close(fd);
	errno = e;
	return n == 3 ? 0 : -1;
}

static int rename2(const char *from, const char *to, unsigned flags)
{
	return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

static int make(const char *type, const char *name)
{
	if (!strcmp(type, "reg"))
		return create_excl(name);
	if (!strcmp(type, "dir"))
		return mkdir(name, 0755);
	if (!strcmp(type, "fifo"))
		return mknod(name, S_IFIFO | 0644, 0);
	if (!strcmp(type, "chr"))
		return mknod(name, S_IFCHR | 0644, makedev(1, 3));
	if (!strcmp(type, "sock"))
		return mknod(name, S_IFSOCK | 0644, 0);
	return symlink("target", name);
}

static int script(const char *dir)
{
	if (chdir(dir) != 0)
		return fail("chdir");
	char label[128], n[64], l[64], m[64], in_sub[64];
	if (mkdir("sub", 0777) != 0)
		return fail("mkdir sub");
	static const char *const types[] = {"reg", "dir", "fifo", "chr", "sock", "lnk"};
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		const char *ty = types[t];
		snprintf(n, sizeof(n), "t_%s", ty);
		snprintf(l, sizeof(l), "t_%s.l", ty);
		snprintf(m, sizeof(m), "t_%s.m", ty);
		snprintf(in_sub, sizeof(in_sub), "sub/t_%s", ty);
#define L(what) (snprintf(label, sizeof(label), "%s %s", ty, what), label)
		STEP(L("create"), ".", n, make(ty, n));
		STEP(L("create again"), ".", n, make(ty, n));
		STEP(L("chmod 0600"), ".", n, fchmodat(AT_FDCWD, n, 0600, 0));
		STEP(L("lchmod 0640"), ".", n, fchmodat(AT_FDCWD, n, 0640, AT_SYMLINK_NOFOLLOW));
		STEP(L("lchown 1000:1000"), ".", n, fchownat(AT_FDCWD, n, 1000, 1000, AT_SYMLINK_NOFOLLOW));
		STEP(L("lchown -1:-1"), ".", n, fchownat(AT_FDCWD, n, (uid_t)-1, (gid_t)-1, AT_SYMLINK_NOFOLLOW));
		STEP(L("utimes now"), ".", n, utimensat(AT_FDCWD, n, NULL, AT_SYMLINK_NOFOLLOW));
		struct timespec ts[2] = {{1000, 0}, {2000, 0}};
		STEP(L("utimes 1000 2000"), ".", n, utimensat(AT_FDCWD, n, ts, AT_SYMLINK_NOFOLLOW));
		STEP(L("truncate 5"), ".", n, truncate(n, 5));
		STEP(L("open O_TRUNC"), ".", n, open_close(n, O_WRONLY | O_TRUNC));
		STEP(L("open O_RDONLY"), ".", n, open_close(n, O_RDONLY));
		STEP(L("append"), ".", n, append(n));
		STEP(L("link"), ".", l, link(n, l));
		STEP(L("rename link to new"), ".", m, rename(l, m));
		STEP(L("rename over own link"), ".", n, rename(m, n));
		STEP(L("unlink other name"), ".", m, unlink(m));
		STEP(L("rename into sub"), "sub", in_sub, rename(n, in_sub));
		STEP(L("rename back"), ".", n, rename(in_sub, n));
		STEP(L("rename noreplace onto sub"), ".", n, rename2(n, "sub", RENAME_NOREPLACE));
		STEP(L("rename exchange with sub"), ".", n, rename2(n, "sub", RENAME_EXCHANGE));
		STEP(L("rename exchange back"), ".", n, rename2(n, "sub", RENAME_EXCHANGE));
		STEP(L("unlink"), ".", n, unlink(n));
		STEP(L("rmdir"), ".", n, rmdir(n));
		STEP(L("unlink again"), ".", n, unlink(n));
#undef L
	}
	/* rename and rmdir corners */
	STEP("mkdir a", ".", "a", mkdir("a", 0755));
	STEP("mkdir a/b", "a", "a/b", mkdir("a/b", 0755));
	STEP("rename a into a/b/c", ".", "a", rename("a", "a/b/c"));
	STEP("rename a to a", ".", "a", rename("a", "a"));
	STEP("mkdir e", ".", "e", mkdir("e", 0755));
	STEP("rename a/b over empty e", ".", "e", rename("a/b", "e"));
	STEP("mkdir f", ".", "f", mkdir("f", 0755));
	STEP("create f/x", "f", "f/x", create_excl("f/x"));
	STEP("rename e over non-empty f", ".", "f", rename("e", "f"));
	STEP("create g", ".", "g", create_excl("g"));
	STEP("rename g over dir f", ".", "f", rename("g", "f"));
	STEP("rename dir e over file g", ".", "g", rename("e", "g"));
	STEP("rename . to x", ".", "x", rename(".", "x"));
	STEP("rename a/.. to x", ".", "x", rename("a/..", "x"));
	STEP("rename g to .", ".", "g", rename("g", "."));
	STEP("rename g to a/..", ".", "g", rename("g", "a/.."));
	STEP("rmdir .", ".", ".", rmdir("."));
	STEP("rmdir a/..", ".", "a", rmdir("a/.."));
	STEP("rmdir f (non-empty)", ".", "f", rmdir("f"));
	STEP("mkdir over file g", ".", "g", mkdir("g", 0755));
	STEP("create over dir f", ".", "f", create_excl("f"));
	STEP("open dir f for writing", ".", "f", open_close("f", O_WRONLY));
	STEP("link dir f", ".", "f2", link("f", "f2"));
	STEP("create through file g/x", ".", "g", create_excl("g/x"));
	STEP("unlink missing", ".", "nothing", unlink("nothing"));
	STEP("create in missing dir", ".", "nothing", create_excl("nothing/x"));
	STEP("exchange file g and dir f", ".", "g", rename2("g", "f", RENAME_EXCHANGE));
	STEP("exchange back", ".", "g", rename2("g", "f", RENAME_EXCHANGE));
	STEP("noreplace g onto e", ".", "e", rename2("g", "e", RENAME_NOREPLACE));
	STEP("rename dir f into sub", "sub", "sub/f", rename("f", "sub/f"));
	STEP("rename dir back", ".", "f", rename("sub/f", "f"));
	STEP("hard link g g2", ".", "g2", link("g", "g2"));
	STEP("rename g over g2 (same inode)", ".", "g2", rename("g", "g2"));
	STEP("chmod 2755 g", ".", "g", chmod("g", 02755));
	/* set up by the caller: rootowned (root's, 0644) and sticky/ (1777,
	 * root's) with sticky/rootfile (root's, 0666) */
	STEP("chmod rootowned", ".", "rootowned", chmod("rootowned", 0600));
	STEP("chown rootowned", ".", "rootowned", chown("rootowned", 1000, 1000));
	STEP("utimes now rootowned", ".", "rootowned", utimensat(AT_FDCWD, "rootowned", NULL, 0));
	STEP("utimes set rootowned", ".", "rootowned", utimensat(AT_FDCWD, "rootowned", (struct timespec[2]){{5, 0}, {6, 0}}, 0));
	STEP("truncate rootowned", ".", "rootowned", truncate("rootowned", 0));
	STEP("rename in sticky", "sticky", "sticky/moved", rename("sticky/rootfile", "sticky/moved"));
	STEP("unlink in sticky", "sticky", "sticky/rootfile", unlink("sticky/rootfile"));
	STEP("append in sticky", "sticky", "sticky/rootfile", append("sticky/rootfile"));
	STEP("create own in sticky", "sticky", "sticky/own", create_excl("sticky/own"));
	STEP("unlink own in sticky", "sticky", "sticky/own", unlink("sticky/own"));
	STEP("unlink rootowned", ".", "rootowned", unlink("rootowned"));
	/* setgid directories, open flags, symlinks */
	STEP("mkdir sg", ".", "sg", mkdir("sg", 0775));
	STEP("chmod 2775 sg", ".", "sg", chmod("sg", 02775));
	STEP("mkdir sg/d", "sg", "sg/d", mkdir("sg/d", 0755));
	STEP("create sg/f", "sg", "sg/f", create_excl("sg/f"));
	STEP("mkfifo sg/p", "sg", "sg/p", mknod("sg/p", S_IFIFO | 02755, 0));
	STEP("chmod 2755 sg/f", "sg", "sg/f", chmod("sg/f", 02755));
	STEP("symlink sl -> g", ".", "sl", symlink("g", "sl"));
	STEP("symlink dl -> sg", ".", "dl", symlink("sg", "dl"));
	STEP("open sl O_NOFOLLOW", ".", "sl", open_close("sl", O_RDONLY | O_NOFOLLOW));
	STEP("open g O_DIRECTORY", ".", "g", open_close("g", O_RDONLY | O_DIRECTORY));
	STEP("create sl O_EXCL", ".", "sl", create_excl("sl"));
	STEP("create dl/x through link", "sg", "sg/x", create_excl("dl/x"));
	STEP("rmdir dl (a link)", ".", "dl", rmdir("dl"));
	STEP("rename sg to dl (dir over link)", ".", "dl", rename("sg", "dl"));
	STEP("rename dl to sg", ".", "sg", rename("dl", "sg"));
	STEP("truncate sl (follows)", ".", "g", truncate("sl", 3));
	STEP("utimes sl follows", ".", "g", utimensat(AT_FDCWD, "sl", NULL, 0));
	STEP("link sl (the link itself)", ".", "sl2", linkat(AT_FDCWD, "sl", AT_FDCWD, "sl2", 0));
	STEP("link sl -L (the target)", ".", "g3", linkat(AT_FDCWD, "sl", AT_FDCWD, "g3", AT_SYMLINK_FOLLOW));
	STEP("mkdir name with /.. trail", ".", "q", mkdir("q/..", 0755));
	STEP("rename sub/.. away", ".", "sub", rename("sub/..", "zz"));
	STEP("rmdir sub/.", "sub", "sub", rmdir("sub/."));
	STEP("rename sg/d to sub/d", "sub", "sub/d", rename("sg/d", "sub/d"));
	STEP("rename sub sg/sub (dir with a dir)", "sg", "sg/sub", rename("sub", "sg/sub"));
	STEP("rename sg/sub over empty sg/d", "sg", "sg/sub", rename("sg/sub", "sg/d"));
	STEP("mkdir sg/d/d/x", "sg/d/d", "sg/d/d/x", mkdir("sg/d/d/x", 0700));
	STEP("rename sg under its own descendant", ".", "sg", rename("sg", "sg/d/d/x/y"));
	STEP("rename sg/d/d/x up to sg/x", "sg", "sg/x", rename("sg/d/d/x", "sg/x"));
	return 0;
}

/* tmpfile DIR: O_TMPFILE, written, linked in with linkat; an O_EXCL one
 * that linkat refuses. One line a step. */
static int check_tmpfile(const char *dir)
{
	char proc[64], named[4096], buf[16] = {0};
	struct stat st;
	int fd = open(dir, O_TMPFILE | O_RDWR, 0640);
	if (fd < 0)
		return fail("open O_TMPFILE");
	if (write(fd, "hello", 5) != 5 || fstat(fd, &st) != 0)
		return fail("write");
	printf("unnamed: nlink=%lu size=%lld mode=%o\n", (unsigned long)st.st_nlink, (long long)st.st_size,
	       (unsigned)st.st_mode);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	snprintf(named, sizeof(named), "%s/named", dir);
	if (linkat(AT_FDCWD, proc, AT_FDCWD, named, AT_SYMLINK_FOLLOW) != 0)
		return fail("linkat");
	close(fd);
	fd = open(named, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) != 0 || read(fd, buf, sizeof(buf) - 1) < 0)
		return fail("named");
	close(fd);
	printf("linked: nlink=%lu size=%lld mode=%o bytes=%s\n", (unsigned long)st.st_nlink, (long long)st.st_size,
	       (unsigned)st.st_mode, buf);
	fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL, 0600);
	if (fd < 0)
		return fail("open O_TMPFILE|O_EXCL");
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	snprintf(named, sizeof(named), "%s/excl", dir);
	int rc = linkat(AT_FDCWD, proc, AT_FDCWD, named, AT_SYMLINK_FOLLOW);
	printf("O_EXCL linkat: %s\n", rc == 0 ? "OK" : errname(errno));
	close(fd);
	return 0;
}

/* statx's chattr attributes of `path`, by name, in a fixed order. */
static int check_statx(const char *path)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {{STATX_ATTR_APPEND, "a"},
		     {STATX_ATTR_IMMUTABLE, "i"},
		     {STATX_ATTR_NODUMP, "d"},
		     {STATX_ATTR_COMPRESSED, "c"},
		     {STATX_ATTR_ENCRYPTED, "E"},
		     {STATX_ATTR_VERITY, "V"}};
	struct statx sx;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &sx) != 0)
		return fail(path);
	uint64_t v[2] = {sx.stx_attributes & sx.stx_attributes_mask, sx.stx_attributes_mask};
	for (int k = 0; k < 2; k++) {
		printf("%s", k ? " mask=" : "attrs=");
		const char *sep = "";
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (v[k] & names[i].bit) {
				printf("%s%s", sep, names[i].name);
				sep = ",";
			}
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "statx"))
		return check_statx(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "tmpfile"))
		return check_tmpfile(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "script"))
		return script(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "socket"))
		return check_socket(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "sum")) {
		int fd = open(argv[2], O_RDONLY);
		const char *sum = fd < 0 ? NULL : read_sum(fd);
		if (!sum)
			return fail(argv[2]);
		printf("%s\n", sum);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "handle"))
		return check_handle(argv[2], argv[3], false);
	if (argc == 4 && !strcmp(argv[1], "handle-gone"))
		return check_handle(argv[2], argv[3], true);
	if (argc == 4 && !strcmp(argv[1], "readdir"))
		return check_readdir(argv[2], atol(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "dio"))
		return check_dio(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: posix_probe socket PATH | handle[-gone] MNT PATH | sum PATH | readdir DIR N | dio FILE ROUNDS\n");
	return 2;
}
