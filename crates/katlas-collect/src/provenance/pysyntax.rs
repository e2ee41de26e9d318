//! Python source as the provenance readers see it: logical lines (open brackets and a
//! trailing `\` joined, comments dropped), tokens, the calls in a line with their arguments,
//! and string literals. The file scanner ([`super::python`]) and the custom-op reader
//! ([`super::torch_ops`]) both read through here.

// --- logical lines -------------------------------------------------------------------------

/// One logical line: its first physical line and its code (comments dropped, strings kept).
pub(crate) struct Logical {
    pub line: u64,
    pub text: String,
}

/// Physical lines joined while brackets are open or a line ends in `\`. An unclosed bracket does
/// not swallow the file: a line starting at column 0 with `def `, `class ` or `@` ends it.
pub(crate) fn logical_lines(src: &str) -> Vec<Logical> {
    let b = src.as_bytes();
    let n = b.len();
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut start, mut line, mut depth, mut seg, mut i) = (1u64, 1u64, 0usize, 0usize, 0usize);
    let mut flush = |cur: &mut String, start: u64| {
        if !cur.trim().is_empty() {
            out.push(Logical { line: start, text: std::mem::take(cur) });
        }
        cur.clear();
    };
    while i < n {
        match b[i] {
            b'#' => {
                cur.push_str(&src[seg..i]);
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
                seg = i;
                continue;
            }
            q @ (b'\'' | b'"') => {
                let triple = i + 2 < n && b[i + 1] == q && b[i + 2] == q;
                let ql = if triple { 3 } else { 1 };
                let mut j = i + ql;
                while j < n {
                    match b[j] {
                        b'\\' => {
                            if b.get(j + 1) == Some(&b'\n') {
                                line += 1;
                            }
                            j += 2;
                            continue;
                        }
                        b'\n' => {
                            line += 1;
                            if !triple {
                                break; // unterminated: the line ends the string
                            }
                        }
                        c if c == q && (!triple || (j + 2 < n && b[j + 1] == q && b[j + 2] == q)) => {
                            j += ql;
                            break;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                i = j.min(n);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'\\' if b.get(i + 1) == Some(&b'\n') => {
                cur.push_str(&src[seg..i]);
                cur.push(' ');
                i += 2;
                line += 1;
                seg = i;
                continue;
            }
            b'\n' => {
                line += 1;
                let next = &b[i + 1..];
                let restart = depth > 0 && (next.starts_with(b"def ") || next.starts_with(b"class ") || next.starts_with(b"@"));
                if depth == 0 || restart {
                    cur.push_str(&src[seg..i]);
                    flush(&mut cur, start);
                    depth = 0;
                    start = line;
                    seg = i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    cur.push_str(&src[seg.min(n)..]);
    flush(&mut cur, start);
    out
}

// --- tokens and calls ------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Tok<'a> {
    /// An identifier with its dotted tail (`triton.autotune`).
    Name(&'a str),
    Str,
    Open(u8),
    Close(u8),
    Punct(&'a str),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Token<'a> {
    pub kind: Tok<'a>,
    pub start: usize,
    pub end: usize,
}

pub(crate) fn tokens(t: &str) -> Vec<Token<'_>> {
    let b = t.as_bytes();
    let n = b.len();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    while i < n {
        let c = b[i];
        let st = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            while i < n
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || (b[i] == b'.' && b.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')))
            {
                i += 1;
            }
            // A string prefix (`r"…"`, `f'…'`, `rb"…"`).
            if i - st <= 2 && i < n && matches!(b[i], b'\'' | b'"') && t[st..i].chars().all(|c| "rRbBuUfF".contains(c)) {
                i = skip_string(b, i);
                out.push(Token { kind: Tok::Str, start: st, end: i });
            } else {
                out.push(Token { kind: Tok::Name(&t[st..i]), start: st, end: i });
            }
            continue;
        }
        let kind = match c {
            b'\'' | b'"' => {
                i = skip_string(b, i);
                out.push(Token { kind: Tok::Str, start: st, end: i });
                continue;
            }
            b'(' | b'[' | b'{' => Tok::Open(c),
            b')' | b']' | b'}' => Tok::Close(c),
            _ => {
                // Two-character operators stay whole so `==` is never a keyword's `=`.
                let two = t.get(i..i + 2).filter(|s| ["==", "!=", "<=", ">=", "**", "->", ":=", "//"].contains(s));
                let p = match two {
                    Some(s) => s,
                    None => t.get(i..i + 1).unwrap_or(""),
                };
                if p.is_empty() {
                    // Not a char boundary: a non-ASCII character, skipped whole.
                    i += t[i..].chars().next().map(char::len_utf8).unwrap_or(1);
                    continue;
                }
                i += p.len();
                out.push(Token { kind: Tok::Punct(p), start: st, end: i });
                continue;
            }
        };
        i += 1;
        out.push(Token { kind, start: st, end: i });
    }
    out
}

fn skip_string(b: &[u8], i: usize) -> usize {
    let n = b.len();
    let q = b[i];
    let triple = i + 2 < n && b[i + 1] == q && b[i + 2] == q;
    let ql = if triple { 3 } else { 1 };
    let mut j = i + ql;
    while j < n {
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == q && (!triple || (j + 2 < n && b[j + 1] == q && b[j + 2] == q)) {
            return j + ql;
        }
        j += 1;
    }
    n
}

/// A call: its callee and arguments (`(keyword, text)`), texts borrowed from the logical line.
#[derive(Debug, Clone)]
pub(crate) struct Call<'a> {
    pub callee: String,
    pub args: Vec<(Option<&'a str>, &'a str)>,
}

impl<'a> Call<'a> {
    pub fn kwarg(&self, k: &str) -> Option<&'a str> {
        self.args.iter().find(|(n, _)| *n == Some(k)).map(|(_, v)| *v)
    }
    pub fn positional(&self, i: usize) -> Option<&'a str> {
        self.args.iter().filter(|(n, _)| n.is_none()).nth(i).map(|(_, v)| *v)
    }
}

/// Every `name(…)` call in a logical line (`toks` empty: tokenise `text` here).
/// Reading one call's arguments walks to its closing bracket, so a line of nested calls costs
/// the square of its length: only calls whose callee `want`s are read, at most `max` of them.
pub(crate) fn calls<'a>(text: &'a str, toks: &[Token<'a>], want: &dyn Fn(&str) -> bool, max: usize) -> impl Iterator<Item = Call<'a>> {
    let owned: Vec<Token<'a>> = if toks.is_empty() { tokens(text) } else { toks.to_vec() };
    let found: Vec<Call<'a>> = (0..owned.len())
        .filter_map(|i| match (owned[i].kind, owned.get(i + 1).map(|t| t.kind)) {
            (Tok::Name(n), Some(Tok::Open(b'(')))
                if want(n) && !matches!(n, "def" | "class" | "if" | "while" | "for" | "in" | "and" | "or" | "not" | "return") =>
            {
                Some(call_at_text(text, &owned, i, n))
            }
            _ => None,
        })
        .take(max)
        .collect();
    found.into_iter()
}

fn call_at_text<'a>(text: &'a str, toks: &[Token<'a>], i: usize, callee: &str) -> Call<'a> {
    let open = toks[i + 1].end;
    let mut depth = 0i32;
    let mut close = text.len();
    for t in &toks[i + 1..] {
        match t.kind {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => {
                depth -= 1;
                if depth == 0 {
                    close = t.start;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &text[open..close];
    let args = split_top(inner, b',')
        .into_iter()
        .filter(|a| !a.trim().is_empty())
        .map(|a| {
            let ts = tokens(a);
            match (ts.first().map(|t| t.kind), ts.get(1).map(|t| t.kind)) {
                (Some(Tok::Name(k)), Some(Tok::Punct("="))) if !k.contains('.') => (Some(&a[ts[0].start..ts[0].end]), a[ts[1].end..].trim()),
                _ => (None, a.trim()),
            }
        })
        .collect();
    Call { callee: callee.to_string(), args }
}

/// Split at `sep` outside brackets and strings.
pub(crate) fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let mut out = Vec::new();
    let mut last = 0;
    let mut depth = 0i32;
    for t in tokens(s) {
        match t.kind {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => depth -= 1,
            Tok::Punct(p) if depth == 0 && p.as_bytes() == [sep] => {
                out.push(&s[last..t.start]);
                last = t.end;
            }
            _ => {}
        }
    }
    out.push(&s[last..]);
    out
}

pub(crate) fn split_once_top(s: &str, sep: u8) -> Option<(&str, &str)> {
    let parts = split_top(s, sep);
    (parts.len() >= 2).then(|| {
        let k = parts[0];
        (k, &s[k.len() + 1..])
    })
}

pub(crate) enum Items<'a> {
    List(Vec<&'a str>),
    Comprehension { element: &'a str, loops: &'a str },
}

/// `[a, b]` / `(a, b)` items, or a comprehension's element and loops.
pub(crate) fn list_items(e: &str) -> Option<Items<'_>> {
    let e = e.trim();
    let inner = e.strip_prefix('[').and_then(|s| s.strip_suffix(']')).or_else(|| e.strip_prefix('(').and_then(|s| s.strip_suffix(')')))?;
    let mut depth = 0i32;
    for t in tokens(inner) {
        match t.kind {
            Tok::Open(_) => depth += 1,
            Tok::Close(_) => depth -= 1,
            Tok::Name("for") if depth == 0 => return Some(Items::Comprehension { element: inner[..t.start].trim(), loops: inner[t.start..].trim() }),
            _ => {}
        }
    }
    Some(Items::List(split_top(inner, b',').into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()))
}

/// The value of a plain string literal (`"a"`, `'a'`, `r"a"`); `None` for anything else.
pub(crate) fn str_literal(e: &str) -> Option<String> {
    let e = e.trim();
    let ts = tokens(e);
    if ts.len() != 1 || ts[0].kind != Tok::Str {
        return None;
    }
    let body = e.trim_start_matches(|c: char| "rRbBuU".contains(c));
    let q = body.chars().next()?;
    if !matches!(q, '"' | '\'') {
        return None; // f-strings are computed
    }
    let ql = if body.len() >= 6 && body[1..].starts_with(q) && body[2..].starts_with(q) { 3 } else { 1 };
    body.get(ql..body.len().checked_sub(ql)?).map(str::to_string)
}

/// One line of text with its runs of whitespace squeezed to one space.
pub(crate) fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
