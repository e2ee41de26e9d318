//! Ranked one-lever experiments from a fit view, the lever catalog and the ledger.

mod triton;

use crate::expr::{eval_all, fmt_num, render_template, Facts, Lookup, Signals, Val};
use crate::fit::{Finding, FitView, KernelFit};
use crate::history::HistoryStatus;
use crate::history::{judge, Ledger, SuggestionHistory, Target};
use crate::rules::{FindingKind, Lever, LeverScope, Magnitude, Rules};
use katlas_arch::ArchDb;
use katlas_model::ledger::Goal;
use katlas_model::{other_phase_metric, OpClass, PhaseKind, Row};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SuggestionQueue {
    /// Always `katlas.suggestions.v1`.
    pub schema: String,
    pub created_at: String,
    pub target: Target,
    /// The fit read the queue is built on.
    pub fit_read: FitRead,
    pub history: HistorySummary,
    /// Hot kernels left out because they cannot pay off (Amdahl).
    pub stopped: Vec<String>,
    pub suggestions: Vec<Suggestion>,
    /// Evidence that would sharpen the queue.
    pub missing_evidence: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FitRead {
    pub likely_limit: Option<String>,
    pub likely_limit_rules: Vec<String>,
    pub left_on_table: Vec<String>,
    #[serde(default)]
    pub quant_question: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct HistorySummary {
    pub ledger: Option<String>,
    pub entries: usize,
    /// Entries that matched some suggestion's target.
    pub matched: usize,
    pub demoted: usize,
    pub restored: usize,
    /// Unreadable ledger lines (`file:line: reason`); good lines beside them are used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Suggestion {
    /// Stable id: the same lever on the same target gets the same id.
    pub id: String,
    pub rank: usize,
    pub score: f64,
    pub score_before_history: f64,
    /// Lever id from the catalog (`multirow_gemv`, `fusion` …).
    pub lever: String,
    pub lever_name: String,
    pub title: String,
    /// Hot kernel; `null` for a row-wide lever (graph capture).
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OpClass>,
    pub share_pct: Option<f64>,
    /// Fit signals that triggered the lever.
    pub triggers: Vec<String>,
    /// Fit rules behind the triggers.
    pub fit_rules: Vec<String>,
    /// Rationale quoting the fit numbers.
    pub evidence: Vec<String>,
    /// Score multipliers applied (`mem_sol x0.5`).
    pub adjustments: Vec<String>,
    pub risk: String,
    pub expected_impact: String,
    pub magnitude: Magnitude,
    pub null_results: Vec<String>,
    pub candidate_steps: Vec<String>,
    pub allowed_files: Vec<String>,
    /// `dispatch provenance`, `none known`.
    pub allowed_files_source: String,
    pub eval: EvalContract,
    pub hypothesis: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<SuggestionHistory>,
    /// Legality conditions that could not be checked (unknown signals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub legality_unknown: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvalContract {
    /// Metric to judge (`gen_tok_s`); `null` when the row has none (profile-only evidence).
    pub metric: Option<String>,
    /// `maximize` or `minimize`.
    #[schemars(with = "String")]
    pub goal: Goal,
    /// Benchmark argv (the row's command).
    pub command: Vec<String>,
    /// Output parser that reads the metric from a run (`hipfire-bench`, `kv` …), when the row says.
    #[serde(default)]
    pub parser: Option<String>,
    /// Benchmark env with instrumentation switches stripped.
    pub env: BTreeMap<String, String>,
    pub stripped_env: Vec<String>,
    /// Profiler arguments and wrapper words removed from the row's command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stripped_args: Vec<String>,
    pub fresh_baseline_required: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fresh_baseline_why: Vec<String>,
}

/// Dispatch provenance of one kernel: where its source lives and who launches it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct KernelProvenance {
    pub kernel: String,
    /// Source files, best first.
    pub sources: Vec<String>,
    /// `path:line` of dispatch sites.
    pub dispatch_refs: Vec<String>,
    pub env_controls: Vec<String>,
}

pub struct SuggestOptions<'a> {
    pub ledger: Option<&'a Ledger>,
    pub provenance: &'a [KernelProvenance],
    pub max: Option<usize>,
}

fn matches_pattern(name: &str, pat: &str) -> bool {
    match pat.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pat,
    }
}

/// The metric an eval of this row should judge and its goal: the row's phase's rate
/// (`prefill_tok_s` for prefill, `gen_tok_s` for decode), what the name says, else its unit
/// (`Goal::infer_with_unit`, the guess eval and gates make too); never another phase's number.
/// A row measured on the CPU is judged by its process CPU time (`cpu_min_us`, the lab's CPU
/// backend), which does not grow while other processes hold the cores, as wall time and the
/// bandwidth computed from it do.
pub fn preferred_metric(row: &Row) -> Option<(String, Goal)> {
    let goal = |k: &str| Goal::infer_with_unit(k, row.metrics.get(k).and_then(|m| m.unit.as_deref())).unwrap_or_default();
    if crate::fit::measured_on_cpu(row) {
        if let Some(k) = ["cpu_min_us", "cpu_median_us"].into_iter().find(|k| row.metrics.contains_key(*k)) {
            return Some((k.to_string(), Goal::Minimize));
        }
    }
    let rates: &[&str] = match PhaseKind::of(&row.phase) {
        PhaseKind::Prefill => &["prefill_tok_s", "tok_s", "tokens_per_s"],
        PhaseKind::Decode => &["gen_tok_s", "decode_tok_s", "tok_s", "tokens_per_s"],
        PhaseKind::Other => &["gen_tok_s", "decode_tok_s", "prefill_tok_s", "tok_s", "tokens_per_s"],
    };
    for k in rates {
        if row.metrics.contains_key(*k) {
            return Some((k.to_string(), goal(k)));
        }
    }
    // A trace's timeline: the step time is what graphs, compilation and fewer launches shorten;
    // the other timeline numbers (gaps, busy time) describe it and are no metric of their own.
    if row.metrics.contains_key("step_us") {
        return Some(("step_us".into(), goal("step_us")));
    }
    let timeline = crate::signals::is_timeline_metric;
    let by_unit =
        |u: &str| row.metrics.iter().find(|(k, m)| m.unit.as_deref() == Some(u) && !timeline(k) && !other_phase_metric(&row.phase, k)).map(|(k, _)| k.clone());
    if let Some(k) = by_unit("tok/s").or_else(|| by_unit("GB/s")).or_else(|| by_unit("GiB/s")) {
        return Some((k.clone(), Goal::infer_with_unit(&k, row.metrics[&k].unit.as_deref()).unwrap_or(Goal::Maximize)));
    }
    if let Some(k) = by_unit("ms").or_else(|| by_unit("us")) {
        return Some((k.clone(), Goal::infer_with_unit(&k, row.metrics[&k].unit.as_deref()).unwrap_or(Goal::Minimize)));
    }
    None
}

/// Words of `profiled` that `plain` does not have (a `sh -c` string compared word by word).
fn stripped_words(profiled: &[String], plain: &[String]) -> Vec<String> {
    let words = |v: &[String]| -> Vec<String> {
        match v {
            [sh, c, cmd] if sh == "sh" && c == "-c" => cmd.split_whitespace().map(str::to_string).collect(),
            _ => v.to_vec(),
        }
    };
    let keep = words(plain);
    let mut out = Vec::new();
    let mut j = 0;
    for w in words(profiled) {
        if j < keep.len() && keep[j] == w {
            j += 1;
        } else {
            out.push(w);
        }
    }
    out
}

pub fn eval_contract(row: Option<&Row>, rules: &Rules) -> EvalContract {
    let Some(r) = row else {
        return EvalContract {
            goal: Goal::Maximize,
            fresh_baseline_required: true,
            fresh_baseline_why: vec!["no row: nothing measured yet".into()],
            ..Default::default()
        };
    };
    let mut c = EvalContract { command: r.command.clone(), parser: row_parser(r), ..Default::default() };
    match preferred_metric(r) {
        Some((m, g)) => {
            c.metric = Some(m);
            c.goal = g;
        }
        None => {
            c.goal = Goal::Maximize;
            c.fresh_baseline_why.push("the row carries no run metric (profile-only evidence): measure one".into());
        }
    }
    if !r.variant.plain_command.is_empty() && r.variant.plain_command != r.command {
        c.stripped_args = stripped_words(&r.command, &r.variant.plain_command);
        c.command = r.variant.plain_command.clone();
        c.fresh_baseline_why
            .push(format!("the row ran under its profiler (`{}` stripped from the command): its numbers are not a baseline", c.stripped_args.join(" ")));
    }
    for (k, v) in &r.variant.env {
        let instr = r.variant.instrumentation.contains(k) || rules.levers.eval.instrumentation_env.iter().any(|p| matches_pattern(k, p));
        if instr {
            c.stripped_env.push(k.clone());
        } else {
            c.env.insert(k.clone(), v.clone());
        }
    }
    if !c.stripped_env.is_empty() {
        c.fresh_baseline_why.push(format!("the row ran with instrumentation on ({}): its numbers are not a baseline", c.stripped_env.join(", ")));
    }
    if r.identity.source.dirty == Some(true) {
        c.fresh_baseline_why.push("the row was captured from a dirty tree".into());
    }
    if r.command.is_empty() {
        c.fresh_baseline_why.push("the row records no command: set the benchmark command in the task".into());
    }
    c.fresh_baseline_required = !c.fresh_baseline_why.is_empty();
    c
}

/// The parser that produced the row's metrics: the collector's record, or hipfire's
/// bench/DFlash output for imported hipfire rows.
pub fn row_parser(r: &Row) -> Option<String> {
    let o = r.origin.as_ref()?;
    if let Some(p) = o.parsers.iter().find(|p| !matches!(p.as_str(), "ncu-csv" | "torch-trace") && !p.starts_with("rocprof")) {
        return Some(p.clone());
    }
    if o.schema.as_deref() == Some(katlas_model::hipfire::HIPFIRE_V0) {
        return Some(if r.workload_kind.as_deref() == Some("dflash") { "hipfire-dflash" } else { "hipfire-bench" }.into());
    }
    None
}

/// Provenance from a row's `artifacts.dispatch` (hipfire's dispatch manifest shape:
/// `entries[{name, source_files[{path}], dispatch_refs[{path,line}], env_controls}]`).
pub fn provenance_from_row(row: &Row) -> Vec<KernelProvenance> {
    let Some(entries) = row.artifacts.get("dispatch").and_then(|d| d.get("entries")).and_then(|e| e.as_array()) else {
        return vec![];
    };
    entries
        .iter()
        .filter_map(|e| {
            let kernel = e.get("name")?.as_str()?.to_string();
            let list = |key: &str, f: &dyn Fn(&serde_json::Value) -> Option<String>| -> Vec<String> {
                e.get(key).and_then(|v| v.as_array()).map(|a| a.iter().filter_map(f).collect()).unwrap_or_default()
            };
            Some(KernelProvenance {
                kernel,
                sources: list("source_files", &|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string)),
                dispatch_refs: list("dispatch_refs", &|v| {
                    let p = v.get("path")?.as_str()?;
                    Some(match v.get("line").and_then(|l| l.as_u64()) {
                        Some(l) => format!("{p}:{l}"),
                        None => p.to_string(),
                    })
                }),
                env_controls: list("env_controls", &|v| v.as_str().map(str::to_string)),
            })
        })
        .collect()
}

fn suggestion_id(lever: &str, kernel: &Option<String>, t: &Target) -> String {
    let key = format!(
        "{lever}|{}|{}|{}|{}|{}",
        kernel.as_deref().unwrap_or("-"),
        t.arch.as_deref().unwrap_or("-"),
        t.phase.as_deref().unwrap_or("-"),
        t.shape.as_deref().unwrap_or("-"),
        t.quant.as_deref().unwrap_or("-")
    );
    format!("sug-{}", &katlas_model::digest::md5_hex(key.as_bytes())[..12])
}

/// Trigger texts of `lever` whose every condition holds on `sig`.
fn held_triggers(lever: &Lever, sig: &Facts) -> Vec<String> {
    lever.triggers.iter().zip(&lever.trigger_conds).filter(|(_, c)| eval_all(c, sig).0 == Some(true)).map(|(t, _)| t.clone()).collect()
}

fn truthy(s: &Facts, name: &str) -> bool {
    s.flag(name) == Some(true)
}

/// Fit findings that emitted (or whose conditions use) one of `names`.
fn findings_for<'a>(k: &'a KernelFit, rules: &Rules, names: &[String]) -> Vec<&'a Finding> {
    k.findings.iter().filter(|f| rules.fit.rules.iter().find(|r| r.id == f.rule).map(|r| r.emits.iter().any(|e| names.contains(e))).unwrap_or(false)).collect()
}

fn profile_line(k: &KernelFit, phase: Option<&str>, cpu: bool) -> Option<String> {
    let share = k.share_pct?;
    let mut s = format!("{}: {}% of {} {} time", k.short_name, fmt_num(share, Some(1)), phase.unwrap_or("phase"), if cpu { "CPU" } else { "GPU" });
    if let (Some(c), Some(a)) = (k.calls, k.avg_us) {
        s.push_str(&format!(", {c} calls x {} us", fmt_num(a, Some(1))));
    }
    if let (Some(bw), Some(src)) = (k.throughput.bw_gbps, &k.throughput.bw_source) {
        s.push_str(&format!(", {} GB/s ({src})", fmt_num(bw, Some(1))));
        if let Some(p) = k.throughput.bw_pct_of_peak {
            s.push_str(&format!(" = {}% of peak", fmt_num(p, Some(1))));
        }
    }
    Some(s)
}

pub fn target_of(fit: &FitView) -> Target {
    Target {
        arch: fit.header.arch.clone(),
        arch_class: fit.header.arch_class.clone(),
        product: fit.header.product.clone(),
        workload: fit.header.workload.clone(),
        phase: fit.header.phase.clone(),
        shape: fit.header.shape.clone(),
        quant: fit.header.quant.clone(),
        row_id: fit.header.row_id.clone(),
    }
}

pub fn suggest(fit: &FitView, row: Option<&Row>, db: &ArchDb, rules: &Rules, opts: &SuggestOptions) -> SuggestionQueue {
    let target = target_of(fit);
    let contract = eval_contract(row, rules);
    let phase = fit.header.phase.as_deref();
    let mut out: Vec<Suggestion> = Vec::new();
    let mut stopped = Vec::new();
    let entries = opts.ledger.map(|l| l.entries.as_slice()).unwrap_or(&[]);
    let mut provenance: Vec<KernelProvenance> = opts.provenance.to_vec();
    if let Some(r) = row {
        provenance.extend(provenance_from_row(r));
    }

    let units = fit.header.product.as_deref().and_then(|p| db.product(p)).map(|p| p.units.value as f64);
    let live: Vec<&KernelFit> = fit
        .kernels
        .iter()
        .filter(|k| {
            let stop = k.stopped();
            if stop {
                stopped.push(k.short_name.clone());
            }
            !stop
        })
        .collect();

    for lever in &rules.levers.levers {
        if lever.scope == LeverScope::Kernel {
            for k in &live {
                let prov = provenance.iter().find(|p| p.kernel == k.name || crate::names::variant_base(&p.kernel) == crate::names::variant_base(&k.name));
                let mut sig = k.signals.clone();
                if prov.map(|p| !p.env_controls.is_empty()).unwrap_or(false) {
                    sig.insert("dispatch_knobs".into(), Val::Bool(true));
                }
                let sample = row.and_then(|r| r.kernels.iter().find(|x| x.name == k.name));
                let ctx = triton::Ctx { units, short_kernel_us: rules.levers.settings.short_kernel_us, flags: &k.emitted };
                triton::facts(k, sample, &ctx, &mut sig);
                let facts = Facts { values: &sig, flags: &k.emitted };
                if let Some(s) = build_one(lever, &[k], &facts, fit, rules, &target, &contract, prov, phase) {
                    out.push(s);
                }
            }
        } else {
            // Row-wide lever: every live kernel whose triggers hold contributes its share.
            let hit: Vec<&KernelFit> = live.iter().copied().filter(|k| !held_triggers(lever, &k.facts()).is_empty()).collect();
            if let Some(first) = hit.first() {
                if let Some(s) = build_one(lever, &hit, &first.facts(), fit, rules, &target, &contract, None, phase) {
                    out.push(s);
                }
            }
        }
    }

    // Memory.
    let mut summary = HistorySummary {
        ledger: opts.ledger.map(|l| l.path.clone()),
        entries: entries.len(),
        errors: opts.ledger.map(|l| l.errors.clone()).unwrap_or_default(),
        ..Default::default()
    };
    let mut matched_ids = std::collections::BTreeSet::new();
    for s in &mut out {
        let (none, no_flags) = (Signals::new(), std::collections::BTreeSet::new());
        let facts =
            s.kernel.as_ref().and_then(|n| fit.kernels.iter().find(|k| &k.name == n)).map(|k| k.facts()).unwrap_or(Facts { values: &none, flags: &no_flags });
        if let Some(h) = judge(db, &rules.levers.history, entries, &s.lever, &s.kernel, &target, &facts) {
            for a in &h.attempts {
                matched_ids.insert(a.ledger_id.clone());
            }
            match h.status {
                HistoryStatus::Demoted => summary.demoted += 1,
                HistoryStatus::Restored => summary.restored += 1,
                HistoryStatus::Seen => {}
            }
            s.score = (s.score_before_history - h.demotion).max(0.0);
            for a in &h.attempts {
                let mut line = format!("prior attempt {} ({}): verdict {}, {}", a.ledger_id, a.recorded_at, a.verdict, a.disposition);
                if let Some(g) = a.gain {
                    line.push_str(&format!(", gain {}%", fmt_num(100.0 * g, Some(2))));
                }
                line.push_str(&format!(" — {}", a.note));
                s.evidence.push(line);
            }
            s.history = Some(h);
        }
    }
    summary.matched = matched_ids.len();

    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.lever.cmp(&b.lever)).then(a.kernel.cmp(&b.kernel)));
    out.truncate(opts.max.unwrap_or(rules.levers.settings.max_suggestions));
    for (i, s) in out.iter_mut().enumerate() {
        s.rank = i + 1;
    }

    let headline = fit.likely_limit.first();
    SuggestionQueue {
        schema: crate::SUGGESTIONS_SCHEMA.into(),
        created_at: katlas_model::row::now_rfc3339(),
        target,
        fit_read: FitRead {
            likely_limit: headline.map(|f| f.text.clone()),
            likely_limit_rules: fit.likely_limit.iter().map(|f| f.rule.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect(),
            left_on_table: fit.left_on_table.iter().map(|f| f.text.clone()).collect(),
            quant_question: fit.quant.as_ref().map(|q| q.fit_question.clone()),
        },
        history: summary,
        stopped,
        suggestions: out,
        missing_evidence: fit.evidence.missing.iter().map(|m| m.evidence.clone()).collect(),
    }
}

#[allow(clippy::too_many_arguments)]
fn build_one(
    lever: &Lever,
    kernels: &[&KernelFit],
    sig: &Facts,
    fit: &FitView,
    rules: &Rules,
    target: &Target,
    contract: &EvalContract,
    prov: Option<&KernelProvenance>,
    phase: Option<&str>,
) -> Option<Suggestion> {
    let triggers = held_triggers(lever, sig);
    if triggers.is_empty() {
        return None;
    }
    let (legal, unknown) = eval_all(&lever.legal, sig);
    if legal == Some(false) {
        return None;
    }
    let share: f64 = kernels.iter().filter_map(|k| k.share_pct).sum();
    let mut score = lever.base + share * rules.levers.settings.share_weight;
    let mut adjustments = Vec::new();
    for (name, f) in lever.boost.iter().chain(lever.damp.iter()) {
        if truthy(sig, name) {
            score *= f;
            adjustments.push(format!("{name} x{}", fmt_num(*f, None)));
        }
    }
    let row_wide = lever.scope == LeverScope::Row;
    let kernel = if row_wide { None } else { Some(kernels[0].name.clone()) };
    let mut watched: Vec<String> = lever.trigger_conds.iter().flatten().map(|c| c.signal.clone()).collect();
    watched.extend(lever.boost.keys().cloned());
    watched.extend(lever.damp.keys().cloned());
    let mut evidence = Vec::new();
    let mut fit_rules = Vec::new();
    // The phase's own findings (its timeline) come before any kernel's.
    for f in &fit.phase.findings {
        let emits = rules.fit.rules.iter().find(|r| r.id == f.rule).map(|r| r.emits.clone()).unwrap_or_default();
        if emits.iter().any(|e| watched.contains(e)) {
            fit_rules.push(f.rule.clone());
            evidence.push(format!("[{}] {}", f.rule, f.text));
        }
    }
    for k in kernels {
        if let Some(l) = profile_line(k, phase, fit.measured_on_cpu()) {
            evidence.push(l);
        }
        for f in findings_for(k, rules, &watched) {
            if !fit_rules.contains(&f.rule) {
                fit_rules.push(f.rule.clone());
            }
            // A caveat is said once, below, as a caveat.
            if f.kind != FindingKind::Caveat {
                evidence.push(format!("[{}] {}", f.rule, f.text));
            }
        }
    }
    for k in kernels {
        for f in k.findings.iter().filter(|f| f.kind == FindingKind::Caveat) {
            evidence.push(format!("caveat [{}] {}", f.rule, f.text));
        }
    }
    if truthy(sig, "library_kernel") && !row_wide {
        evidence.push(format!(
            "{} is a library kernel (its source is not in this project): change how it is called (shapes, dispatch, fusion) or replace it",
            kernels[0].short_name
        ));
    }
    if truthy(sig, "triton") && !row_wide {
        evidence.push(render_template(
            "Triton kernel[ at {triton_source}]: [num_warps {num_warps:.0}][, num_stages {num_stages:.0}][; {constexprs}][; autotuned over {autotune_configs:.0} configs][ keyed on {autotune_key}][, winner {autotune_best}][; grid {grid} = {grid_blocks:.0} programs = {grid_fill_pct:.1}% of {sms:.0} SMs x {blocks_per_sm:.0} resident]",
            sig.values,
        ));
    }
    if triggers.iter().any(|t| t.contains("route_knobs")) {
        if let Some(Val::Str(list)) = sig.value("route_knob_list") {
            evidence.push(format!("route knobs in the row's env: {list}"));
        }
    }
    if let Some(p) = prov.filter(|p| !p.env_controls.is_empty()) {
        evidence.push(format!("dispatch provenance exposes env controls: {}", p.env_controls.join(", ")));
    }
    for (name, f) in &lever.damp {
        if truthy(sig, name) {
            evidence.push(format!("damped x{}: `{name}` holds — {}", fmt_num(*f, None), lever.null_results.first().cloned().unwrap_or_default()));
        }
    }
    let (allowed_files, src) = match prov {
        Some(p) if !(p.sources.is_empty() && p.dispatch_refs.is_empty()) => {
            let mut files: Vec<String> = p.sources.clone();
            for d in &p.dispatch_refs {
                let path = d.rsplit_once(':').filter(|(_, l)| l.chars().all(|c| c.is_ascii_digit())).map(|(p, _)| p).unwrap_or(d);
                if !files.iter().any(|f| f == path) {
                    files.push(path.to_string());
                }
            }
            (files, "dispatch provenance".to_string())
        }
        _ => match sig.value("triton_source") {
            Some(Val::Str(src)) if !row_wide => {
                let file = src.rsplit_once(':').filter(|(_, l)| l.chars().all(|c| c.is_ascii_digit())).map(|(p, _)| p).unwrap_or(src);
                (vec![file.to_string()], "Triton launch record (the jit function's file)".to_string())
            }
            _ => (vec![], "none known: run `katlas collect` with dispatch roots, or name files in the task".to_string()),
        },
    };
    let mut candidate_steps = lever.candidate_steps.clone();
    if let Some(f) = lever.first_step.iter().find(|f| eval_all(&f.when, sig).0 == Some(true)) {
        candidate_steps.insert(0, render_template(&f.text, sig.values));
    }
    let arch = target.arch.as_deref().unwrap_or("unknown arch");
    let who = if row_wide { format!("{} hot kernels", kernels.len()) } else { kernels[0].short_name.clone() };
    let where_ = match (&target.phase, &target.shape) {
        (Some(p), Some(s)) => format!("{p}, {s}"),
        (Some(p), None) => p.clone(),
        (None, Some(s)) => s.clone(),
        (None, None) => "this workload".into(),
    };
    let metric = contract.metric.clone().unwrap_or_else(|| format!("{who} kernel time"));
    let risk_detail = lever.null_results.first().map(|n| format!("{}: {n}", lever.risk)).unwrap_or_else(|| lever.risk.clone());
    let hypothesis =
        format!("On {arch}/{who}/{where_}, {} should improve {metric} because {}; risk is {risk_detail}.", lever.name.to_lowercase(), lever.hypothesis);
    let title = match &kernel {
        Some(_) => format!("{} on {}", lever.name, kernels[0].short_name),
        None => format!("{} for {}", lever.name, phase.unwrap_or("the phase")),
    };
    Some(Suggestion {
        id: suggestion_id(&lever.id, &kernel, target),
        rank: 0,
        score,
        score_before_history: score,
        lever: lever.id.clone(),
        lever_name: lever.name.clone(),
        title,
        kernel,
        op: if row_wide { None } else { kernels[0].op.clone() },
        share_pct: if share > 0.0 { Some(share) } else { None },
        triggers,
        fit_rules,
        evidence,
        adjustments,
        risk: lever.risk.clone(),
        expected_impact: lever.expected_impact.clone(),
        magnitude: lever.magnitude.clone(),
        null_results: lever.null_results.clone(),
        candidate_steps,
        allowed_files,
        allowed_files_source: src,
        eval: contract.clone(),
        hypothesis,
        history: None,
        legality_unknown: unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use katlas_model::Metric;

    #[test]
    fn a_cpu_row_is_judged_by_its_cpu_time() {
        // The lab's GEMV row: its bandwidth is wall time's, which a busy machine stretches.
        let mut row = Row::new("lab-decode", "decode");
        for (k, v) in [("achieved_gbps", 0.07), ("median_us", 33985.8), ("cpu_min_us", 33514.7), ("cpu_median_us", 33922.0)] {
            row.metrics.insert(k.into(), Metric::from_key(k, v));
        }
        row.params.insert("backend".into(), "cpu".into());
        assert_eq!(preferred_metric(&row), Some(("cpu_min_us".to_string(), Goal::Minimize)));
        row.params.remove("backend");
        row.arch = Some("cpu".into());
        assert_eq!(preferred_metric(&row), Some(("cpu_min_us".to_string(), Goal::Minimize)));
        let c = eval_contract(Some(&row), &Rules::builtin().unwrap());
        assert_eq!((c.metric.as_deref(), c.goal), (Some("cpu_min_us"), Goal::Minimize));
        // The same numbers from a GPU run: its bandwidth, as before.
        row.arch = Some("sm_90".into());
        assert_eq!(preferred_metric(&row), Some(("achieved_gbps".to_string(), Goal::Maximize)));
    }
}
