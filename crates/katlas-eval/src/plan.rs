//! Eval planning: the sides an eval compares (two commands, an env variant of one, an A/A,
//! git refs built in their own worktrees, a task packet), where its samples go and under
//! which id, and the noise band it is judged against. Everything before the protocol
//! runs lives here, so `katlas eval` and `katlas ab` only parse flags, ask for trust and
//! draw.

use crate::eval::{label, EvalReport, Meta, SideInput, TritonCheck, TRITON_CACHE_DIR};
use crate::noise::{self, Calibration};
use crate::protocol::Side;
use crate::routes::RouteSpec;
use crate::worktree;
use katlas_model::digest::md5_hex;
use katlas_model::ledger::{Goal, LedgerEntry};
use katlas_model::task::Task;
use katlas_model::{ExperimentKey, Identity};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Why an eval cannot be planned: the input is wrong (exit 2), or something it needs is
/// not there (git, a program: exit 3).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A noise band that could not be read or stored.
    #[error(transparent)]
    Eval(#[from] crate::error::EvalError),
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    MissingEnv(String),
}

fn bad(s: impl Into<String>) -> PlanError {
    PlanError::BadInput(s.into())
}

/// `sh -c CMD`: every side's command runs through the shell.
pub fn shell(cmd: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), cmd.into()]
}

/// Whether `s` names a git ref of `root` (a command has spaces; a ref does not).
pub fn is_ref(root: &Path, s: &str) -> bool {
    !s.contains(char::is_whitespace) && worktree::resolve(root, s).is_ok()
}

/// The goal of `metric`: the one given, else what the name says (`Goal::infer`, shared
/// with gates); a name that says nothing is taken as a rate, and the report prints the
/// goal it used.
pub fn goal(given: Option<Goal>, metric: &str) -> Goal {
    given.or_else(|| Goal::infer(metric)).unwrap_or(Goal::Maximize)
}

/// Run a build command in `dir`; its failure is bad input naming the command.
pub fn build_in(dir: &Path, build: &str, what: &str) -> Result<(), PlanError> {
    let ok = std::process::Command::new("sh").args(["-c", build]).current_dir(dir).status().is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(bad(format!("build `{build}` failed in {what}")))
    }
}

/// Where sides come from: the project, the directory commands run in, the worktrees.
pub struct Sides<'a> {
    /// The project root (the user's checkout: the working-tree candidate).
    pub root: &'a Path,
    /// Where command sides run (the user's current directory).
    pub cwd: &'a Path,
    /// Where git-ref sides get their worktrees (`.katlas/worktrees`).
    pub worktrees: &'a Path,
    /// `--binary`: the executable to hash per side.
    pub binary: Option<PathBuf>,
}

/// (allowed patterns, files the candidate changed against the baseline).
pub type AllowedFiles = (Vec<String>, Vec<String>);

/// The sides of a task eval and what the task says about them.
pub struct TaskSides {
    pub sides: Vec<SideInput>,
    pub allowed: Option<AllowedFiles>,
    pub correctness: Vec<(String, Option<RouteSpec>)>,
    /// The identity the task's baseline evidence was recorded under.
    pub reference_identity: Option<Identity>,
    /// A package task's Triton kernel: give each side its own cache ([`triton_caches`]) and check it.
    pub triton: Option<TritonCheck>,
}

/// `<eval dir>/triton-cache/<side label>` as each side's `TRITON_CACHE_DIR`: kept across a
/// side's samples (compiles are warm after the first) and never shared between sides, so the
/// candidate's entries show what it compiled from its own copy.
pub fn triton_caches(sides: &mut [SideInput], eval_dir: &Path) -> Result<(), PlanError> {
    for s in sides {
        let d = eval_dir.join("triton-cache").join(&s.side.label);
        katlas_fs::create_dir_all(&d).map_err(|e| bad(format!("{}: {e}", d.display())))?;
        s.side.env.insert(TRITON_CACHE_DIR.into(), d.display().to_string());
    }
    Ok(())
}

impl Sides<'_> {
    fn side(&self, label: &str, name: &str, argv: Vec<String>, cwd: &Path, git_ref: Option<String>, src: Option<PathBuf>) -> SideInput {
        SideInput {
            side: Side { label: label.into(), name: name.into(), argv, env: BTreeMap::new(), cwd: cwd.to_path_buf() },
            git_ref,
            source_root: src,
            knobs: BTreeMap::new(),
            binary: self.binary.clone(),
        }
    }

    /// The baseline against itself (`--aa`).
    pub fn aa(&self, cmd: &str) -> Vec<SideInput> {
        let src = Some(self.root.to_path_buf());
        vec![self.side("A", "baseline", shell(cmd), self.cwd, None, src.clone()), self.side("B", "baseline (again)", shell(cmd), self.cwd, None, src)]
    }

    /// One command under two values of env knobs: `--variant KEY=A --variant KEY=B`; the knobs.
    pub fn variants(&self, cmd: &str, variants: &[String]) -> Result<(Vec<SideInput>, BTreeSet<String>), PlanError> {
        let mut envs: Vec<BTreeMap<String, String>> = vec![BTreeMap::new(), BTreeMap::new()];
        let mut knobs = BTreeSet::new();
        for v in variants {
            let (k, val) = v.split_once('=').ok_or_else(|| bad(format!("--variant {v}: expected KEY=VALUE")))?;
            let slot = if envs[0].contains_key(k) { 1 } else { 0 };
            if envs[slot].contains_key(k) {
                return Err(bad(format!("--variant {k}: given more than twice")));
            }
            envs[slot].insert(k.into(), val.into());
            knobs.insert(k.to_string());
        }
        if let Some(k) = knobs.iter().find(|k| !envs[1].contains_key(*k)) {
            return Err(bad(format!("--variant {k}: needs two values (KEY=A and KEY=B)")));
        }
        let sides = envs
            .into_iter()
            .enumerate()
            .map(|(i, env)| {
                let name = env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
                let mut s = self.side(&label(i), &name, shell(cmd), self.cwd, None, Some(self.root.to_path_buf()));
                s.side.env = env.clone();
                s.knobs = env;
                s
            })
            .collect();
        Ok((sides, knobs))
    }

    /// `--baseline CMD|REF [--candidate CMD|REF]`: a ref is built in its own worktree and runs
    /// `command`; no candidate with a ref baseline is the working tree (built with `build`).
    /// With `allowed` globs, the files the candidate changed against the baseline ref.
    pub fn pair(
        &self,
        baseline: &str,
        candidate: Option<&str>,
        command: Option<&str>,
        build: Option<&str>,
        allowed: &[String],
    ) -> Result<(Vec<SideInput>, Option<AllowedFiles>), PlanError> {
        let mut sides = Vec::new();
        for (i, (spec, name)) in [(Some(baseline), "baseline"), (candidate, "candidate")].into_iter().enumerate() {
            let label = label(i);
            match spec {
                Some(s) if is_ref(self.root, s) => {
                    let cmd = command.ok_or_else(|| bad("--command is required for git-ref sides"))?;
                    let wt = worktree::prepare(self.root, s, self.worktrees, build)?;
                    sides.push(self.side(&label, &format!("{name} {s}"), shell(cmd), &wt.path, Some(s.into()), Some(wt.path.clone())));
                }
                Some(s) => sides.push(self.side(&label, name, shell(s), self.cwd, None, Some(self.root.to_path_buf()))),
                None => {
                    let cmd = command.ok_or_else(|| bad("--candidate is required (or --command with a ref baseline)"))?;
                    if let Some(b) = build {
                        build_in(self.root, b, "the working tree")?;
                    }
                    sides.push(self.side(&label, "candidate (working tree)", shell(cmd), self.root, None, Some(self.root.to_path_buf())));
                }
            }
        }
        let mut changed = None;
        if !allowed.is_empty() {
            let base = sides[0].git_ref.clone().ok_or_else(|| bad("--allowed needs a git-ref baseline"))?;
            let files = match &sides[1].git_ref {
                Some(r) => worktree::changed_files(self.root, &base, r),
                None => worktree::changed_in_worktree(self.root, &base),
            }?;
            changed = Some((allowed.to_vec(), files));
        }
        Ok((sides, changed))
    }

    /// `katlas ab REF...`: each ref built in its own worktree, all running `cmd`.
    pub fn refs(&self, refs: &[String], cmd: &str, build: Option<&str>) -> Result<Vec<SideInput>, PlanError> {
        refs.iter()
            .enumerate()
            .map(|(i, r)| {
                let wt = worktree::prepare(self.root, r, self.worktrees, build)?;
                Ok(self.side(&label(i), &format!("{r} ({})", &wt.commit[..10]), shell(cmd), &wt.path, Some(r.clone()), Some(wt.path.clone())))
            })
            .collect()
    }

    /// A task's baseline ref (built in a worktree) against the working tree (built in
    /// place), its bench command and env, allowed files and correctness routes. `None`
    /// when the task names no baseline ref: the eval needs one.
    pub fn task(&self, task: &Task, path: &Path) -> Result<Option<TaskSides>, PlanError> {
        if task.bench.command.is_empty() {
            return Err(bad(format!("{}: bench.command: empty", path.display())));
        }
        let Some(base_ref) = task.baseline.git_ref.clone() else { return Ok(None) };
        let build = task.build.as_ref().map(|b| b.join(" "));
        let wt = worktree::prepare(self.root, &base_ref, self.worktrees, build.as_deref())?;
        if let Some(b) = &build {
            build_in(self.root, b, "the working tree")?;
        }
        let argv = task.bench.command.clone();
        let mut base = self.side("A", &format!("baseline {}", &wt.commit[..12]), argv.clone(), &wt.path, Some(base_ref), Some(wt.path.clone()));
        let mut cand = self.side("B", "candidate (working tree)", argv, self.root, None, Some(self.root.to_path_buf()));
        let mut env = task.bench.env.clone();
        // A package task's PYTHONPATH names the copy relative to each side's tree; what this
        // shell has on PYTHONPATH (torch, triton from a path install) still follows it.
        if let (Some(_), Some(p), Ok(outer)) = (&task.package, env.get_mut("PYTHONPATH"), std::env::var("PYTHONPATH")) {
            if !outer.is_empty() {
                *p = format!("{p}:{outer}");
            }
        }
        base.side.env = env.clone();
        cand.side.env = env;
        let allowed =
            if task.allowed_files.is_empty() { None } else { Some((task.allowed_files.clone(), worktree::changed_in_worktree(self.root, &wt.commit)?)) };
        let correctness =
            task.correctness.iter().map(|c| (c.claim.clone(), Some(RouteSpec { commands: vec![c.command.clone()], ..Default::default() }))).collect();
        let reference_identity = (task.baseline.identity != Identity::default()).then(|| task.baseline.identity.clone());
        let triton = task.package.as_ref().and(task.kernel.clone()).map(|kernel| TritonCheck { kernel });
        Ok(Some(TaskSides { sides: vec![base, cand], allowed, correctness, reference_identity, triton }))
    }
}

/// What a task says about the eval's ledger entry, under what the flags already said.
pub fn task_meta(meta: Meta, task: &Task) -> Meta {
    Meta {
        task_id: Some(task.id.clone()),
        lever: meta.lever.or(task.lever.clone()),
        key: ExperimentKey {
            kernel: meta.key.kernel.or(task.kernel.clone()),
            arch: task.target.arch.clone(),
            phase: meta.key.phase.or(task.target.phase.clone()),
            shape: meta.key.shape.or(task.target.shape.clone()),
            quant: meta.key.quant.or(task.target.quant.clone()),
        },
        hypothesis: meta.hypothesis.or(Some(task.hypothesis.clone())),
        ..meta
    }
}

/// A missing program is a missing environment. Only simple commands are checked; a shell
/// pipeline's failure shows in its samples instead.
pub fn check_programs(sides: &[SideInput]) -> Result<(), PlanError> {
    for s in sides {
        let simple = match s.side.argv.as_slice() {
            [sh, c, cmd] if sh == "sh" && c == "-c" => !cmd.contains([';', '|', '&', '$', '(', '`', '<', '>']),
            _ => true,
        };
        if simple && crate::eval::resolve_binary(&s.side).is_none() {
            // Name the program the user wrote, not the `sh` that runs it.
            let prog = match s.side.argv.as_slice() {
                [sh, c, cmd] if sh == "sh" && c == "-c" => cmd.split_whitespace().find(|w| *w != "exec" && !w.contains('=')).unwrap_or(cmd).to_string(),
                v => v.first().cloned().unwrap_or_default(),
            };
            return Err(PlanError::MissingEnv(format!("{}: program `{prog}` not found", s.side.name)));
        }
    }
    Ok(())
}

/// A short stable id of `parts`.
pub fn fingerprint(parts: &[&str]) -> String {
    md5_hex(parts.join("\u{1f}").as_bytes())[..12].to_string()
}

/// The id of an eval without a task: what its sides run, in which env and directory.
pub fn sides_fingerprint(sides: &[SideInput], metric: &str, parser: &str) -> String {
    fingerprint(&[&format!("{:?}", sides.iter().map(|s| (&s.side.argv, &s.side.env, &s.side.cwd)).collect::<Vec<_>>()), metric, parser])
}

/// The id of `katlas ab` over `refs`.
pub fn ab_fingerprint(refs: &[String], cmd: &str, metric: &str) -> String {
    format!("ab-{}", fingerprint(&[&refs.join(" "), cmd, metric]))
}

/// The key of a command's noise calibration: the baseline's argv and the metric.
pub fn noise_key(sides: &[SideInput], metric: &str) -> String {
    fingerprint(&[&format!("{:?}", sides[0].side.argv), metric])
}

/// Where an eval runs, and why an unfinished directory was passed over, when one was.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalDir {
    pub path: PathBuf,
    pub id: String,
    /// One line: the directory that was not resumed and why (samples this host did not
    /// write for its plan: a team store's pull, a copy from another machine).
    pub passed_over: Option<String>,
}

/// Why `dir` may not be resumed, as the line that says so.
fn not_resumable(dir: &Path) -> Option<String> {
    crate::own_samples::foreign(dir).map(|why| format!("not resuming {}: {why}; measuring afresh in a new eval directory", dir.display()))
}

/// `parent/<id>` for a finished-or-new eval of fingerprint `id`: an unfinished one of the
/// same id that this host wrote is resumed; a finished one, one holding samples this host did
/// not write (or any, with `fresh`) gets `<id>-2`, `<id>-3` …
pub fn fingerprint_dir(parent: &Path, id: &str, fresh: bool) -> EvalDir {
    let mut out = id.to_string();
    let mut n = 1;
    let mut passed_over = None;
    loop {
        let d = parent.join(&out);
        let skip = if d.join("result.json").exists() || (fresh && d.exists()) {
            true
        } else if let Some(why) = not_resumable(&d) {
            passed_over.get_or_insert(why);
            true
        } else {
            false
        };
        if !skip {
            return EvalDir { path: d, id: out, passed_over };
        }
        n += 1;
        out = format!("{id}-{n}");
    }
}

/// A new numbered eval directory under `parent` (a task's `evals/<n>`), or the latest
/// unfinished one to resume when this host wrote all its samples.
pub fn numbered_dir(parent: &Path, fresh: bool) -> EvalDir {
    let mut max = 0u32;
    if let Ok(rd) = std::fs::read_dir(parent) {
        for e in rd.flatten() {
            if let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                max = max.max(n);
            }
        }
    }
    let mut passed_over = None;
    if max > 0 && !fresh {
        let d = parent.join(max.to_string());
        if !d.join("result.json").exists() {
            passed_over = not_resumable(&d);
            if passed_over.is_none() {
                return EvalDir { path: d, id: max.to_string(), passed_over };
            }
        }
    }
    EvalDir { path: parent.join((max + 1).to_string()), id: (max + 1).to_string(), passed_over }
}

/// Noise calibrations from `katlas eval --aa`, by command fingerprint, under `.katlas/`.
pub fn noise_file(katlas_dir: &Path) -> PathBuf {
    katlas_dir.join("noise.json")
}

/// The noise band of an eval and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub value: f64,
    pub source: String,
}

/// The band, in order: `--threshold`, the command's `eval --aa` calibration, katlas.toml's
/// `[eval] threshold`, else 1%.
pub fn band(flag: Option<f64>, calibrated: Option<Calibration>, config: Option<f64>) -> Result<Band, PlanError> {
    let (value, source) = match (flag, calibrated, config) {
        (Some(t), _, _) => (t, "--threshold".to_string()),
        (None, Some(c), _) => (c.band, c.describe()),
        (None, None, Some(t)) => (t, "katlas.toml [eval] threshold".to_string()),
        (None, None, None) => (0.01, "the default (no --threshold, no eval --aa calibration)".to_string()),
    };
    if !(0.0..1.0).contains(&value) {
        return Err(bad(format!("noise threshold {value} from {source}: expected a fraction in [0, 1)")));
    }
    Ok(Band { value, source })
}

/// The calibration stored for `key` in `path`, if any.
pub fn calibration(path: &Path, key: &str) -> Result<Option<Calibration>, PlanError> {
    Ok(noise::read(path)?.get(key).cloned())
}

/// Store an A/A's band under `key` when it may set one (`noise::admit`): `Ok(Ok(stored))`,
/// or `Ok(Err(why))` when the calibration is refused.
pub fn record_aa(path: &Path, key: &str, r: &EvalReport, max_band: f64, now: &str) -> Result<Result<Calibration, String>, PlanError> {
    let res = &r.result;
    let noise::AaMeasure { band, cv, runs } = match noise::admit_result(res, max_band) {
        Ok(m) => m,
        Err(why) => return Ok(Err(why)),
    };
    let mut map = noise::read(path)?;
    let c = Calibration {
        band: (band * 1e4).ceil() / 1e4,
        cv: Some(cv),
        runs_per_side: Some(runs),
        eval_id: Some(res.eval_id.clone()),
        calibrated_at: Some(now.to_string()),
    };
    map.insert(key.into(), c.clone());
    noise::write(path, &map).map_err(|source| crate::error::EvalError::Io { path: path.into(), source })?;
    Ok(Ok(c))
}

/// The ledger entry of an eval that could not start for want of a baseline.
pub fn needs_baseline_entry(meta: &Meta, metric: &str, goal: Goal, dir: &Path, eval_id: &str, why: &str, threshold: f64) -> LedgerEntry {
    use katlas_model::ledger::*;
    LedgerEntry {
        schema: LEDGER_SCHEMA.into(),
        id: katlas_model::row::new_id(),
        recorded_at: katlas_model::row::now_rfc3339(),
        task_id: meta.task_id.clone(),
        eval_id: Some(eval_id.into()),
        lever: meta.lever.clone(),
        key: meta.key.clone(),
        hypothesis: meta.hypothesis.clone(),
        metric: metric.into(),
        goal,
        baseline: EvalSide { label: "baseline".into(), ..Default::default() },
        candidate: EvalSide { label: "candidate".into(), ..Default::default() },
        protocol: Protocol::default(),
        samples: SampleRef { path: dir.join("samples.jsonl").display().to_string(), ..Default::default() },
        verdict: Verdict::NeedsBaseline,
        reasons: vec![why.into()],
        effect: None,
        noise_threshold: threshold,
        correctness: Vec::new(),
        cross_host: false,
        mechanism: meta.mechanism.clone(),
        disposition: meta.disposition.clone().unwrap_or_else(|| Disposition::default_for(Verdict::NeedsBaseline)),
        fleet: None,
    }
}

impl katlas_fs::class::Classify for PlanError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            PlanError::Eval(e) => katlas_fs::class::Classify::class(e),
            PlanError::BadInput(_) => katlas_fs::class::Class::Input,
            PlanError::MissingEnv(_) => katlas_fs::class::Class::Environment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resume_an_unfinished_eval_and_number_past_finished_ones() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        assert_eq!(numbered_dir(p, false).id, "1");
        std::fs::create_dir_all(p.join("1")).unwrap();
        assert_eq!(numbered_dir(p, false).id, "1", "unfinished: resumed");
        assert_eq!(numbered_dir(p, true).id, "2", "--fresh: a new one");
        std::fs::write(p.join("1/result.json"), "{}").unwrap();
        assert_eq!(numbered_dir(p, false).id, "2");
        assert_eq!(fingerprint_dir(p, "abc", false).id, "abc");
        std::fs::create_dir_all(p.join("abc")).unwrap();
        assert_eq!(fingerprint_dir(p, "abc", false).id, "abc");
        assert_eq!(fingerprint_dir(p, "abc", true).id, "abc-2");
        std::fs::write(p.join("abc/result.json"), "{}").unwrap();
        assert_eq!(fingerprint_dir(p, "abc", false).id, "abc-2");
    }

    #[test]
    fn variants_need_two_values_per_knob() {
        let d = tempfile::tempdir().unwrap();
        let s = Sides { root: d.path(), cwd: d.path(), worktrees: d.path(), binary: None };
        let (sides, knobs) = s.variants("./bench", &["K=1".into(), "K=2".into()]).unwrap();
        assert_eq!((sides[0].side.env["K"].as_str(), sides[1].side.env["K"].as_str()), ("1", "2"));
        assert_eq!(knobs.into_iter().collect::<Vec<_>>(), ["K"]);
        assert!(matches!(s.variants("./bench", &["K=1".into()]), Err(PlanError::BadInput(e)) if e.contains("needs two values")));
        assert!(matches!(s.variants("./bench", &["K=1".into(), "K=2".into(), "K=3".into()]), Err(PlanError::BadInput(e)) if e.contains("more than twice")));
        assert!(matches!(s.variants("./bench", &["K".into()]), Err(PlanError::BadInput(_))));
    }

    #[test]
    fn the_band_comes_from_the_flag_then_the_calibration_then_the_config() {
        let cal = Calibration { band: 0.02, cv: Some(0.01), runs_per_side: Some(10), eval_id: Some("e".into()), calibrated_at: None };
        assert_eq!(band(Some(0.03), Some(cal.clone()), Some(0.04)).unwrap().source, "--threshold");
        assert_eq!(band(None, Some(cal.clone()), Some(0.04)).unwrap().value, 0.02);
        assert_eq!(band(None, None, Some(0.04)).unwrap().source, "katlas.toml [eval] threshold");
        assert_eq!(band(None, None, None).unwrap().value, 0.01);
        assert!(band(Some(1.5), None, None).is_err());
        assert_eq!(goal(None, "time_ms"), Goal::Minimize);
        assert_eq!(goal(None, "score"), Goal::Maximize);
        assert_eq!(goal(Some(Goal::Minimize), "tok_s"), Goal::Minimize);
    }
}
