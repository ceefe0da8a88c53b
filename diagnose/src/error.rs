//! What can go wrong while diagnosing or fixing, and how kube-apiserver's answers are read.

use kube::core::Status;

/// What can go wrong while diagnosing or fixing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A read the diagnosis cannot do without (listing namespaces, for one) failed.
    #[error("{what}: {}", message(.source))]
    Read {
        /// What was being read.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A write of a remedy was rejected or could not be sent.
    #[error("{action}: {}", message(.source))]
    Write {
        /// The API call, as the report prints it.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The object changed since it was diagnosed, so the remedy was not applied.
    #[error("{action}: the object changed since it was diagnosed")]
    Changed {
        /// The API call, as the report prints it.
        action: String,
    },
    /// An object could not be encoded for a write.
    #[error("encoding {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// The serialization error.
        #[source]
        source: serde_json::Error,
    },
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A kube error in a few words: the API server's message and code rather than the debug form.
pub(crate) fn error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => format!("{} ({})", s.message, s.code),
        e => message(e),
    }
}

/// Whether a kube error is the API server's 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a kube error is a conflicting write or a failed precondition (409).
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether a kube error is a 422. For the remedies' JSON patches, which are well-formed by
/// construction, that is a `test` operation that no longer holds: kube-apiserver 1.20 words it
/// only "the server rejected our request due to an error in our request".
pub(crate) fn is_unprocessable(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 422)
}

/// A kube error as users should read it (the plugin words all of its errors so): an API
/// server's answer by its `Status` message (kube's own Display of it appends the `Status`'s
/// debug form), anything else as kube words it, with the causes kube leaves out (`client error
/// (Connect)` says nothing of a refused connection, an untrusted certificate or a timeout).
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => server_message(s),
        e => with_causes(e),
    }
}

fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let words = c.to_string();
        // Many layers repeat their cause's words in their own.
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        cause = c.source();
    }
    text
}

/// An API server's answer by its message, or by its code when it gave none.
pub fn server_message(s: &Status) -> String {
    if s.message.is_empty() {
        format!("the server answered {} {}", s.code, s.reason)
    } else {
        s.message.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_reads_and_writes_say_the_servers_message() {
        let forbidden = || {
            kube::Error::Api(Status::failure("namespaces is forbidden", "Forbidden").with_code(403).boxed())
        };
        let read = Error::Read { what: "namespaces".into(), source: forbidden() };
        assert_eq!(read.to_string(), "namespaces: namespaces is forbidden");
        let write = Error::Write { action: "patch namespace a".into(), source: forbidden() };
        assert_eq!(write.to_string(), "patch namespace a: namespaces is forbidden");
    }

    #[test]
    fn other_errors_say_their_causes_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("client error (Connect)")]
        struct Connect(#[source] std::io::Error);
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = kube::Error::Service(Box::new(Connect(refused)));
        assert_eq!(message(&e), "ServiceError: client error (Connect): Connection refused");
    }
}
