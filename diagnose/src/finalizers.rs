//! Which controller should remove a finalizer, where that can be told: Kubernetes' own
//! finalizers are known by name, and domains Kubernetes reserves (`kubernetes.io`, `k8s.io` and
//! their subdomains) by domain. Any other finalizer (`<domain>/<name>`) names its owner only when
//! its domain is exactly an API group of the cluster (the object's own, or a CustomResourceDefinition's):
//! `example.com/keep` says nothing about the group `bars.example.com`, which may belong to
//! another team or vendor, so it is reported as of an unknown owner rather than guessed.

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
    if reserved_by_kubernetes(domain) {
        return Attribution {
            controller: format!("a Kubernetes component ({domain})"),
            builtin: true,
            hint: None,
        };
    }
    // Exact matches only: a group sharing a parent domain is no evidence of ownership.
    let groups = crd_groups(crds);
    let owner = std::iter::once(object_group)
        .chain(groups.iter().map(String::as_str))
        .find(|g| !g.is_empty() && *g == domain);
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
            controller: format!(
                "the controller behind {domain} (owner unknown: no API group in this cluster is {domain})"
            ),
            builtin: false,
            hint: None,
        },
    }
}

/// Whether `domain` is `kubernetes.io` or `k8s.io` or a subdomain of either: Kubernetes
/// reserves them for its own components. The match is on a label boundary, so `x-k8s.io`
/// (the domain of SIG projects such as hns itself or Cluster API) is not one of them.
fn reserved_by_kubernetes(domain: &str) -> bool {
    ["kubernetes.io", "k8s.io"].iter().any(|r| domain == *r || domain.ends_with(&format!(".{r}")))
}

fn unknown(finalizer: &str) -> Attribution {
    Attribution {
        controller: format!("an unknown controller (finalizer \"{finalizer}\" names no domain)"),
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
    fn leaves_sig_project_domains_to_their_projects() {
        assert!(!reserved_by_kubernetes("hnc.x-k8s.io"));
        assert!(!reserved_by_kubernetes("notk8s.io"));
        assert!(reserved_by_kubernetes("k8s.io") && reserved_by_kubernetes("csi.k8s.io"));
        assert!(!attribute("cluster.x-k8s.io/machine", "", &[]).builtin);
    }

    #[test]
    fn matches_a_finalizer_to_its_crd_group() {
        let a = attribute("stable.example.com/cleanup", "", &crds());
        assert!(!a.builtin);
        assert_eq!(
            a.controller,
            "the controller of stable.example.com (CRDs: widgets.stable.example.com, gadgets.stable.example.com)"
        );
    }

    #[test]
    fn matches_the_objects_own_group_exactly() {
        let a = attribute("other.example.org/x", "other.example.org", &crds());
        assert_eq!(a.controller, "the controller of other.example.org");
    }

    /// The case: `example.com/keep` is not `bars.example.com`'s, nor is a subdomain
    /// of a group, nor a look-alike group, its owner.
    #[test]
    fn names_no_owner_on_a_near_match() {
        let crds = vec!["gadgets.bars.example.com".to_string(), "apps.kappctrl.k14s.io".to_string()];
        for (finalizer, object_group) in [
            ("example.com/keep", ""),
            ("example.com/keep", "bars.example.com"),
            ("finalizers.bars.example.com/x", ""),
            ("finalizers.kapp-ctrl.k14s.io/delete", ""),
        ] {
            let a = attribute(finalizer, object_group, &crds);
            assert!(a.controller.contains("owner unknown"), "{finalizer}: {a:?}");
            assert!(!a.controller.contains("the controller of"), "{finalizer}: {a:?}");
        }
        assert_eq!(
            attribute("example.com/keep", "", &crds).controller,
            "the controller behind example.com (owner unknown: no API group in this cluster is example.com)"
        );
    }

    #[test]
    fn says_so_when_it_cannot_tell() {
        let a = attribute("acme.io/hold", "", &crds());
        assert!(a.controller.contains("owner unknown"));
        assert!(!a.builtin);
        assert!(attribute("hold", "", &[]).controller.contains("unknown"));
    }
}
