//! The eval report a person reads: the headline, the table, the next step.

use super::*;

use katlas_model::ledger::gain_text;

fn num(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_else(|| "-".into())
}

pub fn print_report(r: &EvalReport, format: Format, color: bool, min_effect: f64) {
    if format == Format::Json {
        print_json(&r.result);
        return;
    }
    let res = &r.result;
    // The finding first, in one line; the evidence after it.
    println!("{}", katlas_eval::words::headline(res));
    let unit = katlas_model::unit_for_metric_key(&res.metric).map(|u| format!(" ({u})")).unwrap_or_default();
    let median_h = format!("median{unit}");
    let mad_h = format!("MAD{unit}");
    let ci_h = format!("95% CI of median{unit}");
    let mut t = table(format, &["side", "n", &median_h, &ci_h, &mad_h, "robust CV", "failed", "throttled", "gain (+ = better)", "gain interval"]);
    for (i, s) in res.sides.iter().enumerate() {
        let e = if i == 0 { None } else { res.effects.get(i - 1) };
        t.add_row(vec![
            s.label.clone(),
            s.summary.n.to_string(),
            num(s.summary.median),
            s.summary.ci.map(|c| format!("[{:.4}, {:.4}]", c[0], c[1])).unwrap_or_else(|| "-".into()),
            num(s.summary.mad),
            s.summary.cv.map(|c| format!("{:.2}%", c * 100.0)).unwrap_or_else(|| "-".into()),
            s.summary.failed.to_string(),
            s.summary.throttled.to_string(),
            e.map(|e| gain_text(e.gain)).unwrap_or_else(|| if i == 0 { "ref".into() } else { "-".into() }),
            e.map(|e| katlas_eval::words::gain_interval_text(e, res.goal)).unwrap_or_default(),
        ]);
    }
    println!("{t}");
    if let Some(e) = res.effects.first() {
        println!(
            "metric {} ({}); Mann-Whitney p = {}; bootstrap gain ({} resamples) {}",
            res.metric,
            katlas_eval::words::goal_words(res.goal),
            e.p_value.map(|p| format!("{p:.4}")).unwrap_or_else(|| "-".into()),
            e.resamples,
            e.bootstrap_ci
                .map(|c| {
                    let [lo, hi] = res.goal.gain_interval(c);
                    format!("[{}, {}]", gain_text(lo), gain_text(hi))
                })
                .unwrap_or_else(|| "-".into())
        );
    }
    println!(
        "protocol: {} order, {} warmup(s)/side, runs/side {:?} of max {}{}, seed {}, {} look(s); noise threshold ±{:.2}%",
        res.protocol.order,
        res.protocol.warmups,
        res.protocol.n_per_side,
        res.protocol.max_per_side,
        if res.protocol.adaptive { " (adaptive)" } else { "" },
        res.protocol.seed,
        res.protocol.looks.unwrap_or(0),
        res.noise_threshold * 100.0
    );
    if r.resumed > 0 {
        println!("resumed from {} stored sample(s)", r.resumed);
    }
    for c in &res.route_changes {
        println!("route change: {c}");
    }
    for c in &res.correctness {
        println!("correctness {} `{}`: {}", c.claim, c.check, c.outcome);
    }
    let v = res.verdict;
    let code = match v {
        Verdict::Improved => "32",
        Verdict::NoChange => "36",
        Verdict::Regressed | Verdict::Incorrect | Verdict::Invalid => "31",
        _ => "33",
    };
    println!("verdict: {}", paint(color, code, v.as_str()));
    for reason in &res.reasons {
        println!("  - {reason}");
    }
    for n in katlas_eval::words::notes(res, min_effect) {
        println!("next: {n}");
    }
    println!("samples: {}", res.samples.path);
    if let Some(id) = &res.ledger_id {
        println!("ledger: {id}");
    }
}
