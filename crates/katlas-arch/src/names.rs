//! Spellings of atom and product names as tools print them.

/// Canonical atom key for the many spellings of a target:
/// `gfx90a:xnack-` and `amdgcn-amd-amdhsa--gfx90a:sramecc+` -> `gfx90a`;
/// `sm90`, `SM_90`, `compute_90`, `9.0` -> `sm_90`; `sm_90a` stays `sm_90a`.
pub fn canonical_atom(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    if let Some(pos) = n.find("gfx") {
        // Target ids carry features after ':' (`gfx90a:sramecc+:xnack-`).
        let t = &n[pos..];
        let end = t.find(|c: char| c == ':' || c.is_whitespace()).unwrap_or(t.len());
        return t[..end].to_string();
    }
    let digits = |s: &str| -> Option<String> {
        let s = s.trim_start_matches('_');
        let (num, suffix) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
        if num.is_empty() || !(suffix.is_empty() || suffix == "a" || suffix == "f") {
            return None;
        }
        Some(format!("sm_{num}{suffix}"))
    };
    for prefix in ["sm", "compute", "cc"] {
        if let Some(rest) = n.strip_prefix(prefix) {
            if let Some(s) = digits(rest) {
                return s;
            }
        }
    }
    // Compute capability "9.0" / "12.0".
    if let Some((maj, min)) = n.split_once('.') {
        if !maj.is_empty() && maj.chars().all(|c| c.is_ascii_digit()) && min.len() == 1 && min.chars().all(|c| c.is_ascii_digit()) {
            return format!("sm_{maj}{min}");
        }
    }
    n
}

/// Lower-case alphanumeric tokens of a product string ("AMD Radeon RX 7900 XTX" ->
/// [amd, radeon, rx, 7900, xtx]); NVIDIA's "A100-SXM4-80GB" splits at the dashes.
pub fn tokens(s: &str) -> Vec<String> {
    s.to_ascii_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// Words that say nothing about which board it is.
pub fn is_filler(t: &str) -> bool {
    matches!(t, "amd" | "nvidia" | "ati" | "radeon" | "geforce" | "instinct" | "graphics" | "tesla" | "pro" | "gpu")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atom_spellings() {
        assert_eq!(canonical_atom("gfx90a:xnack-"), "gfx90a");
        assert_eq!(canonical_atom("gfx942:sramecc+:xnack-"), "gfx942");
        assert_eq!(canonical_atom("hipv4-amdgcn-amd-amdhsa--gfx1100"), "gfx1100");
        assert_eq!(canonical_atom("GFX1201"), "gfx1201");
        assert_eq!(canonical_atom("sm90"), "sm_90");
        assert_eq!(canonical_atom("sm_90a"), "sm_90a");
        assert_eq!(canonical_atom("SM_89"), "sm_89");
        assert_eq!(canonical_atom("compute_80"), "sm_80");
        assert_eq!(canonical_atom("9.0"), "sm_90");
        assert_eq!(canonical_atom("12.0"), "sm_120");
        assert_eq!(canonical_atom("bogus"), "bogus");
    }

    #[test]
    fn product_tokens() {
        assert_eq!(tokens("NVIDIA A100-SXM4-80GB"), ["nvidia", "a100", "sxm4", "80gb"]);
    }
}
