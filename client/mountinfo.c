/* Finding a vyrefs mount's root from /proc/self/mountinfo (proc(5)):
 *   ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
 * The kernel writes it, so a user cannot forge it; ROOT says which
 * directory of the filesystem is mounted at POINT, and only where it is "/"
 * is POINT/.vyre the daemon's (a bind mount of a subdirectory shows a
 * directory a user may have filled with a .vyre of their own). */
#include "client/mountinfo.h"
#include "client/mapping.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static bool is_octal(char c)
{
	return c >= '0' && c <= '7';
}

/* The next field of *s into out (cap bytes), its escapes ("\040": a
 * space) decoded; false at the end of the line, for a field that does not
 * fit, or one that would decode to a NUL. out may be NULL: skip it. */
static bool field(const char **s, char *out, size_t cap)
{
	const char *p = *s;
	if (*p == ' ')
		p++;
	if (!*p)
		return false;
	size_t n = 0;
	while (*p && *p != ' ') {
		unsigned char c = (unsigned char)*p++;
		if (c == '\\' && p[0] >= '0' && p[0] <= '3' && is_octal(p[1]) && is_octal(p[2])) {
			c = (unsigned char)((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
			p += 3;
			if (!c)
				return false;
		}
		if (out) {
			if (n + 1 >= cap)
				return false;
			out[n] = (char)c;
		}
		n++;
	}
	if (out)
		out[n] = '\0';
	*s = p;
	return true;
}

/* user_id=N among the super options (the line's last field: commas
 * between, no escapes in N). */
static bool user_of(const char *opts, uid_t *uid)
{
	for (const char *p = opts; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, "user_id=", 8))
			continue;
		const char *d = p + 8;
		unsigned long long v = 0;
		if (*d < '0' || *d > '9')
			return false;
		for (; *d >= '0' && *d <= '9'; d++) {
			v = v * 10 + (unsigned)(*d - '0');
			if (v >= (uid_t)-1) /* (uid_t)-1 is no uid */
				return false;
		}
		if (*d && *d != ',')
			return false;
		*uid = (uid_t)v;
		return true;
	}
	return false;
}

bool vy_mountinfo_parse(const char *line, vy_mount_entry *e)
{
	char devno[32], tag[64];
	const char *s = line;
	memset(e, 0, sizeof(*e));
	if (!field(&s, NULL, 0) || !field(&s, NULL, 0) || !field(&s, devno, sizeof(devno)))
		return false;
	char end;
	if (sscanf(devno, "%u:%u%c", &e->major, &e->minor, &end) != 2)
		return false;
	if (!field(&s, e->root, sizeof(e->root)) || !field(&s, e->point, sizeof(e->point)) || !field(&s, NULL, 0))
		return false;
	/* Optional fields (shared:N, master:N ...) up to a lone "-". */
	for (;;) {
		if (field(&s, tag, sizeof(tag))) {
			if (!strcmp(tag, "-"))
				break;
		} else if (!field(&s, NULL, 0)) { /* (a field that did not fit stays to skip) */
			return false;
		}
	}
	if (!field(&s, e->fstype, sizeof(e->fstype)) || !field(&s, NULL, 0))
		return false;
	if (*s == ' ')
		e->has_user = user_of(s + 1, &e->user);
	return true;
}

/* How much of `path` lies under mount point `point` (its length), 0 if
 * none: a longer match is the mount the path was reached through. */
static size_t under(const char *path, const char *point)
{
	size_t n = strlen(point);
	if (!strcmp(point, "/"))
		return 1;
	return !strncmp(path, point, n) && (path[n] == '/' || !path[n]) ? n : 0;
}

int vy_client_mount_root(const char *file, dev_t dev, vy_client_mount *m, bool *is_vyrefs)
{
	*is_vyrefs = false;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int rc = f ? 0 : vy_client_fail_fds(errno, "reading /proc/self/mountinfo");
	if (rc)
		return rc;
	if (!f)
		return vy_client_fail(ENOTSUP, "vyrefs: cannot read /proc/self/mountinfo (%s), so which mount holds %s "
					       "cannot be told (Fix: mount /proc in this process's namespace)",
				      strerror(errno), file);
	vy_mount_entry *e = malloc(sizeof(*e));
	char *real = realpath(file, NULL), *line = NULL;
	size_t cap = 0, best = 0;
	bool found = false, bind = false, covered = false;
	char seen_root[PATH_MAX] = "";
	while (e && getline(&line, &cap, f) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (!vy_mountinfo_parse(line, e) || e->major != major(dev) || e->minor != minor(dev) ||
		    strcmp(e->fstype, "fuse.vyrefs"))
			continue;
		*is_vyrefs = true;
		if (strcmp(e->root, "/")) {
			bind = true;
			snprintf(seen_root, sizeof(seen_root), "%s", e->root);
			continue;
		}
		struct stat st;
		if (!e->has_user || stat(e->point, &st) != 0 || st.st_dev != dev || !S_ISDIR(st.st_mode)) {
			covered = true; /* another mount over it, or out of reach */
			continue;
		}
		size_t len = real ? under(real, e->point) : 0;
		if (!found || len > best) {
			snprintf(m->root, sizeof(m->root), "%s", e->point);
			m->user = e->user;
			best = len;
			found = true;
		}
	}
	if (!e)
		rc = vy_client_fail(ENOMEM, "vyrefs: out of memory");
	else if (ferror(f))
		rc = vy_client_fail(EIO, "vyrefs: cannot read /proc/self/mountinfo (Fix: mount /proc)");
	else if (!found && !*is_vyrefs)
		rc = vy_client_fail(ENOTSUP, "vyrefs: %s is not on a vyrefs mount (Fix: use a file of a vyrefs mount)", file);
	else if (!found && bind)
		rc = vy_client_fail(ENOTSUP, "vyrefs: %s is on a bind mount of %s, a subdirectory of a vyrefs mount, and this "
					     "process sees no mount of that filesystem's root, where its daemon's socket is "
					     "named: refused, as a .vyre there could be anyone's (Fix: bind-mount the whole vyrefs "
					     "mount, its root, where this process can see it; or copy with plain cp)",
				    file, seen_root);
	else if (!found)
		rc = vy_client_fail(ENOTSUP, "vyrefs: the root of the vyrefs mount holding %s is %s from this process "
					     "(Fix: unmount what covers the mount's root, or use the mount from where it is "
					     "visible)",
				    file, covered ? "covered by another mount or out of reach" : "not visible");
	free(line);
	free(real);
	free(e);
	fclose(f);
	return rc;
}
