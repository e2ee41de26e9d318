//! Python kernel sources: Triton `@triton.jit` functions (with the `configs` and `key` of their
//! `@triton.autotune`), `torch.library` custom ops and `torch.ops` uses, the C++/CUDA sources
//! handed to `load_inline` / `cpp_extension.load`, and the modules a file imports.
//!
//! A scanner, not a Python parser: the parsers on crates.io (ruff's, RustPython's) are large
//! builds for a 2-core CI, and provenance needs only decorators, `def`s, imports and a few calls.
//! It joins the physical lines of one logical line (open brackets, `\` continuations), drops
//! comments and keeps strings whole, so a decorator spanning lines reads as one and a `def` in a
//! docstring is no definition. What is not a literal (a config list built by a comprehension, a
//! key held in a variable) is recorded as its text, marked computed.

use super::pysyntax::{calls, list_items, logical_lines, split_once_top, split_top, squeeze, str_literal, tokens, Call, Items, Tok, Token};
use super::torch_ops::{op_from_call, CustomOp};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A Triton kernel's decorators as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TritonKernel {
    /// Line of the first decorator (the `def` line is the candidate's `definition_line`).
    pub first_line: u64,
    /// The decorators, outermost first (`triton.autotune`, `triton.heuristics`, `triton.jit`).
    pub decorators: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autotune: Option<Autotune>,
}

/// What an autotune decorator tries and what re-runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Autotune {
    pub line: u64,
    /// The `triton.Config(...)` entries as read; for a comprehension, the one template it repeats.
    pub configs: Vec<TritonConfig>,
    /// Set when the list is computed: the comprehension's loops (`for num_warps in [2, 4, 8]`) or
    /// the expression (`configs=CONFIGS`), which is not evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed: Option<String>,
    /// `key=[...]`: the arguments whose values pick (and re-run) the tuning.
    pub key: Vec<String>,
    /// Set when `key` is not a literal list: its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_computed: Option<String>,
}

/// One `triton.Config({...}, num_warps=.., num_stages=..)`; values as written (a name in a
/// comprehension's template stays a name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TritonConfig {
    /// The meta-parameters dict (`BLOCK_SIZE: 128`).
    pub params: BTreeMap<String, String>,
    /// The keyword arguments (`num_warps`, `num_stages`, `num_ctas`, `maxnreg`, …).
    pub kwargs: BTreeMap<String, String>,
}

/// A C++/CUDA extension built at run time (`load_inline`, `cpp_extension.load`, `CUDAExtension`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExtensionBuild {
    pub line: u64,
    /// The call (`load_inline`, `cpp_extension.load`, `CUDAExtension`).
    pub call: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Source files named by literals (`sources=[...]`), as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Inline sources (`cpp_sources=`, `cuda_sources=`): the argument text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inline: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
}

/// One Python function definition.
#[derive(Debug, Clone, PartialEq)]
pub struct PyDef {
    pub name: String,
    pub line: u64,
    pub triton: Option<TritonKernel>,
}

/// What one Python file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PyFile {
    pub defs: Vec<PyDef>,
    pub ops: Vec<CustomOp>,
    pub builds: Vec<ExtensionBuild>,
    /// Modules imported (absolute, relative imports resolved against `module`).
    pub imports: Vec<String>,
}

impl PyFile {
    /// The definition of `name` (a Triton kernel before a plain function of the same name).
    pub fn def(&self, name: &str) -> Option<&PyDef> {
        let mut it = self.defs.iter().filter(|d| d.name == name);
        let first = it.next()?;
        Some(if first.triton.is_some() { first } else { it.find(|d| d.triton.is_some()).unwrap_or(first) })
    }
}

/// The dotted module of `path` under `root`: a root that is itself a package (holds
/// `__init__.py`) is the first component (`liger_kernel/ops/rms_norm.py`), else the module starts
/// below it (`src/pkg/m.py` under `src`).
pub fn module_name(root: &Path, path: &Path, root_is_package: bool) -> Option<String> {
    let inner = path.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = Vec::new();
    if root_is_package {
        parts.push(root.file_name()?.to_str()?.to_string());
    }
    for c in inner.components() {
        parts.push(c.as_os_str().to_str()?.to_string());
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".py")?;
    if stem != "__init__" {
        parts.push(stem.to_string());
    }
    (!parts.is_empty()).then(|| parts.join("."))
}

/// Scan one Python file; `module` (its dotted name) resolves relative imports; `is_package`: the
/// file is an `__init__.py`.
pub fn scan(text: &str, module: Option<&str>, is_package: bool) -> PyFile {
    let mut out = PyFile::default();
    let mut decorators: Vec<(u64, String)> = Vec::new();
    // `Library("ns", "DEF")` objects: their `define`/`impl` calls name ops without a namespace.
    let mut library_ns: Option<String> = None;
    for mut l in logical_lines(text) {
        let whole = l.text.len() <= MAX_LOGICAL;
        if !whole {
            let mut cut = 4096;
            while !l.text.is_char_boundary(cut) {
                cut -= 1;
            }
            l.text.truncate(cut);
        }
        let toks = tokens(&l.text);
        if toks.is_empty() {
            continue;
        }
        for call in calls(&l.text, &toks, &interesting_call, if whole { 64 } else { 0 }) {
            let last = call.callee.rsplit('.').next().unwrap_or(&call.callee);
            if last == "Library" {
                library_ns = call.positional(0).and_then(str_literal);
            }
            if let Some(op) = op_from_call(&call, l.line, library_ns.as_deref()) {
                out.ops.push(op);
            }
            if let Some(b) = extension_build(&call, l.line) {
                out.builds.push(b);
            }
        }
        for t in &toks {
            if let Tok::Name(n) = t.kind {
                if let Some(rest) = n.strip_prefix("torch.ops.") {
                    let mut p = rest.split('.');
                    if let (Some(ns), Some(name)) = (p.next(), p.next()) {
                        out.ops.push(CustomOp { name: format!("{ns}::{name}"), kind: "use".into(), line: l.line, function: None });
                    }
                }
            }
        }
        match toks[0].kind {
            Tok::Punct("@") => {
                decorators.push((l.line, l.text[toks[0].end..].trim().to_string()));
                continue;
            }
            Tok::Name("def") | Tok::Name("async") => {
                let at = if toks[0].kind == Tok::Name("async") { 2 } else { 1 };
                if let Some(Tok::Name(name)) = toks.get(at).map(|t| t.kind) {
                    let triton = triton_kernel(&decorators);
                    for (dl, dt) in &decorators {
                        // A custom op declared by decorator names this function.
                        let Some(op) = calls(dt, &[], ANY, 1).next().and_then(|c| op_from_call(&c, *dl, library_ns.as_deref())) else { continue };
                        if let Some(o) = out.ops.iter_mut().find(|o| o.line == *dl && o.name == op.name && o.kind == op.kind) {
                            o.function = Some(name.to_string());
                        }
                    }
                    out.defs.push(PyDef { name: name.to_string(), line: l.line, triton });
                }
            }
            Tok::Name("import") | Tok::Name("from") => out.imports.extend(imports(&toks, module, is_package)),
            _ => {}
        }
        decorators.clear();
    }
    out.imports.sort();
    out.imports.dedup();
    out
}

fn is_triton_decorator(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    if ["torch.", "numba.", "jax.", "cupy."].iter().any(|p| callee.starts_with(p)) {
        return false;
    }
    callee.starts_with("triton.") || callee.starts_with("tl.") || last == "jit" || last.contains("autotune") || last == "heuristics"
}

/// The Triton kernel the decorators make of a `def`; `None` when no decorator is Triton's.
fn triton_kernel(decorators: &[(u64, String)]) -> Option<TritonKernel> {
    let mut names = Vec::new();
    let mut autotune = None;
    let mut any = false;
    for (line, text) in decorators {
        let toks = tokens(text);
        let Some(Tok::Name(callee)) = toks.first().map(|t| t.kind) else { continue };
        names.push(callee.to_string());
        if !is_triton_decorator(callee) {
            continue;
        }
        any = true;
        if callee.rsplit('.').next().is_some_and(|l| l.contains("autotune")) && autotune.is_none() {
            if let Some(call) = calls(text, &toks, ANY, 1).next().filter(|c| c.callee == callee) {
                autotune = Some(read_autotune(&call, *line));
            }
        }
    }
    // `@triton.autotune` alone (no `jit`) still wraps a jit function; a lone `@heuristics` does too.
    any.then(|| TritonKernel { first_line: decorators.first().map(|d| d.0).unwrap_or(0), decorators: names, autotune })
}

fn read_autotune(call: &Call, line: u64) -> Autotune {
    let mut a = Autotune { line, configs: Vec::new(), computed: None, key: Vec::new(), key_computed: None };
    if let Some(c) = call.kwarg("configs").or_else(|| call.positional(0)) {
        match list_items(c) {
            Some(Items::List(items)) => {
                for it in items {
                    match triton_config(it) {
                        Some(cfg) => a.configs.push(cfg),
                        None => a.computed = Some(squeeze(c)),
                    }
                }
            }
            Some(Items::Comprehension { element, loops }) => {
                a.configs.extend(triton_config(element));
                a.computed = Some(squeeze(loops));
            }
            None => a.computed = Some(squeeze(c)),
        }
    }
    if let Some(k) = call.kwarg("key").or_else(|| call.positional(1)) {
        match list_items(k) {
            Some(Items::List(items)) if items.iter().all(|i| str_literal(i).is_some()) => a.key = items.iter().filter_map(|i| str_literal(i)).collect(),
            _ => a.key_computed = Some(squeeze(k)),
        }
    }
    a
}

/// `triton.Config({'BLOCK': 128}, num_warps=4)` read into its parts.
fn triton_config(expr: &str) -> Option<TritonConfig> {
    let toks = tokens(expr);
    let call = calls(expr, &toks, ANY, 1).next()?;
    if !call.callee.ends_with("Config") || toks.first()?.start != 0 {
        return None;
    }
    let mut cfg = TritonConfig { params: BTreeMap::new(), kwargs: BTreeMap::new() };
    for (i, (k, v)) in call.args.iter().enumerate() {
        match k {
            Some(k) => {
                cfg.kwargs.insert(k.to_string(), squeeze(v));
            }
            None if i == 0 => {
                let v = v.trim();
                let inner = v.strip_prefix('{').and_then(|s| s.strip_suffix('}'))?;
                for item in split_top(inner, b',') {
                    if let Some((k, v)) = split_once_top(item, b':') {
                        cfg.params.insert(str_literal(k).unwrap_or_else(|| squeeze(k)), squeeze(v));
                    }
                }
            }
            None => {}
        }
    }
    Some(cfg)
}

fn extension_build(call: &Call, line: u64) -> Option<ExtensionBuild> {
    let last = call.callee.rsplit('.').next().unwrap_or(&call.callee);
    let call_name = match last {
        "load_inline" => "load_inline",
        "load" if call.callee.ends_with("cpp_extension.load") || call.kwarg("sources").is_some() => "cpp_extension.load",
        "CUDAExtension" | "CppExtension" => last,
        _ => return None,
    };
    let name = call.kwarg("name").or_else(|| call.positional(0)).and_then(str_literal);
    let mut b = ExtensionBuild { line, call: call_name.into(), name, sources: Vec::new(), inline: Vec::new(), functions: Vec::new() };
    let strings = |e: &str| -> Vec<String> {
        match list_items(e) {
            Some(Items::List(items)) => items.iter().filter_map(|i| str_literal(i)).collect(),
            _ => str_literal(e).into_iter().collect(),
        }
    };
    if let Some(s) = call.kwarg("sources").or_else(|| if call_name == "load_inline" { None } else { call.positional(1) }) {
        b.sources = strings(s);
    }
    for k in ["cpp_sources", "cuda_sources"] {
        if let Some(v) = call.kwarg(k) {
            b.inline.push(format!("{k}={}", squeeze(v).chars().take(80).collect::<String>()));
        }
    }
    if let Some(f) = call.kwarg("functions") {
        b.functions = strings(f);
    }
    Some(b)
}

fn imports(toks: &[Token], module: Option<&str>, is_package: bool) -> Vec<String> {
    let names: Vec<&str> = toks.iter().filter_map(|t| if let Tok::Name(n) = t.kind { Some(n) } else { None }).collect();
    match toks[0].kind {
        Tok::Name("import") => {
            // `import a.b as c, d`: every name after `import` or a comma.
            let mut out = Vec::new();
            let mut take = true;
            for t in &toks[1..] {
                match t.kind {
                    Tok::Name("as") => take = false,
                    Tok::Name(n) if take => {
                        out.push(n.to_string());
                        take = false;
                    }
                    Tok::Punct(",") => take = true,
                    _ => {}
                }
            }
            out
        }
        _ => {
            // `from [.]*mod import a, b`: the module, and each name as a possible submodule.
            let mut dots = 0;
            let mut i = 1;
            while let Some(Tok::Punct(p)) = toks.get(i).map(|t| t.kind) {
                if p.chars().all(|c| c == '.') {
                    dots += p.len();
                    i += 1;
                } else {
                    break;
                }
            }
            let rel = match toks.get(i).map(|t| t.kind) {
                Some(Tok::Name("import")) => "",
                Some(Tok::Name(n)) => n,
                _ => return Vec::new(),
            };
            let base = if dots == 0 {
                rel.to_string()
            } else {
                let Some(m) = module else { return Vec::new() };
                let mut parts: Vec<&str> = m.split('.').collect();
                // `.` is the file's own package: its module minus the last part, unless it is an `__init__`.
                let up = dots - usize::from(is_package);
                if up > parts.len() {
                    return Vec::new();
                }
                parts.truncate(parts.len() - up);
                if !rel.is_empty() {
                    parts.push(rel);
                }
                parts.join(".")
            };
            let after = names.iter().position(|n| *n == "import").map(|p| &names[p + 1..]).unwrap_or(&[]);
            let mut out = vec![base.clone()];
            let mut prev_as = false;
            for n in after {
                if *n == "as" {
                    prev_as = true;
                    continue;
                }
                if !prev_as && !base.is_empty() {
                    out.push(format!("{base}.{n}"));
                }
                prev_as = false;
            }
            out.retain(|m| !m.is_empty());
            out
        }
    }
}

/// The calls `scan` reads: torch.library's, `Library`, and the extension builders.
fn interesting_call(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    matches!(
        last,
        "Library"
            | "custom_op"
            | "triton_op"
            | "define"
            | "register_kernel"
            | "register_fake"
            | "register_autograd"
            | "impl"
            | "impl_abstract"
            | "load_inline"
            | "load"
            | "CUDAExtension"
            | "CppExtension"
    )
}

const ANY: &dyn Fn(&str) -> bool = &|_| true;

/// Logical lines longer than this are read only for what starts them (a `def`, a decorator,
/// an import): real Python code has none, and tokenising one would cost memory by its length.
const MAX_LOGICAL: usize = 256 << 10;

/// Where `python` finds each installed package, by top-level import name, in one interpreter
/// run: the package's directory (a single-module package: its file). Nothing is imported
/// (`importlib.util.find_spec` of a top-level name runs no package code).
pub fn find_packages(python: &str, packages: &[String], cwd: &Path) -> Result<Vec<PathBuf>, String> {
    for p in packages {
        if p.is_empty() || !p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || p.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("package `{p}`: not a top-level import name (a dotted name would import its parents)"));
        }
    }
    // `-c` puts the working directory (the repository) first on sys.path, and `json` is not
    // loaded at startup: a repository's `json.py` would run before trust. It is dropped first.
    const PROBE: &str = "import sys\nsys.path[:] = [p for p in sys.path if p]\nimport importlib.util, json\nfor n in sys.argv[1:]:\n    s = importlib.util.find_spec(n)\n    print(json.dumps(None if s is None else {'locations': list(s.submodule_search_locations or []), 'origin': s.origin}))";
    let mut argv = vec![python.to_string(), "-c".into(), PROBE.into()];
    argv.extend(packages.iter().cloned());
    let mut req = katlas_proc::RunRequest::new(argv, cwd);
    req.timeout = Some(std::time::Duration::from_secs(30));
    let got = katlas_proc::run_captured(&req).map_err(|e| format!("python interpreter `{python}`: {e}"))?;
    if let Some(e) = &got.exit.spawn_error {
        return Err(format!("python interpreter `{python}` could not start: {e} (set [provenance] python in katlas.toml)"));
    }
    if let Some(f) = got.exit.failure() {
        let err = String::from_utf8_lossy(&got.stderr);
        return Err(format!("python interpreter `{python}` finding packages {}: {f}: {}", packages.join(", "), err.trim().lines().last().unwrap_or("")));
    }
    let answers: Vec<&[u8]> = got.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    if answers.len() != packages.len() {
        return Err(format!("python interpreter `{python}`: {} answers for {} packages", answers.len(), packages.len()));
    }
    let mut out = Vec::new();
    for (package, a) in packages.iter().zip(answers) {
        let v: serde_json::Value = serde_json::from_slice(a).map_err(|e| format!("python interpreter `{python}`: unreadable answer for `{package}`: {e}"))?;
        if v.is_null() {
            return Err(format!("package `{package}` not found by python interpreter `{python}` (is it installed there, or on PYTHONPATH?)"));
        }
        let dir = v["locations"].as_array().and_then(|l| l.first()).and_then(|l| l.as_str()).map(PathBuf::from);
        let path = dir.or_else(|| v["origin"].as_str().map(PathBuf::from)).filter(|d| d.exists());
        out.push(path.ok_or_else(|| format!("package `{package}`: python interpreter `{python}` names no source for it ({v})"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacked_decorators_spanning_lines_and_a_comprehension() {
        let src = r#"import triton
from . import utils
from ..common.chunk_o import chunk_fwd_o as f, other

def helper(x):
    """def fake_kernel(x): in a docstring is no definition"""
    return x  # def commented_kernel(


@triton.autotune(
    configs=[
        triton.Config({'B': bs}, num_warps=num_warps)  # a comment (with a bracket
        for bs in [512, 1024]
        for num_warps in NUM_WARPS
    ],
    key=['D'],
    **autotune_cache_kwargs,
)
@triton.jit(do_not_specialize=['T'])
def swiglu_fwd_kernel(
    x, y, D: tl.constexpr,
):
    pass


@triton.autotune(configs=[triton.Config({"BLOCK": 128, 'SPLIT': 2}, num_warps=4, num_stages=3), triton.Config({"BLOCK": 64}, num_warps=8)], key=KEYS)
@triton.heuristics({'HAS_BIAS': lambda args: args['b'] is not None})
@triton.jit
def k2(x):
    pass

@torch.jit.script
def not_triton(x):
    return x
"#;
        let f = scan(src, Some("fla.modules.activations"), false);
        let names: Vec<&str> = f.defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["helper", "swiglu_fwd_kernel", "k2", "not_triton"]);
        let s = f.def("swiglu_fwd_kernel").unwrap();
        assert_eq!(s.line, 20);
        let t = s.triton.as_ref().unwrap();
        assert_eq!(t.first_line, 10);
        assert_eq!(t.decorators, ["triton.autotune", "triton.jit"]);
        let a = t.autotune.as_ref().unwrap();
        assert_eq!(a.key, ["D"]);
        assert_eq!(a.configs.len(), 1);
        assert_eq!(a.configs[0].params["B"], "bs");
        assert_eq!(a.configs[0].kwargs["num_warps"], "num_warps");
        assert_eq!(a.computed.as_deref(), Some("for bs in [512, 1024] for num_warps in NUM_WARPS"));
        let k2 = f.def("k2").unwrap().triton.as_ref().unwrap();
        assert_eq!(k2.decorators, ["triton.autotune", "triton.heuristics", "triton.jit"]);
        let a = k2.autotune.as_ref().unwrap();
        assert_eq!(a.configs.len(), 2);
        assert_eq!(a.configs[0].params["BLOCK"], "128");
        assert_eq!(a.configs[0].params["SPLIT"], "2");
        assert_eq!(a.configs[0].kwargs["num_stages"], "3");
        assert_eq!(a.configs[1].kwargs["num_warps"], "8");
        assert!(a.computed.is_none());
        assert!(a.key.is_empty());
        assert_eq!(a.key_computed.as_deref(), Some("KEYS"));
        assert!(f.def("not_triton").unwrap().triton.is_none());
        assert!(f.def("helper").unwrap().triton.is_none());
        assert_eq!(
            f.imports,
            ["fla.common.chunk_o", "fla.common.chunk_o.chunk_fwd_o", "fla.common.chunk_o.other", "fla.modules", "fla.modules.utils", "triton"]
        );
    }

    #[test]
    fn custom_ops_and_extension_builds() {
        let src = r#"
import torch
from torch.utils.cpp_extension import load_inline, load

@torch.library.custom_op("mylib::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mylib.rms_norm_impl(x)

@torch.library.register_kernel("mylib::rms_norm", "cuda")
def _(x):
    pass

lib = torch.library.Library("other", "DEF")
lib.define("gelu(Tensor x) -> Tensor")
lib.impl("gelu", gelu_cuda, "CUDA")

cuda_src = """
__global__ void scale_kernel(float* x) {}
"""
ext = load_inline(name="scale_ext", cpp_sources=cpp_src, cuda_sources=[cuda_src], functions=["scale"])
ext2 = torch.utils.cpp_extension.load(name="fused", sources=["csrc/fused.cu", 'csrc/fused.cpp'])
"#;
        let f = scan(src, Some("pkg.ops"), false);
        let ops: Vec<(&str, &str, u64, Option<&str>)> = f.ops.iter().map(|o| (o.name.as_str(), o.kind.as_str(), o.line, o.function.as_deref())).collect();
        assert_eq!(
            ops,
            [
                ("mylib::rms_norm", "custom_op", 5, Some("rms_norm")),
                ("mylib::rms_norm_impl", "use", 7, None),
                ("mylib::rms_norm", "register_kernel", 9, Some("_")),
                ("other::gelu", "define", 14, None),
                ("other::gelu", "impl", 15, None),
            ]
        );
        assert_eq!(f.builds.len(), 2);
        assert_eq!(f.builds[0].call, "load_inline");
        assert_eq!(f.builds[0].name.as_deref(), Some("scale_ext"));
        assert_eq!(f.builds[0].functions, ["scale"]);
        assert_eq!(f.builds[0].inline, ["cpp_sources=cpp_src", "cuda_sources=[cuda_src]"]);
        assert_eq!(f.builds[0].line, 20);
        assert_eq!(f.builds[1].call, "cpp_extension.load");
        assert_eq!(f.builds[1].sources, ["csrc/fused.cu", "csrc/fused.cpp"]);
    }

    #[test]
    fn an_unclosed_bracket_does_not_swallow_the_file_and_odd_bytes_do_not_panic() {
        let src = "x = foo(\n\n@triton.jit\ndef k(a):\n    pass\n";
        let f = scan(src, None, false);
        assert_eq!(f.defs.len(), 1);
        assert_eq!(f.defs[0].line, 4);
        assert_eq!(f.defs[0].triton.as_ref().unwrap().first_line, 3);
        for s in ["'''", "\"", "@", "def", "def (", "from . import", "from ....x import y", "@triton.autotune(configs=[", "é@(ü", "\\", "'\\", "\"\\é\""] {
            let _ = scan(s, Some("a"), false);
        }
        // Every cut of a real-looking file (strings, escapes, multi-byte text) scans.
        let src = "@triton.autotune(configs=[triton.Config({'B': 1}, num_warps=4)], key=['n'])\n@triton.jit\ndef k(x):  # é\n    s = r'\\' + \"\\\"ü\"\n    '''doc \\''' \n    return torch.ops.a.b(load_inline(name='e', cuda_sources=s))\n";
        for cut in (0..=src.len()).filter(|c| src.is_char_boundary(*c)) {
            let _ = scan(&src[..cut], Some("m"), false);
        }
        assert_eq!(scan(src, None, false).defs[0].triton.as_ref().unwrap().autotune.as_ref().unwrap().key, ["n"]);
    }

    #[test]
    fn nested_calls_and_one_huge_logical_line_stay_linear() {
        // 1 MiB of `impl(` nesting and a 2 MiB bracket that never closes.
        let nested = format!("x = {}1{}\n@triton.jit\ndef k():\n    pass\n", "impl(".repeat(200_000), ")".repeat(200_000));
        let open = format!("y = [{}\n", "(a, ".repeat(500_000));
        let t = std::time::Instant::now();
        let f = scan(&nested, None, false);
        assert_eq!(f.defs.len(), 1);
        let _ = scan(&open, None, false);
        assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", t.elapsed());
    }

    #[test]
    fn module_names() {
        let p = Path::new("/s/liger_kernel/ops/rms_norm.py");
        assert_eq!(module_name(Path::new("/s/liger_kernel"), p, true).as_deref(), Some("liger_kernel.ops.rms_norm"));
        assert_eq!(module_name(Path::new("/s"), Path::new("/s/pkg/__init__.py"), false).as_deref(), Some("pkg"));
    }
}
