//! Credentials, found by name and by value, so none reaches a record, a log or the team store.
//!
//! Every record katlas writes carries an environment, a command or a captured output, and
//! records are pushed to a shared store: a credential in one would be copied to every host
//! that pulls. Names are judged by [`is_secret_name`]; values by [`redact_secrets`], which
//! also catches a credential under an innocent name (`KATLAS_STORE_URL=postgres://u:PW@h/db`).
//! Over-matching only hides a value; under-matching leaks it.

use regex::Regex;
use std::borrow::Cow;
use std::sync::OnceLock;

/// What a secret is recorded as.
pub const REDACTED: &str = "<redacted>";

/// Names that look like credentials are never recorded, whatever their prefix.
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    // The shell's working directories, not passwords.
    if up == "PWD" || up == "OLDPWD" {
        return false;
    }
    const ANYWHERE: &[&str] =
        &["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDS", "AUTH", "PWD", "BEARER", "SESSION", "COOKIE", "PRIVATE"];
    ANYWHERE.iter().any(|p| up.contains(p)) || up.ends_with("PASS") || up.split('_').any(|w| w == "PASS")
}

/// (pattern, replacement) for credentials recognisable by their value.
fn patterns() -> &'static [(Regex, String)] {
    static P: OnceLock<Vec<(Regex, String)>> = OnceLock::new();
    P.get_or_init(|| {
        let r = REDACTED;
        [
            // A private key block, to its end (or the end of the text when cut short).
            (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)", r.to_string()),
            // URL userinfo: `scheme://user:password@host` keeps scheme, user and host.
            (r#"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]*):[^\s@"',]*@"#, format!("${{1}}:{r}@")),
            // libpq conninfo and URL query parameters: `password=…`, quoted or not.
            (r#"(?i)\b(password|passwd|passphrase)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s"',;&]+)"#, format!("${{1}}${{2}}{r}")),
            // HTTP authorization: `Bearer …`, `Authorization: Basic …`.
            // (The header first, with its scheme; then a bare `Bearer` token of 8 or more
            // characters, so "the bearer of" stays.)
            (r"(?i)\b(authorization\s*[:=]\s*)((?:basic|digest|token|bearer)\s+)?(?:<redacted>|[A-Za-z0-9\-._~+/]+=*)", format!("${{1}}${{2}}{r}")),
            (r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*", format!("${{1}} {r}")),
            // Provider tokens by their documented prefixes: AWS access key ids, GitHub,
            // GitLab, Hugging Face, Slack, OpenAI/Anthropic-style API keys.
            (r"\b(AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", r.to_string()),
            (r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})", r.to_string()),
            (r"\bglpat-[A-Za-z0-9_\-]{20,}", r.to_string()),
            (r"\bhf_[A-Za-z0-9]{20,}", r.to_string()),
            (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", r.to_string()),
            (r"\bsk-[A-Za-z0-9_\-]{20,}", r.to_string()),
        ]
        .into_iter()
        .map(|(p, rep)| (Regex::new(p).expect("credential pattern compiles"), rep))
        .collect()
    })
}

/// `text` with every credential recognisable by its value replaced by [`REDACTED`]: URL
/// passwords, `password=` in conninfo strings, `Bearer`/`Authorization` values, private key
/// blocks, and AWS, GitHub, GitLab, Hugging Face, Slack and API-key tokens. Linear in the
/// text (the `regex` crate has no backtracking); borrowed when nothing matched.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for (re, rep) in patterns() {
        if let Cow::Owned(s) = re.replace_all(&out, rep.as_str()) {
            out = Cow::Owned(s);
        }
    }
    out
}

fn key_markers() -> &'static (Regex, Regex) {
    static M: OnceLock<(Regex, Regex)> = OnceLock::new();
    M.get_or_init(|| {
        let m = |p: &str| Regex::new(p).expect("key marker compiles");
        (m(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"), m(r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"))
    })
}

/// Whether `line` opens a private key block it does not close: [`redact_secrets`] hides the
/// line from the block's start, and the lines after it are the key's until its end marker.
pub(crate) fn opens_key_block(line: &str) -> bool {
    let (begin, end) = key_markers();
    let last_begin = begin.find_iter(line).last().map(|m| m.start());
    last_begin.is_some_and(|b| end.find_iter(line).last().is_none_or(|e| e.start() < b))
}

/// Where the private key block a line continues ends in it (the byte after its end marker).
pub(crate) fn key_block_end(line: &str) -> Option<usize> {
    key_markers().1.find(line).map(|m| m.end())
}

/// Whether `text` holds a credential [`redact_secrets`] would hide. Text that was already
/// redacted holds none: its redaction is itself.
pub fn holds_secret(text: &str) -> bool {
    redact_secrets(text) != text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_is_idempotent_and_stays_inside_json_strings() {
        let lines = [
            r#"{"cmd":"curl -H 'Authorization: Bearer abcdefgh12345678' https://u:pw@h/x","env":{"PGPASSWORD":"x"},"conn":"host=db password=s3cret dbname=k"}"#,
            r#"{"url":"http://localhost:8080/x","who":"alice@box","note":"password=<redacted>","h":"Authorization: Bearer <redacted>"}"#,
        ];
        for l in lines {
            let once = redact_secrets(l).into_owned();
            assert_eq!(redact_secrets(&once), once, "redacting twice changes it: {once}");
            assert!(!holds_secret(&once), "{once}");
            assert!(serde_json::from_str::<serde_json::Value>(&once).is_ok(), "still JSON: {once}");
        }
        assert!(!holds_secret(lines[1]), "an already-redacted line and a plain URL next to an e-mail hold none");
        assert!(holds_secret(lines[0]));
    }

    #[test]
    fn redacted_text_holds_no_secret() {
        let raw = "KATLAS_STORE_URL=postgres://katlas:hunter2@db/katlas token=ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        assert!(holds_secret(raw));
        let clean = redact_secrets(raw).into_owned();
        assert!(!clean.contains("hunter2"), "{clean}");
        assert!(!holds_secret(&clean), "{clean}");
    }

    #[test]
    fn credentials_are_found_by_their_value() {
        let cases = [
            ("postgres://katlas:PW-s3cret@db.example:5432/katlas", "postgres://katlas:<redacted>@db.example:5432/katlas", "PW-s3cret"),
            ("https://u:p%40ss/w@h.example/x", "https://u:<redacted>@h.example/x", "p%40ss"),
            ("host=/tmp/pg user=bob password=hunter2 dbname=k", "host=/tmp/pg user=bob password=<redacted> dbname=k", "hunter2"),
            ("host=h password = 'a b\\' c' dbname=k", "host=h password = <redacted> dbname=k", "a b"),
            ("postgres://h/db?sslmode=disable&password=zz9", "postgres://h/db?sslmode=disable&password=<redacted>", "zz9"),
            ("curl -H 'Authorization: Bearer eyJhbGciOi.J9x_y-z'", "curl -H 'Authorization: Bearer <redacted>'", "eyJhbGciOi"),
            ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic <redacted>", "dXNlcjpwYXNz"),
            ("id AKIAIOSFODNN7EXAMPLE used", "id <redacted> used", "AKIAIOSFODNN7EXAMPLE"),
            ("git clone https://ghp_0123456789abcdefghijABCDEFGHIJ012345@github.com/x", "git clone https://<redacted>@github.com/x", "ghp_0123"),
            ("HF=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "HF=<redacted>", "hf_AbCd"),
            ("key sk-proj-abcdefghijklmnopqrstuvwx", "key <redacted>", "sk-proj"),
            ("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nxyz\n-----END RSA PRIVATE KEY-----\nb", "a\n<redacted>\nb", "MIIEow"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r (cut)", "<redacted>", "b3Blbn"),
        ];
        for (input, want, secret) in cases {
            let got = redact_secrets(input);
            assert_eq!(got, want, "{input}");
            assert!(!got.contains(secret), "{input}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for s in [
            "postgres://katlas@db.example:5432/katlas",
            "http://localhost:8080/metrics",
            "gemv_hfq4g256_residual_r4",
            "hf_q4 tok_s=123.4 bandwidth: 812 GB/s",
            "the bearer of bad news",
            "sk-1",
            "HIPFIRE_KV_MODE=asym3",
        ] {
            assert!(matches!(redact_secrets(s), Cow::Borrowed(_)), "{s} -> {}", redact_secrets(s));
        }
    }
}
