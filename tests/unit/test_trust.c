/* StrictModes for an upgrade's binary (keeper/trust.h): a file and the
 * directories above it that only root or the mount's user may write are
 * trusted; a directory or file others may write is not, unless the
 * directory is sticky (as /tmp); a file of another user is not. */
#include "keeper/trust.h"
#include "tests/unit/support.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char top[64];

static void make_tree(void)
{
	snprintf(top, sizeof(top), "/tmp/vyrefs-trust.XXXXXX");
	CHECK(mkdtemp(top) != NULL);
	char p[128];
	snprintf(p, sizeof(p), "%s/bin", top);
	CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/bin/vyrefs", top);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	CHECK(chmod(p, 0755) == 0);
	CHECK(chmod(top, 0755) == 0);
}

static void remove_tree(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/bin/vyrefs", top);
	unlink(p);
	snprintf(p, sizeof(p), "%s/bin", top);
	rmdir(p);
	rmdir(top);
}

static bool trusted(const char *why_has)
{
	char p[128], why[800] = "";
	snprintf(p, sizeof(p), "%s/bin/vyrefs", top);
	bool yes = vy_trusted_binary(p, geteuid(), why, sizeof(why));
	if (why_has) {
		CHECK(strstr(why, why_has) != NULL);
		CHECK(strstr(why, "(Fix: ") != NULL);
	}
	return yes;
}

static void closed_paths_are_trusted_open_ones_not(void)
{
	make_tree();
	char bin[128], file[128];
	snprintf(bin, sizeof(bin), "%s/bin", top);
	snprintf(file, sizeof(file), "%s/bin/vyrefs", top);
	CHECK(trusted(NULL)); /* /tmp above is sticky: as good as closed */
	CHECK(chmod(bin, 0777) == 0);
	CHECK(!trusted("may be written by its group or others (mode 0777)"));
	CHECK(chmod(bin, 01777) == 0); /* sticky: no one else can replace our entry */
	CHECK(trusted(NULL));
	CHECK(chmod(bin, 0775) == 0);
	CHECK(!trusted("may be written by its group or others"));
	CHECK(chmod(bin, 0755) == 0);
	CHECK(chmod(file, 0757) == 0);
	CHECK(!trusted("may be written by its group or others"));
	CHECK(chmod(file, 0755) == 0);
	if (geteuid() == 0) { /* another user's file or directory */
		CHECK(chown(file, 65534, 65534) == 0);
		CHECK(!trusted("belongs to uid 65534"));
		CHECK(chown(file, 0, 0) == 0);
		CHECK(chown(bin, 65534, 65534) == 0);
		CHECK(!trusted("belongs to uid 65534"));
		CHECK(chown(bin, 0, 0) == 0);
	}
	CHECK(trusted(NULL));
	CHECK(unlink(file) == 0); /* gone */
	CHECK(!trusted("No such file or directory"));
	remove_tree();
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(closed_paths_are_trusted_open_ones_not),
	};
	return vy_test_main("trust", cases, sizeof(cases) / sizeof(cases[0]));
}
