//! `katlas corpus compare A B` and `katlas corpus pareto X Y`: two sets of rows side by side,
//! and the variants that no other variant beats on both of two metrics.
//!
//! A side is a row id (or unique prefix) or a selector `column=value[,column=value…]` over the
//! `rows` table (`commit_short=e038111,host=box-a`, `variant=HIPFIRE_KV_MODE=asym3`: the value
//! runs to the next comma). Identity rules apply: rows from different hosts, GPUs or binaries
//! are compared but flagged, and sides of different workload, phase, shape or arch are refused
//! as not comparable.

use katlas_stats::{median, welch_log_ci};
use rusqlite::Connection;

const SELECTABLE: &[&str] = &[
    "id",
    "workload",
    "workload_kind",
    "phase",
    "shape_bucket",
    "pass",
    "arch",
    "quant",
    "status",
    "host",
    "product",
    "commit_sha",
    "commit_short",
    "branch",
    "day",
    "variant",
    "binary_md5",
    "source",
];

/// The ids of the measured, ok rows a side names.
pub fn select(conn: &Connection, side: &str) -> Result<Vec<String>, String> {
    let mut clauses = Vec::new();
    let mut params: Vec<String> = Vec::new();
    if !side.contains('=') {
        clauses.push("id LIKE ?1 || '%'".to_string());
        params.push(side.to_string());
    } else {
        let mut rest = side;
        while !rest.is_empty() {
            let (col, after) = rest.split_once('=').ok_or_else(|| format!("`{side}`: expected column=value"))?;
            let col = col.trim();
            if !SELECTABLE.contains(&col) {
                return Err(format!("`{side}`: unknown column `{col}` (one of {})", SELECTABLE.join(", ")));
            }
            // The value runs to the next `,column=`; a variant value holds `=` itself.
            let mut end = after.len();
            for (i, _) in after.match_indices(',') {
                if after[i + 1..].split_once('=').is_some_and(|(c, _)| SELECTABLE.contains(&c.trim())) {
                    end = i;
                    break;
                }
            }
            params.push(after[..end].to_string());
            clauses.push(format!("{col} = ?{}", params.len()));
            rest = after.get(end + 1..).unwrap_or("");
        }
    }
    let sql = format!("SELECT id FROM rows WHERE status = 'ok' AND pass = 'measured' AND {} ORDER BY captured_at, id", clauses.join(" AND "));
    let mut st = conn.prepare(&sql).map_err(|e| e.to_string())?;
    let ids: Vec<String> = st
        .query_map(rusqlite::params_from_iter(params.iter()), |r| r.get(0))
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if ids.is_empty() {
        return Err(format!("`{side}`: no measured ok rows match"));
    }
    Ok(ids)
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MetricDelta {
    pub metric: String,
    pub unit: Option<String>,
    pub n_a: usize,
    pub n_b: usize,
    pub median_a: f64,
    pub median_b: f64,
    /// median(B) / median(A) − 1.
    pub relative_change: f64,
    /// 95% Welch interval of the change of means on log values (n ≥ 2 a side).
    pub ci: Option<[f64; 2]>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelDelta {
    pub name: String,
    /// Mean total_us per row.
    pub total_us_a: Option<f64>,
    pub total_us_b: Option<f64>,
    pub relative_change: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub rows_a: usize,
    pub rows_b: usize,
    /// Identity differences that make the comparison cross-host or cross-build (flagged).
    pub warnings: Vec<String>,
    pub metrics: Vec<MetricDelta>,
    pub kernels: Vec<KernelDelta>,
}

fn distinct(conn: &Connection, col: &str, ids: &[String]) -> rusqlite::Result<Vec<String>> {
    let ph: Vec<String> = (1..=ids.len()).map(|i| format!("?{i}")).collect();
    let sql = format!("SELECT DISTINCT COALESCE({col}, '?') FROM rows WHERE id IN ({}) ORDER BY 1", ph.join(", "));
    let mut st = conn.prepare(&sql)?;
    let v = st.query_map(rusqlite::params_from_iter(ids.iter()), |r| r.get(0))?.collect();
    v
}

fn values(conn: &Connection, ids: &[String]) -> rusqlite::Result<Vec<(String, Option<String>, f64)>> {
    let ph: Vec<String> = (1..=ids.len()).map(|i| format!("?{i}")).collect();
    let sql = format!("SELECT name, unit, value FROM metrics WHERE value IS NOT NULL AND row_id IN ({}) ORDER BY name", ph.join(", "));
    let mut st = conn.prepare(&sql)?;
    let v = st.query_map(rusqlite::params_from_iter(ids.iter()), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect();
    v
}

fn kernel_means(conn: &Connection, ids: &[String]) -> rusqlite::Result<std::collections::BTreeMap<String, f64>> {
    let ph: Vec<String> = (1..=ids.len()).map(|i| format!("?{i}")).collect();
    let sql = format!("SELECT name, SUM(total_us) FROM kernels WHERE row_id IN ({}) GROUP BY name", ph.join(", "));
    let mut st = conn.prepare(&sql)?;
    let n = ids.len() as f64;
    let v = st.query_map(rusqlite::params_from_iter(ids.iter()), |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)? / n)))?.collect();
    v
}

pub fn compare(conn: &Connection, a: &str, b: &str) -> Result<Comparison, String> {
    let ia = select(conn, a)?;
    let ib = select(conn, b)?;
    let e = |e: rusqlite::Error| e.to_string();
    // Each side's distinct values of the column, as one shown string.
    let warnings = katlas_model::comparable::judge(|col| {
        Ok::<_, String>((distinct(conn, col, &ia).map_err(e)?.join(", "), distinct(conn, col, &ib).map_err(e)?.join(", ")))
    })?;
    let (va, vb) = (values(conn, &ia).map_err(e)?, values(conn, &ib).map_err(e)?);
    let mut names: Vec<&String> = va.iter().map(|x| &x.0).filter(|n| vb.iter().any(|y| &y.0 == *n)).collect();
    names.dedup();
    let mut metrics = Vec::new();
    for name in names {
        let xa: Vec<f64> = va.iter().filter(|x| &x.0 == name).map(|x| x.2).collect();
        let xb: Vec<f64> = vb.iter().filter(|x| &x.0 == name).map(|x| x.2).collect();
        let ci = welch_log_ci(&xa, &xb, 0.95);
        let (ma, mb) = (median(&xa), median(&xb));
        metrics.push(MetricDelta {
            metric: name.clone(),
            unit: va.iter().find(|x| &x.0 == name).and_then(|x| x.1.clone()),
            n_a: xa.len(),
            n_b: xb.len(),
            median_a: ma,
            median_b: mb,
            relative_change: if ma != 0.0 { mb / ma - 1.0 } else { f64::NAN },
            ci,
        });
    }
    let (ka, kb) = (kernel_means(conn, &ia).map_err(e)?, kernel_means(conn, &ib).map_err(e)?);
    let mut kernels: Vec<KernelDelta> = ka
        .keys()
        .chain(kb.keys().filter(|k| !ka.contains_key(*k)))
        .map(|n| {
            let (x, y) = (ka.get(n).copied(), kb.get(n).copied());
            KernelDelta { name: n.clone(), total_us_a: x, total_us_b: y, relative_change: x.zip(y).filter(|(x, _)| *x > 0.0).map(|(x, y)| y / x - 1.0) }
        })
        .collect();
    kernels
        .sort_by(|p, q| q.total_us_a.unwrap_or(0.0).max(q.total_us_b.unwrap_or(0.0)).total_cmp(&p.total_us_a.unwrap_or(0.0).max(p.total_us_b.unwrap_or(0.0))));
    Ok(Comparison { a: a.to_string(), b: b.to_string(), rows_a: ia.len(), rows_b: ib.len(), warnings, metrics, kernels })
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ParetoPoint {
    /// The variant (`K=V …`), else the commit, else `default`.
    pub variant: String,
    pub rows: usize,
    pub x: f64,
    pub y: f64,
    /// No other variant is at least as good on both metrics and better on one.
    pub front: bool,
}

/// A variant's rows and its samples of the two metrics.
type VariantSamples = (std::collections::BTreeSet<String>, Vec<f64>, Vec<f64>);

/// Variants' medians of two metrics; `maximize_x`/`maximize_y` give each metric's direction.
pub fn pareto(conn: &Connection, x: &str, y: &str, maximize: (bool, bool), workload: Option<&str>, phase: Option<&str>) -> Result<Vec<ParetoPoint>, String> {
    let sql = "SELECT COALESCE(r.variant, r.commit_short, 'default'), r.id, m.name, m.value FROM rows r JOIN metrics m ON m.row_id = r.id \
               WHERE r.status = 'ok' AND r.pass = 'measured' AND m.name IN (?1, ?2) AND m.value IS NOT NULL \
               AND (?3 IS NULL OR r.workload = ?3) AND (?4 IS NULL OR r.phase = ?4)";
    let mut st = conn.prepare(sql).map_err(|e| e.to_string())?;
    let mut by: std::collections::BTreeMap<String, VariantSamples> = Default::default();
    let rows = st
        .query_map(rusqlite::params![x, y, workload, phase], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, f64>(3)?))
        })
        .map_err(|e| e.to_string())?;
    for r in rows {
        let (v, id, name, value) = r.map_err(|e| e.to_string())?;
        let e = by.entry(v).or_default();
        e.0.insert(id);
        if name == x {
            e.1.push(value);
        }
        if name == y {
            e.2.push(value);
        }
    }
    let mut pts: Vec<ParetoPoint> = by
        .into_iter()
        .filter(|(_, (_, xs, ys))| !xs.is_empty() && !ys.is_empty())
        .map(|(v, (ids, xs, ys))| ParetoPoint { variant: v, rows: ids.len(), x: median(&xs), y: median(&ys), front: false })
        .collect();
    let better = |a: f64, b: f64, max: bool| if max { a > b } else { a < b };
    let geq = |a: f64, b: f64, max: bool| if max { a >= b } else { a <= b };
    for i in 0..pts.len() {
        let p = &pts[i];
        let dominated = pts
            .iter()
            .enumerate()
            .any(|(j, q)| j != i && geq(q.x, p.x, maximize.0) && geq(q.y, p.y, maximize.1) && (better(q.x, p.x, maximize.0) || better(q.y, p.y, maximize.1)));
        pts[i].front = !dominated;
    }
    pts.sort_by(|a, b| b.front.cmp(&a.front).then(if maximize.0 { b.x.total_cmp(&a.x) } else { a.x.total_cmp(&b.x) }));
    Ok(pts)
}
