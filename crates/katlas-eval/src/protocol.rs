//! The measurement protocol: a fresh process per sample, sides interleaved in
//! blocks (ABBA or a seeded shuffle), warmups discarded, an optional settle
//! command before each block, every sample streamed to `samples.jsonl` so a
//! killed eval resumes where it stopped.
//!
//! The run schedule is a pure function of (sides, warmups, budget, order,
//! seed), each run keyed by its position `seq`; resuming replays stored
//! samples by `seq` and re-derives the adaptive stopping decisions from them,
//! so a resumed eval stops exactly where an uninterrupted one would have.

use crate::error::EvalError;
use crate::own_samples;
use crate::sandbox::Sandbox;
use crate::telemetry;
use crate::verdict::{is_final, judge_at, JudgeConfig, Judgement, Plan};
use katlas_corpus::{append_jsonl, read_jsonl, Fsync};
use katlas_model::ledger::{EvalSample, Protocol, SampleRef, Verdict, EVAL_SAMPLE_SCHEMA};
use katlas_model::row::now_rfc3339;
use katlas_model::Route;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One side of a comparison: what runs and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Short label used in samples (`A`, `B`, `C` …).
    pub label: String,
    /// Human name (`baseline`, `candidate`, a git ref, `KEY=VALUE`).
    pub name: String,
    pub argv: Vec<String>,
    /// Env set on top of the inherited environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Blocks alternate forward and reverse (A B | B A | A B …): every side
    /// runs first and last equally often, so warm-after effects cancel.
    Abba,
    /// Each block is a seeded random permutation of the sides.
    Shuffle,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Abba => "abba",
            Order::Shuffle => "shuffle",
        }
    }
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "abba" => Ok(Order::Abba),
            "shuffle" => Ok(Order::Shuffle),
            _ => Err(format!("unknown order `{s}` (expected abba or shuffle)")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub metric: String,
    /// Collect parser that reads the metric from each run's output (`kv`).
    pub parser: String,
    pub warmups: u32,
    pub plan: Plan,
    pub order: Order,
    pub seed: u64,
    /// Shell command run before each block (clock/DPM warmup, cool-down).
    pub settle: Option<String>,
    pub timeout: Duration,
    pub judge: JudgeConfig,
    /// Read GPU clocks/temperature around each sample when possible.
    pub telemetry: bool,
    /// Env names removed from every side (instrumentation switches).
    pub strip_env: Vec<String>,
}

/// One planned run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub seq: u64,
    pub side: usize,
    pub block: u32,
    pub warmup: bool,
}

/// The full run schedule: `warmups` warmup blocks, then `max_per_side`
/// measured blocks, each block running every side once.
pub fn schedule(n_sides: usize, warmups: u32, max_per_side: u32, order: Order, seed: u64) -> Vec<Planned> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut seq = 0;
    for block in 0..warmups + max_per_side {
        let mut sides: Vec<usize> = (0..n_sides).collect();
        match order {
            Order::Abba => {
                if block % 2 == 1 {
                    sides.reverse();
                }
            }
            Order::Shuffle => sides.shuffle(&mut rng),
        }
        for side in sides {
            out.push(Planned { seq, side, block, warmup: block < warmups });
            seq += 1;
        }
    }
    out
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("{0}")]
    Store(#[from] katlas_corpus::StoreError),
    /// A settle command that could not run.
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: holds samples of a different eval plan ({why}); start a new eval directory")]
    PlanMismatch { path: PathBuf, why: String },
    #[error("{0}")]
    Bad(String),
    /// The directory's samples include some this host did not write for this plan.
    #[error("{path}: not resumed: {why}; start a new eval directory (--fresh)")]
    Foreign { path: PathBuf, why: String },
    /// Another process holds this eval's directory.
    #[error("{0}: another katlas eval is running in this directory; wait for it to finish, or start a separate eval with --fresh")]
    Busy(PathBuf),
    /// The first run of a side exited cleanly but printed no value for the metric: a
    /// setup error (a typo in `--metric`, the wrong parser), not a measurement.
    #[error("{side}: its first run printed no `{metric}` ({parser} parser), so nothing more was run; it printed: {}. Check --metric and --parser (output: {output})", if printed.is_empty() { "no metrics at all".to_string() } else { printed.join(", ") })]
    MissingMetric { side: String, metric: String, parser: String, printed: Vec<String>, output: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ProtocolError + '_ {
    move |source| ProtocolError::Io { path: path.to_path_buf(), source }
}

/// What the plan looked like, stored as `plan.json` beside the samples so a
/// resume with different settings is refused instead of mixing evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    pub eval_id: String,
    pub sides: Vec<Side>,
    pub metric: String,
    pub parser: String,
    pub warmups: u32,
    pub looks: Vec<u32>,
    pub order: Order,
    pub seed: u64,
    pub settle: Option<String>,
}

/// Everything an eval produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub samples: Vec<EvalSample>,
    /// Measured, successful values per side, in run order.
    pub values: Vec<Vec<f64>>,
    pub failed: Vec<u32>,
    pub throttled: Vec<u32>,
    /// Judgement of each side after the first against the first.
    pub judgements: Vec<Judgement>,
    pub protocol: Protocol,
    pub samples_ref: SampleRef,
    /// Samples replayed from a previous, interrupted run.
    pub resumed: usize,
    /// Kernel-route differences seen between sides (env variant A/B).
    pub route_changes: Vec<String>,
    /// Stored sample lines a resume could not read (torn by a kill, corrupted): reported,
    /// and their runs measured again.
    pub resume_errors: Vec<String>,
}

impl Outcome {
    /// Combined verdict: the first side pair's, which is the only pair for A/B.
    pub fn verdict(&self) -> Verdict {
        self.judgements.first().map(|j| j.verdict).unwrap_or(Verdict::NeedsBaseline)
    }
}

/// What the progress callback hears about.
#[derive(Debug, Clone, Copy)]
pub enum Event<'e> {
    /// A run is about to start: runs done, runs planned at most, which run.
    Run { done: usize, planned: usize, what: &'e str },
    /// A look was taken: its number (1-based), measured runs per side, each comparison's judgement.
    Look { look: usize, runs_per_side: u32, judgements: &'e [Judgement] },
}

/// Progress callback.
pub type Progress<'a> = &'a dyn Fn(Event<'_>);

pub struct Runner<'a> {
    pub dir: PathBuf,
    pub eval_id: String,
    pub sides: &'a [Side],
    pub settings: &'a Settings,
    /// Progress callback (runs and looks).
    pub progress: Option<Progress<'a>>,
}

impl Runner<'_> {
    pub fn samples_path(&self) -> PathBuf {
        self.dir.join("samples.jsonl")
    }

    fn plan_record(&self) -> PlanRecord {
        let s = self.settings;
        PlanRecord {
            eval_id: self.eval_id.clone(),
            sides: self
                .sides
                .iter()
                .map(|s| Side { env: katlas_identity::redact_env(&s.env), argv: katlas_identity::redact_argv(&s.argv), ..s.clone() })
                .collect(),
            metric: s.metric.clone(),
            parser: s.parser.clone(),
            warmups: s.warmups,
            looks: s.plan.looks.clone(),
            order: s.order,
            seed: s.seed,
            settle: s.settle.clone(),
        }
    }

    fn lock_dir(&self) -> Result<std::fs::File, ProtocolError> {
        use fs4::fs_std::FileExt;
        let p = self.dir.join(".lock");
        let f = katlas_fs::open_append(&p).map_err(io(&p))?;
        match f.try_lock_exclusive() {
            Ok(true) => Ok(f),
            Ok(false) => Err(ProtocolError::Busy(self.dir.clone())),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(ProtocolError::Busy(self.dir.clone())),
            Err(e) => Err(ProtocolError::Io { path: p, source: e }),
        }
    }

    fn check_plan(&self) -> Result<(), ProtocolError> {
        let path = self.dir.join("plan.json");
        let want = self.plan_record();
        if path.exists() {
            let text = std::fs::read_to_string(&path).map_err(io(&path))?;
            let have: PlanRecord = serde_json::from_str(&text).map_err(|e| ProtocolError::Bad(format!("{}: {e}", path.display())))?;
            if have != want {
                let why = if have.sides != want.sides {
                    "sides differ"
                } else if have.looks != want.looks || have.warmups != want.warmups {
                    "run counts differ"
                } else if have.seed != want.seed || have.order != want.order {
                    "order or seed differs"
                } else {
                    "metric, parser or settle differs"
                };
                return Err(ProtocolError::PlanMismatch { path, why: why.into() });
            }
            return Ok(());
        }
        let text = serde_json::to_string_pretty(&want).expect("plan serialises");
        katlas_fs::write_atomic(&path, text.as_bytes()).map_err(io(&path))
    }

    /// Run (or resume) the eval to its stopping point.
    pub fn run(&self) -> Result<Outcome, ProtocolError> {
        if self.sides.len() < 2 {
            return Err(ProtocolError::Bad("an eval needs at least two sides".into()));
        }
        // One eval owns its directory: a second one (or a resume) waiting on the same
        // samples would interleave lines and cite a digest the file no longer has.
        let _lock = self.lock_dir()?;
        self.check_plan()?;
        let s = self.settings;
        let path = self.samples_path();
        let mut stored: HashMap<u64, EvalSample> = HashMap::new();
        let mut resume_errors = Vec::new();
        let mut own = own_samples::Own::load(&self.dir)?;
        if path.exists() {
            // Another host's samples (a team store's pull) are never resumed as local
            // measurement, nor is a file holding them appended to.
            if let Some(why) = own_samples::foreign(&self.dir) {
                return Err(ProtocolError::Foreign { path, why });
            }
            let report = read_jsonl::<EvalSample>(&path, Some(EVAL_SAMPLE_SCHEMA))?;
            for l in report.records {
                stored.insert(l.record.seq, l.record);
            }
            // A torn or corrupt line (killed mid-write) is reported and that run redone.
            resume_errors = report.errors.iter().map(|e| format!("{e}: not resumed; that run is measured again")).collect();
        }
        let resumed = stored.len();
        let max = s.plan.max();
        let plan = schedule(self.sides.len(), s.warmups, max, s.order, s.seed);
        let n = self.sides.len();
        let mut values: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut failed = vec![0u32; n];
        let mut throttled = vec![0u32; n];
        let mut measured = vec![0u32; n];
        let mut samples = Vec::new();
        let mut sequence = Vec::new();
        let mut look = 0usize;
        let mut judgements = Vec::new();
        let mut looks_taken = 0u32;
        let mut settled_block = None;
        let mut crashed = vec![0u32; n];
        let mut checked_setup = vec![false; n];
        for (i, p) in plan.iter().enumerate() {
            let sample = match stored.remove(&p.seq) {
                Some(x) => x,
                None => {
                    if let Some(cmd) = &s.settle {
                        if settled_block != Some(p.block) {
                            settle(cmd, &self.sides[0].cwd, s.timeout)?;
                            settled_block = Some(p.block);
                        }
                    }
                    if let Some(cb) = self.progress {
                        let what = format!("{} {}", self.sides[p.side].name, if p.warmup { "warmup" } else { "run" });
                        cb(Event::Run { done: i, planned: plan.len(), what: &what });
                    }
                    let x = self.run_one(p)?;
                    own.vouch(&x)?;
                    append_jsonl(&path, std::slice::from_ref(&x), Fsync::Batch)?;
                    x
                }
            };
            if !checked_setup[p.side] {
                checked_setup[p.side] = true;
                if sample.exit_code == Some(0) && sample.value.is_none() && !sample.metrics.contains_key(&s.metric) {
                    return Err(ProtocolError::MissingMetric {
                        side: self.sides[p.side].name.clone(),
                        metric: s.metric.clone(),
                        parser: s.parser.clone(),
                        printed: sample.metrics.keys().cloned().collect(),
                        output: format!("{}/out/{}.stdout", self.dir.display(), sample.seq),
                    });
                }
            }
            if !p.warmup {
                sequence.push(self.sides[p.side].label.clone());
                measured[p.side] += 1;
                if sample.throttled {
                    throttled[p.side] += 1;
                }
                match sample.value {
                    Some(v) if sample.error.is_none() => values[p.side].push(v),
                    _ => {
                        failed[p.side] += 1;
                        if sample.exit_code.is_some_and(|c| c != 0) || sample.exit_code.is_none() {
                            crashed[p.side] += 1;
                        }
                    }
                }
            }
            samples.push(sample);
            // A look happens when every side has reached the look's count.
            let block_done = plan.get(i + 1).is_none_or(|q| q.block != p.block);
            if !p.warmup && block_done && look < s.plan.looks.len() && measured.iter().all(|m| *m >= s.plan.looks[look]) {
                let last_look = look + 1 == s.plan.looks.len();
                let lazy = JudgeConfig { lazy_bootstrap: !last_look, ..s.judge.clone() };
                let js: Vec<Judgement> = (1..n).map(|k| judge_at(&values[0], &values[k], &s.plan, look, &lazy)).collect();
                let at = look;
                looks_taken += 1;
                if let Some(cb) = self.progress {
                    cb(Event::Look { look: looks_taken as usize, runs_per_side: measured.iter().copied().min().unwrap_or(0), judgements: &js });
                }
                look += 1;
                let done = last_look || js.iter().all(|j| is_final(j.verdict));
                judgements = js;
                if done {
                    if !last_look {
                        // Final verdict at an interim look: recompute with the bootstrap for the report.
                        judgements = (1..n).map(|k| judge_at(&values[0], &values[k], &s.plan, at, &s.judge)).collect();
                    }
                    break;
                }
            }
        }
        // Failed runs decide before statistics: a crashing candidate is incorrect.
        for (k, j) in judgements.iter_mut().enumerate() {
            let side = k + 1;
            if crashed[side] > 0 && crashed[0] == 0 {
                j.verdict = Verdict::Incorrect;
                j.reasons.insert(0, format!("{} failed {} measured run(s); the baseline never did", self.sides[side].name, crashed[side]));
            } else if failed[side] > 0 {
                j.reasons.push(format!("{} failed {} measured run(s)", self.sides[side].name, failed[side]));
            }
            if failed[0] > 0 {
                j.reasons.push(format!("{} failed {} measured run(s)", self.sides[0].name, failed[0]));
            }
            let t: u32 = throttled.iter().sum();
            if t > 0 {
                j.reasons.push(format!("{t} sample(s) flagged as throttled"));
            }
        }
        let route_changes = route_changes(&samples, self.sides);
        let samples_ref = SampleRef {
            path: path.display().to_string(),
            md5: std::fs::File::open(&path).ok().and_then(|f| katlas_model::digest::md5_reader(f).ok()),
            records: samples.len() as u64 + stored.len() as u64,
        };
        let protocol = Protocol {
            order: s.order.as_str().into(),
            sequence,
            n_per_side: measured.clone(),
            max_per_side: max,
            warmups: s.warmups,
            seed: s.seed,
            adaptive: s.plan.is_adaptive(),
            looks: Some(looks_taken),
            settle: s.settle.clone(),
            fresh_process: true,
        };
        Ok(Outcome { samples, values, failed, throttled, judgements, protocol, samples_ref, resumed, route_changes, resume_errors })
    }

    fn run_one(&self, p: &Planned) -> Result<EvalSample, ProtocolError> {
        let side = &self.sides[p.side];
        let s = self.settings;
        let before = if s.telemetry { telemetry::read() } else { None };
        let scratch = Sandbox::new().map_err(|e| ProtocolError::Io { path: std::env::temp_dir(), source: e })?;
        let mut env = side.env.clone();
        scratch.apply(&mut env);
        let started_at = now_rfc3339();
        let t0 = Instant::now();
        let res = run_process(&side.argv, &env, &s.strip_env, &side.cwd, s.timeout);
        let wall_s = t0.elapsed().as_secs_f64();
        let escaped = scratch.kill_escaped();
        drop(scratch);
        let after = if s.telemetry { telemetry::read() } else { None };
        let mut sample = EvalSample {
            schema: EVAL_SAMPLE_SCHEMA.into(),
            eval_id: self.eval_id.clone(),
            seq: p.seq,
            side: side.label.clone(),
            block: p.block,
            pass: if p.warmup { "warmup" } else { "measured" }.into(),
            metric: s.metric.clone(),
            value: None,
            metrics: BTreeMap::new(),
            started_at,
            wall_s,
            exit_code: None,
            error: None,
            telemetry: None,
            throttled: false,
            route: None,
            code_objects: Vec::new(),
        };
        let tel = telemetry::merge(before, after);
        if let Some(t) = &tel {
            sample.throttled = telemetry::is_throttled(t);
        }
        sample.telemetry = tel;
        let out_dir = self.dir.join("out");
        let _ = katlas_fs::create_dir_all(&out_dir);
        match res {
            Err(e) => sample.error = Some(e.to_string()),
            Ok(r) => {
                // Kept for re-reading, secrets hidden like every record (the sample was parsed from memory).
                let redactor = katlas_identity::Redactor::for_child(&side.env);
                for (ext, bytes) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
                    let _ =
                        katlas_fs::write_atomic_with(&out_dir.join(format!("{}.{ext}", p.seq)), |w| katlas_identity::redact_stream(&bytes[..], w, &redactor));
                }
                sample.exit_code = r.code;
                let text = format!("{}\n{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
                let source = format!("{}/out/{}.stdout", self.dir.display(), p.seq);
                match crate::metric::read_metrics(&s.parser, &text, &source) {
                    Ok(parsed) => {
                        sample.metrics = parsed.metrics;
                        sample.route = parsed.route;
                        sample.code_objects = parsed.code_objects;
                    }
                    Err(e) => sample.error = Some(e.to_string()),
                }
                if r.timed_out {
                    sample.error = Some(format!("timed out after {:.0} s", s.timeout.as_secs_f64()));
                } else if let Some(sig) = r.signal {
                    sample.error = Some(format!("killed by signal {sig}"));
                } else if r.code != Some(0) {
                    sample.error = Some(format!("exit status {}: {}", fmt_code(r.code), tail(&r.stderr)));
                } else if sample.error.is_none() {
                    match sample.metrics.get(&s.metric) {
                        // A time or rate of zero, below zero or not finite is no measurement
                        // (bytes / 0 ms would pass any speed-of-light check as infinitely fast).
                        Some(v) if !v.is_finite() || (*v <= 0.0 && katlas_model::ledger::Goal::infer(&s.metric).is_some()) => {
                            sample.error = Some(format!("invalid sample: `{}` = {v} (a time or rate must be a positive number)", s.metric))
                        }
                        Some(v) => sample.value = Some(*v),
                        None => sample.error = Some(format!("missing metric `{}` in the output ({} parser)", s.metric, s.parser)),
                    }
                }
            }
        }
        if !escaped.is_empty() {
            let who: Vec<String> = escaped.iter().map(|(pid, cmd)| format!("pid {pid} `{}`", cmd.chars().take(80).collect::<String>())).collect();
            sample.value = None;
            sample.error = Some(format!("{OUTLIVED} ({}): work that finishes after the sample ends is not measured", who.join(", ")));
        }
        Ok(sample)
    }
}

/// Start of a sample's error when a process it started left its process group and was still
/// running when the sample ended (a `setsid` daemon): such a side's verdict is `invalid`.
pub const OUTLIVED: &str = "a process of the sample outlived it";

fn fmt_code(c: Option<i32>) -> String {
    c.map(|c| c.to_string()).unwrap_or_else(|| "none".into())
}

/// The last lines of a child's stderr for a sample's error, secrets hidden.
fn tail(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = katlas_identity::redact_text(&s, std::env::vars().collect::<BTreeMap<_, _>>().iter());
    let t: Vec<&str> = s.lines().rev().take(3).collect();
    t.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

pub struct ProcessResult {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Run one fresh process with full output capture and a timeout, through katlas's one
/// runner: its own process group, killed whole (SIGTERM, then SIGKILL) on timeout, so a
/// pipeline or a background child cannot hold the run open past its bound.
pub fn run_process(argv: &[String], env: &BTreeMap<String, String>, strip: &[String], cwd: &Path, timeout: Duration) -> Result<ProcessResult, EvalError> {
    let Some(prog) = argv.first() else { return Err(EvalError::Input("empty command".into())) };
    let req = katlas_proc::RunRequest {
        argv: argv.to_vec(),
        env: env.clone(),
        env_remove: strip.to_vec(),
        cwd: cwd.to_path_buf(),
        timeout: Some(timeout),
        kill_grace: Duration::from_secs(1),
    };
    let c = katlas_proc::run_captured(&req).map_err(|source| EvalError::Run { prog: prog.clone(), source })?;
    if let Some(e) = &c.spawn_error {
        return Err(EvalError::Start { prog: prog.clone(), why: e.strip_prefix(&format!("{prog}: ")).unwrap_or(e).to_string() });
    }
    Ok(ProcessResult { code: c.exit.exit_code, signal: c.exit.signal, timed_out: c.exit.timed_out, stdout: c.stdout, stderr: c.stderr })
}

fn settle(cmd: &str, cwd: &Path, timeout: Duration) -> Result<(), ProtocolError> {
    let argv = vec!["sh".to_string(), "-c".to_string(), cmd.to_string()];
    let r = run_process(&argv, &BTreeMap::new(), &[], cwd, timeout)?;
    if r.code != Some(0) {
        return Err(ProtocolError::Bad(format!("settle command `{cmd}` failed (exit {}): {}", fmt_code(r.code), tail(&r.stderr))));
    }
    Ok(())
}

/// Differences in the observed kernel route between sides (kernels seen, or
/// reported route facts), from each side's first measured sample with a route.
pub fn route_changes(samples: &[EvalSample], sides: &[Side]) -> Vec<String> {
    let mut first: BTreeMap<String, &Route> = BTreeMap::new();
    for s in samples {
        if let Some(r) = &s.route {
            first.entry(s.side.clone()).or_insert(r);
        }
    }
    let mut out = Vec::new();
    let Some(base) = sides.first().and_then(|s| first.get(&s.label)) else { return out };
    for side in &sides[1..] {
        let Some(r) = first.get(&side.label) else { continue };
        let a: std::collections::BTreeSet<_> = base.kernels_seen.iter().collect();
        let b: std::collections::BTreeSet<_> = r.kernels_seen.iter().collect();
        for k in b.difference(&a) {
            out.push(format!("{}: kernel `{k}` appears (not in {})", side.name, sides[0].name));
        }
        for k in a.difference(&b) {
            out.push(format!("{}: kernel `{k}` no longer runs (seen in {})", side.name, sides[0].name));
        }
        let keys: std::collections::BTreeSet<_> = base.attributes.keys().chain(r.attributes.keys()).collect();
        for k in keys {
            let (x, y) = (base.attributes.get(k), r.attributes.get(k));
            if x != y {
                out.push(format!(
                    "{}: route `{k}` {} -> {}",
                    side.name,
                    x.map(|v| v.to_string()).unwrap_or_else(|| "absent".into()),
                    y.map(|v| v.to_string()).unwrap_or_else(|| "absent".into())
                ));
            }
        }
    }
    out
}

impl katlas_fs::class::Classify for ProtocolError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            ProtocolError::Store(e) => katlas_fs::class::Classify::class(e),
            ProtocolError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            ProtocolError::Eval(e) => katlas_fs::class::Classify::class(e),
            _ => katlas_fs::class::Class::Input,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_blocks_alternate() {
        let s = schedule(2, 1, 3, Order::Abba, 0);
        let order: Vec<(usize, bool)> = s.iter().map(|p| (p.side, p.warmup)).collect();
        assert_eq!(order, vec![(0, true), (1, true), (1, false), (0, false), (0, false), (1, false), (1, false), (0, false)]);
        assert!(s.iter().enumerate().all(|(i, p)| p.seq == i as u64));
    }

    #[test]
    fn shuffle_is_seeded_and_balanced() {
        let a = schedule(3, 0, 20, Order::Shuffle, 9);
        let b = schedule(3, 0, 20, Order::Shuffle, 9);
        assert_eq!(a, b);
        let c = schedule(3, 0, 20, Order::Shuffle, 10);
        assert_ne!(a, c);
        for side in 0..3 {
            assert_eq!(a.iter().filter(|p| p.side == side).count(), 20);
        }
    }
}
