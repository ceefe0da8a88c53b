//! Which controller should remove a finalizer, where that can be told: Kubernetes' own
//! finalizers are known by name; others are matched to the API group of a CustomResourceDefinition
//! by their domain (`<domain>/<name>`).

/// Who is expected to remove a finalizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    /// The controller, in words.
    pub controller: String,
    /// Whether it is part of Kubernetes itself. Such a finalizer is almost never "dead": removing
    /// it by hand hides a real fault (a pod still using a PVC, dependents still being deleted).
    pub builtin: bool,
    /// For a built-in finalizer, what usually holds it and what to do instead.
    pub hint: Option<&'static str>,
}

/// Kubernetes' own finalizers: name, controller, and what usually holds them.
const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "kubernetes",
        "the namespace controller (kube-controller-manager)",
        "it is removed once the namespace is empty",
    ),
    (
        "kubernetes.io/pvc-protection",
        "the pvc-protection controller (kube-controller-manager)",
        "a pod still uses the claim, often one stuck Terminating on a lost node; once no pod uses it the finalizer clears by itself",
    ),
    (
        "kubernetes.io/pv-protection",
        "the pv-protection controller (kube-controller-manager)",
        "a claim is still bound to the volume; it clears once the claim is gone",
    ),
    (
        "foregroundDeletion",
        "the garbage collector (kube-controller-manager)",
        "dependents with blockOwnerDeletion are still being deleted; look at those first",
    ),
    (
        "orphan",
        "the garbage collector (kube-controller-manager)",
        "the garbage collector is orphaning the dependents; check that kube-controller-manager runs",
    ),
    (
        "service.kubernetes.io/load-balancer-cleanup",
        "the service controller of the cloud-controller-manager",
        "the cloud load balancer is not deleted yet: fix the cloud-controller-manager or its cloud permissions, or delete the load balancer by hand first",
    ),
    (
        "customresourcecleanup.apiextensions.k8s.io",
        "kube-apiserver (apiextensions)",
        "the CRD waits for its custom resources to go; resolve their finalizers first",
    ),
    (
        "batch.kubernetes.io/job-tracking",
        "the job controller (kube-controller-manager)",
        "the job controller has not accounted for the pod yet; check that kube-controller-manager runs",
    ),
];

/// Attributes `finalizer` on an object of API group `object_group`, given the cluster's CRD
/// names (`<plural>.<group>`).
pub fn attribute(finalizer: &str, object_group: &str, crds: &[String]) -> Attribution {
    if let Some((_, controller, hint)) = BUILTIN.iter().find(|(name, ..)| *name == finalizer) {
        return Attribution { controller: controller.to_string(), builtin: true, hint: Some(hint) };
    }
    let Some((domain, _)) = finalizer.split_once('/') else {
        return unknown(finalizer);
    };
    if domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || domain.ends_with(".k8s.io") {
        return Attribution {
            controller: format!("a Kubernetes component ({domain})"),
            builtin: true,
            hint: None,
        };
    }
    let groups = crd_groups(crds);
    let owner = std::iter::once(object_group)
        .chain(groups.iter().map(String::as_str))
        .filter(|g| !g.is_empty())
        .find(|g| related(domain, g));
    match owner {
        Some(group) => {
            let names: Vec<&str> = crds
                .iter()
                .filter(|c| c.split_once('.').is_some_and(|(_, g)| g == group))
                .map(String::as_str)
                .collect();
            let crds =
                if names.is_empty() { String::new() } else { format!(" (CRDs: {})", names.join(", ")) };
            Attribution { controller: format!("the controller of {group}{crds}"), builtin: false, hint: None }
        }
        None => Attribution {
            controller: format!("the controller that owns {domain}"),
            builtin: false,
            hint: None,
        },
    }
}

fn unknown(finalizer: &str) -> Attribution {
    Attribution {
        controller: format!("an unknown controller (finalizer {finalizer:?} names no domain)"),
        builtin: false,
        hint: None,
    }
}

fn crd_groups(crds: &[String]) -> Vec<String> {
    let mut groups: Vec<String> =
        crds.iter().filter_map(|c| c.split_once('.').map(|(_, g)| g.to_string())).collect();
    groups.sort();
    groups.dedup();
    groups
}

/// Whether a finalizer domain and an API group belong to the same project: equal, one a
/// subdomain of the other (`finalizers.example.com` and `example.com`), or sharing the last two
/// labels beyond a common word (`kapp-ctrl.k14s.io` and `kappctrl.k14s.io`).
fn related(domain: &str, group: &str) -> bool {
    let sub = |a: &str, b: &str| a == b || a.ends_with(&format!(".{b}"));
    if sub(domain, group) || sub(group, domain) {
        return true;
    }
    let base = |s: &str| -> String {
        let labels: Vec<&str> = s.split('.').collect();
        labels[labels.len().saturating_sub(2)..].join(".")
    };
    let first = |s: &str| s.split('.').next().unwrap_or("").replace('-', "");
    let d = domain.trim_start_matches("finalizers.");
    base(d) == base(group) && first(d) == first(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crds() -> Vec<String> {
        vec![
            "widgets.stable.example.com".into(),
            "gadgets.stable.example.com".into(),
            "apps.kappctrl.k14s.io".into(),
        ]
    }

    #[test]
    fn knows_kubernetes_finalizers() {
        let a = attribute("kubernetes.io/pvc-protection", "", &crds());
        assert!(a.builtin);
        assert!(a.controller.contains("pvc-protection"));
        assert!(a.hint.unwrap().contains("pod"));
        assert!(attribute("foregroundDeletion", "apps", &crds()).builtin);
        assert!(attribute("kubernetes.io/some-new-one", "", &[]).builtin);
        assert!(attribute("external-attacher.csi.k8s.io/x", "", &[]).builtin);
    }

    #[test]
    fn matches_a_finalizer_to_its_crd_group() {
        let a = attribute("stable.example.com/cleanup", "stable.example.com", &crds());
        assert!(!a.builtin);
        assert_eq!(
            a.controller,
            "the controller of stable.example.com (CRDs: widgets.stable.example.com, gadgets.stable.example.com)"
        );
        let sub = attribute("finalizers.stable.example.com/x", "", &crds());
        assert!(sub.controller.starts_with("the controller of stable.example.com"));
        let kapp = attribute("finalizers.kapp-ctrl.k14s.io/delete", "", &crds());
        assert!(kapp.controller.starts_with("the controller of kappctrl.k14s.io"), "{kapp:?}");
    }

    #[test]
    fn prefers_the_objects_own_group() {
        let a = attribute("example.com/block", "stable.example.com", &crds());
        assert!(a.controller.starts_with("the controller of stable.example.com"));
    }

    #[test]
    fn says_so_when_it_cannot_tell() {
        let a = attribute("acme.io/hold", "", &crds());
        assert_eq!(a.controller, "the controller that owns acme.io");
        assert!(!a.builtin);
        assert!(attribute("hold", "", &[]).controller.contains("unknown"));
    }
}
