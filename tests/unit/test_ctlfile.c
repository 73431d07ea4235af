/* The control file (fs/ctl_file.c) over a daemon's fs: an open file's line
 * numbers never wrap, however many lines it was written (a wrapped one was
 * undefined behaviour, and a number below 1 is a control file's state the
 * kept state refuses: issue "survive 2"). */
#include "fs/ctl_file.h"
#include "tests/unit/fs_fixture.h"

#include <limits.h>
#include <stdlib.h>

/* The open file of .vyre/ctl, as an open makes it (not in the handle table). */
static vy_open *open_ctl(vy_fs *fs)
{
	pthread_mutex_lock(&fs->ns);
	vy_inode *vyre = vy_u64map_get(&fs->inodes, fs->vyre_ino);
	const vy_dirent *d = vyre ? vy_dir_find(&vyre->dir, "ctl") : NULL;
	vy_inode *ctl = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	pthread_mutex_unlock(&fs->ns);
	vy_open *h = ctl ? vy_open_new(ctl) : NULL;
	if (!h) {
		fprintf(stderr, "no .vyre/ctl\n");
		exit(2);
	}
	return h;
}

/* Past 2^31 - 2^20 lines (2 GiB of newlines: set here rather than
 * written), an open file says that line number from then on. */
static void line_numbers_stop_short_of_int_max(void)
{
	vy_test_fs f;
	vy_test_fs_open(&f);
	vy_open *h = open_ctl(&f.fs);
	_Atomic uint32_t stop = 0;
	h->next_line = INT_MAX - 2;
	CHECK_EQ(vy_ctlfile_write(&f.fs, h, "\n\n\n\n", 4, 1, &stop), 0); /* blank lines: no sequence */
	CHECK(h->next_line >= 1 && h->next_line <= INT_MAX - (1 << 20));
	int most = h->next_line;
	CHECK_EQ(vy_ctlfile_write(&f.fs, h, "# a comment\n\n", 13, 1, &stop), 0);
	CHECK_EQ(h->next_line, most);
	/* A statement refused there names that line. */
	CHECK(vy_ctlfile_write(&f.fs, h, "frobnicate\n", 11, 1, &stop) != 0);
	char want[32];
	snprintf(want, sizeof(want), "line %d:", most);
	CHECK(h->reply && strstr(h->reply, want) != NULL);
	vy_open_discard(h);
	vy_test_fs_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(line_numbers_stop_short_of_int_max),
	};
	return vy_test_main("ctlfile", cases, sizeof(cases) / sizeof(cases[0]));
}
