//! Connecting to the cluster the way kubectl does: kubectl's configuration flags, with their
//! meaning (kubectl passes a plugin its arguments as given, so `kubectl hns tree X --as=dev`
//! must mean what it means to kubectl), and `-n/--namespace` defaulting to the context's
//! namespace, then `default`. Which kubeconfig and which of its entries: [`crate::kubeconfig`].

use kube::Client;

pub use crate::kube_flags::KubeFlags;
use crate::kubeconfig;

/// A client and the namespace commands work in.
pub struct Connection {
    /// The client.
    pub client: Client,
    /// `-n`, or the context's namespace, or `default`.
    pub namespace: String,
}

/// A namespace given twice, or not at all.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceArgError {
    /// Neither NS nor -n.
    #[error("Must specify the namespace: {command} NS (or -n NS)")]
    Missing {
        /// How the command is run, e.g. `kubectl hns describe`.
        command: &'static str,
    },
    /// A command that works in a parent namespace, without -n.
    #[error("parent must be set via --namespace or -n: {command} CHILD -n PARENT")]
    MissingParent {
        /// How the command is run, e.g. `kubectl hns create`.
        command: &'static str,
    },
    /// NS and -n name different namespaces.
    #[error("NS ({given}) and -n ({flag}) name different namespaces: give one")]
    Different {
        /// The argument.
        given: String,
        /// The flag.
        flag: String,
    },
}

impl KubeFlags {
    /// A client for the chosen cluster and context.
    ///
    /// It does not retry 503s, as kubectl does not: an unavailable APIService (hns's own, or the
    /// one a stuck namespace waits on) answers every request with 503, and kube's default retry
    /// (15 attempts, backing off up to 1000 s) would stall a command for minutes instead of
    /// saying what is wrong.
    pub async fn client(&self) -> anyhow::Result<Client> {
        Ok(self.connect().await?.client)
    }

    /// A client, and the namespace to work in.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let (mut config, origin) = kubeconfig::config(self).await?;
        config.default_retry = false;
        if let Some(timeout) = self.request_timeout.filter(|t| !t.is_zero()) {
            config.connect_timeout = Some(timeout);
            config.read_timeout = Some(timeout);
            config.write_timeout = Some(timeout);
            // Count from the request, not from when its pooled connection went idle.
            config.reset_reader_on_write = true;
        }
        let namespace = config.default_namespace.clone();
        Ok(Connection { client: kubeconfig::client(config, &origin)?, namespace })
    }

    /// The parent a command works in (`create`, `delete`), given with -n. As with HNC's plugin,
    /// the context's namespace does not count: a subnamespace made or deleted in `default` by
    /// mistake is worse than a refusal.
    pub fn parent_arg(&self, command: &'static str) -> Result<String, NamespaceArgError> {
        self.namespace.clone().ok_or(NamespaceArgError::MissingParent { command })
    }

    /// The namespace a command is about, given as its argument or, as kubectl users write it,
    /// with -n.
    pub fn namespace_arg(
        &self,
        given: Option<&str>,
        command: &'static str,
    ) -> Result<String, NamespaceArgError> {
        match (given, self.namespace.as_deref()) {
            (Some(given), Some(flag)) if given != flag => {
                Err(NamespaceArgError::Different { given: given.into(), flag: flag.into() })
            }
            (Some(ns), _) | (None, Some(ns)) => Ok(ns.to_string()),
            (None, None) => Err(NamespaceArgError::Missing { command }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_flags::parse_request_timeout;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        kube: KubeFlags,
    }

    fn parse(args: &[&str]) -> Result<KubeFlags, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|w| w.kube)
    }

    #[test]
    fn kubectl_spellings_parse() {
        let f = parse(&[
            "--as=dev",
            "--as-group=a",
            "--as-group",
            "b",
            "--as-uid=7",
            "--token=t",
            "-s",
            "https://x",
            "--insecure-skip-tls-verify",
            "--tls-server-name=k",
            "--request-timeout=1m30s",
            "-v=6",
            "--user",
            "u",
            "--cluster=c",
        ])
        .unwrap();
        assert_eq!(
            (f.as_user.as_deref(), f.as_group.clone()),
            (Some("dev"), vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!((f.as_uid.as_deref(), f.token.as_deref()), (Some("7"), Some("t")));
        assert_eq!((f.server.as_deref(), f.insecure_skip_tls_verify), (Some("https://x"), Some(true)));
        assert_eq!(f.request_timeout, Some(Duration::from_secs(90)));
        assert_eq!((f.verbosity, f.user.as_deref(), f.cluster.as_deref()), (Some(6), Some("u"), Some("c")));
        assert_eq!(
            parse(&["--insecure-skip-tls-verify=false"]).unwrap().insecure_skip_tls_verify,
            Some(false)
        );
        assert_eq!(parse(&["--v", "2"]).unwrap().verbosity, Some(2));
        assert!(parse(&["--request-timeout=soon"]).is_err());
    }

    #[test]
    fn request_timeouts_as_kubectl_writes_them() {
        assert_eq!(parse_request_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(parse_request_timeout("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_request_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_request_timeout("1h2m3s"), Ok(Duration::from_secs(3723)));
        for bad in ["", "m", "5x", "1.5s", "s5"] {
            assert!(parse_request_timeout(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_namespace_as_argument_or_with_dash_n() {
        let with = |n: Option<&str>| KubeFlags { namespace: n.map(str::to_string), ..Default::default() };
        assert_eq!(with(None).namespace_arg(Some("a"), "c").unwrap(), "a");
        assert_eq!(with(Some("a")).namespace_arg(None, "c").unwrap(), "a");
        assert_eq!(with(Some("a")).namespace_arg(Some("a"), "c").unwrap(), "a");
        assert_eq!(
            with(Some("b")).namespace_arg(Some("a"), "c").unwrap_err().to_string(),
            "NS (a) and -n (b) name different namespaces: give one"
        );
        assert_eq!(
            with(None).namespace_arg(None, "kubectl hns describe").unwrap_err().to_string(),
            "Must specify the namespace: kubectl hns describe NS (or -n NS)"
        );
    }
}
