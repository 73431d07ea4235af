/* holes probe: map one allocation of zeros at every place of a large
 * reservation, as a sparse file's holes are mapped on a GPU, and time it.
 *   zmap SPAN each|once [ZERO_BYTES]
 * each: cuMemSetAccess per mapping (what vyrefs does); once: one call for
 * the whole span. ZERO_BYTES: the zero allocation (default: the granule). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int check(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return 0;
	const char *s = "?";
	cuGetErrorName(r, &s);
	printf("%s: %s\n", what, s);
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: zmap SPAN each|once [ZERO_BYTES]\n");
		return 2;
	}
	unsigned long long span = strtoull(argv[1], 0, 0), zsz = argc > 3 ? strtoull(argv[3], 0, 0) : 0;
	int once = !strcmp(argv[2], "once");
	CUdevice d;
	CUcontext ctx;
	if (check(cuInit(0), "cuInit") || check(cuDeviceGet(&d, 0), "cuDeviceGet") ||
	    check(cuDevicePrimaryCtxRetain(&ctx, d), "retain") || check(cuCtxSetCurrent(ctx), "current"))
		return 1;
	CUmemAllocationProp p = {0};
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	size_t g;
	if (check(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity"))
		return 1;
	if (zsz)
		g = zsz;
	CUmemGenericAllocationHandle h;
	CUdeviceptr base;
	if (check(cuMemCreate(&h, g, &p, 0), "cuMemCreate") || check(cuMemAddressReserve(&base, span, g, 0, 0), "reserve"))
		return 1;
	CUmemAccessDesc a = {0};
	a.location = p.location;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	unsigned long long n = span / g, i;
	double t0 = now();
	for (i = 0; i < n; i++) {
		CUresult r = cuMemMap(base + i * g, g, 0, h, 0);
		if (!r && !once)
			r = cuMemSetAccess(base + i * g, g, &a, 1);
		if (r) {
			check(r, "map");
			printf("failed at mapping %llu (%llu GiB)\n", i, (i * g) >> 30);
			break;
		}
	}
	if (once && i == n && check(cuMemSetAccess(base, span, &a, 1), "cuMemSetAccess of the whole span"))
		i = 0;
	double t = now() - t0;
	printf("span %llu GiB, zero %zu MiB: %llu of %llu mappings in %.3f s (%.2f us each)\n", span >> 30, g >> 20, i, n,
	       t, t * 1e6 / (i ? i : 1));
	for (unsigned long long j = 0; j < i; j++)
		cuMemUnmap(base + j * g, g);
	return i == n ? 0 : 1;
}
