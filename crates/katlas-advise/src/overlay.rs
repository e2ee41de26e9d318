//! Project rules files add to the built-in ones instead of replacing them. A
//! `.katlas/rules/<name>.toml` holds only what the project changes:
//!
//! - list entries (`[[rule]]`, `[[band]]`, `[[lever]]`, `[[quant]]`) replace the built-in entry
//!   with the same key (`id`, `name`, `prefix`) or are added after the built-in ones;
//! - `disable = ["id", …]` drops built-in entries of the file's main list (rules, levers, quants);
//! - the keys of any other table (`[settings]`, `[history]` …) replace the built-in keys one by one.
//!
//! A file copied whole from `data/` and edited still works: each entry replaces its own.
//! The merged text goes through the same parser as the built-in file; an error in it is moved
//! to the line of the project file the user wrote.

use crate::error::AdviseError;
use toml::{Table, Value};

/// The lists of a rules file merged by key: (list, key); the first is the one `disable` names.
pub(crate) fn lists_of(name: &str) -> &'static [(&'static str, &'static str)] {
    match name {
        "fit.toml" => &[("rule", "id"), ("band", "name")],
        "levers.toml" => &[("lever", "id")],
        "quant.toml" => &[("quant", "prefix")],
        _ => &[],
    }
}

fn err(file: &str, line: usize, message: String) -> AdviseError {
    AdviseError::Rules { file: file.into(), line, message }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// Line of the first occurrence of `needle` in `text` (1 when absent).
fn line_with(text: &str, needle: &str) -> usize {
    text.find(needle).map(|o| line_of(text, o)).unwrap_or(1)
}

/// The built-in rules text (`builtin`) with the project file `file` (`text`) laid over it.
pub(crate) fn merge(builtin: &str, name: &str, file: &str, text: &str) -> Result<String, AdviseError> {
    let mut base: Table = builtin.parse().map_err(|e: toml::de::Error| err(&format!("data/{name}"), 1, e.message().to_string()))?;
    let over: Table = text.parse().map_err(|e: toml::de::Error| err(file, e.span().map(|s| line_of(text, s.start)).unwrap_or(1), e.message().to_string()))?;
    let lists = lists_of(name);
    let mut disable: Vec<String> = Vec::new();
    for (k, v) in over {
        if k == "disable" {
            let ids = v.as_array().map(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>());
            match ids.flatten() {
                Some(ids) if !lists.is_empty() => disable = ids,
                _ => return Err(err(file, line_with(text, "disable"), "disable: expected a list of ids (strings)".into())),
            }
            continue;
        }
        match (lists.iter().find(|(l, _)| *l == k), v, base.get_mut(&k)) {
            (Some((list, key)), Value::Array(entries), Some(Value::Array(have))) => {
                for entry in entries {
                    let Some(id) = entry.get(*key).and_then(Value::as_str).map(str::to_string) else {
                        return Err(err(file, line_with(text, &format!("[[{list}]]")), format!("{list}: an entry without `{key}`")));
                    };
                    match have.iter_mut().find(|h| h.get(*key).and_then(Value::as_str) == Some(id.as_str())) {
                        Some(h) => *h = entry,
                        None => have.push(entry),
                    }
                }
            }
            (_, Value::Table(t), Some(Value::Table(have))) => have.extend(t),
            (_, v, _) => {
                base.insert(k, v);
            }
        }
    }
    if let Some((list, key)) = lists.first() {
        if let Some(Value::Array(have)) = base.get_mut(*list) {
            for id in &disable {
                let before = have.len();
                have.retain(|h| h.get(*key).and_then(Value::as_str) != Some(id.as_str()));
                if have.len() == before {
                    return Err(err(file, line_with(text, &format!("\"{id}\"")), format!("disable: no built-in {list} `{id}`")));
                }
            }
        }
    }
    toml::to_string(&base).map_err(|e| err(file, 1, e.to_string()))
}

/// An error the parser found in the merged text, moved to the project file's line that holds
/// the same entry (the same `key = value` line, else the first line setting that key).
pub(crate) fn remap(e: AdviseError, merged: &str, file: &str, text: &str) -> AdviseError {
    let AdviseError::Rules { line, message, .. } = e else {
        return e;
    };
    let at = merged.lines().nth(line.saturating_sub(1)).unwrap_or("").trim();
    let key = at.split('=').next().unwrap_or("").trim();
    let lines: Vec<&str> = text.lines().collect();
    let found = lines.iter().position(|l| !at.is_empty() && l.trim() == at).or_else(|| {
        (!key.is_empty()).then(|| lines.iter().position(|l| l.trim_start().strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')))).flatten()
    });
    err(file, found.map(|i| i + 1).unwrap_or(1), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{parse_fit, FIT_TOML};

    #[test]
    fn rules_add_replace_and_disable_by_id() {
        let text = "disable = [\"amdahl\"]\n\n[[rule]]\nid = \"local_rule\"\nkind = \"caveat\"\nwhen = [\"share_pct > 1\"]\ntext = \"{kernel}: local\"\nsource = \"project\"\n";
        let merged = merge(FIT_TOML, "fit.toml", "p/fit.toml", text).unwrap();
        let fit = parse_fit("p/fit.toml", &merged).unwrap();
        let builtin = parse_fit("data/fit.toml", FIT_TOML).unwrap();
        assert!(!fit.rules.iter().any(|r| r.id == "amdahl"));
        assert_eq!(fit.rules.last().unwrap().id, "local_rule");
        assert_eq!(fit.rules.len(), builtin.rules.len());
        assert_eq!(fit.bands.len(), builtin.bands.len());
    }

    #[test]
    fn unknown_disable_id_names_its_line() {
        let e = merge(FIT_TOML, "fit.toml", "p/fit.toml", "# local\ndisable = [\"no_such_rule\"]\n").unwrap_err().to_string();
        assert!(e.starts_with("p/fit.toml:2:"), "{e}");
        assert!(e.contains("no_such_rule"), "{e}");
    }

    #[test]
    fn parser_error_lands_on_the_project_line() {
        let text = "# local\n[[rule]]\nid = \"local_rule\"\nkind = \"hint\"\nwhen = []\ntext = \"x\"\nsource = \"p\"\n";
        let merged = merge(FIT_TOML, "fit.toml", "p/fit.toml", text).unwrap();
        let e = remap(parse_fit("p/fit.toml", &merged).unwrap_err(), &merged, "p/fit.toml", text).to_string();
        assert!(e.starts_with("p/fit.toml:3:"), "{e}");
        assert!(e.contains("local_rule.kind"), "{e}");
    }
}
