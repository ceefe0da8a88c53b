//! resourceVersions as numbers. To clients they are opaque strings; kube-apiserver's are etcd
//! revisions, and hns's caches order the objects they hold by them, as kube-apiserver's own watch
//! cache does, so an older event never overwrites a newer one.
//!
//! A list or watch bookmark answered with a user's view ([`crate::auth::view`]) hands out the
//! number and the view's fingerprint, `<number>.<fingerprint>`: a watch resumed from it, on any
//! replica, knows what its client was shown.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The object's resourceVersion as a number; 0 when it has none (or a foreign one).
pub fn number(meta: &ObjectMeta) -> u64 {
    meta.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

/// Between a resourceVersion's number and a view's fingerprint.
const VIEW_SEPARATOR: char = '.';

/// The resourceVersion of a list or bookmark at `number` answered with the view `fingerprint`
/// names.
pub fn with_view(number: impl std::fmt::Display, fingerprint: &str) -> String {
    format!("{number}{VIEW_SEPARATOR}{fingerprint}")
}

/// A resourceVersion a client sent: its number, and the fingerprint of the view it was handed out
/// with, if any. `None` when hns never hands out anything like it.
pub fn parse(rv: &str) -> Option<(u64, Option<&str>)> {
    let (number, fingerprint) = match rv.split_once(VIEW_SEPARATOR) {
        Some((number, f)) if f.len() == 16 && f.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            (number, Some(f))
        }
        Some(_) => return None,
        None => (rv, None),
    };
    let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
    Some((digits.then(|| number.parse().ok()).flatten()?, fingerprint))
}

/// Why `rv`, which [`parse`] refused, is refused.
pub fn not_handed_out(rv: &str) -> String {
    format!(
        "resourceVersion: invalid value \"{rv}\": not a resourceVersion hns-apiserver handed out; \
         use one from a list, object or watch event, or none"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_handed_out_with_a_view_reads_back_as_its_number_and_fingerprint() {
        let rv = with_view(42, "0123456789abcdef");
        assert_eq!(parse(&rv), Some((42, Some("0123456789abcdef"))));
        assert_eq!(parse("42"), Some((42, None)));
        for never_handed_out in [
            "",
            "abc",
            "42.",
            "42.xyz",
            "42.0123456789abcdef0",
            ".0123456789abcdef",
            "-1",
            "+42",
            "42.0123456789ABCDEF",
        ] {
            assert_eq!(parse(never_handed_out), None, "{never_handed_out}");
        }
    }

    #[test]
    fn missing_or_foreign_versions_are_zero() {
        let meta =
            |rv: Option<&str>| ObjectMeta { resource_version: rv.map(str::to_string), ..Default::default() };
        assert_eq!(number(&meta(Some("42"))), 42);
        assert_eq!(number(&meta(None)), 0);
        assert_eq!(number(&meta(Some("abc"))), 0);
    }
}
