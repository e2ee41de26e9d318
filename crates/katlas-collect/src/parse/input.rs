//! Opening parser inputs with bounds (docs/collect.md, "Input limits").
//!
//! Every byte a parser reads through [`super::parse_with`] passes a
//! [`Guard`]: it fails the read (an `InvalidData` I/O error naming the line)
//! once a line, or for the CSV parsers a CSV record, grows past
//! [`Limits::max_line`], and once a stream of unknown size (decompressed
//! `.gz`, stdin, any reader) has yielded more than [`Limits::max_input`]
//! bytes. So a parser's memory stays at its buffers plus one line, whatever
//! the input: `/dev/zero` through a pipe, a gzip bomb, a 100 GB line.

pub use katlas_corpus::input::Limits;
use katlas_corpus::input::{open_regular, MAX_INPUT_ENV, MAX_LINE_ENV};
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

const BUF: usize = 1 << 20;

/// How a parser's input splits into records, for the record cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Newline-terminated lines.
    Lines,
    /// CSV records: a newline inside a quoted field does not end the record.
    Csv,
    /// One JSON document read element by element (`json_scan` caps each element);
    /// lines are not capped here, a minified trace is one line.
    Json,
}

#[derive(Clone, Copy)]
enum CsvState {
    FieldStart,
    InField,
    Quoted,
    QuoteInQuoted,
}

/// A reader that enforces [`Limits`] on what passes through it.
pub struct Guard<R> {
    inner: R,
    framing: Framing,
    max_line: u64,
    max_input: Option<u64>,
    total: u64,
    /// 1-based line of the next byte.
    line: u64,
    /// Bytes of the current line or record so far, and the line it started on.
    rec_len: u64,
    rec_line: u64,
    csv: CsvState,
    failed: Option<String>,
    /// `inner` is a gzip decoder: its errors are located in the decompressed text.
    gzip: bool,
}

impl<R: Read> Guard<R> {
    /// `max_input` applies when given: streams whose size is not known up front.
    pub fn new(inner: R, framing: Framing, limits: &Limits, max_input: Option<u64>) -> Self {
        Self {
            inner,
            framing,
            max_line: limits.max_line as u64,
            max_input,
            total: 0,
            line: 1,
            rec_len: 0,
            rec_line: 1,
            csv: CsvState::FieldStart,
            failed: None,
            gzip: false,
        }
    }

    fn gzip(mut self) -> Self {
        self.gzip = true;
        self
    }

    fn fail(&mut self, msg: String) -> io::Error {
        self.failed = Some(msg.clone());
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }

    fn too_long(&mut self) -> io::Error {
        let msg = match self.framing {
            Framing::Csv => format!("CSV record starting on line {} is longer than the {}-byte limit ({MAX_LINE_ENV})", self.rec_line, self.max_line),
            _ => format!("line {} is longer than the {}-byte limit ({MAX_LINE_ENV})", self.rec_line, self.max_line),
        };
        self.fail(msg)
    }

    fn end_record(&mut self) {
        self.rec_len = 0;
        self.rec_line = self.line;
    }

    fn scan_lines(&mut self, b: &[u8]) -> io::Result<()> {
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', b) {
            if self.rec_len + (nl - start) as u64 > self.max_line {
                return Err(self.too_long());
            }
            self.line += 1;
            self.end_record();
            start = nl + 1;
        }
        self.rec_len += (b.len() - start) as u64;
        if self.rec_len > self.max_line {
            return Err(self.too_long());
        }
        Ok(())
    }

    /// csv-core's record boundaries (default dialect, not strict): a quote
    /// opens a quoted field only at the start of a field, `""` inside one is
    /// a quote, `\r` and `\n` outside quotes end the record.
    fn scan_csv(&mut self, b: &[u8]) -> io::Result<()> {
        let mut i = 0;
        while i < b.len() {
            if let CsvState::Quoted = self.csv {
                // Fast path through quoted text; newlines in it only count lines.
                let rest = &b[i..];
                let q = memchr::memchr(b'"', rest).unwrap_or(rest.len());
                self.line += memchr::memchr_iter(b'\n', &rest[..q]).count() as u64;
                self.rec_len += q as u64;
                if self.rec_len > self.max_line {
                    return Err(self.too_long());
                }
                i += q;
                if i == b.len() {
                    break;
                }
            }
            let c = b[i];
            i += 1;
            use CsvState::*;
            let record_end = matches!(c, b'\n' | b'\r') && !matches!(self.csv, Quoted);
            if record_end {
                if c == b'\n' {
                    self.line += 1;
                }
                self.csv = FieldStart;
                self.end_record();
                continue;
            }
            self.rec_len += 1;
            if self.rec_len > self.max_line {
                return Err(self.too_long());
            }
            self.csv = match (self.csv, c) {
                (FieldStart, b'"') => Quoted,
                (_, b',') if !matches!(self.csv, Quoted) => FieldStart,
                (Quoted, b'"') => QuoteInQuoted,
                (QuoteInQuoted, b'"') => Quoted,
                (Quoted, _) => Quoted,
                _ => InField,
            };
        }
        Ok(())
    }
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Some(msg) = &self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, msg.clone()));
        }
        // Ask for at most one byte past the input cap, so going over it is seen exactly.
        let want = match self.max_input {
            Some(max) => out.len().min(usize::try_from(max.saturating_sub(self.total).saturating_add(1)).unwrap_or(usize::MAX)),
            None => out.len(),
        };
        let n = match self.inner.read(&mut out[..want]) {
            Ok(n) => n,
            // A decoder's error (a corrupt or cut .gz) says where the damage is.
            Err(e) if self.gzip && e.kind() != io::ErrorKind::Interrupted => {
                return Err(self.fail(format!("gzip: {e} (at decompressed byte {}, line {})", self.total, self.line)));
            }
            Err(e) => return Err(e),
        };
        self.total += n as u64;
        if let Some(max) = self.max_input {
            if self.total > max {
                let msg = format!("input is larger than the {max}-byte limit ({MAX_INPUT_ENV}; decompressed bytes count for .gz)");
                return Err(self.fail(msg));
            }
        }
        match self.framing {
            Framing::Lines => self.scan_lines(&out[..n])?,
            Framing::Csv => self.scan_csv(&out[..n])?,
            Framing::Json => {}
        }
        Ok(n)
    }
}

/// Gzip's magic bytes.
const GZ_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Read up to three bytes, for the gzip and byte-order-mark checks.
fn sniff(r: &mut dyn Read) -> io::Result<([u8; 3], usize)> {
    let mut magic = [0u8; 3];
    let mut n = 0;
    while n < 3 {
        match r.read(&mut magic[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok((magic, n))
}

fn is_gzip(magic: &[u8; 3], n: usize) -> bool {
    n >= 2 && magic[..2] == GZ_MAGIC
}

/// A leading UTF-8 byte order mark is not text: JSON, JSONL, CSV and text outputs
/// are read from after it.
fn is_bom(magic: &[u8; 3], n: usize) -> bool {
    n == 3 && magic[..] == *katlas_corpus::input::BOM
}

/// A stream (stdin, a pipe, any reader) for a parser: gunzipped when it
/// starts with gzip's magic, and capped at `max_input` bytes either way.
pub fn open_reader<'a>(r: &'a mut dyn Read, framing: Framing, limits: &Limits) -> io::Result<Box<dyn BufRead + 'a>> {
    let (magic, n) = sniff(r)?;
    let keep = if is_bom(&magic, n) { 0 } else { n };
    let head = io::Cursor::new(magic).take(keep as u64);
    let joined = head.chain(r);
    if is_gzip(&magic, n) {
        let gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(BUF, joined));
        Ok(Box::new(BufReader::with_capacity(BUF, Guard::new(gz, framing, limits, Some(limits.max_input)).gzip())))
    } else {
        Ok(Box::new(BufReader::with_capacity(BUF, Guard::new(joined, framing, limits, Some(limits.max_input)))))
    }
}

/// A file for a parser: a regular file only (a device, FIFO or directory is
/// refused), gunzipped when it starts with gzip's magic. A plain file is
/// bounded by its size; a `.gz` file's decompressed bytes by `max_input`.
pub fn open_file(path: &Path, framing: Framing, limits: &Limits) -> io::Result<Box<dyn BufRead>> {
    let mut f = open_regular(path)?;
    let (magic, n) = sniff(&mut f)?;
    use std::io::Seek;
    f.seek(io::SeekFrom::Start(if is_bom(&magic, n) { 3 } else { 0 }))?;
    if is_gzip(&magic, n) {
        let gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(BUF, f));
        Ok(Box::new(BufReader::with_capacity(BUF, Guard::new(gz, framing, limits, Some(limits.max_input)).gzip())))
    } else {
        Ok(Box::new(BufReader::with_capacity(BUF, Guard::new(f, framing, limits, None))))
    }
}

/// Text already in memory: only the line cap applies.
pub fn open_text<'a>(text: &'a str, framing: Framing, limits: &Limits) -> Box<dyn BufRead + 'a> {
    let text = katlas_corpus::input::strip_bom(text);
    Box::new(BufReader::with_capacity(BUF.min(text.len().max(64)), Guard::new(text.as_bytes(), framing, limits, None)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(r: impl Read) -> io::Result<u64> {
        io::copy(&mut BufReader::with_capacity(7, r), &mut io::sink())
    }

    fn lim(max_line: usize) -> Limits {
        Limits { max_line, max_input: 1000 }
    }

    #[test]
    fn lines_capped_and_numbered() {
        let ok = b"abc\nabcd\n\nab";
        assert!(drain(Guard::new(&ok[..], Framing::Lines, &lim(4), None)).is_ok());
        let bad = b"abc\nabcd\nabcde\nab";
        let e = drain(Guard::new(&bad[..], Framing::Lines, &lim(4), None)).unwrap_err();
        assert_eq!(e.to_string(), "line 3 is longer than the 4-byte limit (KATLAS_MAX_LINE_BYTES)");
        // Json framing does not cap lines.
        assert!(drain(Guard::new(&bad[..], Framing::Json, &lim(4), None)).is_ok());
    }

    #[test]
    fn csv_records_span_quoted_newlines() {
        // The quoted field holds newlines: the record is lines 2-4, 17 bytes.
        let text = b"a,b\n\"x\ny\nz\",123456789\nc,d\n";
        assert!(drain(Guard::new(&text[..], Framing::Csv, &lim(17), None)).is_ok());
        let e = drain(Guard::new(&text[..], Framing::Csv, &lim(16), None)).unwrap_err();
        assert!(e.to_string().starts_with("CSV record starting on line 2 is longer than the 16-byte limit"), "{e}");
        // A quote inside an unquoted field is a literal, as for csv-core; `""` is an escaped quote.
        let text = b"ab\"c,d\ne,\"f\"\"g\"\nhi\n";
        assert!(drain(Guard::new(&text[..], Framing::Csv, &lim(8), None)).is_ok());
        let text = b"a\r\nb\rc\n";
        assert!(drain(Guard::new(&text[..], Framing::Csv, &lim(1), None)).is_ok());
    }

    #[test]
    fn input_cap_exact() {
        let data = vec![b'\n'; 1000];
        assert_eq!(drain(Guard::new(&data[..], Framing::Lines, &lim(10), Some(1000))).unwrap(), 1000);
        let e = drain(Guard::new(&data[..], Framing::Lines, &lim(10), Some(999))).unwrap_err();
        assert!(e.to_string().contains("999-byte limit (KATLAS_MAX_INPUT_BYTES"), "{e}");
    }
}
