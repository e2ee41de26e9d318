//! No import circles between the top-level modules of a crate (nor between the CLI's command
//! files): a module that reaches another which reaches back cannot be read, changed or moved on
//! its own. Code under `#[cfg(test)]` may reach anywhere and is left out.

use quote::ToTokens;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit_mut::VisitMut;

/// Absolute module paths (`crate::a::b` is `[a, b]`) that a file's code names.
#[derive(Default)]
struct Refs {
    /// The module the visitor is in, from the crate root.
    here: Vec<String>,
    found: Vec<Vec<String>>,
}

impl Refs {
    fn add(&mut self, segments: &[String]) {
        let mut abs: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") => self.here.clone(),
            Some("super") => self.here.clone(),
            _ => return,
        };
        let mut rest = &segments[1..];
        if segments[0] == "super" {
            abs.pop();
            while rest.first().map(String::as_str) == Some("super") {
                abs.pop();
                rest = &rest[1..];
            }
        }
        abs.extend(rest.iter().cloned());
        self.found.push(abs);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, n.ident.to_string()),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, r.ident.to_string()),
            syn::UseTree::Glob(_) => {
                let p = prefix.clone();
                self.add(&p);
            }
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }

    fn use_leaf(&mut self, prefix: &[String], leaf: String) {
        let mut p = prefix.to_vec();
        p.push(leaf);
        self.add(&p);
    }

    /// `crate::x` written inside a macro call (`format!`, `matches!`...), which syn leaves as tokens.
    fn tokens(&mut self, ts: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = ts.into_iter().collect();
        for (i, t) in tokens.iter().enumerate() {
            match t {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id) if ["crate", "super", "self"].contains(&id.to_string().as_str()) => {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while let (Some(proc_macro2::TokenTree::Punct(a)), Some(proc_macro2::TokenTree::Punct(b)), Some(proc_macro2::TokenTree::Ident(next))) =
                        (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        path.push(next.to_string());
                        j += 3;
                    }
                    if path.len() > 1 {
                        self.add(&path);
                    }
                }
                _ => {}
            }
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string() == "test"))
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

impl VisitMut for Refs {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if !is_cfg_test(item_attrs(item)) {
            syn::visit_mut::visit_item_mut(self, item);
        }
    }
    fn visit_impl_item_mut(&mut self, item: &mut syn::ImplItem) {
        let test = match item {
            syn::ImplItem::Fn(f) => is_cfg_test(&f.attrs),
            syn::ImplItem::Const(c) => is_cfg_test(&c.attrs),
            _ => false,
        };
        if !test {
            syn::visit_mut::visit_impl_item_mut(self, item);
        }
    }
    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        self.here.push(m.ident.to_string());
        syn::visit_mut::visit_item_mod_mut(self, m);
        self.here.pop();
    }
    fn visit_item_use_mut(&mut self, u: &mut syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }
    fn visit_path_mut(&mut self, p: &mut syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit_mut::visit_path_mut(self, p);
    }
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        self.tokens(m.tokens.to_token_stream());
        syn::visit_mut::visit_macro_mut(self, m);
    }
}

/// The `.rs` files under `dir`, each with its module path from the crate root.
fn files_of(dir: &Path, module: &[String], out: &mut Vec<(PathBuf, Vec<String>)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() {
            let mut m = module.to_vec();
            m.push(name);
            files_of(&p, &m, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let mut m = module.to_vec();
            if !["mod", "lib", "main"].contains(&name.as_str()) {
                m.push(name);
            }
            out.push((p, m));
        }
    }
}

/// For each level (`""` the crate root, `"cmd"` a module whose children are looked at), the
/// edges between its child modules: `a -> {b}` where code under `a` names `b` or anything in it.
fn module_graph(src: &Path, levels: &[&[&str]]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    files_of(src, &[], &mut files);
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (path, module) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let mut file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut refs = Refs { here: module.clone(), ..Default::default() };
        refs.visit_file_mut(&mut file);
        for level in levels {
            let depth = level.len();
            if module.len() <= depth || module[..depth].iter().map(String::as_str).ne(level.iter().copied()) {
                continue;
            }
            let from = &module[depth];
            let edges = graphs.entry(level.join("::")).or_default().entry(from.clone()).or_default();
            for r in &refs.found {
                if r.len() > depth && r[..depth].iter().map(String::as_str).eq(level.iter().copied()) && &r[depth] != from {
                    edges.insert(r[depth].clone());
                }
            }
        }
    }
    // A name that is not a module at this level (a function or type of the parent) is no edge.
    for g in graphs.values_mut() {
        let modules: BTreeSet<String> = g.keys().cloned().collect();
        g.values_mut().for_each(|e| e.retain(|m| modules.contains(m)));
    }
    graphs
}

/// One circle per strongly tied group, as `a -> b -> a`.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn path_back(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str, seen: &mut BTreeSet<String>, path: &mut Vec<String>) -> bool {
        for next in g.get(from).into_iter().flatten() {
            if next == to {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if path_back(g, next, to, seen, path) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut out = Vec::new();
    let mut in_circle = BTreeSet::new();
    for start in g.keys() {
        if in_circle.contains(start) {
            continue;
        }
        let mut path = vec![start.clone()];
        if path_back(g, start, start, &mut BTreeSet::new(), &mut path) {
            in_circle.extend(path.iter().cloned());
            out.push(path.join(" -> "));
        }
    }
    out
}

fn crate_circles(src: &Path) -> Vec<String> {
    let levels: &[&[&str]] = &[&[], &["cmd"]];
    let mut out = Vec::new();
    for (level, g) in module_graph(src, levels) {
        for c in circles(&g) {
            out.push(if level.is_empty() { c } else { format!("{level}: {c}") });
        }
    }
    out
}

#[test]
fn no_crate_has_an_import_circle() {
    let crates = katlas_testkit::repo_root().join("crates");
    let mut found = Vec::new();
    let mut looked = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            looked += 1;
            found.extend(crate_circles(&src).into_iter().map(|c| format!("{}: {c}", src.display())));
        }
    }
    assert!(looked >= 20, "looked at {looked} crates");
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn circles_are_found_through_uses_paths_macros_and_super() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    write(src, "lib.rs", "mod a; mod b; mod c; mod cmd;");
    // a -> b through a grouped use, b -> a only inside a macro.
    write(src, "a.rs", "use crate::{b::{Thing}, c};\npub fn f() {}");
    write(src, "b.rs", "pub struct Thing;\nfn g() { println!(\"{}\", crate::a::f()); }");
    // c -> a only in test code: no circle.
    write(src, "c.rs", "#[cfg(test)]\nmod tests { use crate::a; }");
    // cmd/x <-> cmd/y, one way through `super`, one through a nested file.
    write(src, "cmd/mod.rs", "pub mod x; pub mod y;");
    write(src, "cmd/x.rs", "pub fn run() { super::y::run() }");
    write(src, "cmd/y/mod.rs", "mod deep;");
    write(src, "cmd/y/deep.rs", "pub fn run() { let _ = crate::cmd::x::run as fn(); }");
    let found = crate_circles(src);
    assert_eq!(found, vec!["a -> b -> a".to_string(), "cmd: x -> y -> x".to_string()], "{found:?}");

    write(src, "b.rs", "pub struct Thing;");
    write(src, "cmd/y/deep.rs", "#[cfg(test)]\npub fn run() { crate::cmd::x::run() }");
    assert!(crate_circles(src).is_empty());
}
