//! One eval end to end: identities, guards, correctness routes, the protocol,
//! the speed-of-light check, `result.json` and the ledger entries.

use crate::guard;
use crate::ledger;
use crate::noise;
use crate::protocol::{Outcome, ProtocolError, Runner, Settings, Side};
use crate::routes;
use crate::tamper;
use katlas_model::ledger::{
    CorrectnessCheck, Disposition, EvalResult, EvalSide, LedgerEntry, Protocol, SampleRef, SideSummary, Verdict, EVAL_RESULT_SCHEMA, LEDGER_SCHEMA,
};
use katlas_model::row::{new_id, now_rfc3339};
use katlas_model::{ExperimentKey, Identity};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A side as the caller describes it.
#[derive(Debug, Clone)]
pub struct SideInput {
    pub side: Side,
    pub git_ref: Option<String>,
    /// Source tree of the side (worktree or the user's checkout) for its source identity.
    pub source_root: Option<PathBuf>,
    /// Declared knob values of this side (env A/B).
    pub knobs: BTreeMap<String, String>,
    /// The executable to hash for the stale-binary check (relative to the
    /// side's directory); `None` = the command's program when it is a
    /// compiled executable (a script is not a binary: it may run anything).
    pub binary: Option<PathBuf>,
}

/// Identity capture options shared by all sides.
#[derive(Debug, Clone, Default)]
pub struct CaptureContext {
    pub cache_dir: Option<PathBuf>,
    pub model: Option<PathBuf>,
    pub hash_model: bool,
    pub prompt: Option<PathBuf>,
    pub env_prefixes: Vec<String>,
    /// Skip GPU/toolkit probing (tests, CPU workloads).
    pub skip_devices: bool,
}

#[derive(Debug, Clone)]
pub struct SolSpec {
    /// Bytes moved per run: a fixed number, or read from this metric key.
    pub bytes: Option<f64>,
    pub bytes_key: Option<String>,
    /// Time metric key (unit from its suffix: `_ms`, `_us`, `_s`).
    pub time_key: String,
    pub peak_gbps: f64,
    /// Where the ceiling came from (`--peak-gbps`, `arch db: H200 (measured)`).
    pub peak_source: String,
    pub margin: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Meta {
    pub task_id: Option<String>,
    pub lever: Option<String>,
    pub key: ExperimentKey,
    pub hypothesis: Option<String>,
    pub mechanism: Option<String>,
    pub disposition: Option<Disposition>,
}

/// A task on a Triton kernel of a package copy: each side has its own `TRITON_CACHE_DIR`, and
/// the candidate must have compiled `kernel` from its own source.
#[derive(Debug, Clone)]
pub struct TritonCheck {
    pub kernel: String,
}

/// The env name Triton reads its cache directory from.
pub const TRITON_CACHE_DIR: &str = "TRITON_CACHE_DIR";

pub struct EvalSpec {
    pub eval_id: String,
    pub dir: PathBuf,
    pub sides: Vec<SideInput>,
    pub settings: Settings,
    /// Env names the sides may differ in (declared knobs).
    pub knobs: BTreeSet<String>,
    pub cross_host: bool,
    /// Identity the baseline evidence was recorded under elsewhere (a task's
    /// row): prompt, model, arch and product must match it.
    pub reference_identity: Option<Identity>,
    /// (allowed patterns, files the candidate changed against the baseline).
    pub allowed_files: Option<(Vec<String>, Vec<String>)>,
    pub sol: Option<SolSpec>,
    /// (claim, route) pairs checked on every non-reference side; `None` route = unknown claim.
    pub correctness: Vec<(String, Option<routes::RouteSpec>)>,
    pub meta: Meta,
    pub ledger_path: Option<PathBuf>,
    /// The project's ledger when this eval does not append to it (`--no-ledger`): the measured
    /// processes must not shrink it either.
    pub protected_ledger: Option<PathBuf>,
    /// Project root, to store sample paths relative to it.
    pub project_root: PathBuf,
    /// Where the noise band came from (`--threshold`, an `eval --aa` calibration, katlas.toml,
    /// the default): every verdict judged against it says so.
    pub threshold_source: Option<String>,
    /// Triton cache checks of a package task (sides carry their `TRITON_CACHE_DIR`).
    pub triton: Option<TritonCheck>,
    /// An A/A calibration (`eval --aa`) and the widest band it may set: one that
    /// [`noise::admit_result`] refuses appends no ledger entry, since it calibrated nothing
    /// and its verdict is about the setup, not a change.
    pub aa_max_band: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct EvalReport {
    pub result: EvalResult,
    pub ledger: Vec<LedgerEntry>,
    pub outcome: Option<Outcome>,
    pub resumed: usize,
}

/// Effective child environment of a side: this process's env, instrumentation
/// stripped, the side's env on top.
pub fn side_env(side: &Side, strip: &[String]) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| !strip.contains(k)).collect();
    env.extend(side.env.clone());
    env
}

/// The program a side runs: argv[0] resolved against its directory or PATH;
/// for `sh -c CMD`, the first word of CMD (after `exec` and `KEY=VALUE` words).
pub fn resolve_binary(side: &Side) -> Option<PathBuf> {
    let first = side.argv.first()?;
    let prog: String = if (first == "sh" || first == "bash" || first.ends_with("/sh")) && side.argv.get(1).is_some_and(|a| a == "-c") {
        side.argv
            .get(2)?
            .split_whitespace()
            .find(|w| *w != "exec" && !(w.contains('=') && !w.starts_with('/') && !w.starts_with('.')))?
            .trim_matches(|c| c == '\'' || c == '"')
            .to_string()
    } else {
        first.clone()
    };
    let p = Path::new(&prog);
    if p.components().count() > 1 {
        let full = if p.is_absolute() { p.to_path_buf() } else { side.cwd.join(p) };
        return full.exists().then_some(full);
    }
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(&prog)).find(|f| f.is_file()))
}

/// Whether a program is something a side built, so that identical bytes on both sides
/// mean a stale build: anything inside the side's source tree or directory, or a path
/// outside the installed tools (a shared build directory). An installed program found
/// in a `PATH` directory — an interpreter or tool like `/usr/bin/python3 bench.py` or
/// `echo` — is the same on both sides by nature, so hashing it would call every real
/// change a stale binary; name the built file with `--binary` when it is installed there.
fn built_here(p: &Path, input: &SideInput) -> bool {
    let canon = |q: &Path| std::fs::canonicalize(q).unwrap_or_else(|_| q.to_path_buf());
    let file = canon(p);
    let inside = [input.source_root.as_deref(), Some(input.side.cwd.as_path())].into_iter().flatten().any(|root| file.starts_with(canon(root)));
    let installed = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| {
            let d = canon(&d);
            file.parent() == Some(d.as_path()) || p.parent().is_some_and(|pp| canon(pp) == d)
        })
    });
    inside || !installed
}

/// A named git-ignored file that is what the side built rather than an input: the program the
/// command runs (`./bench`, a build output: a real change changes it by nature) or a compiled
/// file (ELF: an executable or a shared library). Its staleness is the stale-binary check's;
/// digesting it as an input would call every real change `invalid`.
fn is_build_output(d: &katlas_model::FileDigest, root: &Path, side: &Side) -> bool {
    let Some(rel) = &d.path else { return false };
    let Ok(top) = std::fs::canonicalize(root) else { return false };
    let file = top.join(rel);
    let program = resolve_binary(side).and_then(|p| std::fs::canonicalize(p).ok());
    program.as_deref() == Some(file.as_path()) || is_compiled(&file)
}

/// ELF executables are binaries; scripts (`#!`) and anything else are not.
fn is_compiled(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"\x7fELF"
}

pub fn capture_identity(input: &SideInput, strip: &[String], cx: &CaptureContext) -> Identity {
    let opts = katlas_identity::CaptureOptions {
        project_root: input.source_root.clone(),
        binary: match &input.binary {
            Some(b) => Some(if b.is_absolute() { b.clone() } else { input.side.cwd.join(b) }),
            None => resolve_binary(&input.side).filter(|p| is_compiled(p) && built_here(p, input)),
        },
        model: cx.model.clone(),
        hash_model: cx.hash_model,
        prompt: cx.prompt.clone(),
        env_prefixes: cx.env_prefixes.clone(),
        env: Some(side_env(&input.side, strip)),
        cache_dir: cx.cache_dir.clone(),
        skip_devices: cx.skip_devices,
    };
    let mut id = katlas_identity::capture(&opts);
    // Knob values are part of the side, not the shared env: keep what the side asked for.
    id.env.extend(katlas_identity::redact_env(&input.knobs));
    id
}

fn summary(label: &str, values: &[f64], failed: u32, throttled: u32) -> SideSummary {
    use crate::stats;
    let f = |x: f64| x.is_finite().then_some(x);
    SideSummary {
        label: label.into(),
        n: values.len() as u32,
        median: f(stats::median(values)),
        mean: f(stats::mean(values)),
        mad: if values.is_empty() { None } else { f(stats::mad(values)) },
        // The robust CV (1.4826·MAD / median): the one the `unstable` rule judges.
        cv: f(stats::robust_cv(values)),
        ci: stats::median_ci(values, 0.95),
        throttled,
        failed,
    }
}

/// [`guard::first_run_like_baseline`] on the stored samples of a candidate: its first
/// successful run in run order (a warmup counts: that is where a cache gets filled).
fn shared_state(o: &Outcome, base: &str, cand: &str, goal: katlas_model::ledger::Goal) -> Option<String> {
    let mut ordered: Vec<&katlas_model::ledger::EvalSample> = o.samples.iter().filter(|x| x.error.is_none() && x.value.is_some()).collect();
    ordered.sort_by_key(|x| x.seq);
    let of = |label: &str| -> Vec<f64> { ordered.iter().filter(|x| x.side == label).filter_map(|x| x.value).collect() };
    let (b, c) = (of(base), of(cand));
    let (first, later) = c.split_first()?;
    guard::first_run_like_baseline(*first, later, &b, goal == katlas_model::ledger::Goal::Minimize)
}

/// Sides that differ in nothing katlas records (the same commit and changes, command,
/// environment, knobs, binary and named ignored inputs) cannot differ in speed through
/// anything katlas can attribute: a measured difference came from an input outside the
/// identity (an ignored or untracked file the program opens by itself, state outside the tree).
fn indistinguishable(a: &SideInput, b: &SideInput, ia: &Identity, ib: &Identity) -> Option<String> {
    let same_source = ia.source.commit.is_some() && ia.source.commit == ib.source.commit && ia.source.diff_md5 == ib.source.diff_md5;
    let bin = |i: &Identity| i.binary.as_ref().and_then(|d| d.md5.clone());
    let same = same_source && a.side.argv == b.side.argv && a.side.env == b.side.env && a.knobs == b.knobs && bin(ia) == bin(ib) && ia.env == ib.env;
    same.then(|| {
        format!(
            "the sides are identical in everything katlas records (commit {}{}, command, environment{}), so the measured difference comes from \
             something outside the identity: a git-ignored or untracked file the program opens without the command line naming it, or state \
             outside the tree. katlas digests only the ignored files a command names; name such inputs on the command line",
            ia.source.commit_short.as_deref().or(ia.source.commit.as_deref()).unwrap_or("-"),
            if ia.source.diff_md5.is_some() { " with the same local changes" } else { "" },
            if bin(ia).is_some() { ", binary" } else { "" }
        )
    })
}

#[allow(clippy::needless_range_loop)] // sides are indexed in parallel vectors
pub fn run_eval(spec: &EvalSpec, cx: &CaptureContext, progress: Option<crate::protocol::Progress<'_>>) -> Result<EvalReport, ProtocolError> {
    // What the checked and measured processes could write and the eval depends on, as it was
    // before any of them ran.
    let ledger = spec.ledger_path.as_ref().or(spec.protected_ledger.as_ref());
    let ledger_copy = ledger.map(|p| tamper::LedgerCopy::take(p));
    let baseline_tree = spec.sides[0].git_ref.as_ref().and(spec.sides[0].source_root.as_deref()).map(tamper::TreeState::take);
    let strip = &spec.settings.strip_env;
    let mut identities: Vec<Identity> = spec.sides.iter().map(|s| capture_identity(s, strip, cx)).collect();
    let n = spec.sides.len();
    // Each side's own Triton cache is a difference by design, never an identity mismatch.
    let mut knobs = spec.knobs.clone();
    if spec.triton.is_some() {
        knobs.insert(TRITON_CACHE_DIR.into());
    }
    // Pre-run guards, per non-reference side.
    let mut pre: Vec<Vec<String>> = vec![Vec::new(); n];
    for k in 1..n {
        for m in guard::identity_mismatches(&identities[0], &identities[k], &knobs, strip, spec.cross_host) {
            pre[k].push(format!("identity: {m}"));
        }
        if let Some(s) = guard::stale_binary(&identities[0], &identities[k]) {
            pre[k].push(s);
        }
    }
    // Git-ignored files the command names: outside the source identity, so digested here.
    let ignored: Vec<Vec<katlas_model::FileDigest>> = spec
        .sides
        .iter()
        .map(|s| {
            let root = s.source_root.as_deref().unwrap_or(&s.side.cwd);
            let mut found = guard::ignored_inputs(&s.side.argv, &s.side.cwd, root, cx.cache_dir.as_deref());
            found.retain(|d| !is_build_output(d, root, &s.side));
            found
        })
        .collect();
    for k in 1..n {
        pre[k].extend(guard::ignored_inputs_differ(&ignored[0], &ignored[k]));
    }
    if let Some(r) = &spec.reference_identity {
        // Evidence recorded elsewhere: only what makes numbers comparable at all.
        let strip_ref = |i: &Identity| Identity {
            prompt: i.prompt.clone(),
            model: i.model.clone(),
            devices: i.devices.clone(),
            host: i.host.clone(),
            ..Default::default()
        };
        for m in guard::identity_mismatches(&strip_ref(r), &strip_ref(&identities[0]), &BTreeSet::new(), &[], spec.cross_host) {
            for p in pre.iter_mut().skip(1) {
                p.push(format!("identity against the task's baseline: {m}"));
            }
        }
    }
    if let Some((allowed, changed)) = &spec.allowed_files {
        let breach = guard::allowed_files_breach(changed, allowed);
        if !breach.is_empty() {
            for p in pre.iter_mut().skip(1) {
                p.push(format!("allowed files breached: {} (allowed: {})", breach.join(", "), allowed.join(", ")));
            }
        }
        // An allowed path that became a link out of the tree is not the file that was allowed.
        for k in 1..n {
            let root = spec.sides[k].source_root.as_deref().unwrap_or(&spec.sides[k].side.cwd);
            for l in guard::links_out_of_tree(root, changed) {
                pre[k].push(format!("allowed files breached: {l}"));
            }
        }
    }
    // Correctness routes on the non-reference sides.
    let mut correctness: Vec<Vec<CorrectnessCheck>> = vec![Vec::new(); n];
    if pre.iter().all(|p| p.is_empty()) {
        for k in 1..n {
            let mut env = side_env(&spec.sides[k].side, strip);
            // The library's tests compile other shapes into a cache of their own: in the side's,
            // their entries would pass for the measured kernel's and hide a stale compile.
            if let Some(d) = env.get(TRITON_CACHE_DIR).map(|d| format!("{d}-checks")) {
                katlas_fs::create_dir_all(Path::new(&d)).ok();
                env.insert(TRITON_CACHE_DIR.into(), d);
            }
            for (claim, route) in &spec.correctness {
                correctness[k].extend(routes::run_route(claim, route.as_ref(), &spec.sides[k].side.cwd, &env));
            }
        }
    }
    // A check a candidate failed is run on the baseline too: one that fails there as well
    // cannot tell this candidate's change from what was already broken (a library's own test
    // red on this GPU or Triton version), so it makes the comparison invalid, not incorrect.
    // Only a check that ran and failed: SKIP and BLOCKED stay the candidate's (fail closed).
    // Sides that share a tree (an ad-hoc eval of two commands) would only repeat the same check.
    let own_tree = |k: usize| spec.sides[k].side.cwd != spec.sides[0].side.cwd;
    let failed: Vec<(String, String)> = correctness
        .iter()
        .enumerate()
        .filter(|(k, _)| own_tree(*k))
        .flat_map(|(_, c)| c)
        .filter(|c| c.outcome == katlas_model::ledger::RouteOutcome::Fail)
        .map(|c| (c.claim.clone(), c.check.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut broken_on_baseline: Vec<CorrectnessCheck> = Vec::new();
    if !failed.is_empty() {
        let mut env = side_env(&spec.sides[0].side, strip);
        if let Some(d) = env.get(TRITON_CACHE_DIR).map(|d| format!("{d}-checks")) {
            katlas_fs::create_dir_all(Path::new(&d)).ok();
            env.insert(TRITON_CACHE_DIR.into(), d);
        }
        for (claim, route) in &spec.correctness {
            if failed.iter().any(|(c, _)| c == claim) {
                let on_base = routes::run_route(claim, route.as_ref(), &spec.sides[0].side.cwd, &env);
                broken_on_baseline.extend(
                    on_base
                        .into_iter()
                        .filter(|c| c.outcome == katlas_model::ledger::RouteOutcome::Fail && failed.contains(&(c.claim.clone(), c.check.clone()))),
                );
            }
        }
    }
    for k in 1..n {
        for c in correctness[k].iter().filter(|c| c.outcome == katlas_model::ledger::RouteOutcome::Fail) {
            if let Some(b) = broken_on_baseline.iter().find(|b| b.claim == c.claim && b.check == c.check) {
                pre[k].push(format!(
                    "correctness {} `{}` fails on the baseline too ({}{}): it cannot judge this candidate; fix the route or choose checks that pass on the baseline",
                    b.claim,
                    b.check,
                    b.outcome,
                    b.detail.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
                ));
            }
        }
    }
    let invalid = pre.iter().any(|p| !p.is_empty());
    let incorrect = correctness.iter().enumerate().any(|(k, c)| pre[k].is_empty() && !c.is_empty() && !routes::all_pass(c));
    let sides: Vec<Side> = spec.sides.iter().map(|s| s.side.clone()).collect();
    let outcome = if invalid || incorrect {
        None
    } else {
        let runner = Runner { dir: spec.dir.clone(), eval_id: spec.eval_id.clone(), sides: &sides, settings: &spec.settings, progress };
        Some(runner.run()?)
    };
    // Writes by the measured processes to what they must not touch invalidate every comparison.
    let mut tampered = Vec::new();
    if let Some(c) = &ledger_copy {
        tampered.extend(c.restore_if_shrunk().map_err(|source| ProtocolError::Io { path: ledger.cloned().unwrap_or_default(), source })?);
    }
    if let Some(t) = &baseline_tree {
        let changed = t.changed_since();
        if !changed.is_empty() {
            tampered.push(format!(
                "the baseline's worktree was modified while the sides ran ({}{}): the baseline measured is not the baseline ref",
                changed.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
                if changed.len() > 5 { format!(" and {} more", changed.len() - 5) } else { String::new() }
            ));
        }
    }
    let goal = spec.settings.judge.goal;
    let mut verdicts = vec![Verdict::Inconclusive; n];
    let mut reasons: Vec<Vec<String>> = vec![Vec::new(); n];
    let mut effects = Vec::new();
    for k in 1..n {
        if !pre[k].is_empty() {
            verdicts[k] = Verdict::Invalid;
            reasons[k] = pre[k].clone();
        } else if !correctness[k].is_empty() && !routes::all_pass(&correctness[k]) {
            verdicts[k] = Verdict::Incorrect;
            reasons[k] = correctness[k]
                .iter()
                .filter(|c| !c.outcome.is_pass())
                .map(|c| format!("correctness {} `{}`: {}{}", c.claim, c.check, c.outcome, c.detail.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()))
                .collect();
        } else if invalid || incorrect {
            verdicts[k] = Verdict::Inconclusive;
            reasons[k].push("not measured: another side failed its checks".into());
        }
    }
    if let Some(o) = &outcome {
        // Code objects the runs reported loading become part of each side's identity.
        for (k, side) in spec.sides.iter().enumerate() {
            let mut seen: Vec<&String> = Vec::new();
            for smp in o.samples.iter().filter(|x| x.side == side.side.label) {
                for c in &smp.code_objects {
                    if !seen.contains(&c) {
                        seen.push(c);
                    }
                }
            }
            identities[k].code_objects = seen
                .into_iter()
                .map(|c| {
                    let p = Path::new(c);
                    let full = if p.is_absolute() { p.to_path_buf() } else { side.side.cwd.join(p) };
                    katlas_identity::file_digest(&full, cx.cache_dir.as_deref())
                })
                .collect();
        }
        for k in 1..n {
            let Some(j) = o.judgements.get(k - 1) else {
                verdicts[k] = Verdict::Inconclusive;
                reasons[k].push("no look was taken (no measured samples)".into());
                continue;
            };
            verdicts[k] = j.verdict;
            reasons[k] = j.reasons.clone();
            if let Some(src) = &spec.threshold_source {
                reasons[k].push(format!("noise band ±{:.2}% from {src}", spec.settings.judge.threshold * 100.0));
            }
            if let Some(e) = &j.effect {
                effects.push(e.clone());
            }
            if let Some(r) = guard::stale_code_objects(&identities[0], &identities[k]) {
                verdicts[k] = Verdict::Invalid;
                reasons[k].insert(0, r);
            }
            if let Some(r) = spec.triton.as_ref().and_then(|t| stale_compile(spec, t, k)) {
                verdicts[k] = Verdict::Invalid;
                reasons[k].insert(0, r);
            }
            if verdicts[k] == Verdict::Improved {
                if let Some(r) = shared_state(o, &spec.sides[0].side.label, &spec.sides[k].side.label, goal) {
                    verdicts[k] = Verdict::Invalid;
                    reasons[k].insert(0, r);
                }
            }
            if matches!(verdicts[k], Verdict::Improved | Verdict::Regressed) {
                if let Some(r) = indistinguishable(&spec.sides[0], &spec.sides[k], &identities[0], &identities[k]) {
                    verdicts[k] = Verdict::Invalid;
                    reasons[k].insert(0, r);
                }
            }
            if let Some(sol) = &spec.sol {
                if let Some(r) = sol_violation(sol, o, &spec.sides[k].side.label) {
                    verdicts[k] = Verdict::Invalid;
                    reasons[k].insert(0, format!("{r} (ceiling: {})", sol.peak_source));
                }
            }
            let (base, cand) = (&spec.sides[0].side.label, &spec.sides[k].side.label);
            if verdicts[k] != Verdict::Invalid {
                if let Some(r) = guard::checksums_differ(&checksums(o, base), &checksums(o, cand)) {
                    verdicts[k] = Verdict::Incorrect;
                    reasons[k].insert(0, r);
                }
            }
            if verdicts[k] == Verdict::Improved {
                if let Some(r) = reported_time_unlike_wall(o, &spec.settings.metric, base, cand) {
                    verdicts[k] = Verdict::Invalid;
                    reasons[k].insert(0, r);
                }
            }
            if verdicts[k] == Verdict::Improved && spec.meta.task_id.is_some() && spec.correctness.is_empty() {
                verdicts[k] = Verdict::Invalid;
                reasons[k].insert(
                    0,
                    "unverified: the task has no correctness check, so a faster candidate cannot be told from one that does less work; add one to the task's `correctness` (or --claim) and re-run"
                        .into(),
                );
            }
            for label in [base, cand] {
                if let Some(e) =
                    o.samples.iter().filter(|x| &x.side == label).find_map(|x| x.error.as_deref().filter(|e| e.starts_with(crate::protocol::OUTLIVED)))
                {
                    let name = if label == base { &spec.sides[0].side.name } else { &spec.sides[k].side.name };
                    verdicts[k] = Verdict::Invalid;
                    reasons[k].insert(0, format!("{name}: {e}"));
                    break;
                }
            }
        }
    }
    if !tampered.is_empty() {
        for k in 1..n {
            verdicts[k] = Verdict::Invalid;
            for r in tampered.iter().rev() {
                reasons[k].insert(0, r.clone());
            }
        }
    }
    let rel_path = |p: &Path| p.strip_prefix(&spec.project_root).map(|r| r.display().to_string()).unwrap_or_else(|_| p.display().to_string());
    let samples_ref = match &outcome {
        Some(o) => SampleRef { path: rel_path(Path::new(&o.samples_ref.path)), ..o.samples_ref.clone() },
        None => SampleRef { path: rel_path(&spec.dir.join("samples.jsonl")), md5: None, records: 0 },
    };
    let protocol = match &outcome {
        Some(o) => o.protocol.clone(),
        None => Protocol {
            order: spec.settings.order.as_str().into(),
            n_per_side: vec![0; n],
            max_per_side: spec.settings.plan.max(),
            warmups: spec.settings.warmups,
            seed: spec.settings.seed,
            adaptive: spec.settings.plan.is_adaptive(),
            looks: Some(0),
            settle: spec.settings.settle.clone(),
            fresh_process: true,
            ..Default::default()
        },
    };
    let eval_sides: Vec<EvalSide> = (0..n)
        .map(|k| {
            let s = &spec.sides[k];
            let sum = match &outcome {
                Some(o) => summary(&s.side.name, &o.values[k], o.failed[k], o.throttled[k]),
                None => SideSummary { label: s.side.name.clone(), ..Default::default() },
            };
            EvalSide {
                label: s.side.name.clone(),
                git_ref: s.git_ref.clone(),
                command: katlas_identity::redact_argv(&s.side.argv),
                knobs: s.knobs.clone(),
                identity: identities[k].clone(),
                summary: sum,
            }
        })
        .collect();
    let drift: BTreeMap<String, f64> = outcome.as_ref().and_then(|o| o.judgements.first()).map(|j| j.drift.iter().cloned().collect()).unwrap_or_default();
    let route_changes = outcome.as_ref().map(|o| o.route_changes.clone()).unwrap_or_default();
    let mut all_reasons = Vec::new();
    for k in 1..n {
        for r in &reasons[k] {
            all_reasons.push(if n > 2 { format!("{}: {r}", spec.sides[k].side.name) } else { r.clone() });
        }
    }
    let overall = if n == 2 { verdicts[1] } else { worst(&verdicts[1..]) };
    let host_of = |i: &Identity| i.host.hostname.clone();
    let cross_host = spec.cross_host
        && (identities.windows(2).any(|w| host_of(&w[0]).is_some() && host_of(&w[0]) != host_of(&w[1]))
            || spec.reference_identity.as_ref().is_some_and(|r| host_of(r).is_some() && host_of(r) != host_of(&identities[0])));
    if cross_host {
        all_reasons.push("sides ran on different hosts (--cross-host)".into());
    }
    if let Some(o) = &outcome {
        all_reasons.extend(o.resume_errors.iter().cloned());
    }
    let effect_of =
        |k: usize| -> Option<katlas_model::ledger::Effect> { outcome.as_ref().and_then(|o| o.judgements.get(k - 1)).and_then(|j| j.effect.clone()) };
    let mut entries = Vec::new();
    for k in 1..n {
        let m = &spec.meta;
        entries.push(LedgerEntry {
            schema: LEDGER_SCHEMA.into(),
            id: new_id(),
            recorded_at: now_rfc3339(),
            task_id: m.task_id.clone(),
            eval_id: Some(spec.eval_id.clone()),
            lever: m.lever.clone(),
            key: ExperimentKey { arch: m.key.arch.clone().or_else(|| identities[k].arch().map(str::to_string)), ..m.key.clone() },
            hypothesis: m.hypothesis.clone(),
            metric: spec.settings.metric.clone(),
            goal,
            baseline: eval_sides[0].clone(),
            candidate: eval_sides[k].clone(),
            protocol: protocol.clone(),
            samples: samples_ref.clone(),
            verdict: verdicts[k],
            reasons: reasons[k].clone(),
            effect: effect_of(k),
            noise_threshold: spec.settings.judge.threshold,
            correctness: correctness[k].clone(),
            cross_host,
            mechanism: m.mechanism.clone(),
            disposition: chosen_disposition(m.disposition.as_ref(), verdicts[k]),
            fleet: None,
        });
    }
    let mut result = EvalResult {
        schema: EVAL_RESULT_SCHEMA.into(),
        eval_id: spec.eval_id.clone(),
        task_id: spec.meta.task_id.clone(),
        created_at: now_rfc3339(),
        metric: spec.settings.metric.clone(),
        goal,
        verdict: overall,
        reasons: all_reasons,
        sides: eval_sides,
        effects,
        noise_threshold: spec.settings.judge.threshold,
        protocol,
        samples: samples_ref,
        drift,
        correctness: correctness.into_iter().flatten().collect(),
        cross_host,
        route_changes,
        ledger_id: None,
    };
    let aa_refused = spec.aa_max_band.is_some_and(|max| noise::admit_result(&result, max).is_err());
    let ledger_path = spec.ledger_path.as_ref().filter(|_| !aa_refused);
    // Only an entry that was written has an id to cite.
    result.ledger_id = ledger_path.and(entries.first().map(|e| e.id.clone()));
    let rp = spec.dir.join("result.json");
    katlas_fs::write_atomic(&rp, (serde_json::to_string_pretty(&result).expect("result serialises") + "\n").as_bytes())
        .map_err(|source| ProtocolError::Io { path: rp.clone(), source })?;
    if let Some(lp) = ledger_path {
        for e in &entries {
            ledger::append(lp, e)?;
        }
    }
    let resumed = outcome.as_ref().map(|o| o.resumed).unwrap_or(0);
    Ok(EvalReport { result, ledger: entries, outcome, resumed })
}

/// [`guard::triton_compile`] on the Triton caches of the baseline and side `k`.
fn stale_compile(spec: &EvalSpec, t: &TritonCheck, k: usize) -> Option<String> {
    let entries = |i: usize| spec.sides[i].side.env.get(TRITON_CACHE_DIR).map(|d| guard::triton_entries(Path::new(d), &t.kernel)).unwrap_or_default();
    let changed: Vec<String> = match &spec.allowed_files {
        Some((allowed, changed)) => changed.iter().filter(|f| allowed.iter().any(|p| guard::glob_match(p, f))).cloned().collect(),
        None => Vec::new(),
    };
    guard::triton_compile(&t.kernel, &entries(0), &entries(k), &changed)
}

/// The worst verdict of several comparisons (for `katlas ab` summaries).
fn worst(vs: &[Verdict]) -> Verdict {
    const RANK: [Verdict; 8] = [
        Verdict::Invalid,
        Verdict::Incorrect,
        Verdict::NeedsBaseline,
        Verdict::Unstable,
        Verdict::Regressed,
        Verdict::Inconclusive,
        Verdict::NoChange,
        Verdict::Improved,
    ];
    RANK.into_iter().find(|r| vs.contains(r)).unwrap_or(Verdict::Inconclusive)
}

/// (key, value) of every checksum metric a side's measured runs printed.
fn checksums(o: &Outcome, label: &str) -> Vec<(String, f64)> {
    o.samples
        .iter()
        .filter(|s| s.pass == "measured" && s.side == label && s.error.is_none())
        .flat_map(|s| s.metrics.iter().filter(|(k, _)| guard::is_checksum(k)).map(|(k, v)| (k.clone(), *v)))
        .collect()
}

/// [`guard::time_without_wall`] for a time metric (unit from its suffix).
fn reported_time_unlike_wall(o: &Outcome, metric: &str, base: &str, cand: &str) -> Option<String> {
    guard::seconds_of(metric, 1.0)?;
    let of = |label: &str| -> (Vec<f64>, Vec<f64>) {
        o.samples
            .iter()
            .filter(|s| s.pass == "measured" && s.side == label && s.error.is_none())
            .filter_map(|s| Some((guard::seconds_of(metric, s.value?)?, s.wall_s)))
            .unzip()
    };
    let ((ma, wa), (mb, wb)) = (of(base), of(cand));
    guard::time_without_wall([&ma, &mb], [&wa, &wb])
}

/// Median bytes / median time of a side above the ceiling.
fn sol_violation(sol: &SolSpec, o: &Outcome, side_label: &str) -> Option<String> {
    let label = o.samples.iter().filter(|s| s.pass == "measured");
    let mut times = Vec::new();
    let mut bytes = Vec::new();
    for s in label.filter(|s| s.side == side_label && s.error.is_none()) {
        if let Some(t) = s.metrics.get(&sol.time_key).and_then(|v| guard::seconds_of(&sol.time_key, *v)) {
            times.push(t);
        }
        if let Some(b) = sol.bytes.or_else(|| sol.bytes_key.as_ref().and_then(|key| s.metrics.get(key).copied())) {
            bytes.push(b);
        }
    }
    if times.is_empty() || bytes.is_empty() {
        return None;
    }
    guard::speed_of_light(crate::stats::median(&bytes), crate::stats::median(&times), sol.peak_gbps, sol.margin)
}

/// Side labels: A for the reference, then B, C …
pub fn label(k: usize) -> String {
    ((b'A' + (k as u8 % 26)) as char).to_string()
}

/// Default timeout of one sample.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether a verdict meets `--expect` (default: `improved`).
pub fn meets(v: Verdict, expect: Option<Verdict>) -> bool {
    v == expect.unwrap_or(Verdict::Improved)
}

/// The ledger's disposition: the one asked for, except that only an
/// `improved` verdict can be promoted (a requested promotion of anything
/// else falls back to what the verdict implies).
pub fn chosen_disposition(asked: Option<&Disposition>, verdict: Verdict) -> Disposition {
    match asked {
        Some(Disposition::Promote) if verdict != Verdict::Improved => Disposition::default_for(verdict),
        Some(d) => d.clone(),
        None => Disposition::default_for(verdict),
    }
}

#[cfg(test)]
mod disposition_tests {
    use super::*;

    #[test]
    fn promotion_needs_an_improvement() {
        assert_eq!(chosen_disposition(Some(&Disposition::Promote), Verdict::Improved), Disposition::Promote);
        assert_eq!(chosen_disposition(Some(&Disposition::Promote), Verdict::NoChange), Disposition::Reject);
        assert!(matches!(chosen_disposition(Some(&Disposition::Promote), Verdict::Unstable), Disposition::RevisitIf { .. }));
        assert_eq!(chosen_disposition(Some(&Disposition::OptIn), Verdict::NoChange), Disposition::OptIn);
    }
}
