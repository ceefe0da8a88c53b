//! Label and field selectors from query strings.
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels`: `k`, `!k`, `k=v`, `k==v`, `k!=v`,
//! `k in (a,b)`, `k notin (a,b)`, joined by commas. Matching is kube-core's. Field selectors
//! support what every Kubernetes list supports: `metadata.name` and `metadata.namespace`.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Expression, Selector, SelectorExt};

use crate::http::status::ApiError;

/// Parses a label selector; an empty string selects everything.
pub fn parse_label_selector(s: &str) -> Result<Selector, ApiError> {
    let bad = |why: &str| {
        ApiError::bad_request(format!("unable to parse requirement: {why} in label selector \"{s}\""))
    };
    let mut exprs = Vec::new();
    for term in split_terms(s) {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        let expr = if let Some(key) = term.strip_prefix('!') {
            Expression::DoesNotExist(valid_key(key.trim()).ok_or_else(|| bad("invalid key"))?)
        } else if let Some((k, v)) = term.split_once("!=") {
            Expression::NotEqual(
                valid_key(k.trim()).ok_or_else(|| bad("invalid key"))?,
                value(v).ok_or_else(|| bad("invalid value"))?,
            )
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            Expression::Equal(
                valid_key(k.trim()).ok_or_else(|| bad("invalid key"))?,
                value(v).ok_or_else(|| bad("invalid value"))?,
            )
        } else if let Some((k, set)) = split_set(term, " notin ") {
            Expression::NotIn(
                valid_key(k).ok_or_else(|| bad("invalid key"))?,
                set.ok_or_else(|| bad("invalid set"))?,
            )
        } else if let Some((k, set)) = split_set(term, " in ") {
            Expression::In(
                valid_key(k).ok_or_else(|| bad("invalid key"))?,
                set.ok_or_else(|| bad("invalid set"))?,
            )
        } else {
            Expression::Exists(valid_key(term).ok_or_else(|| bad("invalid key"))?)
        };
        exprs.push(expr);
    }
    Ok(exprs.into_iter().collect())
}

/// Whether `labels` satisfy `selector`.
pub fn matches(selector: &Selector, labels: Option<&BTreeMap<String, String>>) -> bool {
    selector.selects_all() || selector.matches(labels.unwrap_or(&BTreeMap::new()))
}

/// Splits on commas outside parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn split_set<'a>(term: &'a str, op: &str) -> Option<(&'a str, Option<BTreeSet<String>>)> {
    let (k, rest) = term.split_once(op)?;
    let rest = rest.trim();
    let inner = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')'));
    let set = inner.and_then(|inner| inner.split(',').map(value).collect::<Option<BTreeSet<String>>>());
    Some((k.trim(), set))
}

/// A label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
fn valid_key(k: &str) -> Option<String> {
    let name = k.rsplit_once('/').map_or(k, |(prefix, name)| if prefix.is_empty() { "" } else { name });
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    ok.then(|| k.to_string())
}

fn value(v: &str) -> Option<String> {
    let v = v.trim();
    let ok = v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then(|| v.to_string())
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(FieldKey, bool, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldKey {
    Name,
    Namespace,
}

impl FieldSelector {
    /// Parses `metadata.name=x,metadata.namespace!=y`; other fields are a 400, as for any
    /// Kubernetes resource that does not index them.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, equal, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: \"{term}\": expected field=value"
                )));
            };
            let key = match k.trim() {
                "metadata.name" => FieldKey::Name,
                "metadata.namespace" => FieldKey::Namespace,
                other => {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {other} (supported: metadata.name, metadata.namespace)"
                    )))
                }
            };
            terms.push((key, equal, v.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether an object with this name and namespace is selected.
    pub fn matches(&self, namespace: &str, name: &str) -> bool {
        self.terms.iter().all(|(k, equal, v)| {
            let actual = match k {
                FieldKey::Name => name,
                FieldKey::Namespace => namespace,
            };
            (actual == v) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::string_map as labels;

    #[test]
    fn label_selector_grammar() {
        let l = labels(&[("env", "prod"), ("team", "a"), ("acme.tree.hnc.x-k8s.io/depth", "1")]);
        let yes = [
            "",
            "env",
            "env=prod",
            "env==prod",
            "env!=dev",
            "!missing",
            "env in (prod, dev)",
            "team notin (b,c)",
            "env=prod,team in (a)",
            "acme.tree.hnc.x-k8s.io/depth=1",
        ];
        for s in yes {
            assert!(matches(&parse_label_selector(s).unwrap(), Some(&l)), "{s} should match");
        }
        let no = ["missing", "env=dev", "!env", "env in (dev)", "team notin (a)", "env=prod,team=b"];
        for s in no {
            assert!(!matches(&parse_label_selector(s).unwrap(), Some(&l)), "{s} should not match");
        }
        assert!(matches(&parse_label_selector("!x").unwrap(), None));
    }

    #[test]
    fn label_selector_errors() {
        for s in ["env in prod", "=x", "e nv=1", "env=a b", "env in (a b)"] {
            assert_eq!(parse_label_selector(s).unwrap_err().code, 400, "{s}");
        }
    }

    #[test]
    fn field_selector() {
        let f = FieldSelector::parse("metadata.name=hierarchy,metadata.namespace!=kube-system").unwrap();
        assert!(f.matches("team-a", "hierarchy"));
        assert!(!f.matches("kube-system", "hierarchy"));
        assert!(!f.matches("team-a", "other"));
        assert!(FieldSelector::parse("").unwrap().matches("x", "y"));
        assert_eq!(FieldSelector::parse("spec.parent=a").unwrap_err().code, 400);
        assert_eq!(FieldSelector::parse("metadata.name").unwrap_err().code, 400);
    }
}
