// HIP twin of gemv_hfq4.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "gemv_hfq4.cu"
