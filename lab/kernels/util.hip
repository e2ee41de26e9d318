// HIP twin of util.cu: the same kernel bodies over the HIP prelude.
#include "lab_hip.h"
#include "util.cu"
