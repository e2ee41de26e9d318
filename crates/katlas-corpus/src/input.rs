//! Bounds on untrusted input, shared by the corpus reader, `corpus import`
//! and the output/profiler parsers (docs/collect.md, "Input limits").
//!
//! * One line (a CSV record, a JSON trace event) is at most
//!   [`Limits::max_line`] bytes: `KATLAS_MAX_LINE_BYTES`, default 64 MiB.
//! * A stream whose size is not known up front (decompressed `.gz`, stdin)
//!   yields at most [`Limits::max_input`] bytes: `KATLAS_MAX_INPUT_BYTES`,
//!   default 16 GiB.
//! * Where a file is expected, only a regular file is read: a character
//!   device (`/dev/zero`), FIFO, socket or directory is refused before it is
//!   opened, so nothing blocks or reads forever.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::Path;

pub const MAX_LINE_ENV: &str = "KATLAS_MAX_LINE_BYTES";
pub const MAX_INPUT_ENV: &str = "KATLAS_MAX_INPUT_BYTES";
pub const DEFAULT_MAX_LINE: usize = 64 << 20;
pub const DEFAULT_MAX_INPUT: u64 = 16 << 30;

/// Size caps for one read of untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest line, CSV record or JSON trace event, in bytes (newline not counted).
    pub max_line: usize,
    /// Most bytes read from a stream of unknown size (after decompression).
    pub max_input: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_line: DEFAULT_MAX_LINE, max_input: DEFAULT_MAX_INPUT }
    }
}

impl Limits {
    /// The defaults, overridden by `KATLAS_MAX_LINE_BYTES` and `KATLAS_MAX_INPUT_BYTES`.
    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|k| std::env::var_os(k))
    }

    /// As [`Limits::from_env`], with the variables looked up by `get`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Self, String> {
        let mut l = Self::default();
        let read = |name: &str| -> Result<Option<u64>, String> {
            match get(name) {
                None => Ok(None),
                Some(v) => {
                    let s = v.to_string_lossy();
                    if s.trim().is_empty() {
                        return Ok(None);
                    }
                    parse_bytes(&s).map(Some).ok_or_else(|| format!("{name}={s:?}: not a byte count above zero (e.g. 1048576, 64MiB, 16GiB)"))
                }
            }
        };
        if let Some(v) = read(MAX_LINE_ENV)? {
            l.max_line = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = read(MAX_INPUT_ENV)? {
            l.max_input = v;
        }
        Ok(l)
    }
}

/// `1048576`, `64K`, `64KiB`, `64MB`, `16G`: multiples are binary (1K = 1024).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    let v = n.checked_mul(1u64 << shift)?;
    (v > 0).then_some(v)
}

/// What kind of thing a path is, for "not a regular file" messages.
pub fn file_kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn not_regular(ft: &std::fs::FileType) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("not a regular file ({}); only regular files are read here", file_kind(ft)))
}

/// The UTF-8 byte order mark some editors put first; JSON, JSONL, CSV and TOML
/// inputs are read as if it were not there.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

pub fn strip_bom(s: &str) -> &str {
    s.strip_prefix('\u{feff}').unwrap_or(s)
}

pub fn strip_bom_bytes(b: &[u8]) -> &[u8] {
    b.strip_prefix(BOM).unwrap_or(b)
}

/// An I/O error in words a person can act on: a link loop is named as one (ELOOP),
/// not left as "too many levels of symbolic links (os error 40)".
pub fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(ELOOP) => "a symbolic link loop (ELOOP: the links never reach a file)".into(),
        _ => e.to_string(),
    }
}

const ELOOP: i32 = 40;

/// Why `path` cannot be read, when it cannot: `no such file`, a link loop, a link
/// to nothing. `None` when something is there (what it is is checked on open).
pub fn unreadable(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(_) => None,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some(match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => "a symbolic link to nothing (its target does not exist)".into(),
            _ => "no such file".into(),
        }),
        Err(e) => Some(describe(&e)),
    }
}

/// Where invalid UTF-8 starts: 1-based line and the byte within it.
pub fn utf8_error_at(bytes: &[u8], e: &std::str::Utf8Error) -> (u64, usize) {
    let head = &bytes[..e.valid_up_to()];
    let line = memchr_count(head) + 1;
    let col = head.len() - head.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
    (line as u64, col)
}

fn memchr_count(b: &[u8]) -> usize {
    b.iter().filter(|&&c| c == b'\n').count()
}

/// A whole small text file (a config, a spec, a registry): a regular file only, a
/// leading BOM dropped, invalid UTF-8 reported as `PATH:LINE: byte B of the line is
/// not valid UTF-8`, a link loop or a missing file said as such.
pub fn read_text(path: &Path) -> Result<String, String> {
    let p = path.display();
    let mut f = open_regular(path).map_err(|e| format!("{p}: {}", describe(&e)))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| format!("{p}: {}", describe(&e)))?;
    let body = strip_bom_bytes(&bytes);
    match std::str::from_utf8(body) {
        Ok(t) => Ok(t.to_string()),
        Err(e) => {
            let (line, col) = utf8_error_at(body, &e);
            let at = body.get(e.valid_up_to()).map(|b| format!(" (0x{b:02x})")).unwrap_or_default();
            Err(format!("{p}:{line}: byte {col} of the line{at} is not valid UTF-8"))
        }
    }
}

/// Open `path` for reading if it is a regular file (links followed). Devices,
/// FIFOs, sockets and directories are refused before opening, so opening
/// never blocks and reading always ends.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let ft = std::fs::metadata(path).map_err(|e| if e.raw_os_error() == Some(ELOOP) { io::Error::new(e.kind(), describe(&e)) } else { e })?.file_type();
    if !ft.is_file() {
        return Err(not_regular(&ft));
    }
    let f = File::open(path)?;
    // The path may have been swapped between the check and the open.
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(not_regular(&ft));
    }
    Ok(f)
}

/// What [`read_line_capped`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// End of input; the buffer is empty.
    Eof,
    /// One line is in the buffer, with its `\n` unless it ended the input.
    Line,
    /// The line was longer than the cap: its `len` bytes (newline included)
    /// were consumed and dropped, the buffer is empty and the next read
    /// starts on the following line.
    TooLong { len: u64 },
}

/// Read one line into `buf` (cleared first), holding at most `max` bytes of
/// it (plus the newline) in memory; a longer line is skipped, not stored.
pub fn read_line_capped<R: BufRead + ?Sized>(r: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<LineRead> {
    buf.clear();
    let n = Read::take(&mut *r, (max as u64).saturating_add(1)).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(LineRead::Eof);
    }
    if buf.last() == Some(&b'\n') || buf.len() <= max {
        return Ok(LineRead::Line);
    }
    let mut len = buf.len() as u64;
    buf.clear();
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        match avail.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                len += i as u64 + 1;
                break;
            }
            None => {
                let k = avail.len();
                r.consume(k);
                len += k as u64;
            }
        }
    }
    Ok(LineRead::TooLong { len })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("64MiB"), Some(64 << 20));
        assert_eq!(parse_bytes("16g"), Some(16 << 30));
        assert_eq!(parse_bytes(" 4 KB "), Some(4096));
        assert_eq!(parse_bytes("0"), None);
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes("lots"), None);
        assert_eq!(parse_bytes("99999999999999999999"), None);
    }

    #[test]
    fn limits_from_variables() {
        let l = Limits::from_lookup(|k| (k == MAX_INPUT_ENV).then(|| OsString::from("1M"))).unwrap();
        assert_eq!(l, Limits { max_line: DEFAULT_MAX_LINE, max_input: 1 << 20 });
        let e = Limits::from_lookup(|k| (k == MAX_LINE_ENV).then(|| OsString::from("big"))).unwrap_err();
        assert!(e.contains(MAX_LINE_ENV), "{e}");
    }

    #[test]
    fn capped_lines() {
        let mut r = std::io::BufReader::with_capacity(3, &b"abc\nabcdefgh\nab\nabcde"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::Line);
        assert_eq!(buf, b"abc\n");
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::TooLong { len: 9 });
        assert!(buf.is_empty());
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::Line);
        assert_eq!(buf, b"ab\n");
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::TooLong { len: 5 });
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::Eof);
        let mut r = &b"abcd"[..];
        assert_eq!(read_line_capped(&mut r, &mut buf, 4).unwrap(), LineRead::Line);
        assert_eq!(buf, b"abcd");
    }

    #[test]
    fn devices_refused() {
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = open_regular(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        assert_eq!(open_regular(Path::new("/nonexistent/x")).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn loops_boms_and_bad_utf8_are_named() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(unreadable(&a).unwrap().contains("symbolic link loop"), "{:?}", unreadable(&a));
        assert!(open_regular(&a).unwrap_err().to_string().contains("symbolic link loop"));
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nothing"), &dangling).unwrap();
        assert!(unreadable(&dangling).unwrap().contains("link to nothing"));
        assert_eq!(unreadable(&d.path().join("absent")).as_deref(), Some("no such file"));
        let t = d.path().join("t.toml");
        std::fs::write(&t, b"\xEF\xBB\xBFx = 1\n").unwrap();
        assert_eq!(read_text(&t).unwrap(), "x = 1\n");
        std::fs::write(&t, b"x = 1\ny = \"a\xffb\"\n").unwrap();
        assert_eq!(read_text(&t).unwrap_err(), format!("{}:2: byte 7 of the line (0xff) is not valid UTF-8", t.display()));
    }
}
