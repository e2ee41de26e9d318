//! The hostile-input suites' bound on a single call: a reader given endless, huge or damaged
//! input must return (a result or an error) within 5 s, and must not panic.

use std::sync::mpsc;
use std::time::Duration;

/// How long one call may take.
pub const BOUND: Duration = Duration::from_secs(5);

/// `f()` run on a thread of its own; fails the test naming `what` when it has not returned
/// within [`BOUND`] (a hang: the thread is left behind, the test fails at once) or panicked.
pub fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(BOUND) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within {BOUND:?} (a hang)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}
