//! Which repository files the user has allowed to run commands.
//!
//! katlas runs inside repositories people clone. `katlas.toml` (`[eval] settle`,
//! `[gate] command`, `[route.*] commands`, `[workload.*] command`), workload files
//! and task packets all hold shell commands, so running them unasked would let a
//! clone run anything as the user. As with direnv's `allow`, a file's commands run
//! only once the user has trusted that exact content: its SHA-256 is recorded in
//! the user's own config (never in the project), and any edit to the file makes it
//! untrusted again. (SHA-256, not the md5 of identity digests: here a collision
//! would be an attack, not an accident.)
//!
//! The store is `$KATLAS_CONFIG_DIR/trust.json`, else
//! `$XDG_CONFIG_HOME/katlas/trust.json`, else `~/.config/katlas/trust.json`.

use crate::ProjectError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const TRUST_SCHEMA: &str = "katlas.trust.v1";

/// The commands one file contributes to a run, for showing before they run.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSource {
    /// The file the commands were read from.
    pub file: PathBuf,
    /// The exact bytes they were parsed from (what trust is checked against).
    pub content: Vec<u8>,
    /// (what it is, the command), e.g. ("[eval] settle", "./warm.sh").
    pub commands: Vec<(String, String)>,
}

impl CommandSource {
    pub fn digest(&self) -> String {
        sha256_hex(&self.content)
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TrustEntry {
    pub sha256: String,
    pub trusted_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TrustFile {
    schema: String,
    /// Canonical path → the content digest the user allowed.
    files: BTreeMap<String, TrustEntry>,
}

#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
    files: BTreeMap<String, TrustEntry>,
}

/// Where the store lives (see the module doc).
pub fn store_path() -> Result<PathBuf, ProjectError> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = nonempty("KATLAS_CONFIG_DIR") {
        return Ok(d.join("trust.json"));
    }
    if let Some(d) = nonempty("XDG_CONFIG_HOME") {
        return Ok(d.join("katlas/trust.json"));
    }
    match nonempty("HOME") {
        Some(h) => Ok(h.join(".config/katlas/trust.json")),
        None => Err(ProjectError::NoTrustStorePlace),
    }
}

fn key_of(file: &Path) -> String {
    std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()).display().to_string()
}

impl TrustStore {
    /// The user's store; a missing file is an empty store, a corrupt one an error
    /// (never silently treated as empty or as trusting everything).
    pub fn load() -> Result<Self, ProjectError> {
        let path = store_path()?;
        Self::load_from(&path)
    }

    pub fn load_from(path: &Path) -> Result<Self, ProjectError> {
        let files = match std::fs::read_to_string(path) {
            Ok(text) => {
                let corrupt = |message: String| ProjectError::TrustStore { path: path.to_path_buf(), message };
                let f: TrustFile = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
                if f.schema != TRUST_SCHEMA {
                    return Err(corrupt(format!("schema: expected {TRUST_SCHEMA}, found {}", f.schema)));
                }
                f.files
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(ProjectError::Io { path: path.to_path_buf(), source }),
        };
        Ok(Self { path: path.to_path_buf(), files })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `file` is trusted with exactly this content.
    pub fn is_trusted(&self, file: &Path, content: &[u8]) -> bool {
        self.files.get(&key_of(file)).is_some_and(|e| e.sha256 == sha256_hex(content))
    }

    /// The digest recorded for `file`, if any (trusted or since edited).
    pub fn entry(&self, file: &Path) -> Option<&TrustEntry> {
        self.files.get(&key_of(file))
    }

    /// Record `content` of `file` as trusted; returns its digest.
    pub fn trust(&mut self, file: &Path, content: &[u8], now: &str) -> String {
        let d = sha256_hex(content);
        self.files.insert(key_of(file), TrustEntry { sha256: d.clone(), trusted_at: now.into() });
        d
    }

    /// Forget `file`; whether it was recorded.
    pub fn revoke(&mut self, file: &Path) -> bool {
        self.files.remove(&key_of(file)).is_some()
    }

    pub fn entries(&self) -> impl Iterator<Item = (&String, &TrustEntry)> {
        self.files.iter()
    }

    pub fn save(&self) -> Result<(), ProjectError> {
        let f = TrustFile { schema: TRUST_SCHEMA.into(), files: self.files.clone() };
        let text = serde_json::to_string_pretty(&f).expect("trust file serialises") + "\n";
        katlas_fs::write_atomic(&self.path, text.as_bytes()).map_err(|source| ProjectError::Io { path: self.path.clone(), source })
    }
}

/// Everything in a katlas TOML file (katlas.toml, a workload file) that decides what runs or
/// where records go, with its dotted place: commands and their arguments
/// (`command`, `commands`, `settle`, `build`, `wrapper`, `compiler`, `argv`, `args`), every
/// variable of an `env` table (`LD_PRELOAD` runs code as surely as a command does), the
/// working directory (`cwd`) and the team store (`[store] url`). What `katlas trust` shows,
/// by table and key.
pub fn toml_commands(text: &str) -> Vec<(String, String)> {
    const KEYS: &[&str] = &["command", "commands", "settle", "build", "wrapper", "compiler", "argv", "args", "cwd", "sbatch_args"];
    let Ok(table) = text.parse::<toml::Table>() else { return Vec::new() };
    let mut out = Vec::new();
    fn walk(prefix: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
        let toml::Value::Table(t) = v else { return };
        for (k, v) in t {
            let place = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if KEYS.contains(&k.as_str()) || place == "store.url" || place == "provenance.python" || place == "fleet.katlas" {
                match v {
                    toml::Value::String(s) => out.push((place, s.clone())),
                    toml::Value::Array(a) if a.iter().all(|x| x.is_str()) => {
                        let parts: Vec<&str> = a.iter().filter_map(|x| x.as_str()).collect();
                        // `commands` is a list of shell commands; `command` an argv.
                        if k == "commands" {
                            for (i, c) in parts.iter().enumerate() {
                                out.push((format!("{place}[{i}]"), c.to_string()));
                            }
                        } else {
                            out.push((place, parts.join(" ")));
                        }
                    }
                    other => walk(&place, other, out),
                }
            } else if let (true, toml::Value::Table(vars)) = (k == "env", v) {
                for (name, value) in vars {
                    let value = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
                    out.push((format!("{place}.{name}"), value));
                }
            } else {
                walk(&place, v, out);
            }
        }
    }
    walk("", &toml::Value::Table(table), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provenance_interpreter_is_listed_as_a_command() {
        let c = toml_commands("[provenance]\npackages = [\"fla\"]\npython = \".venv/bin/python\"\n");
        assert_eq!(c, [("provenance.python".to_string(), ".venv/bin/python".to_string())]);
    }

    #[test]
    fn trust_is_by_content() {
        let d = tempfile::tempdir().unwrap();
        let store_path = d.path().join("cfg/trust.json");
        let f = d.path().join("katlas.toml");
        std::fs::write(&f, "[eval]\nsettle = 'x'\n").unwrap();
        let mut s = TrustStore::load_from(&store_path).unwrap();
        assert!(!s.is_trusted(&f, b"[eval]\nsettle = 'x'\n"));
        s.trust(&f, b"[eval]\nsettle = 'x'\n", "2026-12-01T00:00:00Z");
        s.save().unwrap();
        let s = TrustStore::load_from(&store_path).unwrap();
        assert!(s.is_trusted(&f, b"[eval]\nsettle = 'x'\n"));
        assert!(!s.is_trusted(&f, b"[eval]\nsettle = 'rm -rf ~'\n"), "an edit untrusts the file");
        assert!(!s.is_trusted(&d.path().join("other.toml"), b"[eval]\nsettle = 'x'\n"));
    }

    #[test]
    fn corrupt_store_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("trust.json");
        std::fs::write(&p, "{not json").unwrap();
        assert!(TrustStore::load_from(&p).unwrap_err().to_string().contains("trust.json"));
    }

    #[test]
    fn commands_found_in_toml() {
        let text = "[eval]\nsettle = './warm.sh'\n[gate]\ncommand = './bench.sh --all'\n[route.numeric]\ncommands = ['a', 'b']\n[workload.w]\ncommand = ['./bench', '--x']\n[workload.w.profile]\nwrapper = ['rocprofv3', '--']\n";
        let c = toml_commands(text);
        assert_eq!(
            c,
            vec![
                ("eval.settle".to_string(), "./warm.sh".to_string()),
                ("gate.command".into(), "./bench.sh --all".into()),
                ("route.numeric.commands[0]".into(), "a".into()),
                ("route.numeric.commands[1]".into(), "b".into()),
                ("workload.w.command".into(), "./bench --x".into()),
                ("workload.w.profile.wrapper".into(), "rocprofv3 --".into()),
            ]
        );
    }

    #[test]
    fn env_working_directory_and_store_are_shown_with_the_commands() {
        let text = "[workload.w]\ncommand = './bench'\ncwd = 'sub'\nenv = { LD_PRELOAD = './hook.so', N = 3 }\n[workload.w.profile]\nargs = ['--trace']\nenv = { HSA_TOOLS_LIB = './t.so' }\n[store]\nurl = 'postgres://evil.example/k'\n";
        let c = toml_commands(text);
        assert_eq!(
            c,
            vec![
                ("store.url".to_string(), "postgres://evil.example/k".to_string()),
                ("workload.w.command".into(), "./bench".into()),
                ("workload.w.cwd".into(), "sub".into()),
                ("workload.w.env.LD_PRELOAD".into(), "./hook.so".into()),
                ("workload.w.env.N".into(), "3".into()),
                ("workload.w.profile.args".into(), "--trace".into()),
                ("workload.w.profile.env.HSA_TOOLS_LIB".into(), "./t.so".into()),
            ]
        );
    }
}
