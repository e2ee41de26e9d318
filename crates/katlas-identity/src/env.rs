//! The route-affecting environment.

use crate::secrets::{is_secret_name, redact_secrets, REDACTED};
use std::collections::BTreeMap;

/// Prefixes whose variables can change which kernels run or how fast.
pub const DEFAULT_ENV_PREFIXES: &[&str] = &["HIPFIRE_", "HIP_", "ROCR_", "HSA_", "AMD_", "CUDA_", "NCCL_", "NVIDIA_TF32", "TORCH_", "PYTORCH_", "KATLAS_"];

/// `env` with the values of secret-looking names replaced: for env katlas records
/// because the spec asked for it (a variant's env), where the name itself matters.
/// Other values keep what they say with any credential inside them replaced
/// ([`redact_secrets`]): a store URL keeps its host, not its password.
pub fn redact_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter().map(|(k, v)| (k.clone(), if is_secret_name(k) { REDACTED.to_string() } else { redact_secrets(v).into_owned() })).collect()
}

/// `text` (a child's captured output) with secrets hidden: the value of every
/// secret-looking variable in `env` (8 characters or more, so short values do not
/// blank ordinary words), the value of any `NAME=value` whose name looks secret, and
/// anything that looks like a credential by its value ([`redact_secrets`]).
pub fn redact_text<'a, I>(text: &str, env: I) -> String
where
    I: IntoIterator<Item = (&'a String, &'a String)>,
{
    Redactor::new(env).text(text)
}

/// [`redact_text`] with the environment's secret values gathered once, for text redacted a
/// line at a time (a child's output file).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    pub fn new<'a, I>(env: I) -> Self
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let mut values: Vec<String> = env.into_iter().filter(|(k, v)| is_secret_name(k) && v.len() >= 8).map(|(_, v)| v.clone()).collect();
        // Longest first: a value that holds another is hidden whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Redactor { values }
    }

    /// The secrets of this process's environment and of `extra` (the env a child was given).
    pub fn for_child(extra: &BTreeMap<String, String>) -> Self {
        let process: BTreeMap<String, String> = std::env::vars().collect();
        Redactor::new(process.iter().chain(extra.iter()))
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), REDACTED);
            }
        }
        let out = redact_secrets(&out);
        let mut res = String::with_capacity(out.len());
        for (i, line) in out.split('\n').enumerate() {
            if i > 0 {
                res.push('\n');
            }
            res.push_str(&redact_assignments(line));
        }
        res
    }
}

fn redact_assignments(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(eq) = rest.find('=') {
        let (before, after) = rest.split_at(eq);
        // The name starts after the last character that cannot be in one (which may be
        // multi-byte: hipfire prints `τ=12.47`).
        let start = before.char_indices().rev().find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_')).map(|(i, c)| i + c.len_utf8()).unwrap_or(0);
        let name = &before[start..];
        out.push_str(before);
        out.push('=');
        let after = &after[1..];
        if !name.is_empty() && is_secret_name(name) {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            out.push_str(REDACTED);
            rest = &after[end..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The session's own variables: who the user is and where their things are, never a route.
const SESSION_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "USERNAME",
    "LOGNAME",
    "SHELL",
    "HOSTNAME",
    "MAIL",
    "DISPLAY",
    "TERM",
    "LANG",
    "PWD",
    "OLDPWD",
    "LS_COLORS",
    "SSH_",
    "XDG_",
    "DBUS_",
    "GPG_",
    "SUDO_",
];

/// Whether `prefix` may choose recorded variables: a name or namespace of three or more
/// letters, digits and `_` (`HIPFIRE_`, `NVIDIA_TF32`, `CUBLAS`) that covers none of the
/// session's own variables (HOME, USER, PATH, SSH_*, XDG_* …). Prefixes come from a
/// repository's katlas.toml and the recorded environment goes to the team store: `""` would
/// send all of it.
pub fn check_env_prefix(prefix: &str) -> Result<(), String> {
    let ok_chars = prefix.starts_with(|c: char| c.is_ascii_alphabetic()) && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if prefix.len() < 3 || !ok_chars {
        return Err(format!("`{prefix}`: a prefix is a variable namespace of 3 or more letters, digits and `_` (such as `HIPFIRE_` or `NCCL_`)"));
    }
    let up = prefix.to_ascii_uppercase();
    match SESSION_VARS.iter().find(|g| g.starts_with(&up) || (g.ends_with('_') && up.starts_with(*g))) {
        Some(g) => Err(format!("`{prefix}` would record the session's own {g}… (who the user is, not how a kernel runs)")),
        None => Ok(()),
    }
}

/// What [`route_env`] records by: `prefixes` (the defaults when `None`) and each of `names`
/// as `NAME=`, which selects that variable alone (`[identity] env_names` are exact names:
/// `OMP_NUM_THREADS` must not bring `OMP_NUM_THREADS_EXTRA`).
pub fn env_selectors(prefixes: Option<&[String]>, names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = match prefixes {
        Some(p) => p.to_vec(),
        None => DEFAULT_ENV_PREFIXES.iter().map(|s| s.to_string()).collect(),
    };
    out.extend(names.iter().map(|n| format!("{n}=")));
    out
}

/// Whether `selector` (a prefix, or `NAME=` for one exact name) selects the variable `name`.
fn selects(selector: &str, name: &str) -> bool {
    match selector.strip_suffix('=') {
        Some(exact) => name == exact,
        None => name.starts_with(selector),
    }
}

/// Variables matching any prefix or exact name ([`env_selectors`]), sorted by name: secret-looking names dropped, and a
/// credential inside any other value redacted (`KATLAS_STORE_URL` keeps its host, not its
/// password). A prefix [`check_env_prefix`] refuses matches nothing (configuration refuses
/// it with its place; this is the floor under every caller).
pub fn route_env<I>(prefixes: &[String], vars: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (String, String)>,
{
    let prefixes: Vec<&String> = prefixes.iter().filter(|p| check_env_prefix(p.strip_suffix('=').unwrap_or(p)).is_ok()).collect();
    vars.into_iter()
        .filter(|(k, _)| prefixes.iter().any(|p| selects(p, k)) && !is_secret_name(k))
        .map(|(k, v)| {
            let v = redact_secrets(&v).into_owned();
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_a_probe_planted_are_secret() {
        for n in [
            "HIPFIRE_AUTH_HEADER",
            "HIP_DB_PASS",
            "HIPFIRE_PWD_FILE",
            "CUDA_BEARER",
            "TORCH_SESSION_ID",
            "KATLAS_CREDS",
            "HIPFIRE_PASSPHRASE",
            "HIPFIRE_SPEC_TOKEN",
            "X_API_KEY",
            "MY_PASS_WORD",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["HIPFIRE_GRAPH", "HIPFIRE_KV_MODE", "HIPFIRE_PASSES", "CUDA_VISIBLE_DEVICES", "HIPFIRE_RDNA2_VARIANT"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn output_tails_hide_secret_values() {
        let env: BTreeMap<String, String> = [("HIPFIRE_SPEC_TOKEN".to_string(), "tok-1234567890".to_string())].into();
        let t = "HOME=/root\nHIPFIRE_SPEC_TOKEN=tok-1234567890\nusing tok-1234567890 now\nDB_PASSWORD=hunter2 x=1\n";
        let r = redact_text(t, &env);
        assert!(!r.contains("tok-1234567890") && !r.contains("hunter2"), "{r}");
        assert!(r.contains("HOME=/root") && r.contains("x=1") && r.contains("DB_PASSWORD=<redacted> x=1"), "{r}");
        // Multi-byte characters before `=` (hipfire's DFlash line) must not panic.
        let dflash = "cycles: 18 accepted: 239 τ=13.27 ÉTOKEN=abc";
        assert_eq!(redact_text(dflash, &BTreeMap::new()), "cycles: 18 accepted: 239 τ=13.27 ÉTOKEN=<redacted>");
        let v = redact_env(&env);
        assert_eq!(v["HIPFIRE_SPEC_TOKEN"], REDACTED);
    }

    #[test]
    fn prefixes_and_secrets() {
        let prefixes: Vec<String> = DEFAULT_ENV_PREFIXES.iter().map(|s| s.to_string()).collect();
        let vars = [
            ("HIPFIRE_GRAPH", "1"),
            ("HIP_VISIBLE_DEVICES", "0"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("HIPFIRE_API_KEY", "sk-123"),
            ("KATLAS_HF_TOKEN", "hf_abc"),
            ("CUDA_PASSWORD", "x"),
            ("HOME", "/root"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = route_env(&prefixes, vars);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["CUDA_VISIBLE_DEVICES", "HIPFIRE_GRAPH", "HIP_VISIBLE_DEVICES"]);
    }

    #[test]
    fn a_store_url_is_recorded_without_its_password() {
        let prefixes: Vec<String> = DEFAULT_ENV_PREFIXES.iter().map(|s| s.to_string()).collect();
        let vars = [
            ("KATLAS_STORE_URL", "postgres://katlas:PW-9f3k@db.example:5432/katlas"),
            ("HIPFIRE_MIRROR", "https://hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345@hf.example/m"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = route_env(&prefixes, vars);
        assert_eq!(env["KATLAS_STORE_URL"], "postgres://katlas:<redacted>@db.example:5432/katlas");
        assert_eq!(env["HIPFIRE_MIRROR"], "https://<redacted>@hf.example/m");
        let spec: BTreeMap<String, String> = [("HIPFIRE_DB".to_string(), "host=h password=hunter2".to_string())].into();
        assert_eq!(redact_env(&spec)["HIPFIRE_DB"], "host=h password=<redacted>");
        let tail = redact_text("connecting to postgres://katlas:PW-9f3k@db/k\n", &BTreeMap::new());
        assert!(!tail.contains("PW-9f3k"), "{tail}");
    }

    #[test]
    fn env_names_are_exact_names() {
        let sel = env_selectors(None, &["OMP_NUM_THREADS".to_string(), "HOME".to_string()]);
        assert!(sel.iter().any(|s| s == "HIPFIRE_"), "the defaults stay: {sel:?}");
        let vars = [("OMP_NUM_THREADS", "8"), ("OMP_NUM_THREADS_EXTRA", "1"), ("OMP", "1"), ("HIPFIRE_GRAPH", "1"), ("HOME", "/home/alice")]
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = route_env(&sel, vars);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["HIPFIRE_GRAPH", "OMP_NUM_THREADS"]);
        let only = env_selectors(Some(&["CUBLAS".to_string()]), &["LD_PRELOAD".to_string()]);
        assert_eq!(only, ["CUBLAS", "LD_PRELOAD="]);
    }

    #[test]
    fn prefixes_that_widen_the_record_are_refused() {
        for p in DEFAULT_ENV_PREFIXES.iter().chain(&["CUBLAS", "OMP_NUM_THREADS", "LD_PRELOAD", "hipfire_"]) {
            assert_eq!(check_env_prefix(p), Ok(()), "{p}");
        }
        for p in ["", "H", "HO", "HOM", "PAT", "USER", "SSH_", "SSH_AUTH", "XDG_RUNTIME", "*", "A B", "_X_", "1AB"] {
            assert!(check_env_prefix(p).is_err(), "{p}");
        }
        let vars = [("HOME", "/home/alice"), ("HIPFIRE_GRAPH", "1"), ("USER", "alice")].map(|(k, v)| (k.to_string(), v.to_string()));
        let env = route_env(&["".to_string(), "HIPFIRE_".to_string()], vars);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["HIPFIRE_GRAPH"]);
    }
}
