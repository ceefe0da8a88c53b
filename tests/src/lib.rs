//! Helpers for the end-to-end tests: the cluster under test, kubectl, users, and direct
//! connections to hns-apiserver.
//!
//! `hack/e2e.sh` starts a local control plane with hns and sets `HNS_E2E_KUBECONFIG` and
//! `HNS_E2E_DIR` (its PKI, ports and logs). With only `HNS_E2E_KUBECONFIG` set, tests run against
//! that cluster; the few that must reach hns-apiserver directly or mint certificates then say
//! so and return.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::ExtendedKeyUsage;
use openssl::x509::{X509NameBuilder, X509};

pub mod apiserver_metrics;
pub mod availability;
pub mod bench;
pub mod deletion;
pub mod docs;
pub mod forged;
pub mod get_bench;
pub mod hnc_bench;
pub mod quota_bench;
pub mod quotas;
pub mod reliability;
pub mod scale_bench;
pub mod stopping;
pub mod tax_bench;
pub mod timing;
pub mod views_bench;

/// The cluster under test.
pub struct Env {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The local control plane's directory, when the tests started one.
    pub local: Option<Local>,
}

/// What a local control plane offers beyond a kubeconfig.
#[derive(Clone)]
pub struct Local {
    /// Its directory (`pki/`, `logs/`, `env`).
    pub dir: PathBuf,
    /// The address hns-apiserver listens on (127.0.0.1, or the machine's own address when
    /// several replicas run behind a Service).
    pub hns_host: String,
    /// hns-apiserver's port (of replica 0).
    pub hns_port: u16,
    /// The ports of every replica, replica 0 first (HNS_PORTS, comma-separated).
    pub hns_ports: Vec<u16>,
    /// The replicas' process names (pid and log file names), replica 0 first
    /// (HNS_REPLICA_NAMES, comma-separated).
    pub replica_names: Vec<String>,
    /// kube-apiserver's port on 127.0.0.1.
    pub kube_apiserver_port: u16,
    /// hns-apiserver's metrics port on 127.0.0.1.
    pub metrics_port: u16,
}

impl Env {
    /// Reads the environment `hack/e2e.sh` sets up. Panics with instructions when it is missing.
    pub fn get() -> Env {
        let kubeconfig = std::env::var_os("HNS_E2E_KUBECONFIG").map(PathBuf::from).unwrap_or_else(|| {
            panic!("HNS_E2E_KUBECONFIG is not set: run the e2e tests with `make e2e` (or `make test`)")
        });
        let local = std::env::var_os("HNS_E2E_DIR").map(PathBuf::from).map(|dir| {
            let env = read_env_file(&dir.join("env"));
            let port = |k: &str| {
                env.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{k} missing in env"))
            };
            Local {
                hns_host: env.get("HNS_HOST").cloned().unwrap_or_else(|| "127.0.0.1".into()),
                hns_port: port("HNS_PORT"),
                hns_ports: env
                    .get("HNS_PORTS")
                    .map(|v| v.split(',').filter_map(|p| p.parse().ok()).collect())
                    .unwrap_or_else(|| vec![port("HNS_PORT")]),
                replica_names: env
                    .get("HNS_REPLICA_NAMES")
                    .map(|v| v.split(',').map(str::to_string).collect())
                    .unwrap_or_else(|| vec!["hns-apiserver".into()]),
                kube_apiserver_port: port("KUBE_APISERVER_PORT"),
                metrics_port: port("METRICS_PORT"),
                dir,
            }
        });
        Env { kubeconfig, local }
    }

    /// The local control plane, or `None` after printing why the calling test cannot run.
    pub fn local_or_skip(&self, test: &str) -> Option<&Local> {
        if self.local.is_none() {
            eprintln!(
                "{test}: needs the local control plane (HNS_E2E_DIR); not run against an external cluster"
            );
        }
        self.local.as_ref()
    }

    /// The start of a test of one tree: the environment, a cluster-admin client and a fresh
    /// namespace of the test's own (see [`fresh_namespace`]), named `prefix` and a unique suffix.
    pub async fn with_namespace(prefix: &str) -> (Env, Client, String) {
        let (env, client) = Env::with_admin().await;
        let ns = fresh_namespace(&client, prefix).await;
        (env, client, ns)
    }

    /// The start of a test that needs the local control plane: the environment, the control
    /// plane and a cluster-admin client; `None`, after printing why, against an external cluster.
    pub async fn local_with_admin() -> Option<(Env, Local, Client)> {
        let env = Env::get();
        // libtest names each test's thread after the test, and `#[tokio::test]` runs the test's
        // body on that thread.
        let thread = std::thread::current();
        let local = env.local_or_skip(thread.name().unwrap_or("this test"))?.clone();
        let client = env.admin().await;
        Some((env, local, client))
    }

    /// The directory of the control plane whose processes benchmarks measure: the loopback
    /// one's (HNS_E2E_DIR), or one with real nodes (HNS_NODES_DIR, hack/nodes.sh).
    pub fn control_plane_dir(&self) -> Option<PathBuf> {
        let nodes = || std::env::var_os("HNS_NODES_DIR").map(PathBuf::from);
        self.local.as_ref().map(|l| l.dir.clone()).or_else(nodes)
    }

    /// A client with the admin kubeconfig.
    pub async fn admin(&self) -> Client {
        client_for(&self.kubeconfig).await
    }

    /// The start of most tests: the environment and a cluster-admin client of it.
    pub async fn with_admin() -> (Env, Client) {
        let env = Env::get();
        let client = env.admin().await;
        (env, client)
    }

    /// A client with the admin kubeconfig that sends each request once, for a test of a refusal
    /// kube's client retries by default (429, 503 and 504, backing off for minutes).
    pub async fn admin_without_retries(&self) -> Client {
        let mut config = config_for(&self.kubeconfig).await;
        config.default_retry = false;
        Client::try_from(config).expect("client")
    }

    /// Runs kubectl with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl_with(&self.kubeconfig, args)
    }

    /// Binds ClusterRole `role` to `user` in `namespace`, as RoleBinding `USER-ROLE`.
    pub fn grant(&self, user: &str, role: &str, namespace: &str) {
        let name = format!("{user}-{role}");
        let (role, user) = (format!("--clusterrole={role}"), format!("--user={user}"));
        ok(self.kubectl(&["create", "rolebinding", &name, "-n", namespace, &role, &user]));
    }

    /// A client acting as `user` (in `groups`): with a client certificate on a local control
    /// plane, by impersonation elsewhere.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Client {
        if let Some(local) = &self.local {
            return client_for(&local.user_kubeconfig(user, groups)).await;
        }
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("read kubeconfig");
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("kubeconfig");
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Client::try_from(config).expect("client")
    }

    /// Runs kubectl as `user` (in `groups`): with a client certificate on a local control plane,
    /// by impersonation elsewhere.
    pub fn kubectl_as(&self, user: &str, groups: &[&str], args: &[&str]) -> Output {
        match &self.local {
            Some(local) => kubectl_with(&local.user_kubeconfig(user, groups), args),
            None => {
                let mut all: Vec<String> = vec![format!("--as={user}")];
                all.extend(groups.iter().map(|g| format!("--as-group={g}")));
                all.extend(args.iter().map(|a| a.to_string()));
                kubectl_with(&self.kubeconfig, &all.iter().map(String::as_str).collect::<Vec<_>>())
            }
        }
    }
}

fn read_env_file(path: &Path) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A kube client for a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> Client {
    Client::try_from(config_for(kubeconfig).await).expect("client")
}

async fn config_for(kubeconfig: &Path) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.expect("kubeconfig")
}

/// Runs kubectl with `kubeconfig`.
pub fn kubectl_with(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .output()
        .expect("kubectl must be on PATH")
}

/// The directory holding the built `kubectl-hns`: HNS_PLUGIN_DIR, else CARGO_TARGET_DIR's debug
/// directory, else the workspace's (`hack/e2e.sh` builds it first).
pub fn plugin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HNS_PLUGIN_DIR") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("debug");
    assert!(
        dir.join("kubectl-hns").exists(),
        "{} has no kubectl-hns: build it first (cargo build -p kubectl-hns)",
        dir.display()
    );
    dir
}

/// PATH with `dir` first.
pub fn path_with(dir: &Path) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    std::env::join_paths(dirs).expect("PATH")
}

/// Runs `kubectl hns ARGS` with `kubeconfig` through kubectl's real plugin dispatch, without
/// colour and without a terminal on stdin.
pub fn hns_with(kubeconfig: &Path, args: &[&str]) -> Output {
    plugin_command(&plugin_dir(), kubeconfig, args).output().expect("kubectl must be on PATH")
}

/// `kubectl hns ARGS` with `kubeconfig`, dispatched by kubectl to the `kubectl-hns` in `dir`
/// (hns's, or HNC's own for the benchmark against it), without colour and without a terminal
/// on stdin.
pub fn plugin_command(dir: &Path, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("kubectl");
    command
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path_with(dir))
        .env("NO_COLOR", "1")
        .arg("hns")
        .args(args)
        .stdin(std::process::Stdio::null());
    command
}

/// `kubectl hns ARGS` as the admin.
pub fn hns(env: &Env, args: &[&str]) -> Output {
    hns_with(&env.kubeconfig, args)
}

/// The `Status` of a request the server refused; panics on any other error.
pub fn api_status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(s) => *s,
        other => panic!("expected a Status from the server, got {other}"),
    }
}

/// stdout of a successful command; panics with stderr otherwise.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr of a failed command; panics if it succeeded.
pub fn fails(out: Output) -> String {
    assert!(
        !out.status.success(),
        "command unexpectedly succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

impl Local {
    /// A path in the PKI directory.
    pub fn pki(&self, file: &str) -> PathBuf {
        self.dir.join("pki").join(file)
    }

    /// A kubeconfig for `user` in `groups`, with a client certificate signed by the cluster CA.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        let tag = format!("{user}-{}", groups.join("-")).replace([':', '/'], "_");
        // Named by kube-apiserver's port too: `make dev-up` may start it on another port later.
        let path = self.dir.join(format!("user-{tag}-{}.kubeconfig", self.kube_apiserver_port));
        if path.exists() {
            return path;
        }
        let (cert, key) = mint(&self.pki("ca.crt"), &self.pki("ca.key"), user, groups);
        let b64 = |b: &[u8]| openssl::base64::encode_block(b);
        let ca = std::fs::read(self.pki("ca.crt")).expect("ca.crt");
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {}\nusers:\n- name: {tag}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: local\n  context:\n    cluster: local\n    user: {tag}\n    namespace: default\ncurrent-context: local\n",
            self.kube_apiserver_port,
            b64(&ca),
            b64(&cert.to_pem().unwrap()),
            b64(&key.private_key_to_pem_pkcs8().unwrap()),
        );
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, kubeconfig).expect("write kubeconfig");
        std::fs::rename(&tmp, &path).expect("rename kubeconfig");
        path
    }

    /// hns-apiserver's metrics, from its plain-HTTP metrics port (Prometheus' text format).
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.metrics_port);
        reqwest::get(&url).await.unwrap_or_else(|e| panic!("{url}: {e}")).text().await.unwrap()
    }

    /// The base URL of hns-apiserver, bypassing kube-apiserver.
    pub fn hns_url(&self) -> String {
        format!("https://{}:{}", self.hns_host, self.hns_port)
    }

    /// A direct HTTPS client to hns-apiserver presenting `identity` (certificate and key PEM).
    pub fn direct_client(&self, identity: Option<(Vec<u8>, Vec<u8>)>) -> reqwest::Client {
        let ca = std::fs::read(self.pki("hns-ca.crt")).expect("hns-ca.crt");
        let mut b = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .timeout(Duration::from_secs(10));
        if let Some((cert, key)) = identity {
            b = b.identity(reqwest::Identity::from_pkcs8_pem(&cert, &key).expect("identity"));
        }
        b.build().unwrap()
    }

    /// The front-proxy client certificate kube-apiserver uses.
    pub fn front_proxy_identity(&self) -> (Vec<u8>, Vec<u8>) {
        (
            std::fs::read(self.pki("front-proxy-client.crt")).unwrap(),
            std::fs::read(self.pki("front-proxy-client.key")).unwrap(),
        )
    }

    /// A TLS connection to hns-apiserver with the front proxy's certificate, as kube-apiserver
    /// makes, offering the protocols `alpn` (ALPN wire format).
    pub fn front_proxy_connection(&self, alpn: &[u8]) -> openssl::ssl::SslStream<std::net::TcpStream> {
        self.connection(Some(self.front_proxy_identity()), alpn)
    }

    /// A raw TLS connection to hns-apiserver offering `alpn`, with the client certificate
    /// `identity` (PEM certificate and key) or none.
    pub fn connection(
        &self,
        identity: Option<(Vec<u8>, Vec<u8>)>,
        alpn: &[u8],
    ) -> openssl::ssl::SslStream<std::net::TcpStream> {
        let mut connector = openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls()).unwrap();
        connector.set_verify(openssl::ssl::SslVerifyMode::NONE);
        connector.set_alpn_protos(alpn).unwrap();
        if let Some((cert, key)) = identity {
            connector.set_certificate(&X509::from_pem(&cert).unwrap()).unwrap();
            connector.set_private_key(&PKey::private_key_from_pem(&key).unwrap()).unwrap();
        }
        let tcp = std::net::TcpStream::connect((self.hns_host.as_str(), self.hns_port)).unwrap();
        connector.build().connect("localhost", tcp).unwrap()
    }

    /// A new certificate with CN `cn` signed by the CA `ca` (a name in the PKI directory).
    pub fn identity_from(&self, ca: &str, cn: &str) -> (Vec<u8>, Vec<u8>) {
        let (cert, key) = mint(&self.pki(&format!("{ca}.crt")), &self.pki(&format!("{ca}.key")), cn, &[]);
        (cert.to_pem().unwrap(), key.private_key_to_pem_pkcs8().unwrap())
    }
}

/// Who asked, as kube-apiserver names them in a request it passes on to hns-apiserver (trusted
/// only on a connection with the front proxy's certificate).
pub trait RemoteUser {
    /// Names `user`, in `groups`, in the `X-Remote-User` and `X-Remote-Group` headers.
    fn remote_user(self, user: &str, groups: &[&str]) -> Self;
}

impl RemoteUser for reqwest::RequestBuilder {
    fn remote_user(self, user: &str, groups: &[&str]) -> Self {
        let named = self.header("X-Remote-User", user);
        groups.iter().fold(named, |request, group| request.header("X-Remote-Group", *group))
    }
}

/// A self-signed certificate: a CA nobody trusts.
pub fn rogue_identity(cn: &str) -> (Vec<u8>, Vec<u8>) {
    let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let cert = build_cert(cn, &[], &key, None);
    (cert.to_pem().unwrap(), key.private_key_to_pem_pkcs8().unwrap())
}

fn mint(ca_cert: &Path, ca_key: &Path, cn: &str, orgs: &[&str]) -> (X509, PKey<Private>) {
    let ca = X509::from_pem(&std::fs::read(ca_cert).unwrap()).unwrap();
    let ca_key = PKey::private_key_from_pem(&std::fs::read(ca_key).unwrap()).unwrap();
    let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    (build_cert(cn, orgs, &key, Some((&ca, &ca_key))), key)
}

fn build_cert(cn: &str, orgs: &[&str], key: &PKey<Private>, issuer: Option<(&X509, &PKey<Private>)>) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    for o in orgs {
        name.append_entry_by_nid(Nid::ORGANIZATIONNAME, o).unwrap();
    }
    name.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    let mut serial = BigNum::new().unwrap();
    serial.rand(127, MsbOption::MAYBE_ZERO, false).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap()).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap()).unwrap();
    b.set_not_after(&Asn1Time::days_from_now(1).unwrap()).unwrap();
    b.append_extension(ExtendedKeyUsage::new().client_auth().build().unwrap()).unwrap();
    match issuer {
        Some((ca, ca_key)) => {
            b.set_issuer_name(ca.subject_name()).unwrap();
            b.sign(ca_key, MessageDigest::sha256()).unwrap();
        }
        None => {
            b.set_issuer_name(&name).unwrap();
            b.sign(key, MessageDigest::sha256()).unwrap();
        }
    }
    b.build()
}

/// Whom a RoleBinding grants its role to.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    User(&'a str),
    Group(&'a str),
}

impl<'a> Subject<'a> {
    /// The subject's kind, as RBAC spells it.
    pub fn kind(self) -> &'static str {
        match self {
            Subject::User(_) => "User",
            Subject::Group(_) => "Group",
        }
    }

    /// The user's or the group's name.
    pub fn name(self) -> &'a str {
        let (Subject::User(name) | Subject::Group(name)) = self;
        name
    }
}

/// A RoleBinding `name` granting ClusterRole `role` to `subject`: the object the propagation
/// tests, benchmarks and fault trials copy down hierarchies, and the grants the auth and views
/// suites give their users.
pub fn role_binding(name: &str, role: &str, subject: Subject) -> k8s_openapi::api::rbac::v1::RoleBinding {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": subject.kind(), "name": subject.name()}],
    }))
    .expect("a valid RoleBinding")
}

/// Whether kube-apiserver lets `user` (in `groups`, and `system:authenticated`) get object
/// `name` of hns's `resource` in `namespace`: its own SubjectAccessReview, the reference the
/// per-user views are checked against.
pub async fn may_get(
    admin: &Client,
    (user, groups): (&str, &[&str]),
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let mut all_groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    all_groups.push("system:authenticated".into());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(all_groups),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("get".into()),
                group: Some(hns_api::GROUP.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone()).create(&PostParams::default(), &review).await;
    answer.unwrap_or_else(|e| panic!("SubjectAccessReview: {e}")).status.is_some_and(|s| s.allowed)
}

/// Writes `manifest` to a temporary file named after `name` (`NAME.yaml`) and returns its path,
/// for `kubectl … -f`.
pub fn manifest_file(name: &str, manifest: &str) -> String {
    let path = std::env::temp_dir().join(format!("{name}.yaml"));
    std::fs::write(&path, manifest).unwrap();
    path.to_str().unwrap().to_string()
}

/// A namespace name unique to this test run: `<prefix>-<pid>-<n>`.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// The match condition of hns's labelling webhook when lone namespaces stay unlabelled: every
/// install that leaves them so (config/components/unlabelled-lone-namespaces, the chart's
/// `labelLoneNamespaces=false`, hack/hns-up.sh with `HNS_LONE_NAMESPACE_LABELS=false`) has
/// kube-apiserver call hns only for a namespace created with a key of hns's.
const UNLABELLED_MATCH_CONDITION: &str = "has-hns-keys";

/// Whether hns is installed with lone namespaces unlabelled, as the cluster's registration of
/// hns's webhooks says: tests follow the install they run against, with nothing to set. A test
/// process runs against one install mode (a reinstall keeps it), so the answer is read once it
/// is found; while hns is not registered (between a test's `hns-up.sh down` and `up`) it is
/// asked again next time.
pub async fn lone_namespaces_unlabelled(client: &Client) -> bool {
    static FOUND: OnceLock<bool> = OnceLock::new();
    if let Some(unlabelled) = FOUND.get() {
        return *unlabelled;
    }
    let webhooks = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt("hns")
        .await
        .unwrap_or_else(|e| panic!("MutatingWebhookConfiguration hns: {e}"));
    match webhooks {
        Some(webhooks) => *FOUND.get_or_init(|| registers_unlabelled(&webhooks)),
        None => false,
    }
}

/// Whether hns's webhook registration `webhooks` is the one that leaves lone namespaces unlabelled.
pub fn registers_unlabelled(webhooks: &MutatingWebhookConfiguration) -> bool {
    let conditions = webhooks.webhooks.iter().flatten().flat_map(|w| w.match_conditions.iter().flatten());
    conditions.into_iter().any(|c| c.name == UNLABELLED_MATCH_CONDITION)
}

/// Whether kube-apiserver serves MutatingAdmissionPolicies (Kubernetes 1.36 and later), with which
/// hns has kube-apiserver label new namespaces itself.
pub async fn admission_policies_served(client: &Client) -> bool {
    let resources = client.list_api_group_resources("admissionregistration.k8s.io/v1").await.unwrap();
    resources.resources.iter().any(|r| r.name == "mutatingadmissionpolicies")
}

/// Creates a namespace with `labels`, waits until hns has labelled it as a namespace it
/// manages (its own tree label and `included-namespace`), and returns its name: a test reading
/// the namespace later sees no change hns makes on its own. Where hns leaves lone namespaces
/// unlabelled ([`lone_namespaces_unlabelled`]), until hns
/// knows the namespace instead.
pub async fn create_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) -> String {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    ns.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    api.create(&PostParams::default(), &ns).await.unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    if lone_namespaces_unlabelled(client).await {
        let hierarchy: Api<hns_api::HierarchyConfiguration> = Api::namespaced(client.clone(), name);
        eventually(&format!("hns to know namespace {name}"), Duration::from_secs(30), || async {
            hierarchy.get("hierarchy").await.ok().map(|_| ())
        })
        .await;
        return name.to_string();
    }
    let own = hns_api::keys::tree_label(name);
    eventually(&format!("hns to label namespace {name}"), Duration::from_secs(30), || async {
        let labels = api.get(name).await.ok()?.metadata.labels?;
        (labels.contains_key(&own) && labels.contains_key(hns_api::keys::INCLUDED_NAMESPACE)).then_some(())
    })
    .await;
    name.to_string()
}

/// Creates a namespace named `prefix` and a unique suffix, with no labels, as
/// [`create_namespace`] does, and returns its name.
pub async fn fresh_namespace(client: &Client, prefix: &str) -> String {
    create_namespace(client, &unique(prefix), &[]).await
}

/// Creates two fresh namespaces (see [`fresh_namespace`]) and makes the second a child of the
/// first: the smallest tree, which most tests of the hierarchy start from.
pub async fn parent_and_child(client: &Client, parent: &str, child: &str) -> (String, String) {
    let parent = fresh_namespace(client, parent).await;
    let child = fresh_namespace(client, child).await;
    set_parent(client, &child, Some(&parent))
        .await
        .unwrap_or_else(|e| panic!("set the parent of {child}: {e}"));
    (parent, child)
}

/// Creates a fresh namespace (see [`fresh_namespace`]) and its subnamespace `{parent}-c`: the
/// smallest tree of subnamespaces. Returns the parent and the child.
pub async fn parent_and_subnamespace(client: &Client, prefix: &str) -> (String, String) {
    let parent = fresh_namespace(client, prefix).await;
    let child = new_subnamespace(client, &parent, "c").await;
    (parent, child)
}

/// Sets (or, with `None`, clears) the parent of `ns` through the hierarchy API.
pub async fn set_parent(
    client: &Client,
    ns: &str,
    parent: Option<&str>,
) -> Result<hns_api::HierarchyConfiguration, kube::Error> {
    let api: Api<hns_api::HierarchyConfiguration> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({"spec": {"parent": parent}});
    api.patch("hierarchy", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await
}

/// Creates subnamespace `name` of `parent` through the hierarchy API.
pub async fn create_subns(
    client: &Client,
    parent: &str,
    name: &str,
) -> Result<hns_api::Subnamespace, kube::Error> {
    let api: Api<hns_api::Subnamespace> = Api::namespaced(client.clone(), parent);
    api.create(&PostParams::default(), &hns_api::Subnamespace::new(name, Default::default())).await
}

/// Creates subnamespace `{parent}-{suffix}` of `parent` through the hierarchy API, and returns
/// its name.
pub async fn new_subnamespace(client: &Client, parent: &str, suffix: &str) -> String {
    let name = format!("{parent}-{suffix}");
    create_subns(client, parent, &name).await.unwrap_or_else(|e| panic!("create subnamespace {name}: {e}"));
    name
}

/// Creates a line of subnamespaces through the hierarchy API, `{root}-{suffix}` for each of
/// `suffixes`: the first under `root`, each next one under the one before. Returns their names.
pub async fn nested_subnamespaces<const N: usize>(
    client: &Client,
    root: &str,
    suffixes: [&str; N],
) -> [String; N] {
    let names = suffixes.map(|suffix| format!("{root}-{suffix}"));
    let mut parent = root;
    for name in &names {
        create_subns(client, parent, name)
            .await
            .unwrap_or_else(|e| panic!("create subnamespace {name}: {e}"));
        parent = name;
    }
    names
}

/// Waits until hns is done making `parent` a member for its first child: it carries the
/// membership label and no longer the mark's time ([`hns_api::keys::MARKED_AT`], which hns's
/// controller removes once the child is there). A test comparing the parent's state later sees
/// no write hns makes on its own.
pub async fn settled_parent(client: &Client, parent: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    eventually(&format!("hns to settle parent {parent}"), Duration::from_secs(30), || async {
        let meta = api.get(parent).await.ok()?.metadata;
        let member = meta.labels.unwrap_or_default().contains_key(hns_api::keys::HIERARCHY_MEMBER);
        let marking = meta.annotations.unwrap_or_default().contains_key(hns_api::keys::MARKED_AT);
        (member && !marking).then_some(())
    })
    .await;
}

/// Sets `allowCascadingDeletion` on namespace `ns` through the hierarchy API.
pub async fn allow_cascading_deletion(
    client: &Client,
    ns: &str,
) -> Result<hns_api::HierarchyConfiguration, kube::Error> {
    let api: Api<hns_api::HierarchyConfiguration> = Api::namespaced(client.clone(), ns);
    let cascade = serde_json::json!({"spec": {"allowCascadingDeletion": true}});
    api.patch("hierarchy", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(cascade)).await
}

/// Deletes a tree of namespaces: allows cascading deletion on `root` (so its subnamespaces go
/// with it), then deletes it. Errors are ignored: this is clean-up.
pub async fn delete_tree(client: &Client, root: &str) {
    let _ = allow_cascading_deletion(client, root).await;
    delete_namespaces(client, &[root]).await;
}

/// Deletes namespaces, ignoring ones already gone.
pub async fn delete_namespaces(client: &Client, names: &[&str]) {
    let api: Api<Namespace> = Api::all(client.clone());
    for n in names {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
}

/// Retries `check` until it returns `Some` or `timeout` passes (the cache is eventually
/// consistent with the cluster). Panics with `what` on timeout.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
