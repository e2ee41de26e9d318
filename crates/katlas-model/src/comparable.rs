//! When two rows (or groups of rows) may be compared: the one rule `corpus compare` and
//! `fit --baseline` both apply. A different workload, phase, shape or arch measures another
//! thing and is refused; a different host, GPU product or binary is compared with a warning
//! that part of any difference may be the machine or the build.

/// Fields whose difference refuses the comparison.
pub const REFUSE_ON: &[&str] = &["workload", "phase", "shape_bucket", "arch"];

/// Fields whose difference is a warning, with the words for it.
pub const WARN_ON: &[(&str, &str)] =
    &[("host", "cross-host: the sides ran on different hosts"), ("product", "different GPU products"), ("binary_md5", "different binaries")];

/// Judges two sides: `field(name)` gives each side's value of a field as shown. `Err` names the
/// field that refuses the comparison; `Ok` holds the warnings.
pub fn judge<E: From<String>>(mut field: impl FnMut(&str) -> Result<(String, String), E>) -> Result<Vec<String>, E> {
    for f in REFUSE_ON {
        let (a, b) = field(f)?;
        if a != b {
            return Err(E::from(format!("not comparable: {f} differs ({a} vs {b})")));
        }
    }
    let mut warnings = Vec::new();
    for (f, what) in WARN_ON {
        let (a, b) = field(f)?;
        if a != b {
            warnings.push(format!("{what} ({a} vs {b}): part of any difference may be the machine or build"));
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_on_the_measured_thing_and_warns_on_the_machine() {
        let side = |over: &'static str| move |f: &str| -> Result<(String, String), String> { Ok(("x".into(), if f == over { "y" } else { "x" }.into())) };
        assert_eq!(judge(side("arch")), Err("not comparable: arch differs (x vs y)".to_string()));
        let w = judge(side("product")).unwrap();
        assert_eq!(w, ["different GPU products (x vs y): part of any difference may be the machine or build"]);
        assert!(judge(side("none")).unwrap().is_empty());
    }
}
