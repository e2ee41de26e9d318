//! Arch tags in kernel file names, resolved once for build, provenance and the lab. The
//! convention is hipfire's: `name.gfx1201.hip` is tagged for a chip, `name.gfx12.hip` for a
//! family, `name.gfx1030.v1.hip` for a chip with a variant suffix, `name.hip` is the base. Which
//! family tags an atom takes is the project's [`FamilyRule`]: the arch table by default (an
//! atom's `family` and `also_families`, so gfx1151 is `gfx115`), or a name prefix where the
//! project's runtime picks files that way (hipfire: the first five characters, gfx1151 -> `gfx11`).

use crate::db::ArchDb;
use serde::Serialize;

/// How the project's runtime maps an arch to a family tag (`[reach] family_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FamilyRule {
    /// The arch table's `family` and `also_families` (gfx1151 is `gfx115`).
    #[default]
    Table,
    /// The first N characters of the arch name (hipfire: 5, so gfx1151 takes `gfx11`).
    Prefix(usize),
}

impl FamilyRule {
    /// `table`, `prefixN` or `prefix:N` (1 <= N <= 16).
    pub fn parse(s: &str) -> Result<FamilyRule, String> {
        let t = s.trim();
        if t == "table" {
            return Ok(FamilyRule::Table);
        }
        let n = t.strip_prefix("prefix").map(|r| r.trim_start_matches(':'));
        match n.and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if (1..=16).contains(&n) => Ok(FamilyRule::Prefix(n)),
            _ => Err(format!("unknown family rule `{s}` (expected `table` or `prefixN`, e.g. `prefix5`: the first 5 characters of the arch name)")),
        }
    }

    /// `table`, `prefix5`.
    pub fn name(&self) -> String {
        match self {
            FamilyRule::Table => "table".into(),
            FamilyRule::Prefix(n) => format!("prefix{n}"),
        }
    }

    /// The family tag the rule gives `atom` when it is a prefix rule (`gfx1151` -> `gfx11`).
    pub fn prefix_family(&self, atom: &str) -> Option<String> {
        match self {
            FamilyRule::Prefix(n) if atom.len() > *n && atom.is_char_boundary(*n) => Some(atom[..*n].to_string()),
            _ => None,
        }
    }

    /// Human wording: "the arch table" / "the first 5 characters of the arch name".
    pub fn describe(&self) -> String {
        match self {
            FamilyRule::Table => "the arch table".into(),
            FamilyRule::Prefix(n) => format!("the first {n} characters of the arch name"),
        }
    }
}

/// What an arch tag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TagKind {
    /// One atom (`gfx1201`, `sm_90`).
    Chip,
    /// A family of atoms (`gfx12`, `gfx115`).
    Family,
    /// Looks like an arch tag, but the table knows no such atom or family.
    Unknown,
}

/// `gfx1201`, `gfx12`, `gfx115`, `sm_90`, `sm_9x`, `sm90a`: a tag that means an arch.
pub fn looks_like_arch_tag(t: &str) -> bool {
    let t = t.to_ascii_lowercase();
    (t.starts_with("gfx") && t.len() > 3 && t[3..].chars().all(|c| c.is_ascii_hexdigit()))
        || (t.starts_with("sm") && t.len() > 2 && t.trim_start_matches("sm").trim_start_matches('_').chars().all(|c| c.is_ascii_alphanumeric()))
}

/// A kernel file name split at its dots: `name[.tag][.ext]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileTag<'a> {
    /// `name` of `name.tag.ext`.
    pub name: &'a str,
    /// Everything between name and extension (`gfx1030.v1`).
    pub tag: Option<&'a str>,
    /// The tag's first component when it looks like an arch (`gfx1030`).
    pub arch: Option<&'a str>,
    /// The rest of the tag after the arch (`v1`).
    pub rest: Option<&'a str>,
}

impl<'a> FileTag<'a> {
    /// `None` for a name without an extension.
    pub fn parse(file_name: &'a str) -> Option<FileTag<'a>> {
        let (stem, _ext) = file_name.rsplit_once('.')?;
        let (name, tag) = match stem.split_once('.') {
            Some((n, t)) => (n, Some(t)),
            None => (stem, None),
        };
        let (first, rest) = match tag.map(|t| t.split_once('.').map(|(a, b)| (a, Some(b))).unwrap_or((t, None))) {
            Some((first, rest)) if looks_like_arch_tag(first) => (Some(first), rest),
            _ => (None, None),
        };
        Some(FileTag { name, tag, arch: first, rest })
    }
}

impl ArchDb {
    /// A tag against the table: an atom's exact name is a chip tag, a declared family (an
    /// atom's `family` or `also_families`) a family tag, anything else that looks like an arch
    /// unknown; `None` for a tag that is no arch at all.
    pub fn classify_tag(&self, tag: &str) -> Option<TagKind> {
        if self.atoms().any(|a| a.name == tag) {
            return Some(TagKind::Chip);
        }
        if self.atoms().any(|a| a.family == tag || a.also_families.iter().any(|f| f == tag)) {
            return Some(TagKind::Family);
        }
        looks_like_arch_tag(tag).then_some(TagKind::Unknown)
    }

    /// The family tags `atom` takes under `rule`, most specific first: the table's `family`
    /// then `also_families`, or the rule's prefix; empty for an atom the table does not know
    /// under [`FamilyRule::Table`].
    pub fn family_tags(&self, atom: &str, rule: FamilyRule) -> Vec<String> {
        match rule {
            FamilyRule::Table => match self.atom(atom) {
                Some(a) => std::iter::once(a.family.clone()).chain(a.also_families.iter().cloned()).collect(),
                None => Vec::new(),
            },
            rule => rule.prefix_family(atom).into_iter().collect(),
        }
    }
}

// How a kernel file reaches an atom: tagged with the atom's own name (chip), with one of its
// families (family), or untagged (base: the file every atom may take). Build's resolutions
// carry it (`via` in katlas.reach.v1, whose schema names the type `Via`) and provenance ranks
// candidates by it. Plain comments, not doc comments: a doc comment would enter the schema.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    Chip,
    Family,
    Base,
}

impl Via {
    /// `chip`, `family` or `base`, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Chip => "chip",
            Via::Family => "family",
            Via::Base => "base",
        }
    }
}

/// How a file tagged `tag` (`None`: untagged) reaches `atom` whose family tags are `families`
/// ([`ArchDb::family_tags`]): [`Via::Chip`] for the atom's own tag, [`Via::Family`] for one of
/// its families, [`Via::Base`] for no tag; `None` for another chip's or family's file.
pub fn tag_reach(tag: Option<&str>, atom: &str, families: &[String]) -> Option<Via> {
    match tag {
        None => Some(Via::Base),
        Some(t) if t == atom => Some(Via::Chip),
        Some(t) if families.iter().any(|f| f == t) => Some(Via::Family),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_tags_split() {
        let t = FileTag::parse("gemv_hfq4g256.gfx1030.v1.hip").unwrap();
        assert_eq!((t.name, t.tag, t.arch, t.rest), ("gemv_hfq4g256", Some("gfx1030.v1"), Some("gfx1030"), Some("v1")));
        let t = FileTag::parse("gemv_hfq4.sm_90.cu").unwrap();
        assert_eq!((t.name, t.arch, t.rest), ("gemv_hfq4", Some("sm_90"), None));
        let t = FileTag::parse("silu.fast.hip").unwrap();
        assert_eq!((t.name, t.tag, t.arch), ("silu", Some("fast"), None));
        assert_eq!(FileTag::parse("rmsnorm.hip").unwrap().tag, None);
        assert!(FileTag::parse("Makefile").is_none());
    }

    #[test]
    fn tags_against_the_table_and_the_rule() {
        let db = ArchDb::builtin();
        assert_eq!(db.classify_tag("gfx1201"), Some(TagKind::Chip));
        assert_eq!(db.classify_tag("gfx12"), Some(TagKind::Family));
        assert_eq!(db.classify_tag("gfx1299"), Some(TagKind::Unknown));
        assert_eq!(db.classify_tag("fast"), None);
        let table = db.family_tags("gfx1151", FamilyRule::Table);
        assert!(table.contains(&"gfx115".to_string()) && !table.contains(&"gfx11".to_string()), "{table:?}");
        assert_eq!(db.family_tags("gfx1151", FamilyRule::Prefix(5)), ["gfx11"]);
        assert_eq!(tag_reach(Some("gfx1100"), "gfx1100", &table), Some(Via::Chip));
        assert_eq!(tag_reach(Some("gfx115"), "gfx1151", &table), Some(Via::Family));
        assert_eq!(tag_reach(Some("gfx11"), "gfx1151", &table), None);
        assert_eq!(tag_reach(None, "gfx1151", &table), Some(Via::Base));
        assert_eq!(FamilyRule::parse("prefix5").unwrap(), FamilyRule::Prefix(5));
        assert_eq!(FamilyRule::parse("table").unwrap(), FamilyRule::Table);
        assert!(FamilyRule::parse("prefix").is_err());
    }
}
