//! Kernel-name handling: demangling, the bare function name of a demangled
//! signature, and the name variants dispatch provenance searches for.

/// Demangled form of an Itanium-mangled name (`_Z...`); `None` when not mangled or not demanglable.
pub fn demangle(name: &str) -> Option<String> {
    let n = name.strip_prefix('_').filter(|r| r.starts_with("_Z")).unwrap_or(name);
    if !n.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(n).ok()?;
    sym.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

/// The bare function name of a (possibly demangled) kernel name:
/// `void at::native::foo<4, F>(int, F)` -> `foo`; `gemv_k` -> `gemv_k`.
pub fn base_function(name: &str) -> String {
    let mut s = name.trim();
    s = s.strip_prefix("void ").unwrap_or(s);
    // Cut at the first `(` or `<` at nesting depth 0.
    let mut depth = 0i32;
    let mut cut = s.len();
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' if depth == 0 => {
                // `(anonymous namespace)` is part of the scope, not the parameter list.
                if s[i..].starts_with("(anonymous namespace)") {
                    depth += 1;
                    continue;
                }
                cut = i;
                break;
            }
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            _ => {}
        }
    }
    let head = &s[..cut];
    head.rsplit("::").next().unwrap_or(head).trim().to_string()
}

/// Variants of a kernel base name, most specific first: the name itself, then
/// with `_rN`, `_kN`, `_vN` and `_default` suffixes peeled one at a time.
pub fn name_variants(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    let mut cur = name.to_string();
    loop {
        let next = peel_suffix(&cur);
        match next {
            Some(n) if !n.is_empty() && !out.contains(&n) => {
                out.push(n.clone());
                cur = n;
            }
            _ => break,
        }
    }
    out
}

fn peel_suffix(s: &str) -> Option<String> {
    if let Some(base) = s.strip_suffix("_default") {
        return Some(base.to_string());
    }
    let (base, last) = s.rsplit_once('_')?;
    let mut chars = last.chars();
    let tag = chars.next()?;
    let digits: String = chars.collect();
    if matches!(tag, 'r' | 'k' | 'v') && !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
        Some(base.to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles() {
        assert_eq!(demangle("_Z15vectoradd_floatPfPKfS1_ii").as_deref(), Some("vectoradd_float(float*, float const*, float const*, int, int)"));
        assert_eq!(demangle("gemv_hfq4"), None);
    }

    #[test]
    fn base_functions() {
        assert_eq!(base_function("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)"), "vectorized_elementwise_kernel");
        assert_eq!(base_function("void at::(anonymous namespace)::foo<1>(int)"), "foo");
        assert_eq!(base_function("gemv_hfq4g256_residual"), "gemv_hfq4g256_residual");
        assert_eq!(base_function("vectoradd_float(float*, int)"), "vectoradd_float");
    }

    #[test]
    fn variants() {
        assert_eq!(
            name_variants("gemv_hfq4g256_multirow_default_r2"),
            vec!["gemv_hfq4g256_multirow_default_r2", "gemv_hfq4g256_multirow_default", "gemv_hfq4g256_multirow"]
        );
        assert_eq!(name_variants("gemm_k4_v2"), vec!["gemm_k4_v2", "gemm_k4", "gemm"]);
        assert_eq!(name_variants("attention_flash"), vec!["attention_flash"]);
    }
}
