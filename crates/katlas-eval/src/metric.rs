//! Reading a sample's metric (and route facts) from a run's output through
//! katlas-collect's parser registry (`kv` by default).

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

pub fn read_metrics(parser: &str, text: &str, source: &str) -> Result<Parsed, String> {
    let out = parse_with(parser, Input::Text { text, source }, &ParserOptions::default()).map_err(|e| e.to_string())?;
    let mut metrics: BTreeMap<String, f64> = out.metrics.iter().map(|(k, m)| (k.clone(), m.value)).collect();
    let mut kernels = Vec::new();
    for p in &out.phases {
        for (k, m) in &p.metrics {
            metrics.entry(format!("{}.{k}", p.phase)).or_insert(m.value);
        }
        for k in &p.kernels {
            if !kernels.contains(&k.name) {
                kernels.push(k.name.clone());
            }
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
}
