//! The hierarchy's invariants, checked from the cluster's own objects by an oracle written
//! independently of hns's forest: no orphan or half-labelled namespace, tree labels exactly
//! those of the ancestor chain (a lone namespace's own at 0, with `included-namespace`, and no
//! membership label), no cycle, and every propagated Role and RoleBinding an exact copy
//! of its source in exactly the namespaces below it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use hns_api::keys;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::ListParams;
use kube::{Api, Client};
use serde_json::Value;

const INHERITED_FROM: &str = "hnc.x-k8s.io/inherited-from";

/// What the oracle needs of a namespace.
#[derive(Debug, Clone, Default)]
pub struct NamespaceFacts {
    pub parent: Option<String>,
    pub subnamespace: bool,
    pub terminating: bool,
    pub labels: BTreeMap<String, String>,
}

/// A propagated object, reduced to what must be identical in a copy.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectFacts {
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub inherited_from: Option<String>,
    pub content: Value,
}

/// A snapshot of the namespaces and objects in scope.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub namespaces: BTreeMap<String, NamespaceFacts>,
    pub objects: Vec<ObjectFacts>,
}

/// Reads the namespaces whose names start with `prefix`, and their Roles and RoleBindings.
pub async fn snapshot(client: &Client, prefix: &str) -> anyhow::Result<Snapshot> {
    let mut snap = Snapshot::default();
    for ns in Api::<Namespace>::all(client.clone()).list(&ListParams::default()).await? {
        let name = ns.metadata.name.clone().unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let annotations = ns.metadata.annotations.clone().unwrap_or_default();
        let sub = annotations.get(keys::SUBNAMESPACE_OF).cloned();
        snap.namespaces.insert(
            name,
            NamespaceFacts {
                subnamespace: sub.is_some(),
                parent: sub.or_else(|| annotations.get(keys::PARENT).cloned()),
                terminating: ns.metadata.deletion_timestamp.is_some(),
                labels: ns.metadata.labels.unwrap_or_default(),
            },
        );
    }
    let in_scope = |ns: &Option<String>| ns.as_deref().is_some_and(|n| n.starts_with(prefix));
    for rb in Api::<RoleBinding>::all(client.clone()).list(&ListParams::default()).await? {
        if in_scope(&rb.metadata.namespace) {
            let content = serde_json::json!({"roleRef": rb.role_ref, "subjects": rb.subjects});
            snap.objects.push(facts("RoleBinding", &rb.metadata, content));
        }
    }
    for role in Api::<Role>::all(client.clone()).list(&ListParams::default()).await? {
        if in_scope(&role.metadata.namespace) {
            let content = serde_json::json!({"rules": role.rules});
            snap.objects.push(facts("Role", &role.metadata, content));
        }
    }
    Ok(snap)
}

fn facts(kind: &'static str, meta: &kube::api::ObjectMeta, content: Value) -> ObjectFacts {
    ObjectFacts {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        inherited_from: meta.labels.as_ref().and_then(|l| l.get(INHERITED_FROM).cloned()),
        content,
    }
}

impl Snapshot {
    /// The ancestors of `ns`, nearest first, as far as they exist; `Err` names a cycle.
    fn ancestors(&self, ns: &str) -> Result<Vec<String>, String> {
        let mut chain: Vec<String> = Vec::new();
        let mut at = ns.to_string();
        while let Some(parent) = self.namespaces.get(&at).and_then(|n| n.parent.clone()) {
            if parent == ns || chain.contains(&parent) {
                return Err(format!("{ns}: its ancestors form a cycle through {parent}"));
            }
            if !self.namespaces.contains_key(&parent) {
                break;
            }
            chain.push(parent.clone());
            at = parent;
        }
        Ok(chain)
    }

    /// Every broken invariant, in words; empty when the hierarchy is valid.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let has_children: BTreeSet<&str> =
            self.namespaces.values().filter_map(|n| n.parent.as_deref()).collect();
        for (name, ns) in &self.namespaces {
            if ns.terminating {
                out.push(format!("{name}: still terminating"));
                continue;
            }
            let parent_alive =
                ns.parent.as_ref().map(|p| self.namespaces.get(p).is_some_and(|f| !f.terminating));
            if ns.subnamespace && parent_alive == Some(false) {
                out.push(format!(
                    "{name}: orphan subnamespace (parent {} gone)",
                    ns.parent.as_deref().unwrap_or("")
                ));
            }
            let member = ns.labels.contains_key(keys::HIERARCHY_MEMBER);
            let in_hierarchy = ns.parent.is_some() || has_children.contains(name.as_str());
            if in_hierarchy && !member {
                out.push(format!("{name}: in a hierarchy but not labelled {}", keys::HIERARCHY_MEMBER));
            }
            // The membership label selects the fail-closed webhook: on a lone namespace an hns
            // outage would block it.
            if !in_hierarchy && member {
                out.push(format!("{name}: outside every hierarchy but labelled {}", keys::HIERARCHY_MEMBER));
            }
            if ns.labels.get(keys::INCLUDED_NAMESPACE).map(String::as_str) != Some("true") {
                out.push(format!("{name}: not labelled {}=true", keys::INCLUDED_NAMESPACE));
            }
            match self.ancestors(name) {
                Err(cycle) => out.push(cycle),
                Ok(chain) => out.extend(self.tree_label_violations(name, ns, &chain)),
            }
        }
        out.extend(self.copy_violations());
        out
    }

    fn tree_label_violations(&self, name: &str, ns: &NamespaceFacts, chain: &[String]) -> Vec<String> {
        let mut want: BTreeMap<String, String> = BTreeMap::from([(keys::tree_label(name), "0".to_string())]);
        for (depth, a) in chain.iter().enumerate() {
            want.insert(keys::tree_label(a), (depth + 1).to_string());
        }
        let have: BTreeMap<String, String> = ns
            .labels
            .iter()
            .filter(|(k, _)| keys::tree_label_ancestor(k).is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if have == want {
            vec![]
        } else {
            vec![format!("{name}: tree labels {have:?}, want {want:?}")]
        }
    }

    /// Copies must be exactly the sources of the ancestors (nearest ancestor first), nothing more.
    fn copy_violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let key = |o: &ObjectFacts| (o.kind, o.namespace.clone(), o.name.clone());
        let actual: BTreeMap<_, &ObjectFacts> =
            self.objects.iter().filter(|o| o.inherited_from.is_some()).map(|o| (key(o), o)).collect();
        let mut expected: BTreeMap<(&'static str, String, String), &ObjectFacts> = BTreeMap::new();
        for (name, ns) in &self.namespaces {
            let Ok(chain) = self.ancestors(name) else { continue };
            // Propagation halts below a missing parent (ParentMissing); nothing is expected there.
            let complete = ns.parent.as_ref().is_none_or(|p| self.namespaces.contains_key(p))
                && chain.iter().all(|a| {
                    self.namespaces[a].parent.as_ref().is_none_or(|p| self.namespaces.contains_key(p))
                });
            if ns.terminating || !complete {
                continue;
            }
            for a in chain.iter().rev() {
                for src in self.objects.iter().filter(|o| &o.namespace == a && o.inherited_from.is_none()) {
                    expected.insert((src.kind, name.clone(), src.name.clone()), src);
                }
            }
        }
        for (k, src) in &expected {
            match actual.get(k) {
                None => out
                    .push(format!("{}/{}: missing copy of {} {} from {}", k.1, k.2, k.0, k.2, src.namespace)),
                Some(copy)
                    if copy.inherited_from.as_deref() != Some(&src.namespace)
                        || copy.content != src.content =>
                {
                    out.push(format!(
                        "{}/{}: {} copy differs from its source in {}",
                        k.1, k.2, k.0, src.namespace
                    ))
                }
                Some(_) => {}
            }
        }
        for (k, copy) in &actual {
            let terminating = self.namespaces.get(&k.1).is_some_and(|n| n.terminating);
            if !expected.contains_key(k) && !terminating {
                out.push(format!(
                    "{}/{}: {} copy from {} that should not be there",
                    k.1,
                    k.2,
                    k.0,
                    copy.inherited_from.as_deref().unwrap_or("")
                ));
            }
        }
        out
    }
}

/// Polls the invariants of the namespaces starting with `prefix` until they hold or `timeout`
/// passes; returns how long that took and the violations left (empty when they hold).
pub async fn converge(client: &Client, prefix: &str, timeout: Duration) -> (Duration, Vec<String>) {
    let started = Instant::now();
    loop {
        let violations = match snapshot(client, prefix).await {
            Ok(s) => s.violations(),
            Err(e) => vec![format!("cannot read the cluster: {e}")],
        };
        if violations.is_empty() || started.elapsed() > timeout {
            return (started.elapsed(), violations);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(parent: Option<&str>, labels: &[(&str, &str)]) -> NamespaceFacts {
        NamespaceFacts {
            parent: parent.map(String::from),
            subnamespace: parent.is_some(),
            terminating: false,
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn rb(namespace: &str, from: Option<&str>, group: &str) -> ObjectFacts {
        ObjectFacts {
            kind: "RoleBinding",
            namespace: namespace.into(),
            name: "rb".into(),
            inherited_from: from.map(String::from),
            content: json!({"subjects": [group]}),
        }
    }

    fn valid() -> Snapshot {
        let (m, i) = (keys::HIERARCHY_MEMBER, keys::INCLUDED_NAMESPACE);
        let mut s = Snapshot::default();
        s.namespaces
            .insert("r".into(), ns(None, &[(m, "true"), (i, "true"), ("r.tree.hnc.x-k8s.io/depth", "0")]));
        s.namespaces.insert(
            "c".into(),
            ns(
                Some("r"),
                &[
                    (m, "true"),
                    (i, "true"),
                    ("c.tree.hnc.x-k8s.io/depth", "0"),
                    ("r.tree.hnc.x-k8s.io/depth", "1"),
                ],
            ),
        );
        s.namespaces.insert("l".into(), ns(None, &[(i, "true"), ("l.tree.hnc.x-k8s.io/depth", "0")]));
        s.objects = vec![rb("r", None, "g"), rb("c", Some("r"), "g")];
        s
    }

    /// Asserts that the violations found in `s` mention each of `wanted`.
    fn assert_found(s: &Snapshot, wanted: &[&str]) {
        let v = s.violations().join("\n");
        for w in wanted {
            assert!(v.contains(w), "{v}");
        }
    }

    #[test]
    fn a_valid_tree_has_no_violations() {
        assert_eq!(valid().violations(), Vec::<String>::new());
    }

    #[test]
    fn wrong_tree_labels_missing_members_and_orphans_are_found() {
        let mut s = valid();
        s.namespaces.get_mut("c").unwrap().labels.insert("r.tree.hnc.x-k8s.io/depth".into(), "2".into());
        s.namespaces.get_mut("r").unwrap().labels.remove(keys::HIERARCHY_MEMBER);
        s.namespaces.insert("o".into(), ns(Some("gone"), &[(keys::HIERARCHY_MEMBER, "true")]));
        assert_found(&s, &["c: tree labels", "r: in a hierarchy but not labelled", "o: orphan subnamespace"]);
    }

    #[test]
    fn lone_namespaces_need_their_own_labels_and_no_membership() {
        let mut s = valid();
        s.namespaces.get_mut("l").unwrap().labels.insert(keys::HIERARCHY_MEMBER.into(), "true".into());
        s.namespaces.insert("bare".into(), ns(None, &[]));
        assert_found(
            &s,
            &[
                "l: outside every hierarchy but labelled",
                "bare: not labelled hnc.x-k8s.io/included-namespace=true",
                "bare: tree labels {}",
            ],
        );
    }

    #[test]
    fn cycles_are_found() {
        let mut s = valid();
        s.namespaces.get_mut("r").unwrap().parent = Some("c".into());
        assert!(s.violations().iter().any(|v| v.contains("cycle")), "{:?}", s.violations());
    }

    #[test]
    fn missing_stale_and_differing_copies_are_found() {
        let mut s = valid();
        s.objects[1].content = json!({"subjects": ["other"]});
        assert!(s.violations().iter().any(|v| v.contains("differs")));
        s.objects.pop();
        assert!(s.violations().iter().any(|v| v.contains("missing copy")));
        s.objects = vec![rb("c", Some("r"), "g")];
        assert!(s.violations().iter().any(|v| v.contains("should not be there")));
    }
}
