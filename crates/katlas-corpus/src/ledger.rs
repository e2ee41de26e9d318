//! The ledger file ([`crate::Layout::ledger`]: `katlas.ledger.v1` lines, every verdict
//! appended, never edited): the one reader and writer eval, suggest's history and the build
//! lint share, so they agree on what a missing ledger, a bad line or a wrong schema means.

use crate::{append_jsonl, read_jsonl, Fsync, ReadReport, StoreError};
use katlas_model::ledger::{LedgerEntry, LEDGER_SCHEMA};
use std::path::Path;

/// Append one entry (locked, fsynced: an entry whose append returned is on disk).
pub fn append(path: &Path, entry: &LedgerEntry) -> Result<(), StoreError> {
    append_jsonl(path, std::slice::from_ref(entry), Fsync::Batch)
}

/// All entries, with bad lines reported beside the good ones. A missing ledger is empty.
pub fn read(path: &Path) -> Result<ReadReport<LedgerEntry>, StoreError> {
    if !path.exists() {
        return Ok(ReadReport::default());
    }
    read_jsonl(path, Some(LEDGER_SCHEMA))
}
