/* A daemon's fs over the counting device (tests/unit/support.h), for the
 * suites that link every daemon object (test_fsfile, test_replay_ns). */
#ifndef VY_TEST_FS_FIXTURE_H
#define VY_TEST_FS_FIXTURE_H

#include "fs/lifecycle.h"
#include "tests/unit/support.h"

typedef struct vy_test_fs {
	vy_counting_device *d;
	vy_core *c;
	vy_fs fs;
	uint64_t free0; /* the device's free memory before the core */
} vy_test_fs;

/* With the default configuration (write-behind and readahead on); exits 2
 * when it cannot be made. */
void vy_test_fs_open(vy_test_fs *t);
/* A new regular file of one link (0644, root's), not in any directory;
 * exits 2 without memory. */
vy_inode *vy_test_fs_file(vy_test_fs *t);
/* Everything freed: the device is back at free0 (checked). */
void vy_test_fs_close(vy_test_fs *t);

#endif
