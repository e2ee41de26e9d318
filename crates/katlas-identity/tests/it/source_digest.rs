//! The diff digest follows untracked file *contents* and is null when clean.

use katlas_identity::source_identity;
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git must be installed for this test");
    assert!(st.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&st.stderr));
}

#[test]
fn diff_digest_tracks_untracked_contents() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored.txt\n").unwrap();
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "init"]);

    let clean = source_identity(root);
    assert_eq!(clean.dirty, Some(false));
    assert_eq!(clean.diff_md5, None, "clean tree must have a null diff digest");
    assert_eq!(clean.commit.as_ref().unwrap().len(), 40);
    assert_eq!(clean.branch.as_deref(), Some("main"));

    // Ignored files do not count, nor does katlas's own output under .katlas/.
    std::fs::write(root.join("ignored.txt"), "x").unwrap();
    std::fs::create_dir_all(root.join(".katlas/corpus")).unwrap();
    std::fs::write(root.join(".katlas/corpus/h-2026-01-01.jsonl"), "{}\n").unwrap();
    assert_eq!(source_identity(root).diff_md5, None);
    assert_eq!(source_identity(root).dirty, Some(false));

    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/new.hip"), "v1").unwrap();
    let d1 = source_identity(&root.join("sub"));
    assert_eq!(d1.dirty, Some(true));
    let d1 = d1.diff_md5.expect("dirty tree has a digest");
    // Same name, same size, other content: the digest must change.
    std::fs::write(root.join("sub/new.hip"), "v2").unwrap();
    let d2 = source_identity(root).diff_md5.unwrap();
    assert_ne!(d1, d2);
    // Computed at the project root whatever the cwd.
    assert_eq!(source_identity(&root.join("sub")).diff_md5.unwrap(), d2);
    // A tracked edit also changes it.
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    assert_ne!(source_identity(root).diff_md5.unwrap(), d2);
}

#[test]
fn outside_git_is_null_not_error() {
    let dir = tempfile::tempdir().unwrap();
    let s = source_identity(dir.path());
    assert!(s.commit.is_none() && s.diff_md5.is_none() && s.dirty.is_none());
}
