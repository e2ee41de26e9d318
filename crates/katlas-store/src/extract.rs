//! Records → table rows: the one mapping from katlas's record types to the index columns,
//! used by the SQLite index and the PostgreSQL store alike.

use crate::lean::LeanRow;
use crate::schema::{self, TableDef};
use katlas_isa::manifest::IsaManifest;
use katlas_model::ledger::{EvalResult, EvalSample, LedgerEntry};
use katlas_model::row::Status;

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl Val {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Val::Text(s.to_string())
    }
}
impl From<String> for Val {
    fn from(s: String) -> Self {
        Val::Text(s)
    }
}
impl From<&String> for Val {
    fn from(s: &String) -> Self {
        Val::Text(s.clone())
    }
}
impl From<f64> for Val {
    fn from(v: f64) -> Self {
        // NaN is no number a query can compare; it is stored as NULL.
        if v.is_nan() {
            Val::Null
        } else {
            Val::Real(v)
        }
    }
}
impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}
impl From<u64> for Val {
    fn from(v: u64) -> Self {
        Val::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Val {
    fn from(v: u32) -> Self {
        Val::Int(v.into())
    }
}
impl From<i32> for Val {
    fn from(v: i32) -> Self {
        Val::Int(v.into())
    }
}
impl From<bool> for Val {
    fn from(v: bool) -> Self {
        Val::Int(v.into())
    }
}
impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map(Into::into).unwrap_or(Val::Null)
    }
}
impl<T: Into<Val> + Clone> From<&Option<T>> for Val {
    fn from(v: &Option<T>) -> Self {
        v.clone().map(Into::into).unwrap_or(Val::Null)
    }
}

/// Table rows to insert, grouped by table.
#[derive(Debug, Default)]
pub struct Batch {
    pub tables: Vec<(&'static TableDef, Vec<Vec<Val>>)>,
}

impl Batch {
    pub fn push(&mut self, t: &'static TableDef, row: Vec<Val>) {
        debug_assert_eq!(row.len(), t.columns.len(), "{}", t.name);
        match self.tables.iter_mut().find(|(d, _)| std::ptr::eq(*d, t)) {
            Some((_, rows)) => rows.push(row),
            None => self.tables.push((t, vec![row])),
        }
    }
}

/// A row line's cells: its `rows` record, then its metrics and kernels (inserted only with a
/// new row).
#[derive(Debug)]
pub struct RowCells {
    pub id: String,
    pub row: Vec<Val>,
    pub children: Vec<(&'static TableDef, Vec<Val>)>,
}

fn cow(s: &Option<std::borrow::Cow<'_, str>>) -> Val {
    s.as_deref().map(Val::from).unwrap_or(Val::Null)
}

pub fn row_cells(r: &LeanRow, source: &str, line: u64) -> RowCells {
    let id = r.id.to_string();
    let src = &r.identity.source;
    let product = r.identity.devices.iter().find_map(|d| d.product.as_deref());
    let arch = r.arch.as_deref().or_else(|| r.identity.devices.iter().find_map(|d| d.arch.as_deref()));
    let short = src.commit_short.as_deref().map(str::to_string).or_else(|| src.commit.as_ref().map(|c| c.chars().take(12).collect()));
    let total: f64 = r.kernels.iter().map(|k| k.total_us).sum();
    let row = vec![
        Val::Text(id.clone()),
        source.into(),
        line.into(),
        r.captured_at.as_ref().into(),
        r.captured_at.get(..10).unwrap_or(&r.captured_at).into(),
        r.workload.as_ref().into(),
        cow(&r.workload_kind),
        r.phase.as_ref().into(),
        cow(&r.shape_bucket),
        r.run_index.into(),
        r.pass.as_deref().unwrap_or("measured").into(),
        arch.into(),
        cow(&r.quant),
        match r.status {
            Status::Ok => "ok",
            Status::Error => "error",
        }
        .into(),
        cow(&r.identity.host.hostname),
        product.into(),
        cow(&src.commit),
        short.into(),
        cow(&src.branch),
        src.dirty.into(),
        r.identity.binary.as_ref().and_then(|b| b.md5.as_deref()).into(),
        r.variant_key().into(),
        (r.kernels.len() as u64).into(),
        total.into(),
    ];
    let mut children = Vec::with_capacity(r.metrics.len() + r.kernels.len());
    for (name, m) in &r.metrics {
        children.push((&schema::METRICS, vec![Val::Text(id.clone()), name.as_ref().into(), m.value.into(), cow(&m.unit)]));
    }
    for (i, k) in r.kernels.iter().enumerate() {
        let op = k.op.as_ref();
        children.push((
            &schema::KERNELS,
            vec![
                Val::Text(id.clone()),
                (i as u64).into(),
                k.name.as_ref().into(),
                cow(&k.demangled),
                k.calls.into(),
                k.total_us.into(),
                k.avg_us.into(),
                k.share_pct.into(),
                k.bytes.into(),
                k.flops.into(),
                k.achieved_gbps.into(),
                op.map(|o| o.family.as_ref()).into(),
                op.map(|o| o.role.as_ref()).into(),
                k.registers.into(),
                k.shared_bytes.into(),
            ],
        ));
    }
    RowCells { id, row, children }
}

pub fn ledger_cells(e: &LedgerEntry, source: &str, line: u64) -> Vec<Val> {
    let eff = e.effect.as_ref();
    let side = |s: &katlas_model::ledger::EvalSide| {
        (s.label.clone(), s.summary.median, s.git_ref.clone().or_else(|| s.identity.source.commit.clone()), s.identity.host.hostname.clone())
    };
    let (bl, bm, bc, bh) = side(&e.baseline);
    let (cl, cm, cc, ch) = side(&e.candidate);
    vec![
        (&e.id).into(),
        source.into(),
        line.into(),
        (&e.recorded_at).into(),
        (&e.task_id).into(),
        (&e.eval_id).into(),
        (&e.lever).into(),
        (&e.key.kernel).into(),
        (&e.key.arch).into(),
        (&e.key.phase).into(),
        (&e.key.shape).into(),
        (&e.key.quant).into(),
        (&e.metric).into(),
        e.goal.as_str().into(),
        e.verdict.as_str().into(),
        e.disposition.to_string().into(),
        eff.map(|x| x.relative_change).into(),
        eff.map(|x| x.ci[0]).into(),
        eff.map(|x| x.ci[1]).into(),
        eff.map(|x| x.ci_level).into(),
        eff.map(|x| x.gain).into(),
        eff.and_then(|x| x.p_value).into(),
        e.noise_threshold.into(),
        bl.into(),
        bm.into(),
        bc.into(),
        bh.into(),
        cl.into(),
        cm.into(),
        cc.into(),
        ch.into(),
        e.cross_host.into(),
    ]
}

pub fn eval_result(r: &EvalResult, source: &str, batch: &mut Batch) {
    let eff = r.effects.first();
    batch.push(
        &schema::EVALS,
        vec![
            (&r.eval_id).into(),
            source.into(),
            (&r.task_id).into(),
            (&r.created_at).into(),
            (&r.metric).into(),
            r.goal.as_str().into(),
            r.verdict.as_str().into(),
            r.noise_threshold.into(),
            eff.map(|x| x.relative_change).into(),
            eff.map(|x| x.ci[0]).into(),
            eff.map(|x| x.ci[1]).into(),
            eff.map(|x| x.ci_level).into(),
            eff.map(|x| x.gain).into(),
            (&r.ledger_id).into(),
        ],
    );
    for (i, s) in r.sides.iter().enumerate() {
        let sm = &s.summary;
        batch.push(
            &schema::EVAL_SIDES,
            vec![
                (&r.eval_id).into(),
                (i as u64).into(),
                source.into(),
                (&s.label).into(),
                (&s.git_ref).into(),
                (&s.identity.host.hostname).into(),
                sm.n.into(),
                sm.median.into(),
                sm.mean.into(),
                sm.mad.into(),
                sm.cv.into(),
                sm.ci.map(|c| c[0]).into(),
                sm.ci.map(|c| c[1]).into(),
            ],
        );
    }
}

pub fn sample_cells(s: &EvalSample, source: &str, line: u64) -> Vec<Val> {
    vec![
        (&s.eval_id).into(),
        s.seq.into(),
        source.into(),
        line.into(),
        (&s.side).into(),
        s.block.into(),
        (&s.pass).into(),
        (&s.metric).into(),
        s.value.into(),
        (&s.started_at).into(),
        s.wall_s.into(),
        s.exit_code.into(),
        (&s.error).into(),
        s.throttled.into(),
    ]
}

/// `md5`: of the manifest document's bytes (hosts may hold different manifests at one path).
pub fn isa_manifest(m: &IsaManifest, source: &str, md5: &str, batch: &mut Batch) {
    for (oi, o) in m.objects.iter().enumerate() {
        batch.push(
            &schema::ISA_OBJECTS,
            vec![
                source.into(),
                md5.into(),
                (oi as u64).into(),
                (&o.path).into(),
                (&o.chain_text).into(),
                (&o.md5).into(),
                serde_json::to_value(o.vendor).ok().and_then(|v| v.as_str().map(str::to_string)).into(),
                (&o.format).into(),
                (&o.target).into(),
                (&o.arch).into(),
                (o.kernels.len() as u64).into(),
                o.mix_status.as_ref().map(ToString::to_string).into(),
            ],
        );
        for (ki, k) in o.kernels.iter().enumerate() {
            let r = &k.resources;
            batch.push(
                &schema::ISA_KERNELS,
                vec![
                    source.into(),
                    md5.into(),
                    (oi as u64).into(),
                    (ki as u64).into(),
                    (&o.md5).into(),
                    (&o.arch).into(),
                    (&k.name).into(),
                    (&k.symbol).into(),
                    (&k.demangled).into(),
                    r.vgpr.into(),
                    r.sgpr.into(),
                    r.agpr.into(),
                    r.vgpr_spill.into(),
                    r.sgpr_spill.into(),
                    r.lds_bytes.into(),
                    r.scratch_bytes.into(),
                    r.wave_size.into(),
                    r.max_workgroup_size.into(),
                ],
            );
        }
    }
}
