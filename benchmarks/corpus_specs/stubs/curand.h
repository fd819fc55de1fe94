// Stand-in for cuRAND's host header on a machine whose CUDA toolkit lacks it (compile-only checks): flashinfer's
// sampling header includes it; the kernels benchmarked from that header never call cuRAND.
#pragma once
