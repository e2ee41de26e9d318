//! Element-by-element reading of one big JSON document from a byte stream.
//!
//! serde_json can stream top-level values (`StreamDeserializer`) but not the
//! elements of an array inside an object, and its reader-based deserializer
//! goes byte by byte. This scanner only finds value boundaries (strings,
//! escapes, nesting) in a refillable buffer and hands each complete element to
//! `serde_json::from_slice`, so memory stays at the size of the largest single
//! element and parsing runs at slice speed.

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
}

#[derive(Debug)]
pub struct ScanError {
    pub line: u64,
    pub message: String,
}

enum Scan {
    Complete(usize),
    Incomplete,
}

const CHUNK: usize = 1 << 20;

impl<R: Read> Scanner<R> {
    pub fn new(r: R) -> Self {
        Self { r, buf: vec![0; CHUNK], pos: 0, end: 0, eof: false, nl_count: 0, nl_pos: 0 }
    }

    /// 1-based line of the cursor.
    pub fn line(&mut self) -> u64 {
        self.nl_count += count_nl(&self.buf[self.nl_pos..self.pos]);
        self.nl_pos = self.pos;
        self.nl_count + 1
    }

    fn err(&mut self, message: impl Into<String>) -> ScanError {
        ScanError { line: self.line(), message: message.into() }
    }

    /// Drop consumed bytes and read more; false at end of input.
    fn fill(&mut self) -> Result<bool, ScanError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.line();
            self.nl_pos = 0;
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.buf.len() {
            let n = self.buf.len() * 2;
            self.buf.resize(n, 0);
        }
        loop {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.err(format!("read error: {e}"))),
            }
        }
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
            Some(b) => Err(self.err(format!("expected `{}`, found `{}`", want as char, b as char))),
            None => Err(self.err(format!("truncated: expected `{}`, found end of input", want as char))),
        }
    }

    pub fn bump(&mut self) {
        self.pos += 1;
    }

    /// The next complete value (after whitespace); the slice lives until the next call.
    pub fn value(&mut self) -> Result<&[u8], ScanError> {
        if self.peek()?.is_none() {
            return Err(self.err("truncated: expected a value, found end of input"));
        }
        loop {
            let eof = self.eof;
            match scan_value(&self.buf[self.pos..self.end], eof) {
                Scan::Complete(n) => {
                    let start = self.pos;
                    self.pos += n;
                    return Ok(&self.buf[start..start + n]);
                }
                Scan::Incomplete if eof => {
                    return Err(self.err("truncated: value not closed before end of input"));
                }
                Scan::Incomplete => {
                    self.fill()?;
                }
            }
        }
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

fn scan_value(s: &[u8], eof: bool) -> Scan {
    let Some(&first) = s.first() else { return Scan::Incomplete };
    match first {
        b'{' | b'[' => {
            let mut depth = 0usize;
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
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Scan::Complete(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Scan::Incomplete
        }
        b'"' => match string_end(s) {
            Some(n) => Scan::Complete(n),
            None => Scan::Incomplete,
        },
        _ => match s.iter().position(|b| matches!(b, b',' | b']' | b'}' | b' ' | b'\n' | b'\r' | b'\t')) {
            Some(n) => Scan::Complete(n),
            None if eof => Scan::Complete(s.len()),
            None => Scan::Incomplete,
        },
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
