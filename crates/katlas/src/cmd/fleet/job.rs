//! The job side of a `gate` or `collect` fleet: the target's own attempt directory, and at the
//! end its `job.json` (`katlas.fleet_job.v1`: what ran where, and what it found) pushed to the
//! team store with whatever the command wrote (a collect's corpus rows). An eval's job writes
//! its eval result instead.

use super::submit::{fleet_target_dirs, push_files};
use crate::ctx::{CliError, Ctx};
use katlas_model::fleet::{FleetCommand, FleetJobResult, FLEET_JOB_SCHEMA};
use std::path::{Path, PathBuf};

/// Where this attempt of a fleet target writes.
pub struct Attempt {
    /// `.katlas/fleet/<fleet>/<target>/<n>/`.
    pub dir: PathBuf,
    /// `fleet/<fleet>/<target>/<n>`.
    pub id: String,
}

impl Attempt {
    /// A collect target's corpus file: in `corpus/`, where fit and suggest read every host's
    /// rows, and named for the attempt so targets sharing a node never share a file.
    pub fn rows_file(&self, ctx: &Ctx) -> Result<PathBuf, CliError> {
        Ok(ctx.layout()?.corpus_dir().join(format!("{}.jsonl", self.id.replace('/', "-"))))
    }
}

/// What the command found, for its `job.json`.
pub struct Found {
    pub passed: bool,
    pub summary: String,
    pub arch: Option<String>,
    pub reasons: Vec<String>,
    pub gate: Option<serde_json::Value>,
    /// A collect's rows file and its ok and error row counts.
    pub rows: Option<(PathBuf, u64, u64)>,
}

/// The attempt this job measures in, or `None` when an earlier attempt finished and only its
/// push was lost (a job that died after writing `job.json`): that one is pushed again and
/// nothing is measured twice.
pub fn begin(ctx: &Ctx, spec: &str) -> Result<Option<Attempt>, CliError> {
    let layout = ctx.layout()?;
    let (parent, prefix, _) = fleet_target_dirs(&layout, spec)?;
    if let Some(done) = finished(&parent) {
        eprintln!("katlas: {} finished before its push: pushing it, not measuring again", done.display());
        push(ctx, &done)?;
        return Ok(None);
    }
    let d = katlas_eval::plan::numbered_dir(&parent, true);
    katlas_fs::create_dir_all(&d.path)?;
    Ok(Some(Attempt { dir: d.path, id: format!("{prefix}/{}", d.id) }))
}

/// Write the attempt's `job.json` and push it, with the rows it names, to the team store.
pub fn finish(ctx: &Ctx, at: &Attempt, command: FleetCommand, found: Found) -> Result<(), CliError> {
    let layout = ctx.layout()?;
    let opts = crate::cmd::identity::options_for(ctx)?;
    let identity = katlas_identity::capture(&opts);
    let rows_file = found.rows.as_ref().map(|(p, _, _)| p.strip_prefix(&layout.root).unwrap_or(p).display().to_string());
    let rec = FleetJobResult {
        schema: FLEET_JOB_SCHEMA.into(),
        id: at.id.clone(),
        command,
        identity,
        finished_at: katlas_model::row::now_rfc3339(),
        passed: found.passed,
        summary: found.summary,
        arch: found.arch,
        reasons: found.reasons,
        gate: found.gate,
        rows_file,
        rows_ok: found.rows.as_ref().map(|r| r.1),
        rows_error: found.rows.as_ref().map(|r| r.2),
    };
    let mut bytes = serde_json::to_vec_pretty(&rec).expect("job record serialises");
    bytes.push(b'\n');
    katlas_fs::write_atomic(&at.dir.join("job.json"), &bytes)?;
    push(ctx, &at.dir)
}

/// Push an attempt: its `job.json` and the corpus file it names.
fn push(ctx: &Ctx, dir: &Path) -> Result<(), CliError> {
    let layout = ctx.layout()?;
    let job = read(dir).ok_or_else(|| CliError::bad_input(format!("{}: no readable job.json", dir.display())))?;
    let rows = job.rows_file.as_ref().map(|r| layout.root.join(r));
    let dir = dir.to_path_buf();
    push_files(ctx, job.command.as_str(), move |p| p.parent() == Some(dir.as_path()) || rows.as_deref() == Some(p))
}

fn read(dir: &Path) -> Option<FleetJobResult> {
    let p = dir.join("job.json");
    katlas_fs::check(&p).ok()?;
    serde_json::from_slice(&std::fs::read(&p).ok()?).ok()
}

/// The newest attempt of a target that wrote its `job.json`.
fn finished(parent: &Path) -> Option<PathBuf> {
    let mut done: Vec<(u32, PathBuf)> = std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path())))
        .filter(|(_, p)| read(p).is_some())
        .collect();
    done.sort();
    done.pop().map(|(_, p)| p)
}
