//! resourceVersions as numbers. To clients they are opaque strings; kube-apiserver's are etcd
//! revisions, and hns's caches order the objects they hold by them, as kube-apiserver's own watch
//! cache does, so an older event never overwrites a newer one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The object's resourceVersion as a number; 0 when it has none (or a foreign one).
pub fn number(meta: &ObjectMeta) -> u64 {
    meta.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_foreign_versions_are_zero() {
        let meta =
            |rv: Option<&str>| ObjectMeta { resource_version: rv.map(str::to_string), ..Default::default() };
        assert_eq!(number(&meta(Some("42"))), 42);
        assert_eq!(number(&meta(None)), 0);
        assert_eq!(number(&meta(Some("abc"))), 0);
    }
}
