//! Text, markdown and HTML renderings of the fit view and the suggestion queue.
//! JSON is the records themselves (serde).

use crate::expr::fmt_num;
use crate::fit::{Finding, FitView, Header, KernelFit};
use crate::rules::FindingKind;
use crate::suggest::SuggestionQueue;
use katlas_model::text::printable;
use std::fmt::Write;
use std::path::Path;

/// The view is of NVIDIA code: its words are warps, shared memory and registers/thread.
fn nvidia(v: &FitView) -> bool {
    v.header.arch.as_deref().is_some_and(|a| a.starts_with("sm_"))
}

/// The one-line title under `KATLAS FIT` / `KATLAS SUGGEST`: names from files, made printable.
fn header_line(md: bool, fields: &[&str]) -> String {
    let joined = fields.iter().map(|f| printable(f).into_owned()).collect::<Vec<_>>().join(" | ");
    if md {
        format!("\n{joined}")
    } else {
        joined
    }
}

fn opt(v: Option<f64>, d: usize) -> String {
    v.map(|x| fmt_num(x, Some(d))).unwrap_or_else(|| "-".into())
}

fn opt_u<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

pub fn bar(fraction: f64, width: usize) -> String {
    let f = fraction.clamp(0.0, 1.0);
    let filled = (f * width as f64).round() as usize;
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

fn or_unknown(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("unknown")
}

/// Lines of one section, markdown or text flavour.
struct Doc {
    md: bool,
    out: String,
}

impl Doc {
    fn h(&mut self, title: &str) {
        if self.md {
            let _ = writeln!(self.out, "\n## {title}\n");
        } else {
            let _ = writeln!(self.out, "\n{}", title.to_uppercase());
        }
    }
    /// One line each: names in `v` (from files) are made [`printable`].
    fn kv(&mut self, k: &str, v: impl AsRef<str>) {
        let v = printable(v.as_ref());
        if self.md {
            let _ = writeln!(self.out, "- **{k}**: {v}");
        } else {
            let _ = writeln!(self.out, "  {k:<18} {v}");
        }
    }
    fn item(&mut self, v: impl AsRef<str>) {
        let v = printable(v.as_ref());
        if self.md {
            let _ = writeln!(self.out, "- {v}");
        } else {
            let _ = writeln!(self.out, "  - {v}");
        }
    }
    fn line(&mut self, v: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}", v.as_ref());
    }
}

fn finding_line(f: &Finding) -> String {
    let nums: Vec<String> = f
        .numbers
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "caps" | "wave_sizes"))
        .map(|(k, v)| match v {
            crate::expr::Val::Num(n) => format!("{k}={}", fmt_num(*n, Some(if n.fract() == 0.0 { 0 } else { 2 }))),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("{} [rule {}: {}; {}]", f.text, f.rule, f.when.join(" & "), nums.join(", "))
}

/// The likely-limit line when no limit rule decided: what would let one decide, and how to add it.
fn undecided(v: &FitView) -> String {
    if !v.evidence.profile {
        // The missing-evidence line carries the json-lines example; the headline stays one line.
        return "unknown: no limit rule could decide without a profile; add one with `katlas collect WORKLOAD --profile` \
                or `katlas fit FILE --parse ncu-csv` (or torch-trace, rocprofv3), or print a json-lines `kernels` record (example under missing evidence)"
            .into();
    }
    "unknown: no limit rule could decide: the kernels need bytes or FLOPs per call against a product ceiling (`--product`); \
     add them with counters (`katlas collect WORKLOAD --profile`, or `katlas fit FILE --parse ncu-csv` or rocprofv3), \
     or `bytes`/`flops` per call on each record of the workload's json-lines `kernels` (docs/collect.md, json-lines kernels)"
        .into()
}

fn kernel_block(d: &mut Doc, k: &KernelFit, width: usize, nv: bool, cpu: bool) {
    // ISA-only kernels of several arches share names: say which object each is.
    let title = match (&k.isa, k.calls) {
        (Some(i), None) => format!("{} [{}]", printable(&k.name), i.arch),
        _ => printable(&k.name).into_owned(),
    };
    if d.md {
        d.line(format!("\n### {title}\n"));
    } else {
        d.line(format!("\n  {title}"));
    }
    if let Some(dm) = &k.demangled {
        d.kv("demangled", dm);
    }
    if let Some(op) = &k.op {
        d.kv("op", format!("{}.{}", op.family, op.role));
    }
    if k.share_pct.is_some() || k.calls.is_some() {
        d.kv("time", format!("share {}%  calls {}  avg {} us  total {} us", opt(k.share_pct, 1), opt_u(k.calls), opt(k.avg_us, 2), opt(k.total_us, 1)));
    }
    let t = &k.throughput;
    match (t.bw_gbps, t.bw_pct_of_peak) {
        (Some(bw), Some(p)) => d.kv(
            "bandwidth",
            format!(
                "{} GB/s = {}% of peak {} ({}, {})",
                fmt_num(bw, Some(1)),
                fmt_num(p, Some(1)),
                bar(p / 100.0, width),
                t.bw_band.as_deref().unwrap_or("-"),
                t.bw_source.as_deref().unwrap_or("-")
            ),
        ),
        (Some(bw), None) => d.kv("bandwidth", format!("{} GB/s ({}; no product ceiling)", fmt_num(bw, Some(1)), t.bw_source.as_deref().unwrap_or("-"))),
        _ => d.kv("bandwidth", k.bytes_note.as_deref().map_or_else(|| "unknown (no byte counts)".into(), |n| format!("unknown: {n}"))),
    }
    if let Some(tr) = triton_line(k) {
        d.kv("triton", tr);
    }
    if let Some(tf) = t.tflops {
        d.kv(
            "compute",
            format!("{} TFLOP/s{}", fmt_num(tf, Some(2)), t.compute_pct_of_peak.map(|p| format!(" = {}% of peak", fmt_num(p, Some(1)))).unwrap_or_default()),
        );
    }
    if let Some(l) = &k.launch {
        // NVIDIA's units are warps on an SM's four sub-partitions (ncu's "waves per SM" is a
        // different count: blocks over resident blocks), AMD's are waves on SIMDs.
        let (unit, on) = if nv { ("warps", "SM sub-partitions") } else { ("waves", "SIMDs") };
        d.kv(
            "launch",
            format!(
                "grid {:?} block {:?}: {} {unit} on {} {on} = {} per {}",
                l.grid,
                l.block,
                fmt_num(l.waves, Some(0)),
                fmt_num(l.simds, Some(0)),
                fmt_num(l.waves_per_simd, Some(2)),
                if nv { "sub-partition" } else { "SIMD" }
            ),
        );
    }
    if t.tflops.is_none() {
        if let Some(p) = t.compute_pct_of_peak {
            d.kv("compute", format!("{}% of peak {} ({})", fmt_num(p, Some(1)), bar(p / 100.0, width), t.compute_band.as_deref().unwrap_or("-")));
        }
    }
    if let Some(p) = t.memory_sol_pct {
        d.kv("memory SOL", format!("{}% (Nsight Compute, all memory units)", fmt_num(p, Some(1))));
    }
    // A CPU function has no occupancy, ISA entry or matrix units: the scope note says so once.
    if !cpu {
        gpu_lines(d, k, width, nv);
    }
    for f in &k.findings {
        d.item(format!("{}: {}", f.kind, finding_line(f)));
    }
}

fn gpu_lines(d: &mut Doc, k: &KernelFit, width: usize, nv: bool) {
    let achieved = k.achieved_occupancy_pct.map(|p| format!("; achieved {}% of warp slots", fmt_num(p, Some(1)))).unwrap_or_default();
    match &k.occupancy {
        Some(o) => d.kv("occupancy", format!("{}/{} {} (limiter: {}; {}){achieved}", o.achieved, o.max, o.unit, o.limiter.name(), o.source)),
        None => d.kv("occupancy", format!("unknown (no kernel resources){achieved}")),
    }
    match &k.isa {
        Some(i) => {
            d.kv("isa match", format!("{} ({}) in {}", i.kernel, i.how, i.object));
            // NVIDIA reports one register count per thread; VGPR/SGPR/AGPR are AMD's files.
            let regs = if nv || i.arch.starts_with("sm_") {
                format!("{}/thread  spill bytes {}  stack {} B", opt_u(i.vgpr), opt(i.spills, 0), opt_u(i.scratch_bytes))
            } else {
                format!(
                    "VGPR {}  SGPR {}  AGPR {}  spills {}  scratch {} B",
                    opt_u(i.vgpr),
                    opt_u(i.sgpr),
                    opt_u(i.agpr),
                    opt(i.spills, 0),
                    opt_u(i.scratch_bytes)
                )
            };
            d.kv("registers", regs);
            if nv || i.arch.starts_with("sm_") {
                d.kv("shared memory", format!("{} B per block   warp size {}", opt_u(i.lds_bytes), opt_u(i.wave_size)));
            } else {
                d.kv("LDS", format!("{} B per workgroup   wave size {}", opt_u(i.lds_bytes), opt_u(i.wave_size)));
            }
        }
        None => d.kv("isa", "no ISA kernel matched"),
    }
    if !k.mix.is_empty() {
        d.kv("instruction mix", "");
        for m in &k.mix {
            if d.md {
                d.line(format!("  - `{:<10}` `{}` {} ({}%)", m.category, bar(m.fraction, width), m.count, fmt_num(100.0 * m.fraction, Some(1))));
            } else {
                d.line(format!("      {:<12} {} {:>6} ({}%)", m.category, bar(m.fraction, width), m.count, fmt_num(100.0 * m.fraction, Some(1))));
            }
        }
    }
    let avail = if k.matrix.available.is_empty() { "none".to_string() } else { k.matrix.available.join("; ") };
    let used = match k.matrix.used_ops {
        Some(n) => format!("{n} matrix instructions"),
        None => "unknown (no instruction mix)".into(),
    };
    d.kv("matrix units", format!("available: {avail} | used: {used}"));
}

/// The reading against each candidate board when the atom's products differ (no `--product`):
/// the headline per board and the top kernel's % of peak across them.
fn product_readings(d: &mut Doc, v: &FitView, finding: fn(&Finding) -> String) {
    if v.product_readings.is_empty() {
        return;
    }
    d.kv("by product", format!("{} candidate boards of {} (pass --product for one)", v.product_readings.len(), or_unknown(&v.header.arch)));
    for r in &v.product_readings {
        let ceiling = r.bw_ceiling_gbps.map(|b| format!(" ({} GB/s)", fmt_num(b, Some(0)))).unwrap_or_default();
        let head = r.likely_limit.first().map(finding).unwrap_or_else(|| "no limit rule could decide".into());
        d.item(format!("{}{ceiling}: {head}", r.product));
    }
    let top = v.product_readings.iter().filter_map(|r| r.bw_pct.first().cloned()).collect::<Vec<_>>();
    if let Some((name, _)) = top.first() {
        let pcts: Vec<f64> = top.iter().filter(|(n, _)| n == name).map(|(_, p)| *p).collect();
        let lo = pcts.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pcts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        d.item(format!("{name}: {}-{}% of peak bandwidth across the {} boards", fmt_num(lo, Some(1)), fmt_num(hi, Some(1)), pcts.len()));
    }
}

/// The fit's title and one-line header (arch, product, workload, phase, shape, quant), the same
/// in the full and the brief view.
fn fit_title(d: &mut Doc, h: &Header) {
    let md = d.md;
    d.line(if md { "# katlas fit" } else { "KATLAS FIT" });
    d.line(header_line(
        md,
        &[
            or_unknown(&h.arch),
            h.product.as_deref().unwrap_or("no product"),
            or_unknown(&h.workload),
            or_unknown(&h.phase),
            or_unknown(&h.shape),
            h.quant.as_deref().unwrap_or("-"),
        ],
    ));
}

fn fit_doc(v: &FitView, md: bool) -> String {
    let mut d = Doc { md, out: String::new() };
    let h = &v.header;
    fit_title(&mut d, h);
    d.h("Header");
    d.kv("arch", format!("{} (class {}, from {})", or_unknown(&h.arch), or_unknown(&h.arch_class), or_unknown(&h.arch_source)));
    d.kv("product", format!("{} ({})", h.product.as_deref().unwrap_or("none"), h.product_source.as_deref().unwrap_or("pass --product")));
    if let (Some(bw), Some(l)) = (h.bw_ceiling_gbps, &h.bw_ceiling_label) {
        d.kv("bw ceiling", format!("{} GB/s ({l})", fmt_num(bw, Some(1))));
    }
    d.kv("workload", or_unknown(&h.workload));
    d.kv("phase", or_unknown(&h.phase));
    d.kv("shape", or_unknown(&h.shape));
    if let Some(r) = &h.row_source {
        d.kv("row", format!("{} ({})", r, h.row_id.as_deref().unwrap_or("-")));
    }
    if let Some(m) = &h.isa_manifest {
        d.kv("isa manifest", m);
    }

    d.h("Scope");
    let s = &v.scope;
    d.kv("kind", s.kind.as_str());
    if v.evidence.isa {
        d.kv(
            "isa",
            format!(
                "{} kernels, {} for this arch (manifest arches: {})",
                s.isa_kernels,
                s.isa_kernels_for_arch,
                if s.isa_arches.is_empty() { "none".into() } else { s.isa_arches.join(", ") }
            ),
        );
        d.kv("profile matched", format!("{}/{} hot names", s.matched.len(), s.matched.len() + s.unmatched_hot.len()));
        for m in &s.matched {
            d.item(format!(
                "{} -> {} ({}) in {}{}",
                m.profile,
                m.isa_kernel,
                m.how,
                m.object,
                if m.also.is_empty() { String::new() } else { format!("; also {}", m.also.join(", ")) }
            ));
        }
        if !s.unmatched_hot.is_empty() {
            d.kv("unmatched hot", s.unmatched_hot.join(", "));
        }
    }
    for n in &s.notes {
        d.item(format!("note: {n}"));
    }

    if let Some(t) = timeline_line(v) {
        d.h("Phase");
        d.kv("timeline", t);
        for f in &v.phase.findings {
            d.item(format!("{}: {}", f.kind, finding_line(f)));
        }
    }

    d.h("Hot kernels");
    let width = 20;
    for k in &v.kernels {
        kernel_block(&mut d, k, width, nvidia(v), v.measured_on_cpu());
    }

    if let Some(q) = &v.quant {
        d.h("Quant intent");
        d.kv("format", format!("{} ({} bits/weight)", q.label, fmt_num(q.bits_per_weight, None)));
        d.kv("bytes saved", &q.bytes_saved);
        d.kv("unpack tax", &q.unpack_tax);
        d.kv("fit question", &q.fit_question);
    }
    if !v.runtime.is_empty() {
        d.h("Runtime");
        for (k, x) in &v.runtime {
            d.kv(k, fmt_num(*x, None));
        }
    }

    d.h("Fit read");
    match v.likely_limit.first() {
        Some(f) => d.kv("likely limit", finding_line(f)),
        None if !v.product_readings.is_empty() => {}
        None => d.kv("likely limit", undecided(v)),
    }
    product_readings(&mut d, v, finding_line);
    for f in v.likely_limit.iter().skip(1) {
        d.item(format!("also: {}", finding_line(f)));
    }
    if v.left_on_table.is_empty() {
        d.kv("left on table", "nothing a rule could quantify");
    } else {
        d.kv("left on table", "");
        for f in &v.left_on_table {
            d.item(finding_line(f));
        }
    }
    for f in &v.stops {
        d.item(format!("stop: {}", finding_line(f)));
    }
    for f in &v.caveats {
        d.item(format!("caveat: {}", finding_line(f)));
    }
    if !v.evidence.missing.is_empty() {
        d.h("Missing evidence");
        for m in &v.evidence.missing {
            if m.rules.is_empty() {
                d.item(&m.evidence);
            } else {
                d.item(format!("{} (rules waiting: {})", m.evidence, m.rules.join(", ")));
            }
        }
    }
    d.out
}

/// The default text: the phase's finding and the top kernels' limits first, each once.
pub fn fit_text(v: &FitView) -> String {
    fit_brief(v, false)
}

pub fn fit_markdown(v: &FitView) -> String {
    fit_brief(v, true)
}

/// Everything: per-kernel findings, resources, instruction mix, runtime metrics (`--verbose`).
pub fn fit_text_verbose(v: &FitView) -> String {
    fit_doc(v, false)
}

pub fn fit_markdown_verbose(v: &FitView) -> String {
    fit_doc(v, true)
}

/// A kernel rule is "common" when it holds on this many hot kernels or more: it is said once,
/// under "across kernels", instead of on every kernel.
const COMMON_RULE_KERNELS: usize = 3;

fn stopped(k: &KernelFit) -> bool {
    k.findings.iter().any(|f| f.kind == FindingKind::Stop)
}

/// A kernel's limit findings as the brief reads them: a kernel that needs bytes first (a
/// memory-bound op of unknown bandwidth) has that one only; the limits after it (occupancy,
/// launch shape) cannot say what bounds it without them. `--verbose` keeps them all.
fn read_limits(k: &KernelFit) -> Vec<&Finding> {
    let limits = k.findings.iter().filter(|f| f.kind == FindingKind::Limit);
    if k.emitted.contains("needs_bytes") {
        limits.take(1).collect()
    } else {
        limits.collect()
    }
}

/// Limit rules that hold on several hot kernels, with the kernels, in rule order of first use.
fn common_rules(v: &FitView) -> Vec<(String, Vec<&KernelFit>)> {
    let mut out: Vec<(String, Vec<&KernelFit>)> = Vec::new();
    for k in &v.kernels {
        for f in read_limits(k) {
            match out.iter_mut().find(|(r, _)| *r == f.rule) {
                Some((_, ks)) => ks.push(k),
                None => out.push((f.rule.clone(), vec![k])),
            }
        }
    }
    out.retain(|(_, ks)| ks.len() >= COMMON_RULE_KERNELS);
    out
}

fn brief_finding(f: &Finding) -> String {
    format!("{} [rule {}]", f.text, f.rule)
}

fn timeline_line(v: &FitView) -> Option<String> {
    use crate::expr::Val;
    let n = |k: &str| match v.phase.signals.get(k) {
        Some(Val::Num(x)) => Some(*x),
        _ => None,
    };
    let busy = n("gpu_busy_pct")?;
    let mut s = format!("GPU busy {}% of {} ms", fmt_num(busy, Some(1)), opt(n("timeline_window_ms"), 1));
    if let Some(l) = n("launches") {
        s.push_str(&format!("; {} launches", fmt_num(l, Some(0))));
        if let (Some(per), Some(steps)) = (n("launches_per_step"), n("steps")) {
            s.push_str(&format!(" ({} per step, {} steps)", fmt_num(per, Some(0)), fmt_num(steps, Some(0))));
        }
        if let (Some(g), Some(r)) = (n("graph_launches").filter(|g| *g > 0.0), n("graph_replayed_kernels")) {
            s.push_str(&format!(", {} of them graph launches replaying {} kernels", fmt_num(g, Some(0)), fmt_num(r, Some(0))));
        }
    }
    if let Some(a) = n("kernel_avg_us") {
        s.push_str(&format!("; kernels avg {} us", fmt_num(a, Some(2))));
    }
    if let (Some(m), Some(p)) = (n("gap_median_us"), n("gap_p90_us")) {
        s.push_str(&format!("; gap median {} us, p90 {} us", fmt_num(m, Some(1)), fmt_num(p, Some(1))));
    }
    if let Some(h) = n("host_launch_us") {
        s.push_str(&format!("; host {} us per launch", fmt_num(h, Some(1))));
    }
    Some(s)
}

/// The phase caveat that says graph-replayed kernels have no shapes, and the command for bytes.
const GRAPH_REPLAY_RULE: &str = "graph_replay_no_shapes";

/// `short`: the fit read already says how replayed kernels get bytes; each row names only why.
fn kernel_row(d: &mut Doc, k: &KernelFit, nv: bool, short: bool) {
    let t = &k.throughput;
    let bw = match (t.bw_gbps, t.bw_pct_of_peak) {
        (Some(b), Some(p)) => format!("{} GB/s = {}% of peak ({})", fmt_num(b, Some(1)), fmt_num(p, Some(1)), t.bw_source.as_deref().unwrap_or("-")),
        (Some(b), None) => format!("{} GB/s ({})", fmt_num(b, Some(1)), t.bw_source.as_deref().unwrap_or("-")),
        _ => match k.bytes_note.as_deref() {
            Some(n) if short && k.signals.contains_key("graph_replayed_calls") => {
                format!("bandwidth unknown: {} (see the caveat)", n.split_once("): ").map_or(n.to_string(), |(why, _)| format!("{why})")))
            }
            Some(n) => format!("bandwidth unknown: {n}"),
            None => "bandwidth unknown".into(),
        },
    };
    let occ = k.occupancy.as_ref().map(|o| format!("; occupancy {}/{} {} ({})", o.achieved, o.max, o.unit, o.limiter.name())).unwrap_or_default();
    let op = k.op.as_ref().map(|o| format!(" ({}.{})", o.family, o.role)).unwrap_or_default();
    let title = match (&k.isa, k.calls) {
        (Some(i), None) => format!("{} [{}]", k.short_name, i.arch),
        _ => k.short_name.clone(),
    };
    let time = match (k.share_pct, k.calls) {
        (Some(sh), Some(c)) => format!("{}%  {c} x {} us  ", fmt_num(sh, Some(1)), opt(k.avg_us, 2)),
        _ => String::new(),
    };
    d.item(format!("{time}{title}{op}: {bw}{occ}"));
    if let Some(tr) = triton_line(k) {
        if d.md {
            d.line(format!("  - triton: {tr}"));
        } else {
            d.line(format!("      triton: {tr}"));
        }
    }
    if let Some(i) = &k.isa {
        let line = if nv || i.arch.starts_with("sm_") {
            format!(
                "{} registers/thread  spill bytes {}  shared memory {} B  warp {} ({} match)",
                opt_u(i.vgpr),
                opt(i.spills, 0),
                opt_u(i.lds_bytes),
                opt_u(i.wave_size),
                i.how
            )
        } else {
            format!(
                "VGPR {}  SGPR {}  AGPR {}  spills {}  LDS {} B  wave {} ({} match)",
                opt_u(i.vgpr),
                opt_u(i.sgpr),
                opt_u(i.agpr),
                opt(i.spills, 0),
                opt_u(i.lds_bytes),
                opt_u(i.wave_size),
                i.how
            )
        };
        if d.md {
            d.line(format!("  - {line}"));
        } else {
            d.line(format!("      {line}"));
        }
    }
}

/// A Triton kernel's launch facts on one line: `num_warps 8  num_stages 3  shared 32 B
/// BLOCK_SIZE=2048; autotuned over 16 configs (key D=2048)`.
fn triton_line(k: &KernelFit) -> Option<String> {
    let t = k.triton.as_ref()?;
    let mut s = format!("num_warps {}  num_stages {}  shared {} B", opt_u(t.num_warps), opt_u(t.num_stages), opt_u(t.shared));
    if !t.constexprs.is_empty() {
        s.push_str(&format!("  {}", crate::fit::constexpr_list(&t.constexprs)));
    }
    if let Some(a) = &t.autotune {
        let key = crate::fit::constexpr_list(&a.key);
        s.push_str(&format!("; autotune winner of {} configs (key {key})", a.configs));
    }
    if let Some(c) = &t.cache_entry {
        let short = Path::new(c).parent().and_then(|p| p.file_name()).map(|h| h.to_string_lossy().chars().take(12).collect::<String>());
        s.push_str(&format!("; cache {}", short.unwrap_or_default()));
    }
    Some(printable(&s).into_owned())
}

fn fit_brief(v: &FitView, md: bool) -> String {
    let mut d = Doc { md, out: String::new() };
    let h = &v.header;
    fit_title(&mut d, h);
    let ceiling = match (h.bw_ceiling_gbps, &h.bw_ceiling_label) {
        (Some(bw), Some(l)) => format!(", {} GB/s ceiling ({l})", fmt_num(bw, Some(1))),
        _ => String::new(),
    };
    d.kv("product", format!("{} ({}){ceiling}", h.product.as_deref().unwrap_or("none"), h.product_source.as_deref().unwrap_or("pass --product")));
    if let Some(r) = &h.row_source {
        d.kv("row", r);
    }
    let s = &v.scope;
    let mut scope = s.kind.to_string();
    if v.evidence.isa {
        scope.push_str(&format!(
            "; {}/{} hot names matched in {}",
            s.matched.len(),
            s.matched.len() + s.unmatched_hot.len(),
            h.isa_manifest.as_deref().unwrap_or("the manifest")
        ));
    }
    d.kv("scope", scope);
    if !s.unmatched_hot.is_empty() {
        d.kv("unmatched hot", s.unmatched_hot.join(", "));
    }
    for n in &s.notes {
        d.item(format!("note: {n}"));
    }

    let common = common_rules(v);
    let is_common = |rule: &str| common.iter().any(|(r, _)| r == rule);
    d.h("Fit read");
    let phase_leads = v.likely_limit.first().is_some_and(|f| f.kernel.is_none());
    if let Some(t) = timeline_line(v).filter(|_| !phase_leads) {
        d.kv("timeline", t);
    }
    match v.likely_limit.first() {
        Some(f) => d.kv("likely limit", brief_finding(f)),
        None if !v.product_readings.is_empty() => {}
        None => d.kv("likely limit", undecided(v)),
    }
    product_readings(&mut d, v, brief_finding);
    // The phase's caveats are among `v.caveats`, printed below with the kernels'.
    for f in v.phase.findings.iter().filter(|f| !matches!(f.kind, FindingKind::Limit | FindingKind::Caveat)) {
        d.item(format!("{}: {}", f.kind, brief_finding(f)));
    }
    // The top live kernels' own limits, once each (the headline is not repeated).
    let headline = v.likely_limit.first().map(|f| (f.rule.clone(), f.kernel.clone()));
    let mut shown = 0;
    for k in v.kernels.iter().filter(|k| !stopped(k)) {
        if shown == 3 {
            break;
        }
        let own = read_limits(k).into_iter().find(|f| !is_common(&f.rule) && headline.as_ref() != Some(&(f.rule.clone(), f.kernel.clone())));
        if let Some(f) = own {
            d.item(format!("{}: {}", k.short_name, brief_finding(f)));
            shown += 1;
        }
    }
    for (rule, ks) in &common {
        let names: Vec<&str> = ks.iter().map(|k| k.short_name.as_str()).collect();
        let source = v.kernels.iter().flat_map(|k| &k.findings).find(|f| &f.rule == rule).map(|f| f.source.clone()).unwrap_or_default();
        d.item(format!("on {} of {} hot kernels [rule {rule}]: {source} ({})", ks.len(), v.kernels.len(), names.join(", ")));
    }
    let stops: Vec<&str> = v.kernels.iter().filter(|k| stopped(k)).map(|k| k.short_name.as_str()).collect();
    if !stops.is_empty() {
        d.kv("stop (Amdahl)", stops.join(", "));
    }
    for f in &v.caveats {
        d.item(format!("caveat: {}", brief_finding(f)));
    }

    d.h("Hot kernels");
    let graph_caveat = v.caveats.iter().any(|f| f.rule == GRAPH_REPLAY_RULE);
    for k in &v.kernels {
        kernel_row(&mut d, k, nvidia(v), graph_caveat);
    }
    if let Some(q) = &v.quant {
        d.kv("quant", format!("{} ({} bits/weight): {}", q.label, fmt_num(q.bits_per_weight, None), q.fit_question));
    }
    if !v.evidence.missing.is_empty() {
        d.h("Missing evidence");
        for m in &v.evidence.missing {
            d.item(&m.evidence);
        }
    }
    d.line(if md {
        "\n_More: `--verbose` (per-kernel findings, resources, instruction mix, rules waiting)._"
    } else {
        "\n(--verbose: per-kernel findings, resources, instruction mix, rules waiting on evidence)"
    });
    d.out
}

fn queue_doc(q: &SuggestionQueue, md: bool) -> String {
    let mut d = Doc { md, out: String::new() };
    let t = &q.target;
    d.line(if md { "# katlas suggest" } else { "KATLAS SUGGEST" });
    d.line(header_line(md, &[or_unknown(&t.arch), or_unknown(&t.workload), or_unknown(&t.phase), or_unknown(&t.shape), t.quant.as_deref().unwrap_or("-")]));
    d.h("Fit read");
    d.kv("likely limit", q.fit_read.likely_limit.as_deref().unwrap_or("unknown"));
    if !q.fit_read.likely_limit_rules.is_empty() {
        d.kv("limit rules", q.fit_read.likely_limit_rules.join(", "));
    }
    for l in &q.fit_read.left_on_table {
        d.item(format!("left on table: {l}"));
    }
    if let Some(qq) = &q.fit_read.quant_question {
        d.kv("quant question", qq);
    }
    if !q.stopped.is_empty() {
        d.kv("stopped (Amdahl)", q.stopped.join(", "));
    }
    d.kv(
        "history",
        format!(
            "{} ledger entries, {} matched, {} demoted, {} restored{}",
            q.history.entries,
            q.history.matched,
            q.history.demoted,
            q.history.restored,
            q.history.ledger.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
        ),
    );
    for e in &q.history.errors {
        d.item(format!("ledger line skipped: {e}"));
    }
    d.h("Queue");
    if q.suggestions.is_empty() {
        d.line("  (no lever triggered: see missing evidence)");
    }
    for s in &q.suggestions {
        if md {
            d.line(format!("\n### {}. {}  (score {})\n", s.rank, s.title, fmt_num(s.score, Some(1))));
        } else {
            d.line(format!("\n  {}. {}  [score {}]", s.rank, s.title, fmt_num(s.score, Some(1))));
        }
        d.kv("id", &s.id);
        d.kv("lever", format!("{} ({})", s.lever, s.lever_name));
        d.kv(
            "risk / impact",
            format!(
                "{} / {} ({}-{}% of {}; {})",
                s.risk,
                s.expected_impact,
                fmt_num(s.magnitude.low_pct, None),
                fmt_num(s.magnitude.high_pct, None),
                s.magnitude.of,
                s.magnitude.source
            ),
        );
        d.kv("triggered by", format!("{} (fit rules: {})", s.triggers.join(", "), if s.fit_rules.is_empty() { "-".into() } else { s.fit_rules.join(", ") }));
        if !s.adjustments.is_empty() {
            d.kv("score adjustments", s.adjustments.join(", "));
        }
        if let Some(h) = &s.history {
            d.kv("history", format!("{} (-{} points)", h.status, fmt_num(h.demotion, None)));
            for a in &h.attempts {
                let mut line = if a.revisit_if.is_some() {
                    format!("prior verdict {} ({})", a.verdict, a.note)
                } else {
                    format!("prior verdict {} ({}; {})", a.verdict, a.disposition, a.note)
                };
                if let Some(c) = &a.revisit_if {
                    line.push_str(&format!(
                        "; revisit if: {c}{}",
                        match a.revisit_holds {
                            Some(true) => " [holds now]",
                            Some(false) => " [does not hold yet]",
                            None => " [not machine-checkable]",
                        }
                    ));
                }
                d.item(line);
            }
        }
        d.kv("hypothesis", &s.hypothesis);
        d.kv("evidence", "");
        for e in &s.evidence {
            d.item(e);
        }
        d.kv("allowed files", if s.allowed_files.is_empty() { s.allowed_files_source.clone() } else { s.allowed_files.join(", ") });
        d.kv(
            "eval",
            format!(
                "metric {} ({}); fresh baseline {}{}",
                s.eval.metric.as_deref().unwrap_or("none recorded"),
                s.eval.goal,
                if s.eval.fresh_baseline_required { "required" } else { "not required" },
                if s.eval.stripped_env.is_empty() { String::new() } else { format!("; stripped env {}", s.eval.stripped_env.join(", ")) }
            ),
        );
        d.kv("first step", s.candidate_steps.first().cloned().unwrap_or_default());
    }
    if !q.missing_evidence.is_empty() {
        d.h("Missing evidence");
        for m in &q.missing_evidence {
            d.item(m);
        }
    }
    d.out
}

pub fn queue_text(q: &SuggestionQueue) -> String {
    queue_doc(q, false)
}

pub fn queue_markdown(q: &SuggestionQueue) -> String {
    queue_doc(q, true)
}
