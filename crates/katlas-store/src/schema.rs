//! The tables and views of the query index, shared by SQLite (`.katlas/index.sqlite`) and the
//! PostgreSQL team store: one DDL, so `katlas query` and `katlas query --store` run the same SQL.
//! docs/corpus.md documents every column.

/// Column types, spelled so both engines accept them (SQLite maps them to its affinities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Text,
    Int,
    Real,
}

impl Ty {
    pub fn sql(self) -> &'static str {
        match self {
            Ty::Text => "TEXT",
            Ty::Int => "BIGINT",
            Ty::Real => "DOUBLE PRECISION",
        }
    }
}

#[derive(Debug)]
pub struct TableDef {
    pub name: &'static str,
    pub columns: &'static [(&'static str, Ty)],
    /// The record id: unique, the conflict target of idempotent inserts.
    pub key: &'static [&'static str],
    /// Further lookup indexes (column lists).
    pub lookups: &'static [&'static [&'static str]],
}

impl TableDef {
    pub fn column_names(&self) -> Vec<&'static str> {
        self.columns.iter().map(|c| c.0).collect()
    }
    /// `INSERT … ON CONFLICT (key) DO NOTHING`: idempotent by record id.
    pub fn insert_sql(&self, placeholder: impl Fn(usize) -> String) -> String {
        format!("{} ON CONFLICT ({}) DO NOTHING", self.plain_insert_sql(placeholder), self.key.join(", "))
    }
    /// A bare `INSERT`, for bulk loads into a table whose unique index comes afterwards.
    pub fn plain_insert_sql(&self, placeholder: impl Fn(usize) -> String) -> String {
        let cols = self.column_names().join(", ");
        let ph: Vec<String> = (1..=self.columns.len()).map(placeholder).collect();
        format!("INSERT INTO {} ({cols}) VALUES ({})", self.name, ph.join(", "))
    }
}

use Ty::*;

pub const ROWS: TableDef = TableDef {
    name: "rows",
    columns: &[
        ("id", Text),
        ("source", Text),
        ("line", Int),
        ("captured_at", Text),
        ("day", Text),
        ("workload", Text),
        ("workload_kind", Text),
        ("phase", Text),
        ("shape_bucket", Text),
        ("run_index", Int),
        ("pass", Text),
        ("arch", Text),
        ("quant", Text),
        ("status", Text),
        ("host", Text),
        ("product", Text),
        ("commit_sha", Text),
        ("commit_short", Text),
        ("branch", Text),
        ("dirty", Int),
        ("binary_md5", Text),
        ("variant", Text),
        ("kernel_count", Int),
        ("kernel_total_us", Real),
    ],
    key: &["id"],
    lookups: &[&["source"], &["workload", "phase"]],
};

pub const METRICS: TableDef = TableDef {
    name: "metrics",
    columns: &[("row_id", Text), ("name", Text), ("value", Real), ("unit", Text)],
    key: &["row_id", "name"],
    lookups: &[&["name"]],
};

pub const KERNELS: TableDef = TableDef {
    name: "kernels",
    columns: &[
        ("row_id", Text),
        ("idx", Int),
        ("name", Text),
        ("demangled", Text),
        ("calls", Int),
        ("total_us", Real),
        ("avg_us", Real),
        ("share_pct", Real),
        ("bytes", Real),
        ("flops", Real),
        ("achieved_gbps", Real),
        ("family", Text),
        ("role", Text),
        ("registers", Int),
        ("shared_bytes", Int),
    ],
    key: &["row_id", "idx"],
    lookups: &[&["name"]],
};

pub const LEDGER: TableDef = TableDef {
    name: "ledger",
    columns: &[
        ("id", Text),
        ("source", Text),
        ("line", Int),
        ("recorded_at", Text),
        ("task_id", Text),
        ("eval_id", Text),
        ("lever", Text),
        ("kernel", Text),
        ("arch", Text),
        ("phase", Text),
        ("shape", Text),
        ("quant", Text),
        ("metric", Text),
        ("goal", Text),
        ("verdict", Text),
        ("disposition", Text),
        ("relative_change", Real),
        ("ci_lo", Real),
        ("ci_hi", Real),
        ("ci_level", Real),
        ("gain", Real),
        ("p_value", Real),
        ("noise_threshold", Real),
        ("baseline_label", Text),
        ("baseline_median", Real),
        ("baseline_commit", Text),
        ("baseline_host", Text),
        ("candidate_label", Text),
        ("candidate_median", Real),
        ("candidate_commit", Text),
        ("candidate_host", Text),
        ("cross_host", Int),
    ],
    key: &["id"],
    lookups: &[&["source"]],
};

pub const EVALS: TableDef = TableDef {
    name: "evals",
    columns: &[
        ("eval_id", Text),
        ("source", Text),
        ("task_id", Text),
        ("created_at", Text),
        ("metric", Text),
        ("goal", Text),
        ("verdict", Text),
        ("noise_threshold", Real),
        ("relative_change", Real),
        ("ci_lo", Real),
        ("ci_hi", Real),
        ("ci_level", Real),
        ("gain", Real),
        ("ledger_id", Text),
    ],
    key: &["eval_id"],
    lookups: &[&["source"]],
};

pub const EVAL_SIDES: TableDef = TableDef {
    name: "eval_sides",
    columns: &[
        ("eval_id", Text),
        ("idx", Int),
        ("source", Text),
        ("label", Text),
        ("git_ref", Text),
        ("host", Text),
        ("n", Int),
        ("median", Real),
        ("mean", Real),
        ("mad", Real),
        ("cv", Real),
        ("ci_lo", Real),
        ("ci_hi", Real),
    ],
    key: &["eval_id", "idx"],
    lookups: &[&["source"]],
};

pub const SAMPLES: TableDef = TableDef {
    name: "samples",
    columns: &[
        ("eval_id", Text),
        ("seq", Int),
        ("source", Text),
        ("line", Int),
        ("side", Text),
        ("block", Int),
        ("pass", Text),
        ("metric", Text),
        ("value", Real),
        ("started_at", Text),
        ("wall_s", Real),
        ("exit_code", Int),
        ("error", Text),
        ("throttled", Int),
    ],
    key: &["eval_id", "seq"],
    lookups: &[&["source"]],
};

pub const ISA_OBJECTS: TableDef = TableDef {
    name: "isa_objects",
    columns: &[
        ("manifest", Text),
        ("manifest_md5", Text),
        ("idx", Int),
        ("path", Text),
        ("chain", Text),
        ("md5", Text),
        ("vendor", Text),
        ("format", Text),
        ("target", Text),
        ("arch", Text),
        ("kernel_count", Int),
        ("mix_status", Text),
    ],
    key: &["manifest", "manifest_md5", "idx"],
    lookups: &[&["md5"]],
};

pub const ISA_KERNELS: TableDef = TableDef {
    name: "isa_kernels",
    columns: &[
        ("manifest", Text),
        ("manifest_md5", Text),
        ("object_idx", Int),
        ("idx", Int),
        ("object_md5", Text),
        ("arch", Text),
        ("name", Text),
        ("symbol", Text),
        ("demangled", Text),
        ("vgpr", Int),
        ("sgpr", Int),
        ("agpr", Int),
        ("vgpr_spill", Int),
        ("sgpr_spill", Int),
        ("lds_bytes", Int),
        ("scratch_bytes", Int),
        ("wave_size", Int),
        ("max_workgroup_size", Int),
    ],
    key: &["manifest", "manifest_md5", "object_idx", "idx"],
    lookups: &[&["name"]],
};

/// Bad lines and unreadable documents: the index says what it could not read instead of dropping it.
pub const ERRORS: TableDef = TableDef { name: "errors", columns: &[("source", Text), ("line", Int), ("reason", Text)], key: &["source", "line"], lookups: &[] };

pub const TABLES: &[&TableDef] = &[&ROWS, &METRICS, &KERNELS, &LEDGER, &EVALS, &EVAL_SIDES, &SAMPLES, &ISA_OBJECTS, &ISA_KERNELS, &ERRORS];

pub fn table(name: &str) -> Option<&'static TableDef> {
    TABLES.iter().copied().find(|t| t.name == name)
}

/// Views over the tables, in SQL both engines run.
pub const VIEWS: &[(&str, &str)] = &[
    (
        "row_metrics",
        "SELECT r.id AS row_id, r.captured_at, r.day, r.workload, r.phase, r.shape_bucket, r.arch, r.product, r.host, \
         r.commit_sha, r.commit_short, r.variant, r.run_index, m.name AS metric, m.value, m.unit \
         FROM rows r JOIN metrics m ON m.row_id = r.id WHERE r.status = 'ok' AND r.pass = 'measured'",
    ),
    (
        "kernel_stats",
        "SELECT k.name, r.workload, r.phase, r.arch, COUNT(*) AS samples, SUM(k.calls) AS calls, SUM(k.total_us) AS total_us, \
         AVG(k.avg_us) AS avg_us, AVG(k.share_pct) AS share_pct, MAX(k.share_pct) AS share_pct_max, AVG(k.achieved_gbps) AS achieved_gbps \
         FROM kernels k JOIN rows r ON r.id = k.row_id WHERE r.status = 'ok' AND r.pass = 'measured' \
         GROUP BY k.name, r.workload, r.phase, r.arch",
    ),
    (
        "verdicts",
        "SELECT lever, kernel, arch, metric, verdict, COUNT(*) AS entries, MAX(recorded_at) AS last_recorded_at \
         FROM ledger GROUP BY lever, kernel, arch, metric, verdict",
    ),
    (
        "eval_samples",
        "SELECT s.eval_id, e.task_id, e.metric, e.goal, e.verdict, s.side, s.block, s.seq, s.value, s.wall_s, s.throttled, s.started_at \
         FROM samples s LEFT JOIN evals e ON e.eval_id = s.eval_id WHERE s.pass = 'measured' AND s.value IS NOT NULL",
    ),
];

/// DDL of the tables (no indexes: bulk loads create those afterwards) and the views.
pub fn create_tables() -> String {
    let mut s = String::new();
    for t in TABLES {
        let cols: Vec<String> = t.columns.iter().map(|(n, ty)| format!("{n} {}", ty.sql())).collect();
        s.push_str(&format!("CREATE TABLE IF NOT EXISTS {} ({});\n", t.name, cols.join(", ")));
    }
    s
}

pub fn create_indexes() -> String {
    let mut s = String::new();
    for t in TABLES {
        s.push_str(&format!("CREATE UNIQUE INDEX IF NOT EXISTS {0}_key ON {0} ({1});\n", t.name, t.key.join(", ")));
        for (i, cols) in t.lookups.iter().enumerate() {
            s.push_str(&format!("CREATE INDEX IF NOT EXISTS {0}_by{i} ON {0} ({1});\n", t.name, cols.join(", ")));
        }
    }
    s
}

pub fn create_views() -> String {
    VIEWS.iter().map(|(n, q)| format!("CREATE VIEW {n} AS {q};\n")).collect()
}
