//! Per-phase kernel summaries: calls, total, average, median, min/max and
//! share of the phase's GPU time, from per-dispatch durations.

use katlas_model::{KernelSample, Metric};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// One phase's kernel table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseTable {
    pub phase: String,
    /// Kernels, hottest first.
    #[serde(default)]
    pub kernels: Vec<KernelSample>,
    /// Total as the tool reports it (hipfire `TOTAL (serialized)`), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_total_us: Option<f64>,
    /// Sum of the kernels' GPU time, microseconds.
    #[serde(default)]
    pub gpu_time_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<f64>,
    /// Phase-specific metrics (hipfire `PREFILL_SUMMARY` for `prefill`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Metric>,
}

impl PhaseTable {
    pub fn new(phase: &str) -> Self {
        Self { phase: phase.into(), ..Default::default() }
    }

    pub fn kernel(&self, name: &str) -> Option<&KernelSample> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Recompute GPU time and shares from the kernels; keeps reported shares.
    pub fn finish(&mut self) {
        self.gpu_time_us = self.kernels.iter().map(|k| k.total_us).sum();
        let total = self.gpu_time_us;
        for k in &mut self.kernels {
            if k.share_pct.is_none() && total > 0.0 {
                k.share_pct = Some(100.0 * k.total_us / total);
            }
            if k.avg_us.is_none() && k.calls > 0 {
                k.avg_us = Some(k.total_us / k.calls as f64);
            }
        }
    }
}

/// Accumulates dispatches of one kernel name.
#[derive(Debug, Default)]
pub struct KernelAcc {
    pub sample: KernelSample,
    /// Per-dispatch durations (us); f32 keeps 10M dispatches at 40 MB.
    durations: Vec<f32>,
    sum_us: f64,
    counter_sums: BTreeMap<String, (f64, u64)>,
    bytes_sum: f64,
    bytes_n: u64,
}

impl KernelAcc {
    pub fn add_duration(&mut self, us: f64) {
        self.sample.calls += 1;
        self.sum_us += us;
        self.durations.push(us as f32);
    }

    /// A dispatch without timing (counter collection).
    pub fn add_call(&mut self) {
        self.sample.calls += 1;
    }

    pub fn add_counter(&mut self, name: &str, v: f64) {
        let e = self.counter_sums.entry(name.to_string()).or_insert((0.0, 0));
        e.0 += v;
        e.1 += 1;
    }

    pub fn add_bytes(&mut self, b: f64) {
        self.bytes_sum += b;
        self.bytes_n += 1;
    }

    fn finish(self) -> KernelSample {
        let mut s = self.sample;
        if !self.durations.is_empty() {
            s.total_us = self.sum_us;
            let n = self.durations.len();
            s.avg_us = Some(self.sum_us / n as f64);
            let mut min = f32::INFINITY;
            let mut max = f32::NEG_INFINITY;
            for &d in &self.durations {
                min = min.min(d);
                max = max.max(d);
            }
            s.min_us = Some(min as f64);
            s.max_us = Some(max as f64);
            s.median_us = Some(katlas_stats::median(&self.durations));
        }
        // Counters are per-dispatch means over the kernel's dispatches.
        for (k, (sum, n)) in self.counter_sums {
            s.counters.insert(k, sum / n as f64);
        }
        if self.bytes_n > 0 {
            let per_call = self.bytes_sum / self.bytes_n as f64;
            s.bytes = Some(per_call);
            if s.total_us > 0.0 && self.bytes_n == s.calls {
                // bytes / us = MB/s; / 1000 = GB/s (decimal).
                s.achieved_gbps = Some(self.bytes_sum / s.total_us / 1000.0);
            }
        }
        s
    }
}

/// Accumulates one phase, kernels in first-seen order until `finish` sorts them.
#[derive(Debug, Default)]
pub struct PhaseAcc {
    index: HashMap<String, usize>,
    kernels: Vec<KernelAcc>,
}

impl PhaseAcc {
    pub fn kernel(&mut self, name: &str) -> &mut KernelAcc {
        if let Some(&i) = self.index.get(name) {
            return &mut self.kernels[i];
        }
        let i = self.kernels.len();
        self.index.insert(name.to_string(), i);
        let mut acc = KernelAcc::default();
        acc.sample.name = name.to_string();
        self.kernels.push(acc);
        &mut self.kernels[i]
    }

    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    pub fn finish(self, phase: &str) -> PhaseTable {
        let mut t = PhaseTable::new(phase);
        t.kernels = self.kernels.into_iter().map(KernelAcc::finish).collect();
        t.kernels.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| b.calls.cmp(&a.calls)));
        t.launches = Some(t.kernels.iter().map(|k| k.calls).sum());
        t.finish();
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let mut p = PhaseAcc::default();
        for d in [1.0, 5.0, 3.0, 2.0] {
            p.kernel("a").add_duration(d);
        }
        p.kernel("b").add_duration(9.0);
        let t = p.finish("decode");
        let a = t.kernel("a").unwrap();
        assert_eq!(a.calls, 4);
        assert_eq!(a.total_us, 11.0);
        assert_eq!(a.median_us, Some(2.5));
        assert_eq!(a.min_us, Some(1.0));
        assert_eq!(a.max_us, Some(5.0));
        assert_eq!(t.kernels[0].name, "a");
        assert_eq!(t.gpu_time_us, 20.0);
        assert!((a.share_pct.unwrap() - 55.0).abs() < 1e-9);
        assert_eq!(t.kernel("b").unwrap().median_us, Some(9.0));
    }
}
