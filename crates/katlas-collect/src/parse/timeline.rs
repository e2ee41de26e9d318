//! A trace's timeline read the way a kernel engineer reads it first: how much of the window
//! the GPU was busy, how long it waited between kernels, how many launches each step took
//! and how long the host spent per launch. Rules (launch APIs, step markers) are data:
//! `data/timeline.toml`.

use katlas_model::Metric;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const BUILTIN: &str = include_str!("../../../../data/timeline.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineRules {
    pub schema: String,
    pub launch_apis: Vec<String>,
    pub step_annotation_prefix: String,
    pub step_ops: Vec<String>,
}

/// The embedded rules (a parse error in the shipped data is a test failure, not a user error).
pub fn rules() -> &'static TimelineRules {
    static R: OnceLock<TimelineRules> = OnceLock::new();
    R.get_or_init(|| toml::from_str(BUILTIN).expect("data/timeline.toml"))
}

/// Busy time, window and idle gaps of kernel intervals `(start_us, duration_us)` on one GPU.
/// Overlapping kernels (several streams) count once; a gap is the time from the latest end
/// so far to the next start (0 when they overlap).
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    pub busy_us: f64,
    pub window_us: f64,
    pub gaps_us: Vec<f64>,
}

pub fn busy(intervals: &mut [(f64, f64)]) -> Option<Busy> {
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, _) = *intervals.first()?;
    let mut end = f64::NEG_INFINITY;
    let mut busy = 0.0;
    let mut gaps = Vec::with_capacity(intervals.len());
    for &(ts, dur) in intervals.iter() {
        let e = ts + dur.max(0.0);
        if end > f64::NEG_INFINITY {
            gaps.push((ts - end).max(0.0));
        }
        // Only the part past the latest end is new busy time.
        busy += (e - ts.max(end)).max(0.0);
        end = end.max(e);
    }
    Some(Busy { busy_us: busy, window_us: end - first, gaps_us: gaps })
}

/// The q-quantile (0..1) of `v` by nearest rank; `None` when empty.
pub fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

/// Timeline metrics of one phase (names are the fit signals of the same name).
pub fn metrics(b: &Busy, launches: u64, host_launch: Option<(f64, u64)>, steps: Option<u64>) -> BTreeMap<String, Metric> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64, u: Option<&str>| {
        m.insert(k.to_string(), Metric::new(v, u));
    };
    put("gpu_busy_us", b.busy_us, Some("us"));
    put("timeline_window_us", b.window_us, Some("us"));
    if b.window_us > 0.0 {
        put("gpu_busy_pct", 100.0 * b.busy_us / b.window_us, Some("%"));
    }
    let mut g = b.gaps_us.clone();
    if let Some(x) = quantile(&mut g, 0.5) {
        put("gap_median_us", x, Some("us"));
    }
    if let Some(x) = quantile(&mut g, 0.9) {
        put("gap_p90_us", x, Some("us"));
    }
    put("launches", launches as f64, Some("launches"));
    if launches > 0 {
        put("kernel_avg_us", b.busy_us / launches as f64, Some("us"));
    }
    if let Some((total, n)) = host_launch.filter(|(_, n)| *n > 0) {
        put("host_launch_us", total / n as f64, Some("us"));
        put("host_launch_calls", n as f64, Some("calls"));
    }
    if let Some(s) = steps.filter(|s| *s > 0) {
        put("steps", s as f64, Some("steps"));
        put("launches_per_step", launches as f64 / s as f64, Some("launches"));
        put("step_us", b.window_us / s as f64, Some("us"));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_counts_overlap_once_and_gaps_from_the_latest_end() {
        let mut v = vec![(10.0, 5.0), (0.0, 4.0), (12.0, 10.0), (30.0, 1.0)];
        let b = busy(&mut v).unwrap();
        assert_eq!(b.window_us, 31.0);
        assert_eq!(b.busy_us, 4.0 + 12.0 + 1.0);
        assert_eq!(b.gaps_us, vec![6.0, 0.0, 8.0]);
        assert!(busy(&mut []).is_none());
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&mut v, 0.5), Some(5.0));
        assert_eq!(quantile(&mut v, 0.9), Some(9.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn shipped_rules_parse() {
        let r = rules();
        assert_eq!(r.schema, "katlas.rules.timeline.v1");
        assert!(r.launch_apis.iter().any(|a| a == "cudaLaunchKernel") && r.launch_apis.iter().any(|a| a == "hipLaunchKernel"));
        assert!(r.step_ops.iter().any(|o| o == "aten::embedding"));
    }
}
