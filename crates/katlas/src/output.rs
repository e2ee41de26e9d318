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

/// A table in the text or markdown style whose cells are always [`printable`]: a name
/// from a file cannot put a control character on the terminal or a second line in a row.
pub struct SafeTable(Table);

impl SafeTable {
    pub fn add_row<I, S>(&mut self, row: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.0.add_row(row.into_iter().map(|c| safe_cell(c.as_ref())).collect::<Vec<String>>());
    }
}

/// A cell made printable; a whole-cell colour from [`paint`] (SGR only) is kept.
fn safe_cell(c: &str) -> String {
    let painted = c.strip_prefix("\x1b[").and_then(|r| {
        let (code, rest) = r.split_once('m')?;
        let inner = rest.strip_suffix("\x1b[0m")?;
        (!code.is_empty() && code.bytes().all(|b| b.is_ascii_digit() || b == b';')).then_some((code, inner))
    });
    match painted {
        Some((code, inner)) => format!("\x1b[{code}m{}\x1b[0m", printable(inner)),
        None => printable(c).into_owned(),
    }
}

/// `println!` for a person: the formatted text with every control character but the
/// line breaks escaped ([`printable_lines`]).
macro_rules! say {
    ($($a:tt)*) => { println!("{}", $crate::output::printable_lines(&format!($($a)*))) };
}
/// `eprintln!` for a person, escaped as [`say!`] is.
macro_rules! say_err {
    ($($a:tt)*) => { eprintln!("{}", $crate::output::printable_lines(&format!($($a)*))) };
}
/// `println!` of one line of a record (`field: value`): its newlines are escaped too, so a
/// value from a file cannot add a line that reads as another field (`verdict: improved`).
macro_rules! say_line {
    ($($a:tt)*) => { println!("{}", $crate::output::printable(&format!($($a)*))) };
}
pub(crate) use {say, say_err, say_line};

impl std::ops::Deref for SafeTable {
    type Target = Table;
    fn deref(&self) -> &Table {
        &self.0
    }
}

impl std::fmt::Display for SafeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A table in the text or markdown style.
pub fn table(format: Format, header: &[&str]) -> SafeTable {
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
    SafeTable(t)
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

pub use katlas_model::text::{printable, printable_lines};

/// A progress line on stderr, drawn only on a terminal (piped, it draws nothing), in the one
/// style every long command uses: elapsed time, a bar, a message. Short enough for an
/// 80-column terminal: a cut message hides what it says.
pub fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:20}] {wide_msg}").expect("valid template").progress_chars("=> "));
    bar
}
