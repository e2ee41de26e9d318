//! The queue a person is shown and the files each suggestion may change.
//!
//! `katlas suggest` and `katlas task` both need the same join: the fit's live hot kernels to
//! their dispatch provenance (the row's own dispatch manifest, then collect's ranking of the
//! project's sources). It lives here so the CLI only parses arguments and prints, and so the
//! queue `task --rank N` hands out is the one `suggest` showed.

use crate::fit::FitView;
use crate::history::Ledger;
use crate::rules::Rules;
use crate::suggest::{provenance_from_row, suggest, KernelProvenance, SuggestOptions, Suggestion, SuggestionQueue};
use katlas_arch::ArchDb;
use katlas_collect::provenance::{ProvenanceIndex, ProvenanceOptions};
use katlas_model::Row;
use serde::{Deserialize, Serialize};

pub const LAST_SCHEMA: &str = "katlas.suggest.last.v1";

/// The last queue shown, with what it was built from, so `katlas task --rank N` hands out
/// exactly what was seen.
#[derive(Debug, Serialize, Deserialize)]
pub struct LastQueue {
    pub schema: String,
    pub queue: SuggestionQueue,
    pub fit: FitView,
    pub row: Option<Row>,
    pub provenance: Vec<KernelProvenance>,
}

impl LastQueue {
    /// A queue as `katlas suggest` saved it; the error says what is wrong with the text.
    pub fn from_json(text: &str) -> Result<LastQueue, String> {
        let last: LastQueue = serde_json::from_str(text).map_err(|e| format!("{e} (run `katlas suggest` again)"))?;
        if last.schema != LAST_SCHEMA {
            return Err(format!("schema `{}`, expected {LAST_SCHEMA}", last.schema));
        }
        Ok(last)
    }

    /// The suggestion at `rank`, else the one with `id`.
    pub fn pick(&self, rank: Option<usize>, id: Option<&str>) -> Result<&Suggestion, String> {
        let list = &self.queue.suggestions;
        match (rank, id) {
            (Some(r), _) => list.iter().find(|s| s.rank == r).ok_or_else(|| format!("--rank {r}: the queue has {} suggestions", list.len())),
            (None, Some(id)) => list.iter().find(|s| s.id == id).ok_or_else(|| format!("--id {id}: not in the queue")),
            (None, None) => Err("give --rank or --id".into()),
        }
    }

    /// The provenance of a suggestion's kernel (none for a row-wide lever).
    pub fn provenance_of(&self, s: &Suggestion) -> Option<&KernelProvenance> {
        s.kernel.as_ref().and_then(|k| self.provenance.iter().find(|p| &p.kernel == k))
    }
}

/// Dispatch provenance of the fit's live hot kernels from the project's sources: collect's
/// ranking under `opts` (the project's roots and runtime model; the arch is the fit's), one
/// index for all kernels. These are the files a suggestion may change, so a file the runtime
/// model rules out (negative score: nothing embeds it, or a selector loads another) is left out,
/// as are kernels with nothing found.
pub fn locate_sources(fit: &FitView, db: &ArchDb, opts: &ProvenanceOptions) -> Vec<KernelProvenance> {
    let mut opts = opts.clone();
    if let Some(a) = &fit.header.arch {
        opts = opts.with_arch(db, a);
    }
    let live: Vec<&str> = fit.kernels.iter().filter(|k| !k.stopped()).map(|k| k.name.as_str()).collect();
    if live.is_empty() {
        return Vec::new();
    }
    let index = ProvenanceIndex::build(&opts);
    live.into_iter()
        .map(|name| {
            let p = index.locate(name);
            KernelProvenance {
                kernel: name.to_string(),
                sources: p.sources.iter().filter(|c| c.score >= 0.0).map(|c| c.path.clone()).collect(),
                dispatch_refs: p.dispatch.iter().map(|d| format!("{}:{}", d.path, d.line)).collect(),
                env_controls: p.env_knobs.clone(),
            }
        })
        .filter(|p| !(p.sources.is_empty() && p.dispatch_refs.is_empty()))
        .collect()
}

/// Every provenance the fit's kernels have: the row's dispatch manifest first, then the
/// project's sources when there is a project.
pub fn provenance(fit: &FitView, row: Option<&Row>, db: &ArchDb, sources: Option<&ProvenanceOptions>) -> Vec<KernelProvenance> {
    let mut out = row.map(provenance_from_row).unwrap_or_default();
    if let Some(o) = sources {
        out.extend(locate_sources(fit, db, o));
    }
    out
}

/// What a queue is built from.
pub struct QueueInput<'a> {
    pub fit: FitView,
    pub row: Option<Row>,
    pub db: &'a ArchDb,
    pub rules: &'a Rules,
    pub ledger: Option<&'a Ledger>,
    /// The project's provenance options (roots and runtime model); none outside a project.
    pub sources: Option<&'a ProvenanceOptions>,
    /// Most suggestions (default: `levers.toml settings.max_suggestions`).
    pub max: Option<usize>,
}

/// The ranked queue for a fit, remembering the ledger, with the provenance it joined.
pub fn build_queue(input: QueueInput) -> LastQueue {
    let QueueInput { fit, row, db, rules, ledger, sources, max } = input;
    let provenance = provenance(&fit, row.as_ref(), db, sources);
    let queue = suggest(&fit, row.as_ref(), db, rules, &SuggestOptions { ledger, provenance: &provenance, max });
    LastQueue { schema: LAST_SCHEMA.into(), queue, fit, row, provenance }
}
