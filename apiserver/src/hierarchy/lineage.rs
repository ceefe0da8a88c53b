//! A namespace's line of ancestors, walked once. The controller's upkeep of a namespace asks
//! several things of its ancestors (the managed labels and annotations they hand down, whether a
//! hierarchical quota covers it); each used to walk the forest up again.

use crate::hierarchy::forest::{Forest, Node};

/// A namespace and its ancestors in a forest, as [`Forest::ancestry_names`] walks them.
pub struct Lineage<'f> {
    forest: &'f Forest,
    /// Root first, ending with the namespace itself; a missing parent ends the line, and in or
    /// below a cycle it stops before the first name it would repeat.
    names: Vec<String>,
}

impl<'f> Lineage<'f> {
    /// The lineage of `name` in `forest`.
    pub fn of(forest: &'f Forest, name: &str) -> Self {
        Lineage { forest, names: forest.ancestry_names(name) }
    }

    /// The forest it was walked in.
    pub fn forest(&self) -> &'f Forest {
        self.forest
    }

    /// The namespace whose lineage this is.
    pub fn name(&self) -> &str {
        self.names.last().map(String::as_str).unwrap_or_default()
    }

    /// The namespace and those of its ancestors that exist, root first.
    pub fn nodes(&self) -> impl Iterator<Item = &'f Node> + '_ {
        self.names.iter().filter_map(|n| self.forest.get(n))
    }

    /// Whether a hierarchical quota on the namespace or on an ancestor covers it
    /// ([`Forest::quotas_covering`] is not empty).
    pub fn under_quota(&self) -> bool {
        self.nodes().any(|n| !n.quotas().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::forest;

    fn names(f: &Forest, ns: &str) -> Vec<String> {
        Lineage::of(f, ns).nodes().map(|n| n.name().to_string()).collect()
    }

    #[test]
    fn a_lineage_is_the_namespace_and_its_existing_ancestors_root_first() {
        let f = forest("root mid:root leaf:~mid orphan:gone");
        assert_eq!(Lineage::of(&f, "leaf").name(), "leaf");
        assert_eq!(names(&f, "leaf"), ["root", "mid", "leaf"]);
        assert_eq!(names(&f, "orphan"), ["orphan"], "a missing parent is no node");
        assert!(names(&f, "unknown").is_empty());
    }

    #[test]
    fn a_lineage_in_or_below_a_cycle_ends() {
        let f = forest("a:b b:a below:a");
        assert_eq!(names(&f, "a"), ["b", "a"]);
        assert_eq!(names(&f, "below"), ["b", "a", "below"]);
    }

    #[test]
    fn a_quota_on_the_namespace_or_an_ancestor_covers_it() {
        let mut f = forest("acme team:~acme other");
        crate::hierarchy::forest::testing::with_quota(&mut f, "acme", "org", r#"{"pods": "10"}"#);
        assert!(Lineage::of(&f, "team").under_quota());
        assert!(Lineage::of(&f, "acme").under_quota());
        assert!(!Lineage::of(&f, "other").under_quota());
    }
}
