//! The team corpus on top of katlas's files: the SQLite query index (`.katlas/index.sqlite`),
//! queries, trends with change points, comparisons, CSV/Parquet export and the PostgreSQL team
//! store (the HTML report that reads them is katlas-report). The files under `.katlas/` stay the
//! source of truth: everything here is rebuilt from them.

pub mod compare;
pub mod export;
pub mod extract;
pub mod index;
pub mod lean;
pub mod query;
pub mod schema;
pub mod sources;
pub mod team;
pub mod trend;

/// The index connection type, for callers that hold one.
pub use rusqlite::Connection;
