//! Command lines as katlas records them (a row's `command`, a run's `argv`, an eval side's
//! argv): a token passed as an argument (`--token hf_…`, `--password=…`,
//! `postgres://u:pw@h/db`) is hidden in the record, never in what runs.

use crate::secrets::{redact_secrets, REDACTED};

/// Words that make a flag or variable name a credential's (`--hf-token`, `--api-key`,
/// `HF_TOKEN=`), matched as whole words so `--max-tokens 128` and `--tokenizer` stay.
/// (`pass` is left out: `--pass measured` is not a password.)
const SECRET_WORDS: &[&str] = &["token", "key", "apikey", "pat", "auth", "bearer", "cookie"];
/// Parts that make a name a credential's wherever they appear (`PGPASSWORD`).
const SECRET_PARTS: &[&str] = &["password", "passwd", "passphrase", "secret", "credential", "private"];

/// Whether `name` (a flag without its dashes, or a variable name) names a credential.
fn secret_flag_name(name: &str) -> bool {
    let low = name.to_ascii_lowercase();
    !low.is_empty() && (SECRET_PARTS.iter().any(|p| low.contains(p)) || low.split(['-', '_']).any(|w| SECRET_WORDS.contains(&w)))
}

/// The name a word gives its value: `--token` (value in the next word) or the part before
/// `=` of `--token=v` / `HF_TOKEN=v`.
fn flag_name(word: &str) -> &str {
    let w = word.split('=').next().unwrap_or(word);
    w.trim_start_matches('-')
}

/// Whether a value after a credential's flag is one: numbers (`--max-key-len 64`) and other
/// flags are not.
fn is_value(word: &str) -> bool {
    !word.is_empty() && !word.starts_with('-') && word.parse::<f64>().is_err()
}

/// One word with a `--token=v` / `HF_TOKEN=v` value hidden.
fn redact_assignment(word: &str) -> Option<String> {
    let (name, value) = word.split_once('=')?;
    (secret_flag_name(name.trim_start_matches('-')) && is_value(value)).then(|| format!("{name}={REDACTED}"))
}

/// The end of the shell word `rest` starts with: at whitespace outside quotes.
fn word_end(rest: &str) -> usize {
    let mut quote = None;
    for (i, c) in rest.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c.is_whitespace() => return i,
            None => {}
        }
    }
    rest.len()
}

/// A command line as one string (a `sh -c` script) with credentials hidden: values by
/// their form ([`redact_secrets`]) and the value of a flag or variable named for one.
pub fn redact_command_line(line: &str) -> String {
    let line = redact_secrets(line);
    let mut out = String::with_capacity(line.len());
    let mut hide_next = false;
    let mut rest: &str = &line;
    while !rest.is_empty() {
        let ws = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..ws]);
        rest = &rest[ws..];
        let end = word_end(rest);
        let word = &rest[..end];
        rest = &rest[end..];
        let quoted = word.trim_matches(|c| c == '\'' || c == '"');
        if std::mem::take(&mut hide_next) && is_value(quoted) {
            // The shell's own punctuation after the value (`V;`, `V)`) is not part of it.
            let value = word.trim_end_matches([';', '&', '|', ')']);
            out.push_str(REDACTED);
            out.push_str(&word[value.len()..]);
            continue;
        }
        // A quoted word is a script of its own (`sh -c 'tool --token V'`): its flags count too.
        if let Some(q @ ('\'' | '"')) = word.chars().next().filter(|_| word.len() >= 2 && word.ends_with(word.chars().next().unwrap_or(' '))) {
            out.push(q);
            out.push_str(&redact_command_line(&word[1..word.len() - 1]));
            out.push(q);
            continue;
        }
        match redact_assignment(word) {
            Some(w) => out.push_str(&w),
            None => {
                hide_next = word.starts_with('-') && !word.contains('=') && secret_flag_name(flag_name(word));
                out.push_str(word);
            }
        }
    }
    out
}

/// `argv` as recorded: each argument through [`redact_command_line`], and the argument
/// after a credential's flag (`--token`, `--api-key`) hidden.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for a in argv {
        if std::mem::take(&mut hide_next) && is_value(a) {
            out.push(REDACTED.to_string());
            continue;
        }
        hide_next = a.starts_with('-') && !a.contains(char::is_whitespace) && !a.contains('=') && secret_flag_name(flag_name(a));
        out.push(redact_command_line(a));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn tokens_on_a_command_line_are_hidden_in_the_record() {
        let argv =
            v(&["./bench", "--token", "abc123secret", "--hf-token=qwerty987", "--db", "postgres://u:PW-arg-1@h/db", "--api-key", "k-1", "--model", "m.gguf"]);
        assert_eq!(
            redact_argv(&argv),
            v(&[
                "./bench",
                "--token",
                "<redacted>",
                "--hf-token=<redacted>",
                "--db",
                "postgres://u:<redacted>@h/db",
                "--api-key",
                "<redacted>",
                "--model",
                "m.gguf"
            ])
        );
        let sh = v(&["sh", "-c", "HF_TOKEN=abcdefgh ./run --password 'p w' --auth=x1 --max-tokens 128 --tokenizer t.json -n 3"]);
        assert_eq!(redact_argv(&sh)[2], "HF_TOKEN=<redacted> ./run --password <redacted> --auth=<redacted> --max-tokens 128 --tokenizer t.json -n 3");
    }

    #[test]
    fn a_flag_inside_a_quoted_script_is_hidden_too() {
        let argv = v(&["sh", "-c", "sh -c 'true --token s3cr3t-arg-7; echo tok_s=1' && ./b \"--api-key k-2\""]);
        let out = redact_argv(&argv);
        assert_eq!(out[2], "sh -c 'true --token <redacted>; echo tok_s=1' && ./b \"--api-key <redacted>\"", "{out:?}");
    }

    #[test]
    fn ordinary_commands_are_recorded_as_they_are() {
        for argv in [
            v(&["./bench", "--max-tokens", "128", "--tokenizer", "t.json", "--kv-cache", "asym3", "-n", "3"]),
            v(&["sh", "-c", "MAX_TOKENS=128 ./bench --key-len 64 --x=1 | tee out"]),
            v(&["python", "-m", "bench", "--pass", "measured", "--", "x"]),
        ] {
            assert_eq!(redact_argv(&argv), argv);
        }
    }
}
