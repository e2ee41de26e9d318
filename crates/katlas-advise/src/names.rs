//! Joining profiler kernel names to ISA symbols.
//!
//! Profilers print a kernel as its mangled symbol, as a demangled signature
//! (`void ns::k<128, float>(float*, int)`), or as a source-level name; build systems
//! add variant suffixes (`_r4`, `_k2`, `_v1`, `_default`). A profile name matches an ISA
//! kernel at the first level that agrees: exact, demangled base name, variant base name.

/// How a profile name was joined to an ISA kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchLevel {
    Exact,
    Demangled,
    Variant,
}

impl MatchLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchLevel::Exact => "exact",
            MatchLevel::Demangled => "demangled",
            MatchLevel::Variant => "variant",
        }
    }
}

/// Demangle an Itanium symbol; `None` when it is not one.
pub fn demangle(sym: &str) -> Option<String> {
    let s = sym.strip_suffix(".kd").unwrap_or(sym);
    if !s.starts_with("_Z") {
        return None;
    }
    cpp_demangle::Symbol::new(s).ok().and_then(|d| d.demangle(&cpp_demangle::DemangleOptions::default()).ok())
}

/// Remove every `<...>` group (nested), so `k<128, f<2>>` becomes `k`.
pub fn strip_template_args(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The function's qualified base name from any spelling: mangled, demangled signature,
/// or plain name. Return type, parameters, template arguments and `.kd` are dropped.
pub fn base_name(name: &str) -> String {
    let n = name.trim();
    let n = n.strip_suffix(".kd").unwrap_or(n);
    // `(anonymous namespace)` is a scope, not a parameter list: its `(` must not cut the name.
    let owned = demangle(n).unwrap_or_else(|| n.to_string()).replace("(anonymous namespace)::", "");
    let no_tmpl = strip_template_args(&owned);
    // Parameters: cut at the first '(' (after templates are gone, it opens the params).
    let head = match no_tmpl.find('(') {
        Some(p) => &no_tmpl[..p],
        None => &no_tmpl[..],
    };
    // Return type and qualifiers: the name is the last space-separated word.
    let word = head.split_whitespace().last().unwrap_or("");
    word.to_string()
}

/// A readable name for titles and sentences: long demangled signatures shrink to their
/// qualified base name (`at::native::elementwise_kernel`); short names stay as they are.
pub fn display_name(name: &str) -> String {
    if name.len() <= 60 {
        return name.to_string();
    }
    let b = base_name(name);
    if b.is_empty() {
        name.chars().take(60).collect()
    } else {
        b
    }
}

/// Generic launchers whose name says nothing about the op: the short name adds the functor
/// or op they run (`vectorized_elementwise_kernel<MulFunctor>`).
const WRAPPERS: &[&str] = &[
    "elementwise_kernel",
    "vectorized_elementwise_kernel",
    "unrolled_elementwise_kernel",
    "elementwise_kernel_with_index",
    "reduce_kernel",
    "Kernel",
    "Kernel2",
    "DeviceScanKernel",
    "DeviceReduceKernel",
];

/// Template plumbing that never names the op.
const PLUMBING: &[&str] =
    &["BinaryFunctor", "UnaryFunctor", "AUnaryFunctor", "BUnaryFunctor", "gpu_kernel_impl_nocast", "gpu_kernel_impl", "func_wrapper_t", "ReduceOp"];

/// Identifiers of a string, in order (`a::b<c>` gives a, b, c).
fn idents(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_'))
}

/// The op a generic launcher runs: the first functor, `*_kernel_cuda`, `*Ops` or CUTLASS
/// kernel name among its template arguments.
fn op_of(full: &str, func: &str) -> Option<String> {
    let after = full.find(&format!("{func}<")).map(|i| &full[i + func.len()..])?;
    idents(after)
        .find(|w| {
            !PLUMBING.contains(w)
                && (w.ends_with("Functor")
                    || w.contains("Functor_")
                    || w.ends_with("_kernel_cuda")
                    || w.ends_with("_kernel_impl")
                    || w.ends_with("_kernel")
                    || w.ends_with("_functor")
                    || (w.ends_with("Ops") && w.len() > 3)
                    || w.starts_with("cutlass_")
                    || w.ends_with("_cuda_out"))
        })
        .map(str::to_string)
}

/// The element type a kernel's template names first, in short form (`bf16`, `f32`, `i64`).
fn dtype_of(full: &str) -> Option<&'static str> {
    const TYPES: &[(&str, &str)] = &[
        ("c10::BFloat16", "bf16"),
        ("__nv_bfloat16", "bf16"),
        ("c10::Half", "f16"),
        ("__half", "f16"),
        ("float", "f32"),
        ("double", "f64"),
        ("long", "i64"),
        ("int", "i32"),
        ("bool", "bool"),
        ("unsigned char", "u8"),
    ];
    let open = full.find('<')?;
    let mut best: Option<(usize, &str)> = None;
    for (t, short) in TYPES {
        let mut from = open;
        while let Some(i) = full[from..].find(t).map(|i| i + from) {
            let before = full[..i].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') || full[..i].ends_with("unsigned ");
            let after = full[i + t.len()..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if !before && !after {
                if best.is_none_or(|(b, _)| i < b) {
                    best = Some((i, short));
                }
                break;
            }
            from = i + t.len();
        }
    }
    best.map(|(_, s)| s)
}

/// Longest short name; longer plain names are cut (uniqueness is restored after).
const SHORT_MAX: usize = 64;

fn cut(s: &str) -> String {
    if s.chars().count() <= SHORT_MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(SHORT_MAX - 1).collect::<String>())
    }
}

/// Short, readable names for the kernels of one view, unique within it and in the same order:
/// the function's own name (no return type, namespaces, templates or parameters; the
/// anonymous namespace is never the name), plus the op for generic launchers
/// (`elementwise_kernel<MulFunctor>`), plus the element type where two would still read the
/// same (`elementwise_kernel<MulFunctor, bf16>`), plus `#N` as the last resort.
pub fn short_names(names: &[&str]) -> Vec<String> {
    struct Parts {
        func: String,
        op: Option<String>,
        dtype: Option<&'static str>,
    }
    let parts: Vec<Parts> = names
        .iter()
        .map(|n| {
            let full = demangle(n).unwrap_or_else(|| n.trim().to_string()).replace("(anonymous namespace)::", "");
            let qualified = base_name(&full);
            let func = qualified.rsplit("::").next().unwrap_or(&qualified).to_string();
            let func = if func.is_empty() { full.clone() } else { func };
            let wrapper = WRAPPERS.contains(&func.as_str());
            Parts { op: if wrapper { op_of(&full, &func) } else { None }, dtype: dtype_of(&full), func }
        })
        .collect();
    let level = |p: &Parts, l: usize| -> String {
        match (l, &p.op, p.dtype) {
            (0, Some(op), _) if op.starts_with("cutlass_") => cut(op),
            (0, Some(op), _) => cut(&format!("{}<{op}>", p.func)),
            (0, None, _) => cut(&p.func),
            (_, Some(op), Some(t)) => cut(&format!("{}<{op}, {t}>", p.func)),
            (_, Some(op), None) => cut(&format!("{}<{op}>", p.func)),
            // A kernel's own template types (OpaqueType<2u>, index types) seldom tell two apart.
            (_, None, _) => cut(&p.func),
        }
    };
    let mut out: Vec<String> = parts.iter().map(|p| level(p, 0)).collect();
    let clash = |out: &[String], i: usize| out.iter().enumerate().any(|(j, o)| j != i && *o == out[i]);
    let first: Vec<bool> = (0..out.len()).map(|i| clash(&out, i)).collect();
    for (i, c) in first.iter().enumerate() {
        if *c {
            out[i] = level(&parts[i], 1);
        }
    }
    // Still the same: number them in order (the full name stays on the record).
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let dup: Vec<bool> = (0..out.len()).map(|i| clash(&out, i)).collect();
    for (i, d) in dup.iter().enumerate() {
        if *d {
            let n = seen.entry(out[i].clone()).or_insert(0);
            *n += 1;
            out[i] = format!("{} #{n}", out[i]);
        }
    }
    out
}

/// Strip build-variant suffixes (`_r4`, `_k2`, `_v1`, `_default`), repeatedly.
pub fn variant_base(name: &str) -> String {
    let mut s = base_name(name);
    loop {
        let before = s.len();
        if let Some(x) = s.strip_suffix("_default") {
            s = x.to_string();
        }
        if let Some(pos) = s.rfind('_') {
            let suf = &s[pos + 1..];
            let mut ch = suf.chars();
            if let Some(first) = ch.next() {
                let digits: String = ch.collect();
                if matches!(first, 'r' | 'k' | 'v') && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) && pos > 0 {
                    s.truncate(pos);
                }
            }
        }
        if s.len() == before {
            return s;
        }
    }
}

/// The match level of a profile name against one ISA kernel (name, symbol, demangled).
pub fn match_level(profile: &str, isa_names: &[&str]) -> Option<MatchLevel> {
    let p = profile.trim();
    let strip = |s: &str| s.strip_suffix(".kd").unwrap_or(s).to_string();
    if isa_names.iter().any(|n| strip(n) == p) {
        return Some(MatchLevel::Exact);
    }
    let pb = base_name(p);
    if !pb.is_empty() && isa_names.iter().any(|n| base_name(n) == pb) {
        return Some(MatchLevel::Demangled);
    }
    let pv = variant_base(p);
    if !pv.is_empty() && isa_names.iter().any(|n| variant_base(n) == pv) {
        return Some(MatchLevel::Variant);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        assert_eq!(base_name("_Z6kernelPfi"), "kernel");
        assert_eq!(base_name("_Z6kernelPfi.kd"), "kernel");
        assert_eq!(base_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"), "at::native::vectorized_elementwise_kernel");
        assert_eq!(base_name("gemv_hfq4g256_residual"), "gemv_hfq4g256_residual");
        assert_eq!(base_name("_ZN2ns4gemvILi4EEEvPKfPfi"), "ns::gemv");
    }

    #[test]
    fn short_names_are_unique_and_name_the_op() {
        let names = [
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1, 16, 8>(char*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 128, 1>, int)",
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, int)",
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#9}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, int)::{lambda(int)#1}>(int, int)",
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, int)::{lambda(int)#1}>(int, int)",
            "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(cutlass_80_simt_sgemm_128x32_8x5_tn_align1::Params)",
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(int)",
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 3, 64, 64>(int)",
        ];
        let s = short_names(&names);
        assert_eq!(
            s,
            [
                "CatArrayBatchedCopy_vectorized",
                "elementwise_kernel<MulFunctor, bf16>",
                "elementwise_kernel<neg_kernel_cuda>",
                "elementwise_kernel<MulFunctor, f32>",
                "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
                "cutlass_80_simt_sgemm_128x32_8x5_tn_align1",
                "CatArrayBatchedCopy #1",
                "CatArrayBatchedCopy #2",
            ]
        );
        assert_eq!(base_name(names[0]), "at::native::CatArrayBatchedCopy_vectorized");
    }

    #[test]
    fn variants() {
        assert_eq!(variant_base("gemv_hfq4g256_residual_r4"), "gemv_hfq4g256_residual");
        assert_eq!(variant_base("gemv_k2_v1"), "gemv");
        assert_eq!(variant_base("attn_default"), "attn");
        assert_eq!(variant_base("q8_0_kv"), "q8_0_kv");
        assert_eq!(variant_base("_r4"), "_r4");
    }

    #[test]
    fn levels() {
        assert_eq!(match_level("k", &["k.kd"]), Some(MatchLevel::Exact));
        assert_eq!(match_level("void k<4>(float*)", &["_Z1kPf"]), Some(MatchLevel::Demangled));
        assert_eq!(match_level("gemv_r2", &["gemv_r4"]), Some(MatchLevel::Variant));
        assert_eq!(match_level("gemv", &["gemm"]), None);
    }
}
