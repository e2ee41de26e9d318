//! Which tensor arguments a compiled Triton kernel reads and writes, read from its TTIR.
//!
//! A Triton cache entry keeps the kernel's TTIR beside its metadata (`<name>.source`): the
//! function after constexpr specialization, so a branch on `USE_INITIAL_STATE=False` and the
//! loads under it are already gone and an argument passed as `None` is not a parameter. Every
//! `tt.load`/`tt.store`/atomic/descriptor access names the pointer it goes through; following
//! the pointer arithmetic (`tt.addptr`, `tt.splat`, block pointers, loop-carried values, calls
//! into helper functions) back to the kernel's parameters says, per parameter, whether the
//! kernel reads it, writes it or both. An access outside any loop also bounds what one program
//! can touch (the tile its type names), which with the launch's grid bounds the bytes of a
//! kernel that reads only a slice of a large tensor.

use std::collections::HashMap;

/// What one program of the kernel can touch through a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// At most this many bytes per program (every access outside loops, tiles summed).
    PerProgram(u64),
    /// An access in a loop (or of an unknown tile): only the tensor's size bounds it.
    Whole,
}

impl Reach {
    /// The larger of two reaches (one access of either size).
    fn max(self, other: Reach) -> Reach {
        match (self, other) {
            (Reach::PerProgram(a), Reach::PerProgram(b)) => Reach::PerProgram(a.max(b)),
            _ => Reach::Whole,
        }
    }

    fn plus(self, other: Reach) -> Reach {
        match (self, other) {
            (Reach::PerProgram(a), Reach::PerProgram(b)) => Reach::PerProgram(a.saturating_add(b)),
            _ => Reach::Whole,
        }
    }

    /// Bytes of a `tensor_bytes` tensor that `programs` programs can touch.
    pub fn bytes(self, tensor_bytes: u64, programs: Option<u64>) -> u64 {
        match (self, programs) {
            (Reach::PerProgram(p), Some(n)) => tensor_bytes.min(p.saturating_mul(n)),
            _ => tensor_bytes,
        }
    }
}

fn add(slot: &mut Option<Reach>, r: Reach) {
    *slot = Some(slot.map_or(r, |s| s.plus(r)));
}

/// A kernel parameter and what the kernel does through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamAccess {
    pub name: String,
    /// A pointer (or tensor descriptor) parameter.
    pub pointer: bool,
    pub read: Option<Reach>,
    pub write: Option<Reach>,
}

/// The public kernel's parameters, in order, with their accesses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelAccess {
    pub params: Vec<ParamAccess>,
}

impl KernelAccess {
    pub fn param(&self, name: &str) -> Option<&ParamAccess> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Folds in another specialization of the same parameters: what either touches, the larger tile.
    pub fn merge(&mut self, other: &KernelAccess) {
        let wider = |a: Option<Reach>, b: Option<Reach>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        for p in &mut self.params {
            if let Some(o) = other.param(&p.name) {
                p.read = wider(p.read, o.read);
                p.write = wider(p.write, o.write);
            }
        }
    }

    /// Names of the pointer parameters.
    pub fn pointers(&self) -> impl Iterator<Item = &str> {
        self.params.iter().filter(|p| p.pointer).map(|p| p.name.as_str())
    }
}

/// TTIR larger than this is not one kernel's.
pub const MAX_TTIR_BYTES: usize = 32 << 20;
/// Parameters tracked per function (a bit each).
const MAX_PARAMS: usize = 128;
/// Helper-call depth followed; Triton has no recursion, this only bounds hostile input.
const MAX_CALL_DEPTH: u32 = 8;

struct Func<'a> {
    params: Vec<Param>,
    body: Vec<&'a str>,
}

/// The accesses of the public function `kernel` (or the only public one) in TTIR text.
pub fn analyze(text: &str, kernel: &str) -> Result<KernelAccess, String> {
    if text.len() > MAX_TTIR_BYTES {
        return Err(format!("TTIR of {} bytes is larger than {MAX_TTIR_BYTES}", text.len()));
    }
    let funcs = functions(text);
    let public: Vec<&String> = funcs.iter().filter(|(_, (public, _))| *public).map(|(n, _)| n).collect();
    let name = if funcs.get(kernel).is_some_and(|f| f.0) {
        kernel.to_string()
    } else if public.len() == 1 {
        public[0].clone()
    } else {
        return Err(format!("no public function `{kernel}` in the TTIR"));
    };
    let by_name: HashMap<&str, &Func> = funcs.iter().map(|(n, (_, f))| (n.as_str(), f)).collect();
    let f = by_name[name.as_str()];
    if f.params.len() > MAX_PARAMS {
        return Err(format!("`{name}` has {} parameters, more than {MAX_PARAMS}", f.params.len()));
    }
    let mut memo = HashMap::new();
    let summary = summarize(&name, &by_name, &mut memo, 0)?;
    Ok(KernelAccess { params: f.params.iter().zip(summary).map(|((n, p), (read, write))| ParamAccess { name: n.clone(), pointer: *p, read, write }).collect() })
}

type Summary = Vec<(Option<Reach>, Option<Reach>)>;

/// `tt.func` bodies by name: (public, function).
fn functions(text: &str) -> HashMap<String, (bool, Func<'_>)> {
    let mut out: HashMap<String, (bool, Func)> = HashMap::new();
    let mut cur: Option<(String, bool, Func)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("tt.func ") {
            if let Some((n, p, f)) = cur.take() {
                out.insert(n, (p, f));
            }
            cur = header(t).map(|(n, p, params)| (n, p, Func { params, body: Vec::new() }));
        } else if let Some((_, _, f)) = cur.as_mut() {
            if !t.starts_with('#') {
                f.body.push(strip_loc(t));
            }
        }
    }
    if let Some((n, p, f)) = cur {
        out.insert(n, (p, f));
    }
    out
}

/// A parameter's name and whether it is a pointer (or tensor descriptor).
type Param = (String, bool);

/// `tt.func public @name(%a: type loc(..), ...)`: the name, whether public, the parameters.
fn header(t: &str) -> Option<(String, bool, Vec<Param>)> {
    let public = t.starts_with("tt.func public ");
    let at = t.find('@')?;
    let rest = &t[at + 1..];
    let (name, rest) = if let Some(q) = rest.strip_prefix('"') {
        let end = q.find('"')?;
        (q[..end].to_string(), &q[end + 1..])
    } else {
        let end = rest.find('(')?;
        (rest[..end].to_string(), &rest[end..])
    };
    let open = rest.find('(')?;
    // Parameters up to the matching parenthesis (types and locs nest their own).
    let mut depth = 0i32;
    let mut end = rest.len();
    for (i, c) in rest[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = open + i;
                    break;
                }
            }
            _ => {}
        }
    }
    let args = &rest[open + 1..end.max(open + 1)];
    let mut params = Vec::new();
    for part in split_top(args) {
        let part = part.trim();
        let Some(p) = part.strip_prefix('%') else { continue };
        let Some(colon) = p.find(':') else { continue };
        let ty = p[colon + 1..].trim_start();
        params.push((p[..colon].trim().to_string(), ty.starts_with("!tt.ptr") || ty.starts_with("!tt.tensordesc")));
    }
    Some((name, public, params))
}

/// Splits at commas outside `<>`, `()`, `{}` and `[]`.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start, mut quoted) = (0i32, 0usize, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '<' | '(' | '{' | '[' if !quoted => depth += 1,
            '>' | ')' | '}' | ']' if !quoted => depth -= 1,
            ',' if depth == 0 && !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A line without its trailing ` loc(...)`.
fn strip_loc(t: &str) -> &str {
    match t.rfind(" loc(") {
        Some(i) if t.ends_with(')') => &t[..i],
        _ => t,
    }
}

/// SSA names (`%x`, `%x#2`, `%arg3`) in a piece of a line.
fn values(s: &str) -> impl Iterator<Item = &str> {
    s.match_indices('%').filter_map(move |(i, _)| {
        let rest = &s[i + 1..];
        let n = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == '$' || c == '.')).unwrap_or(rest.len());
        (n > 0).then(|| &s[i..i + 1 + n])
    })
}

/// A region opened by a line ending in `{`: its results and, for loops, the carried values.
struct Frame {
    is_loop: bool,
    /// The op's result name (`%r` of `%r:3 = scf.for`), and how many results.
    result: Option<(String, usize)>,
    /// Loop-carried block arguments, in order.
    carried: Vec<String>,
}

/// Per-parameter (read, write) reach of function `name`, whose parameters are the taint sources.
fn summarize(name: &str, funcs: &HashMap<&str, &Func>, memo: &mut HashMap<String, Summary>, depth: u32) -> Result<Summary, String> {
    if let Some(s) = memo.get(name) {
        return Ok(s.clone());
    }
    if depth > MAX_CALL_DEPTH {
        return Err(format!("calls nested deeper than {MAX_CALL_DEPTH} at `{name}`"));
    }
    let f = funcs.get(name).ok_or_else(|| format!("no function `{name}` in the TTIR"))?;
    let n = f.params.len().min(MAX_PARAMS);
    let mut taint: HashMap<String, u128> = HashMap::new();
    for (i, (p, _)) in f.params.iter().take(n).enumerate() {
        taint.insert(format!("%{p}"), 1u128 << i);
    }
    // Loop-carried values flow backwards through `scf.yield`: a few passes reach the fixpoint
    // (each pass can only add bits).
    let mut out: Summary = vec![(None, None); f.params.len()];
    for _pass in 0..4 {
        let before: usize = taint.values().map(|b| b.count_ones() as usize).sum();
        out = vec![(None, None); f.params.len()];
        walk(f, funcs, memo, depth, &mut taint, &mut out)?;
        let after: usize = taint.values().map(|b| b.count_ones() as usize).sum();
        if after == before {
            break;
        }
    }
    memo.insert(name.to_string(), out.clone());
    Ok(out)
}

fn taint_of(taint: &HashMap<String, u128>, v: &str) -> u128 {
    if let Some(b) = taint.get(v) {
        return *b;
    }
    // `%r#2` of a multi-result op that was not resolved per result: the op's union.
    v.split_once('#').and_then(|(base, _)| taint.get(base)).copied().unwrap_or(0)
}

fn walk(
    f: &Func,
    funcs: &HashMap<&str, &Func>,
    memo: &mut HashMap<String, Summary>,
    depth: u32,
    taint: &mut HashMap<String, u128>,
    out: &mut Summary,
) -> Result<(), String> {
    let mut frames: Vec<Frame> = Vec::new();
    let mark = |bits: u128, reach: Reach, write: bool, out: &mut Summary| {
        for (i, slot) in out.iter_mut().enumerate().take(MAX_PARAMS) {
            if bits & (1u128 << i) != 0 {
                add(if write { &mut slot.1 } else { &mut slot.0 }, reach);
            }
        }
    };
    for line in &f.body {
        let t = line.trim();
        if t.starts_with('}') {
            let closed = frames.pop();
            if t.ends_with('{') {
                // `} else {` / `} do {`: the same op's next region.
                if let Some(fr) = closed {
                    frames.push(fr);
                }
            }
            continue;
        }
        let in_loop = frames.iter().any(|fr| fr.is_loop);
        let (defs, rhs) = match t.split_once(" = ") {
            Some((l, r)) if l.starts_with('%') => (l, r),
            _ => ("", t),
        };
        let op = rhs.split_whitespace().next().unwrap_or("");
        let first_value = || values(rhs).next().unwrap_or("");
        let tile = || tile_bytes(rhs).filter(|_| !in_loop).map_or(Reach::Whole, Reach::PerProgram);
        match op {
            "tt.load" => mark(taint_of(taint, first_value()), tile(), false, out),
            "tt.store" => mark(taint_of(taint, first_value()), tile(), true, out),
            "tt.atomic_rmw" | "tt.atomic_cas" => {
                let b = taint_of(taint, first_value());
                let r = tile();
                mark(b, r, false, out);
                mark(b, r, true, out);
            }
            o if o.contains("descriptor_load") || o.contains("descriptor_gather") => {
                let r = descriptor_tile(rhs).filter(|_| !in_loop).map_or(Reach::Whole, Reach::PerProgram);
                mark(taint_of(taint, first_value()), r, false, out)
            }
            o if o.contains("descriptor_store") || o.contains("descriptor_scatter") || o.contains("descriptor_reduce") => {
                let r = descriptor_tile(rhs).filter(|_| !in_loop).map_or(Reach::Whole, Reach::PerProgram);
                let b = taint_of(taint, first_value());
                mark(b, r, true, out);
                if o.contains("reduce") {
                    mark(b, r, false, out);
                }
            }
            "tt.call" => {
                let callee = rhs.split_once('@').map(|(_, r)| r).unwrap_or("");
                let (callee, args) = if let Some(q) = callee.strip_prefix('"') {
                    let end = q.find('"').unwrap_or(q.len());
                    (&q[..end], q.get(end + 1..).unwrap_or(""))
                } else {
                    let end = callee.find('(').unwrap_or(callee.len());
                    (&callee[..end], &callee[end..])
                };
                let args_end = args.find(')').unwrap_or(args.len());
                let arg_values: Vec<&str> = values(&args[..args_end]).collect();
                let inner = summarize(callee, funcs, memo, depth + 1)?;
                let mut all = 0u128;
                for (i, v) in arg_values.iter().enumerate() {
                    let b = taint_of(taint, v);
                    all |= b;
                    if let Some((r, w)) = inner.get(i) {
                        let lift = |x: Reach| if in_loop { Reach::Whole } else { x };
                        if let Some(r) = r {
                            mark(b, lift(*r), false, out);
                        }
                        if let Some(w) = w {
                            mark(b, lift(*w), true, out);
                        }
                    }
                }
                define(defs, all, taint);
            }
            "scf.yield" => {
                let ys: Vec<u128> = values(rhs).map(|v| taint_of(taint, v)).collect();
                if let Some(fr) = frames.last() {
                    for (i, b) in ys.iter().enumerate() {
                        if let Some(c) = fr.carried.get(i) {
                            *taint.entry(c.clone()).or_default() |= b;
                        }
                        if let Some((r, count)) = &fr.result {
                            let key = if *count > 1 { format!("{r}#{i}") } else { r.clone() };
                            *taint.entry(key).or_default() |= b;
                        }
                    }
                }
            }
            _ => {
                // Carried values: `iter_args(%a = %init, ...)` (for) or `(%a = %init, ...)` (while).
                let mut carried = Vec::new();
                if op == "scf.for" || op == "scf.while" {
                    let open =
                        rhs.find("iter_args(").map(|i| i + "iter_args(".len()).or_else(|| (op == "scf.while").then(|| rhs.find('(').map(|i| i + 1)).flatten());
                    if let Some(open) = open {
                        let close = rhs[open..].find(')').map_or(rhs.len(), |c| open + c);
                        for pair in split_top(&rhs[open..close]) {
                            if let Some((a, b)) = pair.split_once('=') {
                                let (a, b) = (a.trim(), b.trim());
                                let bits = taint_of(taint, b);
                                *taint.entry(a.to_string()).or_default() |= bits;
                                carried.push(a.to_string());
                            }
                        }
                    }
                    for (i, c) in carried.iter().enumerate() {
                        let bits = taint_of(taint, c);
                        let (r, count) = result_of(defs);
                        if let Some(r) = r {
                            let key = if count > 1 { format!("{r}#{i}") } else { r.to_string() };
                            *taint.entry(key).or_default() |= bits;
                        }
                    }
                } else if !defs.is_empty() && op != "scf.if" {
                    let bits = values(rhs).fold(0u128, |acc, v| acc | taint_of(taint, v));
                    define(defs, bits, taint);
                }
                if t.ends_with('{') {
                    let (r, count) = result_of(defs);
                    frames.push(Frame { is_loop: op == "scf.for" || op == "scf.while", result: r.map(|r| (r.to_string(), count)), carried });
                }
            }
        }
        // A `^bb0(%a: ..)` block of a while's `do` region: its arguments carry what the loop carries.
        if t.starts_with("^bb") {
            let bits = frames.last().map_or(0, |fr| fr.carried.iter().fold(0u128, |acc, c| acc | taint_of(taint, c)));
            for v in values(t) {
                *taint.entry(v.to_string()).or_default() |= bits;
            }
        }
    }
    Ok(())
}

/// The result name and count of `%r:3` / `%r` / `%a, %b`.
fn result_of(defs: &str) -> (Option<&str>, usize) {
    let d = defs.trim();
    if d.is_empty() {
        return (None, 0);
    }
    match d.split_once(':') {
        Some((r, n)) => (Some(r.trim()), n.trim().parse().unwrap_or(1)),
        None => (d.split(',').next().map(str::trim), 1),
    }
}

fn define(defs: &str, bits: u128, taint: &mut HashMap<String, u128>) {
    if bits == 0 {
        return;
    }
    for d in defs.split(',') {
        let name = d.trim().split(':').next().unwrap_or("").trim();
        if name.starts_with('%') {
            *taint.entry(name.to_string()).or_default() |= bits;
        }
    }
}

/// Bytes of the tile a `tt.load`/`tt.store`/atomic moves, from the pointer type after ` : `.
fn tile_bytes(rhs: &str) -> Option<u64> {
    let ty = rhs.rsplit_once(" : ")?.1.trim().trim_start_matches('(');
    // `tensor<4x256x!tt.ptr<bf16>>`, `!tt.ptr<tensor<64x64xbf16>>` (a block pointer), `!tt.ptr<f32>`.
    if let Some(inner) = ty.strip_prefix("tensor<") {
        let (dims, elem) = shape(inner)?;
        let elem = elem.strip_prefix("!tt.ptr<")?;
        Some(dims.saturating_mul(elem_bytes(elem)?))
    } else if let Some(inner) = ty.strip_prefix("!tt.ptr<tensor<") {
        let (dims, elem) = shape(inner)?;
        Some(dims.saturating_mul(elem_bytes(elem)?))
    } else if let Some(elem) = ty.strip_prefix("!tt.ptr<") {
        elem_bytes(elem)
    } else {
        None
    }
}

/// Bytes of a descriptor access's block: `!tt.tensordesc<tensor<64x64xbf16>>`.
fn descriptor_tile(rhs: &str) -> Option<u64> {
    let i = rhs.find("tensordesc<tensor<")? + "tensordesc<tensor<".len();
    let (dims, elem) = shape(&rhs[i..])?;
    Some(dims.saturating_mul(elem_bytes(elem)?))
}

/// `4x256x!tt.ptr<bf16>>...` → (1024, "!tt.ptr<bf16>>...").
fn shape(s: &str) -> Option<(u64, &str)> {
    let mut n: u64 = 1;
    let mut rest = s;
    loop {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 || !rest[digits..].starts_with('x') {
            return Some((n, rest));
        }
        n = n.saturating_mul(rest[..digits].parse().ok()?);
        rest = &rest[digits + 1..];
    }
}

/// Bytes of an MLIR element type at the start of `s`.
fn elem_bytes(s: &str) -> Option<u64> {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    let t = &s[..end];
    Some(match t {
        "bf16" | "f16" | "i16" => 2,
        "f32" | "i32" | "tf32" => 4,
        "f64" | "i64" => 8,
        "i1" | "i8" => 1,
        _ if t.starts_with("f8") || t.starts_with("f6") || t.starts_with("f4") => 1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = r#"module {
  tt.func public @k(%x: !tt.ptr<bf16> {tt.divisibility = 16 : i32} loc("x"(#loc)), %y: !tt.ptr<bf16> loc("y"(#loc)), %h: !tt.ptr<f32> loc("h"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %0 = tt.get_program_id x : i32 loc(#loc1)
    %p = tt.addptr %x, %0 : !tt.ptr<bf16>, i32 loc(#loc2)
    %ps = tt.splat %p : !tt.ptr<bf16> -> tensor<4x256x!tt.ptr<bf16>> loc(#loc3)
    %v = tt.load %ps : tensor<4x256x!tt.ptr<bf16>> loc(#loc4)
    %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%ph = %h, %acc = %z) -> (!tt.ptr<f32>, f32)  : i32 {
      %a = tt.load %ph : !tt.ptr<f32> loc(#loc5)
      %ph2 = tt.addptr %ph, %i : !tt.ptr<f32>, i32 loc(#loc6)
      scf.yield %ph2, %a : !tt.ptr<f32>, f32 loc(#loc7)
    } loc(#loc8)
    %q = tt.splat %y : !tt.ptr<bf16> -> tensor<4x256x!tt.ptr<bf16>> loc(#loc9)
    tt.call @helper(%q, %v) : (tensor<4x256x!tt.ptr<bf16>>, tensor<4x256xbf16>) -> () loc(#loc10)
    tt.return loc(#loc11)
  } loc(#loc)
  tt.func private @helper(%d: tensor<4x256x!tt.ptr<bf16>> loc("d"(#loc)), %v: tensor<4x256xbf16> loc("v"(#loc))) attributes {noinline = false} {
    tt.store %d, %v : tensor<4x256x!tt.ptr<bf16>> loc(#loc12)
    tt.return loc(#loc13)
  } loc(#loc)
}"#;

    #[test]
    fn reads_writes_and_tiles_follow_pointers_through_loops_and_calls() {
        let a = analyze(KERNEL, "k").unwrap();
        let names: Vec<&str> = a.pointers().collect();
        assert_eq!(names, ["x", "y", "h"]);
        let x = a.param("x").unwrap();
        assert_eq!((x.read, x.write), (Some(Reach::PerProgram(4 * 256 * 2)), None));
        let y = a.param("y").unwrap();
        assert_eq!((y.read, y.write), (None, Some(Reach::PerProgram(4 * 256 * 2))));
        // Loaded inside the loop through a loop-carried pointer: only the tensor bounds it.
        let h = a.param("h").unwrap();
        assert_eq!((h.read, h.write), (Some(Reach::Whole), None));
        let n = a.param("n").unwrap();
        assert!(!n.pointer && n.read.is_none() && n.write.is_none());
    }

    #[test]
    fn a_slice_reader_is_bounded_by_its_grid() {
        assert_eq!(Reach::PerProgram(2048).bytes(371_000, Some(8)), 16_384);
        assert_eq!(Reach::PerProgram(2048).bytes(1000, Some(8)), 1000);
        assert_eq!(Reach::PerProgram(2048).bytes(371_000, None), 371_000);
        assert_eq!(Reach::Whole.bytes(371_000, Some(8)), 371_000);
    }

    #[test]
    fn hostile_text_is_refused_or_read_without_panic() {
        for text in [
            "",
            "tt.func public @",
            "tt.func public @k(",
            "tt.func public @\"k",
            "  tt.func public @k(%a: !tt.ptr<\n  %x = tt.load %",
            "}}}}\n}",
            "tt.func public @k() {\n %a:99999999999999999999 = scf.for iter_args(%b = %c",
        ] {
            let _ = analyze(text, "k");
        }
        // A call cycle ends at the depth limit instead of overflowing the stack.
        let cyc = "tt.func public @k(%a: !tt.ptr<f32>) {\n tt.call @k(%a) : (!tt.ptr<f32>) -> ()\n}";
        assert!(analyze(cyc, "k").is_err());
    }
}
