//! Triton facts for the lever rules: what a kernel's launch records and cache entry say (the
//! kernel sample's `extra.triton`, as the torch-trace parser joins them), and what suggest
//! derives from them and the fit's launch geometry: grid fill, the block constexpr a split or a
//! smaller tile would change, the config an autotune list lacks. A first step quotes these, so
//! it names the file:line, the constexpr and the value to change.
//!
//! Facts the fit already carries under the same signal names win over the ones read here.

use crate::expr::{fmt_num, Signals, Val};
use crate::fit::KernelFit;
use katlas_model::KernelSample;
use serde_json::Value;
use std::collections::BTreeSet;

/// What `facts` needs beside the kernel.
pub(super) struct Ctx<'a> {
    /// Streaming multiprocessors (compute units) of the product the fit was read against.
    pub units: Option<f64>,
    pub short_kernel_us: f64,
    /// Flags the fit rules emitted for the kernel.
    pub flags: &'a BTreeSet<String>,
}

/// Add the Triton and launch signals to `s` (never overwriting one the fit computed).
pub(super) fn facts(k: &KernelFit, sample: Option<&KernelSample>, ctx: &Ctx, s: &mut Signals) {
    let mut put = |name: &str, v: Val| {
        s.entry(name.to_string()).or_insert(v);
    };
    if let Some(limited) = launch_limited(k, ctx) {
        put("launch_limited", Val::Bool(limited));
    }
    if let Some(l) = &k.launch {
        let blocks = l.grid.iter().map(|g| g.max(&1)).map(|g| *g as f64).product::<f64>();
        put("grid_blocks", Val::Num(blocks));
        put("grid", Val::Str(format!("[{}, {}, {}]", l.grid[0], l.grid[1], l.grid[2])));
        if let (Some(units), Some(o)) = (ctx.units, k.occupancy.as_ref().filter(|o| o.groups > 0)) {
            put("sms", Val::Num(units));
            put("blocks_per_sm", Val::Num(o.groups as f64));
            put("grid_fill_pct", Val::Num(100.0 * blocks / (units * o.groups as f64)));
        }
    }
    let t = sample.and_then(|x| x.extra.get("triton")).filter(|t| t.is_object());
    let Some(t) = t else {
        put("triton", Val::Bool(false));
        return;
    };
    put("triton", Val::Bool(true));
    let num = |v: Option<&Value>| v.and_then(Value::as_f64);
    let nw = num(t.get("num_warps"));
    let ns = num(t.get("num_stages"));
    if let Some(nw) = nw {
        put("num_warps", Val::Num(nw));
        // Fewer warps give each thread more of the row in flight; one warp is the floor.
        put("num_warps_alt", Val::Num(if nw >= 8.0 { nw / 2.0 } else { nw * 2.0 }));
    }
    if let Some(ns) = ns {
        put("num_stages", Val::Num(ns));
        put("num_stages_alt", Val::Num((ns + 1.0).min(5.0)));
        put("num_stages_lower", Val::Num((ns - 1.0).max(1.0)));
    }
    if let Some(file) = t.get("file").and_then(Value::as_str) {
        let file = file.strip_prefix("<site-packages>/").unwrap_or(file);
        let src = match t.get("line").and_then(Value::as_u64) {
            Some(line) => format!("{file}:{line}"),
            None => file.to_string(),
        };
        put("triton_source", Val::Str(src));
    }
    let consts: Vec<(String, f64)> = t
        .get("constexprs")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_f64().filter(|_| !v.is_boolean()).map(|n| (k.clone(), n))).collect())
        .unwrap_or_default();
    if !consts.is_empty() {
        put("constexprs", Val::Str(consts.iter().map(|(k, v)| format!("{k}={}", fmt_num(*v, None))).collect::<Vec<_>>().join(", ")));
    }
    let blocks: Vec<&(String, f64)> = consts.iter().filter(|(k, v)| is_block_name(k) && *v >= 2.0).collect();
    // Halving the smallest block adds programs along its axis; the largest is the tile that
    // holds the most registers.
    if let Some((name, v)) = blocks.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        put("split_constexpr", Val::Str(name.clone()));
        put("split_value", Val::Num(*v));
        put("split_half", Val::Num(v / 2.0));
    }
    if let Some((name, v)) = blocks.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
        put("tile_constexpr", Val::Str(name.clone()));
        put("tile_value", Val::Num(*v));
        put("tile_half", Val::Num(v / 2.0));
    }
    let Some(a) = t.get("autotune").filter(|a| a.is_object()) else {
        put("autotuned", Val::Bool(false));
        return;
    };
    put("autotuned", Val::Bool(true));
    if let Some(n) = num(a.get("configs")) {
        put("autotune_configs", Val::Num(n));
    }
    if let Some(key) = a.get("key").and_then(Value::as_object).filter(|m| !m.is_empty()) {
        put("autotune_key", Val::Str(key.keys().cloned().collect::<Vec<_>>().join(", ")));
    }
    if let Some(best) = a.get("best").filter(|b| b.is_object()) {
        put("autotune_best", Val::Str(config_text(best, None, false)));
        put("autotune_next", Val::Str(config_text(best, Some(ns), true)));
    }
}

/// Short enough to be mostly its launch and moving too little to be a memory kernel; or
/// launch-bound by the fit's own rule.
fn launch_limited(k: &KernelFit, ctx: &Ctx) -> Option<bool> {
    if ctx.flags.contains("launch_bound") {
        return Some(true);
    }
    let avg = k.avg_us?;
    let busy = k.throughput.bw_pct_of_peak.is_some_and(|p| p >= 10.0);
    Some(avg < ctx.short_kernel_us && !busy)
}

/// `BLOCK_SIZE`, `BLOCK_M`, `BK`, `BV`: a block constexpr by Triton's naming habit.
fn is_block_name(n: &str) -> bool {
    n.contains("BLOCK") || ((2..=3).contains(&n.len()) && n.starts_with('B') && n.chars().all(|c| c.is_ascii_uppercase()))
}

/// A config as `triton.Config` takes it: `{'BK': 64, 'BV': 64}, num_warps=4, num_stages=3`,
/// or (`as_config` false) as `BK=64, BV=64, num_warps=4, num_stages=3`. `grow` doubles the
/// last block kwarg and deepens the pipeline by one stage: the neighbour the list lacks.
fn config_text(best: &Value, stages: Option<Option<f64>>, grow: bool) -> String {
    let kwargs: Vec<(String, Value)> =
        best.get("kwargs").and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    let grow_at = if grow { kwargs.iter().rposition(|(k, v)| is_block_name(k) && v.as_f64().is_some()) } else { None };
    let shown = |(i, (k, v)): (usize, &(String, Value))| {
        let v = match (Some(i) == grow_at, v.as_f64()) {
            (true, Some(n)) => fmt_num(n * 2.0, None),
            _ => v.to_string(),
        };
        if grow {
            format!("'{k}': {v}")
        } else {
            format!("{k}={v}")
        }
    };
    let parts: Vec<String> = kwargs.iter().enumerate().map(shown).collect();
    let nw = best.get("num_warps").and_then(Value::as_f64);
    let ns = best.get("num_stages").and_then(Value::as_f64).or(stages.flatten());
    let ns = if grow { ns.map(|n| (n + 1.0).min(5.0)) } else { ns };
    let mut tail = Vec::new();
    if let Some(n) = nw {
        tail.push(format!("num_warps={}", fmt_num(n, None)));
    }
    if let Some(n) = ns {
        tail.push(format!("num_stages={}", fmt_num(n, None)));
    }
    if grow {
        let mut out = format!("{{{}}}", parts.join(", "));
        for t in tail {
            out.push_str(", ");
            out.push_str(&t);
        }
        out
    } else {
        parts.into_iter().chain(tail).collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_read_as_triton_writes_them() {
        let best = serde_json::json!({"kwargs": {"BK": 64, "BV": 64}, "num_warps": 4, "num_stages": 3});
        assert_eq!(config_text(&best, None, false), "BK=64, BV=64, num_warps=4, num_stages=3");
        assert_eq!(config_text(&best, None, true), "{'BK': 64, 'BV': 128}, num_warps=4, num_stages=4");
        let none = serde_json::json!({"kwargs": {}, "num_warps": 16, "num_stages": 3});
        assert_eq!(config_text(&none, None, true), "{}, num_warps=16, num_stages=4");
    }

    #[test]
    fn block_names() {
        for n in ["BLOCK_SIZE", "BLOCK_M", "BK", "BV", "BT", "BD"] {
            assert!(is_block_name(n), "{n}");
        }
        for n in ["B", "T", "H", "K", "NB", "HV", "USE_G", "B_ROWS_X"] {
            assert!(!is_block_name(n), "{n}");
        }
    }
}
