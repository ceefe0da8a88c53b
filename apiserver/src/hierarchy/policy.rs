//! What the hns administrator configured: namespaces kept out of hierarchies, which labels and
//! annotations may be managed through the hierarchy, and hns's own identity.

use std::collections::BTreeSet;

use regex::Regex;

/// Namespaces that never take part in a hierarchy unless configured otherwise (HNC's list,
/// with hns's own namespace).
pub const DEFAULT_EXCLUDED: &[&str] = &["kube-system", "kube-public", "kube-node-lease", "hns-system"];

/// Labels never copied to descendants unless configured otherwise: those by which GitOps tools
/// claim objects. A copy carrying them would be taken for the tool's own object, and pruned or
/// adopted by it (HNC issues #75 and #330): Argo CD's label-based tracking, and Flux's
/// kustomize and helm controllers.
pub const DEFAULT_UNPROPAGATED_LABELS: &[&str] =
    &["app.kubernetes.io/instance", "kustomize.toolkit.fluxcd.io/*", "helm.toolkit.fluxcd.io/*"];

/// Annotations never copied to descendants unless configured otherwise: Argo CD's
/// annotation-based tracking (its default since Argo CD 3.0). kubectl's last-applied record is
/// never copied, whatever is configured.
pub const DEFAULT_UNPROPAGATED_ANNOTATIONS: &[&str] = &["argocd.argoproj.io/tracking-id"];

/// Labels (`key=value`) whose objects never propagate unless configured otherwise: HNC's
/// default, Rancher's own objects.
pub const DEFAULT_NO_PROPAGATION_LABELS: &[&str] = &["cattle.io/creator=norman"];

/// The administrator's settings.
#[derive(Debug, Clone)]
pub struct Policy {
    excluded: BTreeSet<String>,
    /// Only namespaces whose whole name this matches take part in hierarchies (HNC's
    /// `--included-namespace-regex`); all when `None`.
    included: Option<Regex>,
    managed_labels: Vec<Regex>,
    managed_annotations: Vec<Regex>,
    /// The user hns-apiserver authenticates as; its namespace writes pass the webhook.
    pub hns_user: String,
    /// Label keys a propagated copy leaves out.
    pub unpropagated_labels: KeyList,
    /// Annotation keys a propagated copy leaves out.
    pub unpropagated_annotations: KeyList,
    /// Labels (key, value) whose objects never propagate.
    pub no_propagation_labels: Vec<(String, String)>,
    /// Whether a namespace outside every hierarchy carries its own tree label and
    /// `included-namespace`, as under HNC (`--label-lone-namespaces`).
    pub label_lone_namespaces: bool,
}

/// `key=value` as a pair, as `--nopropagation-label` takes it.
pub fn label_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{text:?} is not a label as key=value, such as cattle.io/creator=norman")),
    }
}

/// Label or annotation keys, each whole (`app.kubernetes.io/instance`) or, ending in `*`, a
/// prefix (`kustomize.toolkit.fluxcd.io/*`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyList(Vec<String>);

impl KeyList {
    /// The list of `entries`; empty entries are skipped (`--unpropagated-label=` clears the
    /// list), and `*` may only end one.
    pub fn new(entries: &[String]) -> Result<KeyList, String> {
        let entries: Vec<String> = entries.iter().filter(|e| !e.is_empty()).cloned().collect();
        if let Some(bad) = entries.iter().find(|e| e.trim_end_matches('*').contains('*') || e.ends_with("**"))
        {
            return Err(format!(
                "{bad:?}: a key may only end in one `*` (a prefix), as in kustomize.toolkit.fluxcd.io/*"
            ));
        }
        Ok(KeyList(entries))
    }

    /// The default list `keys`.
    pub fn of(keys: &[&str]) -> KeyList {
        KeyList(keys.iter().map(|k| k.to_string()).collect())
    }

    /// Whether `key` is in the list.
    pub fn contains(&self, key: &str) -> bool {
        self.0.iter().any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == entry,
        })
    }
}

impl Policy {
    /// A policy from flag values. Patterns must match a whole key (HNC's `^…$` convention).
    pub fn new(
        excluded: &[String],
        managed_labels: &[String],
        managed_annotations: &[String],
        hns_user: &str,
    ) -> Result<Self, regex::Error> {
        let anchored = |p: &String| Regex::new(&format!("^(?:{p})$"));
        Ok(Policy {
            excluded: excluded.iter().cloned().collect(),
            included: None,
            managed_labels: managed_labels.iter().map(anchored).collect::<Result<_, _>>()?,
            managed_annotations: managed_annotations.iter().map(anchored).collect::<Result<_, _>>()?,
            hns_user: hns_user.to_string(),
            unpropagated_labels: KeyList::of(DEFAULT_UNPROPAGATED_LABELS),
            unpropagated_annotations: KeyList::of(DEFAULT_UNPROPAGATED_ANNOTATIONS),
            no_propagation_labels: DEFAULT_NO_PROPAGATION_LABELS
                .iter()
                .filter_map(|l| label_pair(l).ok())
                .collect(),
            label_lone_namespaces: true,
        })
    }

    /// This policy with lone namespaces labelled, or not.
    pub fn with_lone_namespace_labels(self, label_lone_namespaces: bool) -> Policy {
        Policy { label_lone_namespaces, ..self }
    }

    /// This policy with the labels whose objects never propagate.
    pub fn with_no_propagation_labels(self, labels: Vec<(String, String)>) -> Policy {
        Policy { no_propagation_labels: labels, ..self }
    }

    /// This policy with the label and annotation keys copies leave out.
    pub fn with_unpropagated(self, labels: KeyList, annotations: KeyList) -> Policy {
        Policy { unpropagated_labels: labels, unpropagated_annotations: annotations, ..self }
    }

    /// This policy with only namespaces whose whole name matches `pattern` taking part in
    /// hierarchies (`.*`, all, is as none).
    pub fn with_included(self, pattern: &str) -> Result<Policy, regex::Error> {
        let included = (pattern != ".*").then(|| Regex::new(&format!("^(?:{pattern})$"))).transpose()?;
        Ok(Policy { included, ..self })
    }

    /// Whether `ns` is kept out of hierarchies: listed as excluded, or not matching the included
    /// pattern.
    pub fn is_excluded(&self, ns: &str) -> bool {
        self.excluded.contains(ns) || self.included.as_ref().is_some_and(|r| !r.is_match(ns))
    }

    /// The namespaces listed as kept out of hierarchies.
    pub fn excluded(&self) -> impl Iterator<Item = &str> {
        self.excluded.iter().map(String::as_str)
    }

    /// The anchored pattern namespaces must match to take part in hierarchies, if any.
    pub fn included_pattern(&self) -> Option<&str> {
        self.included.as_ref().map(Regex::as_str)
    }

    /// Whether `key` may be set through `spec.labels`.
    pub fn is_managed_label(&self, key: &str) -> bool {
        self.managed_labels.iter().any(|r| r.is_match(key))
    }

    /// Whether `key` may be set through `spec.annotations`.
    pub fn is_managed_annotation(&self, key: &str) -> bool {
        self.managed_annotations.iter().any(|r| r.is_match(key))
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// The default policy, with `team.example.com/.*` labels and `note` annotations managed.
    pub fn policy() -> Policy {
        let excluded: Vec<String> = DEFAULT_EXCLUDED.iter().map(|s| s.to_string()).collect();
        Policy::new(
            &excluded,
            &["team\\.example\\.com/.*".into()],
            &["note".into()],
            "system:serviceaccount:hns-system:hns-apiserver",
        )
        .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::policy;
    use super::KeyList;

    #[test]
    fn patterns_match_whole_keys() {
        let p = policy();
        assert!(p.is_managed_label("team.example.com/owner"));
        assert!(!p.is_managed_label("x.team.example.com/owner"));
        assert!(p.is_managed_annotation("note"));
        assert!(!p.is_managed_annotation("notes"));
        assert!(p.is_excluded("kube-system"));
        assert!(!p.is_excluded("default"));
    }

    #[test]
    fn key_lists_take_whole_keys_and_prefixes() {
        let keys = KeyList::new(&["a.io/x".into(), "flux.io/*".into(), String::new()]).unwrap();
        assert!(keys.contains("a.io/x"));
        assert!(!keys.contains("a.io/xy"), "a whole key");
        assert!(keys.contains("flux.io/name") && keys.contains("flux.io/"));
        assert!(!keys.contains("other.flux.io/name"));
        assert_eq!(KeyList::new(&[String::new()]).unwrap(), KeyList::default(), "an empty entry clears");
        for bad in ["a*b", "a/**", "*x*"] {
            assert!(KeyList::new(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_included_pattern_excludes_every_other_namespace() {
        let p = policy().with_included("team-.*|shared").unwrap();
        assert!(!p.is_excluded("team-a") && !p.is_excluded("shared"));
        assert!(
            p.is_excluded("default") && p.is_excluded("xteam-a") && p.is_excluded("shared2"),
            "whole names"
        );
        let q = policy().with_included("kube-.*").unwrap();
        assert!(q.is_excluded("kube-system"), "the excluded list still applies");
        assert_eq!(policy().with_included(".*").unwrap().included_pattern(), None);
        assert!(policy().with_included("(").is_err());
    }

    #[test]
    fn labels_are_key_equals_value() {
        assert_eq!(super::label_pair("a.io/b=c"), Ok(("a.io/b".into(), "c".into())));
        assert_eq!(super::label_pair("a=").map(|p| p.1), Ok(String::new()), "an empty value");
        assert!(super::label_pair("novalue").is_err());
        assert!(super::label_pair("=x").is_err());
        assert_eq!(policy().no_propagation_labels, [("cattle.io/creator".to_string(), "norman".to_string())]);
    }

    #[test]
    fn gitops_tracking_keys_are_left_out_by_default() {
        let p = policy();
        for label in [
            "app.kubernetes.io/instance",
            "kustomize.toolkit.fluxcd.io/name",
            "helm.toolkit.fluxcd.io/namespace",
        ] {
            assert!(p.unpropagated_labels.contains(label), "{label}");
        }
        assert!(p.unpropagated_annotations.contains("argocd.argoproj.io/tracking-id"));
        assert!(!p.unpropagated_labels.contains("app.kubernetes.io/name"));
    }
}
