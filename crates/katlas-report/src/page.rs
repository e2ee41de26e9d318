//! The page: sections in a fixed order, each with its plot(s) and table, or a line saying why
//! it is empty.

use crate::data::{EvalDist, LedgerRow};
use crate::plots::{self, shown_name};
use crate::roofline::Roofline;
use crate::svg::num;
use crate::{ChosenFit, Report, Section};
use katlas_advise::{render, FitView};
use katlas_model::ledger::{gain_interval_text, gain_range_text, gain_text, level_text};
use katlas_model::text::{printable, printable_lines};
use katlas_store::trend::Trend;
use maud::{html, Markup, PreEscaped, DOCTYPE};

const STYLE: &str = "body{font-family:sans-serif;max-width:60em;margin:1.5em auto;padding:0 1em;color:#222}\
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1em}\
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{padding:.15em .5em;text-align:left;border-bottom:1px solid #eee;vertical-align:top}\
td.n{text-align:right;font-variant-numeric:tabular-nums}.empty{color:#666;font-style:italic}.note{color:#555;font-size:.9em}\
.full{color:#777;font-size:.85em}td.src{color:#666;font-size:.8em}pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em;font-size:.8em}nav a{margin-right:1em}\
svg.plot{display:block;margin:.5em 0;font-size:11px}svg .tick{fill:#555}svg .axis-label{fill:#333;font-size:12px}\
svg .label,svg .value,svg .roof-label,svg .point-label{fill:#222}.name{font-family:monospace;word-break:break-all}";

/// No scripts, no fetches of any kind: the page is complete as written.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_else(|| "-".into())
}

/// A gain (+ = better) as `katlas eval` prints it.
fn gain(v: Option<f64>) -> String {
    v.map(gain_text).unwrap_or_else(|| "-".into())
}

/// A gain interval with its level, as `katlas eval` prints it.
fn gain_interval(g: Option<([f64; 2], f64)>) -> String {
    g.map(|(ci, level)| gain_interval_text(ci, level)).unwrap_or_else(|| "-".into())
}

fn text(v: &Option<String>) -> String {
    v.as_deref().map(|s| printable(s).into_owned()).unwrap_or_else(|| "-".into())
}

/// A kernel's readable name, and its full name beneath when that differs (the full name is
/// what the files say; the short one may drop template arguments or markup-like parts).
fn name_cell(short: &str, full: &str) -> Markup {
    html! {
        (printable(short))
        @if short != full {
            // Long demangled templates fold away; a name that fits is shown as it is.
            @if full.chars().count() <= 120 { div class="full" { (printable(full)) } }
            @else { details class="full" { summary { "full name" } (printable(full)) } }
        }
    }
}

fn empty(why: &str) -> Markup {
    html! { p class="empty" { (why) } }
}

fn more<T>(s: &Section<T>, what: &str) -> Markup {
    html! {
        @if s.total > s.items.len() {
            p class="note" { (s.items.len()) " of " (s.total) " " (what) " are shown." }
        }
    }
}

/// A page of its own: the styles, the Content-Security-Policy, `title` as title and heading,
/// then `body`.
fn page(title: &str, body: Markup) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                (body)
            }
        }
    };
    markup.into_string()
}

/// The whole page.
pub fn render(r: &Report) -> String {
    page(
        &format!("katlas report: {}", printable(&r.project)),
        html! {
            p class="note" {
                "Generated " (r.generated_at) " from " (r.rows) " corpus rows."
                @if r.bad_lines > 0 { " " (r.bad_lines) " bad lines or documents were not read (`katlas query \"SELECT * FROM errors\"`)." }
            }
            nav { a href="#fit" { "Fit" } a href="#shares" { "Kernel shares" } a href="#rooflines" { "Rooflines" } a href="#trends" { "Trends" } a href="#evals" { "Evals" } a href="#ledger" { "Ledger" } }
            (fit_section(&r.fit))
            (rooflines(&r.rooflines))
            (trends(&r.trends))
            (evals(&r.evals))
            (ledger(&r.ledger))
        },
    )
}

/// `katlas fit --format html`: the fit view and kernel shares of one fit, as the report shows
/// them, on a page of their own (the same styles and Content-Security-Policy).
pub fn fit_page(v: &FitView) -> String {
    let h = &v.header;
    let word = |s: &Option<String>| s.as_deref().map_or_else(|| "unknown".to_string(), |s| printable(s).into_owned());
    let title = format!("katlas fit: {} {} {}", word(&h.arch), word(&h.workload), word(&h.phase));
    let source = html! {
        @if let Some(s) = &h.row_source { "Row from " span class="name" { (printable(s)) } ": " }
    };
    page(&title, fit_sections(v, source))
}

fn fit_section(f: &Result<ChosenFit, String>) -> Markup {
    match f {
        Ok(c) => fit_sections(&c.fit, html! { "Row " span class="name" { (printable(&c.row_id)) } " (" (c.how) "): " }),
        Err(why) => html! {
            section id="fit" { h2 { "Fit view" } (empty(why)) }
            section id="shares" { h2 { "Kernel shares" } (empty(why)) }
        },
    }
}

/// The fit view's section and the kernel shares' section; `source` opens the line that says
/// which row the fit read.
fn fit_sections(v: &FitView, source: Markup) -> Markup {
    let h = &v.header;
    let nv = h.arch.as_deref().and_then(katlas_arch::Vendor::of_arch) == Some(katlas_arch::Vendor::Nvidia);
    let has_share = v.kernels.iter().any(|k| k.share_pct.is_some());
    html! {
        section id="fit" {
            h2 { "Fit view" }
            p {
                (source)
                b { (text(&h.workload)) } " " (text(&h.phase)) " on " (text(&h.product)) " (" (text(&h.arch)) ")"
                @if let Some(bw) = h.bw_ceiling_gbps { ", judged against " (num(bw)) " GB/s " (text(&h.bw_ceiling_label)) }
                "."
            }
            @if let Some(l) = v.likely_limit.first() {
                p { b { "Likely limit: " } (printable(&l.text)) }
            } @else {
                p class="empty" { "No limit rule fired for this row (see the evidence it is missing below)." }
            }
            @if v.kernels.is_empty() {
                (empty("The row has no kernels: it was not profiled (collect with --profile, or parse a profiler file)."))
            } @else {
                table {
                    tr {
                        th { "kernel" } th { "share" } th { "calls" } th { "avg µs" } th { "GB/s" } th { "% of bw" } th { "TFLOP/s" } th { "% of compute" }
                        th { (if nv { "registers/thread" } else { "VGPR" }) } th { "occupancy" }
                    }
                    @for k in &v.kernels {
                        tr {
                            td class="name" { (name_cell(shown_name(k), &k.name)) }
                            td class="n" { (opt(k.share_pct)) }
                            td class="n" { (k.calls.map(|c| c.to_string()).unwrap_or_else(|| "-".into())) }
                            td class="n" { (opt(k.avg_us)) }
                            td class="n" { (opt(k.throughput.bw_gbps)) }
                            td class="n" { (opt(k.throughput.bw_pct_of_peak)) }
                            td class="n" { (opt(k.throughput.tflops)) }
                            td class="n" { (opt(k.throughput.compute_pct_of_peak)) }
                            td class="n" { (k.isa.as_ref().and_then(|i| i.vgpr).map(|n| n.to_string()).unwrap_or_else(|| "-".into())) }
                            td { (k.occupancy.as_ref().map(|o| format!("{}/{} {} ({})", o.achieved, o.max, printable(&o.unit), printable(o.limiter.name()))).unwrap_or_else(|| "-".into())) }
                        }
                    }
                }
            }
            @if !v.evidence.missing.is_empty() {
                p class="note" { "Evidence that would let more rules decide:" }
                ul class="note" { @for m in &v.evidence.missing { li { (printable(&m.evidence)) } } }
            }
            details {
                summary { "The fit as `katlas fit` prints it" }
                pre { (printable_lines(&render::fit_text(v))) }
            }
        }
        section id="shares" {
            h2 { "Kernel shares" }
            @if has_share {
                p class="note" { "Share of the phase's GPU time per kernel (hottest 25)." }
                (plots::share_bars(v, 25))
            } @else if v.kernels.is_empty() {
                (empty("The row has no kernels, so no shares."))
            } @else {
                (empty("The row's kernels carry no share of the phase's time."))
            }
        }
    }
}

fn rooflines(s: &Section<Roofline>) -> Markup {
    html! {
        section id="rooflines" {
            h2 { "Rooflines" }
            @if s.items.is_empty() { (empty(&s.empty)) }
            @else {
                p class="note" {
                    "One roofline per product, from the arch database's ceilings, with the hottest kernels of that product's newest profiled row "
                    "at the FLOPs per byte and TFLOP/s the fit derived from their byte and FLOP counts."
                }
            }
            @for (i, r) in s.items.iter().enumerate() {
                h3 { (printable(&r.device)) }
                p class="note" { "Row " span class="name" { (text(&r.row_id)) } ": " (text(&r.workload)) " " (text(&r.phase)) "." }
                @if !(r.bandwidth.is_empty() && r.compute.is_empty()) {
                    table {
                        tr { th { "ceiling" } th { "value" } th { "source" } }
                        @for c in &r.bandwidth { tr { td { (c.label) " bandwidth" } td class="n" { (num(c.value)) " GB/s" } td class="src" { (printable(&c.source)) } } }
                        @for c in &r.compute { tr { td { (c.label) } td class="n" { (num(c.value)) " TFLOP/s" } td class="src" { (printable(&c.source)) } } }
                    }
                }
                @if let Some(n) = &r.note { p class="empty" { (printable(n)) } }
                @if r.bandwidth.is_empty() && r.compute.is_empty() {
                } @else { (plots::roofline(r, &format!("plot-roofline-{i}"))) }
                @if r.kernels.iter().all(|k| k.intensity.is_none()) {
                    (empty("No hot kernel of this row has both a byte and a FLOP count, so none is placed on the roofline."))
                }
                table {
                    tr { th { "#" } th { "kernel" } th { "share" } th { "GB/s" } th { "TFLOP/s" } th { "FLOP/byte" } th { "placed" } }
                    @for (j, k) in r.kernels.iter().enumerate() {
                        tr {
                            td class="n" { (j + 1) }
                            td class="name" { (name_cell(&k.short_name, &k.name)) }
                            td class="n" { (opt(k.share_pct)) }
                            td class="n" { (opt(k.bw_gbps)) @if let Some(s) = &k.bw_source { " (" (printable(s)) ")" } }
                            td class="n" { (opt(k.tflops)) }
                            td class="n" { (opt(k.intensity)) }
                            td { @match &k.unplaced { Some(why) => { "no: " (why) }, None => { "yes" } } }
                        }
                    }
                }
            }
        }
    }
}

fn trends(s: &Section<Trend>) -> Markup {
    html! {
        section id="trends" {
            h2 { "Trends" }
            @if s.items.is_empty() { (empty(&s.empty)) }
            @else { p class="note" { "Each metric of the fit's row over measured ok rows of its workload and phase, by commit in order of first sample; a red line marks a change point where it entered (noise from the stored samples, `katlas trend`)." } }
            @for (i, t) in s.items.iter().enumerate() {
                h3 { (printable(&t.metric)) }
                p class="note" {
                    (t.samples) " samples over " (t.groups.len()) " " (t.by) "s; "
                    @match t.noise { Some(n) => { "noise " (format!("{:.2}%", 100.0 * n)) " per sample (" (t.noise_basis.unwrap_or("")) "); " }, None => { "noise unknown (too few samples); " } }
                    @if t.change_points.is_empty() { "no change point." }
                    @for cp in &t.change_points {
                        (format!("{:+.1}%", 100.0 * cp.relative_change)) " entered at " (t.by) " " span class="name" { (printable(&cp.key)) } " (after " (printable(&cp.previous)) "). "
                    }
                }
                (plots::trend(t, &format!("plot-trend-{i}")))
            }
            (more(s, "metrics (those with change points, then those that vary, first)"))
        }
    }
}

fn evals(s: &Section<EvalDist>) -> Markup {
    html! {
        section id="evals" {
            h2 { "Evals" }
            @if s.items.is_empty() { (empty(&s.empty)) }
            @else { p class="note" { "Measured samples of each side (dots), the median (black tick) and its interval (shaded), as `katlas eval` recorded them." } }
            @for (i, e) in s.items.iter().enumerate() {
                h3 { "eval " span class="name" { (printable(&e.eval_id)) } }
                p class="note" {
                    (text(&e.created_at)) ": " (text(&e.judged.metric)) " (" (text(&e.judged.goal)) "), verdict " b { (text(&e.judged.verdict)) }
                    ", gain " (gain(e.judged.gain)) " (+ = better), interval " (gain_interval(e.judged.gain_interval()))
                    @if let Some(t) = &e.task_id { ", task " span class="name" { (printable(t)) } }
                    "."
                    @for sd in &e.sides {
                        @if sd.ci.is_none() { " " (printable(&sd.label)) ": no interval recorded." }
                        @if sd.failed > 0 { " " (printable(&sd.label)) ": " (sd.failed) " failed runs." }
                    }
                }
                @if e.sides.iter().all(|sd| sd.values.is_empty()) {
                    (empty("No measured sample of this eval has a value (samples.jsonl missing, or every run failed)."))
                } @else {
                    (plots::eval_dist(e, &format!("plot-eval-{i}")))
                }
            }
            (more(s, "evals (the newest)"))
        }
    }
}

fn ledger(s: &Section<LedgerRow>) -> Markup {
    // The header names the level when every interval shown has the same one (a fixed plan's
    // 95%); an adaptive eval's interval is at its look's level, so mixed rows each name theirs.
    let mut levels: Vec<String> = s.items.iter().filter_map(|e| e.judged.gain_interval()).map(|(_, l)| level_text(l)).collect();
    levels.sort();
    levels.dedup();
    let one_level = match levels.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    };
    let interval_head = match &one_level {
        Some(l) => format!("{l} gain interval"),
        None => "gain interval (level per row)".to_string(),
    };
    let interval_cell = |e: &LedgerRow| match (e.judged.gain_interval(), &one_level) {
        (Some((ci, _)), Some(_)) => gain_range_text(ci),
        (g, _) => gain_interval(g),
    };
    html! {
        section id="ledger" {
            h2 { "Ledger" }
            @if s.items.is_empty() { (empty(&s.empty)) } @else {
                table {
                    tr { th { "recorded" } th { "lever" } th { "kernel" } th { "arch" } th { "metric" } th { "verdict" } th { "gain (+ = better)" } th { (interval_head) } th { "baseline → candidate" } th { "disposition" } }
                    @for e in &s.items {
                        tr {
                            td { (text(&e.recorded_at)) }
                            td class="name" { (text(&e.lever)) }
                            td class="name" { (text(&e.kernel)) }
                            td { (text(&e.arch)) }
                            td { (text(&e.judged.metric)) }
                            td { b { (text(&e.judged.verdict)) } }
                            td class="n" { (gain(e.judged.gain)) }
                            td class="n" { (interval_cell(e)) }
                            td { (text(&e.baseline)) " → " (text(&e.candidate)) @if e.cross_host { " (cross-host)" } }
                            td { (text(&e.disposition)) }
                        }
                    }
                }
            }
            (more(s, "entries (the newest)"))
        }
    }
}
