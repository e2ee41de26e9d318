//! The project's runtime model of kernel loading, read from its host code:
//!
//! - [`LoadPattern`]: what counts as a kernel load, e.g. hipfire's
//!   `ensure_kernel("{name}", _, "{name}")` (a kernel loaded by name) and
//!   `include_str!("{file}")` (a kernel source embedded in the binary). Patterns match calls in
//!   a lexed token stream: comments never count, a mention that is not such a call never counts.
//! - [`FamilyRule`]: how the runtime maps an arch to a family tag: the arch table (`table`), or
//!   the first N characters of the arch name (`prefix5`: hipfire's `arch_family="${arch:0:5}"` in
//!   compile-kernels.sh and `arch.starts_with("gfx11")` in its dispatch).
//! - [`Selector`]: a run-time variant selector: on some atoms, an env knob picks the source file
//!   (hipfire's `gemv_hfq4g256_for_arch`: `HIPFIRE_RDNA2_VARIANT` on gfx1030/gfx1031).
//! - [`HostIndex`]: every load, every reference and every env read of the host code, from one
//!   pass over the files (line numbers stay right across strings continued with a trailing `\`).
//!
//! This file uses only std, serde, schemars, regex and katlas-arch: katlas-build's `reach`
//! compiles this same file (`#[path]`), so `katlas provenance` and `katlas reach` read host code
//! identically.

use katlas_arch::ArchDb;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// Load patterns

/// One argument position of a [`LoadPattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// `_`: any argument.
    Any,
    /// `"{name}"`: a string literal naming a kernel (module or function).
    Name,
    /// `"{file}"`: a string literal path to a kernel source file (relative to the host file).
    File,
}

/// A call that loads a kernel: `callee(ARG, ARG, …)` with each ARG `_`, `"{name}"` or
/// `"{file}"`; `callee` is an identifier, `name!` for a macro. Extra call arguments are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadPattern {
    /// The pattern as written.
    pub text: String,
    /// The called identifier (`ensure_kernel`, `include_str`).
    pub callee: String,
    /// A macro call (`include_str!`).
    pub bang: bool,
    pub args: Vec<ArgKind>,
}

fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_ident_like(s: &str) -> bool {
    !s.is_empty() && !s.as_bytes()[0].is_ascii_digit() && s.bytes().all(is_ident_byte)
}

impl LoadPattern {
    pub fn parse(s: &str) -> Result<LoadPattern, String> {
        let t = s.trim();
        let bad = |why: &str| format!("load pattern `{s}`: {why} (expected `callee(ARG, …)` with ARG `_`, `\"{{name}}\"` or `\"{{file}}\"`)");
        let open = t.find('(').ok_or_else(|| bad("no `(`"))?;
        if !t.ends_with(')') {
            return Err(bad("it does not end with `)`"));
        }
        let head = t[..open].trim();
        let (callee, bang) = match head.strip_suffix('!') {
            Some(c) => (c.trim(), true),
            None => (head, false),
        };
        if !is_ident_like(callee) {
            return Err(bad("the callee is not an identifier"));
        }
        let inner = &t[open + 1..t.len() - 1];
        let mut args = Vec::new();
        for a in inner.split(',') {
            let a = a.trim();
            let k = match a {
                "_" | "…" | "..." => ArgKind::Any,
                "\"{name}\"" => ArgKind::Name,
                _ if a.starts_with('"') && (a.ends_with("/{file}\"") || a == "\"{file}\"") => ArgKind::File,
                _ if a.starts_with('"') && a.ends_with('"') && !a.contains('{') => ArgKind::Any,
                _ => return Err(bad(&format!("argument `{a}`"))),
            };
            args.push(k);
        }
        if !args.iter().any(|k| *k != ArgKind::Any) {
            return Err(bad("no `\"{name}\"` or `\"{file}\"` argument"));
        }
        Ok(LoadPattern { text: t.to_string(), callee: callee.to_string(), bang, args })
    }

    /// `ensure_kernel` / `include_str!`.
    pub fn call(&self) -> String {
        if self.bang {
            format!("{}!", self.callee)
        } else {
            self.callee.clone()
        }
    }

    pub fn has(&self, k: ArgKind) -> bool {
        self.args.contains(&k)
    }
}

/// Parse a list of patterns, naming the first bad one.
pub fn parse_patterns(list: &[String]) -> Result<Vec<LoadPattern>, String> {
    list.iter().map(|p| LoadPattern::parse(p)).collect()
}

// ---------------------------------------------------------------------------------------------
// Family rule

/// How the runtime maps an arch to a family tag: one definition, in katlas-arch.
pub use katlas_arch::FamilyRule;

/// An atom's class, with APU/dGPU when the product table says (`rdna3p5, APU`).
fn atom_kind(db: &ArchDb, a: &katlas_arch::Atom) -> String {
    let products = db.products_for_atom(&a.name);
    if products.is_empty() {
        a.class.clone()
    } else if products.iter().any(|p| p.memory_type.as_deref().is_some_and(|m| m.contains("shared with the CPU"))) {
        format!("{}, APU", a.class)
    } else {
        format!("{}, dGPU", a.class)
    }
}

/// When a family rule gives `atom` the family tag `tag` but the arch table does not: what that
/// means, in one line ("gfx1151 (rdna3p5, APU) takes a gfx11 file, but its table family is
/// gfx115: gfx11 is gfx1100 gfx1101 gfx1102 [rdna3_dgpu, dGPU], gfx1103 [rdna3_apu] in the arch table").
pub fn rule_family_hazard(db: &ArchDb, atom: &str, tag: &str) -> Option<String> {
    let a = db.atom(atom)?;
    if db.family_tags(atom, FamilyRule::Table).iter().any(|f| f == tag) {
        return None;
    }
    let mut by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in db.atoms().filter(|m| m.family == tag || m.also_families.iter().any(|f| f == tag)) {
        by_kind.entry(atom_kind(db, m)).or_default().push(m.name.clone());
    }
    let fam = if by_kind.is_empty() {
        format!("{tag} is no family of the arch table")
    } else {
        let mut groups: Vec<(String, Vec<String>)> = by_kind.into_iter().collect();
        groups.sort_by(|x, y| x.1.first().cmp(&y.1.first()));
        format!("{tag} is {} in the arch table", groups.iter().map(|(k, m)| format!("{} [{k}]", m.join(" "))).collect::<Vec<_>>().join(", "))
    };
    Some(format!("{} ({}) takes a {tag} file, but its table family is {}: {fam}", a.name, atom_kind(db, a), a.family))
}

// ---------------------------------------------------------------------------------------------
// Variant selectors

/// A run-time variant selector (`[[reach.selectors]]`): on `archs`, the runtime loads `kernel`
/// from one of `files`, picked by the env knob `knob` (`default` when unset or unlisted), or from
/// `file` when there is no knob. The arms of a selector function's arch `match`
/// ([`HostIndex::arch_selectors`]) are selectors too, one per arm.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Kernel (function) name the selector picks a source for.
    pub kernel: String,
    /// Where the selection is made (shown in reasons), e.g. `gemv_hfq4g256_for_arch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Atoms the selector applies to; `["*"]`: every atom but those in `except` (a match's
    /// default arm `_ =>`).
    pub archs: Vec<String>,
    /// With `archs = ["*"]`: the atoms another arm takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except: Vec<String>,
    /// `file:line` of the match arm this selector was read from (none for a configured one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Env variable whose value picks the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob: Option<String>,
    /// Knob value used when the variable is unset (or names no listed file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The file when there is no knob (a file name under a kernel root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Knob value -> file name under a kernel root.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

impl Selector {
    pub fn validate(&self) -> Result<(), String> {
        let who = format!("selector for `{}`", self.kernel);
        if self.archs.is_empty() {
            return Err(format!("{who}: `archs` is empty"));
        }
        if self.archs.len() > 1 && self.archs.iter().any(|a| a == "*") {
            return Err(format!("{who}: `*` stands alone in `archs` (list the others in `except`)"));
        }
        if !self.except.is_empty() && self.archs != ["*"] {
            return Err(format!("{who}: `except` goes with `archs = [\"*\"]`"));
        }
        match (&self.knob, &self.file, self.files.is_empty()) {
            (None, Some(_), true) => Ok(()),
            (Some(_), None, false) => match &self.default {
                Some(d) if self.files.contains_key(d) => Ok(()),
                Some(d) => Err(format!("{who}: default `{d}` is not a key of `files`")),
                None => Err(format!("{who}: a knob needs a `default` value")),
            },
            _ => Err(format!("{who}: give either `file` (no knob) or `knob`, `default` and `files`")),
        }
    }

    pub fn applies_to(&self, arch: &str) -> bool {
        self.archs.iter().any(|a| a == arch || a == "*") && !self.except.iter().any(|a| a == arch)
    }

    /// `gfx1100 gfx1151`, or `every arch but gfx1030 gfx1100` for a default arm.
    pub fn arch_words(&self) -> String {
        if self.archs == ["*"] {
            if self.except.is_empty() {
                "every arch".into()
            } else {
                format!("every arch but {}", self.except.join(" "))
            }
        } else {
            self.archs.join(" ")
        }
    }

    /// `(knob value, file)`: the default first, then the other values in key order; a knob-less
    /// selector has one `(None, file)`.
    pub fn choices(&self) -> Vec<(Option<&str>, &str)> {
        if let Some(f) = &self.file {
            return vec![(None, f.as_str())];
        }
        let d = self.default.as_deref();
        let mut v: Vec<(Option<&str>, &str)> = self.files.iter().filter(|(k, _)| Some(k.as_str()) == d).map(|(k, f)| (Some(k.as_str()), f.as_str())).collect();
        v.extend(self.files.iter().filter(|(k, _)| Some(k.as_str()) != d).map(|(k, f)| (Some(k.as_str()), f.as_str())));
        v
    }

    /// `gemv_hfq4g256_for_arch` or `the selector for gemv_hfq4g256`.
    pub fn label(&self) -> String {
        self.function.clone().unwrap_or_else(|| format!("the selector for {}", self.kernel))
    }

    /// One line: what it picks where.
    pub fn describe(&self) -> String {
        let archs = self.arch_words();
        let at = self.at.as_deref().map(|a| format!(" ({a})")).unwrap_or_default();
        match &self.knob {
            Some(k) => {
                let files: Vec<String> = self.choices().iter().map(|(v, f)| format!("{}={f}", v.unwrap_or(""))).collect();
                format!(
                    "{}{at} picks {}'s source on {archs} by {k} (default {}): {}",
                    self.label(),
                    self.kernel,
                    self.default.as_deref().unwrap_or("?"),
                    files.join(", ")
                )
            }
            None => format!("{}{at} loads {} from {} on {archs}", self.label(), self.kernel, self.file.as_deref().unwrap_or("?")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ident,
    Str,
    Punct,
}

#[derive(Debug, Clone, Copy)]
struct Tok {
    kind: Kind,
    /// Byte range (a string's contents, without quotes); `a` is the byte of a punctuation mark.
    a: u32,
    b: u32,
    line: u32,
}

/// Split host code into identifiers, string literals and punctuation; comments are dropped.
/// Rust raw strings, char literals and lifetimes, `#` comments (Python, shell, TOML, YAML) and
/// single-quoted strings (Python, JS, shell) are understood. Every newline counts, including
/// one escaped by a trailing `\` inside a string.
fn lex(b: &[u8], ext: &str) -> Vec<Tok> {
    let hash_comments = matches!(ext, "py" | "sh" | "toml" | "yml" | "yaml");
    let single_quote_strings = matches!(ext, "py" | "js" | "ts" | "sh");
    let n = b.len();
    let mut out = Vec::with_capacity(n / 6);
    let mut line = 1u32;
    let mut i = 0usize;
    while i < n {
        let c = b[i];
        let next = if i + 1 < n { b[i + 1] } else { 0 };
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if (c == b'/' && next == b'/') || (hash_comments && c == b'#') {
            while i < n && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && next == b'*' {
            i += 2;
            while i < n && !(b[i] == b'*' && i + 1 < n && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
        } else if c == b'r' && (next == b'"' || next == b'#') && (i == 0 || !is_ident_byte(b[i - 1])) {
            // Rust raw string r"…" / r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < n && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j >= n || b[j] != b'"' {
                out.push(Tok { kind: Kind::Ident, a: i as u32, b: (i + 1) as u32, line });
                i += 1;
                continue;
            }
            let start_line = line;
            let mut k = j + 1;
            while k < n {
                if b[k] == b'"' && (0..hashes).all(|h| k + 1 + h < n && b[k + 1 + h] == b'#') {
                    break;
                }
                if b[k] == b'\n' {
                    line += 1;
                }
                k += 1;
            }
            out.push(Tok { kind: Kind::Str, a: (j + 1) as u32, b: k.min(n) as u32, line: start_line });
            i = k + 1 + hashes;
        } else if c == b'\'' && !single_quote_strings {
            // C/Rust char literal ('"', '\'', '\n', 'é') or a Rust lifetime: never a string opener.
            if next == b'\\' {
                let close = (i + 3..(i + 12).min(n)).find(|&k| b[k] == b'\'');
                i = close.map(|k| k + 1).unwrap_or(i + 1);
            } else {
                let w = match next {
                    0..=0x7f => 1,
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    _ => 4,
                };
                if next != b'\n' && i + 1 + w < n && b[i + 1 + w] == b'\'' {
                    i += 2 + w;
                } else {
                    i += 1;
                }
            }
        } else if c == b'"' || (single_quote_strings && c == b'\'') {
            let start_line = line;
            let mut k = i + 1;
            while k < n && b[k] != c {
                if b[k] == b'\\' {
                    if k + 1 < n && b[k + 1] == b'\n' {
                        line += 1;
                    }
                    k += 2;
                    continue;
                }
                if b[k] == b'\n' {
                    line += 1;
                }
                k += 1;
            }
            out.push(Tok { kind: Kind::Str, a: (i + 1) as u32, b: k.min(n) as u32, line: start_line });
            i = k + 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i;
            while j < n && is_ident_byte(b[j]) {
                j += 1;
            }
            out.push(Tok { kind: Kind::Ident, a: i as u32, b: j as u32, line });
            i = j;
        } else if c.is_ascii_punctuation() {
            out.push(Tok { kind: Kind::Punct, a: i as u32, b: i as u32 + 1, line });
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

/// A string literal's value: escapes resolved the simple way (`\\`, `\"`, `\n`, a trailing-`\`
/// line continuation drops the newline and the next line's indentation).
fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\n') => {
                while it.peek().is_some_and(|c| c.is_whitespace()) {
                    it.next();
                }
            }
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

/// Lexical `a/../b` normalisation (no file system access).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            o => out.push(o.as_os_str()),
        }
    }
    out
}

fn env_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r#"(?:getenv|env::var(?:_os)?|environ(?:\.get)?|os\.getenv|env_flag|env_var|std::env::var)\s*[\(\[]\s*"([A-Z][A-Z0-9_]{2,})""#).unwrap()
    })
}

// ---------------------------------------------------------------------------------------------
// Host index

/// One matched load: a `"{name}"` or `"{file}"` literal of a [`LoadPattern`] call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSite {
    /// Index into [`HostIndex::files`].
    pub file: u32,
    /// Line of the literal (1-based).
    pub line: u32,
    /// Line of the callee.
    pub call_line: u32,
    /// Index into the pattern list given to [`HostIndex::scan`].
    pub pattern: u32,
    pub kind: ArgKind,
    /// The literal's value: a kernel name, or the path as written.
    pub value: String,
    /// `File`: the project-relative path the literal resolves to, when that file exists.
    pub resolved: Option<String>,
}

/// One reference to a name: an identifier in code or a word in a string literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mention {
    pub file: u32,
    pub line: u32,
    pub in_string: bool,
}

/// Which references [`HostIndex::scan`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mentions {
    None,
    /// The first place of each name (in scan order).
    First,
    All,
}

#[derive(Debug, Clone, Default)]
pub struct HostFile {
    /// Project-relative path.
    pub rel: String,
    /// The text (kept when asked for).
    pub text: String,
    line_starts: Vec<u32>,
    /// `(line, variable)` env reads, in line order.
    pub env: Vec<(u32, String)>,
    /// `(line, name)` of each `fn NAME` / `def NAME`, in line order: the function a line is in.
    pub fns: Vec<(u32, String)>,
}

impl HostFile {
    /// The text of `line` (1-based), without its newline; empty when the text was not kept.
    pub fn line_text(&self, line: u32) -> &str {
        let i = line as usize;
        if i == 0 || i > self.line_starts.len() || self.text.is_empty() {
            return "";
        }
        let a = self.line_starts[i - 1] as usize;
        let b = self.line_starts.get(i).map(|&x| x as usize - 1).unwrap_or(self.text.len());
        self.text.get(a..b.max(a)).unwrap_or("").trim_end_matches('\r')
    }
}

/// Everything the host code says about kernels, from one pass over its files.
#[derive(Debug, Clone, Default)]
pub struct HostIndex {
    pub files: Vec<HostFile>,
    pub loads: Vec<LoadSite>,
    /// `"{name}"` loads by name.
    pub by_name: HashMap<String, Vec<usize>>,
    /// `"{file}"` loads by resolved project-relative path.
    by_path: HashMap<String, Vec<usize>>,
    /// `"{file}"` loads whose path resolves to no file, by base name.
    by_basename: HashMap<String, Vec<usize>>,
    pub mentions: HashMap<String, Vec<Mention>>,
    /// Files read (each at most once per scan).
    pub files_read: usize,
    /// The arch `match`es of selector functions (`fn *_for_arch`), when asked for.
    arch_matches: Vec<ArchMatch>,
    /// `const NAME: … = macro!("path")` whose path is a file: NAME -> project-relative path.
    const_files: HashMap<String, String>,
}

/// One arm of a selector function's arch match: `"gfx1100" | "gfx1151" => (SRC, "module")`.
#[derive(Debug, Clone)]
struct Arm {
    /// The string patterns; `None` for the default arm `_`.
    chips: Option<Vec<String>>,
    /// Identifiers of the arm's body (the constant naming its source is among them).
    idents: Vec<String>,
    line: u32,
}

/// A selector function and its arch match.
#[derive(Debug, Clone)]
struct ArchMatch {
    function: String,
    /// What the function's glob `*` stands for (`gemv_mq3g256_lloyd` of `*_for_arch`).
    stem: String,
    file: u32,
    arms: Vec<Arm>,
}

/// `name` against a glob with `*` wildcards; the text the first `*` matched.
fn glob_capture<'a>(glob: &str, name: &'a str) -> Option<&'a str> {
    let parts: Vec<&str> = glob.split('*').collect();
    if parts.len() == 1 {
        return (glob == name).then_some("");
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return None;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    let mut capture = None;
    for (i, mid) in parts[1..parts.len() - 1].iter().enumerate() {
        let at = rest.find(mid)?;
        if i == 0 {
            capture = Some(&rest[..at]);
        }
        rest = &rest[at + mid.len()..];
    }
    Some(capture.unwrap_or(rest))
}

/// The index of the bracket closing the one at `open` (`{`/`(`/`[`), within `toks[..end]`.
fn closing(toks: &[Tok], b: &[u8], open: usize, end: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().take(end).skip(open) {
        if t.kind != Kind::Punct {
            continue;
        }
        match b[t.a as usize] {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The arms of the first `match` in `toks[from..to]`: string patterns (or `_`) and the
/// identifiers of each body. `None` when an arm is anything else (a binding, a guard, a range):
/// such a match is not a plain arch table and is not read.
fn match_arms(toks: &[Tok], text: &str, from: usize, to: usize) -> Option<Vec<Arm>> {
    let b = text.as_bytes();
    let s = |t: &Tok| &text[t.a as usize..t.b as usize];
    let punct = |k: usize, c: u8| toks.get(k).is_some_and(|t| t.kind == Kind::Punct && b[t.a as usize] == c);
    let m = (from..to).find(|&k| toks[k].kind == Kind::Ident && s(&toks[k]) == "match")?;
    let open = (m + 1..to).find(|&k| punct(k, b'{'))?;
    let close = closing(toks, b, open, to + 1)?;
    let mut arms = Vec::new();
    let mut k = open + 1;
    while k < close {
        let line = toks[k].line;
        let (mut chips, mut default) = (Vec::new(), false);
        while k < close && !(punct(k, b'=') && punct(k + 1, b'>')) {
            let t = &toks[k];
            match t.kind {
                Kind::Str => chips.push(unescape(s(t))),
                Kind::Ident if s(t) == "_" => default = true,
                Kind::Punct if b[t.a as usize] == b'|' => {}
                _ => return None,
            }
            k += 1;
        }
        if k >= close || (chips.is_empty() && !default) || (default && !chips.is_empty()) {
            return None;
        }
        k += 2;
        let body_end = if punct(k, b'{') {
            closing(toks, b, k, close)? + 1
        } else {
            let mut depth = 0usize;
            let mut e = k;
            while e < close {
                if toks[e].kind == Kind::Punct {
                    match b[toks[e].a as usize] {
                        b'{' | b'(' | b'[' => depth += 1,
                        b'}' | b')' | b']' => depth = depth.saturating_sub(1),
                        b',' if depth == 0 => break,
                        _ => {}
                    }
                }
                e += 1;
            }
            e
        };
        let idents = toks[k..body_end.min(close)].iter().filter(|t| t.kind == Kind::Ident).map(|t| s(t).to_string()).collect();
        arms.push(Arm { chips: (!default).then_some(chips), idents, line });
        k = body_end;
        if punct(k, b',') {
            k += 1;
        }
    }
    (!arms.is_empty()).then_some(arms)
}

impl HostIndex {
    /// Lex every file of `files` (`(absolute path, project-relative path)`) once: loads matching
    /// `patterns`, env reads, and the references `mentions` asks for. `keep_text` keeps the
    /// texts (for [`HostFile::line_text`]).
    pub fn scan(files: &[(PathBuf, String)], patterns: &[LoadPattern], mentions: Mentions, keep_text: bool, root: &Path) -> HostIndex {
        Self::scan_with(files, patterns, mentions, keep_text, root, &[])
    }

    /// [`Self::scan`], also reading the arch `match` of every function whose name matches one of
    /// `selector_fns` (globs: `*_for_arch`) for [`Self::arch_selectors`].
    pub fn scan_with(
        files: &[(PathBuf, String)],
        patterns: &[LoadPattern],
        mentions: Mentions,
        keep_text: bool,
        root: &Path,
        selector_fns: &[String],
    ) -> HostIndex {
        let mut idx = HostIndex::default();
        let mut callees: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, p) in patterns.iter().enumerate() {
            callees.entry(p.callee.as_str()).or_default().push(i);
        }
        for (abs, rel) in files {
            let Ok(bytes) = std::fs::read(abs) else { continue };
            idx.files_read += 1;
            let text = match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            };
            let fi = idx.files.len() as u32;
            let ext = abs.extension().and_then(|x| x.to_str()).unwrap_or("");
            let b = text.as_bytes();
            let mut line_starts = vec![0u32];
            line_starts.extend(memchr_newlines(b).map(|p| p as u32 + 1));
            let line_of = |pos: usize| -> u32 { line_starts.partition_point(|&s| s as usize <= pos) as u32 };
            let mut env = Vec::new();
            if text.contains("env") {
                for c in env_re().captures_iter(&text) {
                    let m = c.get(0).unwrap();
                    env.push((line_of(m.start()), c[1].to_string()));
                }
            }
            let toks = lex(b, ext);
            let s = |t: &Tok| &text[t.a as usize..t.b as usize];
            let fns: Vec<(u32, String)> = toks
                .windows(2)
                .filter(|w| w[0].kind == Kind::Ident && w[1].kind == Kind::Ident && matches!(s(&w[0]), "fn" | "def"))
                .map(|w| (w[1].line, s(&w[1]).to_string()))
                .collect();
            // Loads.
            if !callees.is_empty() {
                for (i, t) in toks.iter().enumerate() {
                    if t.kind != Kind::Ident {
                        continue;
                    }
                    let Some(pis) = callees.get(s(t)) else { continue };
                    if i > 0 && toks[i - 1].kind == Kind::Ident && matches!(s(&toks[i - 1]), "fn" | "def") {
                        continue; // the loader's own definition
                    }
                    for &pi in pis {
                        let p = &patterns[pi];
                        let mut j = i + 1;
                        let is = |j: usize, c: u8| toks.get(j).is_some_and(|t| t.kind == Kind::Punct && b[t.a as usize] == c);
                        if p.bang {
                            if !is(j, b'!') {
                                continue;
                            }
                            j += 1;
                        }
                        if !is(j, b'(') {
                            continue;
                        }
                        let Some(args) = call_args(&toks, b, j) else { continue };
                        for (ai, kind) in p.args.iter().enumerate() {
                            if *kind == ArgKind::Any {
                                continue;
                            }
                            let Some(&(x, y)) = args.get(ai) else { continue };
                            if y != x + 1 || toks[x].kind != Kind::Str {
                                continue; // not a plain literal: built at run time
                            }
                            let lit = &toks[x];
                            let value = unescape(s(lit));
                            let resolved = match kind {
                                ArgKind::Name if !is_ident_like(&value) => continue,
                                ArgKind::File => {
                                    let full = normalize(&abs.parent().unwrap_or(Path::new("")).join(&value));
                                    full.is_file().then(|| full.strip_prefix(root).unwrap_or(&full).display().to_string())
                                }
                                _ => None,
                            };
                            let site_i = idx.loads.len();
                            match kind {
                                ArgKind::Name => idx.by_name.entry(value.clone()).or_default().push(site_i),
                                _ => match &resolved {
                                    Some(r) => idx.by_path.entry(r.clone()).or_default().push(site_i),
                                    None => idx.by_basename.entry(value.rsplit(['/', '\\']).next().unwrap_or(&value).to_string()).or_default().push(site_i),
                                },
                            }
                            idx.loads.push(LoadSite { file: fi, line: lit.line, call_line: t.line, pattern: pi as u32, kind: *kind, value, resolved });
                        }
                    }
                }
            }
            if !selector_fns.is_empty() {
                idx.read_selector_functions(&toks, &text, fi, abs, root, selector_fns);
            }
            // References.
            if mentions != Mentions::None {
                let mut add = |w: &str, line: u32, in_string: bool| {
                    if mentions == Mentions::First {
                        if !idx.mentions.contains_key(w) {
                            idx.mentions.insert(w.to_string(), vec![Mention { file: fi, line, in_string }]);
                        }
                    } else {
                        match idx.mentions.get_mut(w) {
                            Some(v) => v.push(Mention { file: fi, line, in_string }),
                            None => {
                                idx.mentions.insert(w.to_string(), vec![Mention { file: fi, line, in_string }]);
                            }
                        }
                    }
                };
                for t in &toks {
                    match t.kind {
                        Kind::Ident => add(s(t), t.line, false),
                        Kind::Str => {
                            let body = &b[t.a as usize..t.b as usize];
                            let mut line = t.line;
                            let mut k = 0;
                            while k < body.len() {
                                let c = body[k];
                                if c == b'\\' {
                                    if body.get(k + 1) == Some(&b'\n') {
                                        line += 1;
                                    }
                                    k += 2;
                                } else if c == b'\n' {
                                    line += 1;
                                    k += 1;
                                } else if c.is_ascii_alphabetic() || c == b'_' {
                                    let st = k;
                                    while k < body.len() && is_ident_byte(body[k]) {
                                        k += 1;
                                    }
                                    add(std::str::from_utf8(&body[st..k]).unwrap_or(""), line, true);
                                } else if c.is_ascii_digit() {
                                    while k < body.len() && is_ident_byte(body[k]) {
                                        k += 1;
                                    }
                                } else {
                                    k += 1;
                                }
                            }
                        }
                        Kind::Punct => {}
                    }
                }
            }
            idx.files.push(HostFile { rel: rel.clone(), text: if keep_text { text } else { String::new() }, line_starts, env, fns });
        }
        idx
    }

    /// Selector functions' arch matches and the `const NAME = macro!("path")` sources they name.
    fn read_selector_functions(&mut self, toks: &[Tok], text: &str, fi: u32, abs: &Path, root: &Path, globs: &[String]) {
        let b = text.as_bytes();
        let s = |t: &Tok| &text[t.a as usize..t.b as usize];
        let punct = |k: usize, c: u8| toks.get(k).is_some_and(|t| t.kind == Kind::Punct && b[t.a as usize] == c);
        for (i, t) in toks.iter().enumerate() {
            if t.kind != Kind::Ident {
                continue;
            }
            match s(t) {
                "const" | "static" if toks.get(i + 1).is_some_and(|n| n.kind == Kind::Ident) => {
                    // `const NAME: &str = include_str!("../../kernels/src/x.hip");`
                    let end = (i..toks.len().min(i + 24)).find(|&k| punct(k, b';')).unwrap_or(i);
                    let lit = (i + 2..end).find(|&k| toks[k].kind == Kind::Str && punct(k - 1, b'(') && punct(k - 2, b'!'));
                    if let Some(k) = lit {
                        let full = normalize(&abs.parent().unwrap_or(Path::new("")).join(unescape(s(&toks[k]))));
                        if full.is_file() {
                            let rel = full.strip_prefix(root).unwrap_or(&full).display().to_string();
                            self.const_files.insert(s(&toks[i + 1]).to_string(), rel);
                        }
                    }
                }
                "fn" => {
                    let Some(n) = toks.get(i + 1).filter(|n| n.kind == Kind::Ident) else { continue };
                    let name = s(n);
                    let Some(stem) = globs.iter().find_map(|g| glob_capture(g, name)) else { continue };
                    let Some(open) = (i + 2..toks.len()).find(|&k| punct(k, b'{') || punct(k, b';')).filter(|&k| punct(k, b'{')) else { continue };
                    let Some(close) = closing(toks, b, open, toks.len()) else { continue };
                    if let Some(arms) = match_arms(toks, text, open + 1, close) {
                        self.arch_matches.push(ArchMatch { function: name.to_string(), stem: stem.to_string(), file: fi, arms });
                    }
                }
                _ => {}
            }
        }
    }

    /// One [`Selector`] per arm of each selector function's arch match whose body names exactly
    /// one source constant (`"gfx1100" | "gfx1151" => (GEMV_GFX1100_SRC, "gemv_rdna3")`): the
    /// runtime loads that file on the arm's atoms. A default arm `_` applies to every atom no
    /// other arm lists; an arm naming no constant (a `panic!`) or several (a nested choice) gives
    /// none, its atoms still kept from the default. In arm order, so the first that applies wins.
    pub fn arch_selectors(&self) -> Vec<Selector> {
        let mut out = Vec::new();
        for m in &self.arch_matches {
            let listed: Vec<String> = m.arms.iter().flat_map(|a| a.chips.iter().flatten().cloned()).collect();
            for arm in &m.arms {
                let mut files: Vec<&String> = arm.idents.iter().filter_map(|i| self.const_files.get(i)).collect();
                files.sort();
                files.dedup();
                let [file] = files.as_slice() else { continue };
                let kernel = if m.stem.is_empty() {
                    let base = file.rsplit('/').next().unwrap_or(file);
                    katlas_arch::FileTag::parse(base).map(|t| t.name.to_string()).unwrap_or_else(|| base.to_string())
                } else {
                    m.stem.clone()
                };
                let (archs, except) = match &arm.chips {
                    Some(c) => (c.clone(), Vec::new()),
                    None => (vec!["*".to_string()], listed.clone()),
                };
                out.push(Selector {
                    kernel,
                    function: Some(m.function.clone()),
                    archs,
                    except,
                    at: Some(self.at(m.file, arm.line)),
                    file: Some((*file).clone()),
                    ..Default::default()
                });
            }
        }
        out
    }

    /// Whether any load of this kind matched.
    pub fn has_kind(&self, k: ArgKind) -> bool {
        self.loads.iter().any(|l| l.kind == k)
    }

    /// Loads of `name` by name (in scan order).
    pub fn name_loads(&self, name: &str) -> Vec<&LoadSite> {
        self.by_name.get(name).map(|v| v.iter().map(|&i| &self.loads[i]).collect()).unwrap_or_default()
    }

    /// The first load of `name`; `prefix*` matches any longer loaded name with that prefix.
    pub fn first_name_load(&self, name: &str) -> Option<&LoadSite> {
        match name.strip_suffix('*') {
            Some(prefix) => self
                .by_name
                .iter()
                .filter(|(n, _)| n.len() > prefix.len() && n.starts_with(prefix))
                .filter_map(|(_, v)| v.first().map(|&i| &self.loads[i]))
                .min_by_key(|l| (l.file, l.line)),
            None => self.by_name.get(name).and_then(|v| v.first()).map(|&i| &self.loads[i]),
        }
    }

    /// Embeds of the project-relative source `rel`: literals resolving to it, else (for literals
    /// that resolve to no file) those ending in its base name.
    pub fn embeds_of(&self, rel: &str) -> Vec<&LoadSite> {
        if let Some(v) = self.by_path.get(rel) {
            return v.iter().map(|&i| &self.loads[i]).collect();
        }
        let base = rel.rsplit('/').next().unwrap_or(rel);
        self.by_basename.get(base).map(|v| v.iter().map(|&i| &self.loads[i]).collect()).unwrap_or_default()
    }

    /// The first reference of `name` (`prefix*`: any longer name with that prefix).
    pub fn first_mention(&self, name: &str) -> Option<(&str, Mention)> {
        match name.strip_suffix('*') {
            Some(prefix) => self
                .mentions
                .iter()
                .filter(|(n, _)| n.len() > prefix.len() && n.starts_with(prefix))
                .filter_map(|(n, v)| v.first().map(|m| (n.as_str(), *m)))
                .min_by_key(|(_, m)| (m.file, m.line)),
            None => self.mentions.get_key_value(name).and_then(|(n, v)| v.first().map(|m| (n.as_str(), *m))),
        }
    }

    /// `file:line` of a place.
    pub fn at(&self, file: u32, line: u32) -> String {
        format!("{}:{line}", self.files[file as usize].rel)
    }

    /// The function holding `line` of `file`: `(its line, its name, the next function's line)`.
    pub fn function_at(&self, file: u32, line: u32) -> Option<(u32, &str, u32)> {
        let fns = &self.files[file as usize].fns;
        let i = fns.partition_point(|(l, _)| *l <= line).checked_sub(1)?;
        Some((fns[i].0, fns[i].1.as_str(), fns.get(i + 1).map(|f| f.0).unwrap_or(u32::MAX)))
    }

    /// Env variables read within `radius` lines of `line`.
    pub fn knobs_near(&self, file: u32, line: u32, radius: u32) -> BTreeSet<String> {
        let env = &self.files[file as usize].env;
        let lo = env.partition_point(|(l, _)| *l + radius < line);
        env[lo..].iter().take_while(|(l, _)| *l <= line + radius).map(|(_, k)| k.clone()).collect()
    }
}

fn memchr_newlines(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    b.iter().enumerate().filter(|(_, &c)| c == b'\n').map(|(i, _)| i)
}

/// Argument token ranges of the call whose `(` is `toks[open]`; `None` when it never closes.
fn call_args(toks: &[Tok], b: &[u8], open: usize) -> Option<Vec<(usize, usize)>> {
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut start = open + 1;
    let mut k = open + 1;
    while k < toks.len() && k - open < 4096 {
        let t = &toks[k];
        if t.kind == Kind::Punct {
            match b[t.a as usize] {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => {
                    if depth == 0 {
                        if b[t.a as usize] != b')' {
                            return None;
                        }
                        if k > start {
                            args.push((start, k));
                        }
                        return Some(args);
                    }
                    depth -= 1;
                }
                b',' if depth == 0 => {
                    args.push((start, k));
                    start = k + 1;
                }
                b';' if depth == 0 => return None,
                _ => {}
            }
        }
        k += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_text(text: &str, ext: &str, patterns: &[&str], m: Mentions) -> HostIndex {
        let d = std::env::temp_dir().join(format!("katlas-loads-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::create_dir_all(d.join("kernels")).unwrap();
        std::fs::write(d.join("kernels/k.hip"), "").unwrap();
        let f = d.join(format!("src/host.{ext}"));
        std::fs::write(&f, text).unwrap();
        let pats: Vec<LoadPattern> = patterns.iter().map(|p| LoadPattern::parse(p).unwrap()).collect();
        let idx = HostIndex::scan(&[(f, format!("src/host.{ext}"))], &pats, m, true, &d);
        let _ = std::fs::remove_dir_all(&d);
        idx
    }

    #[test]
    fn patterns_parse_and_reject() {
        let p = LoadPattern::parse("ensure_kernel(\"{name}\", _, \"{name}\")").unwrap();
        assert_eq!((p.callee.as_str(), p.bang, p.args.as_slice()), ("ensure_kernel", false, &[ArgKind::Name, ArgKind::Any, ArgKind::Name][..]));
        let p = LoadPattern::parse("include_str!(\"…/{file}\")").unwrap();
        assert!(p.bang && p.args == [ArgKind::File] && p.call() == "include_str!");
        assert!(LoadPattern::parse("ensure_kernel(_, _)").is_err());
        assert!(LoadPattern::parse("ensure kernel(\"{name}\")").is_err());
        assert!(LoadPattern::parse("f(\"{nmae}\")").is_err());
        assert_eq!(FamilyRule::parse("prefix5").unwrap(), FamilyRule::Prefix(5));
        assert_eq!(FamilyRule::parse("table").unwrap(), FamilyRule::Table);
        assert!(FamilyRule::parse("prefix").is_err());
        assert_eq!(FamilyRule::Prefix(5).prefix_family("gfx1151").as_deref(), Some("gfx11"));
    }

    #[test]
    fn loads_not_mentions_and_lines_survive_continued_strings() {
        let src = "/// ensure_kernel(\"doc_only\", S, \"doc_only\")\n\
            let m = \"a long message \\\n   continued\";\n\
            fn ensure_kernel(&mut self, module_name: &str) {}\n\
            self.ensure_kernel(\n    \"gemv_a\",\n    kernels::A_SRC,\n    \"gemv_a\",\n)?;\n\
            p.add(offset); // add\n\
            self.ensure_kernel(module, src, \"gemv_b\")?;\n\
            let s = include_str!(\"../kernels/k.hip\");\n\
            let t = include_str!(\"../kernels/missing.hip\");\n";
        let idx = scan_text(src, "rs", &["ensure_kernel(\"{name}\", _, \"{name}\")", "include_str!(\"{file}\")"], Mentions::All);
        let a = idx.name_loads("gemv_a");
        assert_eq!(a.iter().map(|l| (l.line, l.call_line)).collect::<Vec<_>>(), [(6, 5), (8, 5)]);
        assert_eq!(idx.name_loads("gemv_b")[0].line, 11);
        assert!(idx.name_loads("doc_only").is_empty(), "comments never load");
        assert!(idx.name_loads("module").is_empty(), "identifiers are not literals");
        assert_eq!(idx.embeds_of("kernels/k.hip")[0].line, 12);
        assert_eq!(idx.embeds_of("kernels/missing.hip")[0].line, 13, "unresolved paths match by base name");
        // References: `add` at its real line (10), not shifted by the continued string.
        assert_eq!(idx.mentions["add"][0].line, 10);
        assert_eq!(idx.mentions["continued"][0].line, 3);
        assert!(!idx.mentions.contains_key("doc_only"));
        assert_eq!(idx.files[0].line_text(11).trim(), "self.ensure_kernel(module, src, \"gemv_b\")?;");
    }

    #[test]
    fn env_reads_near_a_line() {
        let idx = scan_text("let v = std::env::var(\"HIPFIRE_X\");\n\n\nload(\"k\");\n", "rs", &["load(\"{name}\")"], Mentions::None);
        assert_eq!(idx.knobs_near(0, 4, 10).into_iter().collect::<Vec<_>>(), ["HIPFIRE_X"]);
        assert!(idx.knobs_near(0, 40, 10).is_empty());
        assert_eq!(idx.name_loads("k")[0].line, 4);
    }

    #[test]
    fn selectors_validate() {
        let mut s = Selector {
            kernel: "g".into(),
            function: None,
            archs: vec!["gfx1030".into()],
            knob: Some("K".into()),
            default: Some("1".into()),
            file: None,
            files: [("1".to_string(), "g.v1.hip".to_string()), ("2".to_string(), "g.v2.hip".to_string())].into_iter().collect(),
            ..Default::default()
        };
        s.validate().unwrap();
        assert_eq!(s.choices()[0], (Some("1"), "g.v1.hip"));
        s.default = Some("9".into());
        assert!(s.validate().is_err());
        s.default = None;
        assert!(s.validate().is_err());
    }

    #[test]
    fn arch_match_arms_become_selectors() {
        let d = std::env::temp_dir().join(format!("katlas-arms-{}", std::process::id()));
        std::fs::create_dir_all(d.join("kernels")).unwrap();
        std::fs::create_dir_all(d.join("src")).unwrap();
        for f in ["g.hip", "g.gfx1100.hip", "g.gfx1030.v1.hip", "g.gfx1030.v2.hip"] {
            std::fs::write(d.join("kernels").join(f), "").unwrap();
        }
        let host = "pub const G_SRC: &str = include_str!(\"../kernels/g.hip\");\n\
            pub const G_GFX1100_SRC: &str = include_str!(\"../kernels/g.gfx1100.hip\");\n\
            pub const G_V1: &str = include_str!(\"../kernels/g.gfx1030.v1.hip\");\n\
            pub const G_V2: &str = include_str!(\"../kernels/g.gfx1030.v2.hip\");\n\
            pub fn g_for_arch(arch: &str) -> (&'static str, &'static str) {\n\
                if std::env::var(\"FORCE\").is_ok() { return (G_SRC, \"g\"); }\n\
                match arch {\n\
                    \"gfx1030\" => { match v() { 2 => (G_V2, \"g2\"), _ => (G_V1, \"g1\") } }\n\
                    \"gfx1100\" | \"gfx1151\" => {\n        (G_GFX1100_SRC, \"g_rdna3\")\n    }\n\
                    // \"gfx1201\" => (G_GFX12_SRC, \"g12\"),\n\
                    _ => (G_SRC, \"g\"), // baseline\n\
                }\n\
            }\n\
            pub fn h_for_arch(arch: &str) -> &'static str { match arch { a if a.starts_with(\"gfx11\") => G_SRC, _ => G_SRC } }\n\
            pub fn k_for_arch(arch: &str) -> &'static str { match arch { \"gfx1100\" => G_SRC, _ => panic!(\"no {arch}\") } }\n";
        let f = d.join("src/kernels.rs");
        std::fs::write(&f, host).unwrap();
        let idx = HostIndex::scan_with(&[(f, "src/kernels.rs".into())], &[], Mentions::None, false, &d, &["*_for_arch".to_string()]);
        let sels = idx.arch_selectors();
        let _ = std::fs::remove_dir_all(&d);
        let g: Vec<(&str, Vec<&str>, Vec<&str>, &str)> = sels
            .iter()
            .filter(|s| s.function.as_deref() == Some("g_for_arch"))
            .map(|s| {
                (s.kernel.as_str(), s.archs.iter().map(String::as_str).collect(), s.except.iter().map(String::as_str).collect(), s.file.as_deref().unwrap())
            })
            .collect();
        // The nested choice on gfx1030 is no single file: no selector, but the default skips it.
        assert_eq!(
            g,
            [("g", vec!["gfx1100", "gfx1151"], vec![], "kernels/g.gfx1100.hip"), ("g", vec!["*"], vec!["gfx1030", "gfx1100", "gfx1151"], "kernels/g.hip")]
        );
        assert_eq!(sels[0].at.as_deref(), Some("src/kernels.rs:9"));
        assert!(sels[0].applies_to("gfx1151") && !sels[1].applies_to("gfx1151") && sels[1].applies_to("gfx1201") && !sels[1].applies_to("gfx1030"));
        assert_eq!(sels[1].arch_words(), "every arch but gfx1030 gfx1100 gfx1151");
        // A guard is no plain arch table; a panicking default loads nothing.
        assert!(!sels.iter().any(|s| s.function.as_deref() == Some("h_for_arch")));
        let k: Vec<&Selector> = sels.iter().filter(|s| s.function.as_deref() == Some("k_for_arch")).collect();
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].archs, ["gfx1100"]);
        assert_eq!(glob_capture("*_for_arch", "gemv_x_for_arch"), Some("gemv_x"));
        assert_eq!(glob_capture("*_for_arch", "gemv_x_for_arc"), None);
        assert_eq!(glob_capture("pick_*", "pick_gemv"), Some("gemv"));
    }

    #[test]
    fn hazard_names_both_sides() {
        let db = ArchDb::builtin();
        let h = rule_family_hazard(db, "gfx1151", "gfx11").unwrap();
        assert!(h.contains("gfx1151 (rdna3p5") && h.contains("gfx115") && h.contains("gfx1100"), "{h}");
        assert!(rule_family_hazard(db, "gfx1100", "gfx11").is_none());
    }
}
