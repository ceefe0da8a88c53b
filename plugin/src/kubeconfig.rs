//! Which cluster, user and namespace to talk to, chosen as kubectl chooses them.
//!
//! The kubeconfig is `--kubeconfig` (which must exist), else the files `KUBECONFIG` lists
//! (merged, the first to set a value wins, missing files skipped), else `~/.kube/config`. Only
//! when none of these exists is the pod's service account used, as kubectl does: a wrong
//! `KUBECONFIG` or `--context` is named as such, never hidden behind an in-cluster error.
//! `--context`, `--cluster` and `--user` then pick entries of it, and the other flags override
//! what those say, with client-go's precedence.

use std::fmt;
use std::path::{Path, PathBuf};

use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, KubeconfigError, LoadDataError, NamedAuthInfo,
    NamedCluster, NamedContext,
};
use kube::{Client, Config};
use secrecy::SecretString;

use crate::kube_flags::KubeFlags;

/// Where a pod finds its service account.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The name of the one context (cluster, user) a selected kubeconfig holds.
const SELECTED: &str = "selected";

/// Where the configuration came from, to name it in errors.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// `--kubeconfig`.
    Flag(PathBuf),
    /// The files `KUBECONFIG` lists that exist.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Home(PathBuf),
    /// The pod's service account.
    InCluster,
    /// The command line alone (`--server` and friends, no kubeconfig anywhere).
    CommandLine,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(p) | Origin::Home(p) => write!(f, "kubeconfig {}", p.display()),
            Origin::Env(paths) => write!(f, "kubeconfig {} (from KUBECONFIG)", joined(paths)),
            Origin::InCluster => f.write_str("the pod's service account"),
            Origin::CommandLine => f.write_str("the command line"),
        }
    }
}

/// What is wrong with the configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--kubeconfig` names no file.
    #[error("stat {}: no such file or directory (given with --kubeconfig): name an existing kubeconfig", .0.display())]
    FlagFileMissing(PathBuf),
    /// A kubeconfig file that exists but cannot be read or parsed.
    #[error("cannot read kubeconfig {}: {detail}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// `KUBECONFIG` lists only files that do not exist.
    #[error("KUBECONFIG names no file that exists ({}), and this is not a pod in a cluster: point KUBECONFIG at a kubeconfig, or use --kubeconfig or --server", joined(.0))]
    EnvFilesMissing(Vec<PathBuf>),
    /// No kubeconfig anywhere, and not in a pod.
    #[error("no kubeconfig: KUBECONFIG is not set, {0} does not exist, and this is not a pod in a cluster: use --kubeconfig, KUBECONFIG or --server")]
    NoKubeconfig(String),
    /// The context asked for is not there.
    #[error("context \"{name}\" does not exist in {origin}: `kubectl config get-contexts` lists them")]
    NoSuchContext {
        /// The context.
        name: String,
        /// Where it was looked for.
        origin: Origin,
    },
    /// The cluster asked for is not there.
    #[error("cluster \"{name}\" does not exist in {origin}: `kubectl config get-clusters` lists them")]
    NoSuchCluster {
        /// The cluster.
        name: String,
        /// Where it was looked for.
        origin: Origin,
    },
    /// The user asked for is not there.
    #[error("auth info \"{name}\" does not exist in {origin}: `kubectl config get-users` lists them")]
    NoSuchUser {
        /// The user.
        name: String,
        /// Where it was looked for.
        origin: Origin,
    },
    /// No context chosen, and none current.
    #[error(
        "{0} sets no current context: choose one with --context (`kubectl config get-contexts` lists them)"
    )]
    NoCurrentContext(Origin),
    /// The chosen cluster has no address.
    #[error("the cluster of {0} has no server address: give one with --server")]
    NoServer(Origin),
    /// kube could not build a client configuration (a certificate or key file, say).
    #[error("{origin}: {detail}")]
    Config {
        /// Where the configuration came from.
        origin: Origin,
        /// kube's words.
        detail: String,
    },
}

/// A kubeconfig and where it came from.
#[derive(Debug)]
pub struct Loaded {
    /// The (merged) kubeconfig.
    pub kubeconfig: Kubeconfig,
    /// Where it came from.
    pub origin: Origin,
}

/// The client configuration the flags choose, and where it came from.
pub async fn config(flags: &KubeFlags) -> Result<(Config, Origin), Error> {
    let loaded = load(flags.kubeconfig.as_deref(), flags.server.is_some())?;
    let origin = loaded.origin.clone();
    let selected = select(loaded, flags)?;
    match Config::from_custom_kubeconfig(selected, &KubeConfigOptions::default()).await {
        Ok(config) => Ok((config, origin)),
        Err(e) => Err(Error::Config { origin, detail: kube_detail(e) }),
    }
}

/// A client for `config`: kube reads the client certificate and key only now.
pub fn client(config: Config, origin: &Origin) -> Result<Client, Error> {
    Client::try_from(config).map_err(|e| {
        let detail = match e {
            kube::Error::InferKubeconfig(e) => kube_detail(e),
            e => crate::hns::message(&e),
        };
        Error::Config { origin: origin.clone(), detail }
    })
}

/// Finds the kubeconfig as kubectl does. `server_given`: the command line names a server, so no
/// kubeconfig at all is not an error.
pub fn load(flag: Option<&Path>, server_given: bool) -> Result<Loaded, Error> {
    if let Some(path) = flag {
        let kubeconfig = read(path)?.ok_or_else(|| Error::FlagFileMissing(path.to_path_buf()))?;
        return Ok(Loaded { kubeconfig, origin: Origin::Flag(path.to_path_buf()) });
    }
    let listed: Option<Vec<PathBuf>> = std::env::var_os("KUBECONFIG")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect::<Vec<_>>())
        .filter(|paths| !paths.is_empty());
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"));
    let found = match &listed {
        Some(paths) => read_all(paths)?,
        None => match &home {
            Some(path) => read(path)?.map(|kc| Loaded { kubeconfig: kc, origin: Origin::Home(path.clone()) }),
            None => None,
        },
    };
    if let Some(found) = found {
        return Ok(found);
    }
    if let Some(kubeconfig) = in_cluster() {
        return Ok(Loaded { kubeconfig, origin: Origin::InCluster });
    }
    if server_given {
        return Ok(Loaded { kubeconfig: Kubeconfig::default(), origin: Origin::CommandLine });
    }
    Err(match listed {
        Some(paths) => Error::EnvFilesMissing(paths),
        None => Error::NoKubeconfig(home.map_or("~/.kube/config".into(), |p| p.display().to_string())),
    })
}

/// The files of `KUBECONFIG` that exist, merged; `None` when none does.
fn read_all(paths: &[PathBuf]) -> Result<Option<Loaded>, Error> {
    let mut merged: Option<Kubeconfig> = None;
    let mut read_paths = Vec::new();
    for path in paths {
        let Some(kc) = read(path)? else { continue };
        read_paths.push(path.clone());
        merged = Some(match merged {
            Some(m) => {
                m.merge(kc).map_err(|e| Error::Unreadable { path: path.clone(), detail: e.to_string() })?
            }
            None => kc,
        });
    }
    Ok(merged.map(|kubeconfig| Loaded { kubeconfig, origin: Origin::Env(read_paths) }))
}

/// A kubeconfig file; `None` if it does not exist.
fn read(path: &Path) -> Result<Option<Kubeconfig>, Error> {
    let unreadable = |detail: String| Error::Unreadable { path: path.to_path_buf(), detail };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e.to_string())),
        Ok(_) => {}
    }
    Kubeconfig::read_from(path).map(Some).map_err(|e| unreadable(kube_detail(e)))
}

/// kube's words for a kubeconfig error, with a file it could not read named plainly (kube
/// renders its path in Debug form).
fn kube_detail(e: KubeconfigError) -> String {
    let file = |what: &str, d: LoadDataError| match d {
        LoadDataError::ReadFile(io, path) => format!("cannot read the {what} {}: {io}", path.display()),
        d => format!("cannot load the {what}: {d}"),
    };
    match e {
        KubeconfigError::ReadConfig(io, _) => io.to_string(),
        KubeconfigError::LoadCertificateAuthority(d) => file("certificate authority", d),
        KubeconfigError::LoadClientCertificate(d) => file("client certificate", d),
        KubeconfigError::LoadClientKey(d) => file("client key", d),
        e => e.to_string(),
    }
}

/// The pod's service account as a kubeconfig, when running in a pod.
fn in_cluster() -> Option<Kubeconfig> {
    let host = std::env::var("KUBERNETES_SERVICE_HOST").ok().filter(|h| !h.is_empty())?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").ok().filter(|p| !p.is_empty())?;
    let host = if host.contains(':') { format!("[{host}]") } else { host };
    let dir = Path::new(SERVICE_ACCOUNT);
    let cluster = Cluster {
        server: Some(format!("https://{host}:{port}")),
        certificate_authority: Some(dir.join("ca.crt").display().to_string()),
        ..Default::default()
    };
    let user = AuthInfo { token_file: Some(dir.join("token").display().to_string()), ..Default::default() };
    let namespace = std::fs::read_to_string(dir.join("namespace")).ok().map(|n| n.trim().to_string());
    Some(single(Context { namespace, ..Default::default() }, cluster, user))
}

/// Picks the context, cluster and user the flags name and applies the flags' overrides: a
/// kubeconfig holding only those.
pub fn select(loaded: Loaded, flags: &KubeFlags) -> Result<Kubeconfig, Error> {
    let Loaded { kubeconfig: kc, origin } = loaded;
    let context_name = flags.context.clone().or_else(|| kc.current_context.clone()).filter(|n| !n.is_empty());
    let mut context = match context_name {
        Some(name) => match kc.contexts.iter().find(|c| c.name == name) {
            Some(c) => c.context.clone().unwrap_or_default(),
            None => return Err(Error::NoSuchContext { name, origin }),
        },
        // The command line may say everything itself (kubectl --server URL --token T).
        None if flags.server.is_some() => Context::default(),
        None => return Err(Error::NoCurrentContext(origin)),
    };
    let cluster_name = flags.cluster.clone().unwrap_or_else(|| context.cluster.clone());
    let mut cluster = match kc.clusters.iter().find(|c| c.name == cluster_name) {
        Some(c) => c.cluster.clone().unwrap_or_default(),
        None if cluster_name.is_empty() => Cluster::default(),
        None => return Err(Error::NoSuchCluster { name: cluster_name, origin }),
    };
    // As client-go: a context's user that does not exist is no user; a --user that does not
    // exist is an error.
    let user_name = flags.user.clone().or_else(|| context.user.clone()).unwrap_or_default();
    let mut user = match kc.auth_infos.iter().find(|u| u.name == user_name) {
        Some(u) => u.auth_info.clone().unwrap_or_default(),
        None if flags.user.is_some() => return Err(Error::NoSuchUser { name: user_name, origin }),
        None => AuthInfo::default(),
    };
    override_cluster(&mut cluster, flags);
    override_user(&mut user, flags);
    if cluster.server.as_deref().is_none_or(str::is_empty) {
        return Err(Error::NoServer(origin));
    }
    if let Some(ns) = &flags.namespace {
        context.namespace = Some(ns.clone());
    }
    Ok(single(context, cluster, user))
}

/// The cluster flags over the kubeconfig's cluster, with client-go's precedence.
fn override_cluster(cluster: &mut Cluster, flags: &KubeFlags) {
    if let Some(server) = &flags.server {
        cluster.server = Some(server.clone());
    }
    // Either flag replaces how the kubeconfig verifies the server: a CA from the kubeconfig
    // together with --insecure-skip-tls-verify would be refused, and a kubeconfig's CA data
    // would win over --certificate-authority.
    let insecure = flags.insecure_skip_tls_verify == Some(true);
    if insecure || flags.certificate_authority.is_some() {
        cluster.insecure_skip_tls_verify = Some(insecure);
        cluster.certificate_authority = flags.certificate_authority.clone();
        cluster.certificate_authority_data = None;
    }
    // A kubeconfig's TLS server name belongs to its server: --server drops it.
    if flags.tls_server_name.is_some() || flags.server.is_some() {
        cluster.tls_server_name = flags.tls_server_name.clone();
    }
}

/// The user flags over the kubeconfig's user.
fn override_user(user: &mut AuthInfo, flags: &KubeFlags) {
    if let Some(token) = &flags.token {
        // A token on the command line says who the user is: the kubeconfig's other credentials
        // would otherwise win (kube-apiserver tries a client certificate before a token).
        *user = AuthInfo { token: Some(SecretString::from(token.clone())), ..Default::default() };
    }
    if let Some(cert) = &flags.client_certificate {
        user.client_certificate = Some(cert.clone());
        user.client_certificate_data = None;
    }
    if let Some(key) = &flags.client_key {
        user.client_key = Some(key.clone());
        user.client_key_data = None;
    }
    if let Some(name) = &flags.as_user {
        user.impersonate = Some(name.clone());
    }
    if !flags.as_group.is_empty() {
        user.impersonate_groups = Some(flags.as_group.clone());
    }
    if let Some(uid) = &flags.as_uid {
        user.impersonate_uid = Some(uid.clone());
    }
}

/// A kubeconfig with one context, its cluster and its user.
fn single(context: Context, cluster: Cluster, user: AuthInfo) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster { name: SELECTED.into(), cluster: Some(cluster), ..Default::default() }],
        auth_infos: vec![NamedAuthInfo {
            name: SELECTED.into(),
            auth_info: Some(user),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: SELECTED.into(),
            context: Some(Context { cluster: SELECTED.into(), user: Some(SELECTED.into()), ..context }),
            ..Default::default()
        }],
        current_context: Some(SELECTED.into()),
        ..Default::default()
    }
}

fn joined(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    const KUBECONFIG: &str = "
apiVersion: v1
kind: Config
current-context: admin
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: Q0E=
    tls-server-name: kubernetes
contexts:
- name: admin
  context: {cluster: local, user: admin, namespace: team}
- name: other
  context: {cluster: local, user: nobody}
users:
- name: admin
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
- name: viewer
  user: {token: abc}
";

    fn loaded() -> Loaded {
        Loaded {
            kubeconfig: Kubeconfig::from_yaml(KUBECONFIG).unwrap(),
            origin: Origin::Home("/h/.kube/config".into()),
        }
    }

    fn parts(kc: &Kubeconfig) -> (&Context, &Cluster, &AuthInfo) {
        assert_eq!(kc.current_context.as_deref(), Some(SELECTED));
        (
            kc.contexts[0].context.as_ref().unwrap(),
            kc.clusters[0].cluster.as_ref().unwrap(),
            kc.auth_infos[0].auth_info.as_ref().unwrap(),
        )
    }

    #[test]
    fn the_current_context_by_default() {
        let kc = select(loaded(), &KubeFlags::default()).unwrap();
        let (context, cluster, user) = parts(&kc);
        assert_eq!(context.namespace.as_deref(), Some("team"));
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(user.client_key_data.as_ref().map(|k| k.expose_secret().to_string()), Some("S0VZ".into()));
    }

    #[test]
    fn flags_pick_entries_and_name_missing_ones() {
        let flags =
            KubeFlags { context: Some("other".into()), user: Some("viewer".into()), ..Default::default() };
        let kc = select(loaded(), &flags).unwrap();
        let (context, _, user) = parts(&kc);
        assert_eq!(context.namespace, None);
        assert_eq!(user.token.as_ref().map(|t| t.expose_secret().to_string()), Some("abc".into()));

        let e =
            select(loaded(), &KubeFlags { context: Some("nope".into()), ..Default::default() }).unwrap_err();
        assert_eq!(
            e.to_string(),
            "context \"nope\" does not exist in kubeconfig /h/.kube/config: `kubectl config get-contexts` lists them"
        );
        let e =
            select(loaded(), &KubeFlags { cluster: Some("nope".into()), ..Default::default() }).unwrap_err();
        assert!(
            e.to_string().starts_with("cluster \"nope\" does not exist in kubeconfig /h/.kube/config"),
            "{e}"
        );
        let e = select(loaded(), &KubeFlags { user: Some("nope".into()), ..Default::default() }).unwrap_err();
        assert!(e.to_string().starts_with("auth info \"nope\" does not exist"), "{e}");
        // A context's user that does not exist is no user, as with kubectl.
        assert!(select(loaded(), &KubeFlags { context: Some("other".into()), ..Default::default() }).is_ok());
    }

    #[test]
    fn overrides_follow_client_go() {
        let flags = KubeFlags {
            namespace: Some("ns".into()),
            server: Some("https://10.0.0.1".into()),
            insecure_skip_tls_verify: Some(true),
            token: Some("t".into()),
            as_user: Some("dev".into()),
            as_group: vec!["a".into(), "b".into()],
            as_uid: Some("42".into()),
            ..Default::default()
        };
        let kc = select(loaded(), &flags).unwrap();
        let (context, cluster, user) = parts(&kc);
        assert_eq!(context.namespace.as_deref(), Some("ns"));
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1"));
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
        assert_eq!(
            (cluster.certificate_authority_data.as_deref(), cluster.tls_server_name.as_deref()),
            (None, None)
        );
        assert_eq!(user.token.as_ref().map(|t| t.expose_secret().to_string()), Some("t".into()));
        assert!(user.client_certificate_data.is_none(), "a token replaces the kubeconfig's certificate");
        assert_eq!(user.impersonate.as_deref(), Some("dev"));
        assert_eq!(user.impersonate_groups, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(user.impersonate_uid.as_deref(), Some("42"));

        let flags = KubeFlags { certificate_authority: Some("/ca.crt".into()), ..Default::default() };
        let kc = select(loaded(), &flags).unwrap();
        let (_, cluster, _) = parts(&kc);
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/ca.crt"));
        assert_eq!(cluster.certificate_authority_data, None);
        assert_eq!(cluster.tls_server_name.as_deref(), Some("kubernetes"), "kept without --server");
    }

    #[tokio::test]
    async fn unreadable_files_are_named_plainly() {
        let flags =
            KubeFlags { certificate_authority: Some("/nonexistent/ca.crt".into()), ..Default::default() };
        let kc = select(loaded(), &flags).unwrap();
        let e = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap_err();
        assert_eq!(
            kube_detail(e),
            "cannot read the certificate authority /nonexistent/ca.crt: No such file or directory (os error 2)"
        );
    }

    #[test]
    fn the_command_line_alone_needs_a_server() {
        let empty = || Loaded { kubeconfig: Kubeconfig::default(), origin: Origin::CommandLine };
        let e = select(empty(), &KubeFlags::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the command line sets no current context: choose one with --context (`kubectl config get-contexts` lists them)"
        );
        let flags = KubeFlags {
            server: Some("https://x:6443".into()),
            token: Some("t".into()),
            ..Default::default()
        };
        let kc = select(empty(), &flags).unwrap();
        assert_eq!(parts(&kc).1.server.as_deref(), Some("https://x:6443"));
    }

    #[test]
    fn missing_files_are_named() {
        let dir = std::env::temp_dir().join(format!("hns-kubeconfig-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing");
        let e = load(Some(&missing), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "stat {}: no such file or directory (given with --kubeconfig): name an existing kubeconfig",
                missing.display()
            )
        );
        let bad = dir.join("bad");
        std::fs::write(&bad, "clusters: 7\n").unwrap();
        let e = load(Some(&bad), false).unwrap_err();
        assert!(e.to_string().starts_with(&format!("cannot read kubeconfig {}: ", bad.display())), "{e}");
        let good = dir.join("good");
        std::fs::write(&good, KUBECONFIG).unwrap();
        let found = read_all(&[missing.clone(), good.clone()]).unwrap().unwrap();
        assert_eq!(found.origin, Origin::Env(vec![good]), "missing files are skipped, as kubectl does");
        assert!(read_all(std::slice::from_ref(&missing)).unwrap().is_none());
        assert_eq!(
            Error::EnvFilesMissing(vec![missing.clone()]).to_string(),
            format!("KUBECONFIG names no file that exists ({}), and this is not a pod in a cluster: point KUBECONFIG at a kubeconfig, or use --kubeconfig or --server", missing.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
