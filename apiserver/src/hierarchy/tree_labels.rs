//! A namespace's tree labels (`<ancestor>.tree.hnc.x-k8s.io/depth: N`) as the forest keeps them.
//!
//! One per ancestor, they are most of a namespace's labels in a deep hierarchy: as strings in a
//! map they cost a namespace ten levels down over a kilobyte, and as a list some two hundred
//! bytes. A namespace below a correctly labelled parent carries exactly its parent's labels,
//! each one deeper, and its parent's own label at depth 1; such a namespace points at its
//! parent's labels instead of listing them (one small allocation, whatever its depth). Only
//! labels that are anything else are listed, with each ancestor's name shared with the forest.

use std::collections::BTreeMap;
use std::sync::Arc;

use hns_api::keys;

/// The tree labels one namespace carries, as observed.
#[derive(Debug, Clone)]
pub struct TreeLabels {
    /// The depth its own label gives (0 when right).
    own: Option<u32>,
    /// The labels of other namespaces (its ancestors, when right).
    ancestors: Ancestors,
}

#[derive(Debug, Clone)]
enum Ancestors {
    /// Listed one by one: (ancestor, depth).
    Listed(Arc<[(Arc<str>, u32)]>),
    /// The labels of the namespace's parent, its own included, each one deeper.
    BelowParent { parent: Arc<str>, labels: Arc<TreeLabels> },
}

impl Default for TreeLabels {
    fn default() -> Self {
        TreeLabels { own: None, ancestors: Ancestors::Listed(Arc::new([])) }
    }
}

impl PartialEq for TreeLabels {
    fn eq(&self, other: &Self) -> bool {
        self.own == other.own && self.ancestors() == other.ancestors()
    }
}

impl TreeLabels {
    /// Takes the tree labels out of the labels of namespace `name`; a value that is not a depth
    /// stays where it is (the controller then corrects it like any label it does not expect).
    pub fn take_from(labels: &mut BTreeMap<String, String>, name: &str) -> TreeLabels {
        let (mut own, mut ancestors) = (None, Vec::new());
        labels.retain(|k, v| match (keys::tree_label_ancestor(k), v.parse::<u32>()) {
            (Some(ancestor), Ok(depth)) if ancestor == name => {
                own = Some(depth);
                false
            }
            (Some(ancestor), Ok(depth)) => {
                ancestors.push((Arc::from(ancestor), depth));
                false
            }
            _ => true,
        });
        ancestors.sort();
        TreeLabels { own, ancestors: Ancestors::Listed(ancestors.into()) }
    }

    /// The labels of other namespaces, (ancestor, depth), in name order.
    pub fn ancestors(&self) -> Vec<(&Arc<str>, u32)> {
        let mut out = Vec::new();
        let (mut at, mut deeper) = (self, 0);
        loop {
            match &at.ancestors {
                Ancestors::Listed(listed) => {
                    out.extend(listed.iter().map(|(a, depth)| (a, depth + deeper)));
                    break;
                }
                Ancestors::BelowParent { parent, labels } => {
                    deeper += 1;
                    out.extend(labels.own.map(|depth| (parent, depth + deeper)));
                    at = labels;
                }
            }
        }
        out.sort();
        out
    }

    /// The labels of namespace `name`, as it carries them.
    pub fn iter(&self, name: &str) -> impl Iterator<Item = (String, String)> {
        let own = self.own.map(|depth| (keys::tree_label(name), depth.to_string()));
        let others: Vec<(String, String)> =
            self.ancestors().into_iter().map(|(a, depth)| (keys::tree_label(a), depth.to_string())).collect();
        own.into_iter().chain(others)
    }

    /// Whether its ancestors' labels are listed (not its parent's, pointed at).
    pub fn is_listed(&self) -> bool {
        matches!(self.ancestors, Ancestors::Listed(_))
    }

    /// These labels as pointing at `parent`'s, `parent_labels`, if they are exactly those one
    /// deeper: the parent's own label at depth 1, and each of the parent's ancestors one
    /// further down.
    pub fn below(&self, parent: &Arc<str>, parent_labels: &Arc<TreeLabels>) -> Option<TreeLabels> {
        let own_of_parent = parent_labels.own?;
        let mut expected: Vec<(&Arc<str>, u32)> =
            parent_labels.ancestors().into_iter().map(|(a, depth)| (a, depth + 1)).collect();
        expected.push((parent, own_of_parent + 1));
        expected.sort();
        let ancestors = Ancestors::BelowParent { parent: parent.clone(), labels: parent_labels.clone() };
        (self.ancestors() == expected).then_some(TreeLabels { own: self.own, ancestors })
    }

    /// These labels listed with each ancestor's name replaced by `held(name)` where it gives one
    /// (the forest's own copy of the name).
    pub fn sharing_names(&self, held: impl Fn(&str) -> Option<Arc<str>>) -> TreeLabels {
        let listed: Vec<(Arc<str>, u32)> = self
            .ancestors()
            .into_iter()
            .map(|(a, depth)| (held(a).unwrap_or_else(|| a.clone()), depth))
            .collect();
        TreeLabels { own: self.own, ancestors: Ancestors::Listed(listed.into()) }
    }

    /// Whether these labels point at `labels` as their parent's.
    pub fn points_at(&self, labels: &Arc<TreeLabels>) -> bool {
        matches!(&self.ancestors, Ancestors::BelowParent { labels: theirs, .. } if Arc::ptr_eq(theirs, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_of(name: &str, pairs: &[(&str, &str)]) -> TreeLabels {
        let mut map: BTreeMap<String, String> =
            pairs.iter().map(|(a, d)| (keys::tree_label(a), d.to_string())).collect();
        map.insert("team".into(), "blue".into());
        let labels = TreeLabels::take_from(&mut map, name);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["team"], "other labels stay");
        labels
    }

    fn as_carried(labels: &TreeLabels, name: &str) -> BTreeMap<String, String> {
        labels.iter(name).collect()
    }

    #[test]
    fn a_namespace_below_a_correctly_labelled_parent_points_at_its_labels() {
        let root = Arc::new(labels_of("acme", &[("acme", "0")]));
        let team_name: Arc<str> = "team-a".into();
        let team = labels_of("team-a", &[("team-a", "0"), ("acme", "1")]);
        let team = Arc::new(team.below(&"acme".into(), &root).expect("acme's labels, one deeper"));
        let dev = labels_of("dev", &[("dev", "0"), ("team-a", "1"), ("acme", "2")]);
        let below = dev.below(&team_name, &team).expect("team-a's labels, one deeper");
        assert!(below.points_at(&team));
        assert_eq!(below, dev);
        assert_eq!(as_carried(&below, "dev"), as_carried(&dev, "dev"), "given back as carried");
        assert_eq!(below.ancestors().len(), 2);
    }

    #[test]
    fn anything_else_is_listed() {
        let root = Arc::new(labels_of("acme", &[("acme", "0")]));
        for pairs in [
            &[("dev", "0"), ("acme", "2")][..],             // a wrong depth
            &[("dev", "0"), ("acme", "1"), ("x", "2")][..], // one too many
            &[("dev", "0")][..],                            // none of the parent's
        ] {
            assert!(labels_of("dev", pairs).below(&"acme".into(), &root).is_none(), "{pairs:?}");
        }
        let unlabelled_parent = Arc::new(labels_of("acme", &[]));
        assert!(labels_of("dev", &[("dev", "0"), ("acme", "1")])
            .below(&"acme".into(), &unlabelled_parent)
            .is_none());
    }

    #[test]
    fn listed_names_can_be_the_forests() {
        let held: Arc<str> = "acme".into();
        let listed = labels_of("dev", &[("dev", "0"), ("acme", "1")])
            .sharing_names(|a| (a == "acme").then(|| held.clone()));
        assert!(Arc::ptr_eq(listed.ancestors()[0].0, &held));
        assert!(listed.is_listed());
    }
}
