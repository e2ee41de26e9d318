//! katlas-advise: from evidence to the next single experiment.
//!
//! - [`fit`]: the fit view — each hot kernel against its hardware (arch database),
//!   its ISA resources (`katlas.isa.v1` manifest) and the fit rules in `data/fit.toml`.
//! - [`levers`] and [`suggest`]: the lever catalog (`data/levers.toml`) turned into a
//!   ranked queue of one-lever experiments that remembers ledger verdicts.
//! - [`queue`]: the queue a person is shown, joined to the files each suggestion may change,
//!   and saved so `katlas task --rank N` hands out what was seen.
//! - [`task`]: task packets (`katlas.task.v1` + `TASK.md`) for one experiment.
//!
//! Rules are data: the TOML files are embedded with `include_str!` and a project adds to,
//! replaces or disables their entries by id with a file of the same name under `.katlas/rules/`.

/// An enum written as fixed words: in JSON (each variant's `rename`, so the wire text is the
/// word itself), in the rules files (`parse`) and in text output (`Display`).
macro_rules! word_enum {
    ($(#[$m:meta])* pub enum $name:ident { $($(#[$vm:meta])* $v:ident = $w:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $w)] $v),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $w),+
                }
            }

            /// The variant written `word`; `None` for any other text.
            pub fn parse(word: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|k| k.as_str() == word)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub mod compare;
pub mod error;
pub mod expr;
pub mod fit;
pub mod history;
pub mod isa;
pub mod levers;
pub mod names;
mod overlay;
pub mod queue;
pub mod render;
pub mod rules;
pub mod signals;
pub mod suggest;
pub mod task;

pub use error::AdviseError;
pub use fit::{build_fit, FitInput, FitView};
pub use rules::Rules;
pub use suggest::{suggest, SuggestOptions, SuggestionQueue};

/// Schema strings of the records this crate emits.
pub const FIT_SCHEMA: &str = "katlas.fit.v1";
pub const SUGGESTIONS_SCHEMA: &str = "katlas.suggestions.v1";

/// JSON Schemas of this crate's records, for the CLI's schema list.
pub fn schemas() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        (FIT_SCHEMA, serde_json::to_value(schemars::schema_for!(fit::FitView)).unwrap_or_default()),
        (compare::COMPARE_SCHEMA, serde_json::to_value(schemars::schema_for!(compare::FitCompare)).unwrap_or_default()),
        (SUGGESTIONS_SCHEMA, serde_json::to_value(schemars::schema_for!(suggest::SuggestionQueue)).unwrap_or_default()),
    ]
}
