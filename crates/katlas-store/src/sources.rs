//! The files under `.katlas/` the index and the team store are built from (the source of truth).

use katlas_corpus::Layout;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `corpus/*.jsonl`: `katlas.row.v1` lines.
    Rows,
    /// `ledger.jsonl`: `katlas.ledger.v1` lines.
    Ledger,
    /// `evals/*/result.json`, `tasks/*/evals/*/result.json` and a fleet target's
    /// `fleet/*/*/*/result.json`.
    EvalResult,
    /// `samples.jsonl` beside a `result.json`.
    EvalSamples,
    /// `isa/*.json`: `katlas.isa.v1` manifests.
    Isa,
    /// A `gate` or `collect` fleet target's `fleet/*/*/*/job.json` (`katlas.fleet_job.v1`).
    FleetJob,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Rows => "rows",
            Kind::Ledger => "ledger",
            Kind::EvalResult => "eval_result",
            Kind::EvalSamples => "eval_samples",
            Kind::Isa => "isa",
            Kind::FleetJob => "fleet_job",
        }
    }
    /// JSON-lines files grow by appends and are indexed incrementally; the others are whole documents.
    pub fn is_jsonl(self) -> bool {
        matches!(self, Kind::Rows | Kind::Ledger | Kind::EvalSamples)
    }
}

/// Where `katlas store pull` puts other hosts' ledger entries, eval results and samples: one
/// directory per pushing host (`pulled/HOST/ledger.jsonl`, `pulled/HOST/tasks/T/evals/E/…`),
/// never beside this host's own, so nothing reads another host's measurement as its own.
pub const PULLED_DIR: &str = "pulled";

/// How a pull names another host's corpus file: `corpus/pulled@HOST@NAME`. Rows stay in
/// `corpus/` (fit, suggest and trends read every host's), but never in a file of this host's:
/// a teammate who names a file after this host (`corpus/<this-host>-<day>.jsonl`) would
/// otherwise have their rows appended to it, and pushed again as this host's.
pub const PULLED_ROWS_PREFIX: &str = "pulled@";

#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    /// Path relative to `.katlas/`, `/`-separated: the name the index and the store know it by.
    pub rel: String,
    pub kind: Kind,
}

impl Source {
    /// Another host's records that a pull wrote under [`PULLED_DIR`].
    pub fn is_pulled(&self) -> bool {
        self.rel.starts_with(&format!("{PULLED_DIR}/")) || self.rel.starts_with(&format!("corpus/{PULLED_ROWS_PREFIX}"))
    }
}

/// Every source file of a project, in a stable order: this host's, then what pulls wrote
/// (so a record a pull repeats under the same key never displaces this host's in the index).
pub fn discover(layout: &Layout) -> std::io::Result<Vec<Source>> {
    let root = &layout.root;
    let mut out = Vec::new();
    own(layout, root, &mut out)?;
    for host in subdirs(&root.join(PULLED_DIR))? {
        let ledger = host.join("ledger.jsonl");
        if ledger.is_file() {
            out.push(source(root, ledger, Kind::Ledger));
        }
        evals(root, eval_dirs(&host, &host.join("tasks"))?, &mut out);
    }
    Ok(out)
}

fn own(layout: &Layout, root: &Path, out: &mut Vec<Source>) -> std::io::Result<()> {
    for p in files_with(&layout.corpus_dir(), "jsonl")? {
        out.push(source(root, p, Kind::Rows));
    }
    let ledger = layout.ledger();
    if ledger.is_file() {
        out.push(source(root, ledger, Kind::Ledger));
    }
    evals(root, eval_dirs(root, &layout.tasks_dir())?, out);
    for p in files_with(&layout.isa_dir(), "json")? {
        out.push(source(root, p, Kind::Isa));
    }
    Ok(())
}

/// Eval directories under `base`: ad-hoc (`evals/E`), a task's (`tasks/T/evals/E`) and a
/// fleet target's (`fleet/F/TARGET/E`, one per attempt).
fn eval_dirs(base: &Path, tasks: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = subdirs(&base.join("evals"))?;
    for task in subdirs(tasks)? {
        dirs.extend(subdirs(&task.join("evals"))?);
    }
    for fleet in subdirs(&base.join("fleet"))? {
        for target in subdirs(&fleet)? {
            dirs.extend(subdirs(&target)?);
        }
    }
    Ok(dirs)
}

fn evals(root: &Path, dirs: Vec<PathBuf>, out: &mut Vec<Source>) {
    for d in dirs {
        let result = d.join("result.json");
        if result.is_file() {
            out.push(source(root, result, Kind::EvalResult));
        }
        let samples = d.join("samples.jsonl");
        if samples.is_file() {
            out.push(source(root, samples, Kind::EvalSamples));
        }
        let job = d.join("job.json");
        if job.is_file() {
            out.push(source(root, job, Kind::FleetJob));
        }
    }
}

fn source(root: &Path, path: PathBuf, kind: Kind) -> Source {
    let rel = path.strip_prefix(root).unwrap_or(&path).components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
    Source { path, rel, kind }
}

fn read_dir_sorted(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(std::io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    Ok(v)
}

fn files_with(dir: &Path, ext: &str) -> std::io::Result<Vec<PathBuf>> {
    Ok(read_dir_sorted(dir)?.into_iter().filter(|p| p.extension().is_some_and(|e| e == ext) && p.is_file()).collect())
}

fn subdirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    Ok(read_dir_sorted(dir)?.into_iter().filter(|p| p.is_dir()).collect())
}
