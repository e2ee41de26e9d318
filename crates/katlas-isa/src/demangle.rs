//! Itanium C++ demangling through `cpp_demangle`; names that are not mangled give None.
//! Recursion limits guard against crafted names that would blow the stack.

pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let parse = cpp_demangle::ParseOptions::default().recursion_limit(96);
    let sym = cpp_demangle::Symbol::new_with_options(name, &parse).ok()?;
    let opts = cpp_demangle::DemangleOptions::new().recursion_limit(96);
    sym.demangle(&opts).ok()
}
