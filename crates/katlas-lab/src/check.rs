//! Output checks against the f64 oracle: elementwise relative error against
//! max(|ref|, rms(ref)), a normwise error, and on failure a histogram of bad cells by
//! row mod 16 and by lane (index mod 32 within the row), which points at indexing bugs.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub pass: bool,
    pub tolerance: f64,
    pub max_rel: f64,
    pub norm_rel: f64,
    pub bad: usize,
    pub cells: usize,
    /// First bad cell: (index, got, want).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_bad: Option<(usize, f64, f64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hist_row_mod16: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hist_lane: Option<Vec<usize>>,
}

impl CheckResult {
    pub fn summary(&self) -> String {
        if self.pass {
            format!("pass (max_rel {:.2e} <= {:.0e})", self.max_rel, self.tolerance)
        } else {
            let mut s = format!(
                "FAIL: {} of {} cells over {:.0e} (max_rel {:.2e}, norm_rel {:.2e})",
                self.bad, self.cells, self.tolerance, self.max_rel, self.norm_rel
            );
            if let Some((i, g, w)) = self.first_bad {
                s += &format!("; first bad cell {i}: got {g} want {w}");
            }
            if let Some(h) = &self.hist_row_mod16 {
                s += &format!("; bad by row%16 {h:?}");
            }
            if let Some(h) = &self.hist_lane {
                s += &format!("; bad by lane {h:?}");
            }
            s
        }
    }
}

/// `row_len` is the length of one output row (1 for vectors whose cells are rows).
pub fn compare(got: &[f32], want: &[f64], row_len: usize, tol: f64) -> CheckResult {
    let cells = want.len();
    let mut res = CheckResult {
        pass: false,
        tolerance: tol,
        max_rel: f64::INFINITY,
        norm_rel: f64::INFINITY,
        bad: cells,
        cells,
        first_bad: None,
        hist_row_mod16: None,
        hist_lane: None,
    };
    if got.len() != want.len() || cells == 0 {
        res.first_bad = Some((got.len().min(want.len()), f64::NAN, f64::NAN));
        return res;
    }
    let rms = (want.iter().map(|v| v * v).sum::<f64>() / cells as f64).sqrt();
    let floor = rms.max(f64::MIN_POSITIVE);
    let (mut num, mut den, mut max_rel, mut bad) = (0.0f64, 0.0f64, 0.0f64, 0usize);
    let mut hrow = vec![0usize; 16];
    let mut hlane = vec![0usize; 32];
    let mut first = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g = g as f64;
        let d = (g - w).abs();
        let rel = if g.is_finite() { d / w.abs().max(floor) } else { f64::INFINITY };
        num += if d.is_finite() { d * d } else { f64::INFINITY };
        den += w * w;
        if rel > max_rel || rel.is_nan() {
            max_rel = if rel.is_nan() { f64::INFINITY } else { rel };
        }
        // NaN compares false, so a NaN cell is bad too.
        let within = rel <= tol;
        if !within {
            bad += 1;
            let (row, col) = if row_len <= 1 { (i, i) } else { (i / row_len, i % row_len) };
            hrow[row % 16] += 1;
            hlane[col % 32] += 1;
            if first.is_none() {
                first = Some((i, g, w));
            }
        }
    }
    res.max_rel = max_rel;
    res.norm_rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
    res.bad = bad;
    res.pass = bad == 0;
    if bad > 0 {
        res.first_bad = first;
        res.hist_row_mod16 = Some(hrow);
        res.hist_lane = Some(hlane);
    }
    res
}

/// Median, min, max of samples (microseconds).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

pub fn stats(samples: &[f64]) -> Stats {
    let v = katlas_stats::sorted(samples);
    let n = v.len();
    if n == 0 {
        return Stats { median: f64::NAN, min: f64::NAN, max: f64::NAN, n };
    }
    Stats { median: katlas_stats::median(&v), min: v[0], max: v[n - 1], n }
}
