/* vyrefs: the command line. Mount a GPU-backed filesystem, or run the core
 * self-check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "core/selfcheck.h"
#include "fs/mount.h"
#include "fs/remount.h"
#include "fs/version.h"

static void usage(FILE *to)
{
	fprintf(to,
		"usage: vyrefs [-f] [-d] [-o opt[,opt...]] [SOURCE] MOUNTPOINT\n"
		"       vyrefs --self-check [-o opt[,opt...]]\n"
		"       vyrefs --help | --version\n"
		"\n"
		"Mounts a filesystem whose files are GPU-resident buffers. Detaches once the\n"
		"mount is ready; unmount with `umount MOUNTPOINT` or `fusermount3 -u MOUNTPOINT`.\n"
		"\n"
		"  -f             stay in the foreground (messages on stderr)\n"
		"  -d             trace FUSE requests (implies -f)\n"
		"  --self-check   move bytes through every core path on the backend, verify\n"
		"                 them and the accounting, and exit 0 when all passed\n"
		"  -o config=FILE read settings from an INI file (default %s if present)\n"
		"  -o opt,...     settings (these override the file):\n"
		"     backend=auto|cuda|host   auto: cuda when a GPU is present, else host\n"
		"     ordinal=N                which GPU (default 0)\n"
		"     host_memory=SIZE         host backend capacity (default 1/4 of RAM)\n"
		"     resident_budget=SIZE|P%%  device bytes for files (default 90%%)\n"
		"     pool_budget=SIZE         idle buffers kept for reuse (default device\n"
		"                              memory / 32; 0 disables)\n"
		"     staging_cache=SIZE       pinned host bytes cached (default 128M)\n"
		"     max_write=SIZE           largest write request, 4K..1M (default 1M)\n"
		"     page_cache=on|off        keep the kernel page cache across opens (on)\n"
		"     write_behind=on|off      acknowledge small writes once gathered in pinned\n"
		"                              memory; copy failures show at close/fsync (on)\n"
		"     readahead=on|off         copy the next 2 MiB of a file read in order to\n"
		"                              host memory ahead of the reads (on)\n"
		"     idle_threads=N           idle FUSE workers waiting on the kernel when\n"
		"                              requests come one at a time, 2..10; the rest\n"
		"                              sleep, so they stay on hot workers (2); 0:\n"
		"                              libfuse's own loop\n"
		"     kernel_cache=SIZE        CUDA JIT cache for modules (256M; 0 disables)\n"
		"     allow_other=on|off       let other users in (off; needs user_allow_other\n"
		"                              in /etc/fuse.conf for non-root mounts)\n"
		"  -o remount,ro,...  change a live mount's flags (mount -o remount runs it);\n"
		"                 settings there must be the ones it runs with\n"
		"  -o ro,nosuid,nodev,noexec,...  usual mount flags; rw, defaults, noauto,\n"
		"                 _netdev, nofail and x-* are accepted for /etc/fstab\n"
		"\n"
		"/etc/fstab:  vyrefs  /mnt/gpu  fuse.vyrefs  defaults,backend=cuda  0 0\n",
		VY_CONFIG_DEFAULT_FILE);
}

/* Mount flags the kernel takes from us. */
static const char *const kernel_flags[] = {"ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec",
					   "noatime", "atime", "relatime", "strictatime", "nodiratime", "diratime",
					   "sync", "async", "dirsync", NULL};
/* Flags meant for mount(8) and fstab, not for us: accepted and dropped. */
static const char *const fstab_flags[] = {"defaults", "auto", "noauto", "user", "nouser", "users", "owner",
					  "group", "_netdev", "nofail", "default_permissions", "lazytime",
					  "nolazytime", NULL};

static bool listed(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

typedef struct cli {
	vy_mount_args m;
	char *settings;     /* key=value items, applied after the file */
	const char *config; /* -o config=FILE */
	bool self_check;
	bool remount; /* -o remount: change a live mount's flags (remount.h) */
} cli;

static bool append(char **list, const char *item)
{
	size_t old = *list ? strlen(*list) : 0, add = strlen(item);
	char *n = realloc(*list, old + add + 2);
	if (!n)
		return false;
	if (old)
		n[old++] = ',';
	memcpy(n + old, item, add + 1);
	*list = n;
	return true;
}

/* Sort one -o list into settings, mount flags and fstab noise. */
static int take_options(cli *c, char *list)
{
	char *save = NULL;
	for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (!item[0])
			continue;
		if (!strcmp(item, "remount")) {
			c->remount = true;
		} else if (!strncmp(item, "config=", 7)) {
			c->config = item + 7;
		} else if (!strncmp(item, "fsname=", 7)) {
			c->m.source = item + 7;
		} else if (!strncmp(item, "subtype=", 8) || !strncmp(item, "x-", 2) || !strncmp(item, "comment=", 8) ||
			   listed(fstab_flags, item)) {
			continue;
		} else if (listed(kernel_flags, item)) {
			size_t len = strlen(c->m.mount_flags);
			if (len + strlen(item) + 2 > sizeof(c->m.mount_flags)) {
				fprintf(stderr, "vyrefs: too many mount flags (Fix: give each flag once)\n");
				return 2;
			}
			snprintf(c->m.mount_flags + len, sizeof(c->m.mount_flags) - len, "%s%s", len ? "," : "", item);
		} else if (!strcmp(item, "allow_other")) {
			if (!append(&c->settings, "allow_other=on"))
				return 2;
		} else if (strchr(item, '=')) {
			if (!append(&c->settings, item))
				return 2;
		} else {
			fprintf(stderr, "vyrefs: unknown option '%s' (Fix: see vyrefs --help for the options)\n", item);
			return 2;
		}
	}
	return 0;
}

/* defaults < the INI file < -o settings. */
static int settle_config(cli *c)
{
	vy_error e;
	vy_config_defaults(&c->m.cfg);
	const char *file = c->config;
	if (!file && access(VY_CONFIG_DEFAULT_FILE, F_OK) == 0)
		file = VY_CONFIG_DEFAULT_FILE;
	if (file && vy_config_load_file(&c->m.cfg, file, &e) != VY_OK) {
		fprintf(stderr, "vyrefs: %s\n", e.msg);
		return 2;
	}
	if (c->settings && vy_config_parse_list(&c->m.cfg, c->settings, &e) != VY_OK) {
		fprintf(stderr, "vyrefs: %s\n", e.msg);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	cli c;
	memset(&c, 0, sizeof(c));
	c.m.source = "vyrefs";
	const char *pos[3];
	int npos = 0, rc = 0;
	char **lists = calloc((size_t)argc, sizeof(*lists)); /* -o values, copied */
	int nlists = 0;
	for (int i = 1; i < argc && rc == 0; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			goto done;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("vyrefs %s\n", VY_VERSION);
			goto done;
		} else if (!strcmp(a, "--self-check")) {
			c.self_check = true;
		} else if (!strcmp(a, "-f")) {
			c.m.foreground = true;
		} else if (!strcmp(a, "-d")) {
			c.m.debug = c.m.foreground = true;
		} else if (!strncmp(a, "-o", 2)) {
			const char *list = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!list) {
				fprintf(stderr, "vyrefs: -o needs a value (Fix: write -o key=value, e.g. -o backend=host)\n");
				rc = 2;
			} else if (!lists || !(lists[nlists] = strdup(list))) {
				rc = 2;
			} else {
				rc = take_options(&c, lists[nlists++]);
			}
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "vyrefs: unknown option '%s' (Fix: see vyrefs --help)\n", a);
			rc = 2;
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "vyrefs: too many arguments (Fix: vyrefs [-o opts] [SOURCE] MOUNTPOINT)\n");
			rc = 2;
		}
	}
	if (rc == 0 && c.remount && npos > 0) {
		rc = vy_remount(pos[npos - 1], c.m.mount_flags, c.settings);
		goto done;
	}
	if (rc == 0)
		rc = settle_config(&c);
	if (rc == 0 && c.self_check) {
		vy_error e;
		if (vy_selfcheck(&c.m.cfg.core, stdout, &e) != VY_OK) {
			fprintf(stderr, "vyrefs: %s\n", e.msg);
			rc = 1;
		}
	} else if (rc == 0 && npos == 0) {
		usage(stderr);
		rc = 2;
	} else if (rc == 0) {
		if (npos == 2)
			c.m.source = pos[0]; /* mount(8) passes SOURCE MOUNTPOINT */
		c.m.mountpoint = pos[npos - 1];
		if (!c.m.source[0] || strchr(c.m.source, ',')) {
			fprintf(stderr, "vyrefs: the source name '%s' is empty or has a comma (Fix: name it, without commas)\n",
				c.m.source);
			rc = 2;
		} else {
			rc = vy_mount_run(&c.m);
		}
	}
done:
	for (int i = 0; i < nlists; i++)
		free(lists[i]);
	free(lists);
	free(c.settings);
	return rc;
}
