//! What the hns administrator configured: namespaces kept out of hierarchies, which labels and
//! annotations may be managed through the hierarchy, and hns's own identity.

use std::collections::BTreeSet;

use regex::Regex;

/// Namespaces that never take part in a hierarchy unless configured otherwise (HNC's list,
/// with hns's own namespace).
pub const DEFAULT_EXCLUDED: &[&str] = &["kube-system", "kube-public", "kube-node-lease", "hns-system"];

/// The administrator's settings.
#[derive(Debug, Clone)]
pub struct Policy {
    excluded: BTreeSet<String>,
    managed_labels: Vec<Regex>,
    managed_annotations: Vec<Regex>,
    /// The user hns-apiserver authenticates as; its namespace writes pass the webhook.
    pub hns_user: String,
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
            managed_labels: managed_labels.iter().map(anchored).collect::<Result<_, _>>()?,
            managed_annotations: managed_annotations.iter().map(anchored).collect::<Result<_, _>>()?,
            hns_user: hns_user.to_string(),
        })
    }

    /// Whether `ns` is kept out of hierarchies.
    pub fn is_excluded(&self, ns: &str) -> bool {
        self.excluded.contains(ns)
    }

    /// The namespaces kept out of hierarchies.
    pub fn excluded(&self) -> impl Iterator<Item = &str> {
        self.excluded.iter().map(String::as_str)
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
}
