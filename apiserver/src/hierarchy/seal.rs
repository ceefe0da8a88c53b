//! Seals: hierarchy state that only hns can have written.
//!
//! hns keeps the hierarchy in annotations on Namespace objects. Its webhook refuses anyone
//! else's edits of them, but the webhook for namespaces outside hierarchies fails open (an hns
//! outage must not block namespaces that have nothing to do with hns), and anyone may skip a
//! webhook that times out. Without more, whoever may patch a Namespace could, during such a gap,
//! name a victim namespace as its parent and have hns copy the victim's Roles and Secrets in.
//!
//! So every write of the hierarchy annotations ([`SEALED`]) by hns also writes a seal: an
//! HMAC-SHA256, under a key only hns can read (a Secret in its own namespace, see
//! [`crate::store::seal_key`]), of the namespace's name and the values of those annotations. The forest
//! honours hierarchy state only under a valid seal; anything else is a forgery, which the forest
//! ignores (keeping the last sealed state it saw, or none) and the controller reports and reverts.
//!
//! ```text
//!   hns write ──► annotations + seal = HMAC(key, name ‖ values)
//!   forest    ──► seal verifies? honour : ignore, report, revert
//! ```
//!
//! What a seal cannot tell apart: two states of the same namespace that hns sealed at different
//! times (a seal binds values to a name, not to a moment). Replaying an older sealed state needs
//! the webhook to be skipped *and* the older seal, which only someone who could read the
//! namespace back then has; a changed key (a new Secret) invalidates every old seal.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use hmac::{Hmac, Mac};
use hns_api::keys;
use sha2::Sha256;

/// The annotations a seal covers: every fact hns acts on. Conditions are not among them: they
/// are hns's report, not an input, and the controller rewrites them whenever they drift.
pub const SEALED: &[&str] = &[
    keys::SUBNAMESPACE_OF,
    keys::PARENT,
    keys::ALLOW_CASCADING_DELETION,
    keys::MANAGED_LABELS,
    keys::MANAGED_ANNOTATIONS,
    keys::HIERARCHY_OBJECT_META,
    keys::SUBNAMESPACE_OBJECT_META,
    keys::RESOURCE_QUOTAS,
];

/// The version prefix of a seal, so the format can change without ambiguity.
const VERSION: &str = "v1";

/// Bytes of key material hns generates.
pub const KEY_BYTES: usize = 32;

/// Seals and checks hierarchy annotations with one key.
///
/// The forest checks the seal of every namespace event it applies, so the key is absorbed once,
/// here, and each seal starts from a copy of that state: setting up a keyed MAC afresh (as
/// OpenSSL's `Signer` does on every use) cost more than the MAC itself.
#[derive(Clone)]
pub struct Sealer {
    keyed: Arc<Hmac<Sha256>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer { key: <redacted> }")
    }
}

/// What a namespace's annotations say about their own origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Written by hns: either sealed, or carrying no hierarchy state at all.
    Sealed,
    /// Hierarchy annotations (or a seal) that hns did not write as they are: the keys found.
    Forged(Vec<String>),
}

impl Sealer {
    /// A sealer with `key` (at least 16 bytes).
    pub fn new(key: &[u8]) -> Result<Self, hmac::digest::InvalidLength> {
        Ok(Sealer { keyed: Arc::new(Hmac::new_from_slice(key)?) })
    }

    /// The seal of namespace `name` with these annotations, or `None` when they hold no
    /// hierarchy state (a namespace outside hierarchies carries no seal).
    pub fn seal(&self, name: &str, annotations: &BTreeMap<String, String>) -> Option<String> {
        let present: Vec<(&str, &String)> =
            SEALED.iter().filter_map(|k| annotations.get(*k).map(|v| (*k, v))).collect();
        if present.is_empty() {
            return None;
        }
        // Length-prefixed fields: no two different inputs share an encoding.
        let mut input = Vec::new();
        let mut field = |bytes: &[u8]| {
            input.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            input.extend_from_slice(bytes);
        };
        field(VERSION.as_bytes());
        field(name.as_bytes());
        for (k, v) in present {
            field(k.as_bytes());
            field(v.as_bytes());
        }
        let mut mac = (*self.keyed).clone();
        mac.update(&input);
        let mac = mac.finalize().into_bytes();
        Some(format!("{VERSION}.{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac)))
    }

    /// Whether namespace `name`'s annotations are as hns wrote them.
    pub fn verify(&self, name: &str, annotations: &BTreeMap<String, String>) -> Verdict {
        let expected = self.seal(name, annotations);
        let found = annotations.get(keys::SEAL);
        let genuine = match (&expected, found) {
            (None, None) => true,
            (Some(e), Some(f)) => e.len() == f.len() && openssl::memcmp::eq(e.as_bytes(), f.as_bytes()),
            _ => false,
        };
        if genuine {
            return Verdict::Sealed;
        }
        let keys = SEALED.iter().chain([&keys::SEAL]).filter(|k| annotations.contains_key(**k));
        Verdict::Forged(keys.map(|k| k.to_string()).collect())
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A fixed key for unit tests.
    use super::Sealer;

    /// The sealer unit tests share.
    pub fn sealer() -> Sealer {
        Sealer::new(b"unit-test-key-unit-test-key-0000").expect("valid key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::string_map as annotations;

    #[test]
    fn sealed_state_verifies_and_any_change_does_not() {
        let s = testing::sealer();
        let mut a = annotations(&[(keys::PARENT, "team-a"), ("unrelated", "x")]);
        a.insert(keys::SEAL.into(), s.seal("dev", &a).unwrap());
        assert_eq!(s.verify("dev", &a), Verdict::Sealed);
        // Unrelated annotations may change freely.
        a.insert("unrelated".into(), "y".into());
        assert_eq!(s.verify("dev", &a), Verdict::Sealed);
        // The same seal on another namespace, another parent, or an added fact is a forgery.
        assert!(matches!(s.verify("prod", &a), Verdict::Forged(_)));
        let mut moved = a.clone();
        moved.insert(keys::PARENT.into(), "victim".into());
        assert_eq!(
            s.verify("dev", &moved),
            Verdict::Forged(vec![keys::PARENT.to_string(), keys::SEAL.to_string()])
        );
        let mut added = a.clone();
        added.insert(keys::ALLOW_CASCADING_DELETION.into(), "true".into());
        assert!(matches!(s.verify("dev", &added), Verdict::Forged(_)));
    }

    /// Seals already on namespaces must keep verifying across versions of hns: the format is
    /// HMAC-SHA256 (RFC 2104) of length-prefixed fields, pinned here by a value computed apart
    /// (Python's `hmac` module).
    #[test]
    fn a_seal_is_hmac_sha256_of_its_length_prefixed_fields() {
        let a = annotations(&[(keys::SUBNAMESPACE_OF, "acme"), ("unrelated", "x")]);
        assert_eq!(
            testing::sealer().seal("team-a", &a).as_deref(),
            Some("v1.ubkHhcJBLUtRuaZ4m0jU9RArHagKVFZwiP88PSJa19Q")
        );
    }

    #[test]
    fn another_key_does_not_verify() {
        let a = annotations(&[(keys::SUBNAMESPACE_OF, "team-a")]);
        let mut sealed = a.clone();
        sealed.insert(keys::SEAL.into(), testing::sealer().seal("dev", &a).unwrap());
        let other = Sealer::new(b"another-key-another-key-another!").unwrap();
        assert!(matches!(other.verify("dev", &sealed), Verdict::Forged(_)));
    }

    #[test]
    fn no_hierarchy_state_needs_no_seal_and_a_lone_seal_is_reported() {
        let s = testing::sealer();
        assert_eq!(s.seal("dev", &annotations(&[("x", "y")])), None);
        assert_eq!(s.verify("dev", &annotations(&[("x", "y")])), Verdict::Sealed);
        assert_eq!(
            s.verify("dev", &annotations(&[(keys::SEAL, "v1.AAAA")])),
            Verdict::Forged(vec![keys::SEAL.to_string()])
        );
        assert_eq!(
            s.verify("dev", &annotations(&[(keys::PARENT, "victim")])),
            Verdict::Forged(vec![keys::PARENT.to_string()])
        );
    }

    #[test]
    fn fields_cannot_be_shifted_between_keys() {
        let s = testing::sealer();
        let a = annotations(&[(keys::PARENT, "ab")]);
        let b = annotations(&[(keys::PARENT, "a"), (keys::ALLOW_CASCADING_DELETION, "b")]);
        assert_ne!(s.seal("n", &a), s.seal("n", &b));
    }
}
