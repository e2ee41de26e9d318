//! A roofline per product: the product's bandwidth and compute ceilings from the arch
//! database, and the hot kernels of a fit placed at the arithmetic intensity and rate the fit
//! derived (bytes and FLOPs per call over the kernel's time). Nothing here is estimated anew.

use katlas_advise::FitView;
use katlas_arch::Product;

#[derive(Debug, Clone)]
pub struct Ceiling {
    /// `datasheet`/`measured` for bandwidth, the rate key (`bf16_matrix`, `fp32`) for compute.
    pub label: String,
    /// GB/s for bandwidth, TFLOP/s for compute.
    pub value: f64,
    pub source: String,
}

#[derive(Debug, Clone)]
pub struct RoofKernel {
    pub name: String,
    pub short_name: String,
    pub share_pct: Option<f64>,
    pub bw_gbps: Option<f64>,
    pub tflops: Option<f64>,
    /// Where the bytes came from (`dram counters`, `from shapes` …).
    pub bw_source: Option<String>,
    /// FLOPs per byte, when the kernel is placed.
    pub intensity: Option<f64>,
    /// Why the kernel has no point on the plot.
    pub unplaced: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Roofline {
    /// The product (or, without one, the device key of the rows).
    pub device: String,
    pub row_id: Option<String>,
    pub workload: Option<String>,
    pub phase: Option<String>,
    pub bandwidth: Vec<Ceiling>,
    pub compute: Vec<Ceiling>,
    /// Why there are no ceilings (no product known).
    pub note: Option<String>,
    pub kernels: Vec<RoofKernel>,
}

impl Roofline {
    /// The roofline of `product` with the `hot` hottest kernels of `fit` on it.
    pub fn of(fit: &FitView, product: Option<&Product>, device: &str, hot: usize) -> Roofline {
        let mut r = Roofline {
            device: product.map(|p| p.name.clone()).unwrap_or_else(|| device.to_string()),
            row_id: fit.header.row_id.clone(),
            workload: fit.header.workload.clone(),
            phase: fit.header.phase.clone(),
            bandwidth: Vec::new(),
            compute: Vec::new(),
            note: None,
            kernels: Vec::new(),
        };
        match product {
            Some(p) => {
                let src = |s: &str| if s.is_empty() { p.source.clone() } else { s.to_string() };
                r.bandwidth.push(Ceiling { label: "datasheet".into(), value: p.peak_bw_gbps.value, source: src(&p.peak_bw_gbps.source) });
                if let Some(m) = &p.measured_bw_gbps {
                    r.bandwidth.push(Ceiling { label: "measured".into(), value: m.value, source: src(&m.source) });
                }
                // Integer rates are TOP/s, not FLOP/s: they have no place on a FLOP roofline.
                for (k, v) in p.peak_rates.iter().filter(|(k, _)| !k.starts_with("int")) {
                    r.compute.push(Ceiling { label: k.clone(), value: v.value, source: src(&v.source) });
                }
                r.compute.sort_by(|a, b| b.value.total_cmp(&a.value));
                // Rates of equal value are one roof (bf16 and fp16 matrix rates usually are).
                r.compute.dedup_by(|b, a| {
                    let same = a.value == b.value;
                    if same {
                        a.label = format!("{}, {}", a.label, b.label);
                        if a.source != b.source {
                            a.source = format!("{}; {}", a.source, b.source);
                        }
                    }
                    same
                });
                if r.compute.is_empty() {
                    r.note = Some(format!("the arch database has no floating-point peak rate for {}: bandwidth roofs only", p.name));
                }
            }
            None => {
                r.note = Some(match &fit.header.arch {
                    Some(a) => format!("no product of {a} is known to the arch database (or several with different ceilings): no roofs"),
                    None => "the rows name no product or arch: no roofs".into(),
                })
            }
        }
        let mut ks: Vec<_> = fit.kernels.iter().filter(|k| k.share_pct.is_some() || k.total_us.is_some()).collect();
        ks.sort_by(|a, b| b.share_pct.unwrap_or(0.0).total_cmp(&a.share_pct.unwrap_or(0.0)));
        for k in ks.into_iter().take(hot) {
            let t = &k.throughput;
            let placed = match (t.bw_gbps, t.tflops) {
                (Some(b), Some(f)) if b > 0.0 && f > 0.0 => Ok(f * 1e3 / b),
                (None, None) => Err("no byte or FLOP count".to_string()),
                (Some(_), None) => Err("no FLOP count (bandwidth only)".to_string()),
                (None, Some(_)) => Err("no byte count (FLOP rate only)".to_string()),
                (Some(_), Some(_)) => Err("zero bytes or FLOPs per call".to_string()),
            };
            r.kernels.push(RoofKernel {
                name: k.name.clone(),
                short_name: if k.short_name.is_empty() { k.name.clone() } else { k.short_name.clone() },
                share_pct: k.share_pct,
                bw_gbps: t.bw_gbps,
                tflops: t.tflops,
                bw_source: t.bw_source.clone(),
                intensity: placed.as_ref().ok().copied(),
                unplaced: placed.err(),
            });
        }
        r
    }

    /// The attainable rate (TFLOP/s) at an intensity under the best bandwidth and top compute roof.
    pub fn roof_at(&self, intensity: f64) -> Option<f64> {
        let bw = self.bandwidth.iter().map(|c| c.value).fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
        let mem = intensity * bw / 1e3;
        Some(self.compute.first().map_or(mem, |c| mem.min(c.value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A fit of three kernels as `katlas fit` writes it (only the fields the roofline reads).
    fn fit() -> FitView {
        let k = |name: &str, share: f64, bw: Option<f64>, tf: Option<f64>| {
            json!({"name": name, "short_name": name, "share_pct": share, "calls": 10, "avg_us": 5.0, "total_us": 50.0,
                   "throughput": {"bw_gbps": bw, "tflops": tf, "bw_source": "from shapes"}, "matrix": {"available": [], "used_ops": null},
                   "signals": {}, "findings": []})
        };
        serde_json::from_value(json!({
            "schema": "katlas.fit.v1", "header": {"arch": "sm_90", "product": "NVIDIA H200", "row_id": "r1", "workload": "w", "phase": "decode"},
            "evidence": {"profile": true, "isa": false, "throughput": true, "product": true, "missing": []},
            "scope": {"kind": "profile-only", "profile_names": 3, "isa_kernels": 0, "isa_kernels_for_arch": 0, "isa_arches": [], "matched": [], "unmatched_hot": []},
            "kernels": [k("copy", 5.0, Some(44.1), Some(0.0)), k("gemv", 22.5, Some(2297.8), Some(2.296)), k("norm", 3.0, Some(600.0), None)],
            "likely_limit": [], "left_on_table": [], "stops": [], "caveats": [], "rules_files": []
        }))
        .unwrap()
    }

    #[test]
    fn kernels_sit_at_the_fits_intensity_under_the_products_roofs() {
        let db = katlas_arch::ArchDb::builtin();
        let p = db.product("NVIDIA H200").unwrap();
        let r = Roofline::of(&fit(), Some(p), "sm_90", 12);
        assert_eq!(r.device, "NVIDIA H200");
        assert_eq!(r.bandwidth[0].value, p.peak_bw_gbps.value);
        assert_eq!(r.bandwidth[1].value, p.measured_bw_gbps.as_ref().unwrap().value, "datasheet and measured bandwidth are both roofs");
        assert!(r.compute.windows(2).all(|w| w[0].value > w[1].value), "one roof per distinct rate, highest first: {:?}", r.compute);
        assert!(r.compute.iter().all(|c| !c.label.contains("int")), "TOP/s rates are not FLOP roofs");
        let names: Vec<&str> = r.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["gemv", "copy", "norm"], "hottest first");
        let gemv = &r.kernels[0];
        assert!((gemv.intensity.unwrap() - 2.296e3 / 2297.8).abs() < 1e-9, "FLOP/byte = TFLOP/s ÷ GB/s × 1000");
        assert_eq!(r.kernels[1].unplaced.as_deref(), Some("zero bytes or FLOPs per call"));
        assert_eq!(r.kernels[2].unplaced.as_deref(), Some("no FLOP count (bandwidth only)"));
        let roof = r.roof_at(1.0).unwrap();
        assert!((roof - p.peak_bw_gbps.value / 1e3).abs() < 1e-9, "at 1 FLOP/byte the memory roof bounds: {roof}");
        assert!(gemv.tflops.unwrap() <= r.roof_at(gemv.intensity.unwrap()).unwrap(), "a measured kernel is under its roof");
        let none = Roofline::of(&fit(), None, "sm_90", 2);
        assert!(none.bandwidth.is_empty() && none.compute.is_empty() && none.note.as_deref().unwrap().contains("sm_90"));
        assert_eq!(none.kernels.len(), 2);
    }
}
