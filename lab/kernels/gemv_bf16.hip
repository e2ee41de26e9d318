// HIP twin of gemv_bf16.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "gemv_bf16.cu"
