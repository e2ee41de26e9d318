//! What a kernel is, from its name, op, shapes and launch: GEMM or one-token GEMV, library
//! kernel, small transform and the neighbour it would fuse into, route knobs that reach it.
//! Word lists live in `data/fit.toml [settings]`.

use crate::rules::FitSettings;
use katlas_model::{KernelSample, OpClass, Row};
use std::collections::BTreeMap;

pub(super) fn phase_kind(phase: &str) -> (bool, bool) {
    let p = phase.to_ascii_lowercase();
    (p.contains("prefill") || p.starts_with("pp"), p.contains("decode") || p == "ar" || p.contains("gen"))
}

pub(super) fn is_gemm_like(name: &str, op: Option<&OpClass>) -> bool {
    let n = name.to_ascii_lowercase();
    let words = ["gemm", "gemv", "matmul", "mm_", "linear", "projection", "qkv", "cublas", "cutlass", "sgemm", "hgemm"];
    let in_op = op.map(|o| {
        let f = o.family.to_ascii_lowercase();
        let r = o.role.to_ascii_lowercase();
        f == "linear" || f == "gemm" || f == "matmul" || words.iter().any(|w| r.contains(w))
    });
    in_op.unwrap_or(false) || words.iter().any(|w| n.contains(w))
}

/// A vendor/framework library kernel: a prefix of `prefixes` starts its name or its base name.
pub fn is_library_kernel(prefixes: &[String], name: &str) -> bool {
    let base = crate::names::base_name(name);
    prefixes.iter().any(|p| name.starts_with(p.as_str()) || base.starts_with(p.as_str()))
}

/// Whether an env name of the row can change a kernel's route (`[settings] route_env_prefixes`,
/// or recorded in the row's route env), and is not device selection or logging.
pub(super) fn is_route_env(st: &FitSettings, r: &Row, k: &str) -> bool {
    if st.not_route_env.iter().any(|n| n.strip_suffix('*').map_or(n == k, |p| k.starts_with(p))) {
        return false;
    }
    r.identity.env.contains_key(k) || st.route_env_prefixes.iter().any(|p| k.starts_with(p.as_str()))
}

/// Whether a route knob can reroute this kernel: a library's knob (`[settings] route_env_reach`)
/// only that library's kernels, any other knob every kernel.
pub(super) fn knob_reaches(st: &FitSettings, env: &str, kernel: &str) -> bool {
    match st.route_env_reach.iter().find(|r| env.starts_with(r.env.as_str())) {
        Some(r) => is_library_kernel(&r.kernels, kernel),
        None => true,
    }
}

/// Why a kernel is a one-token GEMV, or `None` when nothing says so: M = 1 on every call from
/// the launching op's shapes (a larger M says it is not), else a profiled kernel of a decode
/// phase whose op is a GEMV or projection, in no batched phase and with no matrix-tile name
/// (`[settings] batched_words`: DFlash verify, WMMA/MFMA GEMMs). An ISA-only kernel has no
/// launch to judge.
pub(super) fn gemv_evidence(
    st: &FitSettings,
    name: &str,
    op: Option<&OpClass>,
    sample: Option<&KernelSample>,
    phase: Option<&str>,
    decode_gemm: bool,
) -> Option<String> {
    let x = sample?;
    let num = |k: &str| x.extra.get(k).and_then(|v| v.as_f64());
    if let Some(m) = num("shapes_m_max") {
        let m1 = num("shapes_m1_calls").unwrap_or(0.0);
        return (m == 1.0 && m1 >= x.calls as f64).then(|| format!("M = 1 from shapes on all {} calls", x.calls));
    }
    if !decode_gemm {
        return None;
    }
    let lname = name.to_ascii_lowercase();
    let lphase = phase.unwrap_or("").to_ascii_lowercase();
    if st.batched_words.iter().any(|w| lname.contains(w.as_str()) || lphase.contains(w.as_str())) {
        return None;
    }
    let role = op.map(|o| o.role.to_ascii_lowercase()).unwrap_or_default();
    let gemv_op = role.contains("gemv") || role.contains("projection") || lname.contains("gemv") || lname.contains("matvec");
    gemv_op.then(|| format!("decode phase `{}`, op {}, profiled", phase.unwrap_or("?"), if role.is_empty() { "gemv by name".to_string() } else { role }))
}

pub(super) fn is_projection(name: &str, op: Option<&OpClass>) -> bool {
    let n = name.to_ascii_lowercase();
    op.map(|o| o.role.contains("projection")).unwrap_or(false) || n.contains("qkv") || n.contains("proj")
}

/// A transform (elementwise, norm, rotation: `[settings] elementwise_families` /
/// `reduction_families`, or the name says so) whose calls are small: bytes per call and time
/// per call, where known, under `[settings] small_transform_max_bytes` / `_max_us`. The
/// reason says what judged it.
pub(super) fn is_transform(st: &FitSettings, x: &KernelSample) -> Option<String> {
    let lname = x.name.to_ascii_lowercase();
    if let Some(o) = &x.op {
        let f = o.family.to_ascii_lowercase();
        if st.elementwise_families.contains(&f) || st.reduction_families.contains(&f) {
            return Some(format!("op {}.{}", o.family, o.role));
        }
    }
    ["elementwise", "norm", "rotate", "rope", "reduce"].iter().find(|w| lname.contains(*w)).map(|w| format!("`{w}` in the name"))
}

pub(super) fn small_transform(st: &FitSettings, x: &KernelSample) -> (bool, Option<String>) {
    let Some(what) = is_transform(st, x) else { return (false, None) };
    let mut why = vec![what];
    if let Some(b) = x.bytes {
        if b > st.small_transform_max_bytes {
            return (false, None);
        }
        why.push(format!("{} KB per call", crate::expr::fmt_num(b / 1e3, Some(0))));
    }
    if let Some(a) = x.avg_us.filter(|a| *a > 0.0) {
        if a > st.small_transform_max_us {
            return (false, None);
        }
        why.push(format!("{} us per call", crate::expr::fmt_num(a, Some(1))));
    }
    (true, Some(why.join(", ")))
}

/// For each small transform of the phase, the kernel next to it in the phase's kernel list
/// (the profiler's or timeline's order) that is not itself a transform: what it would fuse into.
pub(super) fn fusion_neighbours(st: &FitSettings, list: &[KernelSample]) -> BTreeMap<String, (String, f64)> {
    let heavy: Vec<bool> = list.iter().map(|x| is_transform(st, x).is_none()).collect();
    let mut out = BTreeMap::new();
    for (i, x) in list.iter().enumerate() {
        if heavy[i] {
            continue;
        }
        let near = (1..list.len()).flat_map(|d| [i.checked_sub(d), Some(i + d)]).flatten().find(|&j| j < list.len() && heavy[j]);
        if let Some(j) = near {
            out.insert(x.name.clone(), (crate::names::short_names(&[list[j].name.as_str()]).remove(0), list[j].share_pct.unwrap_or(0.0)));
        }
    }
    out
}

/// Why a kernel's op class is memory-bound — its time is the bytes it moves over the bandwidth,
/// so bandwidth is what reads it first — or `None`: a one-token GEMV (`decode_gemv`); a GEMM or
/// attention of a decode phase that no `[settings] batched_words` mark batched and no shapes
/// give an M above 1 (one query token reads every weight or the whole KV cache once); an
/// elementwise op; a reduction or norm. Reads the op signals `fit_kernel` has set.
pub(super) fn memory_class(st: &FitSettings, s: &crate::expr::Signals, name: &str, op: Option<&OpClass>, x: &KernelSample) -> Option<String> {
    use crate::expr::Val;
    let flag = |k: &str| matches!(s.get(k), Some(Val::Bool(true)));
    let word = |k: &str| match s.get(k) {
        Some(Val::Str(w)) => Some(w.clone()),
        _ => None,
    };
    let op_text = op.map(|o| format!("op {}.{}", o.family, o.role));
    if flag("decode_gemv") {
        return Some(format!("a one-token GEMV: {}", word("gemv_evidence").unwrap_or_default()));
    }
    let phase = word("phase").unwrap_or_default();
    let lname = name.to_ascii_lowercase();
    let lphase = phase.to_ascii_lowercase();
    let batched = |n: &str| st.batched_words.iter().any(|w| n.contains(w.as_str()));
    let m_above_1 = x.extra.get("shapes_m_max").and_then(|v| v.as_f64()).is_some_and(|m| m > 1.0);
    let decode = flag("phase_decode") && !flag("phase_prefill") && !batched(&lphase) && !m_above_1;
    if decode && flag("is_gemm") && !batched(&lname) {
        return Some(format!("a GEMM of decode phase `{phase}`, {}", op_text.unwrap_or_else(|| "GEMM by name".into())));
    }
    // Attention kernels use matrix instructions at any batch: only the phase says batched.
    if decode && op.is_some_and(|o| o.family.eq_ignore_ascii_case("attention")) {
        return Some(format!("attention of decode phase `{phase}`, {}: one query token reads the KV cache", op_text.unwrap_or_default()));
    }
    if flag("is_elementwise") {
        return Some(format!("elementwise: {}", op_text.unwrap_or_else(|| "`elementwise` in the name".into())));
    }
    if flag("is_reduction") {
        return Some(format!("a reduction: {}", op_text.unwrap_or_else(|| "`reduce` in the name".into())));
    }
    None
}
