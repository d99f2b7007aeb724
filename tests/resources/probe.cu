// Kernels with known resource shapes for records_test.py: ptxas's own
// --resource-usage report on them is the expectation resource_records.py must
// reproduce from the compiled object.

// No shared memory, no launch bound.
__global__ void plain_kernel(int* p) { p[threadIdx.x] += 1; }

// 4 bytes of static shared memory, launch bound 128.
__global__ void __launch_bounds__(128) small_smem_kernel(int* p) {
  __shared__ int s;
  if (threadIdx.x == 0) s = p[0];
  __syncthreads();
  p[threadIdx.x + 1] = s;
}

// 4000 bytes of static shared memory, launch bound 256 x 2 blocks.
__global__ void __launch_bounds__(256, 2) big_smem_kernel(float* p) {
  __shared__ float s[1000];
  for (int i = threadIdx.x; i < 1000; i += blockDim.x) s[i] = p[i];
  __syncthreads();
  p[threadIdx.x] = s[999 - threadIdx.x % 1000];
}

// A dynamically indexed array: local memory (a stack frame), a template.
template <int N>
__global__ void local_array_kernel(const float* in, float* out, int k) {
  float r[N];
  for (int i = 0; i < N; ++i) r[i] = in[i * blockDim.x + threadIdx.x];
  float acc = 0;
  for (int i = 0; i < N; ++i) acc += r[(i * k) % N] * r[i];
  out[threadIdx.x] = acc;
}
template __global__ void local_array_kernel<64>(const float*, float*, int);
template __global__ void local_array_kernel<8>(const float*, float*, int);

// Dynamic shared memory only (none static), bound by a 2-D launch bound.
__global__ void __launch_bounds__(64) dynamic_smem_kernel(float* p) {
  extern __shared__ float d[];
  d[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = d[63 - threadIdx.x];
}
