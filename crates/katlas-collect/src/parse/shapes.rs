//! Bytes and FLOPs of a kernel from the shapes of the CPU op that launched it (torch.profiler
//! `record_shapes=True`). Formulas are data (`data/shapes.toml`); this module reads them and
//! evaluates their small arithmetic over the op's input dimensions.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const BUILTIN: &str = include_str!("../../../../data/shapes.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeRules {
    pub schema: String,
    pub dtype_bytes: BTreeMap<String, f64>,
    pub op: Vec<OpFormula>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpFormula {
    pub name: String,
    pub ops: Vec<String>,
    #[serde(default)]
    pub dims: BTreeMap<String, String>,
    pub flops: String,
    pub bytes: String,
    #[serde(default)]
    pub m: Option<String>,
    #[serde(default)]
    pub note: String,
}

pub fn rules() -> &'static ShapeRules {
    static R: OnceLock<ShapeRules> = OnceLock::new();
    R.get_or_init(|| toml::from_str(BUILTIN).expect("data/shapes.toml"))
}

impl ShapeRules {
    /// Index of the formula for a CPU op name.
    pub fn formula_for(&self, op: &str) -> Option<usize> {
        self.op.iter().position(|f| f.ops.iter().any(|o| o == op))
    }
}

/// One input of an op as the trace records it: dimensions (a tensor list has none here)
/// and type name.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub dims: Option<Vec<f64>>,
    pub ty: String,
}

/// What shapes give for one call: bytes, FLOPs and the GEMM's row count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub bytes: f64,
    pub flops: f64,
    pub m: Option<f64>,
}

/// Evaluate formula `f` on `inputs`; `None` when an input it needs cannot be read.
pub fn cost(r: &ShapeRules, f: &OpFormula, inputs: &[Input]) -> Option<Cost> {
    // Tensor inputs are those with a known element type; others (Scalar, "") are not data.
    let tensors: Vec<(usize, &Vec<f64>, f64)> =
        inputs.iter().enumerate().filter_map(|(i, x)| Some((i, x.dims.as_ref()?, *r.dtype_bytes.get(&x.ty)?))).collect();
    let mut vars: BTreeMap<String, f64> = BTreeMap::new();
    let (mut tb, mut maxn) = (0.0, 0.0f64);
    for (i, d, size) in &tensors {
        let numel: f64 = d.iter().product();
        vars.insert(format!("numel{i}"), numel);
        vars.insert(format!("size{i}"), *size);
        tb += numel * size;
        maxn = maxn.max(numel);
    }
    vars.insert("tensor_bytes".into(), tb);
    vars.insert("max_numel".into(), maxn);
    let dim = |i: usize, j: i64| -> Option<f64> {
        let d = tensors.iter().find(|(k, _, _)| *k == i)?.1;
        let idx = if j < 0 { d.len() as i64 + j } else { j };
        d.get(usize::try_from(idx).ok()?).copied()
    };
    for (name, e) in &f.dims {
        let v = eval(e, &vars, &dim)?;
        vars.insert(name.clone(), v);
    }
    let bytes = eval(&f.bytes, &vars, &dim)?;
    let flops = eval(&f.flops, &vars, &dim)?;
    let m = match &f.m {
        Some(e) => Some(eval(e, &vars, &dim)?),
        None => None,
    };
    (bytes.is_finite() && flops.is_finite() && bytes >= 0.0).then_some(Cost { bytes, flops, m })
}

/// `+ - * /`, parentheses, numbers, variables and `inI[J]` over `vars`; `None` on an unknown
/// name, a missing dimension or a malformed expression.
pub fn eval(e: &str, vars: &BTreeMap<String, f64>, dim: &dyn Fn(usize, i64) -> Option<f64>) -> Option<f64> {
    let toks = tokens(e)?;
    let mut p = Parser { t: &toks, i: 0, vars, dim };
    let v = p.sum()?;
    (p.i == toks.len()).then_some(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Dim(usize, i64),
    Op(char),
}

fn tokens(e: &str) -> Option<Vec<Tok>> {
    let c: Vec<char> = e.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_digit() || ch == '.' {
            let s = i;
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '.') {
                i += 1;
            }
            out.push(Tok::Num(c[s..i].iter().collect::<String>().parse().ok()?));
        } else if ch.is_ascii_alphabetic() || ch == '_' {
            let s = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let name: String = c[s..i].iter().collect();
            if i < c.len() && c[i] == '[' {
                let close = c[i..].iter().position(|x| *x == ']')? + i;
                let j: i64 = c[i + 1..close].iter().collect::<String>().trim().parse().ok()?;
                let n: usize = name.strip_prefix("in")?.parse().ok()?;
                out.push(Tok::Dim(n, j));
                i = close + 1;
            } else {
                out.push(Tok::Name(name));
            }
        } else if "+-*/()".contains(ch) {
            out.push(Tok::Op(ch));
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

struct Parser<'a> {
    t: &'a [Tok],
    i: usize,
    vars: &'a BTreeMap<String, f64>,
    dim: &'a dyn Fn(usize, i64) -> Option<f64>,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<char> {
        match self.t.get(self.i) {
            Some(Tok::Op(c)) => Some(*c),
            _ => None,
        }
    }
    fn sum(&mut self) -> Option<f64> {
        let mut v = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.i += 1;
            let r = self.product()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Some(v)
    }
    fn product(&mut self) -> Option<f64> {
        let mut v = self.atom()?;
        while let Some(op @ ('*' | '/')) = self.peek_op() {
            self.i += 1;
            let r = self.atom()?;
            v = if op == '*' { v * r } else { v / r };
        }
        Some(v)
    }
    fn atom(&mut self) -> Option<f64> {
        let t = self.t.get(self.i)?.clone();
        self.i += 1;
        match t {
            Tok::Num(n) => Some(n),
            Tok::Name(n) => self.vars.get(&n).copied(),
            Tok::Dim(i, j) => (self.dim)(i, j),
            Tok::Op('(') => {
                let v = self.sum()?;
                (self.peek_op() == Some(')')).then(|| self.i += 1)?;
                Some(v)
            }
            Tok::Op('-') => Some(-self.atom()?),
            Tok::Op(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dims: &[f64], ty: &str) -> Input {
        Input { dims: Some(dims.to_vec()), ty: ty.into() }
    }

    #[test]
    fn every_shipped_formula_parses_and_names_known_variables() {
        let r = rules();
        assert_eq!(r.schema, "katlas.rules.shapes.v1");
        // Enough inputs of every rank for any formula: none may fail for a syntax or name error.
        let big = vec![t(&[2.0, 3.0, 4.0, 5.0], "float"); 4];
        for f in &r.op {
            assert!(cost(r, f, &big).is_some(), "formula {} does not evaluate", f.name);
        }
    }

    #[test]
    fn gemm_gemv_attention_and_elementwise() {
        let r = rules();
        let f = |op: &str| &r.op[r.formula_for(op).unwrap()];
        // One-token GEMV of a 2048x5632 bf16 weight: the weight dominates the bytes.
        let c = cost(r, f("aten::mm"), &[t(&[1.0, 2048.0], "c10::BFloat16"), t(&[2048.0, 5632.0], "c10::BFloat16")]).unwrap();
        assert_eq!(c.bytes, (2048.0 + 2048.0 * 5632.0 + 5632.0) * 2.0);
        assert_eq!(c.flops, 2.0 * 2048.0 * 5632.0);
        assert_eq!(c.m, Some(1.0));
        let c = cost(
            r,
            f("aten::_cudnn_attention_forward"),
            &[
                t(&[1.0, 16.0, 1.0, 128.0], "c10::BFloat16"),
                t(&[1.0, 4.0, 70.0, 128.0], "c10::BFloat16"),
                t(&[1.0, 4.0, 70.0, 128.0], "c10::BFloat16"),
                Input { dims: Some(vec![]), ty: "Scalar".into() },
            ],
        )
        .unwrap();
        assert_eq!(c.flops, 4.0 * 16.0 * 70.0 * 128.0);
        assert_eq!(c.bytes, (2.0 * 16.0 * 128.0 + 2.0 * 4.0 * 70.0 * 128.0) * 2.0);
        // Broadcast mul: both inputs read, the larger written.
        let c = cost(r, f("aten::mul"), &[t(&[1.0, 1.0, 2048.0], "c10::BFloat16"), t(&[2048.0], "c10::BFloat16")]).unwrap();
        assert_eq!(c.bytes, 3.0 * 2048.0 * 2.0);
        // A tensor list or unknown type: nothing is guessed.
        assert!(cost(r, f("aten::mm"), &[Input { dims: None, ty: "TensorList".into() }, t(&[2.0, 2.0], "float")]).is_none());
        assert!(cost(r, f("aten::mm"), &[t(&[1.0, 2.0], "c10::Weird"), t(&[2.0, 2.0], "c10::Weird")]).is_none());
    }

    #[test]
    fn expressions() {
        let vars = BTreeMap::from([("M".to_string(), 3.0)]);
        let dim = |i: usize, j: i64| (i == 0 && j == -1).then_some(7.0);
        assert_eq!(eval("2*M*(in0[-1] + 1) - 4/2", &vars, &dim), Some(46.0));
        assert_eq!(eval("M +", &vars, &dim), None);
        assert_eq!(eval("Q", &vars, &dim), None);
        assert_eq!(eval("in1[0]", &vars, &dim), None);
    }
}
