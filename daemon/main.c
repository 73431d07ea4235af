/* vyrefs: the command line. Mount a GPU-backed filesystem, or run the core
 * self-check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "config/options.h"
#include "core/selfcheck.h"
#include "daemon/adopt.h"
#include "daemon/mount.h"
#include "keeper/wire.h"
#include "daemon/remount.h"
#include "daemon/upgrade_cli.h"
#include "daemon/version.h"
#include "state/layout.h"
#include "daemon/mountflags.h"
#include "launcher/launcher.h"
#include "client/cp.h"
#include "client/tier_cli.h"

/* Write `text` from column `col` on, wrapped before column 80, each new
 * line indented to `col`; `at` is the column the cursor is in now. */
static void wrap(FILE *to, const char *text, int col, int at)
{
	while (*text) {
		while (*text == ' ')
			text++;
		int word = (int)strcspn(text, " ");
		if (at > col && at + 1 + word > 79) {
			fprintf(to, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', to);
			at++;
		} else if (at < col) {
			fprintf(to, "%*s", col - at, "");
			at = col;
		}
		fprintf(to, "%.*s", word, text);
		at += word;
		text += word;
	}
	fputc('\n', to);
}

static void usage(FILE *to)
{
	fputs("usage: vyrefs [-f] [-d] [-o opt[,opt...]] [SOURCE] MOUNTPOINT\n"
	      "       vyrefs --self-check [-o opt[,opt...]]\n"
	      "       vyrefs --upgrade MOUNTPOINT    survive=on: hand the mount to the binary now installed\n"
	      "       vyrefs --help | --version | --build-info\n"
	      "       vyrefs cp [-rpfnv] [--threads=N] SRC... DST   copy into and out of a mount\n"
	      "                 around FUSE, at the speed of the other side (vyrefs cp --help)\n"
	      "       vyrefs prefetch [-r] PATH...   backing=DIR: load files onto the GPU, whole\n"
	      "       vyrefs evict [-r] PATH...      backing=DIR: give clean files' GPU memory back\n"
	      "\n"
	      "Mounts a filesystem whose files are GPU-resident buffers. Detaches once the\n"
	      "mount is ready; unmount with `umount MOUNTPOINT` or `fusermount3 -u MOUNTPOINT`.\n"
	      "\n"
	      "  -f             stay in the foreground (messages on stderr)\n"
	      "  -d             trace FUSE requests (implies -f)\n"
	      "  --build-info   which backends this binary has (`cuda_backend yes|no`) and the\n"
	      "                 state format it writes for survive=on (`state_format N`)\n"
	      "  --self-check   move bytes through every core path on the backend, verify\n"
	      "                 them and the accounting, and exit 0 when all passed\n"
	      "  -o opt,...     settings, each also an INI key (-o settings override the file):\n",
	      to);
	/* The settings, from the table the man page and .vyre/config use. */
	for (size_t i = 0; i < vy_options_count; i++) {
		const vy_option_doc *d = &vy_options[i];
		char head[80], text[1024];
		int at = snprintf(head, sizeof(head), "     %s=%s", d->key, d->values);
		fputs(head, to);
		snprintf(text, sizeof(text), "%s (default: %s)", d->help, d->dflt);
		if (at > 29) {
			fputc('\n', to);
			at = 0;
		}
		wrap(to, text, 30, at);
	}
	fputs("  -o remount,ro,...  change a live mount's flags (mount -o remount runs it);\n"
	      "                 settings there must be the ones it runs with\n"
	      "  -o ro,nosuid,nodev,noexec,relatime,nosymfollow,...  mount(8)'s flags go to\n"
	      "                 the kernel; lazytime, iversion, mand, silent (and their no*),\n"
	      "                 defaults, noauto, _netdev, nofail, x-* are accepted and do nothing\n"
	      "\n"
	      "/etc/fstab:  vyrefs  /mnt/gpu  fuse.vyrefs  defaults,backend=cuda  0 0\n"
	      "See vyrefs(8).\n",
	      to);
}

/* What this binary was built with, one `key value` a line: tests and users
 * ask it which backends it has rather than guessing from the machine. */
static void build_info(void)
{
	printf("version %s\n", VY_VERSION);
	/* survive=on: the state format this binary writes, and the oldest it
	 * takes over (a successor refuses another: docs/survive.md). */
	printf("state_format %u\nstate_format_min %u\n", VY_STATE_FORMAT, VY_STATE_FORMAT_MIN);
	printf("host_backend yes\n");
#ifdef VY_HAVE_CUDA_H
	printf("cuda_backend yes\n");
#else
	printf("cuda_backend no\n");
#endif
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
	bool devices = false; /* devices=0,1: its list goes on past commas */
	for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (!item[0])
			continue;
		bool number = item[0] >= '0' && item[0] <= '9' && !strchr(item, '=');
		if (devices && number) {
			if (!append(&c->settings, item))
				return 2;
			continue;
		}
		devices = !strncmp(item, "devices=", 8);
		if (!strcmp(item, "remount")) {
			c->remount = true;
		} else if (!strncmp(item, "config=", 7)) {
			c->config = item + 7;
		} else if (!strncmp(item, "fsname=", 7)) {
			c->m.source = item + 7;
		} else if (!strncmp(item, "subtype=", 8) ||
			   (vy_mountflag_find(item) && vy_mountflag_find(item)->kind == VY_MF_NOOP)) {
			continue;
		} else if (vy_mountflag_find(item)) {
			/* libfuse's at the mount, or set right after it (mount.c) */
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

/* backing=DIR (docs/tier.md): fstab's source field may name DIR (an
 * absolute path), made absolute here so a successor (survive=on: the
 * dirty set is kept, persist/format.h vy_p_tier) opens the same one. */
static int backing_settled(cli *c)
{
	vy_error e;
	struct stat st; /* a source that is a directory: DIR (else a name, as before) */
	if (!c->m.cfg.backing[0] && c->m.source[0] == '/' && stat(c->m.source, &st) == 0 && S_ISDIR(st.st_mode) &&
	    vy_config_set(&c->m.cfg, "backing", c->m.source, &e) != VY_OK) {
		fprintf(stderr, "vyrefs: %s\n", e.msg);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* The daemon starts itself as its launcher (CUDA does not survive a
	 * fork): nothing else of main runs there. */
	if (argc == 2 && !strcmp(argv[1], "--launcher"))
		return vy_launcher_main(VY_LAUNCHER_FD);
	if (argc >= 2 && !strcmp(argv[1], "cp"))
		return vy_cp_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "prefetch"))
		return vy_prefetch_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "evict"))
		return vy_evict_main(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "--upgrade")) {
		if (argc != 3) {
			fprintf(stderr, "vyrefs: --upgrade takes one mountpoint (Fix: vyrefs --upgrade MOUNTPOINT)\n");
			return 2;
		}
		return vy_upgrade_cli(argv[2]);
	}
	/* survive=on: a successor the keeper started (daemon/adopt.c). */
	bool adopt = argc >= 2 && !strcmp(argv[1], VY_KEEPER_ADOPT_ARG);
	cli c;
	memset(&c, 0, sizeof(c));
	c.m.source = "vyrefs";
	const char *pos[3];
	int npos = 0, rc = 0;
	char **lists = calloc((size_t)argc, sizeof(*lists)); /* -o values, copied */
	int nlists = 0;
	for (int i = adopt ? 2 : 1; i < argc && rc == 0; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			goto done;
		} else if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("vyrefs %s\n", VY_VERSION);
			goto done;
		} else if (!strcmp(a, "--build-info")) {
			build_info();
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
		c.m.quiet = npos == 2;
		c.m.mountpoint = pos[npos - 1];
		if (!c.m.source[0] || strchr(c.m.source, ',')) {
			fprintf(stderr, "vyrefs: the source name '%s' is empty or has a comma (Fix: name it, without commas)\n",
				c.m.source);
			rc = 2;
		} else if (backing_settled(&c) != 0) {
			rc = 2;
		} else {
			c.m.settings = c.settings;
			c.m.config = c.config;
			rc = adopt ? vy_adopt_run(&c.m) : vy_mount_run(&c.m);
		}
	}
done:
	for (int i = 0; i < nlists; i++)
		free(lists[i]);
	free(lists);
	free(c.settings);
	return rc;
}
