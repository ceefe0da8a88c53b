//! Why a pass of the controller over one namespace failed, and when to look at it again: the
//! requeue policy in one place.

use std::time::Duration;

use crate::http::status::ApiError;

/// Retry soon after a conflict: the namespace cache or a syncer held a stale copy, and the
/// watch is already bringing the new one.
const AFTER_CONFLICT: Duration = Duration::from_millis(100);
/// Retry later after anything else (a webhook, a quota, a missing permission, an outage).
const AFTER_FAILURE: Duration = Duration::from_secs(2);

/// A failed write of the controller's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Deleting a subnamespace below a terminating namespace that allows cascading deletion.
    #[error("deleting subnamespace {namespace} with its terminating ancestor: {source}")]
    Cascade {
        /// The subnamespace.
        namespace: String,
        /// kube-apiserver's answer.
        source: ApiError,
    },
    /// Bringing a namespace's labels, annotations and conditions to what the hierarchy wants.
    #[error("updating namespace {namespace}: {source}")]
    Namespace {
        /// The namespace.
        namespace: String,
        /// kube-apiserver's answer.
        source: ApiError,
    },
    /// Creating, updating or deleting hns's ResourceQuota in a namespace a quota covers.
    #[error("writing the ResourceQuota of namespace {namespace}: {source}")]
    ResourceQuota {
        /// The namespace.
        namespace: String,
        /// kube-apiserver's answer.
        source: ApiError,
    },
    /// Creating, updating or deleting a propagated copy.
    #[error("propagating {kind} {name} into {namespace}: {source}")]
    Propagation {
        /// The copy's kind.
        kind: String,
        /// The copy's name.
        name: String,
        /// Its namespace.
        namespace: String,
        /// kube-apiserver's answer, or why there was none.
        source: kube::Error,
    },
}

impl Error {
    /// Whether kube-apiserver refused the write as a conflict with a newer version.
    pub fn is_conflict(&self) -> bool {
        match self {
            Error::Cascade { source, .. }
            | Error::Namespace { source, .. }
            | Error::ResourceQuota { source, .. } => source.code == 409,
            Error::Propagation { source: kube::Error::Api(s), .. } => s.code == 409,
            Error::Propagation { .. } => false,
        }
    }

    /// How long to wait before the namespace is reconciled again.
    pub fn requeue_after(&self) -> Duration {
        if self.is_conflict() {
            AFTER_CONFLICT
        } else {
            AFTER_FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_come_back_sooner_than_failures() {
        let ns = |source| Error::Namespace { namespace: "a".into(), source };
        let gr = crate::http::status::GroupResource { group: "", resource: "namespaces" };
        assert_eq!(ns(ApiError::stale(gr, "a")).requeue_after(), AFTER_CONFLICT);
        assert_eq!(ns(ApiError::internal("etcd is down")).requeue_after(), AFTER_FAILURE);
        let unreachable = Error::Propagation {
            kind: "Role".into(),
            name: "r".into(),
            namespace: "a".into(),
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        };
        assert_eq!(unreachable.requeue_after(), AFTER_FAILURE);
    }
}
