//! Ctrl-C keeps what was measured: rows already appended stay, the running
//! run becomes an error row, nothing further runs. (In a process of its own: the interrupt
//! flag is process-wide.)

use katlas_collect::collect::{collect, CollectOptions};
use katlas_collect::spec::load_file;
use katlas_model::{Row, Status};
use katlas_proc::request_interrupt;
use std::time::Duration;

#[test]
fn interrupt_keeps_measured_rows() {
    if !katlas_testkit::own_process!(interrupt_keeps_measured_rows) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("w.toml");
    std::fs::write(&f, "command = \"case {m} in ok*) echo v=1;; hang) sleep 30;; esac\"\nparsers = ['kv']\n[matrix]\nm = ['ok1', 'hang', 'ok2']\n").unwrap();
    let ls = load_file(&f, None).unwrap();
    let mut o = CollectOptions::new(d.path());
    o.skip_devices = true;
    o.kill_grace = Duration::from_millis(300);
    let out = d.path().join("rows.jsonl");
    o.output = Some(out.clone());
    let watch = out.clone();
    let t = std::thread::spawn(move || {
        // Interrupt once the first run's row is on disk (the hang is running then).
        for _ in 0..2000 {
            if std::fs::read_to_string(&watch).map(|s| s.lines().count() >= 1).unwrap_or(false) {
                std::thread::sleep(Duration::from_millis(300));
                request_interrupt(true);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let rep = collect(&ls, &o).unwrap();
    t.join().unwrap();
    request_interrupt(false);
    assert!(rep.interrupted);
    assert_eq!(rep.runs, 2, "the third run never started");
    let rows: Vec<Row> = katlas_corpus::read_jsonl::<Row>(&out, None).unwrap().records.into_iter().map(|l| l.record).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].status, Status::Ok);
    assert_eq!(rows[0].metric("v"), Some(1.0));
    assert_eq!(rows[1].status, Status::Error);
    assert!(rows[1].error.as_ref().unwrap().message.as_ref().unwrap().contains("interrupted"));
}
