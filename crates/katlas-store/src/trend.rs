//! `katlas trend`: a metric's history grouped by commit, day or host, and the change points in
//! it, judged against the noise of the stored samples themselves (no fixed percentage floor).
//!
//! Method (binary segmentation on log values): the per-sample noise σ is the pooled
//! within-group standard deviation (groups of ≥ 2 samples; with none, the median absolute
//! successive difference of group means, scaled). For every split of a segment of groups into
//! before/after, each side's mean is the inverse-variance weighted mean of its group means,
//! each group weighing 1/(σ²/n + τ²) where τ² is the between-group variance beyond what σ
//! explains (so commits that differ a little among themselves do not pass for a step). The
//! split with the largest |z| = |μ_after − μ_before| / se is a change point when |z| exceeds
//! the two-sided normal quantile at α/(splits) (Bonferroni over the splits looked at, α =
//! 0.001); both sides are then searched again.

pub const ALPHA: f64 = 0.001;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Commit,
    Day,
    Host,
}

impl By {
    pub fn column(self) -> &'static str {
        match self {
            By::Commit => "COALESCE(commit_sha, commit_short, 'unknown')",
            By::Day => "day",
            By::Host => "COALESCE(host, 'unknown')",
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            By::Commit => "commit",
            By::Day => "day",
            By::Host => "host",
        }
    }
}

/// One group of samples (a commit, a day, a host), in order of its first sample.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Group {
    pub key: String,
    pub first_at: String,
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation, relative to the mean (`null` for one sample).
    pub cv: Option<f64>,
    pub values: Vec<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ChangePoint {
    /// Index of the first group after the change.
    pub index: usize,
    /// The group (commit, day, host) where the change entered.
    pub key: String,
    /// The last group before it.
    pub previous: String,
    pub before: f64,
    pub after: f64,
    /// after / before − 1, on the weighted geometric means.
    pub relative_change: f64,
    pub z: f64,
    pub threshold: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Trend {
    pub metric: String,
    pub by: &'static str,
    pub samples: usize,
    /// Per-sample noise σ of log values (≈ relative standard deviation).
    pub noise: Option<f64>,
    /// How `noise` was estimated: `within-group` or `successive-differences`.
    pub noise_basis: Option<&'static str>,
    pub groups: Vec<Group>,
    pub change_points: Vec<ChangePoint>,
}

/// Group `(key, captured_at, value)` samples (sorted by time) by key, in order of first appearance.
pub fn group(samples: &[(String, String, f64)]) -> Vec<Group> {
    let mut order: Vec<String> = Vec::new();
    let mut map: std::collections::HashMap<&str, (String, Vec<f64>)> = std::collections::HashMap::new();
    for (k, at, v) in samples {
        if !v.is_finite() {
            continue;
        }
        let e = map.entry(k.as_str()).or_insert_with(|| {
            order.push(k.clone());
            (at.clone(), Vec::new())
        });
        e.1.push(*v);
    }
    order
        .into_iter()
        .map(|k| {
            let (first_at, values) = map.remove(k.as_str()).unwrap_or_default();
            let n = values.len();
            let mean = katlas_stats::mean(&values);
            let median = katlas_stats::median(&values);
            let cv = (n > 1).then(|| katlas_stats::variance(&values).sqrt() / mean.abs());
            Group { key: k, first_at, n, mean, median, cv, values }
        })
        .collect()
}

struct G {
    m: f64,
    n: f64,
}

/// Per-sample σ of log values: pooled within groups, else from successive group means.
pub fn noise(groups: &[Group]) -> Option<(f64, &'static str)> {
    let (mut ss, mut df) = (0.0, 0.0);
    for g in groups.iter().filter(|g| g.n > 1 && g.values.iter().all(|v| *v > 0.0)) {
        let logs: Vec<f64> = g.values.iter().map(|v| v.ln()).collect();
        let m = logs.iter().sum::<f64>() / logs.len() as f64;
        ss += logs.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        df += (logs.len() - 1) as f64;
    }
    if df > 0.0 {
        return Some(((ss / df).sqrt(), "within-group"));
    }
    let means: Vec<f64> = groups.iter().filter(|g| g.mean > 0.0).map(|g| g.mean.ln()).collect();
    if means.len() < 3 {
        return None;
    }
    let mut d: Vec<f64> = means.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    d.sort_by(f64::total_cmp);
    // median |difference| of two N(0, σ²) draws is 0.6745·√2·σ.
    Some((d[d.len() / 2] / (0.6745 * std::f64::consts::SQRT_2), "successive-differences"))
}

/// Weighted mean and its variance of group log-means, given per-sample σ² and excess τ².
fn side(gs: &[G], s2: f64, tau2: f64) -> (f64, f64) {
    let (mut wsum, mut wm) = (0.0, 0.0);
    for g in gs {
        let w = 1.0 / (s2 / g.n + tau2).max(1e-300);
        wsum += w;
        wm += w * g.m;
    }
    (wm / wsum, 1.0 / wsum)
}

fn best_split(gs: &[G], s2: f64) -> Option<(usize, f64, f64, f64)> {
    let mut best: Option<(usize, f64, f64, f64)> = None;
    for k in 1..gs.len() {
        let (a, b) = gs.split_at(k);
        // τ²: spread of group means around their side's (unweighted) mean beyond σ²/n.
        let resid = |x: &[G]| {
            let m = x.iter().map(|g| g.m).sum::<f64>() / x.len() as f64;
            x.iter().map(|g| (g.m - m).powi(2) - s2 / g.n).sum::<f64>()
        };
        let dof = gs.len() as f64 - 2.0;
        let tau2 = if dof > 0.0 { ((resid(a) + resid(b)) / dof).max(0.0) } else { 0.0 };
        let (ma, va) = side(a, s2, tau2);
        let (mb, vb) = side(b, s2, tau2);
        let z = (mb - ma) / (va + vb).sqrt();
        if best.is_none_or(|(_, bz, _, _)| z.abs() > bz.abs()) {
            best = Some((k, z, ma, mb));
        }
    }
    best
}

fn segment(gs: &[G], offset: usize, s2: f64, out: &mut Vec<(usize, f64, f64, f64, f64)>) {
    if gs.len() < 2 {
        return;
    }
    let Some((k, z, ma, mb)) = best_split(gs, s2) else { return };
    let p = ALPHA / (2.0 * (gs.len() - 1) as f64);
    let crit = katlas_stats::z_quantile(1.0 - p);
    if z.is_finite() && z.abs() > crit {
        out.push((offset + k, z, ma, mb, crit));
        segment(&gs[..k], offset, s2, out);
        segment(&gs[k..], offset + k, s2, out);
    }
}

pub fn analyse(metric: &str, by: By, samples: &[(String, String, f64)]) -> Trend {
    let groups = group(samples);
    let noise = noise(&groups);
    let mut cps = Vec::new();
    if let Some((sigma, _)) = noise {
        if groups.iter().all(|g| g.mean > 0.0) {
            let gs: Vec<G> = groups.iter().map(|g| G { m: g.values.iter().map(|v| v.ln()).sum::<f64>() / g.n as f64, n: g.n as f64 }).collect();
            let mut found = Vec::new();
            segment(&gs, 0, (sigma * sigma).max(1e-24), &mut found);
            found.sort_by_key(|f| f.0);
            for (i, z, ma, mb, crit) in found {
                cps.push(ChangePoint {
                    index: i,
                    key: groups[i].key.clone(),
                    previous: groups[i - 1].key.clone(),
                    before: ma.exp(),
                    after: mb.exp(),
                    relative_change: (mb - ma).exp() - 1.0,
                    z,
                    threshold: crit,
                });
            }
        }
    }
    Trend {
        metric: metric.to_string(),
        by: by.as_str(),
        samples: groups.iter().map(|g| g.n).sum(),
        noise: noise.map(|n| n.0),
        noise_basis: noise.map(|n| n.1),
        groups,
        change_points: cps,
    }
}

/// The metric's samples from the index (measured, ok rows), oldest first.
pub fn load(conn: &rusqlite::Connection, metric: &str, workload: Option<&str>, phase: Option<&str>, by: By) -> rusqlite::Result<Vec<(String, String, f64)>> {
    let sql = format!(
        "SELECT {}, captured_at, value FROM row_metrics WHERE metric = ?1 AND (?2 IS NULL OR workload = ?2) AND (?3 IS NULL OR phase = ?3) \
         AND value IS NOT NULL ORDER BY captured_at, row_id",
        by.column()
    );
    let mut st = conn.prepare(&sql)?;
    let rows = st.query_map(rusqlite::params![metric, workload, phase], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    rows.collect()
}
