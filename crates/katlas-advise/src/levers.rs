//! The lever catalog (`data/levers.toml`): its types live in [`crate::rules`]; this
//! module renders it for people (`katlas suggest --catalog`).

use crate::expr::fmt_num;
pub use crate::rules::{Lever, LeverCatalog};

pub fn catalog_markdown(c: &LeverCatalog) -> String {
    let mut o = String::from("# katlas lever catalog\n");
    for l in &c.levers {
        o.push_str(&format!("\n## {} (`{}`)\n\n", l.name, l.id));
        o.push_str(&format!("- scope: {}\n- triggers: {}\n", l.scope, l.triggers.join(", ")));
        let legal: Vec<String> = l.legal.iter().map(|c| c.text.clone()).collect();
        o.push_str(&format!("- legal when: {}\n", if legal.is_empty() { "always".into() } else { legal.join(" and ") }));
        o.push_str(&format!("- risk: {}; expected impact: {}\n", l.risk, l.expected_impact));
        o.push_str(&format!(
            "- typical magnitude: {}-{}% of {} ({})\n",
            fmt_num(l.magnitude.low_pct, None),
            fmt_num(l.magnitude.high_pct, None),
            l.magnitude.of,
            l.magnitude.source
        ));
        o.push_str(&format!("- mechanism: {}\n", l.hypothesis));
        for s in &l.candidate_steps {
            o.push_str(&format!("- step: {s}\n"));
        }
        for n in &l.null_results {
            o.push_str(&format!("- known null result: {n}\n"));
        }
    }
    o
}
