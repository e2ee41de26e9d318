//! Every write katlas makes under a project's `.katlas/` goes through here.
//!
//! A repository people clone can ship `.katlas/` itself, or `.katlas/noise.json`,
//! `.katlas/ledger.jsonl`, `.katlas/runs/` …, as symbolic links pointing anywhere
//! (`~/.bashrc`, `~/.ssh/authorized_keys`). Following them would let a clone make
//! katlas overwrite or append to files outside the project. So from the `.katlas`
//! directory down, no component of a path katlas writes may be a symbolic link:
//! components are checked with `lstat`, the last one is opened with `O_NOFOLLOW`
//! (or replaced by `rename`, which replaces a link itself, never its target).
//!
//! Paths with no `.katlas` component (a `--output FILE` the user named) are the
//! user's own choice and are not checked.
//!
//! State files are written atomically: a temporary file in the same directory,
//! `fsync`, `rename` over the target, `fsync` of the directory. A full disk or a
//! kill leaves the previous version (or nothing), never a torn or empty file.

pub mod class;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// The name of the directory whose contents are guarded.
pub const DOT_DIR: &str = ".katlas";

fn refused(link: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{}: is a symbolic link inside {DOT_DIR}/; katlas never writes through a link (a cloned repository could point it outside the project). Remove the link.",
            link.display()
        ),
    )
}

/// The outermost `.katlas` ancestor of `path` (or `path` itself), if any.
fn guarded_root(path: &Path) -> Option<PathBuf> {
    let mut root = None;
    let mut acc = PathBuf::new();
    for c in path.components() {
        acc.push(c.as_os_str());
        if root.is_none() && matches!(c, Component::Normal(n) if n == DOT_DIR) {
            root = Some(acc.clone());
        }
    }
    root
}

/// Refuses `path` when any existing component from its `.katlas` directory down
/// (that directory included) is a symbolic link. `..` below `.katlas` is refused
/// too: a written path must stay under the directory it names.
pub fn check(path: &Path) -> io::Result<()> {
    let Some(root) = guarded_root(path) else { return Ok(()) };
    let rest = path.strip_prefix(&root).expect("root is a prefix of path");
    if rest.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{}: `..` below {DOT_DIR}/ would leave it", path.display())));
    }
    let mut cur = root.clone();
    let mut parts = std::iter::once(None).chain(rest.components().map(Some));
    loop {
        let Some(next) = parts.next() else { return Ok(()) };
        if let Some(c) = next {
            cur.push(c.as_os_str());
        }
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return Err(refused(&cur)),
            Ok(_) => {}
            // Everything below a missing component will be created by katlas itself.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// `create_dir_all` that refuses links from `.katlas` down.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    check(dir)?;
    std::fs::create_dir_all(dir)?;
    // A link swapped in while the directories were created is caught here.
    check(dir)
}

fn parent_of(path: &Path) -> Option<&Path> {
    path.parent().filter(|d| !d.as_os_str().is_empty())
}

/// Open `path` for appending (created when missing), never through a link.
pub fn open_append(path: &Path) -> io::Result<File> {
    if let Some(d) = parent_of(path) {
        create_dir_all(d)?;
    }
    check(path)?;
    OpenOptions::new().create(true).append(true).read(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(|e| link_error(path, e))
}

/// Create (truncate) `path` for writing, never through a link.
pub fn create_file(path: &Path) -> io::Result<File> {
    if let Some(d) = parent_of(path) {
        create_dir_all(d)?;
    }
    check(path)?;
    OpenOptions::new().create(true).write(true).truncate(true).custom_flags(libc::O_NOFOLLOW).open(path).map_err(|e| link_error(path, e))
}

fn link_error(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        refused(path)
    } else {
        e
    }
}

/// Replace `path` with `bytes` atomically (temp file, fsync, rename, fsync of the
/// directory). On any error the previous content is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] for content produced a piece at a time, so a large file is never held
/// whole (a child's output rewritten with its credentials hidden). `path` may be read while
/// `write` runs: it is replaced only once `write` has succeeded.
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
    let dir = parent_of(path).unwrap_or(Path::new("."));
    create_dir_all(dir)?;
    check(path)?;
    let mut tmp = tempfile::Builder::new().prefix(".katlas-tmp-").tempfile_in(dir)?;
    {
        let mut w = io::BufWriter::new(tmp.as_file_mut());
        write(&mut w)?;
        w.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename itself is durable only once the directory is synced.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The files SQLite creates beside a database (rollback journal, write-ahead log, its index).
const SQLITE_SIDECARS: [&str; 3] = ["-journal", "-wal", "-shm"];

/// Get ready to open the SQLite database at `path`: its directory is created, and it is refused
/// when the file, a directory from `.katlas` down, or a file SQLite writes beside it
/// (`-journal`, `-wal`, `-shm`) is a link. SQLite opens those itself, so this check (and the
/// caller opening the database with `SQLITE_OPEN_NOFOLLOW`) is all that keeps a cloned
/// `.katlas/index.sqlite-journal -> ~/.bashrc` from being written through.
pub fn prepare_database(path: &Path) -> io::Result<()> {
    if let Some(d) = parent_of(path) {
        create_dir_all(d)?;
    }
    check(path)?;
    for suffix in SQLITE_SIDECARS {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        check(Path::new(&side))?;
    }
    Ok(())
}

/// The `.katlas` directory of a project (not created).
pub fn dot_dir(project_root: &Path) -> PathBuf {
    project_root.join(DOT_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let proj = d.path().join("proj");
        let outside = d.path().join("outside");
        std::fs::create_dir_all(proj.join(DOT_DIR)).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (d, proj, outside)
    }

    #[test]
    fn a_linked_state_file_is_not_overwritten() {
        let (_d, proj, outside) = setup();
        let target = outside.join("victim");
        std::fs::write(&target, "keep").unwrap();
        let p = proj.join(".katlas/noise.json");
        symlink(&target, &p).unwrap();
        let e = write_atomic(&p, b"{}").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(open_append(&p).is_err());
        assert!(create_file(&p).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn a_linked_directory_or_dot_dir_is_refused() {
        let (_d, proj, outside) = setup();
        symlink(&outside, proj.join(".katlas/runs")).unwrap();
        assert!(create_dir_all(&proj.join(".katlas/runs/x")).is_err());
        assert!(open_append(&proj.join(".katlas/runs/x/log")).is_err());
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none(), "nothing written outside");

        let proj2 = proj.parent().unwrap().join("proj2");
        std::fs::create_dir_all(&proj2).unwrap();
        symlink(&outside, proj2.join(DOT_DIR)).unwrap();
        assert!(write_atomic(&proj2.join(".katlas/ledger.jsonl"), b"x").is_err());
        assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
    }

    #[test]
    fn a_database_with_a_linked_journal_or_directory_is_refused() {
        let (_d, proj, outside) = setup();
        let db = proj.join(".katlas/index.sqlite");
        prepare_database(&db).unwrap();
        let victim = outside.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, proj.join(".katlas/index.sqlite-journal")).unwrap();
        let e = prepare_database(&db).unwrap_err();
        assert!(e.to_string().contains("index.sqlite-journal"), "{e}");
        std::fs::remove_file(proj.join(".katlas/index.sqlite-journal")).unwrap();
        symlink(&victim, &db).unwrap();
        assert!(prepare_database(&db).is_err());
        let proj2 = proj.parent().unwrap().join("proj2");
        std::fs::create_dir_all(&proj2).unwrap();
        symlink(&outside, proj2.join(DOT_DIR)).unwrap();
        assert!(prepare_database(&proj2.join(".katlas/index.sqlite")).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    #[test]
    fn parent_dir_below_dot_dir_is_refused() {
        let (_d, proj, _outside) = setup();
        assert!(check(&proj.join(".katlas/tasks/../../../x/task.json")).is_err());
    }

    #[test]
    fn plain_writes_work_and_replace_atomically() {
        let (_d, proj, _o) = setup();
        let p = proj.join(".katlas/evals/1/plan.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        let mut f = open_append(&proj.join(".katlas/ledger.jsonl")).unwrap();
        f.write_all(b"a\n").unwrap();
        // No temp files left behind.
        let left: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("plan.json")]);
    }

    #[test]
    fn paths_outside_dot_dir_are_not_checked() {
        let (_d, _proj, outside) = setup();
        let real = outside.join("real.json");
        let link = outside.join("link.json");
        std::fs::write(&real, "old").unwrap();
        symlink(&real, &link).unwrap();
        // A path the user named: no `.katlas` component, the user's choice.
        assert!(check(&link).is_ok());
    }
}
