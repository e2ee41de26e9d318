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
    let owned = demangle(n).unwrap_or_else(|| n.to_string());
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
