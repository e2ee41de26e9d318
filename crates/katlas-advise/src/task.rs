//! Task packets: `task.json` (`katlas.task.v1`) and `TASK.md` for one experiment.

use crate::expr::{fmt_num, Val};
use crate::fit::{FitView, KernelFit};
use crate::suggest::{eval_contract, KernelProvenance, Suggestion};
use crate::Rules;
use katlas_model::ledger::Goal;
use katlas_model::task::{Bench, CorrectnessRoute, OpSpec, Task, TaskBaseline, TaskEvidence, TaskOrigin, TaskPackage, TaskTarget, TASK_SCHEMA};
use katlas_model::Row;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the user adds on the command line or in `[task]` of katlas.toml.
#[derive(Debug, Clone, Default)]
pub struct TaskExtras {
    pub build: Option<Vec<String>>,
    pub correctness: Vec<CorrectnessRoute>,
    /// Files added to the allowed list.
    pub allow: Vec<String>,
    /// Override of the benchmark command (`--bench`).
    pub bench: Option<Vec<String>>,
    pub metric: Option<String>,
    pub goal: Option<Goal>,
    pub parser: Option<String>,
    /// Commit of the project at task time.
    pub git_ref: Option<String>,
}

fn new_task_id(stem: &str) -> String {
    let stem: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let stem: String = stem.chars().take(40).collect();
    let date: String = katlas_model::row::now_rfc3339().chars().take(10).filter(|c| c.is_ascii_digit()).collect();
    format!("{date}-{stem}-{}", &katlas_model::row::new_id()[..6])
}

fn default_constraints() -> Vec<String> {
    vec![
        "One hypothesis, one lever, one commit: change nothing the hypothesis does not need.".into(),
        "Edit only the allowed files; a diff outside them makes the eval invalid.".into(),
        "Inspect the ISA before and after (`katlas isa scan` + `katlas fit --isa`): registers, spills, occupancy, instruction mix.".into(),
        "Run the correctness route before believing any speed number; SKIP is not PASS.".into(),
        "Record the verdict whatever it is: rejections go to the ledger too.".into(),
    ]
}

fn profile_numbers(k: &KernelFit) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for key in ["share_pct", "calls", "avg_us", "total_us", "bw_gbps", "bw_pct", "bw_peak_gbps", "launch_waves_per_simd", "tflops", "compute_pct"] {
        if let Some(Val::Num(n)) = k.signals.get(key) {
            m.insert(key.to_string(), *n);
        }
    }
    m
}

fn isa_numbers(k: &KernelFit) -> BTreeMap<String, serde_json::Value> {
    let mut m = BTreeMap::new();
    if let Some(i) = &k.isa {
        m.insert("isa_kernel".into(), serde_json::json!(i.kernel));
        m.insert("object".into(), serde_json::json!(i.object));
        m.insert("match".into(), serde_json::json!(i.how));
        for (key, v) in [("vgpr", i.vgpr), ("sgpr", i.sgpr), ("agpr", i.agpr), ("wave_size", i.wave_size)] {
            if let Some(v) = v {
                m.insert(key.into(), serde_json::json!(v));
            }
        }
        if let Some(s) = i.spills {
            m.insert("spills".into(), serde_json::json!(s));
        }
        if let Some(l) = i.lds_bytes {
            m.insert("lds_bytes".into(), serde_json::json!(l));
        }
        if let Some(l) = i.scratch_bytes {
            m.insert("scratch_bytes".into(), serde_json::json!(l));
        }
    }
    if let Some(o) = &k.occupancy {
        m.insert("occupancy".into(), serde_json::json!(format!("{}/{} {}", o.achieved, o.max, o.unit)));
        m.insert("occupancy_limiter".into(), serde_json::json!(o.limiter));
    }
    if let Some(n) = k.matrix.used_ops {
        m.insert("matrix_ops".into(), serde_json::json!(n));
    }
    m
}

fn target_of(fit: &FitView) -> TaskTarget {
    let h = &fit.header;
    TaskTarget {
        arch: h.arch.clone(),
        arch_class: h.arch_class.clone(),
        product: h.product.clone(),
        workload: h.workload.clone(),
        phase: h.phase.clone(),
        shape: h.shape.clone(),
        quant: h.quant.clone(),
    }
}

fn baseline_of(row: Option<&Row>, rules: &Rules, extras: &TaskExtras) -> (TaskBaseline, Bench) {
    let c = eval_contract(row, rules);
    let baseline = TaskBaseline {
        git_ref: extras.git_ref.clone(),
        row_id: row.map(|r| r.id.clone()),
        metrics: row.map(|r| r.metrics.iter().map(|(k, m)| (k.clone(), m.value)).collect()).unwrap_or_default(),
        identity: row.map(|r| r.identity.clone()).unwrap_or_default(),
        fresh_required: c.fresh_baseline_required,
        fresh_why: c.fresh_baseline_why.clone(),
    };
    let goal = extras.goal.unwrap_or(c.goal);
    let bench = Bench {
        command: extras.bench.clone().unwrap_or(c.command),
        env: c.env,
        stripped_env: c.stripped_env,
        stripped_args: c.stripped_args,
        metric: extras.metric.clone().or(c.metric).unwrap_or_default(),
        goal,
        parser: extras.parser.clone().or(c.parser),
    };
    (baseline, bench)
}

fn finish(mut t: Task, extras: &TaskExtras) -> Task {
    for f in &extras.allow {
        if !t.allowed_files.contains(f) {
            t.allowed_files.push(f.clone());
        }
    }
    t.build = extras.build.clone();
    t.correctness = extras.correctness.clone();
    t.next = format!("katlas eval {}", t.id);
    t
}

pub fn from_suggestion(fit: &FitView, row: Option<&Row>, s: &Suggestion, rules: &Rules, prov: Option<&KernelProvenance>, extras: &TaskExtras) -> Task {
    let k = s.kernel.as_ref().and_then(|n| fit.kernels.iter().find(|k| &k.name == n));
    let (baseline, bench) = baseline_of(row, rules, extras);
    let metric = if bench.metric.is_empty() { "the benchmark metric".to_string() } else { bench.metric.clone() };
    let objective = match &s.kernel {
        Some(kn) => format!(
            "Improve {metric} on {} by applying one lever ({}) to {}{}.",
            fit.header.arch.as_deref().unwrap_or("this GPU"),
            s.lever_name,
            crate::names::display_name(kn),
            s.share_pct.map(|p| format!(", {}% of {} time", fmt_num(p, Some(1)), fit.header.phase.as_deref().unwrap_or("phase"))).unwrap_or_default()
        ),
        None => format!("Improve {metric} by applying one lever ({}) across the phase.", s.lever_name),
    };
    let t = Task {
        schema: TASK_SCHEMA.into(),
        id: new_task_id(&format!("{}-{}", s.lever, s.kernel.as_deref().unwrap_or("phase"))),
        created_at: katlas_model::row::now_rfc3339(),
        origin: TaskOrigin {
            kind: "suggestion".into(),
            suggestion_id: Some(s.id.clone()),
            rank: Some(s.rank as u32),
            row_id: fit.header.row_id.clone(),
            row_source: fit.header.row_source.clone(),
        },
        objective,
        hypothesis: s.hypothesis.clone(),
        lever: Some(s.lever.clone()),
        kernel: s.kernel.clone(),
        target: target_of(fit),
        op: None,
        evidence: TaskEvidence {
            fit: s.evidence.clone(),
            rules: s.fit_rules.clone(),
            profile: k.map(profile_numbers).unwrap_or_default(),
            sources: prov.map(|p| p.sources.clone()).unwrap_or_default(),
            dispatch_refs: prov.map(|p| p.dispatch_refs.clone()).unwrap_or_default(),
            isa: k.map(isa_numbers).unwrap_or_default(),
            prior: s
                .history
                .as_ref()
                .map(|h| h.attempts.iter().map(|a| format!("{} {}: {} ({})", a.ledger_id, a.recorded_at, a.verdict, a.note)).collect())
                .unwrap_or_default(),
            missing: fit.evidence.missing.iter().map(|m| m.evidence.clone()).collect(),
        },
        baseline,
        allowed_files: s.allowed_files.clone(),
        build: None,
        bench,
        correctness: vec![],
        constraints: {
            let mut c = default_constraints();
            c.extend(s.null_results.iter().map(|n| format!("Known null result of this lever: {n}.")));
            c
        },
        next: String::new(),
        package: None,
    };
    finish(t, extras)
}

/// A task on a row's hottest live kernel (or `kernel`), without a lever.
pub fn from_row(
    fit: &FitView,
    row: &Row,
    kernel: Option<&str>,
    rules: &Rules,
    prov: &[KernelProvenance],
    extras: &TaskExtras,
) -> Result<Task, crate::AdviseError> {
    let k = match kernel {
        Some(n) => fit.kernels.iter().find(|k| k.name == n).ok_or_else(|| {
            crate::AdviseError::Usage(format!(
                "--kernel `{n}`: not among the row's hot kernels ({})",
                fit.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })?,
        None => fit.kernels.first().ok_or_else(|| crate::AdviseError::Usage("the row has no kernels: nothing to target".into()))?,
    };
    let p = prov.iter().find(|p| p.kernel == k.name);
    let (baseline, bench) = baseline_of(Some(row), rules, extras);
    let fit_lines: Vec<String> = k.findings.iter().map(|f| format!("[{}] {}", f.rule, f.text)).collect();
    let t = Task {
        schema: TASK_SCHEMA.into(),
        id: new_task_id(&k.name),
        created_at: katlas_model::row::now_rfc3339(),
        origin: TaskOrigin { kind: "row".into(), row_id: Some(row.id.clone()), row_source: fit.header.row_source.clone(), ..Default::default() },
        objective: format!(
            "Make {} faster on {} ({} of {} time).",
            k.name,
            fit.header.arch.as_deref().unwrap_or("this GPU"),
            k.share_pct.map(|s| format!("{}%", fmt_num(s, Some(1)))).unwrap_or_else(|| "unknown share".into()),
            row.phase
        ),
        hypothesis: format!(
            "On {}/{}/{}, <lever> should improve {} because <mechanism>; risk is <risk>.",
            fit.header.arch.as_deref().unwrap_or("?"),
            k.name,
            row.phase,
            if bench.metric.is_empty() { "<metric>" } else { bench.metric.as_str() }
        ),
        lever: None,
        kernel: Some(k.name.clone()),
        target: target_of(fit),
        op: None,
        evidence: TaskEvidence {
            fit: fit_lines,
            rules: k.findings.iter().map(|f| f.rule.clone()).collect(),
            profile: profile_numbers(k),
            sources: p.map(|p| p.sources.clone()).unwrap_or_default(),
            dispatch_refs: p.map(|p| p.dispatch_refs.clone()).unwrap_or_default(),
            isa: isa_numbers(k),
            prior: vec![],
            missing: fit.evidence.missing.iter().map(|m| m.evidence.clone()).collect(),
        },
        baseline,
        allowed_files: p.map(|p| p.sources.clone()).unwrap_or_default(),
        build: None,
        bench,
        correctness: vec![],
        constraints: default_constraints(),
        next: String::new(),
        package: None,
    };
    Ok(finish(t, extras))
}

/// A task for one PyTorch-style op.
pub fn from_op(op: OpSpec, eval_command: Vec<String>, metric: String, extras: &TaskExtras) -> Task {
    let t = Task {
        schema: TASK_SCHEMA.into(),
        id: new_task_id(&op.name),
        created_at: katlas_model::row::now_rfc3339(),
        origin: TaskOrigin { kind: "op".into(), ..Default::default() },
        objective: format!(
            "Make {} ({}) faster for inputs {}{}.",
            op.name,
            op.op,
            op.shapes.iter().map(|s| format!("[{s}]")).collect::<Vec<_>>().join(" x "),
            op.dtype.as_deref().map(|d| format!(" in {d}")).unwrap_or_default()
        ),
        hypothesis: format!(
            "On this GPU, {} for shapes {}: <lever> should improve {metric} because <mechanism>; risk is <risk>.",
            op.op,
            op.shapes.join(" / ")
        ),
        lever: None,
        kernel: None,
        target: TaskTarget { shape: Some(op.shapes.join(";")), ..Default::default() },
        op: Some(op),
        evidence: TaskEvidence {
            missing: vec!["a profile of the op (`katlas collect` or `katlas fit --parse torch-trace FILE`)".into()],
            ..Default::default()
        },
        baseline: TaskBaseline {
            git_ref: extras.git_ref.clone(),
            fresh_required: true,
            fresh_why: vec!["no baseline measured yet".into()],
            ..Default::default()
        },
        allowed_files: vec![],
        build: None,
        bench: Bench { command: eval_command, metric, goal: extras.goal.unwrap_or(Goal::Minimize), parser: extras.parser.clone(), ..Default::default() },
        correctness: vec![],
        constraints: default_constraints(),
        next: String::new(),
        package: None,
    };
    finish(t, extras)
}

/// Point `t` at a package copy inside the project: the kernel's file is the one allowed file
/// (beside `--allow`), every side imports its own tree's copy through `pythonpath` (relative:
/// each side runs in its own tree), and `tests` (the library's own tests) become routes.
pub fn with_package(mut t: Task, package: TaskPackage, pythonpath: &str, tests: Vec<CorrectnessRoute>, extras: &TaskExtras) -> Task {
    t.allowed_files = package.kernel_file.iter().cloned().collect();
    for f in &extras.allow {
        if !t.allowed_files.contains(f) {
            t.allowed_files.push(f.clone());
        }
    }
    let path = match t.bench.env.get("PYTHONPATH").filter(|p| !p.is_empty()) {
        Some(old) if old.split(':').any(|e| e == pythonpath) => old.clone(),
        Some(old) => format!("{pythonpath}:{old}"),
        None => pythonpath.to_string(),
    };
    t.bench.env.insert("PYTHONPATH".into(), path);
    // Bytecode written into the baseline's worktree would read as a write to the baseline
    // (eval's tamper check), and a stale .pyc could shadow an edit.
    t.bench.env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    t.correctness.extend(tests);
    t.package = Some(package);
    t
}

fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
}

pub fn task_markdown(t: &Task) -> String {
    let mut o = String::new();
    let push = |o: &mut String, s: String| {
        o.push_str(&s);
        o.push('\n');
    };
    push(&mut o, format!("# Task {}\n", t.id));
    push(
        &mut o,
        format!(
            "`{}` · created {} · from {}{}\n",
            t.schema,
            t.created_at,
            t.origin.kind,
            t.origin.suggestion_id.as_deref().map(|s| format!(" {s} (rank {})", t.origin.rank.unwrap_or(0))).unwrap_or_default()
        ),
    );
    push(&mut o, "## Objective\n".into());
    push(&mut o, format!("{}\n", t.objective));
    push(&mut o, "## Hypothesis\n".into());
    push(&mut o, format!("{}\n", t.hypothesis));
    push(&mut o, "## Target\n".into());
    let tg = &t.target;
    for (k, v) in [
        ("arch", &tg.arch),
        ("class", &tg.arch_class),
        ("product", &tg.product),
        ("workload", &tg.workload),
        ("phase", &tg.phase),
        ("shape", &tg.shape),
        ("quant", &tg.quant),
    ] {
        if let Some(v) = v {
            push(&mut o, format!("- {k}: {v}"));
        }
    }
    if let Some(l) = &t.lever {
        push(&mut o, format!("- lever: `{l}`"));
    }
    if let Some(k) = &t.kernel {
        push(&mut o, format!("- kernel: `{k}`"));
    }
    if let Some(op) = &t.op {
        push(
            &mut o,
            format!(
                "- op: {} (`{}`), inputs {}, dtype {}",
                op.name,
                op.op,
                op.shapes.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
                op.dtype.as_deref().unwrap_or("-")
            ),
        );
    }
    push(&mut o, "\n## Evidence\n".into());
    for l in &t.evidence.fit {
        push(&mut o, format!("- {l}"));
    }
    if !t.evidence.profile.is_empty() {
        push(
            &mut o,
            format!(
                "- profile: {}",
                t.evidence
                    .profile
                    .iter()
                    .map(|(k, v)| format!("{k}={}", fmt_num(*v, if v.fract() == 0.0 { None } else { Some(2) })))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if !t.evidence.isa.is_empty() {
        push(
            &mut o,
            format!(
                "- baseline ISA: {}",
                t.evidence
                    .isa
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if !t.evidence.sources.is_empty() {
        push(&mut o, format!("- sources (ranked): {}", t.evidence.sources.join(", ")));
    }
    if !t.evidence.dispatch_refs.is_empty() {
        push(&mut o, format!("- dispatch refs: {}", t.evidence.dispatch_refs.join(", ")));
    }
    for p in &t.evidence.prior {
        push(&mut o, format!("- prior: {p}"));
    }
    for m in &t.evidence.missing {
        push(&mut o, format!("- missing: {m}"));
    }
    push(&mut o, "\n## Baseline\n".into());
    if !t.baseline.metrics.is_empty() {
        push(&mut o, format!("- numbers: {}", t.baseline.metrics.iter().map(|(k, v)| format!("{k}={}", fmt_num(*v, None))).collect::<Vec<_>>().join(", ")));
    }
    let id = &t.baseline.identity;
    if let Some(c) = id.source.commit.as_deref().or(id.source.commit_short.as_deref()) {
        push(&mut o, format!("- source: {c}{}", if id.source.dirty == Some(true) { " (dirty)" } else { "" }));
    }
    if let Some(b) = &id.binary {
        push(&mut o, format!("- binary: {} md5 {}", b.path.as_deref().unwrap_or("-"), b.md5.as_deref().unwrap_or("-")));
    }
    for d in &id.devices {
        push(&mut o, format!("- device: {} {}", d.product.as_deref().unwrap_or(&d.vendor), d.arch.as_deref().unwrap_or("")));
    }
    if let Some(r) = &t.baseline.git_ref {
        push(&mut o, format!("- baseline ref: {r}"));
    }
    if let Some(r) = &t.baseline.row_id {
        push(&mut o, format!("- row: {r}"));
    }
    push(
        &mut o,
        format!(
            "- fresh baseline required: {}{}",
            if t.baseline.fresh_required { "yes" } else { "no" },
            if t.baseline.fresh_why.is_empty() { String::new() } else { format!(" ({})", t.baseline.fresh_why.join("; ")) }
        ),
    );
    push(&mut o, "\n## Allowed files\n".into());
    if t.allowed_files.is_empty() {
        push(&mut o, "- (none known: add with `katlas task … --allow PATH`; eval treats an empty list as unrestricted)".into());
    }
    for f in &t.allowed_files {
        push(&mut o, format!("- `{f}`"));
    }
    if let Some(p) = &t.package {
        push(&mut o, "\n## Package\n".into());
        push(
            &mut o,
            format!(
                "- `{}`{} from {}: {} `{}` (each side imports its own tree's copy through PYTHONPATH; eval gives each side its own Triton cache)",
                p.import_name,
                p.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
                p.source_dir,
                if p.editable { "editable checkout" } else { "copy" },
                p.copy
            ),
        );
        if let Some(f) = &p.kernel_file {
            push(
                &mut o,
                format!("- kernel `{}`: `{f}`{}", t.kernel.as_deref().unwrap_or("?"), p.kernel_line.map(|l| format!(" line {l}")).unwrap_or_default()),
            );
        }
    }
    push(&mut o, "\n## Build\n".into());
    match &t.build {
        Some(b) => push(&mut o, format!("```sh\n{}\n```", b.join(" "))),
        None => push(&mut o, "- none given (add `--build CMD` or `[task] build` in katlas.toml)".into()),
    }
    push(&mut o, "\n## Benchmark\n".into());
    let env: Vec<String> = t.bench.env.iter().map(|(k, v)| format!("{k}={}", shell_word(v))).collect();
    push(&mut o, format!("```sh\n{}{}\n```", if env.is_empty() { String::new() } else { format!("{} ", env.join(" ")) }, shell_line(&t.bench.command)));
    push(&mut o, format!("- metric: `{}` ({})", if t.bench.metric.is_empty() { "-" } else { &t.bench.metric }, t.bench.goal));
    if !t.bench.stripped_env.is_empty() || !t.bench.stripped_args.is_empty() {
        let mut what = Vec::new();
        if !t.bench.stripped_env.is_empty() {
            what.push(format!("env {}", t.bench.stripped_env.join(", ")));
        }
        if !t.bench.stripped_args.is_empty() {
            what.push(format!("arguments `{}`", t.bench.stripped_args.join(" ")));
        }
        push(
            &mut o,
            format!("- instrumentation stripped ({}): the row was profiled, so its numbers are no baseline; eval measures a fresh one", what.join("; ")),
        );
    }
    push(&mut o, "\n## Correctness\n".into());
    if t.correctness.is_empty() {
        push(&mut o, "- none given: add `--correctness CMD` (or routes in katlas.toml); no speed claim without one".into());
    }
    for c in &t.correctness {
        push(&mut o, format!("- {}: `{}`", c.claim, c.command));
    }
    push(&mut o, "\n## Constraints\n".into());
    for c in &t.constraints {
        push(&mut o, format!("- {c}"));
    }
    push(&mut o, "\n## Next\n".into());
    push(&mut o, format!("```sh\n{}\n```", t.next));
    // Kernel, workload and command text comes from rows and repositories: TASK.md is read
    // with `cat` too, so no control character (ESC, OSC, CR, bidi) goes in raw.
    katlas_model::text::printable_lines(&o).into_owned()
}

/// Write `<tasks_dir>/<id>/task.json` and `TASK.md`; returns the directory.
pub fn write_task(tasks_dir: &Path, t: &Task) -> Result<PathBuf, crate::AdviseError> {
    let dir = tasks_dir.join(&t.id);
    let json = serde_json::to_string_pretty(t).map_err(|e| crate::AdviseError::Usage(e.to_string()))? + "\n";
    let p = dir.join("task.json");
    katlas_fs::write_atomic(&p, json.as_bytes()).map_err(|e| crate::AdviseError::io(&p, e))?;
    let p = dir.join("TASK.md");
    katlas_fs::write_atomic(&p, task_markdown(t).as_bytes()).map_err(|e| crate::AdviseError::io(&p, e))?;
    Ok(dir)
}
