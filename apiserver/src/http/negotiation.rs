//! Content negotiation: which representation a client asked for in `Accept`.
//!
//! Kubernetes clients ask for variants of `application/json` told apart by parameters:
//! `as=Table;g=meta.k8s.io;v=v1` (kubectl get), `as=PartialObjectMetadataList;…` (the namespace
//! controller and garbage collector), `as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2`
//! (aggregated discovery). Protobuf is never offered alone by Kubernetes clients, so JSON is
//! enough; when nothing acceptable is asked for the answer is 406. hns adds one of its own,
//! `as=HierarchyTree;g=hnc.x-k8s.io;v=v1alpha2`: a list of hierarchy configurations as one small
//! entry per namespace (see `resources::tree`).

use crate::http::status::ApiError;

/// The representation of an object or list to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// The object (or list) itself.
    Object,
    /// A `meta.k8s.io` Table, for server-side printing.
    Table,
    /// `PartialObjectMetadata` or `PartialObjectMetadataList`: metadata only.
    Metadata,
}

/// What a client may be answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// One of Kubernetes' representations, which every object and list has.
    Render(Representation),
    /// hns's `HierarchyTree`, which only a list of hierarchy configurations has: each
    /// namespace's place in the hierarchy, and nothing else.
    HierarchyTree,
}

/// One entry of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange<'a> {
    essence: &'a str,
    params: Vec<(&'a str, &'a str)>,
    q: f32,
}

impl<'a> MediaRange<'a> {
    fn param(&self, name: &str) -> Option<&'a str> {
        self.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
    }

    fn is_json(&self) -> bool {
        matches!(self.essence, "application/json" | "application/*" | "*/*")
    }
}

fn parse_accept(accept: &str) -> Vec<MediaRange<'_>> {
    let mut ranges: Vec<MediaRange<'_>> = accept
        .split(',')
        .filter_map(|item| {
            let mut parts = item.split(';').map(str::trim);
            let essence = parts.next().filter(|e| !e.is_empty())?;
            let mut params = Vec::new();
            let mut q = 1.0;
            for p in parts {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                let v = v.trim_matches('"');
                if k.eq_ignore_ascii_case("q") {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(MediaRange { essence, params, q })
        })
        .filter(|r| r.q > 0.0)
        .collect();
    // Stable: equal weights keep the client's order, which is how Kubernetes clients rank.
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q));
    ranges
}

/// Chooses how to represent an object or list. `Accept` missing or empty means JSON. A
/// `HierarchyTree` is chosen only where `hierarchy_tree` says the request has one; elsewhere it
/// is passed over like any variant the server does not know.
pub fn negotiate(accept: Option<&str>, hierarchy_tree: bool) -> Result<Accepted, ApiError> {
    use Accepted::Render;
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Render(Representation::Object));
    };
    for r in parse_accept(accept) {
        if !r.is_json() {
            continue; // protobuf, yaml, …: the client always offers JSON too
        }
        let meta_v1 = r.param("g") == Some("meta.k8s.io") && matches!(r.param("v"), Some("v1" | "v1beta1"));
        let hns = r.param("g") == Some(hns_api::GROUP) && r.param("v") == Some(hns_api::VERSION);
        match r.param("as") {
            None => return Ok(Render(Representation::Object)),
            Some("Table") if meta_v1 => return Ok(Render(Representation::Table)),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if meta_v1 => {
                return Ok(Render(Representation::Metadata))
            }
            Some("HierarchyTree") if hns && hierarchy_tree => return Ok(Accepted::HierarchyTree),
            Some(_) => continue,
        }
    }
    Err(ApiError::not_acceptable(accept))
}

/// How to answer `GET /apis`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `APIGroupDiscoveryList` of `apidiscovery.k8s.io` at this version (`v2` or `v2beta1`).
    Aggregated(&'static str),
    /// A plain `APIGroupList`.
    Legacy,
}

/// Chooses between aggregated discovery and a plain `APIGroupList`; 406 when neither is
/// acceptable, which makes kube-aggregator fall back to the legacy per-version documents.
pub fn discovery_format(accept: Option<&str>) -> Result<DiscoveryFormat, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(DiscoveryFormat::Legacy);
    };
    for r in parse_accept(accept) {
        if !r.is_json() {
            continue;
        }
        match (r.param("as"), r.param("g"), r.param("v")) {
            (None, _, _) => return Ok(DiscoveryFormat::Legacy),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                return Ok(DiscoveryFormat::Aggregated("v2"))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                return Ok(DiscoveryFormat::Aggregated("v2beta1"))
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(accept))
}

/// The value of `includeObject` for Table output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// `PartialObjectMetadata` in each row (the default).
    Metadata,
    /// The full object in each row.
    Object,
}

impl IncludeObject {
    /// Parses the query parameter; absent means `Metadata`.
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: unsupported value \"{other}\": supported values are None, Metadata, Object"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_GET: &str =
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    const NAMESPACE_CONTROLLER: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    const AGGREGATOR: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

    fn rep(accept: Option<&str>) -> Representation {
        match negotiate(accept, false).unwrap() {
            Accepted::Render(r) => r,
            Accepted::HierarchyTree => panic!("a tree where none is served"),
        }
    }

    #[test]
    fn a_hierarchy_tree_only_where_one_is_served() {
        const TREE: &str = "application/json;as=HierarchyTree;g=hnc.x-k8s.io;v=v1alpha2";
        assert_eq!(negotiate(Some(TREE), true).unwrap(), Accepted::HierarchyTree);
        assert_eq!(negotiate(Some(TREE), false).unwrap_err().code, 406);
        assert_eq!(rep(Some(&format!("{TREE},application/json"))), Representation::Object);
        let other_version = "application/json;as=HierarchyTree;g=hnc.x-k8s.io;v=v1";
        assert_eq!(negotiate(Some(other_version), true).unwrap_err().code, 406);
    }

    #[test]
    fn what_real_clients_send() {
        assert_eq!(rep(Some(KUBECTL_GET)), Representation::Table);
        assert_eq!(rep(Some(NAMESPACE_CONTROLLER)), Representation::Metadata);
        assert_eq!(rep(None), Representation::Object);
        assert_eq!(rep(Some("*/*")), Representation::Object);
        assert_eq!(rep(Some("application/vnd.kubernetes.protobuf, */*")), Representation::Object);
    }

    #[test]
    fn unknown_variants_fall_through_to_plain_json() {
        assert_eq!(
            rep(Some("application/json;as=Table;g=meta.k8s.io;v=v9,application/json")),
            Representation::Object
        );
    }

    #[test]
    fn nothing_acceptable_is_406() {
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf"), false).unwrap_err().code, 406);
        assert_eq!(negotiate(Some("text/html"), false).unwrap_err().code, 406);
        assert_eq!(
            negotiate(Some("application/json;as=Table;g=meta.k8s.io;v=v9"), false).unwrap_err().code,
            406
        );
    }

    #[test]
    fn weights_are_honoured() {
        assert_eq!(
            rep(Some("application/json;q=0.5,application/json;as=Table;g=meta.k8s.io;v=v1")),
            Representation::Table
        );
    }

    #[test]
    fn discovery_formats() {
        use DiscoveryFormat::*;
        assert_eq!(discovery_format(Some(AGGREGATOR)).unwrap(), Aggregated("v2"));
        assert_eq!(discovery_format(Some(&format!("application/json,{AGGREGATOR}"))).unwrap(), Legacy);
        assert_eq!(discovery_format(None).unwrap(), Legacy);
        assert_eq!(
            discovery_format(Some(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
            ))
            .unwrap(),
            Aggregated("v2beta1")
        );
        assert_eq!(
            discovery_format(Some("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"))
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn include_object() {
        assert_eq!(IncludeObject::parse(None).unwrap(), IncludeObject::Metadata);
        assert_eq!(IncludeObject::parse(Some("None")).unwrap(), IncludeObject::None);
        assert_eq!(IncludeObject::parse(Some("bogus")).unwrap_err().code, 400);
    }
}
