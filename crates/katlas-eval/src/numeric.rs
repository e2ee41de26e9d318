//! `katlas check-numeric`: compare two tensor dumps cell by cell and show
//! the shape of the disagreement (bad cells by row mod 16, by column, by
//! lane) so a layout bug (a swapped WMMA fragment, a wrong stride) is visible
//! as a pattern rather than a single max-error number.

use crate::error::EvalError;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl std::str::FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" | "float32" => Ok(DType::F32),
            "f16" | "float16" | "half" => Ok(DType::F16),
            "bf16" | "bfloat16" => Ok(DType::Bf16),
            _ => Err(format!("unknown dtype `{s}` (expected f32, f16 or bf16)")),
        }
    }
}

impl DType {
    fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            _ => 2,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Tensor {
    pub values: Vec<f32>,
    /// Shape from a `.npy` header, when the file had one.
    pub shape: Option<Vec<usize>>,
}

/// Read a raw little-endian dump of `dtype`, or a `.npy` file (its header
/// decides dtype and shape; only little-endian f4/f2 C-order arrays).
pub fn read(path: &Path, dtype: DType) -> Result<Tensor, EvalError> {
    let bytes = std::fs::read(path).map_err(|source| EvalError::Io { path: path.into(), source })?;
    // Past the read every failure is the file's content.
    if bytes.starts_with(b"\x93NUMPY") {
        return read_npy(path, &bytes).map_err(EvalError::Input);
    }
    decode(path, &bytes, dtype).map(|values| Tensor { values, shape: None }).map_err(EvalError::Input)
}

fn decode(path: &Path, bytes: &[u8], dtype: DType) -> Result<Vec<f32>, String> {
    let sz = dtype.size();
    if !bytes.len().is_multiple_of(sz) {
        return Err(format!("{}: {} bytes is not a whole number of {dtype:?} values", path.display(), bytes.len()));
    }
    Ok(bytes
        .chunks_exact(sz)
        .map(|c| match dtype {
            DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            DType::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f32(),
            DType::Bf16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f32(),
        })
        .collect())
}

fn read_npy(path: &Path, b: &[u8]) -> Result<Tensor, String> {
    let p = path.display();
    if b.len() < 10 {
        return Err(format!("{p}: truncated .npy header"));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10usize),
        2 | 3 => {
            if b.len() < 12 {
                return Err(format!("{p}: truncated .npy header"));
            }
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        v => return Err(format!("{p}: unsupported .npy version {v}")),
    };
    let end = start.checked_add(hlen).filter(|e| *e <= b.len()).ok_or_else(|| format!("{p}: .npy header length {hlen} runs past the file"))?;
    let header = std::str::from_utf8(&b[start..end]).map_err(|_| format!("{p}: .npy header is not text"))?;
    let field = |name: &str| -> Option<&str> {
        let i = header.find(&format!("'{name}'"))?;
        Some(header[i + name.len() + 2..].trim_start().trim_start_matches(':').trim_start())
    };
    let descr = field("descr").and_then(|s| s.strip_prefix('\'')).and_then(|s| s.split('\'').next()).ok_or_else(|| format!("{p}: .npy header has no descr"))?;
    let dtype = match descr {
        "<f4" => DType::F32,
        "<f2" => DType::F16,
        d => return Err(format!("{p}: .npy dtype `{d}` not supported (little-endian f4 or f2)")),
    };
    if field("fortran_order").is_some_and(|s| s.starts_with("True")) {
        return Err(format!("{p}: Fortran-order .npy arrays are not supported"));
    }
    let shape_txt =
        field("shape").and_then(|s| s.strip_prefix('(')).and_then(|s| s.split(')').next()).ok_or_else(|| format!("{p}: .npy header has no shape"))?;
    let shape: Vec<usize> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("{p}: .npy shape entry `{s}` is not a number")))
        .collect::<Result<_, _>>()?;
    let values = decode(path, &b[end..], dtype)?;
    let count = shape.iter().try_fold(1usize, |a, x| a.checked_mul(*x)).ok_or_else(|| format!("{p}: .npy shape overflows"))?;
    if count != values.len() {
        return Err(format!("{p}: .npy shape {shape:?} needs {count} values, file holds {}", values.len()));
    }
    Ok(Tensor { values, shape: Some(shape) })
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub rows: usize,
    pub cols: usize,
    pub cells: usize,
    pub bad: usize,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// (row, col) of the worst cell.
    pub worst: Option<(usize, usize)>,
    pub rtol: f64,
    pub atol: f64,
    /// Bad cells by row mod 16.
    pub by_row_mod16: Vec<usize>,
    /// Bad cells by column.
    pub by_col: Vec<usize>,
    /// Bad cells by lane (column mod lanes).
    pub by_lane: Vec<usize>,
    pub lanes: usize,
    /// First few bad cells: (row, col, a, b).
    pub examples: Vec<(usize, usize, f32, f32)>,
}

pub const NUMERIC_SCHEMA: &str = "katlas.numeric.v1";

/// Compare `a` (candidate) against `b` (reference): a cell is bad when
/// `|a - b| > atol + rtol * |b|`, or when exactly one of them is NaN/inf-mismatched.
pub fn compare(a: &[f32], b: &[f32], rows: usize, cols: usize, rtol: f64, atol: f64, lanes: usize) -> Result<Report, EvalError> {
    if a.len() != b.len() {
        return Err(EvalError::Input(format!("sizes differ: {} vs {} values", a.len(), b.len())));
    }
    if rows.checked_mul(cols) != Some(a.len()) {
        return Err(EvalError::Input(format!("--dims {rows},{cols} needs {} values, the files hold {}", rows.saturating_mul(cols), a.len())));
    }
    let lanes = lanes.max(1);
    let mut r = Report {
        schema: NUMERIC_SCHEMA,
        rows,
        cols,
        cells: a.len(),
        bad: 0,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        worst: None,
        rtol,
        atol,
        by_row_mod16: vec![0; 16],
        by_col: vec![0; cols],
        by_lane: vec![0; lanes.min(cols.max(1))],
        lanes,
        examples: Vec::new(),
    };
    let nl = r.by_lane.len();
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (x64, y64) = (x as f64, y as f64);
        let bad = if x.is_nan() || y.is_nan() {
            x.is_nan() != y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x != y
        } else {
            let d = (x64 - y64).abs();
            let rel = d / y64.abs().max(f64::MIN_POSITIVE);
            if d > r.max_abs_err {
                r.max_abs_err = d;
                r.worst = Some((i / cols, i % cols));
            }
            if y64 != 0.0 && rel > r.max_rel_err {
                r.max_rel_err = rel;
            }
            d > atol + rtol * y64.abs()
        };
        if bad {
            let (row, col) = (i / cols, i % cols);
            r.bad += 1;
            r.by_row_mod16[row % 16] += 1;
            r.by_col[col] += 1;
            r.by_lane[col % nl] += 1;
            if r.examples.len() < 8 {
                r.examples.push((row, col, x, y));
            }
        }
    }
    Ok(r)
}

/// One-line pattern summary: which residues / columns / lanes hold all bad cells.
pub fn pattern(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    if r.bad == 0 {
        return out;
    }
    let hot = |h: &[usize]| -> Vec<usize> { h.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, _)| i).collect() };
    let rows = hot(&r.by_row_mod16);
    if rows.len() < 16 {
        out.push(format!("bad cells only in rows ≡ {rows:?} (mod 16)"));
    }
    let lanes = hot(&r.by_lane);
    if lanes.len() < r.by_lane.len() {
        out.push(format!("bad cells only in lanes {lanes:?} (of {})", r.by_lane.len()));
    }
    let cols = hot(&r.by_col);
    if cols.len() < r.cols && cols.len() <= 16 {
        out.push(format!("bad cells only in columns {cols:?}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(shape: &str, vals: &[f32]) -> Vec<u8> {
        let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({shape}), }}");
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend((h.len() as u16).to_le_bytes());
        b.extend(h.as_bytes());
        for v in vals {
            b.extend(v.to_le_bytes());
        }
        b
    }

    #[test]
    fn layout_bug_shows_its_shape() {
        let (rows, cols) = (32, 64);
        let reference: Vec<f32> = (0..rows * cols).map(|i| (i as f32 * 0.01).sin()).collect();
        let mut cand = reference.clone();
        // Rows 8..15 of every 16-row tile, lanes 16..31 wrong: a swapped half-fragment.
        for r in 0..rows {
            for c in 0..cols {
                if r % 16 >= 8 && c % 32 >= 16 {
                    cand[r * cols + c] += 0.5;
                }
            }
        }
        let rep = compare(&cand, &reference, rows, cols, 1e-3, 1e-3, 32).unwrap();
        assert_eq!(rep.bad, 16 * 32);
        assert!(rep.by_row_mod16[..8].iter().all(|c| *c == 0));
        assert!(rep.by_row_mod16[8..].iter().all(|c| *c == 64));
        assert!(rep.by_lane[..16].iter().all(|c| *c == 0) && rep.by_lane[16..].iter().all(|c| *c > 0));
        let p = pattern(&rep);
        assert!(p[0].contains("[8, 9, 10, 11, 12, 13, 14, 15]"), "{p:?}");
        let ok = compare(&reference, &reference, rows, cols, 0.0, 0.0, 32).unwrap();
        assert_eq!(ok.bad, 0);
    }

    #[test]
    fn an_unreadable_dump_keeps_its_os_error() {
        // The kind, not its text, is what tells a refused read (the environment) from a wrong path.
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("gone.bin");
        let e = read(&missing, DType::F32).unwrap_err();
        assert!(matches!(&e, EvalError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", missing.display())), "{e}");
        // Past the read, what the file holds is the input's fault.
        assert!(matches!(compare(&[1.0], &[1.0, 2.0], 1, 1, 0.0, 0.0, 32), Err(EvalError::Input(_))));
    }

    #[test]
    fn formats() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.npy");
        std::fs::write(&p, npy("2, 3", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).unwrap();
        let t = read(&p, DType::F32).unwrap();
        assert_eq!(t.shape, Some(vec![2, 3]));
        assert_eq!(t.values[5], 6.0);
        let bad = d.path().join("b.npy");
        std::fs::write(&bad, npy("2, 4", &[1.0; 6])).unwrap();
        assert!(read(&bad, DType::F32).unwrap_err().to_string().contains("needs 8 values"));
        let raw = d.path().join("c.bin");
        std::fs::write(&raw, [half::f16::from_f32(1.5).to_le_bytes(), half::f16::from_f32(-2.0).to_le_bytes()].concat()).unwrap();
        assert_eq!(read(&raw, DType::F16).unwrap().values, vec![1.5, -2.0]);
        std::fs::write(&raw, half::bf16::from_f32(3.0).to_le_bytes()).unwrap();
        assert_eq!(read(&raw, DType::Bf16).unwrap().values, vec![3.0]);
        std::fs::write(&raw, [0u8; 3]).unwrap();
        assert!(read(&raw, DType::F32).unwrap_err().to_string().contains("not a whole number"));
        let trunc = d.path().join("t.npy");
        std::fs::write(&trunc, b"\x93NUMPY\x01\x00\xff\xff{").unwrap();
        assert!(read(&trunc, DType::F32).unwrap_err().to_string().contains("runs past"));
        assert!(compare(&[1.0], &[1.0, 2.0], 1, 1, 0.0, 0.0, 32).is_err());
        assert!(compare(&[1.0, 2.0], &[1.0, 2.0], 3, 1, 0.0, 0.0, 32).is_err());
        let nan = compare(&[f32::NAN, 1.0], &[1.0, 1.0], 1, 2, 0.0, 0.0, 32).unwrap();
        assert_eq!(nan.bad, 1);
    }
}
