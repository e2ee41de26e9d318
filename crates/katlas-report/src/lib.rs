//! `katlas report`: one self-contained HTML page of a project's evidence — the fit view of a
//! row, a roofline per product with the hot kernels on it, kernel share bars, trends by commit,
//! eval sample distributions with their intervals, and the ledger (docs/report.md).
//!
//! The page loads nothing: styles are inline, plots are inline SVG written here, and a
//! Content-Security-Policy of `default-src 'none'` forbids scripts and fetches. Every name from
//! the files goes through maud, which escapes it; an empty section says why it is empty.

pub mod data;
mod page;
pub mod plots;
pub mod roofline;
pub mod svg;

pub use page::{fit_page, render};

use katlas_advise::FitView;
use katlas_store::trend::Trend;

/// The fit view of the chosen row.
#[derive(Debug, Clone)]
pub struct ChosenFit {
    pub row_id: String,
    /// Why this row (`--row`, `the newest ok row with kernels`).
    pub how: String,
    pub fit: FitView,
}

/// A list section: its items, how many there are in all, or why there are none.
#[derive(Debug, Clone)]
pub struct Section<T> {
    pub items: Vec<T>,
    pub total: usize,
    /// Why the section is empty (shown instead of the items when there are none).
    pub empty: String,
}

impl<T> Section<T> {
    pub fn new(items: Vec<T>, total: usize, empty: impl Into<String>) -> Section<T> {
        Section { items, total, empty: empty.into() }
    }
}

/// Everything the page shows.
#[derive(Debug, Clone)]
pub struct Report {
    /// The project (its root's name).
    pub project: String,
    pub generated_at: String,
    pub rows: usize,
    /// Bad lines and unreadable documents in the index (`errors` table).
    pub bad_lines: usize,
    /// The fit view, or why there is none.
    pub fit: Result<ChosenFit, String>,
    pub rooflines: Section<roofline::Roofline>,
    pub trends: Section<Trend>,
    pub evals: Section<data::EvalDist>,
    pub ledger: Section<data::LedgerRow>,
}
