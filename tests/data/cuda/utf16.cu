// Ünïcödé comment — with 𝄞 (outside the BMP: two UTF-16 code units)
/* é𝄞 */ __global__ void wide(float* x) { x[0] = 1; }
__global__ void after(float* x) { /* é */ x[0] = 2; }
