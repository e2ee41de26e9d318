//! Dispatch references in host code, and kernel entry points in kernel sources.
//!
//! A small lexer (not a parser: host code may be Rust, C++, Python …) splits host files into
//! code, strings and comments. Identifiers in code and word tokens inside string literals count
//! as references (`"gemv_hfq4g256"`, `include_str!("kernels/src/gemv.hip")`, `launch(gemv_hfq4)`);
//! comments never do. Line comments starting `perf:` or `correctness:` are gate annotations on
//! the dispatch branch they sit on (or the next code line). Names built at run time
//! (`format!("gemv_{q}")`) are invisible to this: list such kernels in `[reach] allow_undispatched`.

use crate::config::Settings;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, PartialEq, schemars::JsonSchema)]
pub struct Annotation {
    /// `perf` or `correctness`.
    pub kind: String,
    pub file: String,
    pub line: usize,
    /// The annotation text after the colon.
    pub text: String,
    /// `key=value` fields of the text (`kernel=…`, `variant=…`, `arch=…`).
    pub fields: BTreeMap<String, String>,
    /// The code of the branch it annotates.
    pub branch: Option<String>,
}

#[derive(Debug, Default)]
pub struct HostScan {
    /// Host files scanned (project-relative).
    pub files: Vec<String>,
    /// Token -> first place it appears (`file:line`).
    pub tokens: HashMap<String, String>,
    pub annotations: Vec<Annotation>,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn add(tok: &str, line: usize, file: &str, tokens: &mut HashMap<String, String>) {
    if !tokens.contains_key(tok) {
        tokens.insert(tok.to_string(), format!("{file}:{line}"));
    }
}

/// Word tokens of a string literal's contents.
fn words(s: &str, line: usize, file: &str, tokens: &mut HashMap<String, String>) {
    for w in s.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()) {
        add(w, line, file, tokens);
    }
}

/// Lex one host file: code identifiers and string-literal words go to `tokens`, `perf:` and
/// `correctness:` line comments to `annotations`.
pub fn lex(text: &str, file: &str, ext: &str, tokens: &mut HashMap<String, String>, annotations: &mut Vec<Annotation>) {
    let hash_comments = matches!(ext, "py" | "sh" | "toml" | "yml" | "yaml");
    let single_quote_strings = matches!(ext, "py" | "js" | "ts" | "sh");
    let chars: Vec<char> = text.chars().collect();
    let lines: Vec<&str> = text.lines().collect();
    let mut line = 1usize;
    let mut i = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if (c == '/' && next == Some('/')) || (hash_comments && c == '#') {
            let start = if c == '#' { i + 1 } else { i + 2 };
            let mut j = start;
            while j < chars.len() && chars[j] != '\n' {
                j += 1;
            }
            let body: String = chars[start..j].iter().collect();
            let body = body.trim_start_matches('/').trim();
            for kind in ["perf", "correctness"] {
                if let Some(rest) = body.strip_prefix(kind).and_then(|r| r.strip_prefix(':')) {
                    annotations.push(annotation(kind, rest.trim(), file, line, &lines));
                }
            }
            i = j;
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && (i == 0 || !is_ident(chars[i - 1])) {
            // Rust raw string r"…" / r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                add("r", line, file, tokens);
                i += 1;
                continue;
            }
            let start_line = line;
            let mut k = j + 1;
            let mut body = String::new();
            while k < chars.len() {
                if chars[k] == '"' && (0..hashes).all(|h| chars.get(k + 1 + h) == Some(&'#')) {
                    break;
                }
                if chars[k] == '\n' {
                    line += 1;
                }
                body.push(chars[k]);
                k += 1;
            }
            words(&body, start_line, file, tokens);
            i = k + 1 + hashes;
        } else if c == '\'' && !single_quote_strings {
            // C/Rust char literal ('"', '\'', '\n') or a Rust lifetime: never a string opener.
            if next == Some('\\') {
                let close = (i + 3..(i + 12).min(chars.len())).find(|&k| chars[k] == '\'');
                i = close.map(|k| k + 1).unwrap_or(i + 1);
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c == '"' || (single_quote_strings && c == '\'') {
            let start_line = line;
            let mut k = i + 1;
            let mut body = String::new();
            while k < chars.len() && chars[k] != c {
                if chars[k] == '\\' {
                    k += 1;
                    body.push(' ');
                } else {
                    if chars[k] == '\n' {
                        line += 1;
                    }
                    body.push(chars[k]);
                }
                k += 1;
            }
            words(&body, start_line, file, tokens);
            i = k + 1;
        } else if is_ident_start(c) {
            let mut j = i;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            let w: String = chars[i..j].iter().collect();
            add(&w, line, file, tokens);
            i = j;
        } else {
            i += 1;
        }
    }
}

fn annotation(kind: &str, text: &str, file: &str, line: usize, lines: &[&str]) -> Annotation {
    let fields =
        text.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.trim_matches(|c| c == ',' || c == ';').to_string())).collect();
    let own = lines.get(line - 1).map(|l| {
        let cut = l.find("//").or_else(|| l.find('#')).unwrap_or(l.len());
        l[..cut].trim().to_string()
    });
    let branch = match own {
        Some(code) if !code.is_empty() => Some(code),
        _ => lines[line.min(lines.len())..].iter().map(|l| l.trim()).find(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with('#')).map(str::to_string),
    };
    Annotation { kind: kind.into(), file: file.into(), line, text: text.into(), fields, branch }
}

/// Host files under the dispatch roots (sorted by name per root), kernel sources and kernel
/// roots, `target/`, `.katlas/`, `.git/` left out: `(canonical path, project-relative path)`.
pub(crate) fn host_files(s: &Settings, skip: &BTreeSet<PathBuf>) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for root in &s.dispatch_roots {
        for e in walkdir::WalkDir::new(root).sort_by_file_name().into_iter().flatten() {
            if !e.file_type().is_file() {
                continue;
            }
            let p = e.path();
            let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
            if !s.host_extensions.iter().any(|x| x == ext) {
                continue;
            }
            let canon = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            // A kernel root inside the dispatch root leaves its files out; one that holds the whole
            // dispatch root (the default `src/`, also host code) leaves out only kernel sources.
            if skip.contains(&canon) || s.kernel_roots.iter().any(|k| canon.starts_with(k) && k.starts_with(root) && k != root) {
                continue;
            }
            // Below the dispatch root only: a project under a `target/` directory is still scanned.
            let inner = p.strip_prefix(root).unwrap_or(p);
            if inner.components().any(|c| c.as_os_str() == "target" || c.as_os_str() == ".katlas" || c.as_os_str() == ".git") {
                continue;
            }
            let rel = s.rel(&canon);
            out.push((canon, rel));
        }
    }
    out
}

/// Scan every host file under the dispatch roots, skipping kernel sources and kernel roots.
pub fn scan_host(s: &Settings, skip: &BTreeSet<PathBuf>) -> HostScan {
    let mut out = HostScan::default();
    for (canon, file) in host_files(s, skip) {
        let Ok(bytes) = std::fs::read(&canon) else {
            continue;
        };
        let ext = canon.extension().and_then(|x| x.to_str()).unwrap_or("");
        let text = String::from_utf8_lossy(&bytes);
        lex(&text, &file, ext, &mut out.tokens, &mut out.annotations);
        out.files.push(file);
    }
    out
}

/// Kernel entry points declared in `text`: the function after `__global__`,
/// `__attribute__((global))` or one of `macros` (whose own argument list is skipped).
/// Preprocessor lines are ignored (a header's `#define __global__ …` declares nothing).
/// Token-pasted names (`gemv_##name`) give their fixed prefix as a pattern `gemv_*`.
pub fn entry_points(text: &str, macros: &[String]) -> BTreeSet<String> {
    let code: String = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
    let mut out = BTreeSet::new();
    let chars: Vec<char> = code.chars().collect();
    let mut markers: Vec<String> = vec!["__global__".into(), "__attribute__((global))".into()];
    markers.extend(macros.iter().cloned());
    for m in &markers {
        let mut from = 0;
        while let Some(pos) = code[from..].find(m.as_str()) {
            let at = from + pos;
            from = at + m.len();
            let before_ok = at == 0 || !is_ident(code[..at].chars().last().unwrap_or(' '));
            let after_ok = !code[from..].chars().next().is_some_and(is_ident);
            if !before_ok || !after_ok {
                continue;
            }
            if let Some(name) = name_after(&chars, code[..from].chars().count()) {
                out.insert(name);
            }
        }
    }
    out
}

/// The identifier right before the first `(` that is not an attribute's or macro's argument list.
fn name_after(chars: &[char], mut i: usize) -> Option<String> {
    let skip_parens = |i: &mut usize| {
        let mut depth = 0i32;
        while *i < chars.len() {
            match chars[*i] {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        *i += 1;
                        return;
                    }
                }
                _ => {}
            }
            *i += 1;
        }
    };
    // A macro's own argument list directly after it.
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    if chars.get(i) == Some(&'(') {
        skip_parens(&mut i);
    }
    let mut last: Option<String> = None;
    let mut steps = 0;
    while i < chars.len() && steps < 64 {
        let c = chars[i];
        if c == ';' || c == '{' || c == '}' {
            return None;
        }
        if is_ident_start(c) {
            let mut j = i;
            while j < chars.len() && is_ident(chars[j]) {
                j += 1;
            }
            last = Some(chars[i..j].iter().collect());
            i = j;
            steps += 1;
            continue;
        }
        if c == '#' && chars.get(i + 1) == Some(&'#') {
            // token pasting: keep the prefix as a pattern (`prefix*`), skip the pasted part
            if let Some(l) = last.as_mut() {
                if !l.ends_with('*') {
                    l.push('*');
                }
            }
            i += 2;
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '#') {
                i += 1;
            }
            continue;
        }
        if c == '<' {
            // template arguments of the name: skip to the matching '>'
            let mut depth = 0;
            while i < chars.len() {
                match chars[i] {
                    '<' => depth += 1,
                    '>' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c == '(' {
            let name = last.take()?;
            if name.starts_with("__") {
                // __launch_bounds__(…), __attribute__((…)): not the name
                skip_parens(&mut i);
                continue;
            }
            return Some(name);
        }
        i += 1;
    }
    None
}

/// Entry points of a kernel source and every file it includes.
pub fn source_entries(path: &Path, include_dirs: &[PathBuf], macros: &[String]) -> BTreeSet<String> {
    let mut files = vec![path.to_path_buf()];
    files.extend(crate::includes::includes(path, include_dirs).files);
    let mut out = BTreeSet::new();
    for f in files {
        if let Ok(b) = std::fs::read(&f) {
            out.extend(entry_points(&String::from_utf8_lossy(&b), macros));
        }
    }
    out
}

/// Where `name` (an entry point or module name; `prefix*` matches any longer token with that
/// prefix) is referenced, if anywhere.
pub fn find_ref<'a>(tokens: &'a HashMap<String, String>, name: &str) -> Option<(&'a str, &'a str)> {
    match name.strip_suffix('*') {
        Some(prefix) => {
            tokens.iter().filter(|(t, _)| t.len() > prefix.len() && t.starts_with(prefix)).min_by(|a, b| a.1.cmp(b.1)).map(|(t, at)| (t.as_str(), at.as_str()))
        }
        None => tokens.get_key_value(name).map(|(t, at)| (t.as_str(), at.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexer_counts_code_and_strings_not_comments() {
        let src = "// gemv_dead is only mentioned here\nlet m = load(\"kernels/src/gemv_live.hip\");\n/* rmsnorm_dead */ launch(rope_k, r#\"attn \"raw\"\"#);\nlet q = '\"'; let e = '\\''; fn f<'a>(x: &'a str) {} // silu_dead\n";
        let mut t = HashMap::new();
        let mut a = Vec::new();
        lex(src, "host.rs", "rs", &mut t, &mut a);
        assert!(t.contains_key("gemv_live"));
        assert_eq!(t["gemv_live"], "host.rs:2");
        assert!(t.contains_key("rope_k") && t.contains_key("attn") && t.contains_key("raw"));
        assert!(!t.contains_key("gemv_dead") && !t.contains_key("rmsnorm_dead"));
        assert!(!t.contains_key("silu_dead"), "char literals with quotes do not open strings");
        assert!(t.contains_key("f") && t.contains_key("str"));
    }

    #[test]
    fn annotations_are_read_with_their_branch() {
        let src = "match arch {\n    // perf: kernel=gemv variant=wide measured on gfx1100\n    a if a.has_wmma() => wide(),\n    _ => narrow(), // correctness: portable default\n}\n";
        let mut t = HashMap::new();
        let mut a = Vec::new();
        lex(src, "d.rs", "rs", &mut t, &mut a);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].kind, "perf");
        assert_eq!(a[0].line, 2);
        assert_eq!(a[0].fields["kernel"], "gemv");
        assert_eq!(a[0].fields["variant"], "wide");
        assert_eq!(a[0].branch.as_deref(), Some("a if a.has_wmma() => wide(),"));
        assert_eq!(a[1].kind, "correctness");
        assert_eq!(a[1].branch.as_deref(), Some("_ => narrow(),"));
    }

    #[test]
    fn entry_points_of_common_spellings() {
        let src = "#define __global__ __attribute__((global))\n\
            extern \"C\" __global__ void plain_k(float* x) {}\n\
            __global__ __launch_bounds__(256) void bounded_k(int n) {}\n\
            template <int N> __global__ void templ_k(float* y) {}\n\
            LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* W) {}\n\
            LAB_KERNEL(128) attn_split(const float* q) {}\n";
        let e = entry_points(src, &["LAB_KERNEL".to_string()]);
        let want: BTreeSet<String> = ["plain_k", "bounded_k", "templ_k", "gemv_hfq4g256_*", "attn_split"].iter().map(|s| s.to_string()).collect();
        assert_eq!(e, want);
    }
}
