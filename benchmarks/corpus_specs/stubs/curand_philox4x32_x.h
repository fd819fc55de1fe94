// Stand-in for cuRAND's Philox header on a machine whose CUDA toolkit lacks it (compile-only checks); see curand.h.
#pragma once
