"""Which `#include`s a stand-alone device compile unit keeps, maps or drops, for nvcc and for NVRTC.

Host-only framework headers (torch, ATen, c10, pybind11, Python) are dropped for both compilers: the
extracted unit holds no host function that could need them. nvcc keeps every other header (the host
C++ library is there, and `<cub/cub.cuh>` works). NVRTC has no host C++ library: standard headers that
CCCL provides are mapped to `<cuda/std/...>`, the math/limits headers are covered by the unit's prelude,
the rest are dropped, and `<cub/cub.cuh>` (which pulls in host launch code NVRTC rejects) is replaced by
the device-only cub headers of the cub classes the unit names.
"""

from __future__ import annotations

from collections.abc import Set

TORCH_PREFIXES = ("torch/", "ATen/", "c10/", "caffe2/", "THC/")
_HOST_ONLY_PREFIXES = (*TORCH_PREFIXES, "pybind11/", "Python.h")
_HOST_ONLY_STREAMS = frozenset(("iostream", "fstream", "sstream", "iomanip", "ostream", "istream"))
CUDA_HOST_API = frozenset(("cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "cuda_profiler_api.h"))

# NVRTC: standard headers CCCL provides device versions of.
_NVRTC_STD = {
    name: f"cuda/std/{name}"
    for name in (
        "type_traits",
        "cstdint",
        "utility",
        "array",
        "tuple",
        "climits",
        "cfloat",
        "cstddef",
        "complex",
        "functional",
        "bit",
        "atomic",
        "span",
        "optional",
        "variant",
        "ratio",
        "chrono",
        "cassert",
        "cstring",
        "cstdlib",
        "ctime",
        "numeric",
        "iterator",
        "initializer_list",
        "concepts",
        "numbers",
        "bitset",
        "memory",
        "version",
        "source_location",
    )
}
_NVRTC_STD.update(
    {
        "stdint.h": "cuda/std/cstdint",
        "limits.h": "cuda/std/climits",
        "float.h": "cuda/std/cfloat",
        "assert.h": "cuda/std/cassert",
        "string.h": "cuda/std/cstring",
        "stdlib.h": "cuda/std/cstdlib",
        "stddef.h": "cuda/std/cstddef",
    }
)

# Headers of the C and C++ standard libraries (NVRTC has none of them).
STANDARD = frozenset(
    """algorithm any array atomic bit bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes
    climits clocale cmath codecvt compare complex concepts condition_variable cstdarg cstddef cstdint
    cstdio cstdlib cstring ctime cuchar cwchar cwctype deque exception execution filesystem format
    forward_list fstream functional future initializer_list iomanip ios iosfwd iostream istream iterator
    limits list locale map memory memory_resource mutex new numbers numeric optional ostream queue random
    ranges ratio regex scoped_allocator set shared_mutex source_location span sstream stack stdexcept
    streambuf string string_view system_error thread tuple type_traits typeindex typeinfo unordered_map
    unordered_set utility valarray variant vector version assert.h ctype.h errno.h float.h inttypes.h
    limits.h math.h stdarg.h stddef.h stdint.h stdio.h stdlib.h string.h time.h""".split()  # noqa: SIM905
)

# cub classes → the device-only header that declares each (what `<cub/cub.cuh>` becomes under NVRTC).
_CUB_HEADERS = {
    "BlockReduce": "cub/block/block_reduce.cuh",
    "BlockScan": "cub/block/block_scan.cuh",
    "BlockLoad": "cub/block/block_load.cuh",
    "BlockStore": "cub/block/block_store.cuh",
    "BlockRadixSort": "cub/block/block_radix_sort.cuh",
    "BlockExchange": "cub/block/block_exchange.cuh",
    "BlockHistogram": "cub/block/block_histogram.cuh",
    "BlockDiscontinuity": "cub/block/block_discontinuity.cuh",
    "BlockAdjacentDifference": "cub/block/block_adjacent_difference.cuh",
    "WarpReduce": "cub/warp/warp_reduce.cuh",
    "WarpScan": "cub/warp/warp_scan.cuh",
    "WarpLoad": "cub/warp/warp_load.cuh",
    "WarpStore": "cub/warp/warp_store.cuh",
    "WarpExchange": "cub/warp/warp_exchange.cuh",
    "Sum": "cub/thread/thread_operators.cuh",
    "Max": "cub/thread/thread_operators.cuh",
    "Min": "cub/thread/thread_operators.cuh",
}


def device_includes(target: str, system: bool, *, for_nvrtc: bool, names: Set[str]) -> list[str]:
    """The include targets that replace `#include <target>` in a device-only unit ([] drops it).

    `names` are the identifiers the unit uses (they choose the cub headers under NVRTC).
    """
    if target.startswith(_HOST_ONLY_PREFIXES) or target in _HOST_ONLY_STREAMS:
        return []
    if not for_nvrtc:
        return [target]
    if target == "cub/cub.cuh":
        return sorted({header for cls, header in _CUB_HEADERS.items() if cls in names})
    if target in CUDA_HOST_API:
        return []
    if system and target in _NVRTC_STD:
        return [_NVRTC_STD[target]]
    if system and target in STANDARD:
        return []  # cmath/limits are in the prelude; the rest has no device version
    return [target]
