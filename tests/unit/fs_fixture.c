/* A daemon's fs over the counting device (fs_fixture.h). */
#include "tests/unit/fs_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

void vy_test_fs_open(vy_test_fs *t)
{
	vy_error e;
	vy_core_options o;
	vy_config cfg;
	vy_test_core_options(&o);
	vy_config_defaults(&cfg);
	cfg.survive = false; /* no keeper here (a survive=on fixture sets it itself) */
	uint64_t total;
	t->d = vy_test_device_open();
	vy_test_warm_streams(&t->d->base, o.streams); /* the driver keeps their memory */
	if (t->d->base.ops->mem_info(&t->d->base, &t->free0, &total, &e) != VY_OK ||
	    vy_core_attach(&t->d->base, &o, &t->c, &e) != VY_OK || vy_fs_init(&t->fs, &t->c, 1, &cfg, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

vy_inode *vy_test_fs_file(vy_test_fs *t)
{
	pthread_mutex_lock(&t->fs.ns);
	vy_inode *in = vy_inode_new(vy_fs_ns(&t->fs), VY_FILE, S_IFREG | 0644, 0, 0);
	pthread_mutex_unlock(&t->fs.ns);
	if (!in) {
		fprintf(stderr, "fixture: no memory for an inode\n");
		exit(2);
	}
	in->nlink = 1;
	return in;
}

void vy_test_fs_close(vy_test_fs *t)
{
	vy_fs_destroy(&t->fs);
	CHECK(vy_core_close(t->c, NULL) == VY_OK);
	vy_test_expect_baseline_and_close(t->d, t->free0);
}
