//! A verdict in the words a kernel engineer reads first, and what to do with the
//! numbers when the eval could not decide.
//!
//! One sign convention everywhere a person reads: the candidate is "faster" or
//! "slower" (for a metric whose name says which way is better; "better"/"worse"
//! otherwise), the same direction as the ledger's `gain`. The JSON keeps both
//! `relative_change` (the metric's raw direction) and `gain`.

use katlas_model::ledger::{Effect, EvalResult, EvalSide, Goal, LedgerEntry, Protocol, Verdict};

/// The words for a positive and a negative gain: "faster"/"slower" for a metric whose
/// name says which way is better (a time or a rate), "better"/"worse" otherwise.
pub fn better_worse(metric: &str) -> (&'static str, &'static str) {
    if Goal::infer(metric).is_some() {
        ("faster", "slower")
    } else {
        ("better", "worse")
    }
}

/// Which way is better, in words: "lower is better".
pub fn goal_words(goal: Goal) -> &'static str {
    match goal {
        Goal::Maximize => "higher is better",
        Goal::Minimize => "lower is better",
    }
}

/// ` ms` after a number of `metric` (its unit from the name's suffix), or nothing.
pub fn unit_suffix(metric: &str) -> String {
    katlas_model::unit_for_metric_key(metric).map(|u| format!(" {u}")).unwrap_or_default()
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x.abs() * 100.0)
}

/// The gain interval `[lo, hi]` (positive = better) in words: "5.1–14.0% slower".
fn interval_words(lo: f64, hi: f64, better: &str, worse: &str) -> String {
    let bare = |x: f64| format!("{:.1}", x.abs() * 100.0);
    if lo >= 0.0 {
        format!("{}–{} {better}", bare(lo), pct(hi))
    } else if hi <= 0.0 {
        format!("{}–{} {worse}", bare(hi), pct(lo))
    } else {
        format!("{} {worse} to {} {better}", pct(lo), pct(hi))
    }
}

/// A gain in words: "9.6% slower"; a gain that rounds to zero has no direction.
pub fn gain_words(gain: f64, metric: &str) -> String {
    let (better, worse) = better_worse(metric);
    if (gain * 1000.0).round() == 0.0 {
        "0.0% different".into()
    } else {
        format!("{} {}", pct(gain), if gain > 0.0 { better } else { worse })
    }
}

fn level(l: f64) -> String {
    let p = l * 100.0;
    if (p - p.round()).abs() < 0.05 {
        format!("{:.0}%", p)
    } else {
        format!("{:.1}%", p)
    }
}

/// The gain interval of an effect (positive = better).
pub fn gain_interval(e: &Effect, goal: Goal) -> [f64; 2] {
    goal.gain_interval(e.ci)
}

/// The gain interval of an effect with its level, as every table prints it:
/// `[+3.73%, +56.31%] at 99.5%`.
pub fn gain_interval_text(e: &Effect, goal: Goal) -> String {
    katlas_model::ledger::gain_interval_text(gain_interval(e, goal), e.ci_level)
}

/// What an entry compared, short enough for a table cell: `v1.2 → candidate (working
/// tree)`, `KV=0 → KV=1`, or the two commands of an ad-hoc eval, whose sides are both
/// called baseline and candidate and differ only in what they ran.
pub fn compared(e: &LedgerEntry) -> String {
    fn short(s: &str, max: usize) -> String {
        if s.chars().count() <= max {
            s.to_string()
        } else {
            s.chars().take(max - 1).chain(std::iter::once('…')).collect()
        }
    }
    // `sh -c CMD` is how every command side runs; the CMD is what the person typed.
    let command = |s: &EvalSide| match s.command.as_slice() {
        [sh, c, cmd] if sh == "sh" && c == "-c" => cmd.clone(),
        argv => argv.join(" "),
    };
    let (b, c) = (&e.baseline, &e.candidate);
    let side = |s: &EvalSide| match &s.git_ref {
        // A full commit id says no more in 40 characters than in 12.
        Some(r) if r.len() > 12 && r.bytes().all(|x| x.is_ascii_hexdigit()) => r[..12].to_string(),
        Some(r) => short(r, 40),
        None => short(&s.label, 40),
    };
    let (cb, cc) = (command(b), command(c));
    let plain = |s: &EvalSide| s.git_ref.is_none() && s.knobs.is_empty();
    if plain(b) && plain(c) && !cb.is_empty() {
        if cb == cc {
            return format!("A/A: {}", short(&cb, 60));
        }
        if cb.chars().count() <= 40 && cc.chars().count() <= 40 {
            return format!("{cb} → {cc}");
        }
        // Long commands mostly share their start (`./bench --model … --impl old|new`): cut
        // from the word before the first difference, so the cell shows what differs.
        let (xb, xc): (Vec<char>, Vec<char>) = (cb.chars().collect(), cc.chars().collect());
        let mut k = xb.iter().zip(&xc).take_while(|(x, y)| x == y).count();
        let word_start = |mut k: usize| {
            while k > 0 && !xb[k - 1].is_whitespace() {
                k -= 1;
            }
            k
        };
        k = word_start(k);
        while k > 0 && xb[k - 1].is_whitespace() {
            k -= 1;
        }
        k = word_start(k);
        let tail = |x: &[char]| if k > 0 { format!("…{}", x[k..].iter().collect::<String>()) } else { x.iter().collect() };
        return format!("{} → {}", short(&tail(&xb), 40), short(&tail(&xc), 40));
    }
    format!("{} → {}", side(b), side(c))
}

/// What a verdict sentence needs, from an eval result or a ledger entry alike.
struct View<'a> {
    who: &'a str,
    reference: &'a str,
    candidates: usize,
    metric: &'a str,
    goal: Goal,
    effect: Option<&'a Effect>,
    protocol: &'a Protocol,
    verdict: Verdict,
    reasons: &'a [String],
    /// The robust CV of each side: the spread the `unstable` rule judged.
    cvs: Vec<f64>,
}

impl<'a> View<'a> {
    fn of_result(r: &'a EvalResult) -> Self {
        View {
            who: r.sides.get(1).map(|s| s.label.as_str()).unwrap_or("candidate"),
            reference: r.sides.first().map(|s| s.label.as_str()).unwrap_or("baseline"),
            candidates: r.sides.len().saturating_sub(1),
            metric: &r.metric,
            goal: r.goal,
            effect: r.effects.first(),
            protocol: &r.protocol,
            verdict: r.verdict,
            reasons: &r.reasons,
            cvs: r.sides.iter().filter_map(|s| s.summary.cv).collect(),
        }
    }

    fn of_entry(e: &'a LedgerEntry) -> Self {
        View {
            who: &e.candidate.label,
            reference: &e.baseline.label,
            candidates: 1,
            metric: &e.metric,
            goal: e.goal,
            effect: e.effect.as_ref(),
            protocol: &e.protocol,
            verdict: e.verdict,
            reasons: &e.reasons,
            cvs: [&e.baseline, &e.candidate].iter().filter_map(|s| s.summary.cv).collect(),
        }
    }

    fn headline(&self) -> String {
        let (better, worse) = better_worse(self.metric);
        let runs = {
            let n = &self.protocol.n_per_side;
            if n.iter().all(|x| Some(x) == n.first()) {
                format!("{} runs/side", n.first().copied().unwrap_or(0))
            } else {
                format!("{} runs/side", n.iter().map(u32::to_string).collect::<Vec<_>>().join("/"))
            }
        };
        let order = if self.protocol.order == "abba" { "ABBA".to_string() } else { self.protocol.order.clone() };
        let how = format!("{runs}, {order}, fresh processes");
        match self.effect {
            Some(e) if self.candidates == 1 => {
                let [lo, hi] = gain_interval(e, self.goal);
                format!(
                    "{} {} ({} CI {}), {how} → {}",
                    self.who,
                    gain_words(e.gain, self.metric),
                    level(e.ci_level),
                    interval_words(lo, hi, better, worse),
                    self.verdict
                )
            }
            Some(_) => format!("{} candidates against {}, {how} → {}", self.candidates, self.reference, self.verdict),
            None => format!("{}: no comparison ({}), {how} → {}", self.who, self.reasons.first().map(String::as_str).unwrap_or("no samples"), self.verdict),
        }
    }

    fn notes(&self, min_effect: f64) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = self.effect {
            if self.protocol.adaptive && (e.ci_level - 0.95).abs() > 1e-6 {
                let futility = self.reasons.iter().any(|r| r.contains("futility interval"));
                let which = if futility { "futility check's" } else { "sequential test's" };
                let size = if e.ci_level > 0.95 { "wider" } else { "narrower" };
                out.push(format!(
                    "the {} interval is the {which} level at look {}: each look of an adaptive eval spends part of its 5% error, so the interval is {size} than a single 95% one",
                    level(e.ci_level),
                    self.protocol.looks.unwrap_or(1)
                ));
            }
        }
        let cv = self.cvs.iter().copied().fold(0.0f64, f64::max);
        let have = self.protocol.n_per_side.iter().copied().min().unwrap_or(0);
        let lower_noise = "--settle CMD between blocks, more --warmups, pinning (taskset -c N), a quiet machine, or a CPU/GPU-time metric";
        match self.verdict {
            Verdict::Inconclusive => {
                let effect = self.effect.map(|e| e.gain.abs()).filter(|g| *g > min_effect).unwrap_or(min_effect);
                let need = runs_needed(cv, effect);
                out.push(format!(
                    "inconclusive: at robust CV {:.1}% a {} effect needs about {need} runs/side (this eval had {have}); rerun with --max-runs {} or -n {need}, or lower the noise ({lower_noise})",
                    cv * 100.0,
                    pct(effect),
                    need.max(have + 2),
                ));
            }
            Verdict::Unstable => out.push(format!(
                "unstable: the runs drift or spread (robust CV {:.1}%, see the reasons); the numbers are not a measurement of the change. Lower the noise first: {lower_noise}; then rerun. At this CV a {} effect would need about {} runs/side",
                cv * 100.0,
                pct(min_effect),
                runs_needed(cv, min_effect)
            )),
            Verdict::NeedsBaseline => out.push("needs_baseline: the baseline gave no usable samples; run it alone and check its output and exit status".into()),
            _ => {}
        }
        out
    }
}

/// `candidate 9.6% slower (95% CI 5.1–14.0% slower), 20 runs/side, ABBA, fresh processes → regressed`
pub fn headline(r: &EvalResult) -> String {
    View::of_result(r).headline()
}

/// The same line for a ledger entry (`katlas ledger show`).
pub fn entry_headline(e: &LedgerEntry) -> String {
    View::of_entry(e).headline()
}

/// Runs per side a two-sided comparison needs to find `effect` (relative) at robust CV
/// `cv` with 5% error and 80% power (normal approximation, trimmed-mean efficiency ~0.94).
pub fn runs_needed(cv: f64, effect: f64) -> u32 {
    if !(cv.is_finite() && effect > 0.0) {
        return 0;
    }
    let z = 1.96 + 0.84;
    (2.0 * (z * cv / effect).powi(2) / 0.94).ceil().max(3.0) as u32
}

/// What a person should do next, for verdicts that are not a decision; and what the
/// interval's level means when it is not the plain 95%.
pub fn notes(r: &EvalResult, min_effect: f64) -> Vec<String> {
    View::of_result(r).notes(min_effect)
}

/// The same notes for a ledger entry (which does not keep `--min-effect`: the default 5%).
pub fn entry_notes(e: &LedgerEntry) -> Vec<String> {
    View::of_entry(e).notes(0.05)
}

#[cfg(test)]
mod tests {
    use super::*;
    use katlas_model::ledger::{EvalSide, Protocol, SideSummary};

    fn result(goal: Goal, ci: [f64; 2], change: f64, verdict: Verdict) -> EvalResult {
        let side = |l: &str| EvalSide { label: l.into(), summary: SideSummary { cv: Some(0.02), ..Default::default() }, ..Default::default() };
        let metric = if goal == Goal::Minimize { "time_ms" } else { "tok_s" };
        EvalResult {
            effects: vec![Effect {
                relative_change: change,
                ci,
                ci_level: 0.95,
                bootstrap_ci: None,
                gain: if goal == Goal::Minimize { -change } else { change },
                p_value: None,
                resamples: 0,
            }],
            protocol: Protocol { order: "abba".into(), n_per_side: vec![20, 20], ..Default::default() },
            ..crate::test_result(metric, goal, verdict, vec![side("baseline"), side("candidate")])
        }
    }

    #[test]
    fn one_sign_convention_for_times_and_rates() {
        // A time that rose 9.6% is 9.6% slower, whatever the metric's raw direction.
        let r = result(Goal::Minimize, [0.051, 0.140], 0.096, Verdict::Regressed);
        assert_eq!(headline(&r), "candidate 9.6% slower (95% CI 5.1–14.0% slower), 20 runs/side, ABBA, fresh processes → regressed");
        let r = result(Goal::Maximize, [-0.140, -0.051], -0.096, Verdict::Regressed);
        assert_eq!(headline(&r), "candidate 9.6% slower (95% CI 5.1–14.0% slower), 20 runs/side, ABBA, fresh processes → regressed");
        let r = result(Goal::Maximize, [-0.02, 0.031], 0.005, Verdict::Inconclusive);
        assert!(headline(&r).contains("(95% CI 2.0% slower to 3.1% faster)"), "{}", headline(&r));
    }

    #[test]
    fn undecided_verdicts_say_what_to_do() {
        let r = result(Goal::Maximize, [-0.02, 0.031], 0.005, Verdict::Inconclusive);
        let n = notes(&r, 0.05);
        assert!(n[0].contains("needs about") && n[0].contains("--max-runs"), "{n:?}");
        assert!(runs_needed(0.02, 0.05) >= 3 && runs_needed(0.02, 0.01) > runs_needed(0.02, 0.05));
        let r = result(Goal::Maximize, [0.0, 0.1], 0.05, Verdict::Unstable);
        let n = notes(&r, 0.05);
        assert!(n[0].contains("--settle") && n[0].contains(&format!("a 5.0% effect would need about {} runs/side", runs_needed(0.02, 0.05))), "{n:?}");
    }

    #[test]
    fn compared_names_what_each_kind_of_eval_ran() {
        let side = |label: &str, git_ref: Option<&str>, cmd: &str| EvalSide {
            label: label.into(),
            git_ref: git_ref.map(str::to_string),
            command: vec!["sh".into(), "-c".into(), cmd.into()],
            ..Default::default()
        };
        let entry = |b: EvalSide, c: EvalSide| LedgerEntry {
            schema: String::new(),
            id: "x".into(),
            recorded_at: String::new(),
            task_id: None,
            eval_id: None,
            lever: None,
            key: Default::default(),
            hypothesis: None,
            metric: "time_ms".into(),
            goal: Goal::Minimize,
            baseline: b,
            candidate: c,
            protocol: Protocol::default(),
            samples: Default::default(),
            verdict: Verdict::Improved,
            reasons: vec![],
            effect: None,
            noise_threshold: 0.01,
            correctness: vec![],
            cross_host: false,
            mechanism: None,
            disposition: katlas_model::ledger::Disposition::Promote,
            fleet: None,
        };
        // Ad-hoc: both sides are called baseline and candidate; their commands tell them apart.
        let e = entry(side("baseline", None, "./bench --impl old"), side("candidate", None, "./bench --impl new"));
        assert_eq!(compared(&e), "./bench --impl old → ./bench --impl new");
        let long = "x".repeat(80);
        let e = entry(side("baseline", None, &long), side("candidate", None, "y"));
        assert_eq!(compared(&e), format!("{}… → y", "x".repeat(39)));
        let (old, new) = ("./bench --model llama-3.1-8b-instruct --quant q4_k_m --impl old", "./bench --model llama-3.1-8b-instruct --quant q4_k_m --impl new");
        assert_eq!(compared(&entry(side("baseline", None, old), side("candidate", None, new))), "…--impl old → …--impl new");
        let e = entry(side("baseline", None, "./bench"), side("baseline (again)", None, "./bench"));
        assert_eq!(compared(&e), "A/A: ./bench");
        // Refs: a commit id shortened, a name kept; the working tree by its label.
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let e = entry(side("baseline 0123456789ab", Some(sha), "make b"), side("candidate (working tree)", None, "make b"));
        assert_eq!(compared(&e), "0123456789ab → candidate (working tree)");
        let e = entry(side("baseline v1", Some("v1"), "make b"), side("candidate v2", Some("v2"), "make b"));
        assert_eq!(compared(&e), "v1 → v2");
        let mut b = side("KV=0", None, "./bench");
        b.knobs.insert("KV".into(), "0".into());
        let mut c = side("KV=1", None, "./bench");
        c.knobs.insert("KV".into(), "1".into());
        assert_eq!(compared(&entry(b, c)), "KV=0 → KV=1");
    }

    #[test]
    fn a_gain_that_rounds_to_zero_has_no_direction() {
        assert_eq!(gain_words(-0.00004, "time_ms"), "0.0% different");
        assert_eq!(gain_words(0.012, "time_ms"), "1.2% faster");
        assert_eq!(gain_words(-0.012, "score"), "1.2% worse");
    }
}
