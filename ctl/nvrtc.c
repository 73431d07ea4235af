/* NVRTC at run time: dlopen, a few entry points, a PTX cache keyed by xxh3
 * of source, options, target and NVRTC version. */
#include "ctl/nvrtc.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* The C interface of nvrtc.h, declared here so nothing needs its header. */
typedef int nvrtc_result;
typedef struct nvrtc_program *nvrtc_program;
typedef struct nvrtc_api {
	const char *(*GetErrorString)(nvrtc_result);
	nvrtc_result (*Version)(int *, int *);
	nvrtc_result (*CreateProgram)(nvrtc_program *, const char *, const char *, int, const char *const *,
				      const char *const *);
	nvrtc_result (*DestroyProgram)(nvrtc_program *);
	nvrtc_result (*CompileProgram)(nvrtc_program, int, const char *const *);
	nvrtc_result (*GetPTXSize)(nvrtc_program, size_t *);
	nvrtc_result (*GetPTX)(nvrtc_program, char *);
	nvrtc_result (*GetProgramLogSize)(nvrtc_program, size_t *);
	nvrtc_result (*GetProgramLog)(nvrtc_program, char *);
	int major, minor;
	char why[512]; /* why it could not be loaded, or "" */
} nvrtc_api;

static nvrtc_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void *open_lib(void)
{
	/* VYREFS_NVRTC names the library to use, and only it. */
	const char *only = getenv("VYREFS_NVRTC");
	if (only && only[0])
		return dlopen(only, RTLD_NOW | RTLD_LOCAL);
	static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
	const char *home = getenv("CUDA_HOME");
	char path[4096];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/lib64/%s", home && home[0] ? home : "/usr/local/cuda", names[i]);
		void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (lib)
			return lib;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (lib)
			return lib;
	}
	return NULL;
}

static void load_api(void)
{
	void *lib = open_lib();
	if (!lib) {
		snprintf(api.why, sizeof(api.why), "no NVRTC: libnvrtc.so.13 (or .12) is not under CUDA_HOME/lib64 nor where "
						   "the loader looks");
		return;
	}
#define SYM(field, name)                                                                                  \
	*(void **)&api.field = dlsym(lib, name);                                                          \
	if (!api.field) {                                                                                 \
		snprintf(api.why, sizeof(api.why), "the NVRTC found lacks %s", name);                     \
		return;                                                                                   \
	}
	SYM(GetErrorString, "nvrtcGetErrorString")
	SYM(Version, "nvrtcVersion")
	SYM(CreateProgram, "nvrtcCreateProgram")
	SYM(DestroyProgram, "nvrtcDestroyProgram")
	SYM(CompileProgram, "nvrtcCompileProgram")
	SYM(GetPTXSize, "nvrtcGetPTXSize")
	SYM(GetPTX, "nvrtcGetPTX")
	SYM(GetProgramLogSize, "nvrtcGetProgramLogSize")
	SYM(GetProgramLog, "nvrtcGetProgramLog")
#undef SYM
	if (api.Version(&api.major, &api.minor) != 0)
		snprintf(api.why, sizeof(api.why), "nvrtcVersion failed");
}

#define OPTS_MAX 64

/* Split `text` (a copy the caller frees) on blanks into opts[*n..]. */
static void split(char *text, const char **opts, int *n)
{
	for (char *save = NULL, *t = strtok_r(text, " \t", &save); t && *n < OPTS_MAX - 2; t = strtok_r(NULL, " \t", &save))
		opts[(*n)++] = t;
}

static char *read_cached(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20) && (buf = malloc((size_t)st.st_size + 1))) {
		if (read(fd, buf, (size_t)st.st_size) == st.st_size) {
			buf[st.st_size] = '\0';
			*len = (size_t)st.st_size;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	close(fd);
	return buf;
}

/* Keep the PTX for next time: written whole under a temporary name, then
 * renamed, so a reader never sees half of it. A failure only costs a
 * compile next time. */
static void write_cached(const char *dir, const char *path, const char *ptx, size_t len)
{
	/* The cache directory and its parents (the driver makes its own
	 * only once a GPU compiles something). */
	char made[4096];
	snprintf(made, sizeof(made), "%s", dir);
	for (char *p = made + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(made, 0700);
			*p = '/';
		}
	mkdir(made, 0700);
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	bool ok = write(fd, ptx, len) == (ssize_t)len;
	if (close(fd) != 0 || !ok || rename(tmp, path) != 0)
		unlink(tmp);
}

vy_err vy_nvrtc_compile(const vy_nvrtc_job *job, char **ptx, size_t *ptx_len, char **log, bool *cache_hit,
			vy_error *e)
{
	*ptx = NULL;
	*log = NULL;
	*cache_hit = false;
	pthread_once(&api_once, load_api);
	if (api.why[0])
		return vy_fail(e, VY_ENOTSUP,
			       "install NVRTC (the CUDA toolkit's libnvrtc, or Debian's libnvrtc12) and set CUDA_HOME, or copy "
			       "PTX made with nvcc -ptx",
			       "cannot compile %s: %s", job->name, api.why);
	/* Options: the first line's `// vyrefs: ...`, then kernel_cflags,
	 * then the target. */
	const char *opts[OPTS_MAX];
	int n = 0;
	char *first = NULL, *flags = job->cflags ? strdup(job->cflags) : NULL;
	const char *nl = strchr(job->src, '\n');
	size_t first_len = nl ? (size_t)(nl - job->src) : strlen(job->src);
	if (first_len > 11 && !strncmp(job->src, "// vyrefs:", 10)) {
		first = strndup(job->src + 10, first_len - 10);
		if (first)
			split(first, opts, &n);
	}
	if (flags)
		split(flags, opts, &n);
	char arch[64];
	int major = job->cc_major ? job->cc_major : 7, minor = job->cc_major ? job->cc_minor : 5;
	snprintf(arch, sizeof(arch), "--gpu-architecture=compute_%d%d", major, minor);
	opts[n++] = arch;
	/* The cache key: source, options, target and compiler. */
	XXH3_state_t *st = XXH3_createState();
	char key[40] = "";
	if (st && XXH3_64bits_reset(st) == XXH_OK) {
		XXH3_64bits_update(st, job->src, strlen(job->src) + 1);
		for (int i = 0; i < n; i++)
			XXH3_64bits_update(st, opts[i], strlen(opts[i]) + 1);
		int ver[2] = {api.major, api.minor};
		XXH3_64bits_update(st, ver, sizeof(ver));
		snprintf(key, sizeof(key), "%016llx", (unsigned long long)XXH3_64bits_digest(st));
	}
	XXH3_freeState(st);
	char dir[4096] = "", path[4200] = "";
	if (job->cache_dir && key[0]) {
		snprintf(dir, sizeof(dir), "%s/nvrtc", job->cache_dir);
		snprintf(path, sizeof(path), "%s/%s.ptx", dir, key);
		if ((*ptx = read_cached(path, ptx_len))) {
			*cache_hit = true;
			*log = strdup("");
			free(first);
			free(flags);
			return VY_OK;
		}
	}
	nvrtc_program prog = NULL;
	vy_err rc = VY_OK;
	nvrtc_result r = api.CreateProgram(&prog, job->src, job->name, 0, NULL, NULL);
	if (r != 0) {
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "nvrtcCreateProgram: %s", api.GetErrorString(r));
	} else {
		nvrtc_result cr = api.CompileProgram(prog, n, opts);
		size_t log_len = 0;
		if (api.GetProgramLogSize(prog, &log_len) == 0 && (*log = malloc(log_len + 1))) {
			if (api.GetProgramLog(prog, *log) != 0)
				(*log)[0] = '\0';
			(*log)[log_len] = '\0';
		}
		size_t len = 0;
		if (cr != 0)
			rc = vy_fail(e, VY_EINVAL, "fix the source: modules/NAME.log has the compiler's line and column",
				     "%s does not compile: %s", job->name, api.GetErrorString(cr));
		else if (api.GetPTXSize(prog, &len) != 0 || !(*ptx = malloc(len + 1)) || api.GetPTX(prog, *ptx) != 0)
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot take the PTX of %s", job->name);
		else {
			(*ptx)[len] = '\0';
			*ptx_len = strlen(*ptx) + 1; /* PTX is text: its NUL ends it */
			if (path[0])
				write_cached(dir, path, *ptx, *ptx_len);
		}
		api.DestroyProgram(&prog);
	}
	if (rc != VY_OK) {
		free(*ptx);
		*ptx = NULL;
	}
	free(first);
	free(flags);
	return rc;
}
