// y = a * x + y over n floats: the module README.md's GPU step loads.
//   cp examples/saxpy.cu ~/gpu/.vyre/modules/    (NVRTC compiles it at close)
//   echo 'launch saxpy.saxpy grid=64 block=256 y x f32:2.0 u32:16384' > ~/gpu/.vyre/ctl
// Files y and x hold at least n floats; the launch's arguments follow the
// kernel's parameters in order (docs/ctl.md).
extern "C" __global__ void saxpy(float *y, const float *x, float a, unsigned n)
{
	for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
		y[i] = a * x[i] + y[i];
}
