//! The secure port end to end: the real binary with `--secure-listen` and
//! its own data directory, real kubectl and the `kube` crate over TLS with
//! the generated `admin.kubeconfig`, a static token, a service-account
//! token from `kubectl create token`, no credentials, impersonation, and
//! the generated certificates reused across a restart.

use e2e::{free_port, stderr, stdout, Server};
use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use std::path::{Path, PathBuf};
use watchcache::testing::TestEtcd;

const ADMIN_TOKEN_LINE: &str = "s3cr3t-token-for-e2e,jane,1001,\"dev,ops\"\n";

/// A server with the secure port on a free loopback port, its PKI under
/// `data`, and a token file.
struct Secure {
    server: Server,
    data: PathBuf,
    port: u16,
}

async fn start(dir: &Path) -> Secure {
    start_with_prefix(dir, &e2e::unique_prefix()).await
}

async fn start_with_prefix(dir: &Path, prefix: &str) -> Secure {
    start_with(dir, prefix, &[]).await
}

/// A server on the secure port. Unless `extra` names an authorization
/// mode, it authorizes with AlwaysAllow: these tests are about who a
/// request is; RBAC over TLS has its own test below (and its matrices are
/// in apiserver/tests/api/rbac.rs).
async fn start_with(dir: &Path, prefix: &str, extra: &[&str]) -> Secure {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, ADMIN_TOKEN_LINE).expect("token file");
    let etcd = TestEtcd::shared().await;
    // The secure port is chosen here; another test may take it before the
    // server binds it: then start again on a new one.
    for _ in 0..4 {
        let port = free_port();
        let own = [
            format!("--secure-listen=127.0.0.1:{port}"),
            format!("--data-dir={}", data.display()),
            format!("--token-auth-file={}", tokens.display()),
        ];
        let mut args: Vec<&str> = own
            .iter()
            .map(String::as_str)
            .chain(extra.iter().copied())
            .collect();
        if !extra.iter().any(|a| a.starts_with("--authorization-mode")) {
            args.push("--authorization-mode=AlwaysAllow");
        }
        match Server::try_start_with_prefix(&etcd.endpoint(), prefix, &args).await {
            Ok(server) => return Secure { server, data, port },
            Err(e2e::StartError::PortTaken(_)) => continue,
            Err(e2e::StartError::Exited(log)) => {
                panic!("server exited before it was ready:\n{log}")
            }
        }
    }
    panic!("no free ports for the secure server in 4 attempts")
}

impl Secure {
    fn admin_kubeconfig(&self) -> PathBuf {
        self.data.join("admin.kubeconfig")
    }

    /// A kubeconfig trusting the generated CA with the given user entry.
    fn kubeconfig_with(&self, name: &str, user: &str) -> PathBuf {
        let path = self.server.home().join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context:\n    cluster: s\n    user: u\n    namespace: default\ncurrent-context: c\nusers:\n- name: u\n  user: {user}\n",
            self.port,
            self.data.join("pki/ca.crt").display()
        );
        std::fs::write(&path, text).expect("kubeconfig");
        path
    }

    fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        self.kubeconfig_with(name, &format!("{{token: {token:?}}}"))
    }

    fn kubectl(&self, kubeconfig: &Path, args: &[&str]) -> std::process::Output {
        let kc = kubeconfig.display().to_string();
        let mut all = vec!["--kubeconfig", kc.as_str()];
        all.extend_from_slice(args);
        self.server.kubectl(&all)
    }

    fn kubectl_ok(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let out = self.kubectl(kubeconfig, args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}\n{}\nserver log:\n{}",
            stderr(&out),
            stdout(&out),
            self.server.log()
        );
        stdout(&out)
    }

    fn kubectl_err(&self, kubeconfig: &Path, args: &[&str]) -> String {
        let out = self.kubectl(kubeconfig, args);
        assert!(
            !out.status.success(),
            "kubectl {args:?} should have failed: {}",
            stdout(&out)
        );
        stderr(&out)
    }
}

const LOGIN: &str = "You must be logged in to the server";

#[tokio::test]
async fn kubectl_with_certificates_tokens_and_service_accounts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path()).await;
    let admin = s.admin_kubeconfig();
    assert!(admin.exists(), "admin.kubeconfig was not written");

    // The admin client certificate (CN=kubernetes-admin, O=system:masters).
    let ns = s.kubectl_ok(&admin, &["get", "ns", "-o", "name"]);
    assert!(ns.contains("namespace/default"), "{ns}");
    s.kubectl_ok(
        &admin,
        &["create", "configmap", "tls-cm", "--from-literal=k=v"],
    );
    let v = s.kubectl_ok(&admin, &["get", "cm", "tls-cm", "-o", "jsonpath={.data.k}"]);
    assert_eq!(v, "v");

    // A static token from the token file; a wrong one is a 401.
    let jane = s.token_kubeconfig("jane", "s3cr3t-token-for-e2e");
    let v = s.kubectl_ok(&jane, &["get", "cm", "tls-cm", "-o", "jsonpath={.data.k}"]);
    assert_eq!(v, "v");
    let wrong = s.token_kubeconfig("wrong", "not-a-token");
    let err = s.kubectl_err(&wrong, &["get", "cm"]);
    assert!(err.contains(LOGIN), "{err}");

    // No credentials the server reads (kubectl prompts for a password when
    // a kubeconfig has none at all; kube-apiserver ignores basic auth, so
    // this request carries none it accepts): 401. The kube crate with no
    // credentials at all is in `kube_crate_over_tls_with_the_admin_kubeconfig`.
    let basic = s.kubeconfig_with("basic", "{username: a, password: b}");
    let err = s.kubectl_err(&basic, &["get", "ns"]);
    assert!(err.contains(LOGIN), "{err}");

    // A service-account token from `kubectl create token`.
    s.kubectl_ok(&admin, &["create", "serviceaccount", "bot"]);
    let token = s.kubectl_ok(&admin, &["create", "token", "bot"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "not a JWT: {token}");
    let bot = s.token_kubeconfig("bot", token);
    let v = s.kubectl_ok(&bot, &["get", "cm", "tls-cm", "-o", "jsonpath={.data.k}"]);
    assert_eq!(v, "v");
    // Shorter than ten minutes is refused, as kube-apiserver refuses it.
    let err = s.kubectl_err(&admin, &["create", "token", "bot", "--duration=5m"]);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    let err = s.kubectl_err(&admin, &["create", "token", "nobody-here"]);
    assert!(
        err.contains("serviceaccounts \"nobody-here\" not found"),
        "{err}"
    );
    // A token for another audience is not accepted by the API.
    let other = s.kubectl_ok(&admin, &["create", "token", "bot", "--audience=vault"]);
    let other = s.token_kubeconfig("other-aud", other.trim());
    let err = s.kubectl_err(&other, &["get", "cm"]);
    assert!(err.contains(LOGIN), "{err}");
    // Deleting the service account (or recreating it: a new uid) voids
    // its tokens.
    s.kubectl_ok(&admin, &["delete", "serviceaccount", "bot"]);
    s.kubectl_ok(&admin, &["create", "serviceaccount", "bot"]);
    let err = s.kubectl_err(&bot, &["get", "cm"]);
    assert!(err.contains(LOGIN), "{err}");

    // Impersonation: the admin (system:masters) may act as anyone.
    let v = s.kubectl_ok(
        &admin,
        &[
            "--as=alice",
            "--as-group=dev",
            "get",
            "cm",
            "tls-cm",
            "-o",
            "jsonpath={.data.k}",
        ],
    );
    assert_eq!(v, "v");
    s.kubectl_ok(
        &admin,
        &["--as=system:serviceaccount:default:bot", "get", "cm"],
    );
}

async fn kube_client(kubeconfig: &Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn kube_crate_over_tls_with_the_admin_kubeconfig() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path()).await;
    let client = kube_client(&s.admin_kubeconfig()).await;
    let list = kube::Api::<Namespace>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list namespaces over TLS");
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");

    // TokenRequest and TokenReview through the kube crate's typed API.
    let sas =
        kube::Api::<k8s_openapi::api::core::v1::ServiceAccount>::default_namespaced(client.clone());
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "reviewed"}})).unwrap();
    let sa = sas
        .create(&Default::default(), &sa)
        .await
        .expect("create sa");
    let request: k8s_openapi::api::authentication::v1::TokenRequest = serde_json::from_value(
        serde_json::json!({"spec": {"audiences": ["api", "vault"], "expirationSeconds": 600}}),
    )
    .unwrap();
    let issued = sas
        .create_token_request("reviewed", &Default::default(), &request)
        .await
        .expect("token request");
    let status = issued.status.expect("status");
    assert_eq!(issued.spec.expiration_seconds, Some(600));
    let reviews = kube::Api::<k8s_openapi::api::authentication::v1::TokenReview>::all(client);
    let review = |token: String, audiences: Vec<&str>| {
        serde_json::from_value::<k8s_openapi::api::authentication::v1::TokenReview>(
            serde_json::json!({"spec": {"token": token, "audiences": audiences}}),
        )
        .unwrap()
    };
    let r = reviews
        .create(
            &Default::default(),
            &review(status.token.clone(), vec!["vault"]),
        )
        .await
        .expect("token review")
        .status
        .expect("review status");
    assert_eq!(r.authenticated, Some(true), "{r:?}");
    let user = r.user.expect("user");
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:reviewed")
    );
    assert_eq!(user.uid, sa.metadata.uid);
    assert_eq!(
        user.groups.unwrap_or_default(),
        vec![
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ]
    );
    assert_eq!(r.audiences, Some(vec!["vault".to_string()]));
    // For an audience the token does not carry, or garbage: not authenticated.
    for (token, aud) in [
        (status.token.clone(), vec!["other"]),
        ("x.y.z".to_string(), vec![]),
    ] {
        let r = reviews
            .create(&Default::default(), &review(token, aud))
            .await
            .expect("token review")
            .status
            .expect("review status");
        assert_ne!(r.authenticated, Some(true), "{r:?}");
        assert_eq!(r.error.as_deref(), Some("invalid bearer token"));
    }
    // The token-file user.
    let r = reviews
        .create(
            &Default::default(),
            &review("s3cr3t-token-for-e2e".into(), vec![]),
        )
        .await
        .expect("token review")
        .status
        .expect("review status");
    let user = r.user.expect("user");
    assert_eq!(user.username.as_deref(), Some("jane"));
    assert_eq!(
        user.groups.unwrap_or_default(),
        vec!["dev", "ops", "system:authenticated"]
    );

    // No credentials at all: 401 Unauthorized (anonymous auth is off).
    let nobody = kube_client(&s.kubeconfig_with("nobody", "{}")).await;
    match kube::Api::<Namespace>::all(nobody)
        .list(&Default::default())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized")),
        other => panic!("want 401, got {other:?}"),
    }
}

#[tokio::test]
async fn failed_authentications_are_rate_limited() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path()).await;
    let client = kube_client(&s.token_kubeconfig("guess", "guess")).await;
    let api = kube::Api::<Namespace>::all(client);
    let mut codes = Vec::new();
    for _ in 0..12 {
        match api.list(&Default::default()).await {
            Err(kube::Error::Api(e)) => codes.push(e.code),
            other => panic!("want an API error, got {other:?}"),
        }
    }
    // The first failures are 401s; once the address's budget is spent,
    // 429 with Retry-After until the bucket refills.
    assert_eq!(&codes[..10], &[401; 10], "{codes:?}");
    assert_eq!(codes[11], 429, "{codes:?}");
}

fn fingerprints(data: &Path) -> Vec<String> {
    ["ca.crt", "apiserver.crt", "admin.crt", "sa.key"]
        .iter()
        .map(|f| std::fs::read_to_string(data.join("pki").join(f)).expect(f))
        .collect()
}

#[tokio::test]
async fn restart_reuses_the_generated_certificates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = e2e::unique_prefix();
    let mut first = start_with_prefix(dir.path(), &prefix).await;
    let before = fingerprints(&first.data);
    let kubeconfig = first.admin_kubeconfig();
    first.kubectl_ok(&kubeconfig, &["create", "serviceaccount", "keeper"]);
    let token = first.kubectl_ok(&kubeconfig, &["create", "token", "keeper"]);
    // A watch open over TLS when SIGTERM comes ends cleanly, and the
    // process exits 0: graceful shutdown covers the secure port too.
    let client = kube_client(&kubeconfig).await;
    let cms = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::default_namespaced(client);
    let mut watch = cms
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .expect("watch over TLS")
        .boxed();
    assert!(first.server.stop().is_some_and(|s| s.success()));
    let drained = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(event) = watch.next().await {
            if let Err(e) = event {
                panic!("watch ended with an error: {e}");
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the watch did not end after shutdown");
    drop(first.server);

    let second = start_with_prefix(dir.path(), &prefix).await;
    assert_eq!(
        fingerprints(&second.data),
        before,
        "certificates were remade"
    );
    // The rewritten kubeconfig (new port, same CA and client certificate)
    // works, and so does a token signed before the restart.
    second.kubectl_ok(&second.admin_kubeconfig(), &["get", "ns"]);
    let bot = second.token_kubeconfig("keeper", token.trim());
    second.kubectl_ok(&bot, &["get", "cm"]);
}

#[tokio::test]
async fn secure_port_off_writes_only_the_token_key() {
    // (The plain port refusing non-loopback addresses is in cli.rs.)
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let etcd = TestEtcd::shared().await;
    let server = Server::start_on(
        &etcd.endpoint(),
        &[
            "--secure-listen=off",
            &format!("--data-dir={}", data.display()),
        ],
    )
    .await;
    // No CA, serving certificate or admin kubeconfig; only the
    // service-account signing key, which tokens need on any port, and the
    // aggregator's front-proxy CA and client certificate (requests to
    // extension servers come through either port).
    let mut made: Vec<String> = std::fs::read_dir(data.join("pki"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    made.sort();
    assert_eq!(
        made,
        [
            "front-proxy-ca.crt",
            "front-proxy-ca.key",
            "front-proxy-client.crt",
            "front-proxy-client.key",
            "sa.key"
        ],
        "{made:?}"
    );
    assert!(!data.join("admin.kubeconfig").exists());
    assert!(server
        .kubectl_ok(&["get", "ns", "-o", "name"])
        .contains("namespace/default"));
}

/// `kubectl get -w` over TLS (kubectl negotiates HTTP/2 by ALPN): the
/// initial state, then a change made after it, arrive as they happen.
#[tokio::test]
async fn kubectl_watch_over_tls() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path()).await;
    let admin = s.admin_kubeconfig();
    s.kubectl_ok(&admin, &["create", "configmap", "before"]);
    let kc = admin.display().to_string();
    let mut child = s
        .server
        .kubectl_cmd(&[
            "--kubeconfig",
            &kc,
            "get",
            "configmaps",
            "-w",
            "--output-watch-events",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait_for = |name: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.split_whitespace().take(2).eq(["ADDED", name]) => return,
                Ok(_) => {}
                Err(e) => panic!("no ADDED {name} from kubectl get -w: {e}"),
            }
        }
    };
    wait_for("before");
    s.kubectl_ok(&admin, &["create", "configmap", "after"]);
    wait_for("after");
    let _ = child.kill();
    let _ = child.wait();
}

/// kube's bootstrap `system:monitoring` ClusterRole, bound to the group of
/// that name: a scraper in the group reads /metrics, /metrics/slis and
/// every health check, and nothing else.
#[tokio::test]
async fn the_monitoring_group_reads_metrics_and_health_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start_with(
        dir.path(),
        &e2e::unique_prefix(),
        &["--authorization-mode=RBAC"],
    )
    .await;
    let admin = s.admin_kubeconfig();
    let rules = s.kubectl_ok(
        &admin,
        &[
            "get",
            "clusterrole",
            "system:monitoring",
            "-o",
            "jsonpath={.rules[0].nonResourceURLs}",
        ],
    );
    assert_eq!(
        rules,
        r#"["/healthz","/healthz/*","/livez","/livez/*","/metrics","/metrics/slis","/readyz","/readyz/*"]"#
    );
    let subjects = s.kubectl_ok(
        &admin,
        &[
            "get",
            "clusterrolebinding",
            "system:monitoring",
            "-o",
            "jsonpath={.subjects[*].kind}/{.subjects[*].name}",
        ],
    );
    assert_eq!(subjects, "Group/system:monitoring");
    let scraper = ["--as=prometheus", "--as-group=system:monitoring"];
    for path in ["/metrics", "/metrics/slis", "/readyz/etcd", "/livez/ping"] {
        let out = s.kubectl_ok(&admin, &[&scraper[..], &["get", "--raw", path]].concat());
        assert!(!out.is_empty(), "{path}");
    }
    let err = s.kubectl_err(&admin, &[&scraper[..], &["get", "configmaps"]].concat());
    assert!(
        err.contains(r#"User "prometheus" cannot list resource "configmaps""#),
        "{err}"
    );
    // Without the group, /metrics is forbidden.
    let err = s.kubectl_err(&admin, &["--as=prometheus", "get", "--raw", "/metrics"]);
    assert!(
        err.contains(r#"User "prometheus" cannot get path "/metrics""#),
        "{err}"
    );
}

/// `--anonymous-auth=true` (what the deployments' HTTPS probes rely on):
/// health, version and discovery reach the authorizer without credentials,
/// nothing else does. With the default RBAC policy, as with
/// kube-apiserver's, the anonymous user may read health and version
/// (system:public-info-viewer) but not discovery (system:discovery is
/// bound to authenticated users only).
#[tokio::test]
async fn anonymous_requests_reach_health_version_and_discovery_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start_with(
        dir.path(),
        &e2e::unique_prefix(),
        &["--anonymous-auth=true", "--authorization-mode=RBAC"],
    )
    .await;
    let nobody = kube_client(&s.kubeconfig_with("nobody", "{}")).await;
    let version = nobody
        .apiserver_version()
        .await
        .expect("/version anonymously");
    assert_eq!(version.major, "1");
    for path in ["/readyz", "/livez", "/healthz"] {
        let req = hyper::Request::get(path).body(Vec::new()).unwrap();
        let text = nobody.request_text(req).await;
        assert!(text.is_ok(), "{path}: {text:?}");
    }
    for path in ["/api", "/apis"] {
        let req = hyper::Request::get(path).body(Vec::new()).unwrap();
        match nobody.request_text(req).await {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 403, "{path}");
                assert_eq!(
                    e.message,
                    format!("forbidden: User \"system:anonymous\" cannot get path \"{path}\"")
                );
            }
            other => panic!("{path}: want 403, got {other:?}"),
        }
    }
    match kube::Api::<Namespace>::all(nobody)
        .list(&Default::default())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 401),
        other => panic!("want 401, got {other:?}"),
    }
}

/// RBAC on the secure port, the default mode: a token user is refused with
/// kube's wording until the admin (client certificate, system:masters)
/// binds the `view` role to it, and refused again once the binding is gone.
#[tokio::test]
async fn rbac_follows_bindings_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start_with(
        dir.path(),
        &e2e::unique_prefix(),
        &["--authorization-mode=RBAC"],
    )
    .await;
    let admin = s.admin_kubeconfig();
    let jane = s.token_kubeconfig("jane", "s3cr3t-token-for-e2e");
    s.kubectl_ok(
        &admin,
        &["create", "configmap", "rbac-cm", "--from-literal=k=v"],
    );
    let err = s.kubectl_err(&jane, &["get", "cm", "rbac-cm"]);
    assert!(
        err.contains("configmaps \"rbac-cm\" is forbidden: User \"jane\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    // `can-i` answers "no" with exit code 1.
    let out = s.kubectl(&jane, &["auth", "can-i", "get", "configmaps"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    s.kubectl_ok(
        &admin,
        &[
            "create",
            "rolebinding",
            "jane-view",
            "--clusterrole=view",
            "--user=jane",
        ],
    );
    e2e::eventually(
        "the binding to take effect",
        std::time::Duration::from_secs(20),
        || {
            let out = s.kubectl(&jane, &["get", "cm", "rbac-cm", "-o", "jsonpath={.data.k}"]);
            (out.status.success() && out.stdout == b"v").then_some(())
        },
    )
    .await;
    // view does not allow writes, and group "dev" (from the token file)
    // was never bound.
    let err = s.kubectl_err(&jane, &["delete", "cm", "rbac-cm"]);
    assert!(
        err.contains("cannot delete resource \"configmaps\""),
        "{err}"
    );
    s.kubectl_ok(&admin, &["delete", "rolebinding", "jane-view"]);
    e2e::eventually(
        "the binding's removal to take effect",
        std::time::Duration::from_secs(20),
        || {
            let out = s.kubectl(&jane, &["get", "cm", "rbac-cm"]);
            (!out.status.success()).then_some(())
        },
    )
    .await;
}

/// kube accepts request headers up to 1 MiB: a 900 KiB bearer token is
/// read (and refused as a credential), a 2 MiB one is not read at all.
#[tokio::test]
async fn headers_up_to_1_mib_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = start(dir.path()).await;
    let big = s.token_kubeconfig("big", &"a".repeat(900 * 1024));
    let err = s.kubectl_err(&big, &["get", "namespaces"]);
    assert!(err.contains(LOGIN), "{err}");
    let huge = s.token_kubeconfig("huge", &"a".repeat(2 * 1024 * 1024));
    let err = s.kubectl_err(&huge, &["get", "namespaces"]);
    assert!(!err.contains(LOGIN), "{err}");
    eprintln!("2 MiB token: {err}");
}
