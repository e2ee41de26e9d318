//! Joining profiler kernel names to ISA symbols.
//!
//! Profilers print a kernel as its mangled symbol, as a demangled signature
//! (`void ns::k<128, float>(float*, int)`), or as a source-level name; build systems
//! add variant suffixes (`_r4`, `_k2`, `_v1`, `_default`). A profile name matches an ISA
//! kernel at the first level that agrees: exact, demangled base name, variant base name.

pub use katlas_names::{base_name, demangle, strip_template_args, variant_base};

word_enum! {
    /// How a profile name was joined to an ISA kernel (the first level that agrees wins).
    pub enum MatchLevel {
        /// The same symbol.
        Exact = "exact",
        /// The same demangled base name.
        Demangled = "demangled",
        /// The same base name once variant suffixes are peeled.
        Variant = "variant",
    }
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

/// Integer literal casts as cpp_demangle writes them, and the suffix c++filt and the CUDA
/// runtime (torch traces) write instead: `(unsigned long)2` is `2ul`.
const LITERAL_CASTS: &[(&str, &str)] =
    &[("(unsignedlonglong)", "ull"), ("(unsignedlong)", "ul"), ("(unsignedint)", "u"), ("(longlong)", "ll"), ("(long)", "l")];

/// A demangled signature in one spelling, when the name carries template arguments or
/// parameters (`None` for a plain name): spacing removed (`> >` is `>>`), literal casts as
/// suffixes, and no `void` return type before a function named inside template arguments
/// (cpp_demangle writes `<128, 4, void at::native::gpu_kernel_impl<…>(…)::{lambda(int)#1}>`,
/// the CUDA runtime `<128, 4, at::native::gpu_kernel_impl<…>(…)::{lambda(int)#1}>`).
fn signature(name: &str) -> Option<String> {
    let n = name.trim();
    let n = n.strip_suffix(".kd").unwrap_or(n);
    let full = demangle(n).unwrap_or_else(|| n.to_string());
    if !full.contains(['<', '(']) {
        return None;
    }
    let mut s: String = full.chars().filter(|c| !c.is_whitespace()).collect();
    for (cast, suffix) in LITERAL_CASTS {
        while let Some(i) = s.find(cast) {
            let digits = s[i + cast.len()..].chars().take_while(|c| c.is_ascii_digit() || *c == '-').count();
            if digits == 0 {
                break;
            }
            let lit = s[i + cast.len()..i + cast.len() + digits].to_string();
            s.replace_range(i..i + cast.len() + digits, &format!("{lit}{suffix}"));
        }
    }
    for open in ['<', ','] {
        let pat = format!("{open}void");
        let mut from = 0;
        while let Some(j) = s[from..].find(&pat).map(|j| j + from) {
            let after = j + pat.len();
            if s[after..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == ':') {
                s.replace_range(j + 1..after, "");
            }
            from = j + 1;
        }
    }
    Some(s)
}

/// The match level of a profile name against one ISA kernel (name, symbol, demangled).
///
/// Two signatures (template arguments or parameters on both sides) must be the same function:
/// `elementwise_kernel<128, 4, MulFunctor<float>>` is not `elementwise_kernel<128, 4,
/// CUDAFunctor_add<complex<Half>>>`, though both have the base name `at::native::elementwise_kernel`.
/// A base name joins only where one side is a plain name and so cannot tell instantiations apart.
pub fn match_level(profile: &str, isa_names: &[&str]) -> Option<MatchLevel> {
    let p = profile.trim();
    let strip = |s: &str| s.strip_suffix(".kd").unwrap_or(s).to_string();
    if isa_names.iter().any(|n| strip(n) == p) {
        return Some(MatchLevel::Exact);
    }
    let psig = signature(p);
    let isigs: Vec<Option<String>> = isa_names.iter().map(|n| signature(n)).collect();
    if let Some(ps) = &psig {
        if isigs.iter().flatten().any(|s| s == ps) {
            return Some(MatchLevel::Demangled);
        }
    }
    let pb = base_name(p);
    let comparable = |sig: &Option<String>| psig.is_none() || sig.is_none();
    if !pb.is_empty() && isa_names.iter().zip(&isigs).any(|(n, sig)| comparable(sig) && base_name(n) == pb) {
        return Some(MatchLevel::Demangled);
    }
    let pv = variant_base(p);
    if !pv.is_empty() && isa_names.iter().zip(&isigs).any(|(n, sig)| comparable(sig) && variant_base(n) == pv) {
        return Some(MatchLevel::Variant);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // the same function, spelled mangled and demangled (spacing aside)
        assert_eq!(match_level("void ns::k<4>(float*)", &["_ZN2ns1kILi4EEEvPf"]), Some(MatchLevel::Demangled));
        // another instantiation, or a non-template kernel of the same base name, is not it
        assert_eq!(match_level("void k<4>(float*)", &["_Z1kPf"]), None);
        assert_eq!(match_level("void ns::k<4>(float*)", &["_ZN2ns1kILi8EEEvPf"]), None);
        // a plain name cannot tell instantiations apart: the base name joins
        assert_eq!(match_level("ns::k", &["_ZN2ns1kILi8EEEvPf"]), Some(MatchLevel::Demangled));
        assert_eq!(match_level("void gemv<4>(float*)", &["gemv"]), Some(MatchLevel::Demangled));
    }

    /// The same kernels as a torch trace and cpp_demangle spell them (real names from the H200:
    /// the run's trace against the cubins it loaded), and a different instantiation of the same
    /// launcher, which must not join (it did, and showed 27 registers for an 18-register kernel).
    #[test]
    fn torch_trace_names_join_their_own_cubin_symbols_only() {
        let traced = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)";
        let demangled = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, (unsigned long)2>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>>(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, (unsigned long)2>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)";
        assert_eq!(match_level(traced, &["_Zsym", demangled]), Some(MatchLevel::Demangled));
        let mul = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})";
        let mul_cpp = mul.replace("<128, 4, at::native::gpu", "<128, 4, void at::native::gpu").replace("(int, at::native::gpu", "(int, void at::native::gpu");
        assert_eq!(match_level(mul, &[&mul_cpp]), Some(MatchLevel::Demangled));
        let add =
            mul_cpp.replace("BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >", "CUDAFunctor_add<c10::complex<c10::Half> >");
        assert_eq!(match_level(mul, &[&add]), None);
        assert_eq!(match_level("gemv_r2", &["gemv_r4"]), Some(MatchLevel::Variant));
        assert_eq!(match_level("gemv", &["gemm"]), None);
    }
}
