//! The report's plots as inline SVG (maud escapes every label). Each plot is an `<svg
//! class="plot">` whose data marks carry `class="mark"`: the browser test checks that each
//! plot and each mark renders.

use crate::data::EvalDist;
use crate::roofline::Roofline;
use crate::svg::{num, px, Axis};
use katlas_advise::FitView;
use katlas_model::text::printable;
use katlas_store::trend::Trend;
use maud::{html, Markup};

const W: f64 = 720.0;
const COLORS: [&str; 6] = ["#3366aa", "#cc6633", "#449944", "#aa3377", "#777777", "#bbaa22"];

/// At most `n` characters, with an ellipsis when cut.
fn cut(s: &str, n: usize) -> String {
    let s = printable(s);
    if s.chars().count() <= n {
        return s.into_owned();
    }
    let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn frame(x: &Axis, y: &Axis, x_label: &str, y_label: &str, x_ticks: &[(f64, String)], y_ticks: &[(f64, String)]) -> Markup {
    let (x0, x1, y0, y1) = (x.px_lo, x.px_hi, y.px_lo, y.px_hi);
    html! {
        g class="axes" {
            rect x=(px(x0)) y=(px(y1)) width=(px(x1 - x0)) height=(px(y0 - y1)) fill="#fcfcfc" stroke="#bbb" {}
            @for (v, label) in x_ticks {
                line x1=(px(x.at(*v))) x2=(px(x.at(*v))) y1=(px(y0)) y2=(px(y1)) stroke="#eee" {}
                text x=(px(x.at(*v))) y=(px(y0 + 14.0)) text-anchor="middle" class="tick" { (label) }
            }
            @for (v, label) in y_ticks {
                line x1=(px(x0)) x2=(px(x1)) y1=(px(y.at(*v))) y2=(px(y.at(*v))) stroke="#eee" {}
                text x=(px(x0 - 4.0)) y=(px(y.at(*v) + 4.0)) text-anchor="end" class="tick" { (label) }
            }
            text x=(px((x0 + x1) / 2.0)) y=(px(y0 + 30.0)) text-anchor="middle" class="axis-label" { (x_label) }
            text x=(px(12.0)) y=(px((y0 + y1) / 2.0)) text-anchor="middle" class="axis-label" transform=(format!("rotate(-90 12 {})", px((y0 + y1) / 2.0))) { (y_label) }
        }
    }
}

fn ticks(a: &Axis) -> Vec<(f64, String)> {
    a.ticks().into_iter().map(|v| (v, num(v))).collect()
}

/// Horizontal bars of the fit's kernels by share of the phase's GPU time.
pub fn share_bars(fit: &FitView, max: usize) -> Markup {
    let ks: Vec<_> = fit.kernels.iter().filter(|k| k.share_pct.is_some()).take(max).collect();
    let row_h = 18.0;
    let (left, right) = (330.0, W - 70.0);
    let h = 20.0 + row_h * ks.len() as f64;
    let top = ks.iter().filter_map(|k| k.share_pct).fold(0.0f64, f64::max).max(1.0);
    let x = Axis { lo: 0.0, hi: top, log: false, px_lo: left, px_hi: right };
    html! {
        svg class="plot" id="plot-shares" role="img" xmlns="http://www.w3.org/2000/svg" width=(W) height=(h) viewBox=(format!("0 0 {W} {h}")) {
            title { "kernel share of the phase's GPU time" }
            @for (i, k) in ks.iter().enumerate() {
                @let y = 10.0 + row_h * i as f64;
                @let s = k.share_pct.unwrap_or(0.0);
                text x=(px(left - 6.0)) y=(px(y + 12.0)) text-anchor="end" class="label" { (cut(shown_name(k), 48)) }
                rect class="mark" x=(px(left)) y=(px(y + 2.0)) width=(px((x.at(s) - left).max(1.0))) height=(px(row_h - 5.0)) fill=(COLORS[0]) {
                    title { (printable(&k.name)) ": " (num(s)) "% of GPU time" }
                }
                text x=(px(x.at(s) + 4.0)) y=(px(y + 12.0)) class="value" { (num(s)) "%" }
            }
        }
    }
}

/// The view's readable name of a kernel (unique within the view), else its full name.
pub fn shown_name(k: &katlas_advise::fit::KernelFit) -> &str {
    if k.short_name.is_empty() {
        &k.name
    } else {
        &k.short_name
    }
}

/// Log-log roofline: attainable TFLOP/s against FLOPs per byte, with each placed kernel.
pub fn roofline(r: &Roofline, id: &str) -> Markup {
    let h = 340.0;
    let placed: Vec<(usize, &crate::roofline::RoofKernel)> = r.kernels.iter().enumerate().filter(|(_, k)| k.intensity.is_some()).collect();
    let peak_bw = r.bandwidth.iter().map(|c| c.value).fold(0.0f64, f64::max);
    let ridges = r.compute.iter().filter(|_| peak_bw > 0.0).map(|c| c.value * 1e3 / peak_bw);
    let xs: Vec<f64> = placed.iter().filter_map(|(_, k)| k.intensity).chain(ridges.clone().map(|v| v * 8.0)).chain(ridges.map(|v| v / 100.0)).collect();
    let xs = if xs.is_empty() { vec![0.1, 1000.0] } else { xs };
    let x = Axis::log(xs.iter().copied(), 70.0, W - 20.0);
    let ys: Vec<f64> = placed
        .iter()
        .filter_map(|(_, k)| k.tflops)
        .chain(r.compute.iter().map(|c| c.value * 2.0))
        .chain(r.bandwidth.iter().map(|c| x.lo * c.value / 1e3))
        .collect();
    let ys = if ys.is_empty() { vec![0.1, 10.0] } else { ys };
    let y = Axis::log(ys.iter().copied(), h - 45.0, 12.0);
    let top = r.compute.first().map(|c| c.value).unwrap_or(y.hi);
    html! {
        svg class="plot" id=(id) role="img" xmlns="http://www.w3.org/2000/svg" width=(W) height=(h) viewBox=(format!("0 0 {W} {h}")) {
            title { "roofline of " (printable(&r.device)) }
            (frame(&x, &y, "arithmetic intensity (FLOP/byte)", "TFLOP/s", &ticks(&x), &ticks(&y)))
            @for (i, c) in r.bandwidth.iter().enumerate() {
                // The memory roof rises to the top compute roof, then the compute roof takes over.
                @let x_end = (top * 1e3 / c.value).min(x.hi);
                line class="mark roof" x1=(px(x.at(x.lo))) y1=(px(y.at(x.lo * c.value / 1e3))) x2=(px(x.at(x_end))) y2=(px(y.at(x_end * c.value / 1e3)))
                    stroke=(if i == 0 { "#222" } else { "#888" }) stroke-width="2" stroke-dasharray=(if i == 0 { "none" } else { "6 3" }) {
                    title { (c.label) " bandwidth " (num(c.value)) " GB/s (" (c.source) ")" }
                }
                text x=(px(x.at(x.lo) + 6.0)) y=(px(y.at(x.lo * c.value / 1e3) + if i == 0 { -6.0 } else { 14.0 * i as f64 })) class="roof-label" { (num(c.value)) " GB/s " (c.label) }
            }
            @for (i, c) in r.compute.iter().enumerate() {
                @let x_start = if peak_bw > 0.0 { (c.value * 1e3 / peak_bw).max(x.lo) } else { x.lo };
                line class="mark roof" x1=(px(x.at(x_start))) y1=(px(y.at(c.value))) x2=(px(x.at(x.hi))) y2=(px(y.at(c.value)))
                    stroke=(COLORS[(i + 1) % COLORS.len()]) stroke-width="2" {
                    title { (c.label) " peak " (num(c.value)) " TFLOP/s (" (c.source) ")" }
                }
                text x=(px(x.at(x.hi) - 4.0)) y=(px(y.at(c.value) - 4.0)) text-anchor="end" class="roof-label" { (c.label) " " (num(c.value)) " TFLOP/s" }
            }
            @for (i, k) in &placed {
                @let (ai, tf) = (k.intensity.unwrap_or(1.0), k.tflops.unwrap_or(1.0));
                circle class="mark kernel" cx=(px(x.at(ai))) cy=(px(y.at(tf))) r="5" fill=(COLORS[0]) fill-opacity="0.75" stroke="#fff" {
                    title { (printable(&k.name)) ": " (num(ai)) " FLOP/byte, " (num(tf)) " TFLOP/s" }
                }
                text x=(px(x.at(ai) + 7.0)) y=(px(y.at(tf) - 5.0)) class="point-label" { (i + 1) }
            }
        }
    }
}

/// A metric by commit: every sample, the medians joined, change points marked where they entered.
pub fn trend(t: &Trend, id: &str) -> Markup {
    let h = 200.0;
    let n = t.groups.len().max(1);
    let x = Axis { lo: -0.5, hi: n as f64 - 0.5, log: false, px_lo: 70.0, px_hi: W - 20.0 };
    let y = Axis::linear(t.groups.iter().flat_map(|g| g.values.iter().copied()), h - 50.0, 12.0);
    let every = n.div_ceil(12);
    let x_ticks: Vec<(f64, String)> = t.groups.iter().enumerate().filter(|(i, _)| i % every == 0).map(|(i, g)| (i as f64, cut(&g.key, 10))).collect();
    let medians: Vec<String> = t.groups.iter().enumerate().map(|(i, g)| format!("{},{}", px(x.at(i as f64)), px(y.at(g.median)))).collect();
    html! {
        svg class="plot" id=(id) role="img" xmlns="http://www.w3.org/2000/svg" width=(W) height=(h) viewBox=(format!("0 0 {W} {h}")) {
            title { (printable(&t.metric)) " by " (t.by) }
            (frame(&x, &y, t.by, &cut(&t.metric, 30), &x_ticks, &ticks(&y)))
            @for cp in &t.change_points {
                @let xc = x.at(cp.index as f64 - 0.5);
                line class="mark change" x1=(px(xc)) x2=(px(xc)) y1=(px(y.px_lo)) y2=(px(y.px_hi)) stroke="#cc3333" stroke-width="2" stroke-dasharray="5 3" {
                    title { (format!("{:+.1}%", 100.0 * cp.relative_change)) " entered at " (t.by) " " (printable(&cp.key)) }
                }
            }
            @if t.groups.len() > 1 {
                polyline class="mark" points=(medians.join(" ")) fill="none" stroke="#999" stroke-width="1.5" {}
            }
            @for (i, g) in t.groups.iter().enumerate() {
                @for (j, v) in g.values.iter().enumerate() {
                    // A small fixed spread so equal values of one commit stay visible.
                    @let dx = ((j % 5) as f64 - 2.0) * 2.0;
                    circle class="mark" cx=(px(x.at(i as f64) + dx)) cy=(px(y.at(*v))) r="3" fill=(COLORS[0]) fill-opacity="0.6" {
                        title { (printable(&g.key)) ": " (num(*v)) }
                    }
                }
            }
        }
    }
}

/// An eval's measured samples per side on one axis, each side's median and its interval.
pub fn eval_dist(e: &EvalDist, id: &str) -> Markup {
    let row_h = 44.0;
    let h = 50.0 + row_h * e.sides.len() as f64;
    let all = e.sides.iter().flat_map(|s| s.values.iter().copied().chain(s.ci.into_iter().flatten()).chain(s.median));
    let x = Axis::linear(all, 130.0, W - 20.0);
    let y = Axis { lo: 0.0, hi: e.sides.len() as f64, log: false, px_lo: h - 40.0, px_hi: 10.0 };
    html! {
        svg class="plot" id=(id) role="img" xmlns="http://www.w3.org/2000/svg" width=(W) height=(h) viewBox=(format!("0 0 {W} {h}")) {
            title { "samples of eval " (printable(&e.eval_id)) }
            (frame(&x, &y, &cut(e.judged.metric.as_deref().unwrap_or("value"), 40), "", &ticks(&x), &[]))
            @for (i, s) in e.sides.iter().enumerate() {
                @let yc = y.at(e.sides.len() as f64 - i as f64 - 0.5);
                text x=(px(x.px_lo - 6.0)) y=(px(yc + 4.0)) text-anchor="end" class="label" { (cut(&s.label, 18)) }
                @if let Some([lo, hi]) = s.ci {
                    rect class="mark ci" x=(px(x.at(lo))) y=(px(yc - 9.0)) width=(px((x.at(hi) - x.at(lo)).max(2.0))) height="18" fill=(COLORS[i % COLORS.len()]) fill-opacity="0.18" {
                        title { (printable(&s.label)) ": interval of the median [" (num(lo)) ", " (num(hi)) "]" }
                    }
                }
                @for (j, v) in s.values.iter().enumerate() {
                    @let dy = ((j % 7) as f64 - 3.0) * 2.2;
                    circle class="mark" cx=(px(x.at(*v))) cy=(px(yc + dy)) r="3" fill=(COLORS[i % COLORS.len()]) fill-opacity="0.7" {
                        title { (printable(&s.label)) ": " (num(*v)) }
                    }
                }
                @if let Some(m) = s.median {
                    line class="mark median" x1=(px(x.at(m))) x2=(px(x.at(m))) y1=(px(yc - 13.0)) y2=(px(yc + 13.0)) stroke="#000" stroke-width="2" {
                        title { (printable(&s.label)) ": median " (num(m)) }
                    }
                }
            }
        }
    }
}
