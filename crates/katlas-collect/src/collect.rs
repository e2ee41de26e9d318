//! Spec -> runs -> rows. One row per (run, phase), appended to the corpus
//! as soon as the run is parsed, so an interrupt keeps everything measured.
//! A crash, signal, timeout, parse failure or missing metric becomes an error
//! row and the collection goes on.

use crate::ops::OpRules;
use crate::parse::{parse_with, Input, ParseError, ParseOutput, ParserOptions};
use crate::spec::{self, CommandSpec, LoadedSpec, ParserEntry};
use katlas_corpus::{append_jsonl, Fsync, Layout};
use katlas_model::{Identity, Metric, Origin, Route, Row, RunError, RunPolicy, Status, Variant};
use katlas_proc::{self as runner, RunOutcome, RunRequest};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const RUN_META_SCHEMA: &str = "katlas.run-meta.v1";
const TAIL_BYTES: u64 = 4096;

/// The end of a child's output for an error row, with secrets hidden: a child that
/// prints its environment must not leak it into the corpus.
fn secret_free_tail(path: &Path, spec_env: &BTreeMap<String, String>) -> Option<String> {
    let t = runner::tail(path, TAIL_BYTES)?;
    Some(katlas_identity::Redactor::for_child(spec_env).text(&t))
}

/// The run's own `stdout`/`stderr` rewritten with secrets hidden, once every parser and
/// tail has read them: the run directory is a record too.
fn redact_outputs(outcome: &RunOutcome, spec_env: &BTreeMap<String, String>) -> Result<(), CollectError> {
    let r = katlas_identity::Redactor::for_child(spec_env);
    for p in [&outcome.stdout, &outcome.stderr] {
        katlas_identity::redact_file(p, &r).map_err(|e| CollectError::Io { path: p.clone(), source: e })?;
    }
    Ok(())
}

pub struct CollectOptions {
    pub project_root: PathBuf,
    pub layout: Layout,
    /// `--set k=v` parameter overrides.
    pub set: BTreeMap<String, String>,
    pub runs: Option<u32>,
    pub warmup: Option<u32>,
    /// Apply the spec's `[profile]` switches.
    pub profile: bool,
    /// Write rows here instead of `.katlas/corpus/<host>-<day>.jsonl`.
    pub output: Option<PathBuf>,
    /// Show a progress bar (the CLI passes "stderr is a terminal").
    pub progress: bool,
    /// Skip GPU/toolkit probing in identity (tests).
    pub skip_devices: bool,
    pub ops: OpRules,
    pub kill_grace: Duration,
    /// `--capture-modules`: the injection library (katlas-capture) that writes every code
    /// object the CUDA driver loads under `<run_dir>/modules/`.
    pub capture_lib: Option<PathBuf>,
}

impl CollectOptions {
    pub fn new(project_root: &Path) -> Self {
        Self {
            project_root: project_root.to_path_buf(),
            layout: Layout::for_project(project_root),
            set: BTreeMap::new(),
            runs: None,
            warmup: None,
            profile: false,
            output: None,
            progress: false,
            skip_devices: false,
            ops: OpRules::with_project(&Layout::for_project(project_root).rules_dir()).unwrap_or_else(|_| OpRules::builtin()),
            kill_grace: Duration::from_secs(3),
            capture_lib: None,
        }
    }
}

/// One written row, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct RowSummary {
    pub id: String,
    pub run_id: String,
    pub phase: String,
    pub run_index: u32,
    pub pass: String,
    pub params: BTreeMap<String, String>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub metrics: usize,
    pub kernels: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectReport {
    pub schema: String,
    pub workload: String,
    pub spec_source: String,
    pub output: PathBuf,
    pub runs: usize,
    pub rows_ok: usize,
    pub rows_error: usize,
    pub interrupted: bool,
    /// Run directories of an earlier collect that was killed mid-run (meta.json
    /// `status: unfinished`): they hold no rows.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<PathBuf>,
    pub rows: Vec<RowSummary>,
    /// `--capture-modules` with `--profile`: the unmeasured run per combo that captured the
    /// code objects (its `modules/` is linked from each profiled run of the combo).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capture_runs: Vec<CaptureRun>,
}

/// A run that only captured code objects: it writes no rows.
#[derive(Debug, Clone, Serialize)]
pub struct CaptureRun {
    pub run_id: String,
    pub params: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// `<run_dir>/modules` → the capture run's `modules/` (a sibling under the runs directory), so
/// the row's run directory holds the code objects its command loaded, as with one run.
fn link_captured_modules(run_dir: &Path, capture_rid: &str) -> Result<(), CollectError> {
    let link = run_dir.join("modules");
    let target = Path::new("..").join(capture_rid).join("modules");
    std::os::unix::fs::symlink(&target, &link).map_err(|e| CollectError::Io { path: link, source: e })
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("{0}")]
    Spec(#[from] spec::SpecError),
    #[error("{0}")]
    Template(String),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("writing rows: {0}")]
    Store(#[from] katlas_corpus::StoreError),
}

#[derive(Serialize)]
struct RunMeta<'a> {
    schema: &'static str,
    run_id: &'a str,
    workload: &'a str,
    spec_source: &'a str,
    argv: &'a [String],
    env: &'a BTreeMap<String, String>,
    cwd: String,
    params: &'a BTreeMap<String, String>,
    pass: &'a str,
    run_index: u32,
    started_at: &'a str,
    /// `running` from the moment the run starts, `finished` once it is recorded: a
    /// meta.json still `running` whose katlas process is gone is an unfinished run.
    status: &'static str,
    /// The katlas process that owns the run while it is `running`.
    katlas_pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'a RunOutcome>,
    parsers: Vec<String>,
    parse_errors: &'a [String],
}

/// Runs a killed katlas left behind: meta.json still `running`, its katlas process gone.
/// Each is marked `unfinished` (so it is reported once) and returned, newest last.
pub fn mark_unfinished_runs(runs_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(runs_dir) else { return out };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs {
        let meta = d.join("meta.json");
        let Ok(text) = std::fs::read_to_string(&meta) else { continue };
        let Ok(mut v) = serde_json::from_str::<Value>(&text) else { continue };
        if v.get("status").and_then(Value::as_str) != Some("running") {
            continue;
        }
        let owner = v.get("katlas_pid").and_then(Value::as_u64).unwrap_or(0) as u32;
        if owner != 0 && process_alive(owner) {
            continue;
        }
        v["status"] = json!("unfinished");
        let _ = katlas_fs::write_atomic(&meta, &serde_json::to_vec_pretty(&v).unwrap_or_default());
        out.push(d);
    }
    out
}

/// Whether a pid is a live katlas process (a reused pid of another program is not).
fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let running = stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'));
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let me = std::env::current_exe().ok();
    running && (exe.is_none() || exe == me)
}

/// Everything fixed for one matrix combination.
struct Plan {
    vars: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
    instrumentation: Vec<String>,
    parsers: Vec<ParserEntry>,
    cwd: PathBuf,
}

fn tmpl(e: String, key: &str) -> CollectError {
    CollectError::Template(format!("{key}: {e}"))
}

fn shell_join(argv: &[String]) -> String {
    argv.iter().map(|a| spec::shell_quote(a)).collect::<Vec<_>>().join(" ")
}

fn render_command(c: &CommandSpec, vars: &BTreeMap<String, String>) -> Result<Vec<String>, CollectError> {
    Ok(match c {
        CommandSpec::Argv(v) => v.iter().map(|a| spec::render(a, vars).map_err(|e| tmpl(e, "command"))).collect::<Result<_, _>>()?,
        CommandSpec::Shell(s) => vec!["sh".into(), "-c".into(), spec::render_shell(s, vars).map_err(|e| tmpl(e, "command"))?],
    })
}

fn argv_for(ls: &LoadedSpec, vars: &BTreeMap<String, String>, profile: bool) -> Result<Vec<String>, CollectError> {
    let mut argv = render_command(&ls.spec.command, vars)?;
    if let (true, Some(p)) = (profile, &ls.spec.profile) {
        let extra: Vec<String> = p.args.iter().map(|a| spec::render(a, vars).map_err(|e| tmpl(e, "profile.args"))).collect::<Result<_, _>>()?;
        if !extra.is_empty() {
            if let CommandSpec::Shell(_) = ls.spec.command {
                let last = argv.last_mut().expect("sh -c command");
                last.push(' ');
                last.push_str(&shell_join(&extra));
            } else {
                argv.extend(extra);
            }
        }
        if let Some(c) = &p.command {
            let mut v = vars.clone();
            v.insert(
                "command".into(),
                match &ls.spec.command {
                    CommandSpec::Shell(_) => argv[2].clone(),
                    CommandSpec::Argv(_) => shell_join(&argv),
                },
            );
            argv = match c {
                CommandSpec::Argv(a) => {
                    // `{command}` as a whole argument expands to the plain argv.
                    let mut out = Vec::new();
                    for x in a {
                        if x == "{command}" {
                            out.extend(argv.iter().cloned());
                        } else {
                            out.push(spec::render(x, &v).map_err(|e| tmpl(e, "profile.command"))?);
                        }
                    }
                    out
                }
                CommandSpec::Shell(s) => {
                    // `{command}` is already a shell string: insert it unquoted.
                    let mut v2 = v.clone();
                    v2.remove("command");
                    let placeholder = "\u{1}KATLAS_COMMAND\u{1}";
                    let s2 = s.replace("{command}", placeholder);
                    let r = spec::render_shell(&s2, &v2).map_err(|e| tmpl(e, "profile.command"))?;
                    vec!["sh".into(), "-c".into(), r.replace(placeholder, &v["command"])]
                }
            };
        }
    }
    Ok(argv)
}

fn plan(ls: &LoadedSpec, opts: &CollectOptions, combo: &BTreeMap<String, String>) -> Result<Plan, CollectError> {
    let s = &ls.spec;
    let mut vars: BTreeMap<String, String> = s.params.iter().map(|(k, v)| (k.clone(), spec::value_string(v))).collect();
    for (k, v) in &opts.set {
        vars.insert(k.clone(), v.clone());
    }
    vars.extend(combo.clone());
    vars.insert("project".into(), opts.project_root.display().to_string());
    vars.insert("workload".into(), ls.name.clone());
    let mut env = BTreeMap::new();
    for (k, v) in &s.env {
        env.insert(k.clone(), spec::render(v, &vars).map_err(|e| tmpl(e, &format!("env.{k}")))?);
    }
    let mut instrumentation: Vec<String> = s.instrumentation.clone();
    let mut parsers: Vec<ParserEntry> = s.parsers.iter().map(|p| p.entry()).collect();
    if opts.profile {
        if let Some(p) = &s.profile {
            for (k, v) in &p.env {
                env.insert(k.clone(), spec::render(v, &vars).map_err(|e| tmpl(e, &format!("profile.env.{k}")))?);
                if !instrumentation.contains(k) {
                    instrumentation.push(k.clone());
                }
            }
            parsers.extend(p.parsers.iter().map(|p| p.entry()));
            if p.triton_launches {
                instrumentation.push("KATLAS_TRITON_LAUNCHES".into());
            }
        }
    }
    let cwd = match &s.cwd {
        Some(c) => opts.project_root.join(spec::render(c, &vars).map_err(|e| tmpl(e, "cwd"))?),
        None => opts.project_root.clone(),
    };
    Ok(Plan { vars, env, instrumentation, parsers, cwd })
}

fn identity_for(ls: &LoadedSpec, opts: &CollectOptions, plan: &Plan) -> Result<Identity, CollectError> {
    let inp = &ls.spec.inputs;
    let path = |t: &Option<String>, key: &str| -> Result<Option<PathBuf>, CollectError> {
        t.as_ref().map(|t| spec::render(t, &plan.vars).map(|p| plan.cwd.join(p)).map_err(|e| tmpl(e, key))).transpose()
    };
    let mut child_env: BTreeMap<String, String> = std::env::vars().collect();
    child_env.extend(plan.env.clone());
    let co = katlas_identity::CaptureOptions {
        project_root: Some(opts.project_root.clone()),
        binary: path(&inp.binary, "inputs.binary")?,
        model: path(&inp.model, "inputs.model")?,
        hash_model: inp.hash_model,
        prompt: path(&inp.prompt, "inputs.prompt")?,
        env_prefixes: ls.spec.env_prefixes.clone(),
        env: Some(child_env),
        cache_dir: Some(opts.layout.cache_dir()),
        skip_devices: opts.skip_devices,
    };
    let mut id = katlas_identity::capture(&co);
    let runs = opts.runs.unwrap_or(ls.spec.runs);
    id.policy = Some(RunPolicy {
        fresh_process: true,
        warmup_runs: opts.warmup.unwrap_or(ls.spec.warmup),
        measured_runs: runs,
        timeout_s: ls.spec.timeout_s,
        order: Some("sequential".into()),
        settle: None,
    });
    Ok(id)
}

fn run_id(now: &str) -> String {
    let compact: String = now.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    format!("{compact}-{}", &katlas_model::row::new_id()[..8])
}

/// Parse the run's outputs with every configured parser; errors are kept, not fatal.
/// katlas's Triton launch recorder, put first on a profiled Python workload's `PYTHONPATH`.
const TRITON_HOOK: &str = include_str!("../../../data/python/sitecustomize.py");
/// Where a profiled run's Triton launch records go (the torch-trace parser reads them from
/// beside the trace, or from here).
const TRITON_LAUNCHES: &str = "triton-launches.jsonl";

/// Writes the recorder into the run directory and points the child at it. Both variables are
/// instrumentation: eval never times a command with them.
fn install_triton_hook(run_dir: &Path, env: &mut BTreeMap<String, String>) -> Result<(), CollectError> {
    let dir = run_dir.join("katlas-python");
    let file = dir.join("sitecustomize.py");
    katlas_fs::write_atomic(&file, TRITON_HOOK.as_bytes()).map_err(|source| CollectError::Io { path: file.clone(), source })?;
    let inherited = env.get("PYTHONPATH").cloned().or_else(|| std::env::var("PYTHONPATH").ok()).filter(|p| !p.is_empty());
    let path = match inherited {
        Some(rest) => format!("{}:{rest}", dir.display()),
        None => dir.display().to_string(),
    };
    env.insert("PYTHONPATH".into(), path);
    env.insert("KATLAS_TRITON_LAUNCHES".into(), run_dir.join(TRITON_LAUNCHES).display().to_string());
    Ok(())
}

/// The Triton cache the workload compiled into: its `TRITON_CACHE_DIR`, else Triton's default.
fn triton_cache_dir(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let dir = env
        .get("TRITON_CACHE_DIR")
        .cloned()
        .or_else(|| std::env::var("TRITON_CACHE_DIR").ok())
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".triton/cache")))?;
    dir.is_dir().then_some(dir)
}

fn parse_run(plan: &Plan, ls: &LoadedSpec, outcome: &RunOutcome, vars: &BTreeMap<String, String>) -> (ParseOutput, Vec<String>) {
    let mut merged = ParseOutput::new("collect", &outcome.stdout.display().to_string());
    merged.source = None;
    let mut errors = Vec::new();
    let default_phase = ls.spec.phases.first().cloned();
    for p in &plan.parsers {
        let mut popts = p.options();
        if popts.phase.is_none() {
            popts.phase = default_phase.clone();
        }
        if p.name == "torch-trace" {
            let records = outcome.stdout.parent().map(|d| d.join(TRITON_LAUNCHES)).filter(|r| r.is_file());
            if let Some(records) = records {
                popts.triton_launches.get_or_insert_with(|| records.display().to_string());
                if popts.triton_cache.is_none() {
                    popts.triton_cache = triton_cache_dir(&plan.env).map(|d| d.display().to_string());
                }
            }
        }
        // A file, one stream, or (no stream named) stdout then stderr: the runner
        // keeps the two in separate files, so their relative order is not known.
        let paths: Vec<PathBuf> = match &p.file {
            Some(f) => match spec::render(f, vars) {
                Ok(f) => vec![plan.cwd.join(f)],
                Err(e) => {
                    errors.push(format!("parser {}: file: {e}", p.name));
                    continue;
                }
            },
            // rocpd databases are files the profiler wrote, found under the run's directory.
            None if p.name == "rocpd" => vec![outcome.stdout.parent().map(Path::to_path_buf).unwrap_or_default()],
            None => match p.stream.as_deref() {
                Some("stdout") => vec![outcome.stdout.clone()],
                Some("stderr") => vec![outcome.stderr.clone()],
                _ => vec![outcome.stdout.clone(), outcome.stderr.clone()],
            },
        };
        if p.file.is_some() && !paths[0].exists() {
            if !p.optional {
                errors.push(format!("parser {}: {}: file not written by the run", p.name, paths[0].display()));
            }
            continue;
        }
        match parse_outputs(&p.name, &paths, &popts, &outcome.stdout.with_file_name(".parse-input")) {
            Ok(o) => {
                let source = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" + ");
                merged.artifacts.insert(format!("parser.{}.source", p.name), json!(source));
                merged.merge(o)
            }
            Err(e) => errors.push(format!("parser {}: {e}", p.name)),
        }
    }
    (merged, errors)
}

/// Parse one file, or a run's stdout then its stderr as one text. Two
/// non-empty outputs are copied one after the other into `scratch` (removed
/// after), a newline put between them when stdout does not end in one, so the
/// parser sees one stream under the usual input limits; line numbers in its
/// errors and warnings are mapped back to the file the line is in.
fn parse_outputs(name: &str, paths: &[PathBuf], opts: &ParserOptions, scratch: &Path) -> Result<ParseOutput, ParseError> {
    let label = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" + ");
    let full: Vec<&PathBuf> = paths.iter().filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0)).collect();
    let (first, second) = match (paths, full.as_slice()) {
        ([one], _) => return parse_with(name, Input::File(one), opts),
        (_, [one]) => return parse_with(name, Input::File(one), opts),
        (_, []) => return parse_with(name, Input::Text { text: "", source: &label }, opts).map(|o| ParseOutput { source: Some(label.clone()), ..o }),
        (_, [a, b]) => (*a, *b),
        (_, _) => unreachable!("at most stdout and stderr"),
    };
    let io = |e: std::io::Error| ParseError::new(&label, None, e.to_string());
    let first_lines = {
        use std::io::{Read, Write};
        // Whatever the run left under that name (a FIFO would block the open) goes first.
        let _ = std::fs::remove_file(scratch);
        let mut out = std::io::BufWriter::new(katlas_fs::create_file(scratch).map_err(io)?);
        let mut r = std::fs::File::open(first).map_err(io)?;
        let mut buf = vec![0u8; 1 << 16];
        let (mut lines, mut last) = (0u64, b'\n');
        loop {
            let n = r.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            last = buf[n - 1];
            out.write_all(&buf[..n]).map_err(io)?;
        }
        if last != b'\n' {
            out.write_all(b"\n").map_err(io)?;
            lines += 1;
        }
        std::io::copy(&mut std::fs::File::open(second).map_err(io)?, &mut out).map_err(io)?;
        out.flush().map_err(io)?;
        lines
    };
    let got = parse_with(name, Input::File(scratch), opts);
    let _ = std::fs::remove_file(scratch);
    let tmp = scratch.display().to_string();
    let at = |line: u64| if line <= first_lines { (first.display().to_string(), line) } else { (second.display().to_string(), line - first_lines) };
    match got {
        Ok(mut o) => {
            for w in &mut o.warnings {
                let Some(rest) = w.strip_prefix(&tmp) else { continue };
                let mapped = rest.strip_prefix(':').and_then(|r| {
                    let digits = r.chars().take_while(char::is_ascii_digit).count();
                    let line: u64 = r[..digits].parse().ok()?;
                    let tail = r[digits..].strip_prefix(':')?;
                    let (file, l) = at(line);
                    Some(format!("{file}:{l}:{tail}"))
                });
                *w = mapped.unwrap_or_else(|| format!("{label}{rest}"));
            }
            o.source = Some(label);
            Ok(o)
        }
        Err(mut e) => {
            if e.source == tmp {
                match e.line {
                    Some(line) => {
                        let (file, l) = at(line);
                        (e.source, e.line) = (file, Some(l));
                    }
                    None => e.source = label,
                }
            }
            Err(e)
        }
    }
}

pub fn collect(ls: &LoadedSpec, opts: &CollectOptions) -> Result<CollectReport, CollectError> {
    let s = &ls.spec;
    let combos = spec::combinations(s, &opts.set)?;
    let runs = opts.runs.unwrap_or(s.runs).max(1);
    let warmup = opts.warmup.unwrap_or(s.warmup);
    // With a profile, the module capture gets a run of its own per combo: the injection library
    // may have to hold CUPTI alone (CUDA 13 refuses a second subscriber), and the workload's
    // profiler (torch.profiler) would then record no kernels.
    let split_capture = opts.capture_lib.is_some() && opts.profile;
    let total = combos.len() as u64 * (runs + warmup + u32::from(split_capture)) as u64;
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {pos}/{len} runs {elapsed_precise} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_prefix(ls.name.clone());
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut report = CollectReport {
        schema: "katlas.collect-report.v1".into(),
        workload: ls.name.clone(),
        spec_source: ls.source.clone(),
        output: PathBuf::new(),
        runs: 0,
        rows_ok: 0,
        rows_error: 0,
        interrupted: false,
        unfinished: mark_unfinished_runs(&opts.layout.runs_dir()),
        rows: Vec::new(),
        capture_runs: Vec::new(),
    };
    let mut output: Option<PathBuf> = opts.output.clone();
    'combos: for combo in &combos {
        let mut plan = plan(ls, opts, combo)?;
        if opts.capture_lib.is_some() {
            // The injection library is instrumentation: eval never times a command with it.
            plan.instrumentation.push("CUDA_INJECTION64_PATH".into());
        }
        let identity = identity_for(ls, opts, &plan)?;
        let out_path = output
            .get_or_insert_with(|| {
                let host = identity.host.hostname.clone().unwrap_or_else(|| "unknown-host".into());
                let day = katlas_model::row::now_rfc3339()[..10].to_string();
                opts.layout.corpus_file(&host, &day)
            })
            .clone();
        report.output = out_path.clone();
        let passes = std::iter::repeat_n("capture", usize::from(split_capture))
            .chain(std::iter::repeat_n("warmup", warmup as usize))
            .chain(std::iter::repeat_n("measured", runs as usize));
        let mut measured_index = 0u32;
        // The capture run of this combo, whose modules every profiled run of it links to.
        let mut captured: Option<String> = None;
        for (i, pass) in passes.enumerate() {
            if runner::interrupted() {
                report.interrupted = true;
                break 'combos;
            }
            let run_index = if pass == "measured" {
                measured_index += 1;
                measured_index
            } else {
                i as u32 + 1
            };
            let started = katlas_model::row::now_rfc3339();
            let rid = run_id(&started);
            let run_dir = opts.layout.runs_dir().join(&rid);
            let mut vars = plan.vars.clone();
            vars.insert("run_dir".into(), run_dir.display().to_string());
            vars.insert("run_index".into(), run_index.to_string());
            let argv = argv_for(ls, &vars, opts.profile && pass != "capture")?;
            bar.set_message(format!("{pass} {run_index} {}", combo.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")));
            let mut env = plan.env.clone();
            env.insert("KATLAS_RUN_DIR".into(), run_dir.display().to_string());
            if opts.profile && pass != "capture" && s.profile.as_ref().is_some_and(|p| p.triton_launches) {
                install_triton_hook(&run_dir, &mut env)?;
            }
            if let Some(lib) = opts.capture_lib.as_ref().filter(|_| !split_capture || pass == "capture") {
                env.insert("CUDA_INJECTION64_PATH".into(), lib.display().to_string());
                env.insert("KATLAS_CAPTURE_DIR".into(), run_dir.join("modules").display().to_string());
            }
            let req = RunRequest {
                argv: argv.clone(),
                env,
                env_remove: Vec::new(),
                cwd: plan.cwd.clone(),
                timeout: s.timeout_s.map(Duration::from_secs_f64),
                kill_grace: opts.kill_grace,
            };
            let recorded_env = katlas_identity::redact_env(&plan.env);
            let recorded_argv = katlas_identity::redact_argv(&argv);
            let meta_path = run_dir.join("meta.json");
            let write_meta = |status: &'static str, outcome: Option<&RunOutcome>, parse_errors: &[String]| {
                let meta = RunMeta {
                    schema: RUN_META_SCHEMA,
                    run_id: &rid,
                    workload: &ls.name,
                    spec_source: &ls.source,
                    argv: &recorded_argv,
                    env: &recorded_env,
                    cwd: plan.cwd.display().to_string(),
                    params: &plan.vars,
                    pass,
                    run_index,
                    started_at: &started,
                    status,
                    katlas_pid: std::process::id(),
                    outcome,
                    parsers: plan.parsers.iter().map(|p| p.name.clone()).collect(),
                    parse_errors,
                };
                katlas_fs::create_dir_all(&run_dir)
                    .and_then(|()| katlas_fs::write_atomic(&meta_path, &serde_json::to_vec_pretty(&meta).unwrap_or_default()))
                    .map_err(|e| CollectError::Io { path: meta_path.clone(), source: e })
            };
            // Written before the workload starts: a katlas killed mid-run leaves a run that says so.
            write_meta("running", None, &[])?;
            let outcome = runner::run(&req, &run_dir).map_err(|e| CollectError::Io { path: run_dir.clone(), source: e })?;
            report.runs += 1;
            if pass == "capture" {
                // No rows: the run exists for the code objects it loaded.
                write_meta("finished", Some(&outcome), &[])?;
                redact_outputs(&outcome, &plan.env)?;
                report.capture_runs.push(CaptureRun { run_id: rid.clone(), params: combo.clone(), failure: outcome.failure() });
                captured = Some(rid.clone());
                bar.inc(1);
                if outcome.interrupted {
                    report.interrupted = true;
                    break 'combos;
                }
                continue;
            }
            if let Some(cap) = &captured {
                link_captured_modules(&run_dir, cap)?;
            }
            // A failed run is parsed too: what it printed before failing (hipfire's bench prints
            // PREFILL_SUMMARY before its gen phase) stays on the error rows of those phases.
            let (parsed, parse_errors) = match parse_run(&plan, ls, &outcome, &vars) {
                done if outcome.success() => done,
                (parsed, _) => (parsed, Vec::new()),
            };
            write_meta("finished", Some(&outcome), &parse_errors)?;
            let mut rows = build_rows(ls, opts, &plan, &identity, &argv, &outcome, parsed, &parse_errors, pass, run_index, &started, &run_dir, &vars)?;
            redact_outputs(&outcome, &plan.env)?;
            // What eval must time instead: the same command without the profiler's args
            // and wrapper (their env is in `variant.instrumentation`).
            if opts.profile {
                let plain = argv_for(ls, &vars, false)?;
                if plain != argv {
                    for r in &mut rows {
                        r.variant.plain_command = katlas_identity::redact_argv(&plain);
                    }
                }
            }
            append_jsonl(&out_path, &rows, Fsync::Batch)?;
            for r in &rows {
                match r.status {
                    Status::Ok => report.rows_ok += 1,
                    Status::Error => report.rows_error += 1,
                }
                report.rows.push(RowSummary {
                    id: r.id.clone(),
                    run_id: rid.clone(),
                    phase: r.phase.clone(),
                    run_index: r.run_index,
                    pass: r.pass.clone(),
                    params: combo.clone(),
                    status: r.status,
                    message: r.error.as_ref().and_then(|e| e.message.clone()),
                    metrics: r.metrics.len(),
                    kernels: r.kernels.len(),
                });
            }
            bar.inc(1);
            if outcome.interrupted {
                report.interrupted = true;
                break 'combos;
            }
        }
    }
    bar.finish_and_clear();
    if report.output.as_os_str().is_empty() {
        report.output = output.unwrap_or_default();
    }
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn build_rows(
    ls: &LoadedSpec,
    opts: &CollectOptions,
    plan: &Plan,
    identity: &Identity,
    argv: &[String],
    outcome: &RunOutcome,
    mut parsed: ParseOutput,
    parse_errors: &[String],
    pass: &str,
    run_index: u32,
    started: &str,
    run_dir: &Path,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<Row>, CollectError> {
    let s = &ls.spec;
    let phases: Vec<String> = if !s.phases.is_empty() {
        s.phases.clone()
    } else if !parsed.phases.is_empty() {
        parsed.phases.iter().map(|p| p.phase.clone()).collect()
    } else {
        vec!["run".into()]
    };
    // What the parsers found for a phase no row is written for: an error row of
    // that phase says so (the run's full output stays in its run directory).
    let unrecorded: Vec<(String, String)> = parsed
        .phases
        .iter()
        .filter(|p| !phases.contains(&p.phase) && (!p.kernels.is_empty() || !p.metrics.is_empty()))
        .map(|p| {
            let names: Vec<&str> = p.metrics.keys().map(String::as_str).collect();
            (
                p.phase.clone(),
                format!(
                    "parsed phase `{}` ({} kernels, {} metrics{}{}) is not among the spec's phases ({}); not recorded (add it to the spec's `phases`)",
                    p.phase,
                    p.kernels.len(),
                    names.len(),
                    if names.is_empty() { "" } else { ": " },
                    names.join(", "),
                    phases.join(", ")
                ),
            )
        })
        .collect();
    let failure = outcome.failure();
    let parse_failure = (!parse_errors.is_empty()).then(|| parse_errors.join("; "));
    let shape = s.shape_bucket.as_ref().map(|t| spec::render(t, vars)).transpose().map_err(|e| tmpl(e, "shape_bucket"))?;
    let quant = s.quant.as_ref().map(|t| spec::render(t, vars)).transpose().map_err(|e| tmpl(e, "quant"))?;
    let mut knobs = BTreeMap::new();
    for (k, v) in &s.knobs {
        knobs.insert(k.clone(), spec::render(v, vars).map_err(|e| tmpl(e, &format!("knobs.{k}")))?);
    }
    let rel_run_dir = run_dir.strip_prefix(&opts.project_root).unwrap_or(run_dir).display().to_string();
    let mut out = Vec::new();
    if failure.is_none() && parse_failure.is_none() && !parsed.rows.is_empty() {
        return Ok(embedded_rows(s, opts, plan, identity, argv, outcome, parsed, pass, run_index, &rel_run_dir, &ls.source, &knobs));
    }
    let planned = phases.iter().map(|p| (p.clone(), None));
    let extra = if failure.is_none() && parse_failure.is_none() { unrecorded } else { Vec::new() };
    for (phase, unrecorded_msg) in planned.chain(extra.into_iter().map(|(p, m)| (p, Some(m)))) {
        let mut row = Row::new(ls.name.clone(), phase.clone());
        row.captured_at = started.to_string();
        row.workload_kind = s.kind.clone();
        row.shape_bucket = shape.clone();
        row.run_index = run_index;
        row.pass = pass.to_string();
        row.quant = quant.clone();
        row.params = plan.vars.iter().filter(|(k, _)| !spec::BUILTIN_VARS.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        row.command = katlas_identity::redact_argv(argv);
        row.identity = identity.clone();
        row.arch = identity.arch().map(str::to_string).or_else(|| parsed.route.get("arch").and_then(Value::as_str).map(str::to_string));
        row.variant =
            Variant { env: katlas_identity::redact_env(&plan.env), instrumentation: plan.instrumentation.clone(), knobs: knobs.clone(), ..Default::default() };
        row.origin = Some(Origin {
            kind: "collect".into(),
            schema: None,
            file: Some(ls.source.clone()),
            line: None,
            run_dir: Some(rel_run_dir.clone()),
            parsers: plan.parsers.iter().map(|p| p.name.clone()).collect(),
        });
        row.artifacts.insert("wall_s".into(), json!(outcome.wall_s));
        if let Some(msg) = failure.clone().or_else(|| parse_failure.clone()).or(unrecorded_msg) {
            if failure.is_some() {
                // The phase's own numbers, printed before the failure; never the whole run's.
                if let Some(t) = parsed.phases.iter().find(|p| p.phase == phase) {
                    row.metrics = t.metrics.clone();
                }
            }
            row.status = Status::Error;
            row.error = Some(RunError {
                exit_code: outcome.exit_code,
                signal: outcome.signal,
                timed_out: outcome.timed_out,
                message: Some(msg),
                stderr_tail: secret_free_tail(&outcome.stderr, &plan.env),
                stdout_tail: secret_free_tail(&outcome.stdout, &plan.env),
            });
            out.push(row);
            continue;
        }
        let table = parsed.phases.iter_mut().find(|p| p.phase == phase).map(std::mem::take);
        let mut metrics: BTreeMap<String, Metric> = parsed.metrics.clone();
        if let Some(t) = &table {
            metrics.extend(t.metrics.clone());
            if let Some(l) = t.launches {
                metrics.entry("kernel_launches".into()).or_insert(Metric::new(l as f64, Some("launches")));
            }
            if t.gpu_time_us > 0.0 {
                metrics.entry("kernel_time_us".into()).or_insert(Metric::new(t.gpu_time_us, Some("us")));
            }
        }
        row.metrics = metrics;
        if let Some(mut t) = table {
            opts.ops.classify_all(&mut t.kernels);
            if let Some(tot) = t.reported_total_us {
                row.artifacts.insert("reported_total_us".into(), json!(tot));
            }
            if let Some(w) = t.wall_ms {
                row.artifacts.insert("profile_wall_ms".into(), json!(w));
            }
            row.kernels = t.kernels;
        }
        row.artifacts.extend(parsed.artifacts.clone());
        if !parsed.tags.is_empty() {
            row.artifacts.insert("tags".into(), json!(parsed.tags));
        }
        if !parsed.warnings.is_empty() {
            row.artifacts.insert("parse_warnings".into(), json!(parsed.warnings));
        }
        let observed = !row.kernels.is_empty();
        if observed || !parsed.route.is_empty() || !plan.env.is_empty() {
            row.route = Some(Route {
                basis: if observed {
                    "observed"
                } else if !parsed.route.is_empty() {
                    "reported"
                } else {
                    "inferred"
                }
                .into(),
                attributes: parsed.route.clone().into_iter().collect(),
                kernels_seen: row.kernels.iter().map(|k| k.name.clone()).collect(),
                env_requested: katlas_identity::redact_env(&plan.env),
            });
        }
        let missing: Vec<&String> = s.required.for_phase(&row.phase).iter().filter(|k| !row.metrics.contains_key(*k)).collect();
        if !missing.is_empty() {
            row.status = Status::Error;
            row.error = Some(RunError {
                exit_code: outcome.exit_code,
                signal: None,
                timed_out: false,
                message: Some(format!("missing metric {}", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))),
                stderr_tail: secret_free_tail(&outcome.stderr, &plan.env),
                stdout_tail: secret_free_tail(&outcome.stdout, &plan.env),
            });
        }
        out.push(row);
    }
    Ok(out)
}

/// Rows from a parse of a file that is already there (`katlas parse --rows`):
/// one per phase (or one `run` row), origin `parse`, no process identity.
pub fn rows_from_output(workload: &str, mut parsed: ParseOutput, ops: &OpRules, file: &str) -> Vec<Row> {
    let phases: Vec<String> = if parsed.phases.is_empty() { vec!["run".into()] } else { parsed.phases.iter().map(|p| p.phase.clone()).collect() };
    let mut out = Vec::new();
    for phase in phases {
        let mut row = Row::new(workload, phase.clone());
        row.metrics = parsed.metrics.clone();
        if let Some(t) = parsed.phases.iter_mut().find(|p| p.phase == phase) {
            let mut t = std::mem::take(t);
            row.metrics.extend(t.metrics.clone());
            ops.classify_all(&mut t.kernels);
            if let Some(tot) = t.reported_total_us {
                row.artifacts.insert("reported_total_us".into(), json!(tot));
            }
            row.kernels = t.kernels;
        }
        row.arch = parsed.route.get("arch").and_then(Value::as_str).map(str::to_string);
        row.artifacts.extend(parsed.artifacts.clone());
        if !parsed.tags.is_empty() {
            row.artifacts.insert("tags".into(), json!(parsed.tags));
        }
        if !row.kernels.is_empty() || !parsed.route.is_empty() {
            row.route = Some(Route {
                basis: if row.kernels.is_empty() { "reported" } else { "observed" }.into(),
                attributes: parsed.route.clone().into_iter().collect(),
                kernels_seen: row.kernels.iter().map(|k| k.name.clone()).collect(),
                env_requested: BTreeMap::new(),
            });
        }
        row.origin =
            Some(Origin { kind: "parse".into(), schema: None, file: Some(file.into()), line: None, run_dir: None, parsers: vec![parsed.parser.clone()] });
        out.push(row);
    }
    out
}

/// Rows the workload printed itself, stamped with this run's identity,
/// command, pass and origin. Their own params, knobs, devices and sampling
/// policy are kept (the process was fresh; the samples inside it were not).
#[allow(clippy::too_many_arguments)]
fn embedded_rows(
    s: &spec::WorkloadSpec,
    opts: &CollectOptions,
    plan: &Plan,
    identity: &Identity,
    argv: &[String],
    outcome: &RunOutcome,
    parsed: ParseOutput,
    pass: &str,
    run_index: u32,
    rel_run_dir: &str,
    spec_source: &str,
    knobs: &BTreeMap<String, String>,
) -> Vec<Row> {
    let mut out = Vec::new();
    for mut row in parsed.rows {
        // A fresh id per stored row; the workload's own id is kept beside it.
        row.extra.insert("source_row_id".into(), json!(row.id));
        row.id = katlas_model::row::new_id();
        let theirs = std::mem::take(&mut row.identity);
        row.identity = identity.clone();
        if row.identity.devices.is_empty() {
            row.identity.devices = theirs.devices;
        }
        for (k, v) in theirs.toolkits {
            row.identity.toolkits.entry(k).or_insert(v);
        }
        if let Some(mut p) = theirs.policy {
            p.fresh_process = true;
            row.identity.policy = Some(p);
        }
        if row.arch.is_none() {
            row.arch = row.identity.arch().map(str::to_string);
        }
        row.run_index = run_index;
        row.pass = pass.into();
        row.command = katlas_identity::redact_argv(argv);
        for (k, v) in plan.vars.iter().filter(|(k, _)| !spec::BUILTIN_VARS.contains(&k.as_str())) {
            row.params.entry(k.clone()).or_insert_with(|| v.clone());
        }
        row.variant.env = katlas_identity::redact_env(&plan.env);
        row.variant.instrumentation = plan.instrumentation.clone();
        for (k, v) in knobs {
            row.variant.knobs.entry(k.clone()).or_insert_with(|| v.clone());
        }
        opts.ops.classify_all(&mut row.kernels);
        // A profiler run beside the rows (e.g. ncu under --profile): join its kernels by name.
        for k in &mut row.kernels {
            let Some(p) = parsed.phases.iter().flat_map(|t| t.kernels.iter()).find(|p| p.name == k.name || p.demangled.as_deref() == Some(k.name.as_str()))
            else {
                continue;
            };
            k.counters.extend(p.counters.clone());
            k.grid = k.grid.or(p.grid);
            k.block = k.block.or(p.block);
            k.registers = k.registers.or(p.registers);
            k.shared_bytes = k.shared_bytes.or(p.shared_bytes);
            k.extra.insert("profiler_calls".into(), json!(p.calls));
            k.extra.insert("profiler_total_us".into(), json!(p.total_us));
            if let Some(g) = p.achieved_gbps {
                k.extra.insert("profiler_dram_gbps".into(), json!(g));
            }
        }
        if !row.kernels.is_empty() {
            let route = row.route.get_or_insert_with(|| Route { basis: "observed".into(), ..Default::default() });
            if route.kernels_seen.is_empty() {
                route.kernels_seen = row.kernels.iter().map(|k| k.name.clone()).collect();
            }
            route.env_requested = katlas_identity::redact_env(&plan.env);
        }
        row.origin = Some(Origin {
            kind: "collect".into(),
            schema: None,
            file: Some(spec_source.into()),
            line: None,
            run_dir: Some(rel_run_dir.into()),
            parsers: plan.parsers.iter().map(|p| p.name.clone()).collect(),
        });
        row.artifacts.insert("wall_s".into(), json!(outcome.wall_s));
        let missing: Vec<&String> = s.required.for_phase(&row.phase).iter().filter(|k| !row.metrics.contains_key(*k)).collect();
        if !missing.is_empty() && row.status == Status::Ok {
            row.status = Status::Error;
            row.error = Some(RunError {
                exit_code: outcome.exit_code,
                message: Some(format!("missing metric {}", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))),
                ..Default::default()
            });
        }
        out.push(row);
    }
    out
}

impl katlas_fs::class::Classify for CollectError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            CollectError::Io { source, .. } => katlas_fs::class::Classify::class(source),
            CollectError::Store(e) => katlas_fs::class::Classify::class(e),
            CollectError::Spec(e) => katlas_fs::class::Classify::class(e),
            CollectError::Template(_) => katlas_fs::class::Class::Input,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_read_as_one_text_with_lines_named_by_file() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, tmp) = (d.path().join("stdout"), d.path().join("stderr"), d.path().join(".parse-input"));
        let both = [a.clone(), b.clone()];
        let o = ParserOptions::default();
        // stdout without a final newline: its last line must not join stderr's first.
        std::fs::write(&a, "tok_s=1\nlat_ms: 2").unwrap();
        std::fs::write(&b, "x=3\nSUMMARY  gen_tok_s=oops\n").unwrap();
        let kv = parse_outputs("kv", &both, &o, &tmp).unwrap();
        assert_eq!((kv.metric("tok_s"), kv.metric("lat_ms"), kv.metric("x")), (Some(1.0), Some(2.0), Some(3.0)));
        assert!(!tmp.exists(), "scratch copy removed");
        let e = parse_outputs("hipfire-bench", &both, &o, &tmp).unwrap_err();
        assert_eq!((e.source.as_str(), e.line), (b.display().to_string().as_str(), Some(2)), "{e}");
        std::fs::write(&b, "=== DECODE PROFILE (1 launches, 1.0ms wall) ===\n  garbage\n").unwrap();
        let w = parse_outputs("hipfire-bench", &both, &o, &tmp).unwrap().warnings;
        assert_eq!(w[0], format!("{}:2: not a profile row: \"garbage\"", b.display()), "{w:?}");
        assert_eq!(w[1], format!("{} + {}: no SUMMARY line", a.display(), b.display()), "{w:?}");
        // One empty output: the other is read as it is.
        std::fs::write(&a, "").unwrap();
        let w = parse_outputs("hipfire-bench", &both, &o, &tmp).unwrap().warnings;
        assert!(w[0].starts_with(&format!("{}:2:", b.display())), "{w:?}");
    }
}
