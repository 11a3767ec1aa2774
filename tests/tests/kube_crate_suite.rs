//! The kube crate's own cluster tests, run the way the kube crate runs
//! them: its `#[ignore]`d tests ("needs cluster") from the published
//! source of the version this workspace uses, built with `cargo test` and
//! run with `--ignored`, `KUBECONFIG` pointing at a fresh server.
//!
//! The sources are copied out of cargo's registry (they are the crates
//! this workspace already downloaded) into `target/kube-crate-suite/`.
//! Two changes are made to the copy's manifest: the published one asks
//! for any `kube >= 1` as a dev-dependency, which resolves to a kube built
//! on another k8s-openapi than the crate's own, so it is pinned to the same
//! version (kube's own workspace builds them together); and an empty
//! `[workspace]` keeps it out of this workspace.
//!
//! Only tests that need no kubelet are run (a pod that must start, exec
//! into a container, read logs): this server has none. `fetch_fails`
//! checks the column of `kind` in a Service's bytes: it passes because
//! objects are stored in kube's field order (`kind` first).

use e2e::Server;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tests of kube-client this server passes, by path.
const KUBE_CLIENT: &[&str] = &[
    "test::csr_can_be_approved",
    "test::can_operate_on_ephemeral_containers",
    "test::can_operate_on_pod_metadata",
    "api::util::test::create_token_request",
    "api::util::test::node_cordon_and_uncordon_works",
    "api::entry::tests::entry_create_missing_object",
    "api::entry::tests::entry_update_existing_object",
    "api::entry::tests::entry_create_dry_run",
    "client::client_ext::test::client_ext_list_get_pods_svcs",
    "client::client_ext::test::client_ext_fetch_ref_pods_svcs",
    "client::client_ext::test::fetch_fails",
];

/// The tests of kube-runtime this server passes: the event recorder.
const KUBE_RUNTIME: &[&str] = &[
    "events::test::event_recorder_attaches_events",
    "events::test::event_recorder_attaches_events_without_namespace",
    "events::test::event_recorder_cache_retain",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The version of `name` in the workspace's Cargo.lock.
fn locked_version(name: &str) -> String {
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("Cargo.lock");
    let needle = format!("name = \"{name}\"\nversion = \"");
    let at = lock.find(&needle).expect("crate in Cargo.lock") + needle.len();
    lock[at..].split('"').next().unwrap().to_string()
}

/// The crate's published source in cargo's registry.
fn registry_source(name: &str, version: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"));
    let dir = format!("{name}-{version}");
    std::fs::read_dir(home.join("registry/src"))
        .expect("cargo registry sources")
        .filter_map(|e| e.ok())
        .map(|e| e.path().join(&dir))
        .find(|p| p.join("Cargo.toml").exists())
        .unwrap_or_else(|| panic!("{dir} is not in the cargo registry"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A copy of the crate's source with its dev-dependency on kube pinned to
/// `kube_version`.
fn prepared(name: &str, kube_version: &str, root: &Path) -> PathBuf {
    let version = locked_version(name);
    let dir = root.join(format!("{name}-{version}"));
    if !dir.join("Cargo.toml").exists() {
        copy_dir(&registry_source(name, &version), &dir);
        let _ = std::fs::remove_file(dir.join("Cargo.lock"));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let pinned = manifest.replace(
            "[dev-dependencies.kube]\nversion = \">=1\"",
            &format!("[dev-dependencies.kube]\nversion = \"={kube_version}\""),
        );
        assert_ne!(
            manifest, pinned,
            "{name}: no `kube >= 1` dev-dependency to pin"
        );
        // A workspace of its own: it sits under this one's target dir.
        std::fs::write(dir.join("Cargo.toml"), format!("{pinned}\n[workspace]\n")).unwrap();
    }
    dir
}

/// `cargo test --lib -- --ignored --exact <tests>` in `dir`.
fn run(dir: &Path, features: &str, tests: &[&str], kubeconfig: &Path, target: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(dir)
        .env("KUBECONFIG", kubeconfig)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .args(["test", "--lib", "--features", features, "--"])
        .args(["--ignored", "--exact", "--test-threads=1"])
        .args(tests)
        .output()
        .expect("cargo test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}:\n{stdout}\n{stderr}",
        dir.display()
    );
    let summary = format!("test result: ok. {} passed", tests.len());
    assert!(stdout.contains(&summary), "not all ran: {stdout}");
}

#[tokio::test]
async fn kube_crate_cluster_tests_pass() {
    let s = Server::start().await;
    let root = workspace().join("target/kube-crate-suite");
    let kube = locked_version("kube");
    let kubeconfig = s.home().join("kubeconfig");
    let target = root.join("target");
    let client = prepared("kube-client", &kube, &root);
    run(
        &client,
        "client,rustls-tls,ws,jsonpatch,unstable-client",
        KUBE_CLIENT,
        &kubeconfig,
        &target,
    );
    let runtime = prepared("kube-runtime", &kube, &root);
    run(&runtime, "", KUBE_RUNTIME, &kubeconfig, &target);
}
