//! The hierarchy as the plugin sees it: each namespace with its parent, children, conditions and
//! whether it is a subnamespace.
//!
//! It is read with one LIST of hierarchy configurations across all namespaces, answered as hns's
//! `HierarchyTree` (each namespace's place in the hierarchy and nothing else: at 100,000
//! namespaces some 5 MB, where the configurations are 34); from a server without it, as the
//! configurations themselves plus a Table of subnamespaces. HNC's plugin did two GETs per
//! namespace, which made `tree` slow on big clusters. hns answers those lists with what the user
//! may see (their view, docs/access.md), so a team admin's `tree -A` shows their subtrees. A subtree asked for
//! that the list does not show (a server without views, a namespace hidden from the user) is
//! walked a level at a time, as far as the user may read, so its error is exact; `get` walks
//! its subtree that way always, since a subtree is usually a small part of the cluster.

use std::collections::BTreeSet;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use futures::StreamExt;

use hns_api::HierarchyConfiguration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::hns::{self, Hns, TreeEntry};

/// One namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Its parent, if any.
    pub parent: Option<String>,
    /// Whether it was created as a subnamespace of its parent.
    pub subnamespace: bool,
    /// Its own `allowCascadingDeletion`.
    pub allow_cascading_deletion: bool,
    /// Problems with its place in the hierarchy.
    pub conditions: Vec<Condition>,
    /// Whether it is being deleted (its configuration, like the namespace, has a
    /// deletionTimestamp).
    pub terminating: bool,
    /// Where its parent is in the forest, if it was read.
    parent_at: Option<usize>,
    /// Its children, sorted by name.
    children: Vec<Child>,
}

/// A child of a namespace: one that was read, by where it is in the forest, or one known by
/// name only (the user may not see it, or it was not read).
#[derive(Debug, Clone, PartialEq)]
enum Child {
    Read(usize),
    Named(String),
}

/// The namespaces read, with each child and parent found by position rather than by name: at
/// 100,000 namespaces, looking names up again on every step of a walk was most of `tree -A`'s
/// time (its names share long prefixes, and a hash table of them is larger than the caches).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Forest {
    nodes: Vec<Node>,
    /// Where each namespace is in `nodes`.
    at: HashMap<String, usize>,
    /// Children known by name only that are subnamespaces.
    unread_subnamespaces: HashSet<String>,
}

impl Forest {
    /// The forest of `configs`, with the namespaces named in `subnamespaces` marked as such. A
    /// namespace's children are those its configuration lists.
    pub fn new(
        configs: impl IntoIterator<Item = HierarchyConfiguration>,
        subnamespaces: &BTreeSet<String>,
    ) -> Forest {
        let mut listed = Vec::new();
        let nodes = configs
            .into_iter()
            .filter_map(|hc| {
                let name = hc.metadata.namespace?;
                let status = hc.status.unwrap_or_default();
                let conditions = status.problems().cloned().collect();
                listed.push(status.children);
                Some(Node {
                    subnamespace: subnamespaces.contains(&name),
                    name,
                    parent: hc.spec.parent.filter(|p| !p.is_empty()),
                    allow_cascading_deletion: hc.spec.allow_cascading_deletion,
                    conditions,
                    terminating: hc.metadata.deletion_timestamp.is_some(),
                    parent_at: None,
                    children: Vec::new(),
                })
            })
            .collect();
        let mut forest = Forest::indexed(nodes);
        for (node, names) in listed.into_iter().enumerate() {
            forest.nodes[node].children = names
                .into_iter()
                .map(|name| match forest.at.get(&name) {
                    Some(&child) => Child::Read(child),
                    None => {
                        if subnamespaces.contains(&name) {
                            forest.unread_subnamespaces.insert(name.clone());
                        }
                        Child::Named(name)
                    }
                })
                .collect();
        }
        forest.sort_children();
        forest
    }

    /// The forest of a `HierarchyTree`'s entries. A namespace's children are those naming it as
    /// their parent, and those the user may not see.
    pub fn from_tree(entries: Vec<TreeEntry>) -> Forest {
        let mut hidden = Vec::new();
        let mut unread_subnamespaces = HashSet::new();
        let nodes = entries
            .into_iter()
            .map(|e| {
                hidden.push(e.hidden_children);
                unread_subnamespaces.extend(e.hidden_subnamespaces);
                Node {
                    name: e.name,
                    parent: e.parent.filter(|p| !p.is_empty()),
                    subnamespace: e.subnamespace,
                    allow_cascading_deletion: e.allow_cascading_deletion,
                    conditions: e.conditions,
                    terminating: e.terminating,
                    parent_at: None,
                    children: Vec::new(),
                }
            })
            .collect();
        let mut forest = Forest::indexed(nodes);
        forest.unread_subnamespaces = unread_subnamespaces;
        for child in 0..forest.nodes.len() {
            if let Some(parent) = forest.nodes[child].parent_at {
                forest.nodes[parent].children.push(Child::Read(child));
            }
        }
        for (node, names) in hidden.into_iter().enumerate() {
            forest.nodes[node].children.extend(names.into_iter().map(Child::Named));
        }
        forest.sort_children();
        forest
    }

    /// `nodes` with the index of their names, and each parent found.
    fn indexed(mut nodes: Vec<Node>) -> Forest {
        let mut at = HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            at.insert(n.name.clone(), i);
        }
        for n in &mut nodes {
            n.parent_at = n.parent.as_ref().and_then(|p| at.get(p)).copied();
        }
        Forest { nodes, at, unread_subnamespaces: HashSet::new() }
    }

    /// Sorts every namespace's children by name.
    fn sort_children(&mut self) {
        for node in 0..self.nodes.len() {
            let mut children = std::mem::take(&mut self.nodes[node].children);
            children.sort_by(|a, b| self.child_name(a).cmp(self.child_name(b)));
            self.nodes[node].children = children;
        }
    }

    fn child_name<'a>(&'a self, child: &'a Child) -> &'a str {
        match child {
            Child::Read(at) => &self.nodes[*at].name,
            Child::Named(name) => name,
        }
    }

    /// Whether no namespace was read.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The namespace, if it was read.
    pub fn get(&self, name: &str) -> Option<&Node> {
        self.at.get(name).map(|&at| &self.nodes[at])
    }

    /// Whether the child `name`, read as `node` or known by name only, is a subnamespace.
    pub fn is_subnamespace(&self, name: &str, node: Option<&Node>) -> bool {
        match node {
            Some(n) => n.subnamespace,
            None => self.unread_subnamespaces.contains(name),
        }
    }

    /// `node`'s children, sorted by name: each name, and the namespace if it was read (a child
    /// not read is one the user may not see).
    pub fn children<'a>(
        &'a self,
        node: &'a Node,
    ) -> impl ExactSizeIterator<Item = (&'a str, Option<&'a Node>)> {
        node.children.iter().map(|c| match c {
            Child::Read(at) => (self.nodes[*at].name.as_str(), Some(&self.nodes[*at])),
            Child::Named(name) => (name.as_str(), None),
        })
    }

    /// Where `tree -A` starts: every root (no parent, or a parent that does not exist), then,
    /// for each cycle no root leads to, its first member by name, so that no namespace is left
    /// out.
    pub fn tops(&self) -> Vec<&str> {
        let roots: Vec<usize> =
            (0..self.nodes.len()).filter(|&n| self.nodes[n].parent_at.is_none()).collect();
        let mut tops: Vec<&str> = roots.iter().map(|&n| self.nodes[n].name.as_str()).collect();
        tops.sort_unstable();
        let mut reached = vec![false; self.nodes.len()];
        let count: usize = roots.into_iter().map(|root| self.reach(root, &mut reached)).sum();
        if count == self.nodes.len() {
            return tops; // no cycle
        }
        let by_name = |a: &usize, b: &usize| self.nodes[*a].name.cmp(&self.nodes[*b].name);
        let mut rest: Vec<usize> = (0..self.nodes.len()).filter(|&n| !reached[n]).collect();
        rest.sort_unstable_by(by_name);
        for node in rest {
            if reached[node] {
                continue;
            }
            // Not below any root: the parents lead into a cycle. Start it at its first member.
            let first = self.cycle_from(node).into_iter().min_by(by_name).unwrap_or(node);
            tops.push(&self.nodes[first].name);
            self.reach(first, &mut reached);
        }
        tops
    }

    /// The namespaces below `name`, each once, nearest first.
    pub fn descendants(&self, name: &str) -> Vec<&str> {
        let mut seen: HashSet<&str> = [name].into_iter().collect();
        let mut out = Vec::new();
        let mut next = 0;
        let mut frontier = vec![name];
        while let Some(current) = frontier.get(next).copied() {
            next += 1;
            for (child, _) in self.get(current).into_iter().flat_map(|n| self.children(n)) {
                if seen.insert(child) {
                    out.push(child);
                    frontier.push(child);
                }
            }
        }
        out
    }

    /// `name` and the namespaces below it, each once, depth first: each namespace, then its
    /// children's subtrees by name (the order `tree` draws them in).
    pub fn subtree<'a>(&'a self, name: &'a str) -> Vec<&'a str> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out = Vec::new();
        let mut stack = vec![name];
        while let Some(n) = stack.pop() {
            if seen.insert(n) {
                out.push(n);
                let children: Vec<&str> =
                    self.get(n).into_iter().flat_map(|n| self.children(n)).map(|c| c.0).collect();
                stack.extend(children.into_iter().rev());
            }
        }
        out
    }

    /// Marks `node` and everything below it reached; returns how many were reached anew.
    fn reach(&self, node: usize, reached: &mut [bool]) -> usize {
        let mut count = 0;
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut reached[n], true) {
                count += 1;
                stack.extend(self.nodes[n].children.iter().filter_map(|c| match c {
                    Child::Read(at) => Some(*at),
                    Child::Named(_) => None,
                }));
            }
        }
        count
    }

    /// The members of the cycle that `node`'s ancestry runs into.
    fn cycle_from(&self, node: usize) -> Vec<usize> {
        let mut path: Vec<usize> = Vec::new();
        let mut current = Some(node);
        while let Some(n) = current {
            if let Some(at) = path.iter().position(|p| *p == n) {
                return path.split_off(at);
            }
            path.push(n);
            current = self.nodes[n].parent_at;
        }
        path
    }
}

/// Which namespaces to read.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// All of them.
    All,
    /// These and their descendants.
    Subtrees(&'a [String]),
}

/// Reads the forest. A namespace named in `scope` that does not exist is an error.
pub async fn load(hns: &Hns, scope: Scope<'_>) -> hns::Result<Forest> {
    let read = match hns.tree().await {
        Err(e) if e.code() == Some(406) => read_lists(hns).await,
        tree => tree.map(Forest::from_tree),
    };
    let forest = match read {
        Ok(forest) => forest,
        Err(e) if e.code() == Some(403) => match scope {
            Scope::Subtrees(names) => return walk(hns, names).await,
            Scope::All => return Err(e),
        },
        Err(e) => return Err(e),
    };
    // The list shows what the user may see: a namespace asked for and not in it is missing,
    // hidden from them, or newer than the list; reading it alone says which.
    if let Scope::Subtrees(names) = scope {
        if names.iter().any(|n| forest.get(n).is_none()) {
            return walk(hns, names).await;
        }
    }
    Ok(forest)
}

/// The forest from a server without `HierarchyTree`: every configuration, and the names of the
/// subnamespaces, both at once (at 100,000 namespaces each is a large answer).
async fn read_lists(hns: &Hns) -> hns::Result<Forest> {
    let (configs, subnamespaces) = futures::join!(hns.hierarchies(), hns.all_subnamespace_names());
    Ok(Forest::new(configs?, &subnamespaces?))
}

/// How many namespaces a walk reads at once (as many as `get` then lists at once, so both use
/// the same connections: see `fanout`).
const WALK_AT_ONCE: usize = 8;

/// The subtrees below `names` read namespace by namespace, a level at a time (each level's
/// namespaces at once): each namespace's configuration, and its subnamespaces if it has
/// children. Descendants the user may not read are left out (their names still show as their
/// parents' children). Cheaper than listing every namespace when the subtree is a small part of
/// a large cluster.
pub async fn walk(hns: &Hns, names: &[String]) -> hns::Result<Forest> {
    let mut configs = Vec::new();
    let mut subnamespaces = BTreeSet::new();
    let mut seen: HashSet<String> = names.iter().cloned().collect();
    let mut level: Vec<(String, bool)> = names.iter().map(|n| (n.clone(), true)).collect();
    while !level.is_empty() {
        let reads = level.into_iter().map(|(ns, named)| async move {
            let read = read_namespace(hns, &ns).await;
            (named, read)
        });
        let mut next = Vec::new();
        let answers: Vec<_> = futures::stream::iter(reads).buffer_unordered(WALK_AT_ONCE).collect().await;
        for (named, read) in answers {
            let (hc, subs) = match read {
                Ok(found) => found,
                Err(e) if named => return Err(e),
                Err(e) if e.code() == Some(403) => continue,
                Err(hns::Error::NamespaceNotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            subnamespaces.extend(subs);
            let children = hc.status.as_ref().map(|s| s.children.clone()).unwrap_or_default();
            next.extend(children.into_iter().filter(|c| seen.insert(c.clone())).map(|c| (c, false)));
            configs.push(hc);
        }
        level = next;
    }
    Ok(Forest::new(configs, &subnamespaces))
}

/// A namespace's configuration, and the names of its subnamespaces if it has children (none if
/// the user may not list them).
async fn read_namespace(hns: &Hns, ns: &str) -> hns::Result<(HierarchyConfiguration, Vec<String>)> {
    let hc = hns.hierarchy(ns).await?;
    if hc.status.as_ref().is_none_or(|s| s.children.is_empty()) {
        return Ok((hc, Vec::new()));
    }
    match hns.subnamespaces(ns).await {
        Ok(subs) => Ok((hc, subs.into_iter().filter_map(|s| s.metadata.name).collect())),
        Err(e) if e.code() == Some(403) => Ok((hc, Vec::new())),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use hns_api::{HierarchyConfigurationSpec, HierarchyConfigurationStatus};

    /// A hierarchy configuration: namespace, parent, children, conditions as (type, reason, message).
    pub(crate) fn hc(
        ns: &str,
        parent: Option<&str>,
        children: &[&str],
        conditions: &[(&str, &str, &str)],
    ) -> HierarchyConfiguration {
        let mut hc = HierarchyConfiguration::new(
            "hierarchy",
            HierarchyConfigurationSpec { parent: parent.map(str::to_string), ..Default::default() },
        );
        hc.metadata.namespace = Some(ns.to_string());
        hc.status = Some(HierarchyConfigurationStatus {
            children: children.iter().map(|c| c.to_string()).collect(),
            conditions: conditions
                .iter()
                .map(|(t, r, m)| Condition {
                    type_: t.to_string(),
                    status: "True".into(),
                    reason: r.to_string(),
                    message: m.to_string(),
                    last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                    observed_generation: None,
                })
                .collect(),
            observed_generation: None,
        });
        hc
    }

    impl Forest {
        /// Marks `name` as being deleted.
        pub(crate) fn mark_terminating(&mut self, name: &str) {
            if let Some(&at) = self.at.get(name) {
                self.nodes[at].terminating = true;
            }
        }
    }

    /// acme-org with a full child team-a (with a subnamespace svc-1) and a subnamespace team-b;
    /// orphan, whose parent is gone; the cycle cyc-a <-> cyc-b with a subnamespace below it;
    /// and a plain root, solo.
    pub(crate) fn sample() -> Forest {
        let halted = (
            "ActivitiesHalted",
            "AncestorHaltActivities",
            "Propagation paused in \"cyc-b-kid\" and its descendants due to ActivitiesHalted condition on ancestor \"cyc-a\"",
        );
        let in_cycle =
            ("ActivitiesHalted", "InCycle", "Namespace is a member of the cycle: cyc-a <- cyc-b <- cyc-a");
        Forest::new(
            [
                hc("acme-org", None, &["team-b", "team-a"], &[]),
                hc("team-a", Some("acme-org"), &["svc-1"], &[]),
                hc("svc-1", Some("team-a"), &[], &[]),
                hc("team-b", Some("acme-org"), &[], &[]),
                hc(
                    "orphan",
                    Some("gone"),
                    &[],
                    &[("ActivitiesHalted", "ParentMissing", "Parent \"gone\" does not exist")],
                ),
                hc("cyc-a", Some("cyc-b"), &["cyc-b"], &[in_cycle]),
                hc("cyc-b", Some("cyc-a"), &["cyc-a", "cyc-b-kid"], &[in_cycle]),
                hc("cyc-b-kid", Some("cyc-b"), &[], &[halted]),
                hc("solo", None, &[], &[]),
            ],
            &["svc-1", "team-b", "cyc-b-kid"].iter().map(|s| s.to_string()).collect(),
        )
    }

    #[test]
    fn a_configuration_with_a_deletion_timestamp_is_terminating() {
        let mut gone = hc("gone", None, &[], &[]);
        gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        let f = Forest::new([gone, hc("here", None, &[], &[])], &BTreeSet::new());
        assert!(f.get("gone").unwrap().terminating);
        assert!(!f.get("here").unwrap().terminating);
    }

    /// `f` as a `HierarchyTree` would give it.
    fn as_tree(f: &Forest) -> Vec<TreeEntry> {
        f.nodes
            .iter()
            .map(|n| TreeEntry {
                name: n.name.clone(),
                parent: n.parent.clone(),
                subnamespace: n.subnamespace,
                terminating: n.terminating,
                allow_cascading_deletion: n.allow_cascading_deletion,
                conditions: n.conditions.clone(),
                hidden_children: Vec::new(),
                hidden_subnamespaces: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_tree_reads_as_the_configurations_do() {
        let f = sample();
        assert_eq!(Forest::from_tree(as_tree(&f)), f);
        let mut entries = as_tree(&f);
        entries.retain(|e| e.name != "svc-1");
        let team_a = entries.iter_mut().find(|e| e.name == "team-a").unwrap();
        team_a.hidden_children = vec!["svc-1".into()];
        team_a.hidden_subnamespaces = vec!["svc-1".into()];
        let hidden = Forest::from_tree(entries);
        let team_a = hidden.get("team-a").unwrap();
        let children: Vec<_> = hidden.children(team_a).collect();
        assert_eq!(children, [("svc-1", None)], "a child the user may not see, by name");
        assert_eq!(hidden.get("svc-1"), None);
        assert!(hidden.is_subnamespace("svc-1", None), "hidden, and still a subnamespace");
    }

    #[test]
    fn tops_are_roots_orphans_and_one_member_per_cycle() {
        assert_eq!(sample().tops(), ["acme-org", "orphan", "solo", "cyc-a"]);
    }

    #[test]
    fn children_are_sorted_and_subnamespaces_marked() {
        let f = sample();
        let names: Vec<&str> = f.children(f.get("acme-org").unwrap()).map(|c| c.0).collect();
        assert_eq!(names, ["team-a", "team-b"]);
        assert!(f.get("team-b").unwrap().subnamespace);
        assert!(!f.get("team-a").unwrap().subnamespace);
        assert_eq!(f.get("gone"), None, "a missing parent is no node");
    }

    #[test]
    fn descendants_stop_at_cycles() {
        let f = sample();
        assert_eq!(f.descendants("acme-org"), ["team-a", "team-b", "svc-1"]);
        assert_eq!(f.descendants("cyc-a"), ["cyc-b", "cyc-b-kid"]);
        assert!(f.descendants("solo").is_empty());
    }

    #[test]
    fn a_subtree_is_depth_first_by_name() {
        let f = sample();
        assert_eq!(f.subtree("acme-org"), ["acme-org", "team-a", "svc-1", "team-b"]);
        assert_eq!(f.subtree("cyc-a"), ["cyc-a", "cyc-b", "cyc-b-kid"]);
        assert_eq!(f.subtree("solo"), ["solo"]);
    }

    #[test]
    fn a_self_parent_is_its_own_cycle() {
        let f = Forest::new([hc("me", Some("me"), &["me"], &[])], &BTreeSet::new());
        assert_eq!(f.tops(), ["me"]);
    }
}
