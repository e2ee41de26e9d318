//! `katlas export`: a table of the index as CSV or Parquet (docs/corpus.md, "Export"). Columns
//! and their order are the table's (schema.rs); Parquet types: TEXT → BYTE_ARRAY (UTF8),
//! BIGINT → INT64, DOUBLE PRECISION → DOUBLE, every column OPTIONAL (null where the index has
//! null); zstd-compressed, row groups of 65,536 rows, rows in key order.

use crate::schema::{TableDef, Ty};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::io::Write;
use std::sync::Arc;

const GROUP: usize = 65_536;

/// What stopped an export: the table asked for or a value in it (the input), the index, or the
/// file written (a write the system refused is the environment's).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Sql(#[from] rusqlite::Error),
    #[error("{0}")]
    Write(#[from] std::io::Error),
}

impl From<csv::Error> for ExportError {
    fn from(e: csv::Error) -> Self {
        if !e.is_io_error() {
            return ExportError::Input(e.to_string());
        }
        match e.into_kind() {
            csv::ErrorKind::Io(io) => ExportError::Write(io),
            other => ExportError::Input(format!("{other:?}")),
        }
    }
}

impl From<parquet::errors::ParquetError> for ExportError {
    /// The writer reports the file's own I/O failure as an external error: keep it typed.
    fn from(e: parquet::errors::ParquetError) -> Self {
        match e {
            parquet::errors::ParquetError::External(inner) => match inner.downcast::<std::io::Error>() {
                Ok(io) => ExportError::Write(*io),
                Err(other) => ExportError::Input(parquet::errors::ParquetError::External(other).to_string()),
            },
            other => ExportError::Input(other.to_string()),
        }
    }
}

impl katlas_fs::class::Classify for ExportError {
    fn class(&self) -> katlas_fs::class::Class {
        match self {
            ExportError::Write(io) => katlas_fs::class::Classify::class(io),
            ExportError::Sql(e) => crate::index::sqlite_class(e),
            ExportError::Input(_) => katlas_fs::class::Class::Input,
        }
    }
}

/// The tables `katlas export` writes.
pub const EXPORTABLE: &[&str] = &["rows", "metrics", "kernels", "ledger", "evals", "eval_sides", "samples", "isa_objects", "isa_kernels", "errors"];

pub fn table(name: &str) -> Result<&'static TableDef, ExportError> {
    if !EXPORTABLE.contains(&name) {
        return Err(ExportError::Input(format!("--table {name}: expected one of {}", EXPORTABLE.join(", "))));
    }
    crate::schema::table(name).ok_or_else(|| ExportError::Input(format!("--table {name}: unknown")))
}

fn select(t: &TableDef) -> String {
    format!("SELECT {} FROM {} ORDER BY {}", t.column_names().join(", "), t.name, t.key.join(", "))
}

pub fn csv<W: Write>(conn: &Connection, t: &TableDef, out: W) -> Result<u64, ExportError> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(t.column_names())?;
    let mut st = conn.prepare(&select(t))?;
    let mut q = st.query([])?;
    let mut n = 0;
    let mut rec: Vec<String> = Vec::with_capacity(t.columns.len());
    while let Some(r) = q.next()? {
        rec.clear();
        for i in 0..t.columns.len() {
            rec.push(match r.get_ref(i)? {
                ValueRef::Null => String::new(),
                ValueRef::Integer(v) => v.to_string(),
                ValueRef::Real(v) => v.to_string(),
                // A kernel or workload name is the repository's text: never a spreadsheet formula.
                ValueRef::Text(s) | ValueRef::Blob(s) => katlas_model::text::csv_safe(&String::from_utf8_lossy(s)).into_owned(),
            });
        }
        w.write_record(&rec)?;
        n += 1;
    }
    w.flush()?;
    Ok(n)
}

pub fn parquet_schema(t: &TableDef) -> String {
    let cols: Vec<String> = t
        .columns
        .iter()
        .map(|(n, ty)| match ty {
            Ty::Text => format!("OPTIONAL BYTE_ARRAY {n} (UTF8);"),
            Ty::Int => format!("OPTIONAL INT64 {n};"),
            Ty::Real => format!("OPTIONAL DOUBLE {n};"),
        })
        .collect();
    format!("message {} {{ {} }}", t.name, cols.join(" "))
}

enum Col {
    Text(Vec<ByteArray>),
    Int(Vec<i64>),
    Real(Vec<f64>),
}

pub fn parquet<W: Write + Send>(conn: &Connection, t: &TableDef, out: W) -> Result<u64, ExportError> {
    let schema = Arc::new(parquet::schema::parser::parse_message_type(&parquet_schema(t))?);
    let props = Arc::new(WriterProperties::builder().set_compression(parquet::basic::Compression::ZSTD(Default::default())).build());
    let mut w = SerializedFileWriter::new(out, schema, props)?;
    let mut st = conn.prepare(&select(t))?;
    let mut q = st.query([])?;
    let fresh = || -> Vec<(Col, Vec<i16>)> {
        t.columns
            .iter()
            .map(|(_, ty)| {
                (
                    match ty {
                        Ty::Text => Col::Text(Vec::new()),
                        Ty::Int => Col::Int(Vec::new()),
                        Ty::Real => Col::Real(Vec::new()),
                    },
                    Vec::new(),
                )
            })
            .collect()
    };
    let mut cols = fresh();
    let (mut n, mut in_group) = (0u64, 0usize);
    let flush = |cols: &mut Vec<(Col, Vec<i16>)>, w: &mut SerializedFileWriter<W>| -> Result<(), ExportError> {
        let mut rg = w.next_row_group()?;
        for (c, defs) in cols.iter() {
            let mut cw = rg.next_column()?.ok_or_else(|| ExportError::Input("parquet: fewer columns than the schema".into()))?;
            match c {
                Col::Text(v) => cw.typed::<ByteArrayType>().write_batch(v, Some(defs), None)?,
                Col::Int(v) => cw.typed::<Int64Type>().write_batch(v, Some(defs), None)?,
                Col::Real(v) => cw.typed::<DoubleType>().write_batch(v, Some(defs), None)?,
            };
            cw.close()?;
        }
        rg.close()?;
        Ok(())
    };
    while let Some(r) = q.next()? {
        for (i, (c, defs)) in cols.iter_mut().enumerate() {
            let v = r.get_ref(i)?;
            let present = !matches!(v, ValueRef::Null);
            defs.push(i16::from(present));
            if !present {
                continue;
            }
            // SQLite may hold an integer in a REAL column or text anywhere; convert by column type.
            match (c, v) {
                (Col::Text(x), ValueRef::Text(s) | ValueRef::Blob(s)) => x.push(ByteArray::from(s.to_vec())),
                (Col::Text(x), ValueRef::Integer(i)) => x.push(ByteArray::from(i.to_string().into_bytes())),
                (Col::Text(x), ValueRef::Real(f)) => x.push(ByteArray::from(f.to_string().into_bytes())),
                (Col::Int(x), ValueRef::Integer(i)) => x.push(i),
                (Col::Int(x), ValueRef::Real(f)) => x.push(f as i64),
                (Col::Real(x), ValueRef::Real(f)) => x.push(f),
                (Col::Real(x), ValueRef::Integer(i)) => x.push(i as f64),
                (_, other) => return Err(ExportError::Input(format!("{}.{}: value {other:?} does not fit the column type", t.name, t.columns[i].0))),
            }
        }
        n += 1;
        in_group += 1;
        if in_group == GROUP {
            flush(&mut cols, &mut w)?;
            cols = fresh();
            in_group = 0;
        }
    }
    if in_group > 0 || n == 0 {
        flush(&mut cols, &mut w)?;
    }
    w.close()?;
    Ok(n)
}
