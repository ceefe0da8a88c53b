//! An object's exception annotations (HNC's `propagate.hnc.x-k8s.io/…`), read in one place.
//!
//! [`Exceptions::parse`] turns them into a typed value or an [`Error`] that says what is wrong
//! and what is accepted. Admission refuses what does not parse ([`check_change`]); propagation
//! sends such an object nowhere. Both read the annotations here, so the controller can never
//! read a value differently from the way admission judged it: a typo in `none` must not copy a
//! Secret into every descendant, and a typo in `select` must not silently send it nowhere.
//!
//! The rules are HNC's (`internal/selectors`, `internal/objects/validator.go`): `none` and
//! `all` are booleans as Go's `strconv.ParseBool` reads them; `select` is a label selector;
//! `treeSelect` is a comma-separated list of namespace names, each optionally negated with `!`,
//! at most one of them not negated; an object carries at most one of the four; and no other key
//! under a `<word>.hnc.x-k8s.io/` prefix is accepted.

use std::collections::BTreeMap;

use hns_api::config::Mode;
use hns_api::keys;
use kube::core::Selector;

use crate::hierarchy::rules::is_dns1123_label;
use crate::http::selector;

/// Annotation: propagate only to namespaces whose labels match this selector.
pub const SELECT: &str = "propagate.hnc.x-k8s.io/select";
/// Annotation: propagate only to these subtrees: `child` or `!a, !b` (HNC's tree selector).
pub const TREE_SELECT: &str = "propagate.hnc.x-k8s.io/treeSelect";
/// Annotation: `true` stops propagation of this object.
pub const NONE: &str = "propagate.hnc.x-k8s.io/none";
/// Annotation: `true` propagates this object in `AllowPropagate` mode.
pub const ALL: &str = "propagate.hnc.x-k8s.io/all";

/// The four annotations, in the order HNC checks and names them.
const KEYS: [&str; 4] = [SELECT, TREE_SELECT, NONE, ALL];

/// Why an object's exception annotations cannot be read. Every message names the annotation,
/// the value, and what would be accepted instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A key under HNC's annotation prefixes that is none of the four.
    #[error("invalid HNC exceptions annotation: {key}, should be one of the following: {SELECT}; {TREE_SELECT}; {NONE}; {ALL}")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// `none` or `all` is not a boolean.
    #[error("invalid {key} value \"{value}\": use \"true\" or \"false\" (also accepted, as by HNC: 1, t, T, TRUE, True, 0, f, F, FALSE, False)")]
    NotBool {
        /// [`NONE`] or [`ALL`].
        key: &'static str,
        /// The value found.
        value: String,
    },
    /// `select` is not a label selector.
    #[error("invalid Kubernetes labelSelector in {SELECT}: {reason}; use a label selector such as \"env=prod\", \"env in (prod, staging)\" or \"!legacy\"")]
    Selector {
        /// The parser's explanation, which quotes the value.
        reason: String,
    },
    /// A `treeSelect` entry is not a namespace name.
    #[error("invalid HNC \"{TREE_SELECT}\" value \"{value}\": \"{name}\" is not a valid namespace name; use a comma-separated list of namespace names, each optionally preceded by \"!\" to exclude its subtree, such as \"team-a\" or \"!team-b, !team-c\"")]
    TreeSelectorName {
        /// The whole annotation.
        value: String,
        /// The entry that is not a namespace name (without its `!`).
        name: String,
    },
    /// `treeSelect` names more than one subtree to go to: no namespace is in two.
    #[error("invalid HNC \"{TREE_SELECT}\" value \"{value}\": should only have one non-negated namespace, but got multiple: {}; name one subtree (\"team-a\"), or exclude several (\"!team-b, !team-c\")", names.join(", "))]
    TreeSelectorSeveral {
        /// The whole annotation.
        value: String,
        /// The entries without `!`.
        names: Vec<String>,
    },
    /// More than one of the four annotations is set.
    #[error("cannot have more than one selector at the same time, but got multiple: {}; keep only one of them", keys.join(", "))]
    Several {
        /// The annotations set, in HNC's order.
        keys: Vec<&'static str>,
    },
}

/// HNC's tree selector: the subtree to go to, if any, and the subtrees to stay out of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TreeSelector {
    include: Option<String>,
    exclude: Vec<String>,
}

impl TreeSelector {
    fn parse(value: &str) -> Result<Self, Error> {
        let mut tree = TreeSelector::default();
        let mut included = Vec::new();
        for entry in value.split(',').map(str::trim) {
            let (negated, name) = match entry.strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, entry),
            };
            if !is_dns1123_label(name) {
                return Err(Error::TreeSelectorName { value: value.into(), name: name.into() });
            }
            if negated {
                tree.exclude.push(name.to_string());
            } else {
                included.push(name.to_string());
            }
        }
        if included.len() > 1 {
            return Err(Error::TreeSelectorSeveral { value: value.into(), names: included });
        }
        tree.include = included.pop();
        Ok(tree)
    }

    /// Whether namespace `target` (with `labels`, its tree labels among them) is selected. A
    /// subtree includes its root, which carries no tree label of its own in every cluster.
    fn selects(&self, target: &str, labels: &BTreeMap<String, String>) -> bool {
        let in_subtree = |root: &str| root == target || labels.contains_key(&keys::tree_label(root));
        self.include.as_deref().is_none_or(in_subtree) && !self.exclude.iter().any(|e| in_subtree(e))
    }
}

/// An object's exceptions, parsed. The default (no annotations) restricts nothing.
#[derive(Debug, Clone, Default)]
pub struct Exceptions {
    select: Option<Selector>,
    tree: Option<TreeSelector>,
    none: bool,
    all: bool,
}

type Annotations = BTreeMap<String, String>;

fn value<'a>(annotations: Option<&'a Annotations>, key: &str) -> &'a str {
    annotations.and_then(|a| a.get(key)).map_or("", String::as_str)
}

/// Go's `strconv.ParseBool`, which HNC reads `none` and `all` with; empty is false.
fn parse_bool(key: &'static str, value: &str) -> Result<bool, Error> {
    match value {
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        _ => Err(Error::NotBool { key, value: value.into() }),
    }
}

/// A non-empty selector; `None` for an empty one, which selects everything.
fn parse_select(value: &str) -> Result<Option<Selector>, Error> {
    let parsed = selector::parse_label_selector(value).map_err(|e| Error::Selector { reason: e.message })?;
    Ok((!parsed.selects_all()).then_some(parsed))
}

fn parse_tree(value: &str) -> Result<Option<TreeSelector>, Error> {
    if value.is_empty() {
        return Ok(None);
    }
    TreeSelector::parse(value).map(Some)
}

/// Checks one of the four annotations' value alone.
fn check_value(key: &str, value: &str) -> Result<(), Error> {
    match key {
        SELECT => parse_select(value).map(drop),
        TREE_SELECT => parse_tree(value).map(drop),
        NONE => parse_bool(NONE, value).map(drop),
        _ => parse_bool(ALL, value).map(drop),
    }
}

/// Whether `key` lies under one of HNC's annotation prefixes (`<word>.hnc.x-k8s.io/`), as HNC's
/// validator decides it. The webhook's `matchConditions` send exactly these objects.
fn under_hnc_prefix(key: &str) -> bool {
    let domain = key.split_once('/').map_or(key, |(d, _)| d);
    domain.split_once('.').is_some_and(|(_, rest)| rest == "hnc.x-k8s.io")
}

/// The first key under HNC's prefixes that is not one of the four annotations.
fn check_keys(annotations: Option<&Annotations>) -> Result<(), Error> {
    let unknown = annotations
        .into_iter()
        .flat_map(|a| a.keys())
        .find(|k| under_hnc_prefix(k) && !KEYS.contains(&k.as_str()));
    unknown.map_or(Ok(()), |key| Err(Error::UnknownKey { key: key.clone() }))
}

/// At most one of the four annotations may be set (non-empty).
fn check_unique(annotations: Option<&Annotations>) -> Result<(), Error> {
    let set: Vec<&'static str> = KEYS.into_iter().filter(|k| !value(annotations, k).is_empty()).collect();
    if set.len() > 1 {
        return Err(Error::Several { keys: set });
    }
    Ok(())
}

impl Exceptions {
    /// Reads `annotations`, refusing anything admission would refuse on a new object.
    pub fn parse(annotations: Option<&Annotations>) -> Result<Self, Error> {
        check_keys(annotations)?;
        let parsed = Exceptions {
            select: parse_select(value(annotations, SELECT))?,
            tree: parse_tree(value(annotations, TREE_SELECT))?,
            none: parse_bool(NONE, value(annotations, NONE))?,
            all: parse_bool(ALL, value(annotations, ALL))?,
        };
        check_unique(annotations)?;
        Ok(parsed)
    }

    /// Whether a source with these exceptions goes to namespace `target` (with `labels`) when
    /// its kind is in `mode`. As HNC's `ShouldPropagate`: a selector both restricts the targets
    /// and opts the object in under `AllowPropagate`, as `all` does; `none` stops it.
    pub fn selects(&self, mode: Mode, target: &str, labels: &BTreeMap<String, String>) -> bool {
        if !matches!(mode, Mode::Propagate | Mode::AllowPropagate) || self.none {
            return false;
        }
        if self.select.as_ref().is_some_and(|s| !selector::matches(s, Some(labels))) {
            return false;
        }
        if self.tree.as_ref().is_some_and(|t| !t.selects(target, labels)) {
            return false;
        }
        mode == Mode::Propagate || self.all || self.select.is_some() || self.tree.is_some()
    }
}

/// Admission's check of a create (`old` is `None`) or an update, as HNC's validator makes it:
/// unknown keys are always refused, and a value only when it changed, so an object that got a
/// bad value past admission (before hns was installed) can still be edited otherwise, or fixed.
pub fn check_change(old: Option<&Annotations>, new: Option<&Annotations>) -> Result<(), Error> {
    check_keys(new)?;
    let changed: Vec<&str> = KEYS.into_iter().filter(|k| value(old, k) != value(new, k)).collect();
    for key in &changed {
        check_value(key, value(new, key))?;
    }
    if changed.is_empty() {
        return Ok(());
    }
    check_unique(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_support::string_map as annotations;
    use crate::test_support::string_map as labels;

    fn parse(kv: &[(&str, &str)]) -> Result<Exceptions, Error> {
        Exceptions::parse(Some(&annotations(kv)))
    }

    #[test]
    fn booleans_are_read_as_go_reads_them() {
        for yes in ["1", "t", "T", "true", "TRUE", "True"] {
            assert!(parse(&[(NONE, yes)]).unwrap().none, "{yes}");
            assert!(parse(&[(ALL, yes)]).unwrap().all, "{yes}");
        }
        for no in ["", "0", "f", "F", "false", "FALSE", "False"] {
            assert!(!parse(&[(NONE, no)]).unwrap().none, "{no}");
        }
        for bad in ["maybe", "yes", "tRuE", " true", "2"] {
            let err = parse(&[(NONE, bad)]).unwrap_err();
            assert_eq!(err, Error::NotBool { key: NONE, value: bad.into() });
            assert!(err.to_string().contains("use \"true\" or \"false\""), "{err}");
        }
        assert!(matches!(parse(&[(ALL, "yes")]), Err(Error::NotBool { key: ALL, .. })));
    }

    #[test]
    fn selectors_must_parse() {
        let err = parse(&[(SELECT, "!!bad")]).unwrap_err();
        assert!(matches!(err, Error::Selector { .. }));
        let message = err.to_string();
        assert!(message.contains("\"!!bad\"") && message.contains(SELECT), "{message}");
        assert!(parse(&[(SELECT, "env in (prod")]).is_err());
        assert!(parse(&[(SELECT, "env=prod, !legacy")]).unwrap().select.is_some());
        assert!(parse(&[(SELECT, "")]).unwrap().select.is_none(), "empty selects everything");
    }

    #[test]
    fn tree_selectors_are_namespace_names_with_at_most_one_included() {
        assert_eq!(
            parse(&[(TREE_SELECT, "a, b")]).unwrap_err(),
            Error::TreeSelectorSeveral { value: "a, b".into(), names: vec!["a".into(), "b".into()] }
        );
        for (value, name) in [("Team", "Team"), ("a,", ""), ("! a", " a"), ("!", ""), ("a/b", "a/b")] {
            assert_eq!(
                parse(&[(TREE_SELECT, value)]).unwrap_err(),
                Error::TreeSelectorName { value: value.into(), name: name.into() },
                "{value}"
            );
        }
        let t = parse(&[(TREE_SELECT, "!b , a, !c")]).unwrap().tree.unwrap();
        assert_eq!(t, TreeSelector { include: Some("a".into()), exclude: vec!["b".into(), "c".into()] });
    }

    #[test]
    fn at_most_one_exception_and_no_unknown_keys() {
        let err = parse(&[(TREE_SELECT, "a"), (NONE, "true")]).unwrap_err();
        assert_eq!(err, Error::Several { keys: vec![TREE_SELECT, NONE] });
        assert!(err.to_string().contains(&format!("{TREE_SELECT}, {NONE}")), "{err}");
        assert!(parse(&[(SELECT, ""), (NONE, "true")]).is_ok(), "empty values do not count");
        for key in ["propagate.hnc.x-k8s.io/nnone", "propagat.hnc.x-k8s.io/none", "x.hnc.x-k8s.io"] {
            assert_eq!(parse(&[(key, "true")]).unwrap_err(), Error::UnknownKey { key: key.into() }, "{key}");
        }
        for other in ["hnc.x-k8s.io/anything", "a.b.hnc.x-k8s.io/x", "example.com/none"] {
            assert!(parse(&[(other, "x")]).is_ok(), "{other} is not HNC's to judge");
        }
    }

    #[test]
    fn where_a_source_goes() {
        let target = labels(&[("a.tree.hnc.x-k8s.io/depth", "1"), ("env", "prod")]);
        let goes = |kv: &[(&str, &str)], mode| parse(kv).unwrap().selects(mode, "b", &target);
        assert!(goes(&[], Mode::Propagate));
        assert!(!goes(&[], Mode::AllowPropagate));
        assert!(!goes(&[], Mode::Remove) && !goes(&[], Mode::Ignore));
        assert!(goes(&[(ALL, "true")], Mode::AllowPropagate));
        assert!(!goes(&[(ALL, "false")], Mode::AllowPropagate));
        assert!(!goes(&[(NONE, "True")], Mode::Propagate));
        assert!(goes(&[(NONE, "false")], Mode::Propagate));
        assert!(!goes(&[(SELECT, "env=dev")], Mode::Propagate));
        assert!(goes(&[(SELECT, "env in (prod)")], Mode::AllowPropagate));
        assert!(goes(&[(TREE_SELECT, "a")], Mode::AllowPropagate));
        assert!(!goes(&[(TREE_SELECT, "!a")], Mode::Propagate));
        assert!(goes(&[(TREE_SELECT, "!c, !d")], Mode::Propagate));
        assert!(!goes(&[(TREE_SELECT, "c")], Mode::Propagate));
        let root = parse(&[(TREE_SELECT, "b")]).unwrap();
        assert!(root.selects(Mode::Propagate, "b", &BTreeMap::new()), "a subtree includes its root");
    }

    #[test]
    fn admission_judges_what_changed() {
        let bad = annotations(&[(NONE, "maybe")]);
        assert!(check_change(None, Some(&bad)).is_err(), "a create");
        assert!(check_change(Some(&annotations(&[])), Some(&bad)).is_err(), "added by an update");
        assert!(check_change(Some(&bad), Some(&bad)).is_ok(), "kept as it was: other edits pass");
        assert!(check_change(Some(&bad), Some(&annotations(&[(NONE, "true")]))).is_ok(), "fixed");
        assert!(check_change(Some(&bad), None).is_ok(), "removed");
        let both = annotations(&[(NONE, "maybe"), (SELECT, "env=prod")]);
        assert!(check_change(Some(&bad), Some(&both)).is_err(), "a second exception added");
        let unknown = annotations(&[("propagate.hnc.x-k8s.io/nnone", "true")]);
        assert!(check_change(Some(&unknown), Some(&unknown)).is_err(), "unknown keys always");
    }
}
