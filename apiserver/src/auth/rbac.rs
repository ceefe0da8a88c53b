//! Kubernetes RBAC, evaluated in memory: the Roles, ClusterRoles and their bindings hns watches,
//! indexed by subject, answer "in which namespaces may this user `get` this resource?" in one
//! pass over the user's own bindings. The rules are the RBAC authorizer's
//! (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac): a ClusterRoleBinding grants its
//! ClusterRole's rules in every namespace, a RoleBinding its Role's (or ClusterRole's) in its
//! own; a ServiceAccount subject without a namespace is the binding's namespace's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};

use crate::auth::authn::Identity;

/// The group kube-apiserver allows everything, before any authorizer is asked.
pub const PRIVILEGED_GROUP: &str = "system:masters";

/// Who a binding names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SubjectKey {
    User(String),
    Group(String),
    ServiceAccount { namespace: String, name: String },
}

/// A binding, by where it lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum BindingKey {
    Cluster(String),
    Namespaced { namespace: String, name: String },
}

/// What a binding grants: a role, to subjects.
#[derive(Debug, Clone)]
struct Binding {
    /// `Role` (in the binding's namespace) or `ClusterRole`.
    role_kind: String,
    role_name: String,
    subjects: Vec<SubjectKey>,
}

/// Which objects of a resource a set of rules allows, in one namespace or everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub enum Names {
    /// None.
    #[default]
    None,
    /// Only these (rules with `resourceNames`).
    Only(std::collections::BTreeSet<String>),
    /// All of them.
    All,
}

impl Names {
    /// Whether the object `name` is allowed.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Names::None => false,
            Names::Only(names) => names.contains(name),
            Names::All => true,
        }
    }

    /// These and `rule`'s, if the rule grants `verb` on `group`/`resource`.
    fn widen(&mut self, rule: &PolicyRule, verb: &str, group: &str, resource: &str) {
        if !rule_allows(rule, verb, group, resource) || *self == Names::All {
            return;
        }
        match rule.resource_names.as_deref().unwrap_or_default() {
            [] => *self = Names::All,
            names => {
                let mut only = match std::mem::take(self) {
                    Names::Only(set) => set,
                    _ => Default::default(),
                };
                only.extend(names.iter().cloned());
                *self = Names::Only(only);
            }
        }
    }

    fn is_none(&self) -> bool {
        *self == Names::None
    }

    /// Whether every object `other` allows, these allow too.
    pub fn covers(&self, other: &Names) -> bool {
        match (self, other) {
            (Names::All, _) | (_, Names::None) => true,
            (Names::Only(mine), Names::Only(theirs)) => theirs.is_subset(mine),
            (Names::None | Names::Only(_), Names::All) | (Names::None, Names::Only(_)) => false,
        }
    }

    /// What these or `other` allow.
    fn union(&self, other: &Names) -> Names {
        match (self, other) {
            (Names::All, _) | (_, Names::All) => Names::All,
            (Names::None, n) | (n, Names::None) => n.clone(),
            (Names::Only(a), Names::Only(b)) => Names::Only(a.union(b).cloned().collect()),
        }
    }
}

/// Where a user may do one thing to a resource: everywhere (ClusterRoleBindings), and in the
/// namespaces their RoleBindings cover. (Serialized in order: the same grants are the same bytes,
/// which a view's fingerprint is made from.)
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Grants {
    /// In every namespace.
    pub everywhere: Names,
    /// In these namespaces (beyond `everywhere`).
    pub namespaces: BTreeMap<String, Names>,
}

impl Grants {
    /// Everything, everywhere.
    pub fn all() -> Grants {
        Grants { everywhere: Names::All, namespaces: BTreeMap::new() }
    }

    /// Whether object `name` in `namespace` is allowed.
    pub fn allows(&self, namespace: &str, name: &str) -> bool {
        self.everywhere.allows(name) || self.namespaces.get(namespace).is_some_and(|n| n.allows(name))
    }

    /// Whether every object `other` allows, these allow too. Objects `other` allows in every
    /// namespace must be allowed here in every namespace: namespaces are not enumerated, so
    /// the answer may be "no" where per-namespace grants happen to cover them all.
    pub fn covers(&self, other: &Grants) -> bool {
        self.everywhere.covers(&other.everywhere)
            && other.namespaces.iter().all(|(ns, theirs)| {
                let mine = self
                    .namespaces
                    .get(ns)
                    .map_or_else(|| self.everywhere.clone(), |n| n.union(&self.everywhere));
                mine.covers(theirs)
            })
    }
}

/// The RBAC objects of the cluster, indexed by subject.
#[derive(Debug, Default)]
pub struct Rbac {
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    bindings: HashMap<BindingKey, Binding>,
    by_subject: HashMap<SubjectKey, HashSet<BindingKey>>,
}

fn rules(rules: &Option<Vec<PolicyRule>>) -> Arc<[PolicyRule]> {
    rules.clone().unwrap_or_default().into()
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

impl Rbac {
    /// Records a ClusterRole (aggregated ones carry the rules kube-controller-manager filled in).
    pub fn apply_cluster_role(&mut self, role: &ClusterRole) {
        self.cluster_roles.insert(name_of(&role.metadata).1, rules(&role.rules));
    }

    /// The ClusterRoles held, by (namespace, name).
    pub fn cluster_role_keys(&self) -> Vec<(String, String)> {
        self.cluster_roles.keys().map(|name| (String::new(), name.clone())).collect()
    }

    /// The Roles held, by (namespace, name).
    pub fn role_keys(&self) -> Vec<(String, String)> {
        self.roles.keys().cloned().collect()
    }

    /// The ClusterRoleBindings held, by (namespace, name).
    pub fn cluster_binding_keys(&self) -> Vec<(String, String)> {
        let cluster = |k: &BindingKey| match k {
            BindingKey::Cluster(name) => Some((String::new(), name.clone())),
            BindingKey::Namespaced { .. } => None,
        };
        self.bindings.keys().filter_map(cluster).collect()
    }

    /// The RoleBindings held, by (namespace, name).
    pub fn binding_keys(&self) -> Vec<(String, String)> {
        let namespaced = |k: &BindingKey| match k {
            BindingKey::Cluster(_) => None,
            BindingKey::Namespaced { namespace, name } => Some((namespace.clone(), name.clone())),
        };
        self.bindings.keys().filter_map(namespaced).collect()
    }

    /// Forgets a ClusterRole, by (namespace, name).
    pub fn delete_cluster_role(&mut self, (_, name): &(String, String)) {
        self.cluster_roles.remove(name);
    }

    /// Records a Role.
    pub fn apply_role(&mut self, role: &Role) {
        self.roles.insert(name_of(&role.metadata), rules(&role.rules));
    }

    /// Forgets a Role, by (namespace, name).
    pub fn delete_role(&mut self, key: &(String, String)) {
        self.roles.remove(key);
    }

    /// Records a ClusterRoleBinding.
    pub fn apply_cluster_binding(&mut self, b: &ClusterRoleBinding) {
        let key = BindingKey::Cluster(name_of(&b.metadata).1);
        let binding = binding(&b.role_ref.kind, &b.role_ref.name, b.subjects.as_deref(), "");
        self.insert_binding(key, binding);
    }

    /// Forgets a ClusterRoleBinding, by (namespace, name).
    pub fn delete_cluster_binding(&mut self, (_, name): &(String, String)) {
        self.remove_binding(&BindingKey::Cluster(name.clone()));
    }

    /// Records a RoleBinding.
    pub fn apply_binding(&mut self, b: &RoleBinding) {
        let (namespace, name) = name_of(&b.metadata);
        let binding = binding(&b.role_ref.kind, &b.role_ref.name, b.subjects.as_deref(), &namespace);
        self.insert_binding(BindingKey::Namespaced { namespace, name }, binding);
    }

    /// Forgets a RoleBinding, by (namespace, name).
    pub fn delete_binding(&mut self, (namespace, name): &(String, String)) {
        self.remove_binding(&BindingKey::Namespaced { namespace: namespace.clone(), name: name.clone() });
    }

    fn insert_binding(&mut self, key: BindingKey, binding: Binding) {
        self.remove_binding(&key);
        for s in &binding.subjects {
            self.by_subject.entry(s.clone()).or_default().insert(key.clone());
        }
        self.bindings.insert(key, binding);
    }

    fn remove_binding(&mut self, key: &BindingKey) {
        let Some(old) = self.bindings.remove(key) else { return };
        for s in &old.subjects {
            if let Some(keys) = self.by_subject.get_mut(s) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_subject.remove(s);
                }
            }
        }
    }

    /// Where `who` may `verb` objects of `group`/`resource`, as RBAC decides it.
    pub fn grants(&self, who: &Identity, verb: &str, group: &str, resource: &str) -> Grants {
        if who.in_group(PRIVILEGED_GROUP) {
            return Grants::all();
        }
        let mut grants = Grants::default();
        let mut keys: Vec<&BindingKey> =
            subject_keys(who).iter().filter_map(|s| self.by_subject.get(s)).flatten().collect();
        // Cluster bindings first, so namespaces need not be recorded once everything is allowed.
        keys.sort();
        keys.dedup();
        for key in keys {
            let binding = &self.bindings[key];
            let (names, namespace) = match key {
                BindingKey::Cluster(_) => (&mut grants.everywhere, None),
                BindingKey::Namespaced { namespace, .. } => {
                    if grants.everywhere == Names::All {
                        break;
                    }
                    (grants.namespaces.entry(namespace.clone()).or_default(), Some(namespace.as_str()))
                }
            };
            for rule in self.role_rules(binding, namespace).iter() {
                names.widen(rule, verb, group, resource);
            }
        }
        grants.namespaces.retain(|_, n| !n.is_none());
        grants
    }

    /// The rules of the role a binding refers to (none if it does not exist, as in RBAC).
    fn role_rules(&self, binding: &Binding, namespace: Option<&str>) -> Arc<[PolicyRule]> {
        let found = match (binding.role_kind.as_str(), namespace) {
            ("ClusterRole", _) => self.cluster_roles.get(&binding.role_name),
            ("Role", Some(ns)) => self.roles.get(&(ns.to_string(), binding.role_name.clone())),
            _ => None,
        };
        found.cloned().unwrap_or_else(|| Arc::from(Vec::new()))
    }
}

fn binding(role_kind: &str, role_name: &str, subjects: Option<&[Subject]>, namespace: &str) -> Binding {
    Binding {
        role_kind: role_kind.to_string(),
        role_name: role_name.to_string(),
        subjects: subjects.unwrap_or_default().iter().filter_map(|s| subject_key(s, namespace)).collect(),
    }
}

/// The key of a subject; a ServiceAccount without a namespace is the binding's namespace's (none
/// for a ClusterRoleBinding, where it matches nobody).
fn subject_key(s: &Subject, binding_namespace: &str) -> Option<SubjectKey> {
    match s.kind.as_str() {
        "User" => Some(SubjectKey::User(s.name.clone())),
        "Group" => Some(SubjectKey::Group(s.name.clone())),
        "ServiceAccount" => {
            let namespace =
                s.namespace.clone().filter(|n| !n.is_empty()).unwrap_or(binding_namespace.to_string());
            (!namespace.is_empty()).then(|| SubjectKey::ServiceAccount { namespace, name: s.name.clone() })
        }
        _ => None,
    }
}

/// The subjects that name `who`.
fn subject_keys(who: &Identity) -> Vec<SubjectKey> {
    let mut keys = vec![SubjectKey::User(who.user.clone())];
    keys.extend(who.groups.iter().map(|g| SubjectKey::Group(g.clone())));
    if let Some((namespace, name)) =
        who.user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'))
    {
        if !namespace.is_empty() && !name.is_empty() && !name.contains(':') {
            keys.push(SubjectKey::ServiceAccount { namespace: namespace.into(), name: name.into() });
        }
    }
    keys
}

/// Whether `rule` grants `verb` on `group`/`resource` (no subresource), whatever its
/// `resourceNames`: RBAC's `VerbMatches`, `APIGroupMatches` and `ResourceMatches`.
fn rule_allows(rule: &PolicyRule, verb: &str, group: &str, resource: &str) -> bool {
    let has = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
    has(&rule.verbs, verb)
        && has(rule.api_groups.as_deref().unwrap_or_default(), group)
        && has(rule.resources.as_deref().unwrap_or_default(), resource)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::RoleRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const GROUP: &str = "hnc.x-k8s.io";
    const RESOURCE: &str = "subnamespaces";

    fn who(user: &str, groups: &[&str]) -> Identity {
        Identity {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: Default::default(),
        }
    }

    fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta { namespace: namespace.map(String::from), name: Some(name.into()), ..Default::default() }
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PolicyRule {
            verbs: v(verbs),
            api_groups: Some(v(groups)),
            resources: Some(v(resources)),
            resource_names: (!names.is_empty()).then(|| v(names)),
            ..Default::default()
        }
    }

    fn subject(kind: &str, name: &str, namespace: Option<&str>) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(String::from),
            ..Default::default()
        }
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: kind.into(), name: name.into() }
    }

    fn bind(rbac: &mut Rbac, ns: &str, name: &str, role: RoleRef, subjects: Vec<Subject>) {
        rbac.apply_binding(&RoleBinding {
            metadata: meta(Some(ns), name),
            role_ref: role,
            subjects: Some(subjects),
        });
    }

    fn cluster() -> Rbac {
        let mut rbac = Rbac::default();
        rbac.apply_cluster_role(&ClusterRole {
            metadata: meta(None, "viewer"),
            rules: Some(vec![rule(&["get", "list"], &[GROUP], &[RESOURCE], &[])]),
            ..Default::default()
        });
        rbac.apply_role(&Role {
            metadata: meta(Some("b"), "one"),
            rules: Some(vec![rule(&["get"], &["*"], &["*"], &["x"])]),
        });
        rbac
    }

    fn namespaces(g: &Grants) -> Vec<&str> {
        g.namespaces.keys().map(String::as_str).collect()
    }

    #[test]
    fn grants_cover_what_they_allow_and_no_more() {
        let only = |names: &[&str]| Names::Only(names.iter().map(|n| n.to_string()).collect());
        let grants = |everywhere: Names, namespaces: &[(&str, Names)]| Grants {
            everywhere,
            namespaces: namespaces.iter().map(|(ns, n)| (ns.to_string(), n.clone())).collect(),
        };
        let a_and_b = grants(Names::None, &[("a", Names::All), ("b", only(&["x"]))]);
        assert!(a_and_b.covers(&grants(Names::None, &[("a", only(&["y"]))])), "a part of a");
        assert!(a_and_b.covers(&Grants::default()), "nothing");
        assert!(!a_and_b.covers(&grants(Names::None, &[("b", only(&["y"]))])), "another name in b");
        assert!(!a_and_b.covers(&grants(Names::None, &[("c", Names::All)])), "another namespace");
        assert!(!a_and_b.covers(&Grants::all()), "everything");
        assert!(Grants::all().covers(&a_and_b));
        // Names allowed everywhere count in every namespace.
        let x_everywhere = grants(only(&["x"]), &[("b", only(&["y"]))]);
        assert!(x_everywhere.covers(&grants(Names::None, &[("b", only(&["x", "y"]))])));
        assert!(!x_everywhere.covers(&grants(only(&["y"]), &[])));
    }

    #[test]
    fn the_index_lists_what_it_holds_of_each_kind() {
        let mut rbac = cluster();
        bind(&mut rbac, "a", "rb", role_ref("ClusterRole", "viewer"), vec![subject("User", "alice", None)]);
        rbac.apply_cluster_binding(&ClusterRoleBinding {
            metadata: meta(None, "crb"),
            role_ref: role_ref("ClusterRole", "viewer"),
            subjects: Some(vec![subject("User", "bob", None)]),
        });
        let key = |ns: &str, name: &str| (ns.to_string(), name.to_string());
        assert_eq!(rbac.cluster_role_keys(), [key("", "viewer")]);
        assert_eq!(rbac.role_keys(), [key("b", "one")]);
        assert_eq!(rbac.cluster_binding_keys(), [key("", "crb")]);
        assert_eq!(rbac.binding_keys(), [key("a", "rb")]);
        rbac.delete_binding(&key("a", "rb"));
        assert!(rbac.binding_keys().is_empty());
        assert_eq!(rbac.cluster_binding_keys(), [key("", "crb")], "the other kind stays");
    }

    #[test]
    fn role_bindings_grant_in_their_namespace_only() {
        let mut rbac = cluster();
        bind(&mut rbac, "a", "rb", role_ref("ClusterRole", "viewer"), vec![subject("User", "alice", None)]);
        bind(&mut rbac, "b", "rb", role_ref("Role", "one"), vec![subject("Group", "devs", None)]);
        let g = rbac.grants(&who("alice", &["devs"]), "get", GROUP, RESOURCE);
        assert_eq!(namespaces(&g), ["a", "b"]);
        assert!(
            g.allows("a", "anything") && g.allows("b", "x") && !g.allows("b", "y") && !g.allows("c", "x")
        );
        assert!(rbac.grants(&who("alice", &[]), "delete", GROUP, RESOURCE).namespaces.is_empty(), "verb");
        assert_eq!(namespaces(&rbac.grants(&who("bob", &["devs"]), "get", GROUP, RESOURCE)), ["b"]);
    }

    #[test]
    fn cluster_bindings_grant_everywhere_and_the_privileged_group_everything() {
        let mut rbac = cluster();
        rbac.apply_cluster_binding(&ClusterRoleBinding {
            metadata: meta(None, "crb"),
            role_ref: role_ref("ClusterRole", "viewer"),
            subjects: Some(vec![subject("User", "carol", None)]),
        });
        assert_eq!(rbac.grants(&who("carol", &[]), "list", GROUP, RESOURCE).everywhere, Names::All);
        assert_eq!(rbac.grants(&who("dave", &[PRIVILEGED_GROUP]), "get", "x", "y"), Grants::all());
        rbac.delete_cluster_binding(&(String::new(), "crb".into()));
        assert_eq!(rbac.grants(&who("carol", &[]), "list", GROUP, RESOURCE), Grants::default());
    }

    #[test]
    fn service_accounts_default_to_the_bindings_namespace() {
        let mut rbac = cluster();
        let sa = |ns| subject("ServiceAccount", "robot", ns);
        bind(&mut rbac, "a", "local", role_ref("ClusterRole", "viewer"), vec![sa(None)]);
        bind(&mut rbac, "c", "remote", role_ref("ClusterRole", "viewer"), vec![sa(Some("z"))]);
        let robot_a = who("system:serviceaccount:a:robot", &[]);
        assert_eq!(namespaces(&rbac.grants(&robot_a, "get", GROUP, RESOURCE)), ["a"]);
        let robot_z = who("system:serviceaccount:z:robot", &[]);
        assert_eq!(namespaces(&rbac.grants(&robot_z, "get", GROUP, RESOURCE)), ["c"]);
    }

    #[test]
    fn missing_roles_and_replaced_bindings_grant_nothing() {
        let mut rbac = cluster();
        bind(&mut rbac, "a", "rb", role_ref("Role", "absent"), vec![subject("User", "alice", None)]);
        assert!(rbac.grants(&who("alice", &[]), "get", GROUP, RESOURCE).namespaces.is_empty());
        bind(&mut rbac, "a", "rb", role_ref("ClusterRole", "viewer"), vec![subject("User", "bob", None)]);
        assert!(rbac.grants(&who("alice", &[]), "get", GROUP, RESOURCE).namespaces.is_empty(), "replaced");
        assert_eq!(namespaces(&rbac.grants(&who("bob", &[]), "get", GROUP, RESOURCE)), ["a"]);
        rbac.delete_cluster_role(&(String::new(), "viewer".into()));
        assert!(rbac.grants(&who("bob", &[]), "get", GROUP, RESOURCE).namespaces.is_empty(), "role gone");
    }
}
