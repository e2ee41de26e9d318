//! What the report reads from the query index (docs/corpus.md, "Query index"): which rows to
//! fit, the trends of the chosen row's metrics, the evals with their samples, the ledger.

use katlas_model::ledger::Goal;
use katlas_store::trend::{self, By, Trend};
use rusqlite::{Connection, OptionalExtension};

type Res<T> = Result<T, String>;

fn sql(e: rusqlite::Error) -> String {
    format!("query index: {e}")
}

/// The row the fit view shows, and why it was picked.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub id: String,
    pub how: String,
}

/// `--row` (an id or unique prefix), else the newest ok row with kernels, else the newest row.
pub fn choose_row(conn: &Connection, wanted: Option<&str>) -> Res<Option<Chosen>> {
    if let Some(p) = wanted {
        let mut st = conn.prepare("SELECT id FROM rows WHERE substr(id, 1, length(?1)) = ?1 LIMIT 2").map_err(sql)?;
        let ids: Vec<String> = st.query_map([p], |r| r.get(0)).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
        return match ids.as_slice() {
            [] => Err(format!("--row `{p}`: no row of the corpus has this id or prefix")),
            [one] => Ok(Some(Chosen { id: one.clone(), how: "--row".into() })),
            _ => Err(format!("--row `{p}`: the prefix matches several rows: give more characters")),
        };
    }
    let pick = |q: &str| conn.query_row(q, [], |r| r.get::<_, String>(0)).optional().map_err(sql);
    if let Some(id) = pick("SELECT id FROM rows WHERE status = 'ok' AND kernel_count > 0 ORDER BY captured_at DESC, id LIMIT 1")? {
        return Ok(Some(Chosen { id, how: "the newest ok row with kernels".into() }));
    }
    Ok(pick("SELECT id FROM rows ORDER BY captured_at DESC, id LIMIT 1")?.map(|id| Chosen { id, how: "the newest row (no row has kernels)".into() }))
}

/// One profiled row per device (product, else arch): the newest ok row with kernels of each.
pub fn rows_per_device(conn: &Connection) -> Res<Vec<(String, String)>> {
    let mut st = conn
        .prepare(
            "SELECT dev, id FROM (SELECT COALESCE(product, arch, 'unknown device') AS dev, id, \
             ROW_NUMBER() OVER (PARTITION BY COALESCE(product, arch, 'unknown device') ORDER BY captured_at DESC, id) AS k \
             FROM rows WHERE status = 'ok' AND kernel_count > 0) WHERE k = 1 ORDER BY dev",
        )
        .map_err(sql)?;
    let v = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    Ok(v)
}

/// Workload and phase of a row, and the names of its metrics.
pub fn row_metrics(conn: &Connection, id: &str) -> Res<(String, String, Vec<String>)> {
    let (w, p) = conn.query_row("SELECT workload, phase FROM rows WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?;
    let mut st = conn.prepare("SELECT name FROM metrics WHERE row_id = ?1 ORDER BY name").map_err(sql)?;
    let names = st.query_map([id], |r| r.get(0)).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    Ok((w, p, names))
}

/// The trend by commit of each metric over measured ok rows of the workload and phase.
pub fn trends(conn: &Connection, workload: &str, phase: &str, metrics: &[String]) -> Res<Vec<Trend>> {
    let mut out = Vec::new();
    for m in metrics {
        let samples = trend::load(conn, m, Some(workload), Some(phase), By::Commit).map_err(sql)?;
        if !samples.is_empty() {
            out.push(trend::analyse(m, By::Commit, &samples));
        }
    }
    Ok(out)
}

/// One side of an eval: its summary and its measured sample values.
#[derive(Debug, Clone)]
pub struct Side {
    pub label: String,
    pub git_ref: Option<String>,
    pub n: Option<i64>,
    pub median: Option<f64>,
    /// Interval of the median as the eval computed it.
    pub ci: Option<[f64; 2]>,
    pub values: Vec<f64>,
    /// Measured runs that failed (no value).
    pub failed: usize,
}

/// What an eval or a ledger entry judged: the metric, its goal, the verdict and the effect.
#[derive(Debug, Clone)]
pub struct Judged {
    pub metric: Option<String>,
    pub goal: Option<String>,
    pub verdict: Option<String>,
    pub relative_change: Option<f64>,
    /// The interval of `relative_change` (the metric's raw direction) at `ci_level`.
    pub ci: Option<[f64; 2]>,
    pub ci_level: Option<f64>,
    /// `relative_change` signed so + = better for the goal.
    pub gain: Option<f64>,
}

/// The columns `Judged` reads, in its order, in both the evals and the ledger tables.
const JUDGED: &str = "metric, goal, verdict, relative_change, ci_lo, ci_hi, ci_level, gain";

impl Judged {
    /// From the row's columns `at..at + 8`, selected as `JUDGED` names them.
    fn read(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Self> {
        Ok(Judged {
            metric: r.get(at)?,
            goal: r.get(at + 1)?,
            verdict: r.get(at + 2)?,
            relative_change: r.get(at + 3)?,
            ci: pair(r.get(at + 4)?, r.get(at + 5)?),
            ci_level: r.get(at + 6)?,
            gain: r.get(at + 7)?,
        })
    }

    /// The verdict's interval as a gain interval (+ = better) under the goal the index
    /// recorded, and the level it was taken at; `None` without all three.
    pub fn gain_interval(&self) -> Option<([f64; 2], f64)> {
        let goal: Goal = self.goal.as_deref()?.parse().ok()?;
        Some((goal.gain_interval(self.ci?), self.ci_level?))
    }
}

#[derive(Debug, Clone)]
pub struct EvalDist {
    pub eval_id: String,
    pub created_at: Option<String>,
    pub task_id: Option<String>,
    pub judged: Judged,
    pub sides: Vec<Side>,
}

fn pair(lo: Option<f64>, hi: Option<f64>) -> Option<[f64; 2]> {
    Some([lo?, hi?])
}

/// The newest `limit` evals (and how many there are), each with its sides and samples. Samples
/// name their side by letter (A = the baseline, side 0; B the first candidate …).
pub fn evals(conn: &Connection, limit: usize) -> Res<(Vec<EvalDist>, usize)> {
    let (mut evals, total) =
        newest(conn, "evals", &format!("SELECT eval_id, created_at, task_id, {JUDGED} FROM evals ORDER BY created_at DESC, eval_id LIMIT ?1"), limit, |r| {
            Ok(EvalDist { eval_id: r.get(0)?, created_at: r.get(1)?, task_id: r.get(2)?, judged: Judged::read(r, 3)?, sides: Vec::new() })
        })?;
    let mut sides = conn.prepare("SELECT idx, label, git_ref, n, median, ci_lo, ci_hi FROM eval_sides WHERE eval_id = ?1 ORDER BY idx").map_err(sql)?;
    let mut samples = conn.prepare("SELECT side, value FROM samples WHERE eval_id = ?1 AND pass = 'measured' ORDER BY seq").map_err(sql)?;
    for e in &mut evals {
        let mut by_letter: std::collections::BTreeMap<String, (Vec<f64>, usize)> = Default::default();
        let rows = samples.query_map([&e.eval_id], |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, Option<f64>>(1)?))).map_err(sql)?;
        for s in rows {
            let (side, value) = s.map_err(sql)?;
            let slot = by_letter.entry(side.unwrap_or_default()).or_default();
            match value {
                Some(v) if v.is_finite() => slot.0.push(v),
                _ => slot.1 += 1,
            }
        }
        let rows = sides
            .query_map([&e.eval_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get::<_, Option<f64>>(5)?,
                    r.get::<_, Option<f64>>(6)?,
                ))
            })
            .map_err(sql)?;
        for s in rows {
            let (idx, label, git_ref, n, median, lo, hi) = s.map_err(sql)?;
            let letter = u8::try_from(idx).ok().filter(|i| *i < 26).map(|i| char::from(b'A' + i).to_string()).unwrap_or_default();
            let (values, failed) = by_letter.remove(&letter).unwrap_or_default();
            e.sides.push(Side { label: label.unwrap_or(letter), git_ref, n, median, ci: pair(lo, hi), values, failed });
        }
    }
    Ok((evals, total))
}

#[derive(Debug, Clone)]
pub struct LedgerRow {
    pub recorded_at: Option<String>,
    pub lever: Option<String>,
    pub kernel: Option<String>,
    pub arch: Option<String>,
    pub judged: Judged,
    pub disposition: Option<String>,
    pub baseline: Option<String>,
    pub candidate: Option<String>,
    pub cross_host: bool,
}

/// The newest `limit` ledger entries, and how many there are.
pub fn ledger(conn: &Connection, limit: usize) -> Res<(Vec<LedgerRow>, usize)> {
    newest(
        conn,
        "ledger",
        &format!(
            "SELECT recorded_at, lever, kernel, arch, {JUDGED}, disposition, baseline_label, candidate_label, cross_host FROM ledger \
             ORDER BY recorded_at DESC, id LIMIT ?1"
        ),
        limit,
        |r| {
            Ok(LedgerRow {
                recorded_at: r.get(0)?,
                lever: r.get(1)?,
                kernel: r.get(2)?,
                arch: r.get(3)?,
                judged: Judged::read(r, 4)?,
                disposition: r.get(12)?,
                baseline: r.get(13)?,
                candidate: r.get(14)?,
                cross_host: r.get::<_, Option<i64>>(15)?.unwrap_or(0) != 0,
            })
        },
    )
}

/// Rows, and bad lines the index holds (the page says both).
pub fn counts(conn: &Connection) -> Res<(usize, usize)> {
    Ok((count(conn, "rows")?, count(conn, "errors")?))
}

fn count(conn: &Connection, table: &str) -> Res<usize> {
    let n: i64 = conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)).map_err(sql)?;
    Ok(n as usize)
}

/// The first `limit` records `select` (ordered newest first, `LIMIT ?1`) reads, and how many
/// `table` holds: the page shows a window and says how much it left out.
fn newest<T>(
    conn: &Connection,
    table: &str,
    select: &str,
    limit: usize,
    record: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Res<(Vec<T>, usize)> {
    let total = count(conn, table)?;
    let mut st = conn.prepare(select).map_err(sql)?;
    let records = st.query_map([limit as i64], record).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
    Ok((records, total))
}
