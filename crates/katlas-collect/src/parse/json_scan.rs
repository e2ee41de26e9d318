//! Element-by-element reading of one big JSON document from a byte stream.
//!
//! serde_json can stream top-level values (`StreamDeserializer`) but not the
//! elements of an array inside an object, and its reader-based deserializer
//! goes byte by byte. This scanner only finds value boundaries (strings,
//! escapes, nesting) in a refillable buffer and hands each complete element to
//! `serde_json::from_slice`, so memory stays at the size of the largest single
//! element and parsing runs at slice speed.
//!
//! Hostile input: a byte that cannot start a value, a closing bracket of the
//! wrong kind and a value larger than the element cap are errors naming the
//! line and byte offset; every successful call consumes at least one byte,
//! so a caller's loop always ends.

use super::ParseError;
use std::io::Read;

pub struct Scanner<R: Read> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Newlines before `buf[nl_pos]`, counted incrementally so asking for
    /// the line of every element stays linear.
    nl_count: u64,
    nl_pos: usize,
    /// Offset in the input of `buf[0]`.
    base: u64,
    /// Largest value `value` returns, in bytes.
    max_value: usize,
    /// Open brackets of the value being scanned (reused between values).
    stack: Vec<u8>,
}

#[derive(Debug)]
pub struct ScanError {
    pub line: u64,
    /// Byte offset in the (decompressed) input.
    pub offset: u64,
    pub message: String,
}

impl ScanError {
    /// As a parser's error: `source:line: at: message (byte offset N)`, `at` the JSON path the
    /// error is in (`""`: none).
    pub fn into_parse(self, source: &str, at: &str) -> ParseError {
        let at = if at.is_empty() { String::new() } else { format!("{at}: ") };
        ParseError::new(source, Some(self.line), format!("{at}{} (byte offset {})", self.message, self.offset))
    }
}

enum Scan {
    Complete(usize),
    Incomplete,
    /// Not JSON at this offset from the value's start.
    Invalid(usize, String),
}

const CHUNK: usize = 1 << 20;

/// A byte for a message: the character when printable ASCII, else hex.
pub fn show(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("`{}`", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

impl<R: Read> Scanner<R> {
    pub fn new(r: R) -> Self {
        Self::with_limit(r, usize::MAX)
    }

    /// A scanner whose values may be at most `max_value` bytes.
    pub fn with_limit(r: R, max_value: usize) -> Self {
        Self { r, buf: vec![0; CHUNK], pos: 0, end: 0, eof: false, nl_count: 0, nl_pos: 0, base: 0, max_value, stack: Vec::new() }
    }

    /// 1-based line of the cursor.
    pub fn line(&mut self) -> u64 {
        self.nl_count += count_nl(&self.buf[self.nl_pos..self.pos]);
        self.nl_pos = self.pos;
        self.nl_count + 1
    }

    /// Byte offset of the cursor in the input.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn err(&mut self, message: impl Into<String>) -> ScanError {
        ScanError { line: self.line(), offset: self.offset(), message: message.into() }
    }

    /// An error `rel` bytes past the cursor (inside the value being scanned).
    fn err_at(&mut self, rel: usize, message: String) -> ScanError {
        let line = self.line() + count_nl(&self.buf[self.pos..self.pos + rel]);
        ScanError { line, offset: self.offset() + rel as u64, message }
    }

    /// Drop consumed bytes and read until the buffer is full or the input
    /// ends (growing the buffer when it is full of one value); false when
    /// nothing more could be read.
    fn fill(&mut self) -> Result<bool, ScanError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.line();
            self.nl_pos = 0;
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.base += self.pos as u64;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            let n = (self.buf.len() * 2).min(self.max_value.saturating_add(1)).max(self.buf.len() + 1);
            self.buf.resize(n, 0);
        }
        // Reading until full keeps re-scans of a value that spans refills
        // to one per doubling of the buffer.
        let mut got = false;
        while self.end < self.buf.len() {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.end += n;
                    got = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let at = self.end - self.pos;
                    return Err(self.err_at(at, format!("read error: {e}")));
                }
            }
        }
        Ok(got)
    }

    /// Next non-whitespace byte, not consumed; `None` at end of input.
    pub fn peek(&mut self) -> Result<Option<u8>, ScanError> {
        loop {
            while self.pos < self.end {
                let b = self.buf[self.pos];
                if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    pub fn expect(&mut self, want: u8) -> Result<(), ScanError> {
        match self.peek()? {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(self.err(format!("expected `{}`, found {}", want as char, show(b)))),
            None => Err(self.err(format!("truncated: expected `{}`, found end of input", want as char))),
        }
    }

    pub fn bump(&mut self) {
        self.pos += 1;
    }

    /// After a member or element: `,` (more follow: true) or `close` (false), consumed.
    pub fn next_or_close(&mut self, close: u8, what: &str) -> Result<bool, ScanError> {
        match self.peek()? {
            Some(b',') => {
                self.bump();
                Ok(true)
            }
            Some(b) if b == close => {
                self.bump();
                Ok(false)
            }
            Some(b) => Err(self.err(format!("expected `,` or `{}` after {what}, found {}", close as char, show(b)))),
            None => Err(self.err(format!("truncated: {what} not followed by `,` or `{}` before end of input", close as char))),
        }
    }

    /// Skip the value at the cursor without holding it: an object or array of any size or nesting
    /// is passed by counting brackets (one counter, no stack); a scalar is read as one value.
    pub fn skip(&mut self) -> Result<(), ScanError> {
        if !matches!(self.peek()?, Some(b'{' | b'[')) {
            return self.value().map(|_| ());
        }
        let (mut depth, mut in_str) = (0u64, false);
        loop {
            // Whitespace that `peek` passes over never opens, closes or escapes anything.
            let Some(b) = self.peek()? else { return Err(self.err("truncated: value not closed before end of input")) };
            self.bump();
            match (in_str, b) {
                (true, b'\\') if self.peek()?.is_some() => self.bump(),
                (true, b'"') => in_str = false,
                (true, _) => {}
                (false, b'"') => in_str = true,
                (false, b'{' | b'[') => depth += 1,
                (false, b'}' | b']') => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
    }

    /// The members of the object whose `{` was just read, one by one: `member` gets each key
    /// with the cursor at its value, which it must read or [`skip`](Self::skip); returns past
    /// the closing `}`. `what` names a member in the message for a missing `,` or `}`; `err`
    /// turns the scanner's errors into the caller's.
    pub fn members<E>(&mut self, what: &str, err: impl Fn(ScanError) -> E, mut member: impl FnMut(&mut Self, String) -> Result<(), E>) -> Result<(), E> {
        let mut more = match self.peek().map_err(&err)? {
            Some(b'}') => {
                self.bump();
                false
            }
            _ => true,
        };
        while more {
            match self.peek().map_err(&err)? {
                Some(b'"') => {}
                Some(b) => return Err(err(self.err(format!("expected an object key, found {}", show(b))))),
                None => return Err(err(self.err("truncated: the object is not closed before end of input"))),
            }
            let (line, offset) = (self.line(), self.offset());
            let key = match serde_json::from_slice::<String>(self.value().map_err(&err)?) {
                Ok(k) => k,
                Err(e) => return Err(err(ScanError { line, offset, message: format!("an object key that does not read: {e}") })),
            };
            self.expect(b':').map_err(&err)?;
            member(self, key)?;
            more = self.next_or_close(b'}', what).map_err(&err)?;
        }
        Ok(())
    }

    /// The elements of the array at the cursor, one by one: `element` gets each one's index,
    /// line, byte offset and bytes (at most the element cap); returns past the closing `]`.
    /// `what` names an element in the message for a missing `,` or `]`; `err` gets the index
    /// of the element an error is in (`None`: the array itself).
    pub fn elements<E>(
        &mut self,
        what: &str,
        err: impl Fn(Option<usize>, ScanError) -> E,
        mut element: impl FnMut(usize, u64, u64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self.peek().map_err(|e| err(None, e))? {
            Some(b'[') => self.bump(),
            Some(b) => return Err(err(None, self.err(format!("expected an array, found {}", show(b))))),
            None => return Err(err(None, self.err("truncated: expected an array, found end of input"))),
        }
        let mut more = match self.peek().map_err(|e| err(Some(0), e))? {
            Some(b']') => {
                self.bump();
                false
            }
            _ => true,
        };
        let mut i = 0usize;
        while more {
            // Past the whitespace first, so line and offset are the element's own.
            self.peek().map_err(|e| err(Some(i), e))?;
            let (line, offset) = (self.line(), self.offset());
            let bytes = self.value().map_err(|e| err(Some(i), e))?;
            element(i, line, offset, bytes)?;
            more = self.next_or_close(b']', what).map_err(|e| err(Some(i), e))?;
            i += 1;
        }
        Ok(())
    }

    /// The next complete value (after whitespace), never empty; the slice
    /// lives until the next call.
    pub fn value(&mut self) -> Result<&[u8], ScanError> {
        if self.peek()?.is_none() {
            return Err(self.err("truncated: expected a value, found end of input"));
        }
        loop {
            let eof = self.eof;
            match scan_value(&self.buf[self.pos..self.end], eof, &mut self.stack) {
                Scan::Complete(n) if n > self.max_value => return Err(self.too_long()),
                Scan::Complete(n) => {
                    let start = self.pos;
                    self.pos += n;
                    return Ok(&self.buf[start..start + n]);
                }
                Scan::Invalid(at, msg) => return Err(self.err_at(at, msg)),
                Scan::Incomplete if eof => {
                    return Err(self.err("truncated: value not closed before end of input"));
                }
                Scan::Incomplete => {
                    if self.end - self.pos > self.max_value {
                        return Err(self.too_long());
                    }
                    self.fill()?;
                }
            }
        }
    }

    fn too_long(&mut self) -> ScanError {
        let max = self.max_value;
        self.err(format!("value starting here is longer than the {max}-byte limit ({})", katlas_corpus::input::MAX_LINE_ENV))
    }
}

fn count_nl(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// Bytes that matter inside an object or array: quotes and brackets.
static STRUCTURAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t
};

/// Bytes a number or literal (`true`, `false`, `null`) may hold; what
/// follows one must be a delimiter, which the caller checks.
fn scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')
}

fn scan_value(s: &[u8], eof: bool, stack: &mut Vec<u8>) -> Scan {
    let Some(&first) = s.first() else { return Scan::Incomplete };
    match first {
        b'{' | b'[' => {
            stack.clear();
            let mut i = 0;
            while i < s.len() {
                if !STRUCTURAL[s[i] as usize] {
                    i += 1;
                    continue;
                }
                match s[i] {
                    b'"' => match string_end(&s[i..]) {
                        Some(n) => {
                            i += n;
                            continue;
                        }
                        None => return Scan::Incomplete,
                    },
                    b'{' => stack.push(b'}'),
                    b'[' => stack.push(b']'),
                    close => {
                        let want = stack.pop().unwrap_or(0);
                        if close != want {
                            return Scan::Invalid(i, format!("`{}` does not match the open `{}`", close as char, if want == b'}' { '{' } else { '[' }));
                        }
                        if stack.is_empty() {
                            return Scan::Complete(i + 1);
                        }
                    }
                }
                i += 1;
            }
            Scan::Incomplete
        }
        b'"' => match string_end(s) {
            Some(n) => Scan::Complete(n),
            None => Scan::Incomplete,
        },
        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => match s.iter().position(|&b| !scalar_byte(b)) {
            Some(n) => Scan::Complete(n),
            None if eof => Scan::Complete(s.len()),
            None => Scan::Incomplete,
        },
        other => Scan::Invalid(0, format!("expected a value, found {}", show(other))),
    }
}

/// Length of the string starting at `s[0] == '"'`, including both quotes.
fn string_end(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    loop {
        let rel = memchr::memchr2(b'"', b'\\', &s[i..])?;
        i += rel;
        if s[i] == b'\\' {
            i += 2;
            if i > s.len() {
                return None;
            }
        } else {
            return Some(i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(out.len()).min(3);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn elements_across_refills() {
        let doc = br#" { "a": [1, {"x": "q\"}]"}, "s\\", -2.5e3 ] , "b": 7 } "#;
        let mut sc = Scanner::new(Trickle(doc));
        sc.buf = vec![0; 4];
        sc.expect(b'{').unwrap();
        assert_eq!(sc.value().unwrap(), br#""a""#);
        sc.expect(b':').unwrap();
        sc.expect(b'[').unwrap();
        let mut got = Vec::new();
        loop {
            match sc.peek().unwrap() {
                Some(b']') => {
                    sc.bump();
                    break;
                }
                Some(b',') => sc.bump(),
                _ => got.push(String::from_utf8(sc.value().unwrap().to_vec()).unwrap()),
            }
        }
        assert_eq!(got, vec!["1", r#"{"x": "q\"}]"}"#, r#""s\\""#, "-2.5e3"]);
    }

    #[test]
    fn truncated_reports_line() {
        let mut sc = Scanner::new(&b"{\n\"a\": [\n{\"x\": 1"[..]);
        sc.expect(b'{').unwrap();
        sc.value().unwrap();
        sc.expect(b':').unwrap();
        sc.expect(b'[').unwrap();
        let e = sc.value().unwrap_err();
        assert!(e.message.contains("truncated"), "{}", e.message);
        assert_eq!(e.line, 3);
    }
}
