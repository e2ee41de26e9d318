//! Text from records (kernel names, workload names, row ids, paths) shown to a person.
//!
//! Names come from files and repositories katlas does not control: an ESC, OSC or BEL
//! in one must not drive the terminal, and a newline must not break a table. Every
//! human rendering passes such text through [`printable`]; JSON keeps it as it is.

use std::borrow::Cow;

/// `s` with every control character (ESC, BEL, newline, CR, DEL, C1 …) shown as an
/// escape (`\u{1b}`, `\n`), so it prints as one inert line.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect())
}

/// A rendered document with its line breaks kept and every other control character
/// escaped: for text whose lines were laid out on purpose.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(s.split('\n').map(|l| printable(l).into_owned()).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_escapes() {
        assert_eq!(printable("gemv\x1b]0;pwned\x07\nx\u{9b}"), "gemv\\u{1b}]0;pwned\\u{7}\\nx\\u{9b}");
        assert!(matches!(printable("plain name_ü"), Cow::Borrowed(_)));
        assert_eq!(printable_lines("a\x1b[31m\nb\tc\n"), "a\\u{1b}[31m\nb\\tc\n");
    }
}
