// HIP twin of rmsnorm.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "rmsnorm.cu"
