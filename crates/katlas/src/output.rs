//! Output formats shared by every reporting command.

use clap::ValueEnum;
use comfy_table::presets::{ASCII_MARKDOWN, UTF8_FULL_CONDENSED};
use comfy_table::{ContentArrangement, Table};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Format {
    /// Human-readable tables.
    #[default]
    Text,
    /// The agent contract: stable field names, documented in docs/cli.md.
    Json,
    /// Markdown tables for reports and task packets.
    Markdown,
}

/// `--format` for commands that report.
#[derive(Debug, Clone, clap::Args)]
pub struct FormatArg {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub fn print_json<T: Serialize + ?Sized>(v: &T) {
    println!("{}", serde_json::to_string_pretty(v).expect("output serialises"));
}

/// A table in the text or markdown style.
pub fn table(format: Format, header: &[&str]) -> Table {
    let mut t = Table::new();
    match format {
        Format::Markdown => {
            t.load_preset(ASCII_MARKDOWN);
        }
        _ => {
            t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
        }
    }
    t.set_header(header.iter().copied());
    t
}

/// Wrap `s` in an ANSI colour when colour is on (terminal, no NO_COLOR).
pub fn paint(color: bool, code: &str, s: &str) -> String {
    if color {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

pub fn fmt_opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

pub fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// `s` with control characters (ESC, BEL, newline …) shown as escapes, so a name
/// from a file or a repository cannot drive the terminal or break a table.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect())
}
