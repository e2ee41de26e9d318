//! NVIDIA code objects: fatbin containers, cubins, PTX entries and ptxas `-v` logs.

pub mod cubin;
pub mod fatbin;
pub mod ptx;
pub mod ptxas_log;
