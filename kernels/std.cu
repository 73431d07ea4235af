// The standard module `std`: everyday kernels for the shell, compiled by
// NVRTC (ctl/nvrtc.c) the first time a sequence names std.KERNEL, cached
// like any .cu module. docs/ctl.md lists every kernel with an example.
//
// Conventions, so a shell user can guess a kernel:
// - NAME_TYPE, TYPE one of f32 f64 f16 bf16 i32 u32 i64 u64 u8; the output
//   comes first (as in memcpy), the element count n (u64) last.
// - f16 and bf16 travel as 16-bit patterns; conversions round to nearest
//   even, overflow to infinity, keep NaN a (quiet) NaN. They are written
//   with bit operations, not cuda_fp16.h, so no header is needed and the
//   host can check every bit.
// - Arithmetic rounds each operation (__fmul_rn, __fadd_rn: no fused
//   multiply-add), so results equal numpy's to the bit.
// - Every kernel is a grid-stride loop over a linear thread index: any grid
//   and block give the same result, so `n=COUNT` and `n=COUNT grid=auto`
//   both work; reductions want grid=auto (at most 4096 blocks do the work).
// - A reduction writes its result into out[0] (no clear needed): each block
//   leaves a partial in a slot, and the last block to finish combines them
//   in slot order, so a result is the same run after run for one grid.

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

// ---- threads ---------------------------------------------------------------

__device__ __forceinline__ u32 vy_tid()
{
	return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ u32 vy_bsize()
{
	return blockDim.x * blockDim.y * blockDim.z;
}
__device__ __forceinline__ u64 vy_bid()
{
	return blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
}
__device__ __forceinline__ u64 vy_nblocks()
{
	return (u64)gridDim.x * gridDim.y * gridDim.z;
}

// for (u64 i = first; i < n; i += stride): every element once.
#define VY_EACH(i, n)                                                                    \
	for (u64 i = vy_bid() * vy_bsize() + vy_tid(), vy_step_ = vy_nblocks() * vy_bsize(); \
	     i < (n); i += vy_step_)

// ---- f16 and bf16 as bits ----------------------------------------------------

__device__ __forceinline__ u16 vy_f32_to_f16(float f)
{
	u32 x = __float_as_uint(f);
	u32 sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u) // NaN: quiet, with the payload's top bits
		return (u16)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
	if (ax >= 0x477ff000u) // 65520 and up round to infinity
		return (u16)(sign | 0x7c00u);
	if (ax >= 0x38800000u) { // a normal f16: rebias, round the 13 dropped bits
		u32 r = ax - 0x38000000u;
		r += 0xfffu + ((r >> 13) & 1u);
		return (u16)(sign | (r >> 13));
	}
	// Below 2^-14: a subnormal f16, m * 2^(e-126) units of 2^-24.
	u32 e = ax >> 23, shift = 126u - e;
	if (e == 0 || shift > 24u) // below 2^-25: rounds to zero
		return (u16)sign;
	u32 m = (ax & 0x7fffffu) | 0x800000u;
	u32 q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
	if (rem > half || (rem == half && (q & 1u)))
		q++; // may carry into the smallest normal: the right bits
	return (u16)(sign | q);
}

__device__ __forceinline__ float vy_f16_to_f32(u16 h)
{
	u32 sign = ((u32)h & 0x8000u) << 16, e = ((u32)h >> 10) & 0x1fu, m = (u32)h & 0x3ffu;
	if (e == 0x1fu)
		return __uint_as_float(sign | 0x7f800000u | (m << 13));
	if (e == 0) { // zero or subnormal: m * 2^-24, exact in f32
		float v = (float)m * 5.9604644775390625e-8f;
		return sign ? -v : v;
	}
	return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ __forceinline__ u16 vy_f32_to_bf16(float f)
{
	u32 x = __float_as_uint(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (u16)((x >> 16) | 0x40u); // NaN stays NaN (quiet)
	return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float vy_bf16_to_f32(u16 b)
{
	return __uint_as_float((u32)b << 16);
}

// ---- fill, iota --------------------------------------------------------------

#define VY_FILL(name, T, V, conv)                                            \
	extern "C" __global__ void fill_##name(T *y, V v, u64 n)             \
	{                                                                    \
		T x = conv(v);                                               \
		VY_EACH(i, n) y[i] = x;                                      \
	}
#define VY_SAME(v) (v)
VY_FILL(f32, float, float, VY_SAME)
VY_FILL(f64, double, double, VY_SAME)
VY_FILL(f16, u16, float, vy_f32_to_f16)
VY_FILL(bf16, u16, float, vy_f32_to_bf16)
VY_FILL(i32, int, int, VY_SAME)
VY_FILL(u32, u32, u32, VY_SAME)
VY_FILL(i64, i64, i64, VY_SAME)
VY_FILL(u64, u64, u64, VY_SAME)
VY_FILL(u8, u8, u32, (u8))

// y[i] = start + step * i, in f64 with each operation rounded, then to T.
extern "C" __global__ void iota_f32(float *y, float start, float step, u64 n)
{
	VY_EACH(i, n) y[i] = __double2float_rn(__dadd_rn(start, __dmul_rn(step, (double)i)));
}
extern "C" __global__ void iota_f64(double *y, double start, double step, u64 n)
{
	VY_EACH(i, n) y[i] = __dadd_rn(start, __dmul_rn(step, (double)i));
}
// Integers wrap, as unsigned arithmetic does.
extern "C" __global__ void iota_i32(int *y, int start, int step, u64 n)
{
	VY_EACH(i, n) y[i] = (int)((u32)start + (u32)step * (u32)i);
}
extern "C" __global__ void iota_u32(u32 *y, u32 start, u32 step, u64 n)
{
	VY_EACH(i, n) y[i] = start + step * (u32)i;
}
extern "C" __global__ void iota_i64(i64 *y, i64 start, i64 step, u64 n)
{
	VY_EACH(i, n) y[i] = (i64)((u64)start + (u64)step * i);
}

// ---- elementwise arithmetic --------------------------------------------------

#define VY_ARITH(T, S, mul, add)                                                         \
	extern "C" __global__ void axpy_##S(T *y, const T *x, T a, u64 n)                \
	{                                                                                \
		VY_EACH(i, n) y[i] = add(mul(a, x[i]), y[i]);                            \
	}                                                                                \
	extern "C" __global__ void scale_##S(T *y, T a, u64 n)                           \
	{                                                                                \
		VY_EACH(i, n) y[i] = mul(a, y[i]);                                       \
	}                                                                                \
	extern "C" __global__ void add_##S(T *z, const T *x, const T *y, u64 n)          \
	{                                                                                \
		VY_EACH(i, n) z[i] = add(x[i], y[i]);                                    \
	}                                                                                \
	extern "C" __global__ void mul_##S(T *z, const T *x, const T *y, u64 n)          \
	{                                                                                \
		VY_EACH(i, n) z[i] = mul(x[i], y[i]);                                    \
	}
VY_ARITH(float, f32, __fmul_rn, __fadd_rn)
VY_ARITH(double, f64, __dmul_rn, __dadd_rn)

// ---- conversions ---------------------------------------------------------------

#define VY_CONVERT(from, to, TF, TT, conv)                                                \
	extern "C" __global__ void from##_to_##to(TT *y, const TF *x, u64 n)               \
	{                                                                                  \
		VY_EACH(i, n) y[i] = conv(x[i]);                                           \
	}
#define VY_F16_TO_BF16(h) vy_f32_to_bf16(vy_f16_to_f32(h))
#define VY_BF16_TO_F16(b) vy_f32_to_f16(vy_bf16_to_f32(b))
VY_CONVERT(f32, f16, float, u16, vy_f32_to_f16)
VY_CONVERT(f16, f32, u16, float, vy_f16_to_f32)
VY_CONVERT(f32, bf16, float, u16, vy_f32_to_bf16)
VY_CONVERT(bf16, f32, u16, float, vy_bf16_to_f32)
VY_CONVERT(f16, bf16, u16, u16, VY_F16_TO_BF16)
VY_CONVERT(bf16, f16, u16, u16, VY_BF16_TO_F16)
VY_CONVERT(f32, f64, float, double, (double))
VY_CONVERT(f64, f32, double, float, __double2float_rn)
VY_CONVERT(u8, f32, u8, float, (float))
VY_CONVERT(i32, f32, int, float, __int2float_rn)

// ---- reductions ---------------------------------------------------------------
// Up to VY_SLOTS blocks each fold their share (a grid-stride loop over
// min(blocks, VY_SLOTS) of them; any more have nothing to do), leave the
// block's value in a slot, and count themselves done; the last one folds
// the slots in order, writes out[0] and resets the count for the next
// launch. Launches on one stream never overlap, so one set of slots serves
// every reduction.

#define VY_SLOTS 4096u
__device__ u64 vy_slot[VY_SLOTS];
__device__ u32 vy_done;

struct vy_sum_f64 {
	typedef double T;
	static __device__ T id() { return 0.0; }
	static __device__ T op(T a, T b) { return __dadd_rn(a, b); }
	static __device__ u64 bits(T v) { return (u64)__double_as_longlong(v); }
	static __device__ T from(u64 b) { return __longlong_as_double((i64)b); }
};
// min and max ignore NaN (as fmin and numpy's nanmin); all NaN gives NaN.
struct vy_min_f64 : vy_sum_f64 {
	static __device__ T id() { return __longlong_as_double(0x7ff0000000000000ll); }
	static __device__ T op(T a, T b) { return fmin(a, b); }
};
struct vy_max_f64 : vy_sum_f64 {
	static __device__ T id() { return -__longlong_as_double(0x7ff0000000000000ll); }
	static __device__ T op(T a, T b) { return fmax(a, b); }
};
struct vy_sum_i64 {
	typedef i64 T;
	static __device__ T id() { return 0; }
	static __device__ T op(T a, T b) { return (i64)((u64)a + (u64)b); }
	static __device__ u64 bits(T v) { return (u64)v; }
	static __device__ T from(u64 b) { return (i64)b; }
};
// i32 values, widened: an empty input gives INT32_MAX (min) or INT32_MIN (max).
struct vy_min_i32 : vy_sum_i64 {
	static __device__ T id() { return 0x7fffffffll; }
	static __device__ T op(T a, T b) { return a < b ? a : b; }
};
struct vy_max_i32 : vy_sum_i64 {
	static __device__ T id() { return -0x80000000ll; }
	static __device__ T op(T a, T b) { return a > b ? a : b; }
};

// Fold a warp's values into its first lane; `lanes` of it exist (a block
// need not be a multiple of 32 threads: values from lanes that do not
// exist are never used).
template <class R> __device__ typename R::T vy_warp_fold(typename R::T v, u32 lanes)
{
	u32 lane = vy_tid() & 31u, mask = lanes >= 32u ? 0xffffffffu : (1u << lanes) - 1u;
	for (u32 o = 16; o > 0; o >>= 1) {
		typename R::T other = __shfl_down_sync(mask, v, o);
		if (lane + o < lanes)
			v = R::op(v, other);
	}
	return v;
}

// The block's value, in thread 0. Every thread of the block calls it.
template <class R> __device__ typename R::T vy_block_fold(typename R::T v)
{
	__shared__ typename R::T warps[32];
	u32 t = vy_tid(), n = vy_bsize(), nw = (n + 31u) / 32u, w = t / 32u;
	v = vy_warp_fold<R>(v, n - w * 32u < 32u ? n - w * 32u : 32u);
	if ((t & 31u) == 0)
		warps[w] = v;
	__syncthreads();
	if (w == 0) {
		v = t < nw ? warps[t] : R::id();
		v = vy_warp_fold<R>(v, n < 32u ? n : 32u);
	}
	__syncthreads(); // warps[] is free for the next call
	return v;
}

// Blocks that take part, and whether this one does.
__device__ __forceinline__ u32 vy_workers()
{
	u64 nb = vy_nblocks();
	return nb < VY_SLOTS ? (u32)nb : VY_SLOTS;
}

// Leave this block's value; the last block writes the total to *out.
template <class R, class O> __device__ void vy_finish(O *out, typename R::T v)
{
	__shared__ bool last;
	u32 workers = vy_workers(), b = (u32)vy_bid();
	v = vy_block_fold<R>(v);
	if (vy_tid() == 0) {
		vy_slot[b] = R::bits(v);
		__threadfence(); // the slot is seen before the count
		last = atomicInc(&vy_done, workers - 1u) == workers - 1u; // wraps to 0
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	typename R::T acc = R::id();
	for (u32 s = vy_tid(); s < workers; s += vy_bsize())
		acc = R::op(acc, R::from(((volatile u64 *)vy_slot)[s]));
	acc = vy_block_fold<R>(acc);
	if (vy_tid() == 0)
		*out = (O)acc;
}

#define VY_WORKER()                                                            \
	if (vy_bid() >= vy_workers())                                          \
		return;                                                        \
	u64 first = vy_bid() * vy_bsize() + vy_tid(), stride = (u64)vy_workers() * vy_bsize()

// f32 input: four float4 loads in flight per thread when x is 16-byte
// aligned (memory bandwidth is the limit), else one float at a time.
template <class R> __device__ typename R::T vy_fold_f32(const float *x, u64 n, u64 first, u64 stride)
{
	typename R::T acc = R::id();
	u64 i = first;
	if (((size_t)x & 15u) == 0) {
		const float4 *v = (const float4 *)x;
		u64 nv = n / 4;
		for (; i + 3 * stride < nv; i += 4 * stride) {
			float4 a = __ldg(v + i), b = __ldg(v + i + stride), c = __ldg(v + i + 2 * stride),
			       d = __ldg(v + i + 3 * stride);
			acc = R::op(acc, R::op(R::op((double)a.x, (double)a.y), R::op((double)a.z, (double)a.w)));
			acc = R::op(acc, R::op(R::op((double)b.x, (double)b.y), R::op((double)b.z, (double)b.w)));
			acc = R::op(acc, R::op(R::op((double)c.x, (double)c.y), R::op((double)c.z, (double)c.w)));
			acc = R::op(acc, R::op(R::op((double)d.x, (double)d.y), R::op((double)d.z, (double)d.w)));
		}
		for (; i < nv; i += stride) {
			float4 a = __ldg(v + i);
			acc = R::op(acc, R::op(R::op((double)a.x, (double)a.y), R::op((double)a.z, (double)a.w)));
		}
		for (i = 4 * nv + first; i < n; i += stride)
			acc = R::op(acc, (double)x[i]);
	} else {
		for (; i < n; i += stride)
			acc = R::op(acc, (double)x[i]);
	}
	return acc;
}

template <class R, class TX> __device__ typename R::T vy_fold(const TX *x, u64 n, u64 first, u64 stride)
{
	typename R::T acc = R::id();
	for (u64 i = first; i < n; i += stride)
		acc = R::op(acc, (typename R::T)x[i]);
	return acc;
}

// f32 sums are kept in f64 and rounded once at the end.
extern "C" __global__ void sum_f32(float *out, const float *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_sum_f64>(out, vy_fold_f32<vy_sum_f64>(x, n, first, stride));
}
extern "C" __global__ void min_f32(float *out, const float *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_min_f64>(out, vy_fold_f32<vy_min_f64>(x, n, first, stride));
}
extern "C" __global__ void max_f32(float *out, const float *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_max_f64>(out, vy_fold_f32<vy_max_f64>(x, n, first, stride));
}
extern "C" __global__ void sum_f64(double *out, const double *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_sum_f64>(out, vy_fold<vy_sum_f64>(x, n, first, stride));
}
extern "C" __global__ void min_f64(double *out, const double *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_min_f64>(out, vy_fold<vy_min_f64>(x, n, first, stride));
}
extern "C" __global__ void max_f64(double *out, const double *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_max_f64>(out, vy_fold<vy_max_f64>(x, n, first, stride));
}
// i32 sums are i64 (exact up to 2^63).
extern "C" __global__ void sum_i32(i64 *out, const int *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_sum_i64>(out, vy_fold<vy_sum_i64>(x, n, first, stride));
}
extern "C" __global__ void min_i32(int *out, const int *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_min_i32>(out, vy_fold<vy_min_i32>(x, n, first, stride));
}
extern "C" __global__ void max_i32(int *out, const int *x, u64 n)
{
	VY_WORKER();
	vy_finish<vy_max_i32>(out, vy_fold<vy_max_i32>(x, n, first, stride));
}

// ---- compare -------------------------------------------------------------------
// out[0] = how many elements differ: floats by more than tol (equal
// infinities and two NaNs match; one NaN does not), integers at all.

template <class T> __device__ __forceinline__ bool vy_differ(T a, T b, T tol)
{
	return !(a == b || (a != a && b != b) || (a - b <= tol && b - a <= tol));
}

#define VY_COMPARE_F(S, T)                                                                  \
	extern "C" __global__ void compare_##S(u64 *out, const T *a, const T *b, T tol, u64 n)    \
	{                                                                                   \
		VY_WORKER();                                                                \
		i64 c = 0;                                                                  \
		for (u64 i = first; i < n; i += stride)                                     \
			c += vy_differ(a[i], b[i], tol);                                    \
		vy_finish<vy_sum_i64>(out, c);                                              \
	}
#define VY_COMPARE_I(S, T)                                                                  \
	extern "C" __global__ void compare_##S(u64 *out, const T *a, const T *b, u64 n)           \
	{                                                                                   \
		VY_WORKER();                                                                \
		i64 c = 0;                                                                  \
		for (u64 i = first; i < n; i += stride)                                     \
			c += a[i] != b[i];                                                  \
		vy_finish<vy_sum_i64>(out, c);                                              \
	}
VY_COMPARE_F(f32, float)
VY_COMPARE_F(f64, double)
VY_COMPARE_I(u8, u8)
VY_COMPARE_I(u32, u32)
