//! `kubectl hns export [--for hnc|hns]`: the hierarchy as manifests, for moving a cluster
//! between HNC and hns (docs/migration.md) and as a backup.
//!
//! It reads what both serve under `hnc.x-k8s.io/v1alpha2` (hierarchy configurations,
//! subnamespace anchors, the HNCConfiguration), so it works against HNC's CRDs and against hns.
//! Only `spec`s are read: HNC's and hns's statuses differ, and neither is needed.
//!
//! - `--for hnc` (the default) prints HNC's objects: a HierarchyConfiguration for every
//!   namespace with something to say (a full namespace's parent, `allowCascadingDeletion`,
//!   managed labels or annotations), a SubnamespaceAnchor per subnamespace, and the
//!   HNCConfiguration. `kubectl apply -f` puts them into HNC's CRDs (before HNC's manager runs),
//!   or back into hns.
//! - `--for hns` prints Namespace objects carrying only the annotations hns keeps a full
//!   namespace's parent, `allowCascadingDeletion` and managed labels and annotations in
//!   (HNC keeps them in HierarchyConfigurations, which go when HNC's CRDs are deleted).
//!   `kubectl apply --server-side` writes them before hns is installed; hns adopts them when it
//!   first starts. Subnamespaces need nothing: HNC's `hnc.x-k8s.io/subnamespace-of` is hns's too.

use std::collections::BTreeSet;
use std::process::ExitCode;

use hns_api::config::{HNCConfigurationSpec, ResourceSpec, CONFIG_SINGLETON};
use hns_api::hierarchy::{HierarchyConfigurationSpec, MetaKvp, HIERARCHY_SINGLETON};
use hns_api::{keys, HNCConfiguration, HierarchyConfiguration, SubnamespaceAnchor, API_VERSION};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::{json, Map, Value};

use crate::client::KubeFlags;
use crate::hns::{classify, Error};
use crate::out;

/// Print the hierarchy as manifests: HNC's objects, or the Namespace annotations hns reads.
///
/// Works against HNC and hns alike. Used to move a cluster between them (see the user guide's
/// migration page) and as a backup. Prints YAML to stdout.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Whose form to print.
    #[arg(long = "for", value_enum, default_value_t = Target::Hnc)]
    target: Target,
}

/// The form of the manifests.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// HierarchyConfigurations, SubnamespaceAnchors and the HNCConfiguration.
    Hnc,
    /// Namespaces with the annotations hns reads (for `kubectl apply --server-side`).
    Hns,
}

/// The hierarchy as read from the cluster: only what either side needs to rebuild it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Hierarchy {
    /// Every namespace's hierarchy configuration spec.
    pub namespaces: Vec<(String, HierarchyConfigurationSpec)>,
    /// Subnamespaces as (parent, name).
    pub subnamespaces: Vec<(String, String)>,
    /// The HNCConfiguration's kinds, when there is one.
    pub resources: Option<Vec<ResourceSpec>>,
}

/// Runs `export`.
pub async fn run(kube: &KubeFlags, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let hierarchy = read(kube.client().await?).await?;
    let objects = match args.target {
        Target::Hnc => for_hnc(&hierarchy),
        Target::Hns => for_hns(&hierarchy),
    };
    out!("{}", yaml_stream(&objects)?)?;
    Ok(ExitCode::SUCCESS)
}

async fn read(client: Client) -> Result<Hierarchy, Error> {
    let hierarchies = specs::<HierarchyConfiguration, HierarchyConfigurationSpec>(&client).await?;
    let anchors = specs::<SubnamespaceAnchor, Value>(&client).await?;
    let config: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<HNCConfiguration>(&()));
    let resources = match config.get_opt(CONFIG_SINGLETON).await.map_err(classify)? {
        Some(obj) => Some(spec_of::<HNCConfigurationSpec>(&obj)?.resources),
        None => None,
    };
    Ok(Hierarchy {
        namespaces: hierarchies.into_iter().map(|(ns, _, spec)| (ns, spec)).collect(),
        subnamespaces: anchors.into_iter().map(|(parent, name, _)| (parent, name)).collect(),
        resources,
    })
}

/// (namespace, name, spec) of every object of kind `K`, reading only the spec as `S`.
async fn specs<K, S>(client: &Client) -> Result<Vec<(String, String, S)>, Error>
where
    K: kube::Resource<DynamicType = ()>,
    S: serde::de::DeserializeOwned + Default,
{
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<K>(&()));
    let list = api.list(&ListParams::default()).await.map_err(classify)?;
    list.items
        .iter()
        .map(|o| {
            let ns = o.metadata.namespace.clone().unwrap_or_default();
            let name = o.metadata.name.clone().unwrap_or_default();
            Ok((ns, name, spec_of::<S>(o)?))
        })
        .collect()
}

fn spec_of<S: serde::de::DeserializeOwned + Default>(obj: &DynamicObject) -> Result<S, Error> {
    match obj.data.get("spec") {
        None | Some(Value::Null) => Ok(S::default()),
        Some(spec) => serde_json::from_value(spec.clone()).map_err(|e| Error::Unreadable {
            what: format!("{} {}", obj.types.as_ref().map_or("object", |t| t.kind.as_str()), name_of(obj)),
            detail: e.to_string(),
        }),
    }
}

fn name_of(obj: &DynamicObject) -> String {
    match &obj.metadata.namespace {
        Some(ns) => format!("{ns}/{}", obj.metadata.name.as_deref().unwrap_or_default()),
        None => obj.metadata.name.clone().unwrap_or_default(),
    }
}

/// The names of subnamespaces: their parent comes from `hnc.x-k8s.io/subnamespace-of` on both
/// sides, never from a hierarchy configuration.
fn subnamespace_names(h: &Hierarchy) -> BTreeSet<&str> {
    h.subnamespaces.iter().map(|(_, name)| name.as_str()).collect()
}

/// HNC's objects for `h`.
pub fn for_hnc(h: &Hierarchy) -> Vec<Value> {
    let subs = subnamespace_names(h);
    let mut out = Vec::new();
    for (ns, spec) in &h.namespaces {
        let mut spec = spec.clone();
        if subs.contains(ns.as_str()) {
            spec.parent = None;
        }
        if spec == HierarchyConfigurationSpec::default() {
            continue;
        }
        out.push(json!({
            "apiVersion": API_VERSION,
            "kind": "HierarchyConfiguration",
            "metadata": {"name": HIERARCHY_SINGLETON, "namespace": ns},
            "spec": spec,
        }));
    }
    for (parent, name) in &h.subnamespaces {
        out.push(json!({
            "apiVersion": API_VERSION,
            "kind": "SubnamespaceAnchor",
            "metadata": {"name": name, "namespace": parent},
        }));
    }
    if let Some(resources) = &h.resources {
        out.push(json!({
            "apiVersion": API_VERSION,
            "kind": "HNCConfiguration",
            "metadata": {"name": CONFIG_SINGLETON},
            "spec": {"resources": resources},
        }));
    }
    out
}

/// Namespaces with the annotations hns keeps `h` in (for full namespaces' parents and every
/// namespace's settings).
pub fn for_hns(h: &Hierarchy) -> Vec<Value> {
    let subs = subnamespace_names(h);
    let kvps = |v: &[MetaKvp]| (!v.is_empty()).then(|| serde_json::to_string(v).unwrap_or_default());
    let mut out = Vec::new();
    for (ns, spec) in &h.namespaces {
        let parent = spec.parent.clone().filter(|_| !subs.contains(ns.as_str()));
        let annotations: Map<String, Value> = [
            (keys::PARENT, parent),
            (keys::ALLOW_CASCADING_DELETION, spec.allow_cascading_deletion.then(|| "true".to_string())),
            (keys::MANAGED_LABELS, kvps(&spec.labels)),
            (keys::MANAGED_ANNOTATIONS, kvps(&spec.annotations)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), Value::String(v))))
        .collect();
        if annotations.is_empty() {
            continue;
        }
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "annotations": annotations},
        }));
    }
    out
}

/// `objects` as a YAML stream, one document each.
fn yaml_stream(objects: &[Value]) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&crate::output::yaml(o)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(parent: Option<&str>, cascading: bool, labels: &[(&str, &str)]) -> HierarchyConfigurationSpec {
        HierarchyConfigurationSpec {
            parent: parent.map(str::to_string),
            allow_cascading_deletion: cascading,
            labels: labels
                .iter()
                .map(|(k, v)| MetaKvp { key: k.to_string(), value: v.to_string() })
                .collect(),
            annotations: Vec::new(),
        }
    }

    /// org (root, label env=prod) ─ team (full, cascading) ─ dev (subnamespace); kube-system.
    fn sample() -> Hierarchy {
        Hierarchy {
            namespaces: vec![
                ("org".into(), spec(None, false, &[("env", "prod")])),
                ("team".into(), spec(Some("org"), true, &[])),
                ("dev".into(), spec(Some("team"), false, &[])),
                ("kube-system".into(), spec(None, false, &[])),
            ],
            subnamespaces: vec![("team".into(), "dev".into())],
            resources: Some(vec![ResourceSpec {
                group: String::new(),
                resource: "secrets".into(),
                mode: Some("Propagate".into()),
            }]),
        }
    }

    #[test]
    fn hnc_gets_full_namespaces_settings_anchors_and_the_configuration() {
        let out = for_hnc(&sample());
        let kinds: Vec<(&str, &str)> = out
            .iter()
            .map(|o| (o["kind"].as_str().unwrap(), o["metadata"]["namespace"].as_str().unwrap_or("-")))
            .collect();
        assert_eq!(
            kinds,
            [
                ("HierarchyConfiguration", "org"),
                ("HierarchyConfiguration", "team"),
                ("SubnamespaceAnchor", "team"),
                ("HNCConfiguration", "-")
            ],
            "dev's parent comes from its anchor, kube-system has nothing to say"
        );
        assert_eq!(out[0]["spec"], json!({"labels": [{"key": "env", "value": "prod"}]}));
        assert_eq!(out[1]["spec"], json!({"parent": "org", "allowCascadingDeletion": true}));
        assert_eq!(out[2]["metadata"]["name"], "dev");
        assert_eq!(out[3]["spec"], json!({"resources": [{"resource": "secrets", "mode": "Propagate"}]}));
    }

    #[test]
    fn hns_gets_the_annotations_it_reads_and_nothing_for_subnamespaces() {
        let out = for_hns(&sample());
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(
            out[0]["metadata"],
            json!({"name": "org", "annotations": {keys::MANAGED_LABELS: r#"[{"key":"env","value":"prod"}]"#}})
        );
        assert_eq!(
            out[1]["metadata"]["annotations"],
            json!({keys::PARENT: "org", keys::ALLOW_CASCADING_DELETION: "true"})
        );
    }

    #[test]
    fn a_subnamespace_keeps_its_own_settings() {
        let mut h = sample();
        h.namespaces[2].1.allow_cascading_deletion = true;
        let hnc = for_hnc(&h);
        let dev = hnc.iter().find(|o| o["metadata"]["namespace"] == "dev").expect("dev's configuration");
        assert_eq!(dev["spec"], json!({"allowCascadingDeletion": true}));
        let hns = for_hns(&h);
        let dev = hns.iter().find(|o| o["metadata"]["name"] == "dev").expect("dev's annotations");
        assert_eq!(dev["metadata"]["annotations"], json!({keys::ALLOW_CASCADING_DELETION: "true"}));
    }

    #[test]
    fn no_configuration_means_none_exported() {
        let h = Hierarchy { resources: None, ..sample() };
        assert!(for_hnc(&h).iter().all(|o| o["kind"] != "HNCConfiguration"));
    }

    #[test]
    fn the_stream_reads_back_as_the_same_objects() {
        let objects = for_hnc(&sample());
        let text = yaml_stream(&objects).unwrap();
        let back: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        assert_eq!(back, objects);
    }
}
