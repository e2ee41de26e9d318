//! A child's raw output as katlas keeps it (a run's `stdout`/`stderr`, an eval sample's
//! `out/<seq>.stdout`), with credentials hidden: a workload that prints its environment or
//! a connection string must not leave a password in `.katlas/`. Redacted a line at a time,
//! so a file of any size is never held whole.

use crate::env::Redactor;
use crate::secrets::{key_block_end, opens_key_block};
use std::io::{self, BufRead, Write};
use std::path::Path;

/// The longest piece redacted at once. A longer line is redacted in pieces cut after a
/// space where one is near the end (credentials hold none), so memory stays bounded.
pub const MAX_LINE: usize = 64 * 1024;

/// Copy `input` to `out` with credentials hidden ([`Redactor::text`], line by line; a
/// private key block is hidden to its end marker across lines). Bytes of a piece with
/// nothing to hide are copied as they were, invalid UTF-8 included.
pub fn redact_stream(mut input: impl BufRead, out: &mut dyn Write, r: &Redactor) -> io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut in_key = false;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            if !line.is_empty() {
                write_piece(&line, out, r, &mut in_key)?;
            }
            return Ok(());
        }
        let take = buf.len().min(MAX_LINE - line.len());
        if let Some(i) = buf[..take].iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[..=i]);
            input.consume(i + 1);
            write_piece(&line, out, r, &mut in_key)?;
            line.clear();
            continue;
        }
        line.extend_from_slice(&buf[..take]);
        input.consume(take);
        if line.len() == MAX_LINE {
            let cut = piece_end(&line);
            write_piece(&line[..cut], out, r, &mut in_key)?;
            line.drain(..cut);
        }
    }
}

/// Where to cut a full piece: after its last whitespace in the second half, else before
/// the last character's first byte, so no character is split.
fn piece_end(line: &[u8]) -> usize {
    if let Some(i) = line.iter().rposition(|b| b.is_ascii_whitespace()).filter(|&i| i >= line.len() / 2) {
        return i + 1;
    }
    (line.len().saturating_sub(4)..line.len()).rev().find(|&i| i > 0 && line[i] & 0xC0 != 0x80).unwrap_or(line.len())
}

fn write_piece(piece: &[u8], out: &mut dyn Write, r: &Redactor, in_key: &mut bool) -> io::Result<()> {
    let (body, nl) = match piece.strip_suffix(b"\n") {
        Some(b) => (b, &b"\n"[..]),
        None => (piece, &b""[..]),
    };
    let text = String::from_utf8_lossy(body);
    let mut rest: &str = &text;
    if *in_key {
        match key_block_end(rest) {
            Some(end) => {
                *in_key = false;
                rest = &rest[end..];
                // The key's lines are gone with it: its `<redacted>` stands where it began.
                if rest.trim().is_empty() {
                    return Ok(());
                }
            }
            None => return Ok(()),
        }
    }
    let clean = r.text(rest);
    *in_key = opens_key_block(rest);
    if rest.len() == text.len() && clean == *text {
        out.write_all(piece)
    } else {
        out.write_all(clean.as_bytes())?;
        out.write_all(nl)
    }
}

/// Rewrite the file at `path` with credentials hidden ([`redact_stream`]), atomically and
/// never through a link in `.katlas/` (`katlas_fs`). An empty or missing file is left as
/// it is. Call it once the process has ended and its parsers have read the file.
pub fn redact_file(path: &Path, r: &Redactor) -> io::Result<()> {
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if f.metadata()?.len() == 0 {
        return Ok(());
    }
    katlas_fs::write_atomic_with(path, |w| redact_stream(io::BufReader::new(f), w, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn redacted(input: &[u8], r: &Redactor) -> Vec<u8> {
        let mut out = Vec::new();
        redact_stream(input, &mut out, r).unwrap();
        out
    }

    #[test]
    fn output_is_redacted_line_by_line_and_otherwise_kept_byte_for_byte() {
        let env: BTreeMap<String, String> = [("MY_TOKEN".to_string(), "tok-abcdef-123".to_string())].into();
        let r = Redactor::new(&env);
        let input = b"tok_s=123.4\n\xff\xfe raw bytes\nstore postgres://katlas:PW-s3cret@db/k\nusing tok-abcdef-123\na\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nxyz\n-----END RSA PRIVATE KEY-----\nb\nno newline";
        let out = redacted(input, &r);
        let want = b"tok_s=123.4\n\xff\xfe raw bytes\nstore postgres://katlas:<redacted>@db/k\nusing <redacted>\na\n<redacted>\nb\nno newline";
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
        assert_eq!(out, want);
    }

    #[test]
    fn a_line_longer_than_the_bound_is_redacted_in_pieces() {
        let secret = "postgres://u:PW-long-line-9@db/k";
        let mut line = "x".repeat(MAX_LINE - 10) + " ";
        line.push_str(secret);
        line.push(' ');
        line.push_str(&"y ".repeat(MAX_LINE));
        line.push('\n');
        let out = String::from_utf8(redacted(line.as_bytes(), &Redactor::default())).unwrap();
        assert!(!out.contains("PW-long-line-9"), "the credential across the bound is hidden");
        assert!(out.contains("postgres://u:<redacted>@db/k"));
        assert_eq!(out.len(), line.len() - "PW-long-line-9".len() + "<redacted>".len());
        // A line of one unbroken token, with a multi-byte character at the cut, stays valid text.
        let blob = "é".repeat(MAX_LINE) + "\n";
        assert_eq!(String::from_utf8(redacted(blob.as_bytes(), &Redactor::default())).unwrap(), blob);
    }

    #[test]
    fn a_file_is_rewritten_in_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".katlas/runs/r1/stdout");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "HF=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345\ntok_s=1\n").unwrap();
        redact_file(&p, &Redactor::default()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "HF=<redacted>\ntok_s=1\n");
        redact_file(&d.path().join("missing"), &Redactor::default()).unwrap();
    }
}
