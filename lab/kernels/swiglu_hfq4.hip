// HIP twin of swiglu_hfq4.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "swiglu_hfq4.cu"
