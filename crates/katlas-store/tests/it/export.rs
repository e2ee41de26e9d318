//! Parquet and CSV exports read back equal the source rows (the real hipfire rows of fixtures/
//! and a real eval's samples are not needed here: the rows table carries every column type).

use katlas_corpus::{append_jsonl, Fsync, Layout};
use katlas_model::Row;
use katlas_store::{export, index, schema};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/hipfire/atlas_rows_v0.jsonl");

fn project() -> (tempfile::TempDir, Layout, Vec<Row>) {
    let d = tempfile::tempdir().unwrap();
    let l = Layout::for_project(d.path());
    std::fs::create_dir_all(l.corpus_dir()).unwrap();
    let rows: Vec<Row> = std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .filter(|x| !x.trim().is_empty())
        .map(|x| katlas_model::hipfire::import_v0(serde_json::from_str(x).unwrap(), None, None).unwrap())
        .collect();
    append_jsonl(&l.corpus_file("box-a", "2026-05-14"), &rows, Fsync::Never).unwrap();
    (d, l, rows)
}

fn read_parquet(p: &std::path::Path) -> Vec<Vec<(String, Field)>> {
    let r = SerializedFileReader::new(std::fs::File::open(p).unwrap()).unwrap();
    r.get_row_iter(None).unwrap().map(|row| row.unwrap().get_column_iter().map(|(n, f)| (n.clone(), f.clone())).collect()).collect()
}

fn get<'a>(row: &'a [(String, Field)], name: &str) -> &'a Field {
    &row.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no column {name}")).1
}

#[test]
fn parquet_rows_and_kernels_read_back_equal_the_source_rows() {
    let (d, l, rows) = project();
    let (c, _) = index::open(&l).unwrap();
    let out = d.path().join("rows.parquet");
    let n = export::parquet(&c, &schema::ROWS, std::fs::File::create(&out).unwrap()).unwrap();
    assert_eq!(n, rows.len() as u64);
    let back = read_parquet(&out);
    assert_eq!(back.len(), rows.len());
    let cols: Vec<&str> = back[0].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(cols, schema::ROWS.column_names(), "the documented columns, in order");
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    for (src, got) in sorted.iter().zip(&back) {
        assert_eq!(get(got, "id"), &Field::Str(src.id.clone()));
        assert_eq!(get(got, "workload"), &Field::Str(src.workload.clone()));
        assert_eq!(get(got, "phase"), &Field::Str(src.phase.clone()));
        assert_eq!(get(got, "run_index"), &Field::Long(src.run_index.into()));
        assert_eq!(get(got, "captured_at"), &Field::Str(src.captured_at.clone()));
        match &src.identity.host.hostname {
            Some(h) => assert_eq!(get(got, "host"), &Field::Str(h.clone())),
            None => assert_eq!(get(got, "host"), &Field::Null),
        }
        assert_eq!(get(got, "product"), &Field::Null, "a null stays null");
        assert_eq!(get(got, "kernel_count"), &Field::Long(src.kernels.len() as i64));
        assert_eq!(get(got, "kernel_total_us"), &Field::Double(src.kernel_total_us()));
    }
    let out = d.path().join("kernels.parquet");
    export::parquet(&c, &schema::KERNELS, std::fs::File::create(&out).unwrap()).unwrap();
    let back = read_parquet(&out);
    let want: usize = rows.iter().map(|r| r.kernels.len()).sum();
    assert_eq!(back.len(), want);
    for got in &back {
        let Field::Str(id) = get(got, "row_id") else { panic!() };
        let Field::Long(idx) = get(got, "idx") else { panic!() };
        let k = &rows.iter().find(|r| &r.id == id).unwrap().kernels[*idx as usize];
        assert_eq!(get(got, "name"), &Field::Str(k.name.clone()));
        assert_eq!(get(got, "calls"), &Field::Long(k.calls as i64));
        assert_eq!(get(got, "total_us"), &Field::Double(k.total_us));
        assert_eq!(get(got, "share_pct"), &k.share_pct.map(Field::Double).unwrap_or(Field::Null));
        assert_eq!(get(got, "family"), &k.op.as_ref().map(|o| Field::Str(o.family.clone())).unwrap_or(Field::Null));
    }
}

#[test]
fn csv_export_has_the_documented_header_and_every_metric() {
    let (_d, l, rows) = project();
    let (c, _) = index::open(&l).unwrap();
    let mut buf = Vec::new();
    export::csv(&c, &schema::METRICS, &mut buf).unwrap();
    let mut r = csv::Reader::from_reader(buf.as_slice());
    assert_eq!(r.headers().unwrap().iter().collect::<Vec<_>>(), schema::METRICS.column_names());
    let recs: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(recs.len(), rows.iter().map(|r| r.metrics.len()).sum::<usize>());
    for row in &rows {
        for (name, m) in &row.metrics {
            let rec = recs.iter().find(|x| &x[0] == row.id.as_str() && &x[1] == name.as_str()).unwrap();
            assert_eq!(rec[2].parse::<f64>().unwrap(), m.value);
        }
    }
    assert!(export::table("nope").is_err());
}

#[test]
fn csv_export_text_cells_are_never_formulas() {
    let (_d, l, mut rows) = project();
    let mut row = rows.remove(0);
    row.id = "formula-row".into();
    row.workload = "=HYPERLINK(\"http://evil.example\",\"x\")".into();
    row.phase = "@SUM(A1)".into();
    append_jsonl(&l.corpus_file("box-b", "2026-05-15"), &[row], Fsync::Never).unwrap();
    let (c, _) = index::open(&l).unwrap();
    let mut buf = Vec::new();
    export::csv(&c, &schema::ROWS, &mut buf).unwrap();
    let mut r = csv::Reader::from_reader(buf.as_slice());
    let cols: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let at = |name: &str| cols.iter().position(|c| c == name).unwrap();
    let rec = r.records().map(Result::unwrap).find(|x| &x[at("id")] == "formula-row").unwrap();
    assert_eq!(&rec[at("workload")], "'=HYPERLINK(\"http://evil.example\",\"x\")");
    assert_eq!(&rec[at("phase")], "'@SUM(A1)");
    assert!(rec[at("run_index")].parse::<i64>().is_ok(), "numbers stay numbers");
}
