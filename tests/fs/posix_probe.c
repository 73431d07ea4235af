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

int main(int argc, char **argv)
{
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
