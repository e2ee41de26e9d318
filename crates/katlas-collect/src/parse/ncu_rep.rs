//! Nsight Compute reports (`.ncu-rep`).
//!
//! The format is NVIDIA's and undocumented; NVIDIA's `ncu_report` Python module (the
//! `ncu-report` wheel, or `extras/python` of an Nsight Compute install) is its reader. katlas runs
//! that reader in a helper process (`ncu_rep.py`), bounded in time, takes one JSON line per
//! launch from it, and turns the launches into the same kernel table the `--csv --page raw` path
//! builds ([`ncu::Launch`]). A report with source counters (`--section SourceCounters`) also
//! gives each kernel its top source lines by PC samples and instructions executed.

use super::ncu::{self, Launch, Timed, TIME};
use super::{Limits, ParseError, ParseOutput, ParserOptions};
use crate::summary::PhaseAcc;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

const SCRIPT: &str = include_str!("ncu_rep.py");
/// Launches read from one report; a report with more is cut there, with a warning.
const MAX_LAUNCHES: usize = 200_000;
/// Source lines kept per launch by the helper and per kernel in the table.
const TOP_LINES: usize = 10;
/// PC samples of a kernel below which its source lines are ranked by instructions executed.
const MIN_SAMPLES: f64 = 100.0;
/// The reader's time on one report: large reports take minutes, a hung reader never returns.
const TIMEOUT: Duration = Duration::from_secs(900);
/// Where else `ncu_report` may be, `:`-separated (an Nsight Compute `extras/python`).
pub const READER_DIR_ENV: &str = "KATLAS_NCU_REPORT_DIR";
/// The interpreter that runs the reader.
pub const PYTHON_ENV: &str = "KATLAS_PYTHON";

#[derive(Deserialize)]
struct Action {
    #[serde(default)]
    truncated: Option<u64>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    mangled: Option<String>,
    #[serde(default)]
    metrics: BTreeMap<String, (f64, String)>,
    #[serde(default)]
    strings: BTreeMap<String, String>,
    #[serde(default)]
    source: Vec<SourceLine>,
    /// Instructions executed and PC samples over all the launch's source lines.
    #[serde(default)]
    source_totals: Option<SourceTotals>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct SourceTotals {
    #[serde(default)]
    inst_executed: f64,
    #[serde(default)]
    samples: f64,
}

#[derive(Deserialize, Default, Clone)]
struct SourceLine {
    file: String,
    line: u64,
    #[serde(default)]
    inst_executed: f64,
    #[serde(default)]
    samples: f64,
    #[serde(default)]
    stalls: BTreeMap<String, f64>,
}

pub fn parse_stream(_r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    Err(ParseError::new(source, None, "ncu-rep is read by NVIDIA's reader from a file: give the .ncu-rep path, not a stream"))
}

pub fn parse(path: &Path, opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    let source = path.display().to_string();
    let err = |m: String| ParseError::new(&source, None, m);
    // What the reader is handed is a regular file, looked at first: a stream, a device or a
    // compressed copy never reaches NVIDIA's parser.
    let mut head = [0u8; 4];
    let got = {
        use std::io::Read;
        let mut f = katlas_corpus::input::open_regular(path).map_err(|e| err(e.to_string()))?;
        f.read(&mut head).map_err(|e| err(e.to_string()))?
    };
    if got >= 2 && head[..2] == [0x1f, 0x8b] {
        return Err(err("gzip-compressed: decompress it first (NVIDIA's reader reads a report in place)".into()));
    }
    let nvr = got == 4 && &head == b"NVR\0";
    let abs = std::path::absolute(path).map_err(|e| err(e.to_string()))?;
    let dir = tempfile::tempdir().map_err(|e| err(format!("no scratch directory for the reader: {e}")))?;
    let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into());
    let mut argv = vec![python.clone(), "-c".into(), SCRIPT.into(), abs.display().to_string(), MAX_LAUNCHES.to_string(), TOP_LINES.to_string()];
    if let Ok(dirs) = std::env::var(READER_DIR_ENV) {
        argv.extend(dirs.split(':').filter(|d| !d.is_empty()).map(str::to_string));
    }
    let mut req = katlas_proc::RunRequest::new(argv, dir.path());
    req.timeout = Some(TIMEOUT);
    let run = katlas_proc::run(&req, dir.path()).map_err(|e| err(format!("cannot run the report reader: {e}")))?;
    let stderr = katlas_proc::tail(&run.stderr, 2000).unwrap_or_default();
    if run.spawn_error.is_some() || (run.exit_code == Some(3) && stderr.contains("NO_READER")) {
        let why = run.spawn_error.clone().map(|e| format!("{python}: {e}")).unwrap_or_else(|| stderr.trim().trim_start_matches("NO_READER ").to_string());
        return Err(ParseError::missing_env(
            &source,
            format!(
                "no Nsight Compute report reader ({why}); install NVIDIA's `pip install ncu-report` (no CUDA toolkit needed), or put Nsight Compute's `ncu` on PATH, or set {READER_DIR_ENV} to the folder holding ncu_report"
            ),
        ));
    }
    if let Some(why) = run.failure() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(err(format!("NVIDIA's reader failed on it: {why}{}", if last.is_empty() { String::new() } else { format!(": {last}") })));
    }
    if run.stdout_bytes > limits.max_input {
        return Err(err(format!("the reader printed {} bytes, over the {} byte input limit (KATLAS_MAX_INPUT_BYTES)", run.stdout_bytes, limits.max_input)));
    }
    let f = std::fs::File::open(&run.stdout).map_err(|e| err(format!("the reader's output: {e}")))?;
    let mut out = ParseOutput::new("ncu-rep", &source);
    read_actions(&mut BufReader::new(f), &source, opts, limits, &mut out).map_err(|mut e| {
        if !nvr {
            e.message.push_str(" (it does not start with the `NVR` header of Nsight Compute reports)");
        }
        e
    })?;
    Ok(out)
}

/// The helper's JSON lines, one launch each, into the kernel table.
fn read_actions(r: &mut dyn BufRead, source: &str, opts: &ParserOptions, limits: &Limits, out: &mut ParseOutput) -> Result<(), ParseError> {
    let mut acc = PhaseAcc::default();
    let (mut device, mut cc) = (None, None);
    let mut lines: BTreeMap<String, BTreeMap<(String, u64), SourceLine>> = BTreeMap::new();
    let mut mangled: BTreeMap<String, String> = BTreeMap::new();
    let mut totals: BTreeMap<String, SourceTotals> = BTreeMap::new();
    let mut launches = 0u64;
    let mut buf = Vec::new();
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = std::io::Read::take(&mut *r, limits.max_line as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| ParseError::new(source, Some(n + 1), e.to_string()))?;
        if got == 0 {
            break;
        }
        n += 1;
        if buf.len() > limits.max_line && !buf.ends_with(b"\n") {
            return Err(ParseError::new(
                source,
                Some(n),
                format!("launch {n} of the reader's output is over {} bytes (KATLAS_MAX_LINE_BYTES)", limits.max_line),
            ));
        }
        let a: Action = match serde_json::from_slice(&buf) {
            Ok(a) => a,
            Err(e) => {
                out.warnings.push(format!("{source}: launch {n}: the reader's record does not read ({e}); launch skipped"));
                continue;
            }
        };
        if let Some(t) = a.truncated {
            out.warnings.push(format!("{source}: only the first {t} launches were read"));
            continue;
        }
        let Some(name) = a.name.clone().filter(|n| !n.is_empty()) else {
            out.warnings.push(format!("{source}: launch {n}: the reader gives it no kernel name (a report cut short?); launch skipped"));
            continue;
        };
        launches += 1;
        let metric = |m: &str| a.metrics.get(m).map(|(v, unit)| v * ncu::unit_factor(unit).map_or(1.0, |f| f.0));
        let dim =
            |p: &str| -> Option<[u32; 3]> { Some([metric(&format!("{p}_x"))? as u32, metric(&format!("{p}_y"))? as u32, metric(&format!("{p}_z"))? as u32]) };
        let time = TIME.iter().find_map(|m| metric(m)).map_or(Timed::Absent, Timed::Ns);
        if device.is_none() {
            device = a.strings.get("device__attribute_display_name").cloned();
            cc =
                metric("device__attribute_compute_capability_major").zip(metric("device__attribute_compute_capability_minor")).map(|(a, b)| format!("{a}.{b}"));
        }
        let dropped = |m: &str| ncu::DROP.iter().any(|p| m.starts_with(p)) || opts.drop_counters.iter().any(|p| m.starts_with(p.as_str()));
        let launch = Launch::new(&name, dim("launch__block_dim"), dim("launch__grid_dim"), time, metric);
        launch.add_to(&mut acc, a.metrics.keys().filter(|m| !dropped(m)).filter_map(|m| Some((m.as_str(), metric(m)?))));
        if let Some(m) = a.mangled.filter(|m| *m != name) {
            mangled.entry(name.clone()).or_insert(m);
        }
        if let Some(t) = a.source_totals {
            let e = totals.entry(name.clone()).or_default();
            e.inst_executed += t.inst_executed;
            e.samples += t.samples;
        }
        let per = lines.entry(name).or_default();
        for l in a.source {
            let e = per.entry((l.file.clone(), l.line)).or_insert_with(|| SourceLine { file: l.file.clone(), line: l.line, ..Default::default() });
            e.inst_executed += l.inst_executed;
            e.samples += l.samples;
            for (k, v) in l.stalls {
                *e.stalls.entry(k).or_default() += v;
            }
        }
    }
    if launches == 0 {
        return Err(ParseError::new(
            source,
            None,
            "NVIDIA's reader finds no kernel launch in it: not an Nsight Compute report, or one of a run that profiled no kernel",
        ));
    }
    ncu::finish(out, acc, opts, device, cc);
    for k in out.phases.iter_mut().flat_map(|p| p.kernels.iter_mut()) {
        if let Some(m) = mangled.remove(&k.name) {
            k.extra.insert("mangled".into(), json!(m));
        }
        let t = totals.remove(&k.name).unwrap_or_default();
        if t.inst_executed > 0.0 || t.samples > 0.0 {
            k.extra.insert("source_totals".into(), json!({"inst_executed": t.inst_executed, "pc_samples": t.samples}));
        }
        let Some(per) = lines.remove(&k.name).filter(|p| !p.is_empty()) else { continue };
        let mut top: Vec<SourceLine> = per.into_values().collect();
        // A handful of PC samples (a kernel of a few microseconds) ranks nothing: lines go by
        // instructions executed until the samples can tell where warps wait.
        let by_samples = t.samples >= MIN_SAMPLES;
        top.sort_by(|a, b| {
            let s = if by_samples { b.samples.total_cmp(&a.samples) } else { std::cmp::Ordering::Equal };
            s.then(b.inst_executed.total_cmp(&a.inst_executed)).then_with(|| (&a.file, a.line).cmp(&(&b.file, b.line)))
        });
        top.truncate(TOP_LINES);
        let rows: Vec<_> = top
            .iter()
            .map(|l| {
                let mut stalls: Vec<_> = l.stalls.iter().filter(|(_, v)| **v > 0.0).collect();
                stalls.sort_by(|a, b| b.1.total_cmp(a.1));
                stalls.truncate(3);
                json!({"file": l.file, "line": l.line, "inst_executed": l.inst_executed, "pc_samples": l.samples,
                       "top_stalls": stalls.into_iter().map(|(k, v)| json!({"reason": k, "samples": v})).collect::<Vec<_>>()})
            })
            .collect();
        k.extra.insert("source_lines".into(), json!({"ranked_by": if by_samples { "pc_samples" } else { "inst_executed" }, "lines": rows}));
    }
    Ok(())
}
