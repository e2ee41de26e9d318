//! Two profiles of one workload side by side (`katlas fit ROW --baseline ROW2`): per-kernel time,
//! calls, share and bandwidth deltas, the kernels that appeared or vanished, and whether the two
//! rows' identities allow the comparison at all.
//!
//! The identity rules are `katlas corpus compare`'s (katlas-store `compare`): rows of a different
//! workload, phase, shape or arch are refused; a different host, GPU product or binary is a
//! warning that part of any difference may be the machine or the build.

use crate::expr::fmt_num;
use crate::fit::{merge_samples, FitView};
use katlas_model::{KernelSample, Row};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const COMPARE_SCHEMA: &str = "katlas.fit-compare.v1";

/// The comparison of a candidate row against its baseline.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FitCompare {
    /// Always `katlas.fit-compare.v1`.
    pub schema: String,
    /// One sentence: the phase's GPU-time change, the kernel that moved most, kernels gone/new.
    pub lead: String,
    pub baseline: Side,
    pub candidate: Side,
    /// Identity differences that do not refuse the comparison but colour it.
    pub warnings: Vec<String>,
    /// Sum of kernel time, candidate vs baseline, percent (negative: less GPU time).
    pub gpu_time_change_pct: Option<f64>,
    /// Every kernel of either row: in both, `appeared` (candidate only) or `vanished`.
    pub kernels: Vec<KernelDelta>,
    /// Row metrics both rows have (tok/s, ms …).
    pub metrics: Vec<MetricDelta>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Side {
    pub source: Option<String>,
    pub row_id: String,
    pub workload: String,
    pub phase: String,
    pub shape: Option<String>,
    pub arch: Option<String>,
    pub product: Option<String>,
    pub host: Option<String>,
    pub binary_md5: Option<String>,
    /// Sum of the row's kernel time, microseconds (None when the profile has shares only).
    pub gpu_us: Option<f64>,
}

word_enum! {
    /// Where a kernel of the comparison ran.
    pub enum DeltaStatus {
        /// In both rows.
        Both = "both",
        /// In the candidate only.
        Appeared = "appeared",
        /// In the baseline only.
        Vanished = "vanished",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KernelDelta {
    pub name: String,
    pub status: DeltaStatus,
    pub total_us: [Option<f64>; 2],
    pub total_change_pct: Option<f64>,
    pub calls: [Option<u64>; 2],
    pub share_pct: [Option<f64>; 2],
    /// Candidate share minus baseline share, percentage points.
    pub share_change_pts: Option<f64>,
    pub bw_gbps: [Option<f64>; 2],
    pub bw_change_pct: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MetricDelta {
    pub metric: String,
    pub baseline: f64,
    pub candidate: f64,
    pub change_pct: f64,
}

fn side(r: &Row, fit: &FitView, source: Option<&str>, kernels: &[KernelSample]) -> Side {
    let total: f64 = kernels.iter().map(|k| k.total_us).sum();
    Side {
        source: source.map(str::to_string),
        row_id: r.id.clone(),
        workload: r.workload.clone(),
        phase: r.phase.clone(),
        shape: r.shape_bucket.clone(),
        arch: fit.header.arch.clone(),
        product: fit.header.product.clone(),
        host: r.identity.host.hostname.clone(),
        binary_md5: r.identity.binary.as_ref().and_then(|b| b.md5.clone()),
        gpu_us: (total > 0.0).then_some(total),
    }
}

fn pct(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => Some(100.0 * (b - a) / a),
        _ => None,
    }
}

/// Bandwidth as the fit view reads it: bytes per call over time per call, else what the
/// workload reported.
fn bw(k: &KernelSample) -> Option<f64> {
    let avg = k.avg_us.filter(|a| *a > 0.0).or_else(|| (k.total_us > 0.0 && k.calls > 0).then(|| k.total_us / k.calls as f64));
    match (k.bytes, avg) {
        (Some(b), Some(a)) => Some(b / a / 1e3),
        _ => k.achieved_gbps,
    }
}

fn with_shares(mut ks: Vec<KernelSample>) -> Vec<KernelSample> {
    let total: f64 = ks.iter().map(|k| k.total_us).sum();
    for k in &mut ks {
        if k.share_pct.is_none() && total > 0.0 {
            k.share_pct = Some(100.0 * k.total_us / total);
        }
    }
    ks
}

/// Compare `candidate` against `baseline`. `Err` names the identity field that refuses it.
pub fn compare(baseline: (&Row, &FitView, Option<&str>), candidate: (&Row, &FitView, Option<&str>)) -> Result<FitCompare, String> {
    let (ra, fa, sa) = baseline;
    let (rb, fb, sb) = candidate;
    let ka = with_shares(merge_samples(&ra.kernels));
    let kb = with_shares(merge_samples(&rb.kernels));
    let (a, b) = (side(ra, fa, sa, &ka), side(rb, fb, sb, &kb));
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let warnings = katlas_model::comparable::judge(|f| {
        Ok::<_, String>(match f {
            "workload" => (ra.workload.clone(), rb.workload.clone()),
            "phase" => (ra.phase.clone(), rb.phase.clone()),
            "shape_bucket" => (show(&ra.shape_bucket), show(&rb.shape_bucket)),
            "arch" => (show(&fa.header.arch), show(&fb.header.arch)),
            "host" => (show(&a.host), show(&b.host)),
            "product" => (show(&a.product), show(&b.product)),
            "binary_md5" => (show(&a.binary_md5), show(&b.binary_md5)),
            other => return Err(format!("comparison field `{other}` has no value in a fit")),
        })
    })?;

    let mut kernels = Vec::new();
    let find = |ks: &[KernelSample], n: &str| ks.iter().find(|k| k.name == n).cloned();
    let mut names: Vec<String> = ka.iter().map(|k| k.name.clone()).collect();
    names.extend(kb.iter().map(|k| k.name.clone()).filter(|n| !ka.iter().any(|k| &k.name == n)));
    for n in names {
        let (x, y) = (find(&ka, &n), find(&kb, &n));
        let t = |k: &Option<KernelSample>| k.as_ref().map(|k| k.total_us).filter(|t| *t > 0.0);
        let sh = |k: &Option<KernelSample>| k.as_ref().and_then(|k| k.share_pct);
        let b_ = |k: &Option<KernelSample>| k.as_ref().and_then(bw);
        kernels.push(KernelDelta {
            status: match (&x, &y) {
                (Some(_), Some(_)) => DeltaStatus::Both,
                (None, Some(_)) => DeltaStatus::Appeared,
                _ => DeltaStatus::Vanished,
            },
            total_us: [t(&x), t(&y)],
            total_change_pct: pct(t(&x), t(&y)),
            calls: [x.as_ref().map(|k| k.calls), y.as_ref().map(|k| k.calls)],
            share_pct: [sh(&x), sh(&y)],
            share_change_pts: match (sh(&x), sh(&y)) {
                (Some(p), Some(q)) => Some(q - p),
                _ => None,
            },
            bw_gbps: [b_(&x), b_(&y)],
            bw_change_pct: pct(b_(&x), b_(&y)),
            name: n,
        });
    }
    // The kernels that moved most first (time, else share), then those that came and went.
    let weight = |k: &KernelDelta| match k.status {
        DeltaStatus::Both => {
            k.total_change_pct.map(|_| (k.total_us[1].unwrap_or(0.0) - k.total_us[0].unwrap_or(0.0)).abs()).or(k.share_change_pts.map(f64::abs)).unwrap_or(0.0)
        }
        DeltaStatus::Appeared | DeltaStatus::Vanished => f64::INFINITY,
    };
    kernels
        .sort_by(|p, q| (p.status != DeltaStatus::Both).cmp(&(q.status != DeltaStatus::Both)).then(weight(q).total_cmp(&weight(p))).then(p.name.cmp(&q.name)));

    let metrics: Vec<MetricDelta> = ra
        .metrics
        .iter()
        .filter_map(|(k, m)| {
            let c = rb.metrics.get(k)?;
            (m.value != 0.0).then(|| MetricDelta {
                metric: k.clone(),
                baseline: m.value,
                candidate: c.value,
                change_pct: 100.0 * (c.value - m.value) / m.value,
            })
        })
        .collect();
    let gpu = pct(a.gpu_us, b.gpu_us);
    let lead = lead(&b.phase, gpu, &kernels, &metrics);
    Ok(FitCompare { schema: COMPARE_SCHEMA.into(), lead, baseline: a, candidate: b, warnings, gpu_time_change_pct: gpu, kernels, metrics })
}

fn signed(p: f64) -> String {
    if p < 0.0 {
        format!("\u{2212}{}%", fmt_num(-p, Some(1)))
    } else {
        format!("+{}%", fmt_num(p, Some(1)))
    }
}

fn lead(phase: &str, gpu: Option<f64>, kernels: &[KernelDelta], metrics: &[MetricDelta]) -> String {
    let mut parts = Vec::new();
    match gpu {
        Some(p) if p.abs() < 0.05 => parts.push("GPU time unchanged".into()),
        Some(p) if p < 0.0 => parts.push(format!("{}% less GPU time", fmt_num(-p, Some(1)))),
        Some(p) => parts.push(format!("{}% more GPU time", fmt_num(p, Some(1)))),
        // Shares only (no kernel times): the row's own metric says how the phase moved.
        None => {
            if let Some(m) = metrics.first() {
                parts.push(format!("{} {} ({} \u{2192} {})", m.metric, signed(m.change_pct), fmt_num(m.baseline, None), fmt_num(m.candidate, None)));
            } else {
                parts.push("GPU time unknown (no kernel times)".into());
            }
        }
    }
    if let Some(k) = kernels.iter().find(|k| k.status == DeltaStatus::Both && (k.total_change_pct.is_some() || k.share_change_pts.is_some_and(|s| s != 0.0))) {
        let short = crate::names::short_names(&[k.name.as_str()]).remove(0);
        match (k.total_change_pct, k.total_us) {
            (Some(p), [Some(x), Some(y)]) => parts.push(format!("{short} {} ({} \u{2192} {} us)", signed(p), fmt_num(x, Some(1)), fmt_num(y, Some(1)))),
            _ => {
                if let ([Some(x), Some(y)], Some(d)) = (k.share_pct, k.share_change_pts) {
                    parts.push(format!(
                        "{short} share {}{} pts ({}% \u{2192} {}%)",
                        if d < 0.0 { "\u{2212}" } else { "+" },
                        fmt_num(d.abs(), Some(1)),
                        fmt_num(x, Some(1)),
                        fmt_num(y, Some(1))
                    ));
                }
            }
        }
    }
    let count = |s: DeltaStatus| kernels.iter().filter(|k| k.status == s).count();
    let plural = |n: usize| if n == 1 { "kernel" } else { "kernels" };
    let names = |s: DeltaStatus| {
        kernels.iter().filter(|k| k.status == s).map(|k| crate::names::short_names(&[k.name.as_str()]).remove(0)).collect::<Vec<_>>().join(", ")
    };
    for s in [DeltaStatus::Vanished, DeltaStatus::Appeared] {
        let n = count(s);
        if n > 0 {
            parts.push(format!("{n} {} {s} ({})", plural(n), names(s)));
        }
    }
    format!("{phase}: {}", parts.join("; "))
}

/// Text (or markdown) of the comparison: the lead first, then warnings and the kernel table.
pub fn compare_doc(c: &FitCompare, md: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let show = |s: &Side| format!("{} ({})", s.source.as_deref().unwrap_or(&s.row_id), s.product.as_deref().or(s.arch.as_deref()).unwrap_or("-"));
    if md {
        let _ = writeln!(o, "# katlas fit --baseline\n\n**{}**\n", c.lead);
        let _ = writeln!(o, "- baseline: {}\n- candidate: {}", show(&c.baseline), show(&c.candidate));
    } else {
        let _ = writeln!(o, "{}", c.lead);
        let _ = writeln!(o, "  baseline   {}\n  candidate  {}", show(&c.baseline), show(&c.candidate));
    }
    for w in &c.warnings {
        let _ = writeln!(o, "{}warning: {w}", if md { "- " } else { "  " });
    }
    for m in &c.metrics {
        let _ = writeln!(
            o,
            "{}{}: {} \u{2192} {} ({})",
            if md { "- " } else { "  " },
            m.metric,
            fmt_num(m.baseline, None),
            fmt_num(m.candidate, None),
            signed(m.change_pct)
        );
    }
    let f = |v: Option<f64>, d: usize| v.map(|x| fmt_num(x, Some(d))).unwrap_or_else(|| "-".into());
    let u = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    let mut rows = vec![["kernel", "status", "time us", "change", "calls", "share %", "GB/s"].map(String::from).to_vec()];
    let shorts = crate::names::short_names(&c.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>());
    for (k, short) in c.kernels.iter().zip(shorts) {
        rows.push(vec![
            short,
            k.status.to_string(),
            format!("{} \u{2192} {}", f(k.total_us[0], 1), f(k.total_us[1], 1)),
            k.total_change_pct.map(signed).unwrap_or_else(|| "-".into()),
            format!("{} \u{2192} {}", u(k.calls[0]), u(k.calls[1])),
            format!("{} \u{2192} {}", f(k.share_pct[0], 1), f(k.share_pct[1], 1)),
            format!("{} \u{2192} {}", f(k.bw_gbps[0], 1), f(k.bw_gbps[1], 1)),
        ]);
    }
    let _ = writeln!(o);
    if md {
        for (i, r) in rows.iter().enumerate() {
            let _ = writeln!(o, "| {} |", r.join(" | "));
            if i == 0 {
                let _ = writeln!(o, "|{}", "---|".repeat(r.len()));
            }
        }
    } else {
        let widths: Vec<usize> = (0..rows[0].len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
        for r in &rows {
            let line: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
            let _ = writeln!(o, "  {}", line.join("  ").trim_end());
        }
    }
    o
}
