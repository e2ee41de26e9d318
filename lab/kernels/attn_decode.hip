// HIP twin of attn_decode.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "attn_decode.cu"
