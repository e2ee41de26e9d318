//! The tiny condition language of the rules files: `SIGNAL OP VALUE`, `SIGNAL`, `!SIGNAL`.
//!
//! Hand-written because it is a dozen lines of grammar; a general expression crate would
//! invite rules no reader of the TOML can check at a glance.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A signal value: a number, a flag, a word, or a list (capabilities, wave sizes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Val {
    Bool(bool),
    Num(f64),
    Str(String),
    List(Vec<String>),
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Bool(b) => write!(f, "{b}"),
            Val::Num(n) => write!(f, "{}", fmt_num(*n, None)),
            Val::Str(s) => f.write_str(s),
            Val::List(l) => f.write_str(&l.join(", ")),
        }
    }
}

/// Numbers as people read them: integers without decimals, others with up to 3.
pub fn fmt_num(n: f64, decimals: Option<usize>) -> String {
    match decimals {
        Some(d) => format!("{n:.d$}"),
        None if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", n as i64),
        None => {
            let s = format!("{n:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }
}

pub type Signals = BTreeMap<String, Val>;

/// What a condition reads: values by name, and flags. A bare `NAME` / `!NAME` (or `NAME ==
/// true`) asks the flag; a comparison asks the value — so a rule that emits `spills` leaves
/// the spill count readable as a number.
pub trait Lookup {
    fn value(&self, name: &str) -> Option<&Val>;
    fn flag(&self, name: &str) -> Option<bool> {
        match self.value(name) {
            Some(Val::Bool(b)) => Some(*b),
            _ => None,
        }
    }
}

impl Lookup for Signals {
    fn value(&self, name: &str) -> Option<&Val> {
        self.get(name)
    }
}

/// Computed values beside the flags fired rules emitted (kept apart: an emitted name never
/// overwrites a value of the same name).
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    pub values: &'a Signals,
    pub flags: &'a std::collections::BTreeSet<String>,
}

impl Lookup for Facts<'_> {
    fn value(&self, name: &str) -> Option<&Val> {
        self.values.get(name)
    }
    fn flag(&self, name: &str) -> Option<bool> {
        if self.flags.contains(name) {
            return Some(true);
        }
        self.values.flag(name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Ge,
    Le,
    Gt,
    Lt,
    Eq,
    Ne,
    Contains,
}

/// One parsed condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Cond {
    pub signal: String,
    op: Option<Op>,
    negate: bool,
    value: Option<Val>,
    pub text: String,
}

/// Result of evaluating a condition: `None` when the signal is unknown.
pub type Truth = Option<bool>;

impl Cond {
    pub fn parse(text: &str) -> Result<Cond, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty condition".into());
        }
        const OPS: [(&str, Op); 7] =
            [(">=", Op::Ge), ("<=", Op::Le), ("==", Op::Eq), ("!=", Op::Ne), (">", Op::Gt), ("<", Op::Lt), (" contains ", Op::Contains)];
        for (sym, op) in OPS {
            if let Some(pos) = t.find(sym) {
                let signal = t[..pos].trim();
                let raw = t[pos + sym.len()..].trim();
                check_ident(signal, t)?;
                let value = parse_value(raw).ok_or_else(|| format!("`{t}`: cannot read value `{raw}`"))?;
                return Ok(Cond { signal: signal.into(), op: Some(op), negate: false, value: Some(value), text: t.into() });
            }
        }
        let (negate, name) = match t.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, t),
        };
        check_ident(name, t)?;
        Ok(Cond { signal: name.into(), op: None, negate, value: None, text: t.into() })
    }

    pub fn eval<L: Lookup + ?Sized>(&self, s: &L) -> Truth {
        let Some(op) = self.op else {
            return s.flag(&self.signal).map(|b| b != self.negate);
        };
        let want = self.value.as_ref()?;
        if let (Op::Eq | Op::Ne, Val::Bool(w)) = (op, want) {
            return s.flag(&self.signal).map(|b| (b == *w) == (op == Op::Eq));
        }
        let v = s.value(&self.signal)?;
        Some(match (op, v, want) {
            (Op::Contains, Val::List(l), Val::Str(w)) => l.iter().any(|x| x == w),
            (Op::Contains, Val::List(l), Val::Num(n)) => l.iter().any(|x| x.parse::<f64>().ok() == Some(*n)),
            (Op::Contains, Val::Str(s), Val::Str(w)) => s.contains(w.as_str()),
            (Op::Eq, a, b) => vals_eq(a, b),
            (Op::Ne, a, b) => !vals_eq(a, b),
            (op, Val::Num(a), Val::Num(b)) => match op {
                Op::Ge => a >= b,
                Op::Le => a <= b,
                Op::Gt => a > b,
                Op::Lt => a < b,
                _ => return None,
            },
            _ => return None,
        })
    }
}

fn vals_eq(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => (x - y).abs() < 1e-9,
        (Val::Str(x), Val::Str(y)) => x.eq_ignore_ascii_case(y),
        (Val::Bool(x), Val::Bool(y)) => x == y,
        _ => false,
    }
}

/// A signal name: letters, digits and `_`, in parts joined by single dots
/// (`triton.num_warps`, the names a parser gives a framework's own signals).
fn check_ident(name: &str, whole: &str) -> Result<(), String> {
    if name.split('.').any(|part| part.is_empty() || !part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) {
        return Err(format!("`{whole}`: `{name}` is not a signal name"));
    }
    Ok(())
}

fn parse_value(raw: &str) -> Option<Val> {
    match raw {
        "true" => return Some(Val::Bool(true)),
        "false" => return Some(Val::Bool(false)),
        _ => {}
    }
    for q in ['\'', '"'] {
        if raw.len() >= 2 && raw.starts_with(q) && raw.ends_with(q) {
            return Some(Val::Str(raw[1..raw.len() - 1].to_string()));
        }
    }
    raw.parse::<f64>().ok().map(Val::Num)
}

/// All conditions hold (`Some(true)`), one fails (`Some(false)`), or some are unknown
/// and none fails (`None`, with the unknown signal names).
pub fn eval_all<L: Lookup + ?Sized>(conds: &[Cond], s: &L) -> (Truth, Vec<String>) {
    let mut unknown = Vec::new();
    for c in conds {
        match c.eval(s) {
            Some(false) => return (Some(false), vec![]),
            Some(true) => {}
            None => unknown.push(c.signal.clone()),
        }
    }
    if unknown.is_empty() {
        (Some(true), unknown)
    } else {
        (None, unknown)
    }
}

/// Fill `{name}` / `{name:.N}` from signals. A clause in `[…]` is dropped whole when a name it
/// quotes is unknown (`{launches:.0} launches[, {launches_per_step:.0} per step]` on a trace with
/// no step markers); an unknown name outside one reads `unknown`. A finding never prints an
/// unfilled placeholder.
pub fn render_template(t: &str, s: &Signals) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(open) = rest.find('[') {
        out.push_str(&fill(&rest[..open], s).0);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&fill(&rest[open..], s).0);
            return out;
        };
        let (clause, complete) = fill(&after[..close], s);
        if complete {
            out.push_str(&clause);
        }
        rest = &after[close + 1..];
    }
    out.push_str(&fill(rest, s).0);
    out
}

/// The text with its names filled, and whether every name was known.
fn fill(t: &str, s: &Signals) -> (String, bool) {
    let mut out = String::with_capacity(t.len());
    let mut complete = true;
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return (out, complete);
        };
        let spec = &after[..close];
        let (name, dec) = match spec.split_once(":.") {
            Some((n, d)) => (n, d.parse::<usize>().ok()),
            None => (spec, None),
        };
        match s.get(name) {
            Some(Val::Num(n)) => out.push_str(&fmt_num(*n, dec)),
            Some(v) => out.push_str(&v.to_string()),
            None => {
                complete = false;
                out.push_str("unknown");
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    (out, complete)
}

/// Signal names a template quotes.
pub fn template_names(t: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let spec = &after[..close];
        let name = spec.split_once(':').map(|(n, _)| n).unwrap_or(spec);
        names.push(name.to_string());
        rest = &after[close + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> Signals {
        let mut s = Signals::new();
        s.insert("bw_pct".into(), Val::Num(72.4));
        s.insert("matrix_capable".into(), Val::Bool(true));
        s.insert("limiter".into(), Val::Str("vgpr".into()));
        s.insert("caps".into(), Val::List(vec!["wmma".into(), "dot".into()]));
        s
    }

    #[test]
    fn conditions() {
        let s = sig();
        assert_eq!(Cond::parse("bw_pct >= 60").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("bw_pct < 60").unwrap().eval(&s), Some(false));
        assert_eq!(Cond::parse("matrix_capable").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("!matrix_capable").unwrap().eval(&s), Some(false));
        assert_eq!(Cond::parse("limiter == 'vgpr'").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("caps contains 'wmma'").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("caps contains 'mfma'").unwrap().eval(&s), Some(false));
        assert_eq!(Cond::parse("spills > 0").unwrap().eval(&s), None);
        assert!(Cond::parse("bw pct > 3").is_err());
        let mut s = sig();
        s.insert("triton.num_warps".into(), Val::Num(8.0));
        s.insert("triton.persistent".into(), Val::Bool(false));
        assert_eq!(Cond::parse("triton.num_warps >= 8").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("!triton.persistent").unwrap().eval(&s), Some(true));
        assert_eq!(Cond::parse("triton.num_warps == 4.5").unwrap().signal, "triton.num_warps");
        for bad in [".a > 1", "a. > 1", "a..b > 1", "!.", "a.b c > 1"] {
            assert!(Cond::parse(bad).is_err(), "{bad}");
        }
        assert!(Cond::parse("bw_pct > lots").is_err());
    }

    #[test]
    fn all_with_unknown() {
        let s = sig();
        let c: Vec<Cond> = ["bw_pct > 10", "spills > 0"].iter().map(|t| Cond::parse(t).unwrap()).collect();
        assert_eq!(eval_all(&c, &s), (None, vec!["spills".to_string()]));
        let c: Vec<Cond> = ["bw_pct > 90", "spills > 0"].iter().map(|t| Cond::parse(t).unwrap()).collect();
        assert_eq!(eval_all(&c, &s).0, Some(false));
    }

    #[test]
    fn templates() {
        let s = sig();
        // An unknown name never prints as a placeholder: its optional clause goes, else it reads `unknown`.
        assert_eq!(render_template("at {bw_pct:.0}% ({limiter})[, {nope} per step]: done", &s), "at 72% (vgpr): done");
        assert_eq!(render_template("at {bw_pct:.0}%[, {limiter} limit]", &s), "at 72%, vgpr limit");
        assert_eq!(render_template("at {bw_pct:.0}% {nope}", &s), "at 72% unknown");
        assert!(!render_template("[{nope}] {nope:.1}", &s).contains('{'));
        assert_eq!(template_names("{a:.1} and {b}"), vec!["a", "b"]);
    }
}
