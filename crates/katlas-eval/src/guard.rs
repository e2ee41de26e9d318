//! Checks that make a comparison invalid before (or regardless of) its
//! statistics: identity mismatch, stale binary, allowed-files breach, and a
//! result faster than the speed of light.

use katlas_model::{FileDigest, Identity};
use std::collections::BTreeSet;
use std::path::Path;

/// Differences between two sides' identities that make them incomparable.
/// `knobs` are env names the comparison is allowed to differ in; `strip`
/// names (instrumentation) are ignored on both sides.
pub fn identity_mismatches(a: &Identity, b: &Identity, knobs: &BTreeSet<String>, strip: &[String], cross_host: bool) -> Vec<String> {
    let mut out = Vec::new();
    file_mismatch("prompt", a.prompt.as_ref(), b.prompt.as_ref(), &mut out);
    file_mismatch("model", a.model.as_ref(), b.model.as_ref(), &mut out);
    if let (Some(x), Some(y)) = (a.arch(), b.arch()) {
        if x != y {
            out.push(format!("arch atom differs: {x} vs {y}"));
        }
    }
    let product = |i: &Identity| i.devices.first().and_then(|d| d.product.clone());
    if let (Some(x), Some(y)) = (product(a), product(b)) {
        if x != y {
            out.push(format!("device product differs: {x} vs {y}"));
        }
    }
    let keys: BTreeSet<&String> = a.env.keys().chain(b.env.keys()).collect();
    for k in keys {
        if knobs.contains(k) || strip.contains(k) {
            continue;
        }
        let (x, y) = (a.env.get(k), b.env.get(k));
        if x != y {
            out.push(format!(
                "env {k} differs: {} vs {} (declare it as a variant knob if intended)",
                x.map(|s| format!("`{s}`")).unwrap_or_else(|| "unset".into()),
                y.map(|s| format!("`{s}`")).unwrap_or_else(|| "unset".into())
            ));
        }
    }
    if !cross_host {
        if let (Some(x), Some(y)) = (&a.host.hostname, &b.host.hostname) {
            if x != y {
                out.push(format!("host differs: {x} vs {y} (pass --cross-host to compare across machines)"));
            }
        }
    }
    out
}

fn file_mismatch(what: &str, a: Option<&FileDigest>, b: Option<&FileDigest>, out: &mut Vec<String>) {
    match (a, b) {
        (Some(x), Some(y)) => match (&x.md5, &y.md5) {
            (Some(m), Some(n)) if m != n => out.push(format!("{what} differs: md5 {m} vs {n}")),
            (None, None) if x.path != y.path => {
                out.push(format!("{what} differs: {} vs {} (no digests)", x.path.as_deref().unwrap_or("?"), y.path.as_deref().unwrap_or("?")))
            }
            _ => {}
        },
        (Some(_), None) | (None, Some(_)) => out.push(format!("{what} given on one side only")),
        (None, None) => {}
    }
}

/// A candidate whose binary is byte-identical to the baseline's while its
/// sources differ did not rebuild: whatever it measures is the baseline. A binary
/// built from another git repository than the sides' sources (outside both trees,
/// e.g. a tool's own checkout) is the same on both sides by nature: no change to
/// these sources feeds it, so equal bytes there say nothing about a stale build.
pub fn stale_binary(a: &Identity, b: &Identity) -> Option<String> {
    let (ma, mb) = (a.binary.as_ref()?.md5.as_ref()?, b.binary.as_ref()?.md5.as_ref()?);
    if ma != mb {
        return None;
    }
    let sa = (&a.source.commit, &a.source.diff_md5);
    let sb = (&b.source.commit, &b.source.diff_md5);
    if sa == sb || (sa.0.is_none() && sb.0.is_none()) {
        return None;
    }
    let roots: Vec<&Path> = [&a.source.root, &b.source.root].into_iter().flatten().map(Path::new).collect();
    if let Some(bin) = b.binary.as_ref().and_then(|d| d.path.as_deref()) {
        if built_from_another_repository(Path::new(bin), &roots) {
            return None;
        }
    }
    Some(format!(
        "stale binary: candidate binary md5 {mb} equals the baseline's while the sources differ \
         (commit {} vs {}); rebuild the candidate",
        a.source.commit_short.as_deref().or(a.source.commit.as_deref()).unwrap_or("-"),
        b.source.commit_short.as_deref().or(b.source.commit.as_deref()).unwrap_or("-")
    ))
}

/// The git repository holding `path` (its common git directory, so that a linked worktree
/// and its main checkout are one repository); `None` outside git.
fn repository_of(path: &Path) -> Option<std::path::PathBuf> {
    let dir = if path.is_dir() { path } else { path.parent()? };
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--git-common-dir"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let rel = String::from_utf8(out.stdout).ok().filter(|_| out.status.success())?;
    std::fs::canonicalize(dir.join(rel.trim())).ok()
}

/// `bin` lies outside every source root and belongs to a git repository none of them is in.
/// A binary in a tree, in a build directory outside any repository (a shared build output),
/// or anywhere in the sides' own repository could be built from their sources: not this.
fn built_from_another_repository(bin: &Path, roots: &[&Path]) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let file = canon(bin);
    if roots.is_empty() || roots.iter().any(|r| file.starts_with(canon(r))) {
        return false;
    }
    let Some(theirs) = repository_of(&file) else { return false };
    roots.iter().all(|r| repository_of(r).is_some_and(|ours| ours != theirs))
}

/// The code objects both sides loaded are byte-identical while their sources
/// differ: the candidate ran a stale precompiled blob, whatever its binary.
pub fn stale_code_objects(a: &Identity, b: &Identity) -> Option<String> {
    if a.code_objects.is_empty() || b.code_objects.is_empty() {
        return None;
    }
    let digests = |i: &Identity| -> Option<Vec<String>> {
        let mut v: Vec<String> = i.code_objects.iter().map(|c| c.md5.clone()).collect::<Option<_>>()?;
        v.sort();
        Some(v)
    };
    let (da, db) = (digests(a)?, digests(b)?);
    let sources_differ =
        (&a.source.commit, &a.source.diff_md5) != (&b.source.commit, &b.source.diff_md5) && (a.source.commit.is_some() || b.source.commit.is_some());
    (da == db && sources_differ).then(|| {
        format!(
            "stale code objects: the candidate loaded the same {} code object(s) as the baseline ({}) while the sources differ; rebuild or clear the kernel cache",
            db.len(),
            b.code_objects.iter().filter_map(|c| c.path.clone()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The hash directories of `kernel`'s entries in a Triton cache (`<cache>/<hash>/<kernel>.json`:
/// Triton names each compile by a hash of the kernel's source and options).
pub fn triton_entries(cache: &Path, kernel: &str) -> BTreeSet<String> {
    let file = format!("{kernel}.json");
    std::fs::read_dir(cache)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(&file).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
}

/// The candidate never compiled `kernel` (it imported something other than its copy), or
/// compiled exactly the baseline's entries although an allowed file changed (a stale compile:
/// it ran the baseline's source).
pub fn triton_compile(kernel: &str, base: &BTreeSet<String>, cand: &BTreeSet<String>, changed_allowed: &[String]) -> Option<String> {
    if cand.is_empty() {
        return Some(format!("the candidate never compiled {kernel} from its copy: PYTHONPATH? (no {kernel}.json in its Triton cache)"));
    }
    (!changed_allowed.is_empty() && base == cand)
        .then(|| format!("stale compile: {kernel}'s Triton cache entries are the baseline's although {} changed", changed_allowed.join(", ")))
}

/// Changed files outside the allowed patterns. Patterns: exact paths,
/// `dir/` (everything under it), `*` (within one path segment), `**` (any
/// depth), `?` (one character).
pub fn allowed_files_breach(changed: &[String], allowed: &[String]) -> Vec<String> {
    changed.iter().filter(|f| !allowed.iter().any(|p| glob_match(p, f))).cloned().collect()
}

pub fn glob_match(pattern: &str, path: &str) -> bool {
    if let Some(dir) = pattern.strip_suffix('/') {
        return path.starts_with(&format!("{dir}/"));
    }
    fn m(p: &[u8], s: &[u8]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(b'*') if p.get(1) == Some(&b'*') => {
                let rest = if p.get(2) == Some(&b'/') { &p[3..] } else { &p[2..] };
                (0..=s.len()).any(|i| (i == 0 || s[i - 1] == b'/' || p.get(2) != Some(&b'/')) && m(rest, &s[i..]))
            }
            Some(b'*') => (0..=s.len()).take_while(|i| *i == 0 || s[i - 1] != b'/').any(|i| m(&p[1..], &s[i..])),
            Some(b'?') => !s.is_empty() && s[0] != b'/' && m(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && m(&p[1..], &s[1..]),
        }
    }
    m(pattern.as_bytes(), path.as_bytes())
}

/// Achieved bandwidth above the ceiling (with `margin`, e.g. 0.05) is
/// physically impossible: the measurement or the byte count is wrong.
pub fn speed_of_light(bytes: f64, seconds: f64, peak_gbps: f64, margin: f64) -> Option<String> {
    if !(bytes > 0.0 && seconds > 0.0 && peak_gbps > 0.0) {
        return None;
    }
    let achieved = bytes / seconds / 1e9;
    (achieved > peak_gbps * (1.0 + margin)).then(|| {
        format!(
            "faster than the speed of light: {:.1} GB/s achieved ({bytes:.3e} bytes in {:.3} ms) exceeds the {:.1} GB/s ceiling",
            achieved,
            seconds * 1e3,
            peak_gbps
        )
    })
}

/// Seconds from a metric value by its key's unit suffix (`_ms`, `_us`, `_ns`, `_s`).
pub fn seconds_of(key: &str, v: f64) -> Option<f64> {
    match katlas_model::unit_for_metric_key(key)? {
        "ms" => Some(v / 1e3),
        "us" => Some(v / 1e6),
        "ns" => Some(v / 1e9),
        "s" => Some(v),
        _ => None,
    }
}

/// Changed files that are symbolic links leading out of the candidate's tree: an allowed
/// path that is a link can hand the bench any file on the machine, so it is no longer the
/// file the allowed list allowed.
pub fn links_out_of_tree(root: &Path, changed: &[String]) -> Vec<String> {
    let Ok(top) = std::fs::canonicalize(root) else { return Vec::new() };
    let mut out = Vec::new();
    for f in changed {
        let p = root.join(f);
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        if !m.file_type().is_symlink() {
            continue;
        }
        let target = std::fs::read_link(&p).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
        match std::fs::canonicalize(&p) {
            Ok(real) if real.starts_with(&top) => {}
            Ok(real) => out.push(format!("{f} is a symbolic link to {} (outside the repository)", real.display())),
            Err(_) => out.push(format!("{f} is a symbolic link to {target}, which does not resolve inside the repository")),
        }
    }
    out
}

/// Files the side's command line names that git ignores under `root`: their content is
/// not in the source identity, so each is digested on its own. Only files the command
/// names are seen; an ignored file a program opens by itself is not (docs/eval.md).
pub fn ignored_inputs(argv: &[String], cwd: &Path, root: &Path, cache: Option<&Path>) -> Vec<FileDigest> {
    let Ok(top) = std::fs::canonicalize(root) else { return Vec::new() };
    let mut words: Vec<&str> = Vec::new();
    for a in argv.iter().skip(1) {
        words.extend(a.split(|c: char| c.is_whitespace() || "'\"=<>|;&()`,:".contains(c)).filter(|w| !w.is_empty()));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for w in words.into_iter().take(256) {
        let p = Path::new(w);
        let full = if p.is_absolute() { p.to_path_buf() } else { cwd.join(p) };
        let Ok(real) = std::fs::canonicalize(&full) else { continue };
        if !real.is_file() || !real.starts_with(&top) || !seen.insert(real.clone()) {
            continue;
        }
        let rel = real.strip_prefix(&top).unwrap_or(&real).to_path_buf();
        let ignored = std::process::Command::new("git")
            .arg("-C")
            .arg(&top)
            .args(["check-ignore", "-q", "--"])
            .arg(&rel)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ignored {
            let mut d = katlas_identity::file_digest(&real, cache);
            d.path = Some(rel.display().to_string());
            out.push(d);
        }
    }
    out
}

/// Ignored inputs whose content differs between the sides (or that one side lacks).
pub fn ignored_inputs_differ(a: &[FileDigest], b: &[FileDigest]) -> Vec<String> {
    let by_path = |v: &[FileDigest]| -> std::collections::BTreeMap<String, Option<String>> {
        v.iter().map(|d| (d.path.clone().unwrap_or_default(), d.md5.clone())).collect()
    };
    let (x, y) = (by_path(a), by_path(b));
    let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        match (x.get(k), y.get(k)) {
            (Some(m), Some(n)) if m == n => {}
            (Some(m), Some(n)) => out.push(format!(
                "git-ignored input `{k}` differs between the sides (md5 {} vs {}): it is not in the source identity, so the sides do not run the same thing",
                m.as_deref().unwrap_or("?"),
                n.as_deref().unwrap_or("?")
            )),
            _ => {
                out.push(format!("git-ignored input `{k}` is there on one side only: it is not in the source identity, so the sides do not run the same thing"))
            }
        }
    }
    out
}

/// A side whose runs share state: its first run (warmup included) performed like the
/// other side, and only its later runs were better, by more than 20%, more than six robust
/// CVs of those runs, and more than any baseline run strayed from the baseline's median. A
/// cache one run leaves for the next (a file in /tmp, in the tree) looks exactly like this; a
/// real gain shows from the first run on. The last bound keeps a loaded machine's ordinary
/// outliers from passing for shared state: when the baseline's own runs swing by 45%, a
/// candidate run 34% off its median is noise (the demo on a busy 2-core box hit this). And
/// "like the baseline" means about as fast as it: a first run worse than the baseline's median
/// by more than twice the baseline's swing (and 20%) is a stall of the machine or a cold start,
/// not the baseline's work done again (the skill test on a busy box: a first run at 52 tok/s
/// beside a baseline of 113 and later runs of 325).
pub fn first_run_like_baseline(first: f64, later: &[f64], baseline: &[f64], minimize: bool) -> Option<String> {
    let baseline_median = crate::stats::median(baseline);
    if later.len() < 2 || !(first > 0.0 && baseline_median > 0.0) {
        return None;
    }
    let baseline_swing = baseline.iter().filter(|b| **b > 0.0).map(|b| (b / baseline_median).ln().abs()).fold(0.0, f64::max);
    let med = crate::stats::median(later);
    let cv = crate::stats::robust_cv(later);
    if !(med > 0.0 && cv.is_finite()) {
        return None;
    }
    // How much worse the first run is than the later ones, in the goal's direction.
    let worse = if minimize { first / med - 1.0 } else { med / first - 1.0 };
    let like_baseline = (first / baseline_median).ln().abs() < (first / med).ln().abs();
    let beyond_noise = (first / med).ln().abs() > baseline_swing;
    let past_baseline = if minimize { (first / baseline_median).ln() } else { (baseline_median / first).ln() };
    let stalled = past_baseline > (2.0 * baseline_swing).max(0.2);
    (worse > 0.2_f64.max(6.0 * cv) && like_baseline && beyond_noise && !stalled).then(|| {
        format!(
            "runs share state: the candidate's first run ({}) performed like the baseline (median {}); only its later runs (median {}) were better. \
             A cache or file one run leaves for the next is measured, not the code; clear it before every run (a settle command) or warm it for both sides, and re-run",
            num(first),
            num(baseline_median),
            num(med)
        )
    })
}

/// Whether a metric key is an output checksum (`checksum`, `out_checksum`, `checksum_c`).
pub fn is_checksum(key: &str) -> bool {
    // A phase's own checksum reads `decode.checksum`.
    let k = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    k == "checksum" || k.ends_with("_checksum") || k.starts_with("checksum_")
}

/// Output checksums the measured runs printed that differ between the sides: the candidate
/// computed something else on the benchmarked input than the baseline did (it skipped work
/// when measured, or special-cased the benchmarked input while correctness checked another).
/// `a` and `b` are each side's (key, value) pairs over its measured runs.
pub fn checksums_differ(a: &[(String, f64)], b: &[(String, f64)]) -> Option<String> {
    let set = |v: &[(String, f64)], key: &str| -> Vec<String> {
        let mut s: Vec<String> = v.iter().filter(|(k, _)| k == key).map(|(_, x)| num_exact(*x)).collect();
        s.sort();
        s.dedup();
        s
    };
    let keys: BTreeSet<&String> = a.iter().map(|(k, _)| k).filter(|k| is_checksum(k)).collect();
    for key in keys {
        let (x, y) = (set(a, key), set(b, key));
        // A value that varies between the baseline's own runs digests no fixed output.
        if x.len() == 1 && x != y {
            return Some(format!(
                "output checksum `{key}` of the measured runs differs between the sides (baseline {}, candidate {}): the candidate did not compute the same result on the benchmarked input",
                x.join("/"),
                if y.is_empty() { "none printed".to_string() } else { y.join("/") }
            ));
        }
    }
    None
}

fn num_exact(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// A time metric that says each run got faster by more than the runs' own wall time did.
/// Whatever a time metric covers (the whole run, a kernel, a per-call average of a loop), the
/// work it times is inside the run, so a saving it reports shows in the wall time at least
/// once. Decided only when the reported saving is well above the wall time's own noise
/// (four robust spreads): a process whose start-up jitter hides the saving says nothing.
/// `metric_s` and `wall_s` are per side (baseline, candidate), in seconds.
pub fn time_without_wall(metric_s: [&[f64]; 2], wall_s: [&[f64]; 2]) -> Option<String> {
    use crate::stats::{mad, median};
    if metric_s.iter().chain(wall_s.iter()).any(|v| v.len() < 2) {
        return None;
    }
    let saved = median(metric_s[0]) - median(metric_s[1]);
    let wall_saved = median(wall_s[0]) - median(wall_s[1]);
    let noise = wall_s.iter().map(|w| 1.4826 * mad(w)).fold(0.0, f64::max);
    (saved > 0.002 && saved > 4.0 * noise && wall_saved < 0.5 * saved).then(|| {
        format!(
            "the metric says each run got {:.1} ms faster, but the runs' wall time fell by only {:.1} ms (wall-time spread {:.1} ms): the reported time is not the time the work took",
            saved * 1e3,
            wall_saved * 1e3,
            noise * 1e3
        )
    })
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use katlas_model::{Device, SourceIdentity};

    /// The demo's eval on a loaded 2-core box: the candidate's first run 34% off its median,
    /// but a baseline run was 45% off the baseline's median, so that is the machine's noise.
    /// The same first run beside a steady baseline is shared state.
    #[test]
    fn a_first_run_outlier_is_shared_state_only_beyond_the_baselines_own_swing() {
        let later = [3084.5, 3050.0, 3120.0, 3090.0, 3070.0];
        let noisy_baseline = [5187.8, 5309.9, 3571.4, 5174.7, 5160.0, 5200.0];
        assert_eq!(first_run_like_baseline(4140.1, &later, &noisy_baseline, true), None);
        let steady_baseline = [5187.8, 5209.9, 5171.4, 5174.7, 5160.0, 5200.0];
        assert!(first_run_like_baseline(4140.1, &later, &steady_baseline, true).is_some_and(|m| m.contains("runs share state")));
    }

    /// A first run far worse than the baseline itself is a stall, not the baseline's work: the
    /// skill test's eval on a busy box (tok/s, larger is better). A first run as fast as the
    /// baseline (a cache filled there) is still shared state, and so is one a little slower
    /// (the cache written on top of the work).
    #[test]
    fn a_first_run_slower_than_the_baseline_itself_is_a_stall_not_shared_state() {
        let later = [324.8, 320.1, 330.0, 318.5, 326.2];
        let baseline = [113.1, 112.4, 114.0, 113.5, 112.8];
        assert_eq!(first_run_like_baseline(51.964, &later, &baseline, false), None);
        assert!(first_run_like_baseline(113.0, &later, &baseline, false).is_some_and(|m| m.contains("runs share state")));
        assert!(first_run_like_baseline(100.0, &later, &baseline, false).is_some_and(|m| m.contains("runs share state")));
    }

    fn ident(host: &str, arch: &str, bin: &str, commit: &str) -> Identity {
        Identity {
            binary: Some(FileDigest { path: Some("b".into()), md5: Some(bin.into()), ..Default::default() }),
            source: SourceIdentity { commit: Some(commit.into()), ..Default::default() },
            devices: vec![Device { index: 0, vendor: "amd".into(), arch: Some(arch.into()), product: Some("RX 7900".into()), ..Default::default() }],
            host: katlas_model::HostIdentity { hostname: Some(host.into()), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn identity_guard() {
        let a = ident("h1", "gfx1100", "m1", "c1");
        let mut b = ident("h1", "gfx1100", "m2", "c2");
        assert!(identity_mismatches(&a, &b, &BTreeSet::new(), &[], false).is_empty());
        b.env.insert("HIPFIRE_GRAPH".into(), "1".into());
        b.env.insert("HIPFIRE_PROFILE".into(), "1".into());
        let m = identity_mismatches(&a, &b, &BTreeSet::new(), &["HIPFIRE_PROFILE".into()], false);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains("HIPFIRE_GRAPH"));
        let knobs: BTreeSet<String> = ["HIPFIRE_GRAPH".to_string()].into();
        assert!(identity_mismatches(&a, &b, &knobs, &["HIPFIRE_PROFILE".into()], false).is_empty());
        let c = ident("h2", "gfx1201", "m2", "c2");
        let m = identity_mismatches(&a, &c, &BTreeSet::new(), &[], false);
        assert!(m.iter().any(|x| x.contains("arch atom")) && m.iter().any(|x| x.contains("host")), "{m:?}");
        let m = identity_mismatches(&a, &c, &BTreeSet::new(), &[], true);
        assert!(!m.iter().any(|x| x.contains("host")));
        let mut p = a.clone();
        p.prompt = Some(FileDigest { md5: Some("p1".into()), ..Default::default() });
        let mut q = a.clone();
        q.prompt = Some(FileDigest { md5: Some("p2".into()), ..Default::default() });
        assert!(identity_mismatches(&p, &q, &BTreeSet::new(), &[], false)[0].contains("prompt"));
    }

    #[test]
    fn stale() {
        let a = ident("h", "gfx1100", "same", "c1");
        let b = ident("h", "gfx1100", "same", "c2");
        assert!(stale_binary(&a, &b).unwrap().contains("stale binary"));
        assert!(stale_binary(&a, &a).is_none());
        assert!(stale_binary(&a, &ident("h", "gfx1100", "other", "c2")).is_none());
    }

    #[test]
    fn a_binary_of_another_repository_is_not_stale_but_one_built_here_is() {
        let d = tempfile::tempdir().unwrap();
        let git = |dir: &Path, args: &[&str]| {
            let o = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
            assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        };
        // The project, a linked worktree of it (a ref baseline's side), a tool in its own
        // checkout, and a build directory in no repository.
        let (project, tool, shared) = (d.path().join("project"), d.path().join("tool"), d.path().join("shared"));
        for dir in [&project, &tool, &shared] {
            std::fs::create_dir_all(dir.join("bin")).unwrap();
        }
        for repo in [&project, &tool] {
            git(repo, &["init", "-q"]);
            std::fs::write(repo.join("src.c"), "int main(void) { return 0; }\n").unwrap();
            git(repo, &["add", "src.c"]);
            git(repo, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]);
        }
        let wt = d.path().join("project/.katlas/worktrees/base");
        git(&project, &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
        let side = |root: &Path, bin: &Path, commit: &str| {
            std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
            std::fs::write(bin, b"\x7fELF same bytes").unwrap();
            Identity {
                binary: Some(FileDigest { path: Some(bin.display().to_string()), md5: Some("same".into()), ..Default::default() }),
                source: SourceIdentity { root: Some(root.display().to_string()), commit: Some(commit.into()), ..Default::default() },
                ..Default::default()
            }
        };
        // The tool's own binary, run by a project whose candidate changed: not a stale build.
        let bin = tool.join("bin/tool");
        assert_eq!(stale_binary(&side(&wt, &bin, "c1"), &side(&project, &bin, "c2")), None);
        // Built in the project's tree (either side's), in its repository, or in a build
        // directory outside any repository: equal bytes with changed sources are stale.
        for bin in [project.join("bin/bench"), wt.join("bin/bench"), shared.join("bin/bench")] {
            let m = stale_binary(&side(&wt, &bin, "c1"), &side(&project, &bin, "c2"));
            assert!(m.as_deref().is_some_and(|m| m.contains("stale binary")), "{}: {m:?}", bin.display());
        }
        // A project inside the tool's checkout (the demo's scratch project under katlas's
        // target/) runs the tool's binary: still another repository's.
        let inner = tool.join("target/demo");
        std::fs::create_dir_all(&inner).unwrap();
        git(&inner, &["init", "-q"]);
        assert_eq!(stale_binary(&side(&inner, &bin, "c1"), &side(&inner, &bin, "c2")), None);
        // A checkout nested in the project's directory is in its tree: a build there is checked.
        let nested = project.join("vendor/tool");
        std::fs::create_dir_all(nested.join("bin")).unwrap();
        git(&nested, &["init", "-q"]);
        assert!(stale_binary(&side(&wt, &nested.join("bin/tool"), "c1"), &side(&project, &nested.join("bin/tool"), "c2")).is_some(), "inside the tree");
    }

    #[test]
    fn stale_blob() {
        let co = |m: &str| FileDigest { path: Some("k.hsaco".into()), md5: Some(m.into()), ..Default::default() };
        let mut a = ident("h", "gfx1100", "bin1", "c1");
        let mut b = ident("h", "gfx1100", "bin2", "c2");
        assert!(stale_code_objects(&a, &b).is_none(), "no code objects reported");
        a.code_objects = vec![co("x")];
        b.code_objects = vec![co("x")];
        assert!(stale_code_objects(&a, &b).unwrap().contains("stale code objects"));
        b.code_objects = vec![co("y")];
        assert!(stale_code_objects(&a, &b).is_none());
    }

    #[test]
    fn globs() {
        assert!(glob_match("kernels/src/*.hip", "kernels/src/gemv.hip"));
        assert!(!glob_match("kernels/src/*.hip", "kernels/src/sub/gemv.hip"));
        assert!(glob_match("kernels/**/*.hip", "kernels/src/sub/gemv.hip"));
        assert!(glob_match("kernels/", "kernels/a/b.c"));
        assert!(glob_match("a?.rs", "ab.rs"));
        assert!(!glob_match("src/lib.rs", "src/lib.rsx"));
        let breach = allowed_files_breach(&["kernels/src/gemv.hip".into(), "src/dispatch.rs".into()], &["kernels/src/gemv*.hip".into()]);
        assert_eq!(breach, vec!["src/dispatch.rs"]);
    }

    #[test]
    fn checksums_and_times_that_disagree_with_the_runs() {
        let k = |v: &[f64]| -> Vec<(String, f64)> { v.iter().map(|x| ("checksum".to_string(), *x)).collect() };
        assert_eq!(checksums_differ(&k(&[4950.0, 4950.0]), &k(&[4950.0, 4950.0])), None);
        assert!(checksums_differ(&k(&[4950.0]), &k(&[0.0, 0.0])).is_some_and(|m| m.contains("baseline 4950, candidate 0")));
        assert_eq!(checksums_differ(&[("tok_s".into(), 1.0)], &[("tok_s".into(), 2.0)]), None, "not a checksum");
        // A phase's own checksum, as json-lines records name it.
        let phased = |x: f64| vec![("decode.checksum".to_string(), x)];
        assert!(checksums_differ(&phased(7.0), &phased(8.0)).is_some());
        assert!(!is_checksum("decode.tok_s") && is_checksum("decode.out_checksum"));
        assert_eq!(checksums_differ(&k(&[1.0, 2.0]), &k(&[3.0, 4.0])), None, "the baseline's own runs vary: no output digest");
        // Half the reported time, the same wall time: not the time the work took.
        let (a, b) = ([0.2, 0.2, 0.2], [0.1, 0.1, 0.1]);
        let wall = [0.205, 0.21, 0.207];
        assert!(time_without_wall([&a, &b], [&wall, &wall]).is_some());
        // A real saving shows in the wall time.
        assert_eq!(time_without_wall([&a, &b], [&wall, &[0.105, 0.11, 0.107]]), None);
        // A kernel time far below the process's start-up jitter decides nothing.
        assert_eq!(time_without_wall([&[0.0002, 0.0002], &[0.0001, 0.0001]], [&[0.3, 0.5, 0.4], &[0.45, 0.3, 0.5]]), None);
    }

    #[test]
    fn light_speed() {
        // 2 GB in 1 ms = 2000 GB/s: impossible on a 960 GB/s card, fine on 3350 GB/s.
        assert!(speed_of_light(2e9, 1e-3, 960.0, 0.05).is_some());
        assert!(speed_of_light(1e9, 1e-3, 960.0, 0.05).is_none(), "inside the 5% margin");
        assert!(speed_of_light(2e9, 1e-3, 3350.0, 0.05).is_none());
        assert_eq!(seconds_of("elapsed_ms", 2.0), Some(0.002));
        assert_eq!(seconds_of("gen_tok_s", 2.0), None);
    }

    #[test]
    fn triton_cache_entries_never_compiled_and_stale() {
        let d = tempfile::tempdir().unwrap();
        let side = |name: &str, hashes: &[&str]| {
            let dir = d.path().join(name);
            for h in hashes {
                std::fs::create_dir_all(dir.join(h)).unwrap();
                std::fs::write(dir.join(h).join("_k.json"), "{}").unwrap();
            }
            // Another kernel's entry is not this kernel's compile.
            std::fs::create_dir_all(dir.join("other")).unwrap();
            std::fs::write(dir.join("other/_j.json"), "{}").unwrap();
            triton_entries(&dir, "_k")
        };
        let (base, same, new, none) = (side("A", &["h1"]), side("B", &["h1"]), side("C", &["h2"]), side("D", &[]));
        let changed = vec!["pkg/k.py".to_string()];
        assert!(triton_compile("_k", &base, &none, &changed).unwrap().contains("never compiled _k from its copy: PYTHONPATH?"));
        assert!(triton_compile("_k", &base, &same, &changed)
            .unwrap()
            .contains("stale compile: _k's Triton cache entries are the baseline's although pkg/k.py changed"));
        assert_eq!(triton_compile("_k", &base, &new, &changed), None);
        assert_eq!(triton_compile("_k", &base, &same, &[]), None, "no allowed file changed: the same compile is expected");
    }
}
