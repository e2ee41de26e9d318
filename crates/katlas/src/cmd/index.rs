//! The query index (`.katlas/index.sqlite`) as every command opens it: brought up to date
//! first, with a progress line while that means a rebuild. `index`, `query`, `trend`,
//! `corpus compare|pareto`, `export`, `report` and `store pull` read it through here.

use crate::ctx::CliError;
use katlas_store::index;

/// Runs `f` with a progress line on stderr for a rebuild of the index (drawn only on a
/// terminal, and only once a rebuild reports; a refresh that reads appends draws nothing).
pub fn with_progress<T>(f: impl FnOnce(index::OnProgress) -> T) -> T {
    let bar = crate::output::progress_bar();
    let on = |p: index::Progress| {
        bar.set_length(p.bytes.max(1));
        bar.set_position(p.bytes_read);
        bar.set_message(if p.building_indexes {
            "index: building indexes".to_string()
        } else {
            use indicatif::HumanBytes as B;
            format!("index: {}/{} files, {}/{}", p.files_read, p.files, B(p.bytes_read), B(p.bytes))
        });
    };
    let out = f(&on);
    bar.finish_and_clear();
    out
}

/// The index, brought up to date (with a progress line when that means a rebuild).
pub fn open_index(layout: &katlas_corpus::Layout) -> Result<katlas_store::Connection, CliError> {
    Ok(with_progress(|on| index::open_with(layout, on))?.0)
}
