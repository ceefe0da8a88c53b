//! The hierarchy's rules (HNC's, with its messages), as pure functions of the forest.
//!
//! The API handlers and the admission webhook ask these before anything is written; nothing
//! here does I/O, so every rule is unit-tested without a cluster. A refusal says what is wrong
//! and, where it helps, what to do instead.

use hns_api::{keys, MetaKvp};

use crate::hierarchy::forest::Forest;
use crate::hierarchy::policy::Policy;

/// Why a change is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 422: fields with bad values; each cause is `(field, message)`.
    Invalid(Vec<(String, String)>),
    /// 403: not allowed in this place.
    Forbidden(String),
    /// 409: the object already exists.
    AlreadyExists,
    /// 409: clashes with the cluster's state.
    Conflict(String),
    /// 404: a namespace the change needs does not exist.
    NamespaceNotFound(String),
    /// 503: the cache has not seen the namespace yet; retrying helps.
    NotSynced(String),
}

fn invalid(field: &str, message: impl Into<String>) -> Refusal {
    Refusal::Invalid(vec![(field.to_string(), message.into())])
}

/// A namespace whose `update hierarchyconfigurations` right a move needs, and why (HNC's
/// wording: "the current root", "the proposed parent", "the most recent common ancestor").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthzCheck {
    /// The namespace.
    pub namespace: String,
    /// Its role in the move.
    pub reason: &'static str,
}

fn not_synced(ns: &str) -> Refusal {
    Refusal::NotSynced(format!(
        "hns has not seen namespace \"{ns}\" yet - please try again in a few moments."
    ))
}

/// Checks making `new_parent` the parent of `ns` (or making `ns` a root) and returns the
/// namespaces whose rights the caller must hold for the move.
pub fn check_parent_change(
    forest: &Forest,
    policy: &Policy,
    ns: &str,
    new_parent: Option<&str>,
) -> Result<Vec<AuthzCheck>, Refusal> {
    let node = forest.get(ns).ok_or_else(|| not_synced(ns))?;
    if node.parent.as_deref() == new_parent {
        return Ok(Vec::new());
    }
    if node.is_subnamespace {
        let current = node.parent.as_deref().unwrap_or_default();
        let to = new_parent.unwrap_or("");
        // HNC's words first, then why and what can be done.
        return Err(invalid(
            "spec.parent",
            format!("illegal parent: Cannot set the parent of \"{ns}\" to \"{to}\" because it's a subnamespace of \"{current}\". A subnamespace belongs to the parent it was created in: it can neither become a root nor move (only full namespaces can). It goes when its parent deletes it: kubectl hns delete {ns} -n {current}"),
        ));
    }
    let Some(parent) = new_parent else {
        return Ok(authz_checks(forest, ns, None));
    };
    if let Some(manager) = node.external_manager() {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{ns}\" is managed by \"{manager}\", not hns, so it cannot have a parent in hns (annotation {}); to give it one, have \"{manager}\" remove that annotation first",
            keys::MANAGED_BY
        )));
    }
    if policy.is_excluded(ns) {
        return Err(invalid("spec.parent", format!("namespace \"{ns}\" is not managed by hns (excluded by the hns administrator) and cannot be set as a child of another namespace")));
    }
    if policy.is_excluded(parent) {
        return Err(invalid("spec.parent", format!("namespace \"{parent}\" is not managed by hns (excluded by the hns administrator) and cannot be set as a parent")));
    }
    if forest.get(parent).is_none() {
        return Err(invalid("spec.parent", format!("requested parent \"{parent}\" does not exist")));
    }
    let ancestry = forest.ancestry_names(parent);
    if ancestry.iter().any(|a| a == ns) {
        return Err(invalid(
            "spec.parent",
            format!(
                "illegal parent: cycle when making \"{parent}\" the parent of \"{ns}\": current ancestry is {}",
                ancestry.join(" <- ")
            ),
        ));
    }
    Ok(authz_checks(forest, ns, Some(parent)))
}

/// HNC's permission rule for a move: a root moving into a tree needs the proposed parent;
/// becoming a root needs the current root; a move within one tree needs the most recent common
/// ancestor; a move between trees needs the current root and the proposed parent.
fn authz_checks(forest: &Forest, ns: &str, new_parent: Option<&str>) -> Vec<AuthzCheck> {
    let check = |namespace: &str, reason| AuthzCheck { namespace: namespace.to_string(), reason };
    let current = forest.ancestry_names(ns);
    let current_root = current.first().filter(|r| r.as_str() != ns);
    match (current_root, new_parent) {
        (None, None) => Vec::new(),
        (None, Some(p)) => vec![check(p, "proposed parent")],
        (Some(root), None) => vec![check(root, "current root")],
        (Some(root), Some(p)) => {
            let proposed = forest.ancestry_names(p);
            // The deepest namespace both ancestries share, not counting `ns` itself.
            let common = current[..current.len() - 1]
                .iter()
                .zip(proposed.iter())
                .take_while(|(a, b)| a == b)
                .last()
                .map(|(a, _)| a.clone());
            match common {
                Some(mrca) => vec![check(&mrca, "most recent common ancestor")],
                None => vec![check(root, "current root"), check(p, "proposed parent")],
            }
        }
    }
}

/// A DNS-1123 label, as Kubernetes requires of namespace names.
pub fn is_dns1123_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Checks creating subnamespace `name` under `parent`.
pub fn check_new_subnamespace(
    forest: &Forest,
    policy: &Policy,
    parent: &str,
    name: &str,
) -> Result<(), Refusal> {
    if !is_dns1123_label(name) {
        return Err(invalid(
            "metadata.name",
            format!("\"{name}\" is not a valid namespace name: a lowercase RFC 1123 label must consist of at most 63 lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
        ));
    }
    if policy.is_excluded(parent) {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{parent}\" is not managed by hns (excluded by the hns administrator) and cannot have subnamespaces"
        )));
    }
    if policy.is_excluded(name) {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{name}\" is excluded from hierarchies by the hns administrator and cannot be a subnamespace"
        )));
    }
    let p = forest.get(parent).ok_or_else(|| Refusal::NamespaceNotFound(parent.to_string()))?;
    if p.is_terminating() {
        return Err(Refusal::Forbidden(format!(
            "unable to create new content in namespace {parent} because it is being terminated"
        )));
    }
    if let Some((manager, _)) = forest.reserved_by(name).filter(|_| forest.get(name).is_none()) {
        return Err(reserved(name, manager));
    }
    match forest.get(name) {
        Some(existing) if existing.is_subnamespace && existing.parent.as_deref() == Some(parent) => {
            Err(Refusal::AlreadyExists)
        }
        Some(_) => Err(Refusal::Conflict("cannot create a subnamespace using an existing namespace".into())),
        // A namespace whose parent was deleted still names it: that name is not free to reuse
        // below it.
        None if forest.ancestry_names(parent).iter().any(|a| a == name) => Err(invalid(
            "metadata.name",
            format!(
                "cycle when making \"{parent}\" the parent of \"{name}\": current ancestry is {}",
                forest.ancestry_names(parent).join(" <- ")
            ),
        )),
        None => Ok(()),
    }
}

/// HNC's refusal of a namespace named in an external hierarchy ([`Forest::reserved_by`]).
fn reserved(name: &str, manager: &str) -> Refusal {
    Refusal::Conflict(format!(
        "namespace \"{name}\" is reserved by the external hierarchy manager \"{manager}\": namespaces it manages carry the tree label {} (kubectl get ns -l {}); choose another name",
        keys::tree_label(name),
        keys::tree_label(name)
    ))
}

/// Checks creating namespace `name` directly (the namespace webhook): not a name an external
/// hierarchy reserves.
pub fn check_namespace_create(forest: &Forest, name: &str) -> Result<(), Refusal> {
    match forest.reserved_by(name) {
        Some((manager, _)) => Err(reserved(name, manager)),
        None => Ok(()),
    }
}

/// Checks the tree labels an external hierarchy's tool gives namespace `ns` (the namespace
/// webhook): each new one names a namespace of that tool's own hierarchy, not one that exists
/// in the cluster, or the tool could place `ns` (and its descendants) in any namespace's
/// subtree for every policy selecting it by tree label.
pub fn check_external_labels(
    forest: &Forest,
    ns: &str,
    old: Option<&k8s_openapi::api::core::v1::Namespace>,
    new: &k8s_openapi::api::core::v1::Namespace,
) -> Result<(), Refusal> {
    let Some(new_labels) = new.metadata.labels.as_ref() else { return Ok(()) };
    let old_labels = old.and_then(|o| o.metadata.labels.as_ref());
    for (key, value) in new_labels {
        let Some(named) = keys::tree_label_ancestor(key).filter(|a| *a != ns) else { continue };
        if old_labels.and_then(|l| l.get(key)) == Some(value) || forest.get(named).is_none() {
            continue;
        }
        return Err(Refusal::Forbidden(format!(
            "tree label \"{key}\" in namespace \"{ns}\" names namespace \"{named}\", which exists in the cluster; the tree labels of an external hierarchy ({}) may name only namespaces of that hierarchy's own",
            keys::MANAGED_BY
        )));
    }
    Ok(())
}

/// Checks deleting subnamespace `name` of `parent`: a subnamespace with children goes only
/// where cascading deletion is allowed.
pub fn check_delete_subnamespace(forest: &Forest, name: &str) -> Result<(), Refusal> {
    if forest.children(name).next().is_some() && !forest.allows_cascading_deletion(name) {
        let parent = forest.get(name).and_then(|n| n.parent.as_deref()).unwrap_or("PARENT");
        // HNC's words first, then the command.
        return Err(Refusal::Forbidden(format!(
            "subnamespace {name} is not a leaf and doesn't allow cascading deletion. Please set allowCascadingDeletion flag or make it a leaf first. To delete it with everything below it: kubectl hns delete {name} -n {parent} --allowCascadingDeletion"
        )));
    }
    Ok(())
}

/// Checks deleting namespace `ns` directly (the namespace webhook). The refusal names the
/// parent only when `name_parent`: the webhook answers callers it cannot authenticate, and to
/// them it says nothing of namespaces other than the one asked about.
pub fn check_namespace_delete(forest: &Forest, ns: &str, name_parent: bool) -> Result<(), Refusal> {
    let Some(node) = forest.get(ns) else { return Ok(()) };
    if node.is_subnamespace {
        let parent = node.parent.as_deref().unwrap_or_default();
        // Once the parent is gone or going, the subnamespace goes with it.
        let parent_alive = !forest.is_terminating(parent);
        if parent_alive && name_parent {
            return Err(Refusal::Forbidden(format!(
                "namespace \"{ns}\" is a subnamespace. Please delete the subnamespace from the parent namespace {parent} to delete it: kubectl delete subnamespace {ns} -n {parent}"
            )));
        }
        if parent_alive {
            return Err(Refusal::Forbidden(format!(
                "namespace \"{ns}\" is a subnamespace. Please delete the subnamespace from its parent namespace to delete it: kubectl delete subnamespace {ns} -n PARENT (kubectl hns describe {ns} names the parent)"
            )));
        }
    }
    if forest.subnamespaces(ns).next().is_some() && !forest.allows_cascading_deletion(ns) {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{ns}\" contains subnamespaces. Please remove all subnamespaces before deleting this namespace, or set 'allowCascadingDeletion' to delete them automatically: kubectl hns set {ns} --allowCascadingDeletion"
        )));
    }
    Ok(())
}

/// Checks managed labels and annotations (`spec.labels`, `spec.annotations`) against the
/// administrator's patterns.
pub fn check_managed(policy: &Policy, labels: &[MetaKvp], annotations: &[MetaKvp]) -> Result<(), Refusal> {
    let mut causes = Vec::new();
    for (i, kv) in labels.iter().enumerate() {
        if keys::is_hns_label(&kv.key) || !policy.is_managed_label(&kv.key) {
            causes.push((
                format!("spec.labels[{i}].key"),
                format!("Not a legal managed label (set via --managed-namespace-label): {}", kv.key),
            ));
        } else if !is_label_value(&kv.value) {
            causes.push((
                format!("spec.labels[{i}].value"),
                format!("Not a legal label value: {:?}", kv.value),
            ));
        }
    }
    for (i, kv) in annotations.iter().enumerate() {
        // managed-by is for the tool that creates a root, never inherited down a tree.
        let hns_own = keys::HNS_ANNOTATIONS.contains(&kv.key.as_str()) || kv.key == keys::MANAGED_BY;
        if hns_own || !policy.is_managed_annotation(&kv.key) {
            causes.push((
                format!("spec.annotations[{i}].key"),
                format!(
                    "Not a legal managed annotation (set via --managed-namespace-annotation): {}",
                    kv.key
                ),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Invalid(causes))
    }
}

fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Checks a direct edit of a namespace's labels and annotations by someone other than hns:
/// tree labels, the membership label and hns's annotations are hns's alone, and
/// `included-namespace` may only say `"true"`, on a namespace hns manages.
pub fn check_namespace_edit(
    policy: &Policy,
    ns: &str,
    old: Option<&k8s_openapi::api::core::v1::Namespace>,
    new: &k8s_openapi::api::core::v1::Namespace,
) -> Result<(), Refusal> {
    let pick = |n: Option<&k8s_openapi::api::core::v1::Namespace>, labels: bool| {
        n.and_then(|n| if labels { n.metadata.labels.clone() } else { n.metadata.annotations.clone() })
            .unwrap_or_default()
    };
    let (old_l, new_l) = (pick(old, true), pick(Some(new), true));
    let (old_a, new_a) = (pick(old, false), pick(Some(new), false));
    check_included_label(policy, ns, old.map(|_| &old_l), &new_l)?;
    let external = !policy.is_excluded(ns) && external_root(ns, &new_a)?;
    // The tool managing an external namespace gives it tree labels of its own hierarchy, and
    // takes them away again, with the annotation or after it.
    let externally_labelled = |k: &String| {
        keys::tree_label_ancestor(k).is_some_and(|a| a != ns)
            && (external || old.is_some_and(|_| external_root(ns, &old_a).unwrap_or(false)))
    };
    let maintained = |k: &&String| keys::is_hns_label(k) && k.as_str() != keys::INCLUDED_NAMESPACE;
    // A new namespace may come with its own tree label at depth 0: what every lone namespace hns
    // manages carries, and what hns's mutating webhook sets in the creating request.
    let own_root_label = |k: &String| {
        old.is_none()
            && !policy.is_excluded(ns)
            && *k == keys::tree_label(ns)
            && new_l.get(k).is_some_and(|v| v == "0")
    };
    for key in old_l.keys().chain(new_l.keys()).filter(maintained) {
        if externally_labelled(key) && new_l.get(key).is_some_and(|v| !is_external_depth(v)) {
            return Err(Refusal::Forbidden(format!(
                "tree label \"{key}\" in namespace \"{ns}\" must give a depth above it: a whole number from 1, written without leading zeros"
            )));
        }
        if old_l.get(key) != new_l.get(key) && !own_root_label(key) && !externally_labelled(key) {
            let what = if keys::tree_label_ancestor(key).is_some() { "tree label" } else { "label" };
            let how = if new_l.contains_key(key) { "set or modify" } else { "remove" };
            return Err(Refusal::Forbidden(format!(
                "cannot {how} {what} \"{key}\" in namespace \"{ns}\"; these can only be managed by hns"
            )));
        }
    }
    for key in keys::HNS_ANNOTATIONS {
        if old_a.get(*key) != new_a.get(*key) {
            return Err(Refusal::Forbidden(format!(
                "cannot set or modify annotation \"{key}\" in namespace \"{ns}\"; it can only be managed by hns: use the HierarchyConfiguration or Subnamespace API (kubectl hns set / kubectl hns create)"
            )));
        }
    }
    Ok(())
}

/// A depth an external tree label may give: as hns writes depths (so that it never rewrites the
/// tool's), and above the namespace.
fn is_external_depth(v: &str) -> bool {
    v.parse::<u32>().is_ok_and(|d| d >= 1 && d.to_string() == v)
}

/// Whether a namespace with annotations `annotations` is an external root
/// ([`crate::hierarchy::forest::Node::external_manager`]); refused when it names an external
/// manager and has a parent in hns, as HNC refuses it: the two are exclusive.
fn external_root(
    ns: &str,
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<bool, Refusal> {
    let Some(manager) = keys::external_manager(annotations.get(keys::MANAGED_BY).map(String::as_str)) else {
        return Ok(false);
    };
    let parent = |k: &str| annotations.get(k).filter(|p| !p.is_empty());
    if let Some(p) = parent(keys::SUBNAMESPACE_OF) {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{ns}\" is a subnamespace of \"{p}\". Namespaces with parents defined by hns cannot also be managed externally, and a subnamespace cannot be made a root; leave out the annotation {}",
            keys::MANAGED_BY
        )));
    }
    if let Some(p) = parent(keys::PARENT) {
        return Err(Refusal::Forbidden(format!(
            "namespace \"{ns}\" is a child of \"{p}\". Namespaces with parents defined by hns cannot also be managed externally. To manage this namespace with \"{manager}\", first make it a root in hns: kubectl hns set {ns} --root"
        )));
    }
    Ok(true)
}

/// The managed labels (`--managed-namespace-label`) a direct edit of namespace `ns` changes:
/// hns keeps them as the hierarchy configurations say and undoes the edit, which the namespace
/// webhook says in a warning rather than letting it pass silently. An external namespace's own
/// are its tool's to set.
pub fn managed_label_edits(
    policy: &Policy,
    ns: &str,
    old: &k8s_openapi::api::core::v1::Namespace,
    new: &k8s_openapi::api::core::v1::Namespace,
) -> Vec<String> {
    let labels = |n: &k8s_openapi::api::core::v1::Namespace| n.metadata.labels.clone().unwrap_or_default();
    let annotations = new.metadata.annotations.clone().unwrap_or_default();
    if external_root(ns, &annotations).unwrap_or(false) {
        return Vec::new();
    }
    let (old_l, new_l) = (labels(old), labels(new));
    let edited: std::collections::BTreeSet<&String> = old_l
        .keys()
        .chain(new_l.keys())
        .filter(|k| policy.is_managed_label(k) && !keys::is_hns_label(k) && old_l.get(*k) != new_l.get(*k))
        .collect();
    edited.into_iter().cloned().collect()
}

/// HNC's rule for `included-namespace` (`old` is `None` on create): an excluded namespace may
/// not carry it (webhooks selecting managed namespaces by it would then apply to it), and a
/// managed one may carry only `"true"`. HNC's mutating webhook adds the label on create; hns's
/// controller does, so a new namespace may come without it, but it may not be removed.
fn check_included_label(
    policy: &Policy,
    ns: &str,
    old: Option<&std::collections::BTreeMap<String, String>>,
    new: &std::collections::BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let key = keys::INCLUDED_NAMESPACE;
    let value = new.get(key);
    if old.map(|o| o.get(key)) == Some(value) {
        return Ok(());
    }
    if policy.is_excluded(ns) {
        return match value {
            None => Ok(()),
            Some(_) => Err(Refusal::Forbidden(format!(
                "you cannot enforce webhook rules on this unmanaged namespace using the \"{key}\" label: namespace \"{ns}\" is excluded from hierarchies by the hns administrator; leave the label out"
            ))),
        };
    }
    match (old, value.map(String::as_str)) {
        (_, Some("true")) | (None, None) => Ok(()),
        _ => Err(Refusal::Forbidden(format!(
            "you cannot change the value of the \"{key}\" label. It has to be set as true on all managed namespaces; hns maintains it, so leave it as it is"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hierarchy::forest::testing::{forest, namespace};
    use crate::hierarchy::policy::testing::policy;

    fn checks(v: Vec<AuthzCheck>) -> Vec<(String, &'static str)> {
        v.into_iter().map(|c| (c.namespace, c.reason)).collect()
    }

    fn message(r: Refusal) -> String {
        match r {
            Refusal::Invalid(causes) => {
                causes.into_iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join("; ")
            }
            Refusal::Forbidden(m) | Refusal::Conflict(m) | Refusal::NotSynced(m) => m,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn cycles_and_self_parents_are_refused_with_the_ancestry() {
        let f = forest("a b:a c:b");
        let p = policy();
        let m = message(check_parent_change(&f, &p, "a", Some("c")).unwrap_err());
        assert_eq!(m, "spec.parent: illegal parent: cycle when making \"c\" the parent of \"a\": current ancestry is a <- b <- c");
        let m = message(check_parent_change(&f, &p, "a", Some("a")).unwrap_err());
        assert!(m.contains("cycle when making \"a\" the parent of \"a\""), "{m}");
    }

    #[test]
    fn missing_and_excluded_parents_are_refused() {
        let f = forest("a kube-system");
        let p = policy();
        assert_eq!(
            message(check_parent_change(&f, &p, "a", Some("nope")).unwrap_err()),
            "spec.parent: requested parent \"nope\" does not exist"
        );
        assert!(message(check_parent_change(&f, &p, "a", Some("kube-system")).unwrap_err())
            .contains("not managed by hns"));
        assert!(message(check_parent_change(&f, &p, "kube-system", Some("a")).unwrap_err())
            .contains("cannot be set as a child"));
        assert!(matches!(check_parent_change(&f, &p, "unseen", Some("a")), Err(Refusal::NotSynced(_))));
    }

    #[test]
    fn a_subnamespace_keeps_its_parent() {
        let f = forest("a b c:~a");
        let m = message(check_parent_change(&f, &policy(), "c", Some("b")).unwrap_err());
        assert!(
            m.starts_with("spec.parent: illegal parent: Cannot set the parent of \"c\" to \"b\" because it's a subnamespace of \"a\". ")
                && m.ends_with("It goes when its parent deletes it: kubectl hns delete c -n a"),
            "{m}"
        );
        assert!(
            check_parent_change(&f, &policy(), "c", Some("a")).unwrap().is_empty(),
            "no change, no check"
        );
    }

    #[test]
    fn move_permissions_follow_hnc() {
        // org ─┬─ t1 ─ x
        //      └─ t2        other
        let f = forest("org t1:org t2:org x:t1 other y");
        let p = policy();
        assert_eq!(
            checks(check_parent_change(&f, &p, "x", Some("t2")).unwrap()),
            [("org".into(), "most recent common ancestor")]
        );
        assert_eq!(
            checks(check_parent_change(&f, &p, "x", Some("other")).unwrap()),
            [("org".into(), "current root"), ("other".into(), "proposed parent")]
        );
        assert_eq!(checks(check_parent_change(&f, &p, "x", None).unwrap()), [("org".into(), "current root")]);
        assert_eq!(
            checks(check_parent_change(&f, &p, "y", Some("t2")).unwrap()),
            [("t2".into(), "proposed parent")]
        );
        assert_eq!(
            checks(check_parent_change(&f, &p, "t1", Some("t2")).unwrap()),
            [("org".into(), "most recent common ancestor")]
        );
    }

    #[test]
    fn new_subnamespaces() {
        let f = forest("team-a team-a-dev:~team-a full");
        let p = policy();
        assert!(check_new_subnamespace(&f, &p, "team-a", "team-a-test").is_ok());
        assert_eq!(check_new_subnamespace(&f, &p, "team-a", "team-a-dev"), Err(Refusal::AlreadyExists));
        assert_eq!(
            check_new_subnamespace(&f, &p, "team-a", "full"),
            Err(Refusal::Conflict("cannot create a subnamespace using an existing namespace".into()))
        );
        assert!(matches!(check_new_subnamespace(&f, &p, "kube-system", "x"), Err(Refusal::Forbidden(_))));
        assert!(matches!(
            check_new_subnamespace(&f, &p, "team-a", "kube-public"),
            Err(Refusal::Forbidden(_))
        ));
        assert_eq!(
            check_new_subnamespace(&f, &p, "gone", "x"),
            Err(Refusal::NamespaceNotFound("gone".into()))
        );
        assert!(matches!(check_new_subnamespace(&f, &p, "team-a", "Bad_Name"), Err(Refusal::Invalid(_))));
    }

    #[test]
    fn deleting_a_parent_subnamespace_needs_cascading_deletion() {
        let f = forest("a b:~a c:~b");
        let m = message(check_delete_subnamespace(&f, "b").unwrap_err());
        assert!(m.starts_with("subnamespace b is not a leaf and doesn't allow cascading deletion"), "{m}");
        assert!(m.ends_with("kubectl hns delete b -n a --allowCascadingDeletion"), "the command: {m}");
        assert!(check_delete_subnamespace(&f, "c").is_ok());
    }

    #[test]
    fn namespace_deletion_rules() {
        let mut f = forest("a b:~a full:a");
        let m = message(check_namespace_delete(&f, "b", true).unwrap_err());
        assert!(
            m.contains("is a subnamespace. Please delete the subnamespace from the parent namespace a"),
            "{m}"
        );
        // To a caller it cannot authenticate, the webhook names no other namespace.
        let m = message(check_namespace_delete(&f, "b", false).unwrap_err());
        assert!(m.contains("is a subnamespace") && !m.contains("namespace a") && !m.contains("-n a"), "{m}");
        let m = message(check_namespace_delete(&f, "a", false).unwrap_err());
        assert!(m.contains("contains subnamespaces") && !m.contains(" b "), "{m}");
        assert!(check_namespace_delete(&f, "full", true).is_ok(), "full children do not block");
        // While the parent terminates, its subnamespaces may go.
        let mut a = namespace("a", None, false);
        a.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
        f.upsert(a);
        assert!(check_namespace_delete(&f, "b", true).is_ok());
    }

    #[test]
    fn managed_labels_must_match_the_policy() {
        let p = policy();
        let kv = |k: &str, v: &str| MetaKvp { key: k.into(), value: v.into() };
        assert!(
            check_managed(&p, &[kv("team.example.com/owner", "alice")], &[kv("note", "hi there")]).is_ok()
        );
        let Refusal::Invalid(causes) = check_managed(
            &p,
            &[kv("env", "prod"), kv("team.example.com/x", "bad value!")],
            &[kv("other", "")],
        )
        .unwrap_err() else {
            panic!()
        };
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["spec.labels[0].key", "spec.labels[1].value", "spec.annotations[0].key"]);
    }

    #[test]
    fn direct_edits_of_hns_keys_are_refused() {
        let old = namespace("a", Some("p"), false);
        let mut new = old.clone();
        new.metadata.labels = Some([("a.tree.hnc.x-k8s.io/depth".to_string(), "0".to_string())].into());
        assert!(message(check_namespace_edit(&policy(), "a", Some(&old), &new).unwrap_err())
            .contains("tree label"));
        let mut new = old.clone();
        new.metadata.annotations.as_mut().unwrap().insert(keys::PARENT.into(), "q".into());
        assert!(message(check_namespace_edit(&policy(), "a", Some(&old), &new).unwrap_err())
            .contains("hnc.x-k8s.io/parent"));
        let mut new = old.clone();
        new.metadata.labels = Some([("team".to_string(), "x".to_string())].into());
        assert!(
            check_namespace_edit(&policy(), "a", Some(&old), &new).is_ok(),
            "other labels are the user's"
        );
        assert!(
            check_namespace_edit(&policy(), "a", None, &namespace("n", Some("p"), true)).is_err(),
            "create with hns keys"
        );
    }

    #[test]
    fn a_new_namespace_may_come_with_its_own_root_label_only() {
        let with = |name: &str, key: &str, depth: &str| {
            let mut n = namespace(name, None, false);
            n.metadata.labels = Some([(key.to_string(), depth.to_string())].into());
            n
        };
        let own = "a.tree.hnc.x-k8s.io/depth";
        assert!(check_namespace_edit(&policy(), "a", None, &with("a", own, "0")).is_ok());
        assert!(check_namespace_edit(&policy(), "a", None, &with("a", own, "1")).is_err(), "another depth");
        let other = "b.tree.hnc.x-k8s.io/depth";
        assert!(
            check_namespace_edit(&policy(), "a", None, &with("a", other, "1")).is_err(),
            "another's label"
        );
        let excluded = "kube-system.tree.hnc.x-k8s.io/depth";
        assert!(
            check_namespace_edit(&policy(), "kube-system", None, &with("kube-system", excluded, "0"))
                .is_err(),
            "excluded namespaces carry no tree label"
        );
        let old = with("a", own, "0");
        let mut moved = old.clone();
        moved.metadata.labels =
            Some([(own.to_string(), "0".to_string()), (other.to_string(), "1".to_string())].into());
        assert!(
            check_namespace_edit(&policy(), "a", Some(&old), &moved).is_err(),
            "after creation, hns's alone"
        );
    }

    #[test]
    fn an_external_root_carries_its_managers_tree_labels_and_no_parent() {
        let external = |name: &str, parent: Option<&str>, labels: &[(&str, &str)]| {
            let mut n = namespace(name, parent, false);
            n.metadata.annotations.get_or_insert_default().insert(keys::MANAGED_BY.into(), "cs".into());
            n.metadata.labels = Some(crate::test_support::string_map(labels));
            n
        };
        let (own, org) = ("a.tree.hnc.x-k8s.io/depth", "org.tree.hnc.x-k8s.io/depth");
        let created = external("a", None, &[(own, "0"), (org, "1")]);
        assert!(check_namespace_edit(&policy(), "a", None, &created).is_ok(), "created by its manager");
        let relabelled = external("a", None, &[(own, "0"), (org, "2")]);
        assert!(check_namespace_edit(&policy(), "a", Some(&created), &relabelled).is_ok());
        let wrong_own = external("a", None, &[(own, "3"), (org, "1")]);
        assert!(
            check_namespace_edit(&policy(), "a", Some(&created), &wrong_own).is_err(),
            "its own is hns's"
        );
        let mut released = namespace("a", None, false);
        released.metadata.labels = Some([(own.to_string(), "0".to_string())].into());
        assert!(
            check_namespace_edit(&policy(), "a", Some(&created), &released).is_ok(),
            "the annotation and the labels go together"
        );
        let child = namespace("a", Some("p"), false);
        let m = message(
            check_namespace_edit(&policy(), "a", Some(&child), &external("a", Some("p"), &[])).unwrap_err(),
        );
        assert!(m.contains("is a child of \"p\"") && m.contains("kubectl hns set a --root"), "{m}");
        let sub = namespace("a", Some("p"), true);
        let mut managed_sub = sub.clone();
        managed_sub.metadata.annotations.get_or_insert_default().insert(keys::MANAGED_BY.into(), "cs".into());
        assert!(message(check_namespace_edit(&policy(), "a", Some(&sub), &managed_sub).unwrap_err())
            .contains("is a subnamespace of \"p\""));
        let mut hnc = child.clone();
        hnc.metadata
            .annotations
            .get_or_insert_default()
            .insert(keys::MANAGED_BY.into(), keys::MANAGED_BY_HNC.into());
        assert!(
            check_namespace_edit(&policy(), "a", Some(&child), &hnc).is_ok(),
            "hns's own name is no manager"
        );
        for depth in ["01", "0", "x", "-1"] {
            let odd = external("a", None, &[(own, "0"), (org, depth)]);
            let m = message(check_namespace_edit(&policy(), "a", Some(&created), &odd).unwrap_err());
            assert!(m.contains("must give a depth above it"), "{depth}: {m}");
        }
        let excluded = external("kube-system", None, &[(org, "1")]);
        assert!(
            check_namespace_edit(&policy(), "kube-system", None, &excluded).is_err(),
            "an excluded namespace is never external"
        );
        let annotation = [MetaKvp { key: keys::MANAGED_BY.into(), value: "cs".into() }];
        let everything = crate::hierarchy::policy::Policy::new(&[], &[], &[".*".to_string()], "hns").unwrap();
        assert!(check_managed(&everything, &[], &annotation).is_err(), "managed-by is not inherited");
    }

    #[test]
    fn direct_edits_of_managed_labels_are_named() {
        let with = |labels: &[(&str, &str)], managed_by: Option<&str>| {
            let mut n = namespace("a", None, false);
            n.metadata.labels = Some(crate::test_support::string_map(labels));
            if let Some(m) = managed_by {
                n.metadata.annotations.get_or_insert_default().insert(keys::MANAGED_BY.into(), m.into());
            }
            n
        };
        let old = with(&[("team.example.com/owner", "a"), ("team.example.com/x", "1"), ("other", "x")], None);
        let new = with(&[("team.example.com/tier", "b"), ("team.example.com/x", "2"), ("other", "y")], None);
        assert_eq!(
            managed_label_edits(&policy(), "a", &old, &new),
            ["team.example.com/owner", "team.example.com/tier", "team.example.com/x"]
        );
        assert!(managed_label_edits(&policy(), "a", &old, &old).is_empty());
        let external = with(&[("team.example.com/tier", "b")], Some("cs"));
        assert!(managed_label_edits(&policy(), "a", &old, &external).is_empty(), "the tool's own to set");
    }

    #[test]
    fn an_external_hierarchy_names_only_namespaces_that_do_not_exist() {
        let f = forest("prod");
        let mut ns = namespace("a", None, false);
        ns.metadata.labels = Some([(keys::tree_label("prod"), "1".to_string())].into());
        let m = message(check_external_labels(&f, "a", None, &ns).unwrap_err());
        assert!(m.contains("names namespace \"prod\", which exists in the cluster"), "{m}");
        assert!(check_external_labels(&f, "a", Some(&ns), &ns).is_ok(), "one it carries already stays");
        ns.metadata.labels = Some([(keys::tree_label("abstract"), "1".to_string())].into());
        assert!(check_external_labels(&f, "a", None, &ns).is_ok());
    }

    #[test]
    fn names_and_parents_of_external_hierarchies_are_refused() {
        let mut f = forest("acme dev:~acme other");
        crate::hierarchy::forest::testing::external(&mut f, "acme", "cs", &[("org", 1)], &[]);
        let m = message(check_namespace_create(&f, "org").unwrap_err());
        assert!(m.contains("reserved by the external hierarchy manager \"cs\""), "{m}");
        assert!(check_namespace_create(&f, "dev2").is_ok());
        assert!(matches!(check_new_subnamespace(&f, &policy(), "other", "org"), Err(Refusal::Conflict(_))));
        let m = message(check_parent_change(&f, &policy(), "acme", Some("other")).unwrap_err());
        assert!(m.contains("is managed by \"cs\", not hns, so it cannot have a parent"), "{m}");
        assert!(check_parent_change(&f, &policy(), "other", Some("acme")).is_ok(), "it may have children");
    }

    #[test]
    fn included_namespace_may_only_say_true_on_managed_namespaces() {
        let p = policy();
        let with = |name: &str, labels: &[(&str, &str)]| {
            let mut n = namespace(name, None, false);
            n.metadata.labels = Some(crate::test_support::string_map(labels));
            n
        };
        let inc = keys::INCLUDED_NAMESPACE;
        let labelled = with("a", &[(inc, "true"), ("a.tree.hnc.x-k8s.io/depth", "0")]);
        assert!(check_namespace_edit(&p, "a", None, &with("a", &[])).is_ok(), "created without it");
        assert!(check_namespace_edit(&p, "a", None, &with("a", &[(inc, "true")])).is_ok(), "or with it");
        let m = message(check_namespace_edit(&p, "a", None, &with("a", &[(inc, "false")])).unwrap_err());
        assert!(m.contains("has to be set as true"), "{m}");
        let removed = with("a", &[("a.tree.hnc.x-k8s.io/depth", "0")]);
        let m = message(check_namespace_edit(&p, "a", Some(&labelled), &removed).unwrap_err());
        assert!(m.contains("has to be set as true"), "{m}");
        let m = message(
            check_namespace_edit(&p, "a", Some(&labelled), &with("a", &[(inc, "true")])).unwrap_err(),
        );
        assert!(m.starts_with("cannot remove tree label"), "{m}");
        let m = message(
            check_namespace_edit(&p, "kube-system", None, &with("kube-system", &[(inc, "true")]))
                .unwrap_err(),
        );
        assert!(m.contains("unmanaged namespace"), "{m}");
        let mut team = labelled.clone();
        team.metadata.labels.as_mut().unwrap().insert("team".into(), "x".into());
        assert!(check_namespace_edit(&p, "a", Some(&labelled), &team).is_ok(), "other labels are the user's");
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns1123_label("team-a-1"));
        for bad in ["", "-a", "a-", "A", "a.b", &"x".repeat(64)] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn a_subnamespace_may_not_take_the_name_of_a_missing_ancestor() {
        let f = forest("orphan:gone below:orphan");
        let m = message(check_new_subnamespace(&f, &policy(), "below", "gone").unwrap_err());
        assert!(m.contains("cycle when making \"below\" the parent of \"gone\""), "{m}");
        assert!(check_new_subnamespace(&f, &policy(), "below", "fresh").is_ok());
    }
}
