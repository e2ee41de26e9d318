//! Facts about the real hipfire tree (fixtures/hipfire-tree, MIT) read here with plain regexes,
//! independently of katlas's lexer: the truth the provenance tests
//! (crates/katlas-collect/tests/it/provenance_hipfire.rs) and the peer differential
//! (crates/katlas/tests/it/hipfire_peer.rs) hold both tools to.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub fn tree() -> PathBuf {
    crate::fixture("hipfire-tree").canonicalize().unwrap()
}

/// kernels/, crates/ and scripts/ of the tree copied into `dir`: a project that katlas and the
/// peer read as the real tree, with a katlas.toml of the test's own beside them.
pub fn copy_sources(dir: &Path) {
    for sub in ["kernels", "crates", "scripts"] {
        crate::copy_tree(&tree().join(sub), &dir.join(sub));
    }
}

/// The `.rs` files under the tree's crates/, sorted.
pub fn rust_files() -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&tree().join("crates"), &mut out);
    out.sort();
    out
}

/// What each `*_for_arch` function of kernels.rs returns on `arch`, read here with regexes
/// (independently of katlas's lexer): kernel -> (source file, the arm's line). Arms that are not a
/// plain `(CONST, "module")` (the RDNA2 variant block, a `panic!`) are left out.
pub fn for_arch_files(arch: &str) -> BTreeMap<String, (String, usize)> {
    let text = std::fs::read_to_string(tree().join("crates/rdna-compute/src/kernels.rs")).unwrap();
    let consts: HashMap<String, String> = regex::Regex::new(r#"const (\w+): &str = include_str!\("[./]*/kernels/src/([^"]+)"\)"#)
        .unwrap()
        .captures_iter(&text)
        .map(|c| (c[1].to_string(), format!("kernels/src/{}", &c[2])))
        .collect();
    let fun = regex::Regex::new(r"(?s)\npub fn (\w+)_for_arch\(arch: &str\)[^{]*\{(.*?)\n\}").unwrap();
    // An arm of the outer match: indented like the first (a nested match's arms are deeper).
    let arm = regex::Regex::new(r#"(?m)^([ \t]*)((?:"gfx\w+"\s*\|?\s*)+|_)\s*=>\s*\{?\s*(?:\(\s*(\w+)\s*,)?"#).unwrap();
    let mut out = BTreeMap::new();
    for f in fun.captures_iter(&text) {
        let body_at = f.get(2).unwrap().start();
        let body = &f[2];
        let body = &body[body.find("match arch").unwrap_or(0)..];
        let offset = f[2].len() - body.len();
        let code: String = body.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n");
        let mut indent = None;
        for a in arm.captures_iter(body) {
            if *indent.get_or_insert(a[1].len()) != a[1].len() {
                continue;
            }
            let chips: Vec<&str> = a[2].split('|').map(|c| c.trim().trim_matches('"')).collect();
            if chips.contains(&arch) || (chips == ["_"] && !code.contains(&format!("\"{arch}\""))) {
                if let Some(file) = a.get(3).and_then(|c| consts.get(c.as_str())) {
                    let line = text[..body_at + offset + a.get(2).unwrap().start()].matches('\n').count() + 1;
                    out.insert(f[1].to_string(), (file.clone(), line));
                }
                break;
            }
        }
    }
    out
}

/// One `begin_timer(…, "LABEL", …)` site under crates/ and what the code around it loads.
#[derive(Debug, Clone)]
pub struct TimerSite {
    pub label: String,
    /// Project-relative file and 1-based line of the label's literal.
    pub file: String,
    pub line: usize,
    /// The `fn` the call is in.
    pub function: String,
    /// The string literals of the last `ensure_kernel(…)` call between that `fn` and the timer.
    pub loaded: Vec<String>,
}

/// Every profiler timer site of the tree, read with regexes.
pub fn timer_sites() -> Vec<TimerSite> {
    let call = regex::Regex::new(r#"(?s)begin_timer\s*\(([^;]*?)\)\s*;"#).unwrap();
    let lit = regex::Regex::new(r#""([^"\\]*)""#).unwrap();
    let fun = regex::Regex::new(r"\bfn\s+(\w+)").unwrap();
    let ensure = regex::Regex::new(r"(?s)[^\w]ensure_kernel\s*\((.*?)\)\s*\?").unwrap();
    let mut out = Vec::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let rel = path.strip_prefix(tree()).unwrap().display().to_string();
        for c in call.captures_iter(&text) {
            let lits: Vec<&str> = lit.captures_iter(&c[1]).map(|m| m.get(1).unwrap().as_str()).collect();
            if lits.len() < 2 {
                continue;
            }
            let at = c.get(0).unwrap().start();
            // katlas cites the line of the label's literal (a call may span lines).
            let label_at = c.get(1).unwrap().start() + lit.captures_iter(&c[1]).nth(1).unwrap().get(0).unwrap().start();
            let Some(f) = fun.captures_iter(&text[..at]).last() else { continue };
            let body = &text[f.get(0).unwrap().start()..at];
            let loaded = ensure
                .captures_iter(body)
                .last()
                .map(|m| {
                    lit.captures_iter(&m[1])
                        .map(|l| l[1].to_string())
                        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                        .collect()
                })
                .unwrap_or_default();
            out.push(TimerSite {
                label: lits[1].to_string(),
                file: rel.clone(),
                line: text[..label_at].matches('\n').count() + 1,
                function: f[1].to_string(),
                loaded,
            });
        }
    }
    out
}

/// Labels of [`timer_sites`] that no kernel bears: no kernels/src file is named after them, no
/// kernel source holds the word, and no `ensure_kernel` call loads it.
pub fn labels_without_kernel() -> BTreeMap<String, Vec<TimerSite>> {
    let sites = timer_sites();
    let mut words = std::collections::HashSet::new();
    let word = regex::Regex::new(r"\w+").unwrap();
    for e in std::fs::read_dir(tree().join("kernels/src")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        words.insert(name.split('.').next().unwrap().to_string());
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        words.extend(word.find_iter(&text).map(|m| m.as_str().to_string()));
    }
    let ensure_lits = regex::Regex::new(r#"(?s)ensure_kernel\s*\(\s*"(\w+)""#).unwrap();
    let mut all_loaded = std::collections::HashSet::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        all_loaded.extend(ensure_lits.captures_iter(&text).map(|c| c[1].to_string()));
    }
    let mut out: BTreeMap<String, Vec<TimerSite>> = BTreeMap::new();
    for s in sites {
        if !words.contains(&s.label) && !all_loaded.contains(&s.label) {
            out.entry(s.label.clone()).or_default().push(s);
        }
    }
    out
}
