// bench/probes/mailbox.cu: could a 4 KiB read skip the copy engine? A
// persistent kernel polls one mailbox per host thread in mapped pinned host
// memory, copies the asked-for range into pinned host memory and raises a flag
// the host spins on; timed against cuMemcpyDtoHAsync + stream sync, from 1
// and 4 threads. A one-off measurement (docs/BENCHMARKS.md, engineering log),
// not part of `make bench`. On the GPU machine:
//   nvcc -O2 -arch=sm_90 -o /tmp/mailbox bench/probes/mailbox.cu && /tmp/mailbox 4096
//   (-DNS=200: the kernel sleeps 200 ns between polls)
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

struct Slot {
	volatile unsigned long long seq;   // host -> gpu
	unsigned long long off;
	unsigned long long len;
	char pad0[40];
	volatile unsigned long long done;  // gpu -> host
	char pad[56];
};

#define MAXSLOT 4
#ifndef NS
#define NS 0
#endif
#define SLOTBYTES (1 << 20)

__global__ void serve(Slot *slots, const char *dev, char *host, volatile int *stop)
{
	Slot *s = &slots[blockIdx.x];
	__shared__ unsigned long long seq_seen, off, len;
	__shared__ int quit;
	unsigned long long last = 0;
	for (;;) {
		if (threadIdx.x == 0) {
			unsigned long long q;
			unsigned n = 0;
			while ((q = s->seq) == last) { if (NS) __nanosleep(NS); if ((++n & 1023) == 0 && *stop) break; }
			seq_seen = q; off = s->off; len = s->len;
			quit = (q == last);
		}
		__syncthreads();
		if (quit) return;
		last = seq_seen;
		const uint4 *src = (const uint4 *)(dev + off);
		uint4 *dst = (uint4 *)(host + (size_t)blockIdx.x * SLOTBYTES);
		for (unsigned long long i = threadIdx.x; i < len / 16; i += blockDim.x) {
			uint4 v = __ldcg(src + i);
			dst[i] = v;
		}
		__threadfence_system();
		__syncthreads();
		if (threadIdx.x == 0) s->done = last;
		__syncthreads();
	}
}

static double now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

static char *dev; static size_t devsz = 256 << 20;
static Slot *slots; static char *hostbuf; static int *stopf;
static int N = 20000; static size_t LEN = 4096;

struct Res { std::vector<double> lat; };

static void report(const char *name, std::vector<double> &v, int threads, double wall)
{
	std::sort(v.begin(), v.end());
	double sum = 0; for (double x : v) sum += x;
	printf("%-28s thr=%d len=%zu mean=%.2f p50=%.2f p99=%.2f us  ops/s=%.0f\n", name, threads, LEN, sum / v.size(), v[v.size() / 2], v[v.size() * 99 / 100], v.size() / wall * 1e6);
}

struct Arg { int id; std::vector<double> lat; int mode; };

static void *worker(void *p)
{
	Arg *a = (Arg *)p;
	unsigned seed = a->id * 7919 + 1;
	if (a->mode == 0) {
		cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
		char *h; CK(cudaHostAlloc(&h, LEN, 0));
		for (int i = 0; i < N; i++) {
			size_t off = (size_t)(rand_r(&seed) % (devsz / LEN)) * LEN;
			double t0 = now_us();
			CK(cudaMemcpyAsync(h, dev + off, LEN, cudaMemcpyDeviceToHost, st));
			CK(cudaStreamSynchronize(st));
			a->lat.push_back(now_us() - t0);
			if (((unsigned *)h)[0] != (unsigned)(off / 4)) { fprintf(stderr, "bad copy\n"); exit(1); }
		}
	} else {
		Slot *s = &slots[a->id];
		char *h = hostbuf + (size_t)a->id * SLOTBYTES;
		unsigned long long seq = 0;
		for (int i = 0; i < N; i++) {
			size_t off = (size_t)(rand_r(&seed) % (devsz / LEN)) * LEN;
			double t0 = now_us();
			s->off = off; s->len = LEN;
			__atomic_thread_fence(__ATOMIC_RELEASE);
			s->seq = ++seq;
			while (s->done != seq) __builtin_ia32_pause();
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			a->lat.push_back(now_us() - t0);
			if (((unsigned *)h)[0] != (unsigned)(off / 4) || ((unsigned *)h)[LEN / 4 - 1] != (unsigned)(off / 4 + LEN / 4 - 1)) { fprintf(stderr, "bad mailbox %x %zx\n", ((unsigned *)h)[0], off); exit(1); }
		}
	}
	return NULL;
}

static void run(const char *name, int mode, int threads)
{
	Arg a[MAXSLOT];
	pthread_t t[MAXSLOT];
	double t0 = now_us();
	for (int i = 0; i < threads; i++) { a[i].id = i; a[i].mode = mode; pthread_create(&t[i], NULL, worker, &a[i]); }
	std::vector<double> all;
	for (int i = 0; i < threads; i++) { pthread_join(t[i], NULL); all.insert(all.end(), a[i].lat.begin(), a[i].lat.end()); }
	report(name, all, threads, now_us() - t0);
}

__global__ void pattern(unsigned *p, size_t n) { for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = (unsigned)i; }

int main(int argc, char **argv)
{
	if (argc > 1) LEN = atoi(argv[1]);
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&dev, devsz));
	pattern<<<1024, 256>>>((unsigned *)dev, devsz / 4);
	CK(cudaDeviceSynchronize());
	CK(cudaHostAlloc(&slots, sizeof(Slot) * MAXSLOT, cudaHostAllocMapped));
	CK(cudaHostAlloc(&hostbuf, (size_t)SLOTBYTES * MAXSLOT, cudaHostAllocMapped));
	CK(cudaHostAlloc(&stopf, 4, cudaHostAllocMapped));
	memset(slots, 0, sizeof(Slot) * MAXSLOT); *stopf = 0;
	Slot *dslots; char *dhost; int *dstop;
	CK(cudaHostGetDevicePointer(&dslots, slots, 0));
	CK(cudaHostGetDevicePointer(&dhost, hostbuf, 0));
	CK(cudaHostGetDevicePointer(&dstop, stopf, 0));
	for (int thr : {1, 4}) run("copy+sync", 0, thr);
	cudaStream_t ps; CK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
	int threads = atoi(getenv("BLK") ? getenv("BLK") : "256");
	serve<<<MAXSLOT, threads, 0, ps>>>(dslots, dev, dhost, stopf);
	CK(cudaGetLastError());
	for (int thr : {1, 4}) run("mailbox", 1, thr);
	// a copy while the persistent kernel runs
	run("copy+sync (kernel resident)", 0, 1);
	*(volatile int *)stopf = 1;
	CK(cudaStreamSynchronize(ps));
	for (int thr : {1, 4}) run("copy+sync after", 0, thr);
	return 0;
}
