//! Text from records (kernel names, workload names, row ids, paths) shown to a person.
//!
//! Names come from files and repositories katlas does not control: an ESC, OSC or BEL
//! in one must not drive the terminal, and a newline must not break a table. Every
//! human rendering passes such text through [`printable`]; JSON keeps it as it is.

use std::borrow::Cow;

/// Whether `c` is shown as an escape: a control character (ESC, BEL, newline, CR, DEL, C1 …)
/// or a bidirectional control (U+202A–202E, U+2066–2069, U+200E/F, U+061C), which reorders
/// what a reader sees without being seen itself ("Trojan Source").
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// `s` with every [unsafe](is_unsafe) character shown as an escape (`\u{1b}`, `\n`,
/// `\u{202e}`), so it prints as one inert line.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| if is_unsafe(c) { c.escape_default().to_string() } else { c.to_string() }).collect())
}

/// A rendered document with its line breaks kept and every other unsafe character
/// escaped: for text whose lines were laid out on purpose.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && c != '\n') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split('\n').map(|l| printable(l).into_owned()).collect::<Vec<_>>().join("\n"))
}

/// A CSV cell a spreadsheet will not run as a formula: text starting with `=`, `+`, `-`, `@`,
/// tab or CR gets a leading `'` (OWASP, "CSV Injection"). For text cells only: a number
/// written as a number stays one.
pub fn csv_safe(s: &str) -> Cow<'_, str> {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{s}"))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_escapes() {
        assert_eq!(printable("gemv\x1b]0;pwned\x07\nx\u{9b}"), "gemv\\u{1b}]0;pwned\\u{7}\\nx\\u{9b}");
        assert!(matches!(printable("plain name_ü"), Cow::Borrowed(_)));
        assert_eq!(printable_lines("a\x1b[31m\nb\tc\n"), "a\\u{1b}[31m\nb\\tc\n");
        assert_eq!(printable("admin\u{202e}txt.exe\u{2066}x\u{200f}\u{61c}\r"), "admin\\u{202e}txt.exe\\u{2066}x\\u{200f}\\u{61c}\\r");
        assert_eq!(printable_lines("a\u{2067}b\nc"), "a\\u{2067}b\nc");
    }

    #[test]
    fn formulas_do_not_reach_a_spreadsheet() {
        for (s, want) in
            [("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\t=1", "'\t=1"), ("\r=1", "'\r=1")]
        {
            assert_eq!(csv_safe(s), want);
        }
        assert!(matches!(csv_safe("gemv_r4"), Cow::Borrowed(_)));
        assert!(matches!(csv_safe("a=b"), Cow::Borrowed(_)));
    }
}
