// Drives DeepSpeed's csrc/quantization/quantize_intX.cu through its own host launcher.
#include "quantization/quantize_intX.cu"

#include "../wrap.h"

CORPUS_ENTRY dequantize_int4(uint8_t * data_in, half * data_out, half * scale, half * min_val, int num_group, int group_size) {
    launch_dequantize_int4_to_half_experimental(data_in, data_out, scale, min_val, num_group, group_size, 0);
    CORPUS_STATUS;
}
