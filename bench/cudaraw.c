/* bench/cudaraw: the raw CUDA driver figures vyrefs is measured against, on
 * the same machine in the same run. Straight driver calls, none of vyrefs:
 *   cudaraw PTX   prints `key value` lines:
 *     raw.h2d_gbps, raw.d2h_gbps      pinned 256 MiB copies on one stream
 *     raw.launch_sync_us              one launch of PTX's `noop` + stream sync
 *     raw.launch_async_us             per launch in 1000 launches + one sync
 *     raw.alloc_free_us               cuMemAlloc + cuMemFree of 1 MiB
 *     raw.d2h_4k_us, raw.d2h_128k_us  one small pinned copy + stream sync: the
 *                                     device part of one FUSE read's latency
 *     raw.d2h_4k_blocking_us          the same through blocking cuMemcpyDtoH
 *     raw.d2h_4k_x4_us                the 4 KiB copy + sync while 4 threads
 *                                     each do the same on their own stream:
 *                                     the device part of a read at 4 jobs
 *     raw.event_pair_us               two events created, recorded, timed,
 *                                     destroyed (what timing a sequence costs)
 * `cudaraw PTX launch` prints only the two launch figures, for a baseline
 * taken right beside the control-file figures.
 * `cudaraw peer [BYTES]` (default 4 GiB) needs two GPUs and prints:
 *     raw.peer_gbps                   cuMemcpyPeerAsync + stream sync of BYTES
 *                                     from GPU 0 to GPU 1, cuMemAlloc'd on
 *                                     each: the median of 5 after a warm-up
 *     raw.peer_access                 on (both ways), one way, or off: peer
 *                                     access is enabled where
 *                                     cuDeviceCanAccessPeer allows it (off:
 *                                     the driver stages through the host)
 *     raw.peer_bytes                  BYTES
 * The driver is loaded with dlopen, as vyrefs loads it, so this builds on a
 * machine without one. */
#include "bench/timing.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COPY_BYTES (256u << 20)

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*MemFreeHost)(void *);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*EventCreate)(CUevent *, unsigned);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				 CUstream, void **, void **);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
} cu;

static void check(CUresult rc, const char *what)
{
	if (rc != CUDA_SUCCESS) {
		fprintf(stderr, "cudaraw: %s failed with CUresult %d (Fix: check nvidia-smi and the driver)\n", what,
			(int)rc);
		exit(1);
	}
}

static void load(void *lib, void **slot, const char *name)
{
	*slot = dlsym(lib, name);
	if (!*slot) {
		fprintf(stderr, "cudaraw: libcuda.so.1 lacks %s (Fix: update the NVIDIA driver)\n", name);
		exit(1);
	}
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cudaraw: cannot open %s (Fix: pass bench/noop.ptx)\n", path);
		exit(1);
	}
	char *text = calloc(1, 1 << 20);
	size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
	fclose(f);
	if (!n) {
		fprintf(stderr, "cudaraw: %s is empty or unreadable (Fix: pass bench/noop.ptx)\n", path);
		exit(1);
	}
	return text;
}

enum { SMALL_N = 20000, PARALLEL = 4 };

/* One of PARALLEL threads timing 4 KiB copies on a stream of its own. */
struct small_copier {
	pthread_t thread;
	CUcontext ctx;
	CUdeviceptr src;
	double sample[SMALL_N / PARALLEL];
};

static void *copy_small(void *arg)
{
	struct small_copier *c = arg;
	CUstream s;
	void *host;
	check(cu.CtxSetCurrent(c->ctx), "cuCtxSetCurrent");
	check(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	check(cu.MemHostAlloc(&host, 4096, 0), "cuMemHostAlloc");
	for (int i = 0; i < SMALL_N / PARALLEL; i++) {
		double t0 = now_us();
		check(cu.MemcpyDtoHAsync(host, c->src, 4096, s), "cuMemcpyDtoHAsync");
		check(cu.StreamSynchronize(s), "cuStreamSynchronize");
		c->sample[i] = now_us() - t0;
	}
	check(cu.MemFreeHost(host), "cuMemFreeHost");
	check(cu.StreamDestroy(s), "cuStreamDestroy");
	return NULL;
}

enum { ROUNDS = 50, BATCH = 1000, ALLOC_N = 2000 };
static double sample[SMALL_N];

/* Large pinned copies, then the small ones a read waits for. */
static void copy_figures(CUcontext ctx, CUstream s)
{
	/* Pinned copies: best of 5 rounds of 8 copies of 256 MiB. */
	void *host;
	CUdeviceptr d;
	check(cu.MemHostAlloc(&host, COPY_BYTES, 0), "cuMemHostAlloc");
	check(cu.MemAlloc(&d, COPY_BYTES), "cuMemAlloc");
	memset(host, 0x5a, COPY_BYTES);
	for (int dir = 0; dir < 2; dir++) {
		double best = 0;
		for (int round = 0; round < 5; round++) {
			double t0 = now_us();
			for (int i = 0; i < 8; i++)
				check(dir == 0 ? cu.MemcpyHtoDAsync(d, host, COPY_BYTES, s)
					       : cu.MemcpyDtoHAsync(host, d, COPY_BYTES, s),
				      "a pinned copy");
			check(cu.StreamSynchronize(s), "cuStreamSynchronize");
			double gbps = 8.0 * COPY_BYTES / ((now_us() - t0) * 1e3);
			best = gbps > best ? gbps : best;
		}
		printf("%s %.2f\n", dir == 0 ? "raw.h2d_gbps" : "raw.d2h_gbps", best);
	}

	/* Small copies: the latency one read waits for. */
	static const struct {
		const char *key;
		size_t bytes;
		int blocking;
	} small[] = {{"raw.d2h_4k_us", 4096, 0}, {"raw.d2h_128k_us", 128 << 10, 0}, {"raw.d2h_4k_blocking_us", 4096, 1}};
	for (size_t k = 0; k < sizeof(small) / sizeof(small[0]); k++) {
		for (int i = 0; i < SMALL_N; i++) {
			double t0 = now_us();
			if (small[k].blocking) {
				check(cu.MemcpyDtoH(host, d, small[k].bytes), "cuMemcpyDtoH");
			} else {
				check(cu.MemcpyDtoHAsync(host, d, small[k].bytes, s), "cuMemcpyDtoHAsync");
				check(cu.StreamSynchronize(s), "cuStreamSynchronize");
			}
			sample[i] = now_us() - t0;
		}
		printf("%s %.2f\n", small[k].key, median(sample, SMALL_N));
	}
	static struct small_copier copier[PARALLEL];
	for (int t = 0; t < PARALLEL; t++) {
		copier[t].ctx = ctx;
		copier[t].src = d + (CUdeviceptr)t * 4096;
		if (pthread_create(&copier[t].thread, NULL, copy_small, &copier[t]) != 0) {
			fprintf(stderr, "cudaraw: pthread_create failed (Fix: raise the thread limit)\n");
			exit(1);
		}
	}
	for (int t = 0; t < PARALLEL; t++) {
		if (pthread_join(copier[t].thread, NULL) != 0) {
			fprintf(stderr, "cudaraw: pthread_join failed\n");
			exit(1);
		}
		memcpy(sample + t * (SMALL_N / PARALLEL), copier[t].sample, sizeof(copier[t].sample));
	}
	printf("raw.d2h_4k_x4_us %.2f\n", median(sample, SMALL_N));
	check(cu.MemFree(d), "cuMemFree");
	check(cu.MemFreeHost(host), "cuMemFreeHost");
}

static void event_figures(CUstream s)
{
	for (int i = 0; i < ALLOC_N; i++) {
		CUevent a, b;
		float ms;
		double t0 = now_us();
		check(cu.EventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
		check(cu.EventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
		check(cu.EventRecord(a, s), "cuEventRecord");
		check(cu.EventRecord(b, s), "cuEventRecord");
		check(cu.StreamSynchronize(s), "cuStreamSynchronize");
		check(cu.EventElapsedTime(&ms, a, b), "cuEventElapsedTime");
		check(cu.EventDestroy(a), "cuEventDestroy");
		check(cu.EventDestroy(b), "cuEventDestroy");
		sample[i] = now_us() - t0;
	}
	printf("raw.event_pair_us %.2f\n", median(sample, ALLOC_N));
}

static void launch_figures(CUstream s, const char *ptx_path)
{
	CUmodule mod;
	CUfunction fn;
	char *ptx = read_file(ptx_path);
	check(cu.ModuleLoadData(&mod, ptx), "cuModuleLoadData");
	free(ptx);
	check(cu.ModuleGetFunction(&fn, mod, "noop"), "cuModuleGetFunction(noop)");
	for (int i = 0; i < 1000; i++) /* warm up */
		check(cu.LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), "cuLaunchKernel");
	check(cu.StreamSynchronize(s), "cuStreamSynchronize");
	for (int i = 0; i < SMALL_N; i++) {
		double t0 = now_us();
		check(cu.LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), "cuLaunchKernel");
		check(cu.StreamSynchronize(s), "cuStreamSynchronize");
		sample[i] = now_us() - t0;
	}
	printf("raw.launch_sync_us %.2f\n", median(sample, SMALL_N));
	for (int r = 0; r < ROUNDS; r++) {
		double t0 = now_us();
		for (int i = 0; i < BATCH; i++)
			check(cu.LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), "cuLaunchKernel");
		check(cu.StreamSynchronize(s), "cuStreamSynchronize");
		sample[r] = (now_us() - t0) / BATCH;
	}
	printf("raw.launch_async_us %.3f\n", median(sample, ROUNDS));
}

static void alloc_figures(void)
{
	for (int i = 0; i < ALLOC_N; i++) {
		CUdeviceptr p;
		double t0 = now_us();
		check(cu.MemAlloc(&p, 1u << 20), "cuMemAlloc");
		check(cu.MemFree(p), "cuMemFree");
		sample[i] = now_us() - t0;
	}
	printf("raw.alloc_free_us %.2f\n", median(sample, ALLOC_N));
}

enum { PEER_REPS = 5 };

/* One copy of `bytes` from GPU 0 to GPU 1 on the source's stream, as a
 * filesystem over two GPUs would make it: the median of PEER_REPS after a
 * warm-up, waited for by a stream sync. */
static int peer_figures(size_t bytes)
{
	int count = 0;
	check(cu.DeviceGetCount(&count), "cuDeviceGetCount");
	if (count < 2) {
		fprintf(stderr,
			"cudaraw: peer copies need two GPUs; the driver sees %d (Fix: run on a machine with two or more "
			"GPUs, or leave the devices phase out)\n",
			count);
		return 1;
	}
	CUdevice dev[2];
	CUcontext ctx[2];
	CUdeviceptr buf[2];
	int can[2];
	for (int i = 0; i < 2; i++) {
		check(cu.DeviceGet(&dev[i], i), "cuDeviceGet");
		check(cu.DevicePrimaryCtxRetain(&ctx[i], dev[i]), "cuDevicePrimaryCtxRetain");
	}
	check(cu.DeviceCanAccessPeer(&can[0], dev[0], dev[1]), "cuDeviceCanAccessPeer(0, 1)");
	check(cu.DeviceCanAccessPeer(&can[1], dev[1], dev[0]), "cuDeviceCanAccessPeer(1, 0)");
	for (int i = 0; i < 2; i++) {
		if (!can[i])
			continue;
		check(cu.CtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
		CUresult rc = cu.CtxEnablePeerAccess(ctx[1 - i], 0);
		if (rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
			check(rc, "cuCtxEnablePeerAccess");
	}
	for (int i = 0; i < 2; i++) {
		check(cu.CtxSetCurrent(ctx[i]), "cuCtxSetCurrent");
		check(cu.MemAlloc(&buf[i], bytes), "cuMemAlloc (BYTES on each GPU)");
		check(cu.MemsetD8(buf[i], i == 0 ? 0x5a : 0, bytes), "cuMemsetD8");
	}
	CUstream s;
	check(cu.CtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
	check(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	double v[PEER_REPS];
	for (int r = -1; r < PEER_REPS; r++) { /* r == -1: the warm-up */
		double t0 = now_us();
		check(cu.MemcpyPeerAsync(buf[1], ctx[1], buf[0], ctx[0], bytes, s), "cuMemcpyPeerAsync");
		check(cu.StreamSynchronize(s), "cuStreamSynchronize");
		if (r >= 0)
			v[r] = (double)bytes / ((now_us() - t0) * 1e3);
	}
	/* The copy arrived: GPU 1's last bytes are GPU 0's pattern. */
	unsigned char tail[4096];
	size_t n = bytes < sizeof(tail) ? bytes : sizeof(tail);
	check(cu.CtxSetCurrent(ctx[1]), "cuCtxSetCurrent");
	check(cu.MemcpyDtoH(tail, buf[1] + bytes - n, n), "cuMemcpyDtoH");
	for (size_t i = 0; i < n; i++) {
		if (tail[i] != 0x5a) {
			fprintf(stderr, "cudaraw: the peer copy left byte %zu of GPU 1's buffer at %#x, not 0x5a\n",
				bytes - n + i, tail[i]);
			return 1;
		}
	}
	printf("raw.peer_gbps %.2f\n", median(v, PEER_REPS));
	printf("raw.peer_access %s\n", can[0] && can[1] ? "on" : can[0] || can[1] ? "one way" : "off");
	printf("raw.peer_bytes %zu\n", bytes);
	check(cu.MemFree(buf[1]), "cuMemFree");
	check(cu.CtxSetCurrent(ctx[0]), "cuCtxSetCurrent");
	check(cu.MemFree(buf[0]), "cuMemFree");
	check(cu.StreamDestroy(s), "cuStreamDestroy");
	return 0;
}

static size_t bytes_arg(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	if (errno || *end || s[0] == '-' || n == 0 || n > SIZE_MAX) {
		fprintf(stderr, "cudaraw: bad byte count %s (Fix: a whole number of bytes from 1)\n", s);
		exit(2);
	}
	return (size_t)n;
}

int main(int argc, char **argv)
{
	bool peer = argc >= 2 && !strcmp(argv[1], "peer");
	bool launch_only = argc == 3 && !strcmp(argv[2], "launch");
	if (peer ? argc > 3 : argc != 2 && !launch_only) {
		fprintf(stderr, "usage: cudaraw bench/noop.ptx [launch] | cudaraw peer [BYTES]\n");
		return 2;
	}
	size_t peer_bytes = peer && argc == 3 ? bytes_arg(argv[2]) : (size_t)4 << 30;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "cudaraw: no CUDA driver here: %s (Fix: run on the GPU machine)\n", dlerror());
		return 1;
	}
	load(lib, (void **)&cu.Init, "cuInit");
	load(lib, (void **)&cu.DriverGetVersion, "cuDriverGetVersion");
	load(lib, (void **)&cu.DeviceGet, "cuDeviceGet");
	load(lib, (void **)&cu.DeviceGetName, "cuDeviceGetName");
	load(lib, (void **)&cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	load(lib, (void **)&cu.CtxSetCurrent, "cuCtxSetCurrent");
	load(lib, (void **)&cu.StreamCreate, "cuStreamCreate");
	load(lib, (void **)&cu.StreamSynchronize, "cuStreamSynchronize");
	load(lib, (void **)&cu.StreamDestroy, "cuStreamDestroy_v2");
	load(lib, (void **)&cu.MemFreeHost, "cuMemFreeHost");
	load(lib, (void **)&cu.MemAlloc, "cuMemAlloc_v2");
	load(lib, (void **)&cu.MemFree, "cuMemFree_v2");
	load(lib, (void **)&cu.MemHostAlloc, "cuMemHostAlloc");
	load(lib, (void **)&cu.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	load(lib, (void **)&cu.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	load(lib, (void **)&cu.MemcpyDtoH, "cuMemcpyDtoH_v2");
	load(lib, (void **)&cu.EventCreate, "cuEventCreate");
	load(lib, (void **)&cu.EventRecord, "cuEventRecord");
	load(lib, (void **)&cu.EventElapsedTime, "cuEventElapsedTime");
	load(lib, (void **)&cu.EventDestroy, "cuEventDestroy_v2");
	load(lib, (void **)&cu.ModuleLoadData, "cuModuleLoadData");
	load(lib, (void **)&cu.ModuleGetFunction, "cuModuleGetFunction");
	load(lib, (void **)&cu.LaunchKernel, "cuLaunchKernel");
	load(lib, (void **)&cu.DeviceGetCount, "cuDeviceGetCount");
	load(lib, (void **)&cu.DeviceCanAccessPeer, "cuDeviceCanAccessPeer");
	load(lib, (void **)&cu.CtxEnablePeerAccess, "cuCtxEnablePeerAccess");
	load(lib, (void **)&cu.MemsetD8, "cuMemsetD8_v2");
	load(lib, (void **)&cu.MemcpyPeerAsync, "cuMemcpyPeerAsync");

	CUdevice dev;
	CUcontext ctx;
	CUstream s;
	int version = 0;
	char name[256];
	check(cu.Init(0), "cuInit");
	if (peer)
		return peer_figures(peer_bytes);
	check(cu.DriverGetVersion(&version), "cuDriverGetVersion");
	check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	check(cu.DeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
	check(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
	check(cu.StreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	if (!launch_only) {
		printf("raw.device %s\nraw.cuda_driver_api %d\n", name, version);
		copy_figures(ctx, s);
		event_figures(s);
	}
	launch_figures(s, argv[1]);
	if (!launch_only)
		alloc_figures();
	return 0;
}
