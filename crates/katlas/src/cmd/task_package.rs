//! `katlas task --package NAME`: the copy of a third-party Python package a task tunes. The
//! eval's baseline is a git commit, so the copy lives inside the project and is committed; each
//! side then imports its own tree's copy.

use crate::ctx::CliError;
use katlas_collect::provenance::python::{find_packages, module_name, scan};
use katlas_model::task::TaskPackage;
use std::path::{Component, Path, PathBuf};

/// Bounds on walking a package: a site-packages directory is thousands of files at most.
const MAX_FILES: usize = 50_000;
const MAX_SCAN_BYTES: u64 = 4 << 20;

/// Where the copy is and how the sides import it.
pub struct Prepared {
    pub package: TaskPackage,
    /// The PYTHONPATH entry, project-relative (`third_party/python`).
    pub pythonpath: String,
}

/// What `--package` asks for.
pub struct Request<'a> {
    pub root: &'a Path,
    pub name: &'a str,
    pub editable: Option<&'a Path>,
    /// `[task] vendor`, project-relative.
    pub vendor: &'a str,
    pub python: &'a str,
    /// The task's kernel: its `@triton.jit` function's file is the allowed file.
    pub kernel: &'a str,
}

fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p).display().to_string();
    if r.is_empty() {
        ".".into()
    } else {
        r
    }
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Find (or copy) the package, check that the copy is committed, and find the kernel's file.
pub fn prepare(r: &Request) -> Result<Prepared, CliError> {
    if r.name.is_empty() || !r.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || r.name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(CliError::bad_input(format!("--package `{}`: not a top-level import name", crate::output::printable(r.name))));
    }
    let root = canon(r.root);
    let (source, copy, parent, editable) = match r.editable {
        Some(dir) => {
            let dir = canon(&if dir.is_absolute() { dir.to_path_buf() } else { root.join(dir) });
            if !dir.starts_with(&root) {
                return Err(CliError::bad_input(format!(
                    "--editable {}: outside the project {} (the eval's baseline is a commit of the project, so the checkout must be inside it)",
                    dir.display(),
                    root.display()
                )));
            }
            let pkg = dir.join(r.name);
            if !pkg.join("__init__.py").is_file() {
                return Err(CliError::bad_input(format!(
                    "--editable {}: no package `{}` in it (expected {}/__init__.py)",
                    dir.display(),
                    r.name,
                    pkg.display()
                )));
            }
            (dir.clone(), pkg, dir, true)
        }
        None => {
            let vendor = Path::new(r.vendor);
            if vendor.is_absolute() || vendor.components().any(|c| !matches!(c, Component::Normal(_))) {
                return Err(CliError::bad_input(format!("[task] vendor `{}`: a project-relative directory without `..`", r.vendor)));
            }
            let src = find_packages(r.python, &[r.name.to_string()], &root).map_err(CliError::bad_input)?.remove(0);
            if !src.is_dir() {
                return Err(CliError::bad_input(format!(
                    "--package {}: {} is a single module, not a package directory; copy it into the project yourself and use --editable",
                    r.name,
                    src.display()
                )));
            }
            let parent = root.join(vendor);
            let copy = parent.join(r.name);
            no_link_below(&root, &copy)?;
            if !copy.exists() {
                copy_package(&src, &copy)?;
            }
            (canon(&src), copy, parent, false)
        }
    };
    let version = dist_version(if editable { &copy } else { &source }, r.name);
    let copy_rel = rel(&root, &copy);
    let (kernel_file, kernel_line) = jit_file(&copy, r.kernel)?;
    uncommitted(&root, &copy_rel, r.name, &source, version.as_deref(), editable)?;
    Ok(Prepared {
        package: TaskPackage {
            import_name: r.name.to_string(),
            source_dir: source.display().to_string(),
            version,
            copy: copy_rel,
            editable,
            kernel_file: Some(rel(&root, &kernel_file)),
            kernel_line: Some(kernel_line),
        },
        pythonpath: rel(&root, &parent),
    })
}

/// Refuses `path` when a component of it below the project root exists as a symbolic link: a
/// repository could ship `third_party` as a link to `~/.ssh`, and the copy would land there.
fn no_link_below(root: &Path, path: &Path) -> Result<(), CliError> {
    let rest = path.strip_prefix(root).unwrap_or(path);
    let mut cur = root.to_path_buf();
    for c in rest.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(CliError::bad_input(format!(
                    "{}: is a symbolic link; katlas copies a package only into real directories of the project (remove the link or set [task] vendor)",
                    cur.display()
                )))
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Copy `src` to `dest` without `__pycache__` or `*.pyc` (bytecode of the installed files, which
/// would shadow an edit); into a scratch directory first, so an interrupted copy leaves none.
fn copy_package(src: &Path, dest: &Path) -> Result<(), CliError> {
    let tmp = dest.with_file_name(format!(".{}.katlas-copy", dest.file_name().and_then(|n| n.to_str()).unwrap_or("package")));
    let io = |p: &Path, e: std::io::Error| CliError::bad_input(format!("copying the package to {}: {}: {e}", dest.display(), p.display()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    }
    let mut stack = vec![(src.to_path_buf(), tmp.clone())];
    let mut n = 0usize;
    while let Some((from, to)) = stack.pop() {
        std::fs::create_dir_all(&to).map_err(|e| io(&to, e))?;
        for e in std::fs::read_dir(&from).map_err(|e| io(&from, e))?.flatten() {
            let name = e.file_name();
            let Ok(ft) = e.file_type() else { continue };
            n += 1;
            if n > MAX_FILES {
                return Err(CliError::bad_input(format!("--package: {} holds more than {MAX_FILES} files; not a package to copy", src.display())));
            }
            // A link could point anywhere (out of the package): copy only real files and directories.
            if ft.is_dir() && name != "__pycache__" {
                stack.push((e.path(), to.join(&name)));
            } else if ft.is_file() && !name.to_string_lossy().ends_with(".pyc") {
                std::fs::copy(e.path(), to.join(&name)).map_err(|err| io(&e.path(), err))?;
            }
        }
    }
    std::fs::rename(&tmp, dest).map_err(|e| io(dest, e))
}

/// The version the package's `*.dist-info/METADATA` beside it says, when one names it.
fn dist_version(pkg: &Path, name: &str) -> Option<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(pkg.parent()?).ok()?.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "dist-info")).collect();
    dirs.sort();
    dirs.into_iter().find_map(|d| {
        let stem = d.file_stem()?.to_str()?.to_string();
        let top = std::fs::read_to_string(d.join("top_level.txt")).unwrap_or_default();
        let dist = norm(stem.split('-').next().unwrap_or(""));
        if !(top.lines().any(|l| l.trim() == name) || dist == norm(name)) {
            return None;
        }
        let meta = std::fs::read_to_string(d.join("METADATA")).ok()?;
        meta.lines().take_while(|l| !l.is_empty()).find_map(|l| l.strip_prefix("Version:")).map(|v| v.trim().to_string())
    })
}

/// The file and `def` line of the `@triton.jit` function `kernel` inside `copy` (first by path).
fn jit_file(copy: &Path, kernel: &str) -> Result<(PathBuf, u64), CliError> {
    let mut files = Vec::new();
    let mut stack = vec![copy.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && e.file_name() != "__pycache__" {
                stack.push(e.path());
            } else if ft.is_file() && e.path().extension().is_some_and(|x| x == "py") {
                files.push(e.path());
            }
            if files.len() > MAX_FILES {
                return Err(CliError::bad_input(format!("{}: more than {MAX_FILES} Python files", copy.display())));
            }
        }
    }
    files.sort();
    for f in &files {
        if std::fs::metadata(f).map(|m| m.len() > MAX_SCAN_BYTES).unwrap_or(true) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let module = module_name(copy, f, true);
        let is_init = f.file_name().is_some_and(|n| n == "__init__.py");
        if let Some(d) = scan(&text, module.as_deref(), is_init).def(kernel).filter(|d| d.triton.is_some()) {
            return Ok((f.clone(), d.line));
        }
    }
    Err(CliError::bad_input(format!(
        "kernel `{}`: no @triton.jit function of that name in {} ({} Python files read); give the task's kernel with --kernel",
        crate::output::printable(kernel),
        copy.display(),
        files.len()
    )))
}

/// The baseline is a commit: a copy that is new or changed since the last commit is refused,
/// with the commands that commit it. katlas never commits for the user.
fn uncommitted(root: &Path, copy_rel: &str, name: &str, source: &Path, version: Option<&str>, editable: bool) -> Result<(), CliError> {
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all", "--", copy_rel])
        .current_dir(root)
        .output()
        .map_err(|e| CliError::missing_env(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(CliError::bad_input(format!(
            "{}: not a git repository ({}); a task's baseline is a commit of the project",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    if out.stdout.is_empty() {
        return Ok(());
    }
    let what = format!("{name}{}", version.map(|v| format!(" {v}")).unwrap_or_default());
    Err(CliError::bad_input(format!(
        "the package {} {copy_rel} is new or has uncommitted changes ({what} from {}).\n\
         The eval's baseline is a commit, so the copy must be committed first (katlas does not commit for you):\n  \
         {} && git commit -m \"{} {what} for tuning\"\n\
         then run the same `katlas task` command again.",
        if editable { "checkout" } else { "copy" },
        source.display(),
        katlas_advise::task::shell_line(&["git".into(), "add".into(), copy_rel.to_string()]),
        if editable { "track" } else { "vendor" }
    )))
}
