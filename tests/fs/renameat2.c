/* renameat2 FROM TO [noreplace|exchange|whiteout]: the flags coreutils cannot pass.
 * Prints the errno name on failure and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: renameat2 FROM TO [noreplace|exchange|whiteout]\n");
		return 2;
	}
	unsigned flags = 0;
	if (argc > 3 && !strcmp(argv[3], "noreplace"))
		flags = RENAME_NOREPLACE;
	else if (argc > 3 && !strcmp(argv[3], "exchange"))
		flags = RENAME_EXCHANGE;
	else if (argc > 3 && !strcmp(argv[3], "whiteout"))
		flags = RENAME_WHITEOUT;
	if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], flags) != 0) {
		printf("%s\n", strerrorname_np(errno) ? strerrorname_np(errno) : "error");
		return 1;
	}
	return 0;
}
