//! Kernel sources and their tags. `name.gfx1201.hip` is a chip tag, `name.gfx12.hip` a family
//! tag, `name.hip` the base. A tag is read against the architecture table: a chip tag must be
//! an atom's exact name, a family tag a family the table declares (an atom's `family` or
//! `also_families`). A dotted suffix that looks like an arch (`gfx`/`sm_`) but is neither is
//! an unknown tag and never compiled; any other dot is part of the kernel name. The tag rules
//! themselves are katlas-arch's ([`katlas_arch::TagKind`], [`katlas_arch::tag_reach`]), shared
//! with provenance and the lab.

use crate::config::Settings;
use crate::error::{BuildError, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Hip,
    Cuda,
}

impl Lang {
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Hip => "hip",
            Lang::Cuda => "cuda",
        }
    }
    /// The language a vendor's atoms compile.
    pub fn for_vendor(v: katlas_arch::Vendor) -> Lang {
        match v {
            katlas_arch::Vendor::Amd => Lang::Hip,
            katlas_arch::Vendor::Nvidia => Lang::Cuda,
        }
    }
}

pub use katlas_arch::TagKind;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Source {
    /// Absolute path.
    #[serde(skip)]
    pub path: PathBuf,
    /// Path relative to the project root.
    pub file: String,
    /// Kernel (module) name: the file name without tag and extension.
    pub kernel: String,
    /// Grouping key: directory relative to the project root + `/` + kernel.
    pub group: String,
    /// Output name relative to its kernel root, without extension (`sub__name.gfx12`).
    #[serde(skip)]
    pub out_stem: String,
    pub lang: Lang,
    pub tag: Option<String>,
    pub tag_kind: Option<TagKind>,
}

impl Source {
    pub fn is_base(&self) -> bool {
        self.tag.is_none()
    }
}

/// Parse one file name; `None` when the extension is not a kernel language.
pub fn parse_name(s: &Settings, file_name: &str) -> Option<(String, Lang, Option<String>, Option<TagKind>)> {
    let (stem, ext) = file_name.rsplit_once('.')?;
    let lang = if s.hip_extensions.iter().any(|e| e == ext) {
        Lang::Hip
    } else if s.cuda_extensions.iter().any(|e| e == ext) {
        Lang::Cuda
    } else {
        return None;
    };
    if let Some((name, tag)) = stem.rsplit_once('.') {
        if let Some(kind) = s.db.classify_tag(tag) {
            if !name.is_empty() {
                return Some((name.to_string(), lang, Some(tag.to_string()), Some(kind)));
            }
        }
    }
    Some((stem.to_string(), lang, None, None))
}

/// All kernel sources under `roots`, sorted by path (`exclude`d files left out).
pub fn discover(s: &Settings, roots: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::new();
    if roots.is_empty() {
        return Err(BuildError::BadInput(format!(
            "no kernel roots: {} configures none and none of the default roots (kernels/, src/, a top-level Python package) exists; \
             set `kernel_roots` under [project] in it, or pass PATH",
            s.config_file.display()
        )));
    }
    for root in roots {
        if !root.is_dir() {
            return Err(BuildError::BadInput(format!("kernel root {}: not a directory", root.display())));
        }
        for e in walkdir::WalkDir::new(root).follow_links(true).sort_by_file_name() {
            let e = e.map_err(|e| BuildError::BadInput(format!("{}: {e}", root.display())))?;
            if !e.file_type().is_file() {
                continue;
            }
            let Some(name) = e.file_name().to_str() else {
                continue;
            };
            let Some((kernel, lang, tag, tag_kind)) = parse_name(s, name) else {
                continue;
            };
            let path = e.path().to_path_buf();
            let file = s.rel(&path);
            if s.exclude.iter().any(|x| Path::new(x) == Path::new(&file)) {
                continue;
            }
            let dir = Path::new(&file).parent().map(|p| p.display().to_string()).unwrap_or_default();
            let in_root = path.strip_prefix(root).unwrap_or(&path);
            let stem = in_root.display().to_string();
            let stem = stem.rsplit_once('.').map(|(a, _)| a).unwrap_or(&stem).replace(['/', '\\'], "__");
            out.push(Source { group: format!("{dir}/{kernel}"), path, file, kernel, out_stem: stem, lang, tag, tag_kind });
        }
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out.dedup_by(|a, b| a.file == b.file);
    Ok(out)
}

/// Sources grouped by kernel (group key), in path order.
pub fn groups(sources: &[Source]) -> BTreeMap<&str, Vec<&Source>> {
    let mut m: BTreeMap<&str, Vec<&Source>> = BTreeMap::new();
    for s in sources {
        m.entry(s.group.as_str()).or_default().push(s);
    }
    m
}
