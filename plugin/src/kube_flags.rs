//! kubectl's configuration flags, as clap parses them: the plain data that
//! [`crate::kubeconfig`] reads to choose a cluster and user, and [`crate::client`] connects with.

use std::path::PathBuf;
use std::time::Duration;

/// kubectl's configuration flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeFlags {
    /// Path to the kubeconfig file to use.
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The name of the kubeconfig cluster to use.
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use.
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// The namespace to work in (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Username to impersonate for the operation (a user or a service account).
    #[arg(long = "as", global = true, value_name = "USER")]
    pub as_user: Option<String>,
    /// Group to impersonate for the operation; repeat it for several groups.
    #[arg(long, global = true, value_name = "GROUP")]
    pub as_group: Vec<String>,
    /// UID to impersonate for the operation.
    #[arg(long, global = true, value_name = "UID")]
    pub as_uid: Option<String>,
    /// Bearer token for authentication to the API server (replaces the kubeconfig's
    /// credentials).
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// The address and port of the Kubernetes API server.
    #[arg(short = 's', long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Path to a certificate file for the certificate authority.
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub certificate_authority: Option<String>,
    /// Path to a client certificate file for TLS.
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub client_certificate: Option<String>,
    /// Path to a client key file for TLS.
    #[arg(long, global = true, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub client_key: Option<String>,
    /// Do not check the server's certificate: your connection is insecure.
    #[arg(long, global = true, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub insecure_skip_tls_verify: Option<bool>,
    /// Server name to use for server certificate validation (default: the server's host name).
    #[arg(long, global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// How long to wait for a single server request before giving up, e.g. 1s, 2m, 3h; 0 waits
    /// as long as it takes.
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_request_timeout)]
    pub request_timeout: Option<Duration>,
    /// Log level, as kubectl's: accepted so that kubectl command lines work; the plugin writes
    /// no logs (errors are always printed).
    #[arg(short = 'v', long = "v", global = true, value_name = "LEVEL")]
    pub verbosity: Option<u8>,
}

impl KubeFlags {
    /// The flags that chose the cluster, the identity and the connection, as they would be
    /// typed again in a command the plugin suggests, so that it runs where the user's did. A
    /// token is left out (it would print a secret), and so is `-n`: the suggestion names its
    /// namespaces.
    pub fn repeated(&self) -> Vec<String> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let words = [
            ("--kubeconfig", path(&self.kubeconfig)),
            ("--context", self.context.clone()),
            ("--cluster", self.cluster.clone()),
            ("--user", self.user.clone()),
            ("--server", self.server.clone()),
            ("--as", self.as_user.clone()),
            ("--as-uid", self.as_uid.clone()),
            ("--certificate-authority", self.certificate_authority.clone()),
            ("--client-certificate", self.client_certificate.clone()),
            ("--client-key", self.client_key.clone()),
            ("--tls-server-name", self.tls_server_name.clone()),
            ("--insecure-skip-tls-verify", self.insecure_skip_tls_verify.map(|b| b.to_string())),
        ];
        let groups = self.as_group.iter().map(|g| ("--as-group", Some(g.clone())));
        words
            .into_iter()
            .chain(groups)
            // shlex quotes only what a shell would misread; a value it cannot quote (a NUL byte)
            // could not have come from a shell either.
            .filter_map(|(flag, value)| Some(format!("{flag}={}", shlex::try_quote(&value?).ok()?)))
            .collect()
    }
}

/// kubectl's `--request-timeout`: a bare number of seconds, or numbers with units (`500ms`,
/// `1m30s`, `2h`).
pub(crate) fn parse_request_timeout(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}: use e.g. 30s, 2m or 1h30m (0 for no timeout)");
    if let Ok(seconds) = s.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        total += match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n * 60),
            "h" => Duration::from_secs(n * 3600),
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suggested_command_repeats_the_cluster_and_identity_but_no_secret() {
        let flags = KubeFlags {
            kubeconfig: Some(PathBuf::from("/home/me/my clusters/prod")),
            context: Some("prod".into()),
            as_group: vec!["ops".into(), "sre".into()],
            token: Some("s3cret".into()),
            namespace: Some("team-a".into()),
            insecure_skip_tls_verify: Some(true),
            ..Default::default()
        };
        assert_eq!(
            flags.repeated(),
            [
                "--kubeconfig='/home/me/my clusters/prod'",
                "--context=prod",
                "--insecure-skip-tls-verify=true",
                "--as-group=ops",
                "--as-group=sre"
            ]
        );
        assert!(KubeFlags::default().repeated().is_empty());
    }
}
