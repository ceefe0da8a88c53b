//! The uids of the objects hns serves. Each is derived from a stored object (a Namespace, the
//! configuration's ConfigMap): a Subnamespace and its child's HierarchyConfiguration come from
//! the same Namespace, yet clients key caches, owner references and the garbage collector's
//! graph by uid, so no two served objects (nor a served object and the Namespace) may share one.
//!
//! A uid is a name-based UUID (version 5, RFC 9562) of the stored object's uid and the served
//! kind: the same on every replica and across restarts, with nothing stored, and new when the
//! stored object is deleted and made again, as a recreated object's uid is.

/// The UUID namespace of hns's derived uids (a random constant: it only has to differ from the
/// namespaces other software derives uids in).
const NAMESPACE: [u8; 16] =
    [0x6b, 0x1f, 0x3c, 0x52, 0x9e, 0x0d, 0x4a, 0x87, 0xb2, 0x5e, 0x11, 0xc4, 0x7a, 0x90, 0xd3, 0x2f];

/// The kinds of objects hns serves, all derived from what the cluster stores: the one name of
/// that concept wherever it is needed. Each kind is its own uid space ([`uid`]) and its own
/// family of watch events (`store::hub`); how one stands in the forest is
/// [`crate::hierarchy::objects::value`]. Both resources of a subnamespace (`subnamespaces`,
/// `subnamespaceanchors`) serve one object, so they share a kind here. The order is the order
/// of the events one namespace change publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Derived {
    /// A namespace's HierarchyConfiguration.
    HierarchyConfiguration,
    /// A subnamespace's Subnamespace (or SubnamespaceAnchor).
    Subnamespace,
    /// The HNCConfiguration, from its ConfigMap.
    HncConfiguration,
    /// A HierarchicalResourceQuota, from its namespace's annotation (its uid is stored with it,
    /// as a new object's is, rather than derived).
    HierarchicalResourceQuota,
}

/// A sequence of resourceVersions: objects of one sequence are ordered by theirs, and a watch
/// resumes only from a version of its own sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sequence {
    /// The namespaces' (the forest's): every object derived from namespaces.
    Namespaces,
    /// That of the ConfigMap holding the HNC configuration.
    ConfigMap,
}

impl Derived {
    /// The sequence its objects' resourceVersions belong to.
    pub fn sequence(self) -> Sequence {
        match self {
            Derived::HncConfiguration => Sequence::ConfigMap,
            Derived::HierarchyConfiguration | Derived::Subnamespace | Derived::HierarchicalResourceQuota => {
                Sequence::Namespaces
            }
        }
    }

    /// Its kind, which names its uid space: these words are hashed into every uid, so they
    /// never change.
    fn name(self) -> &'static str {
        match self {
            Derived::HierarchyConfiguration => "HierarchyConfiguration",
            Derived::Subnamespace => "Subnamespace",
            Derived::HncConfiguration => "HNCConfiguration",
            Derived::HierarchicalResourceQuota => "HierarchicalResourceQuota",
        }
    }
}

/// The uid of the `kind` object derived from the stored object of uid `stored`.
pub fn uid(stored: &str, kind: Derived) -> String {
    let mut sha1 = openssl::sha::Sha1::new();
    sha1.update(&NAMESPACE);
    sha1.update(kind.name().as_bytes());
    sha1.update(b"/");
    sha1.update(stored.as_bytes());
    let hash = sha1.finish();
    let mut b = [0u8; 16];
    b.copy_from_slice(&hash[..16]);
    b[6] = (b[6] & 0x0f) | 0x50; // version 5
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 9562 variant

    // Written a digit at a time: every object a list renders has one.
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, byte) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// [`uid`] of an optional stored uid (objects read from the cluster always have one).
pub fn uid_of(stored: Option<&str>, kind: Derived) -> Option<String> {
    stored.map(|s| uid(s, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = "0b6c9e43-6a3e-4b8f-9d6c-3f1e2a7b5c10";

    #[test]
    fn each_kind_gets_its_own_stable_uid() {
        let hc = uid(NS, Derived::HierarchyConfiguration);
        let sub = uid(NS, Derived::Subnamespace);
        assert_ne!(hc, sub);
        assert_ne!(hc, NS);
        assert_eq!(hc, uid(NS, Derived::HierarchyConfiguration), "the same on every call");
        assert_ne!(sub, uid("another", Derived::Subnamespace));
    }

    #[test]
    fn uids_are_version_5_uuids() {
        // Python: uuid.uuid5(uuid.UUID("6b1f3c52-9e0d-4a87-b25e-11c47a90d32f"), "Subnamespace/" + NS)
        assert_eq!(uid(NS, Derived::Subnamespace), "38cc98ef-e1a7-5f7e-a764-fe65bc91d200");
    }
}
