//! Reading a sample's metric (and route facts) from a run's output through
//! katlas-collect's parser registry (`kv` by default).

use crate::error::EvalError;
use katlas_collect::{parse_with, Input, ParserOptions};
use katlas_model::Route;
use std::collections::BTreeMap;

pub struct Parsed {
    /// Whole-run metrics, plus phase metrics as `PHASE.KEY`.
    pub metrics: BTreeMap<String, f64>,
    pub route: Option<Route>,
    /// `code_object=PATH` lines: code objects the run loaded.
    pub code_objects: Vec<String>,
}

/// The metrics a run printed, read by `parser`; a parser's refusal keeps its class (a parser
/// whose tool is missing here is the environment, not the output).
pub fn read_metrics(parser: &str, text: &str, source: &str) -> Result<Parsed, EvalError> {
    let out = parse_with(parser, Input::Text { text, source }, &ParserOptions::default())?;
    let mut metrics: BTreeMap<String, f64> = out.metrics.iter().map(|(k, m)| (k.clone(), m.value)).collect();
    let mut kernels = Vec::new();
    // A key printed by one phase only is also readable bare: `katlas task` names the metric of
    // a row (`decode_tok_s`) without the phase its record carried.
    let mut bare: BTreeMap<&str, Option<f64>> = BTreeMap::new();
    for p in &out.phases {
        for (k, m) in &p.metrics {
            metrics.entry(format!("{}.{k}", p.phase)).or_insert(m.value);
            bare.entry(k.as_str()).and_modify(|v| *v = None).or_insert(Some(m.value));
        }
        for k in &p.kernels {
            if !kernels.contains(&k.name) {
                kernels.push(k.name.clone());
            }
        }
    }
    for (k, v) in bare {
        if let Some(v) = v {
            metrics.entry(k.to_string()).or_insert(v);
        }
    }
    // Whole rows the workload printed itself (`katlas-rows`: the lab), as `katlas task` names
    // their metric: a key one row prints reads bare and as `PHASE.KEY`; a key several rows
    // print (two shapes, two variants) is not guessed. Their kernels are the route's.
    let mut of_rows: BTreeMap<String, Option<f64>> = BTreeMap::new();
    for r in &out.rows {
        for (k, m) in &r.metrics {
            for key in [k.clone(), format!("{}.{k}", r.phase)] {
                of_rows.entry(key).and_modify(|v| *v = None).or_insert(Some(m.value));
            }
        }
        for k in &r.kernels {
            if !kernels.contains(&k.name) {
                kernels.push(k.name.clone());
            }
        }
    }
    for (k, v) in of_rows {
        if let Some(v) = v {
            metrics.entry(k).or_insert(v);
        }
    }
    // `route.*` keys printed by a workload are route facts, not metrics.
    let mut attributes: BTreeMap<String, serde_json::Value> = out.route.clone().into_iter().collect();
    let mut code_objects = Vec::new();
    for line in text.lines() {
        if let Some(p) = line.trim().strip_prefix("code_object=") {
            let p = p.trim().to_string();
            if !p.is_empty() && !code_objects.contains(&p) {
                code_objects.push(p);
            }
        }
        if let Some(rest) = line.trim().strip_prefix("route.") {
            if let Some((k, v)) = rest.split_once('=') {
                attributes.insert(k.trim().to_string(), serde_json::Value::String(v.trim().to_string()));
            }
        }
        if let Some(rest) = line.trim().strip_prefix("kernel_seen=") {
            let name = rest.trim().to_string();
            if !name.is_empty() && !kernels.contains(&name) {
                kernels.push(name);
            }
        }
    }
    metrics.retain(|k, _| !k.starts_with("route.") && k != "code_object");
    let route = if kernels.is_empty() && attributes.is_empty() {
        None
    } else {
        Some(Route {
            basis: if kernels.is_empty() { "reported".into() } else { "observed".into() },
            attributes,
            kernels_seen: kernels,
            env_requested: BTreeMap::new(),
        })
    };
    Ok(Parsed { metrics, route, code_objects })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_metrics_and_route() {
        let p = read_metrics("kv", "elapsed_ms=12.5\nroute.attn=flash\nkernel_seen=gemv_q4\ncode_object=k.hsaco\nnoise\n", "t").unwrap();
        assert_eq!(p.code_objects, vec!["k.hsaco"]);
        assert_eq!(p.metrics.get("elapsed_ms"), Some(&12.5));
        let r = p.route.unwrap();
        assert_eq!(r.kernels_seen, vec!["gemv_q4"]);
        assert_eq!(r.attributes.get("attn").unwrap(), "flash");
        assert!(read_metrics("no-such-parser", "", "t").is_err());
    }

    #[test]
    fn a_key_of_one_phase_reads_bare_and_a_key_of_two_does_not() {
        let text = concat!(
            r#"{"katlas": 1, "phase": "decode", "decode_tok_s": 41.5, "checksum": 7, "ms": 2}"#,
            "\n",
            r#"{"katlas": 1, "phase": "prefill", "ms": 9}"#,
            "\n"
        );
        let p = read_metrics("json-lines", text, "t").unwrap();
        assert_eq!(p.metrics.get("decode.decode_tok_s"), Some(&41.5));
        assert_eq!(p.metrics.get("decode_tok_s"), Some(&41.5));
        assert_eq!(p.metrics.get("decode.ms"), Some(&2.0));
        assert_eq!(p.metrics.get("ms"), None, "two phases print `ms`: which one is meant is not guessed");
    }

    #[test]
    fn whole_rows_a_workload_prints_give_their_metrics_and_kernels() {
        // The lab's `--format collect`: a KATLAS_METRIC line and a katlas.row.v1 row per case.
        let row = |shape: &str, cpu_min_us: f64| {
            let mut r = katlas_model::Row::new("lab-decode", "decode");
            r.shape_bucket = Some(shape.into());
            r.metrics.insert("cpu_min_us".into(), katlas_model::Metric::from_key("cpu_min_us", cpu_min_us));
            r.kernels.push(katlas_model::KernelSample { name: "cpu_gemv_hfq4g256_r4".into(), calls: 20, total_us: 1.0, ..Default::default() });
            serde_json::to_string(&r).unwrap()
        };
        let one = format!("KATLAS_METRIC gemv_hfq4g256 shape=256x1024 cpu_min_us=3480.05\n{}\n", row("256x1024", 3480.05));
        let p = read_metrics("katlas-rows", &one, "t").unwrap();
        assert_eq!(p.metrics.get("cpu_min_us"), Some(&3480.05), "{:?}", p.metrics);
        assert_eq!(p.metrics.get("decode.cpu_min_us"), Some(&3480.05));
        assert_eq!(p.route.unwrap().kernels_seen, ["cpu_gemv_hfq4g256_r4"]);
        // Two shapes in one run: which row's number is meant is not guessed.
        let two = format!("{}\n{}\n", row("256x1024", 3480.05), row("1024x4096", 53959.8));
        assert_eq!(read_metrics("katlas-rows", &two, "t").unwrap().metrics.get("cpu_min_us"), None);
    }
}
