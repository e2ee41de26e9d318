//! Find the line where a dotted key is defined in TOML text.
//!
//! Used only to point error messages at a line; `toml_edit` spans would be
//! exact but pull a second TOML stack into every crate for one lookup.

/// Line (1-based) of the dotted key `a.b.c`: a `[a.b]` header followed by
/// `c = …`, a `[a.b.c]` header, or a top-level `a.b.c = …`/`c = …` in `[a.b]`.
pub fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let parts: Vec<&str> = dotted.split('.').filter(|s| !s.is_empty()).collect();
    if parts.is_empty() {
        return None;
    }
    let norm = |s: &str| s.split('.').map(|p| p.trim().trim_matches('"').trim_matches('\'')).collect::<Vec<_>>().join(".");
    let mut table = String::new();
    let mut header_hit = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("[[").and_then(|l| l.split("]]").next()) {
            table = norm(h);
        } else if let Some(h) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            table = norm(h);
            if table == dotted {
                header_hit.get_or_insert(i + 1);
            }
            continue;
        }
        if let Some((k, _)) = line.split_once('=') {
            let key = norm(k);
            let full = if table.is_empty() { key } else { format!("{table}.{key}") };
            if full == dotted {
                return Some(i + 1);
            }
        }
    }
    header_hit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_headers() {
        let t = "# c\n[project]\nname = \"x\"\n\n[workload.bench]\ncommand = \"y\"\n[workload.bench.env]\nA = \"1\"\n";
        assert_eq!(line_of_key(t, "project.name"), Some(3));
        assert_eq!(line_of_key(t, "workload.bench.command"), Some(6));
        assert_eq!(line_of_key(t, "workload.bench.env"), Some(7));
        assert_eq!(line_of_key(t, "workload.bench.env.A"), Some(8));
        assert_eq!(line_of_key(t, "nope"), None);
    }
}
