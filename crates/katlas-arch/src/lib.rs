//! katlas architecture database: ISA targets ("atoms" such as `gfx1100`, `sm_90a`),
//! their families, classes, capabilities and resource limits; marketed products with
//! unit counts, clocks, bandwidth and peak rates; and occupancy math.
//!
//! The data lives in `data/arch/*.toml` at the repository root, is embedded at build
//! time and can be patched per project from `.katlas/rules/arch/*.toml`
//! ([`ArchDb::load`]). Every number carries its source; see `docs/arch.md`.

#![warn(missing_docs)]

mod db;
mod error;
mod model;
mod names;
mod occupancy;
mod raw;
mod tags;

pub use db::{ArchDb, BUILTIN_FILES};
pub use error::ArchError;
pub use model::*;
pub use names::canonical_atom;
pub use occupancy::{occupancy, occupancy_with, total_vgprs, KernelResources, Limiter, ObjectResources, Occupancy, OccupancyOptions};
pub use tags::{looks_like_arch_tag, tag_reach, FamilyRule, FileTag, TagKind, Via};

/// Schema string of the architecture data files and of JSON dumps of atoms/products.
pub const SCHEMA: &str = "katlas.arch.v1";
