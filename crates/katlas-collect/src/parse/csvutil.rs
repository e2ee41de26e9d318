//! CSV helpers shared by the profiler parsers: columns are found by header
//! name (never by position), numbers may carry thousands separators.

use super::{parse_number, ParseError};
use std::collections::HashMap;
use std::io::Read;

pub struct Header {
    index: HashMap<String, usize>,
    pub names: Vec<String>,
}

impl Header {
    pub fn new(rec: &csv::ByteRecord) -> Self {
        let names: Vec<String> = rec.iter().map(|f| String::from_utf8_lossy(f).trim().to_string()).collect();
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        Self { index, names }
    }
    /// First of `aliases` present in the header.
    pub fn col(&self, aliases: &[&str]) -> Option<usize> {
        aliases.iter().find_map(|a| self.index.get(*a).copied())
    }
    pub fn require(&self, aliases: &[&str], source: &str, line: u64) -> Result<usize, ParseError> {
        self.col(aliases)
            .ok_or_else(|| ParseError::new(source, Some(line), format!("header has no column {} (columns: {})", aliases.join(" or "), self.names.join(", "))))
    }
}

pub fn reader<R: Read>(r: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new().has_headers(false).flexible(true).buffer_capacity(1 << 20).from_reader(r)
}

/// Reads the next record into `rec`: false at the end. A malformed record is a warning naming
/// its line (`line_base` added, for CSV that starts after a preamble) and is skipped; an I/O
/// error ends the read.
pub fn next_record<R: Read>(
    rd: &mut csv::Reader<R>,
    rec: &mut csv::ByteRecord,
    source: &str,
    line_base: u64,
    warnings: &mut Vec<String>,
) -> Result<bool, ParseError> {
    loop {
        match rd.read_byte_record(rec) {
            Ok(more) => return Ok(more),
            Err(e) => {
                let line = e.position().map(|p| p.line() + line_base);
                if matches!(e.kind(), csv::ErrorKind::Io(_)) {
                    return Err(ParseError::new(source, line, e.to_string()));
                }
                warnings.push(format!("{source}:{}: {e}", line.unwrap_or(0)));
            }
        }
    }
}

pub fn field(rec: &csv::ByteRecord, i: Option<usize>) -> Option<&str> {
    i.and_then(|i| rec.get(i)).and_then(|b| std::str::from_utf8(b).ok()).map(str::trim)
}

pub fn num(rec: &csv::ByteRecord, i: Option<usize>) -> Option<f64> {
    field(rec, i).and_then(parse_number)
}

pub fn uint(rec: &csv::ByteRecord, i: Option<usize>) -> Option<u64> {
    let s = field(rec, i)?;
    s.parse::<u64>().ok().or_else(|| parse_number(s).filter(|v| *v >= 0.0).map(|v| v as u64))
}

pub fn line_of(rec: &csv::ByteRecord) -> u64 {
    rec.position().map(|p| p.line()).unwrap_or(0)
}

/// `(256, 1, 1)` -> [256, 1, 1].
pub fn dim3(s: &str) -> Option<[u32; 3]> {
    let inner = s.trim().trim_start_matches('(').trim_end_matches(')');
    let mut it = inner.split(',').map(|p| p.trim().parse::<u32>());
    let x = it.next()?.ok()?;
    let y = it.next().unwrap_or(Ok(1)).ok()?;
    let z = it.next().unwrap_or(Ok(1)).ok()?;
    Some([x, y, z])
}
