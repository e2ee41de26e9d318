//! Kernel names, one way everywhere: fit's profile↔ISA join, dispatch provenance and the ISA
//! reader must agree on what "the same kernel" is, so the demangler, the base name and the
//! build-variant suffixes live here once.
//!
//! A kernel reaches katlas as a mangled symbol (`_ZN2at6native…`, AMD's `….kd` descriptor), a
//! demangled signature (`void at::native::k<128, float>(float*, int)`) or a source-level name;
//! build systems add variant suffixes (`_r4`, `_k2`, `_v1`, `_default`).

mod demangle;

pub use demangle::{demangle, demangle_uncached};

/// The function's qualified base name from any spelling: mangled, demangled signature, or
/// plain name. Return type, parameters, template arguments and `.kd` are dropped:
/// `void at::native::k<4>(int)` → `at::native::k`; `(anonymous namespace)` scopes are dropped.
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
    head.split_whitespace().last().unwrap_or("").to_string()
}

/// The bare function name, without its scope: `void at::native::k<4>(int)` → `k`. What a
/// source file defines and a grep finds.
pub fn bare_name(name: &str) -> String {
    let b = base_name(name);
    b.rsplit("::").next().unwrap_or(&b).to_string()
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

/// `name` without its last build-variant suffix (`_default`, or `_r`/`_k`/`_v` and digits),
/// None when it has none. A name that is nothing but a suffix (`_r4`) keeps it.
pub fn peel_variant(name: &str) -> Option<&str> {
    if let Some(base) = name.strip_suffix("_default").filter(|b| !b.is_empty()) {
        return Some(base);
    }
    let (base, last) = name.rsplit_once('_')?;
    let mut chars = last.chars();
    let tag = chars.next()?;
    let digits = chars.as_str();
    (!base.is_empty() && matches!(tag, 'r' | 'k' | 'v') && !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())).then_some(base)
}

/// The name and each name left as variant suffixes are peeled, most specific first:
/// `gemm_k4_v2` → `gemm_k4_v2`, `gemm_k4`, `gemm`.
pub fn name_variants(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    let mut cur = name;
    while let Some(next) = peel_variant(cur) {
        out.push(next.to_string());
        cur = next;
    }
    out
}

/// The qualified base name with every build-variant suffix peeled.
pub fn variant_base(name: &str) -> String {
    let b = base_name(name);
    let mut cur = b.as_str();
    while let Some(next) = peel_variant(cur) {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names() {
        let sig = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)";
        assert_eq!(base_name(sig), "at::native::vectorized_elementwise_kernel");
        assert_eq!(bare_name(sig), "vectorized_elementwise_kernel");
        assert_eq!(bare_name("void at::(anonymous namespace)::foo<1>(int)"), "foo");
        assert_eq!(bare_name("gemv_hfq4g256_residual"), "gemv_hfq4g256_residual");
        assert_eq!(bare_name("vectoradd_float(float*, int)"), "vectoradd_float");
        assert_eq!(bare_name("unsigned int count_kernel(int*)"), "count_kernel");
        assert_eq!(base_name("_Z15vectoradd_floatPfPKfS1_ii.kd"), "vectoradd_float");
        assert_eq!(base_name("_Z6kernelPfi"), "kernel");
        assert_eq!(base_name("_Z6kernelPfi.kd"), "kernel");
        assert_eq!(base_name("gemv_hfq4g256_residual"), "gemv_hfq4g256_residual");
        assert_eq!(base_name("_ZN2ns4gemvILi4EEEvPKfPfi"), "ns::gemv");
        assert_eq!(
            base_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
            "at::native::vectorized_elementwise_kernel"
        );
    }

    #[test]
    fn variants() {
        assert_eq!(
            name_variants("gemv_hfq4g256_multirow_default_r2"),
            vec!["gemv_hfq4g256_multirow_default_r2", "gemv_hfq4g256_multirow_default", "gemv_hfq4g256_multirow"]
        );
        assert_eq!(name_variants("gemm_k4_v2"), vec!["gemm_k4_v2", "gemm_k4", "gemm"]);
        assert_eq!(name_variants("attention_flash"), vec!["attention_flash"]);
        assert_eq!(variant_base("gemv_hfq4g256_residual_r4"), "gemv_hfq4g256_residual");
        assert_eq!(variant_base("gemv_k2_v1"), "gemv");
        assert_eq!(variant_base("attn_default"), "attn");
        assert_eq!(variant_base("q8_0_kv"), "q8_0_kv");
        assert_eq!(variant_base("_r4"), "_r4");
        assert_eq!(name_variants("_r4"), vec!["_r4"]);
        assert_eq!(variant_base("_default"), "_default");
    }
}
