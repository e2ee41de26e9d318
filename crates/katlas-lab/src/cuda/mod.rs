//! The CUDA backend: probe, NVRTC compilation, the driver layer and the timed runs.
pub mod device;
pub mod nvrtc;
pub mod probe;
pub mod run;
