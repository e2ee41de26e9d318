// HIP twin of rope.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "rope.cu"
