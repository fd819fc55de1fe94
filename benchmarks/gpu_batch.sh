#!/usr/bin/env bash
# One device-tool run for the GPU tests and benchmarks of this wave (each step bounded, so one slow step
# cannot eat the others' time). Usage on the GPU machine, from the repository root, with .whl carried:
#   bash benchmarks/gpu_batch.sh OUT_DIR [STEP...]
# Steps: tests (= tests_variants tests_tools) variants per_shape checks_cost agent row_reduce multi_gpu workflow compiler corpus_tune capture_tests
# capture_torch capture_paths selection_cost_a selection_cost_b selection_cost_c selection_cost_d selection_cost_parallel
# together (TOGETHER: steps run at once, one GPU each; `a+b` runs a then b on one GPU) graph_tests timing_modes
# checks_spread checks_spread_rms clock_state (the SM clock beside few-µs medians, cold, after load, after idle) reopen_spread (same winners, one open vs one per repeat) canonical corpus_variants corpus_index (k_set_rows and quantize_q8_1 alone, a longer
# search, INDEX_BITS among the parameters; CORPUS_KERNELS overrides the pair) index_bits_gpu (32-bit indices of 4
# llama.cpp kernels, alone and under each variant, equal the original) corpus_capture corpus_capture_llama corpus_capture_deepspeed pdl
# pdl_tests open_after_sanitizer transform_tests (the planted inlining result and thread_packs' GPU tests: the
# tests step fills a device call already) retest (RETEST: the test files or ids to run, split on spaces; RETEST_K: a -k expression, which may hold spaces) row_reduce_packs (the pack, warp-per-row, per-head, thread-offset and rows-per-block row_reduce samples) row_reduce_rows (only the rows-on-y and warp-per-row-of-a-1-D-block ones)
# row_reduce_forms (the samples of issue #21's row forms: a block size fixed by cub::BlockReduce, an exit on
# integer helpers over block-uniform values, while loops over one restarted index,
# a step by a macro thread count)
# flat_rows (the strided-copy samples and llama.cpp's flat-index kernels equal the original under flat_rows; carry
# .corpus) flat_rows_grid (flat_rows' configurations swept on llama.cpp's k_set_rows and unary_gated_op_kernel)
# group_items_grid (group_items' configurations swept on llama.cpp's quantize_q8_1; GROUP_KERNELS overrides)
# packs_grid (thread_packs_block_items' items a block × packed swept on llama.cpp's iq4_nl and q4_K dequantisers;
# PACKS_KERNELS overrides)
# row_cache_grid (the rounds kept in registers swept, alone and under online_merge, on flashinfer's online softmax and
# the sample's; ROW_CACHE_KERNELS overrides)
# group_quant (group_items: the quantiser samples and llama.cpp's quantize_q8_1 equal the original at every GROUP_ITEMS;
# carry .corpus; corpus_index then searches GROUP_ITEMS for quantize_q8_1 as one of its variants)
# held_out_check (each variant of the held-out kernels in corpus_variants.py's HELD_OUT, with and without FAST_MATH,
# evaluated once: which the checks reject and why; carry .corpus with scripts/held_out.sh's corpora)
# corpus_profile (ncu counters of slow corpus kernels' originals and best configurations; PROFILE_KERNELS picks)
# (capture_*: `cutune capture`, issue #22; they need cupti-python and pyelftools among the wheels; corpus_tune and
# corpus_variants need .corpus carried) (default: per_shape tests agent, which
# close what is open; one device call runs at most 10 minutes, so pick steps whose limits fit in it).
# corpus_variants reads the production corpora in place: carry `.corpus` (scripts/corpus.sh) with the run; with the
# held-out sets fetched too, the whole `.corpus` beside `.whl` passes the device tool's 64 MiB: carry only the
# folders the step reads (e.g. `.corpus/MinkowskiEngine-0.5.4`, `.corpus/llama_cpp_python-0.3.16`).
# Everything lands in OUT_DIR/batch/ and is packed into OUT_DIR/batch.tgz (the device tool returns few files).
set -uo pipefail
out=${1:?OUT_DIR}; shift
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(per_shape tests agent)
source scripts/gpu-env.sh || exit 1
dir="$out/batch"; mkdir -p "$dir"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$dir/device.txt"
step() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s) $(date +%T)"
  timeout -k 10 "$limit" "$@" > "$dir/$name.log" 2>&1
  echo "== $name rc=$? $(date +%T)"; tail -n 25 "$dir/$name.log"
}
run_step() {
  local s=$1
  case $s in
    # the GPU tests, in two steps (together they ran past 580 s on a cold machine in run 98: one device call no longer
    # holds both); `tests` runs the two one after the other, for a call with time for both
    tests) run_step tests_variants; run_step tests_tools ;;
    tests_variants) step tests_variants "${T_TESTS:-420}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      --durations=10 tests/template/variants/test_variants_gpu.py tests/template/variants/test_row_reduce.py \
      tests/template/variants/test_block_items.py tests/template/variants/canonical/test_samples_gpu.py ;;
    tests_tools) step tests_tools "${T_TESTS_TOOLS:-300}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      --durations=10 tests/gpu/test_profile.py tests/agent/test_steps_gpu.py tests/gpu/test_wrong_templates.py ;;
    row_reduce_packs) step row_reduce_packs "${T_ROW_PACKS:-420}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/test_row_reduce.py tests/template/variants/test_variants_gpu.py \
      -k "counted_rounds_over_packs_equal or rounds_softmax or head_rms_norm or offset_rms_norm" ;;
    row_reduce_rows) step row_reduce_rows "${T_ROW_ROWS:-240}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/test_row_reduce.py -k "rows_per_block or rows_on_y" ;;
    row_reduce_forms) step row_reduce_forms "${T_ROW_FORMS:-240}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/canonical/test_samples_gpu.py -k "block_threads_softmax or slice_softmax or while_softmax_backward or warp_l2_norm" ;;
    variants) step variants "${T_VARIANTS:-300}" python3 benchmarks/variants.py "$dir" ${VARIANT_ARGS:---trials 30 --seconds 20} \
      --only "${VARIANT_KERNELS:-rotary_embedding_kernel,silu_and_mul_kernel,merge_attn_states_kernel}" ;;
    per_shape) step per_shape "${T_PER_SHAPE:-300}" python3 benchmarks/per_shape.py "$dir" --record --trials 40 --seconds 50 ;;
    checks_cost) step checks_cost "${T_CHECKS:-480}" python3 benchmarks/checks_cost.py "$dir" --trials 12 --seconds 25 --repeats 2 ;;
    agent) step agent "${T_AGENT:-420}" python3 benchmarks/agent_steps.py --out "$dir" ${AGENT_ARGS:---steps 2 --trials 12 --seconds 90} ;;
    row_reduce) step row_reduce "${T_ROW:-240}" python3 benchmarks/row_reduce.py "$dir" --seconds 50 --trials 80 ;;
    workflow) step workflow "${T_WORKFLOW:-300}" python3 -m pytest -q -p no:cacheprovider -rs \
      tests/workflow tests/gpu/test_capabilities.py tests/gpu/test_profile.py tests/gpu/test_sanitize.py \
      tests/agent/test_steps_gpu.py tests/gpu/test_cupy_backend.py ;;
    capture_tests) step capture_tests "${T_CAPTURE_TESTS:-120}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/capture/test_capture_gpu.py ;;
    capture_torch) step capture_torch "${T_CAPTURE_TORCH:-540}" python3 benchmarks/capture_e2e.py "$dir" --case torch \
      ${CAPTURE_TORCH_ARGS:---trials 24 --seconds 30} ;;
    capture_paths) step capture_paths "${T_CAPTURE_PATHS:-420}" python3 benchmarks/capture_e2e.py "$dir" --case paths \
      ${CAPTURE_PATHS_ARGS:---trials 8 --seconds 10} ;;
    compiler) step compiler "${T_COMPILER:-240}" python3 -m pytest -q -p no:cacheprovider -rs -s -m gpu \
      tests/gpu/test_ragged_original.py tests/gpu/test_cupy_backend.py ;;
    corpus_tune) step corpus_tune "${T_CORPUS_TUNE:-200}" python3 benchmarks/corpus_tune.py "$dir" --kernels 24 --seconds 160 ;;
    # selection_cost_*: one default `cutune tune` (200 trials, 600 s) per sample, a step each (about 200 s)
    selection_cost_a) step selection_cost_a "${T_SELECTION:-280}" python3 benchmarks/selection_cost.py "$dir/silu_and_mul" \
      --only silu_and_mul --trials "${SELECTION_TRIALS:-200}" ${SELECTION_ARGS:-} ;;
    selection_cost_b) step selection_cost_b "${T_SELECTION:-280}" python3 benchmarks/selection_cost.py "$dir/rms_norm" \
      --only rms_norm --trials "${SELECTION_TRIALS:-200}" ${SELECTION_ARGS:-} ;;
    selection_cost_c) step selection_cost_c "${T_SELECTION:-280}" python3 benchmarks/selection_cost.py "$dir/kv_cache_write" \
      --only kv_cache_write --trials "${SELECTION_TRIALS:-200}" ${SELECTION_ARGS:-} ;;
    selection_cost_d) step selection_cost_d "${T_SELECTION:-280}" python3 benchmarks/selection_cost.py "$dir/gated_activation" \
      --only gated_activation --trials "${SELECTION_TRIALS:-200}" ${SELECTION_ARGS:-} ;;
    # steps at once, one GPU each, where the host has a GPU for each (else one after the other): nothing timed
    # shares a device. together: the steps in TOGETHER; selection_cost_parallel: the four samples
    together | selection_cost_parallel)
      local -a group; local i g
      [ "$s" = together ] && group=(${TOGETHER:?TOGETHER: the steps to run at once}) || \
        group=(selection_cost_a selection_cost_b selection_cost_c selection_cost_d)
      gpus=$(nvidia-smi -L | wc -l)
      # an entry `a+b` runs a then b on one GPU
      if [ "$gpus" -ge ${#group[@]} ]; then
        i=0
        for g in "${group[@]}"; do
          (export CUDA_VISIBLE_DEVICES=$i; for x in ${g//+/ }; do run_step "$x"; done) & i=$((i + 1))
        done; wait
      else
        for g in "${group[@]}"; do for x in ${g//+/ }; do run_step "$x"; done; done
      fi ;;
    # with an empty CuPy kernel cache, with CuPy's reduction accelerators as set (CUPY_ACCELERATORS)
    open_after_sanitizer) step open_after_sanitizer "${T_OPEN_AFTER:-300}" env CUPY_CACHE_DIR="$(mktemp -d)" \
      python3 -m benchmarks.open_after_sanitizer ;;
    graph_tests) step graph_tests "${T_GRAPH:-150}" python3 -m pytest -q -p no:cacheprovider -rs -s -m gpu \
      tests/gpu/test_graph_timing.py ;;
    timing_modes) step timing_modes "${T_MODES:-200}" python3 -m benchmarks.timing_modes "$dir" --configs "${MODE_CONFIGS:-20}" ;;
    reopen_spread) step reopen_spread "${T_REOPEN:-420}" python3 -m benchmarks.reopen_spread "$dir" ${REOPEN_ARGS:---repeats 5} ;;
    clock_state) step clock_state "${T_CLOCK:-300}" python3 -m benchmarks.clock_state "$dir" ${CLOCK_ARGS:-} ;;
    checks_spread) step checks_spread "${T_SPREAD:-200}" python3 -m benchmarks.checks_spread "$dir" --only silu_and_mul ;;
    checks_spread_rms) step checks_spread_rms "${T_SPREAD:-200}" python3 -m benchmarks.checks_spread "$dir" \
      --only rms_norm --variants "checks off, old timer;checks on, old timer;checks off;checks on" ;;
    pdl) step pdl "${T_PDL:-420}" python3 benchmarks/pdl.py "$dir" ${PDL_ARGS:---trials 40 --seconds 120} ;;
    pdl_tests) step pdl_tests "${T_PDL_TESTS:-120}" python3 -m pytest -q -p no:cacheprovider -rs -s -m gpu tests/gpu/test_pdl.py ;;
    transform_tests) step transform_tests "${T_TRANSFORM_TESTS:-180}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/test_inline_vectorize.py tests/template/variants/test_thread_packs.py ;;
    retest) step retest "${T_RETEST:-240}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu ${RETEST:?RETEST: test ids} \
      ${RETEST_K:+-k "$RETEST_K"} ;;
    canonical) step canonical "${T_CANONICAL:-180}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/canonical/test_samples_gpu.py ;;
    corpus_capture) step corpus_capture "${T_CORPUS_CAPTURE:-540}" python3 benchmarks/corpus_capture.py "$dir" \
      --seconds "${CAPTURE_SECONDS:-6}" ${CAPTURE_CASES:+--cases "$CAPTURE_CASES"} ${CAPTURE_DATA:+--data} ;;
    corpus_capture_llama) step corpus_capture_llama "${T_CORPUS_CAPTURE:-540}" python3 benchmarks/corpus_capture.py \
      "$dir" --seconds "${CAPTURE_SECONDS:-6}" --corpus llama.cpp --label llama ${CAPTURE_DATA:+--data} ;;
    corpus_capture_deepspeed) step corpus_capture_deepspeed "${T_CORPUS_CAPTURE:-360}" python3 \
      benchmarks/corpus_capture.py "$dir" --seconds "${CAPTURE_SECONDS:-6}" --corpus deepspeed --label deepspeed \
      ${CAPTURE_DATA:+--data} ;;
    corpus_variants) step corpus_variants "${T_CORPUS:-240}" python3 benchmarks/corpus_variants.py "$dir" \
      ${CORPUS_ARGS:---trials 8 --seconds 6} ${CORPUS_KERNELS:+--only "$CORPUS_KERNELS"} ;;
    index_bits_gpu) step index_bits_gpu "${T_INDEX_BITS:-150}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/recipes/test_index_bits_gpu.py ;;
    corpus_index) step corpus_index "${T_CORPUS_INDEX:-420}" python3 benchmarks/corpus_variants.py "$dir" \
      --trials 48 --seconds 45 --only "${CORPUS_KERNELS:-k_set_rows,quantize_q8_1}" ;;
    flat_rows) step flat_rows "${T_FLAT_ROWS:-240}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/test_flat_rows.py tests/template/variants/canonical/test_samples_gpu.py \
      -k "gpu and (strided_copy or bias_gelu or constexpr_layer_norm or flat_rows or corpus)" ;;
    flat_rows_grid) step flat_rows_grid "${T_FLAT_GRID:-420}" python3 benchmarks/variant_grid.py "$dir" \
      --variant flat_rows ${FLAT_KERNELS:+--only "$FLAT_KERNELS"} ;;
    row_cache_grid) for v in row_cache online_merge_row_cache; do
      step "row_cache_grid_$v" "${T_ROW_CACHE_GRID:-200}" python3 benchmarks/variant_grid.py "$dir/$v" --variant "$v" \
        --only "${ROW_CACHE_KERNELS:-OnlineSoftmaxFusedKernel,online_softmax.cu:online_softmax_kernel}"; done ;;
    packs_grid) step packs_grid "${T_PACKS_GRID:-240}" python3 benchmarks/variant_grid.py "$dir" \
      --variant thread_packs_block_items --only "${PACKS_KERNELS:-dequantize_block_iq4_nl,dequantize_block_q4_K}" ;;
    group_items_grid) step group_items_grid "${T_GROUP_GRID:-300}" python3 benchmarks/variant_grid.py "$dir" \
      --variant group_items --only "${GROUP_KERNELS:-quantize_q8_1}" ;;
    corpus_profile) step corpus_profile "${T_CORPUS_PROFILE:-300}" python3 benchmarks/corpus_profile.py "$dir" \
      ${PROFILE_KERNELS:+--only "$PROFILE_KERNELS"} ;;
    group_quant) step group_quant "${T_GROUP_QUANT:-420}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
      tests/template/variants/test_group_items.py ;;
    held_out_check) step held_out_check "${T_HELD_OUT_CHECK:-120}" python3 benchmarks/held_out_check.py \
      ${CHECK_KERNELS:+--only "$CHECK_KERNELS"} ;;
    multi_gpu) step multi_gpu "${T_MULTI:-240}" python3 benchmarks/multi_gpu.py "$dir" --devices 0,1 ;;
    *) echo "unknown step $s" ;;
  esac
}
for s in "${steps[@]}"; do run_step "$s"; done
tar czf "$out/batch.tgz" -C "$out" batch && ls -la "$dir"
