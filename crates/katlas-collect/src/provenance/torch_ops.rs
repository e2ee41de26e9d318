//! PyTorch custom operators: where an op `ns::name` is defined (`torch.library.custom_op`,
//! `Library.define`, C++ `TORCH_LIBRARY` `m.def`), where its kernels are registered
//! (`register_kernel`, `impl`, `TORCH_LIBRARY_IMPL` `m.impl`) and where it is called
//! (`torch.ops.ns.name`). A profiler records such an op by its qualified name.

use super::pysyntax::{str_literal, Call};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// One place an op is defined, registered or used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomOp {
    /// `ns::name` (overload dropped).
    pub name: String,
    /// `custom_op`, `define`, `register_kernel`, `register_fake`, `impl`, or `use`.
    pub kind: String,
    pub line: u64,
    /// The Python function a decorator makes the op (or its kernel) of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

impl CustomOp {
    /// Defines the op (as opposed to registering a kernel for it or calling it).
    pub fn defines(&self) -> bool {
        matches!(self.kind.as_str(), "custom_op" | "triton_op" | "define")
    }
}

/// `ns::name` of an op name or schema (`ns::name.overload(Tensor x) -> Tensor`); a bare name
/// takes the file's `Library` namespace.
fn qualified(s: &str, ns: Option<&str>) -> Option<String> {
    let s = s.split('(').next().unwrap_or("").trim();
    let (n, name) = match s.split_once("::") {
        Some((n, name)) => (n, name),
        None => (ns?, s),
    };
    let name = name.split('.').next().unwrap_or("");
    let ok = |x: &str| !x.is_empty() && x.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ok(n) && ok(name)).then(|| format!("{n}::{name}"))
}

/// The op a Python call defines or registers, if it is one of torch.library's.
pub(crate) fn op_from_call(call: &Call, line: u64, library_ns: Option<&str>) -> Option<CustomOp> {
    let (obj, last) = match call.callee.rsplit_once('.') {
        Some((o, l)) => (Some(o), l),
        None => (None, call.callee.as_str()),
    };
    let kind = match last {
        "custom_op" | "triton_op" | "define" | "register_kernel" | "register_fake" | "register_autograd" | "impl" | "impl_abstract" => last,
        _ => return None,
    };
    // `torch.library.X` / bare `X` (imported from torch.library) take a qualified name; a method
    // of a `Library` object (`lib.define("name(…)")`) takes the Library's namespace.
    let from_library = matches!(obj, None | Some("torch.library" | "library"));
    let ns = if from_library { None } else { library_ns };
    if !from_library && library_ns.is_none() {
        return None;
    }
    let name = call.positional(0).or_else(|| call.kwarg("name")).or_else(|| call.kwarg("qualname")).and_then(str_literal)?;
    Some(CustomOp { name: qualified(&name, ns)?, kind: kind.into(), line, function: None })
}

/// Ops a C++ source declares in `TORCH_LIBRARY(ns, m)` / `TORCH_LIBRARY_FRAGMENT` (`m.def`)
/// and `TORCH_LIBRARY_IMPL(ns, CUDA, m)` (`m.impl`) blocks.
pub(crate) fn cpp_ops(text: &str) -> Vec<CustomOp> {
    static MACRO: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"\bTORCH_LIBRARY(?:_FRAGMENT|_IMPL)?\s*\(\s*(\w+)\s*,\s*(?:(\w+)\s*,\s*)?(\w+)\s*\)\s*\{").unwrap());
    static CALL: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r#"\b(\w+)\s*\.\s*(def|impl)\s*\(\s*(?:TORCH_SELECTIVE_SCHEMA\s*\(\s*)?"([^"\n]*)""#).unwrap());
    if !text.contains("TORCH_LIBRARY") {
        return Vec::new();
    }
    let newlines: Vec<usize> = memchr::memchr_iter(b'\n', text.as_bytes()).collect();
    let line_at = |pos: usize| newlines.partition_point(|n| *n < pos) as u64 + 1;
    let mut out = Vec::new();
    // Each block is walked to its closing brace: a bounded number of blocks keeps a file of
    // unclosed macros linear.
    for m in MACRO.captures_iter(text).take(64) {
        let (ns, var) = (&m[1], &m[3]);
        let open = m.get(0).map(|g| g.end()).unwrap_or(0);
        // The block: to the brace that closes it (strings in op schemas hold no braces).
        let mut depth = 1;
        let mut close = text.len();
        for (i, b) in text[open..].bytes().enumerate() {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        for c in CALL.captures_iter(&text[open..close]) {
            if &c[1] != var {
                continue;
            }
            let Some(name) = qualified(&c[3], Some(ns)) else { continue };
            let kind = if &c[2] == "def" { "define" } else { "impl" };
            out.push(CustomOp { name, kind: kind.into(), line: line_at(open + c.get(0).map(|g| g.start()).unwrap_or(0)), function: None });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_library_blocks() {
        let src = "#include <torch/library.h>\nTORCH_LIBRARY(mylib, m) {\n  m.def(\"rms_norm(Tensor x) -> Tensor\");\n  m.def(TORCH_SELECTIVE_SCHEMA(\"other::gelu.out(Tensor x) -> Tensor\"));\n}\n\nTORCH_LIBRARY_IMPL(mylib, CUDA, m) {\n  m.impl(\"rms_norm\", &rms_norm_cuda);\n  n.impl(\"not_this\", &f);\n}\n";
        let ops: Vec<(String, String, u64)> = cpp_ops(src).into_iter().map(|o| (o.name, o.kind, o.line)).collect();
        assert_eq!(
            ops,
            [("mylib::rms_norm".into(), "define".into(), 3), ("other::gelu".into(), "define".into(), 4), ("mylib::rms_norm".into(), "impl".into(), 8)]
        );
        assert!(cpp_ops("TORCH_LIBRARY(a, m) { m.def(\"x\"").len() == 1);
    }
}
