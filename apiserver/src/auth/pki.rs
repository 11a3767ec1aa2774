//! The certificates the server makes for itself when none are given: a
//! private CA, a serving certificate for the server's names, a client
//! certificate for `kubernetes-admin` (group `system:masters`) and the
//! `admin.kubeconfig` that uses it. Made once under the data directory and
//! reused on later starts (the serving certificate is remade, by the same
//! CA, when the wanted names change).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};

const CA_CN: &str = "apiserver-ca";
pub const ADMIN_USER: &str = "kubernetes-admin";

/// The PEM files of the generated PKI.
#[derive(Debug, Clone)]
pub struct Generated {
    pub dir: PathBuf,
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The CA certificate (PEM) the certificates were signed with.
    pub ca_pem: String,
}

fn ca_params() -> Result<CertificateParams, String> {
    ca_params_named(CA_CN)
}

fn ca_params_named(cn: &str) -> Result<CertificateParams, String> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time_now();
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(3650);
    Ok(p)
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn write_private(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn write_public(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Whether the PEM certificate at `path` exists and stays valid for more
/// than 30 days (leaf certificates are remade, by the same CA, before they
/// expire; a restart within the last 30 days renews them).
fn fresh(path: &Path) -> bool {
    use rustls::pki_types::pem::PemObject;
    let Some(pem) = read(path) else {
        return false;
    };
    let Ok(der) = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()) else {
        return false;
    };
    let renew_at = time_now().unix_timestamp() + 30 * 24 * 3600;
    super::der::certificate_not_after(&der).is_some_and(|t| t > renew_at)
}

/// Loads or makes the CA (`pki/ca.crt`, `pki/ca.key`).
fn ensure_ca(dir: &Path) -> Result<(String, KeyPair), String> {
    ensure_named_ca(dir, "ca", CA_CN)
}

/// Loads or makes a CA (`pki/<stem>.crt`, `pki/<stem>.key`) named `cn`.
fn ensure_named_ca(dir: &Path, stem: &str, cn: &str) -> Result<(String, KeyPair), String> {
    let (crt, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    if let (Some(c), Some(k)) = (read(&crt), read(&key)) {
        let key = KeyPair::from_pem(&k).map_err(|e| format!("{}: {e}", key.display()))?;
        return Ok((c, key));
    }
    let key = KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = ca_params_named(cn)?
        .self_signed(&key)
        .map_err(|e| e.to_string())?;
    write_private(&dir.join(format!("{stem}.key")), &key.serialize_pem())?;
    write_public(&crt, &cert.pem())?;
    tracing::info!(path = %crt.display(), "generated a private CA");
    Ok((cert.pem(), key))
}

fn leaf_params(cn: &str, orgs: &[&str], sans: &[String]) -> Result<CertificateParams, String> {
    let mut p = CertificateParams::new(sans.to_vec()).map_err(|e| e.to_string())?;
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.use_authority_key_identifier_extension = true;
    let now = time_now();
    p.not_before = now - time::Duration::hours(1);
    p.not_after = now + time::Duration::days(365);
    Ok(p)
}

/// Holds `data_dir/pki.lock` while the PKI is made, so that replicas
/// sharing a data directory (deploy/compose.yaml) make one CA between them.
/// A lock older than a minute is a crashed holder's and is taken over.
struct PkiLock(PathBuf);

impl PkiLock {
    fn acquire(data_dir: &Path) -> Result<PkiLock, String> {
        let path = data_dir.join("pki.lock");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(PkiLock(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > std::time::Duration::from_secs(60));
                    if stale {
                        let _ = std::fs::remove_file(&path);
                        continue;
                    }
                    if std::time::Instant::now() > deadline {
                        return Err(format!("{} is held by another process", path.display()));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
    }
}

impl Drop for PkiLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Loads or makes the CA, the serving certificate for `sans` and the admin
/// client certificate under `data_dir/pki`.
pub fn ensure(data_dir: &Path, sans: &[String]) -> Result<Generated, String> {
    let dir = data_dir.join("pki");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _lock = PkiLock::acquire(data_dir)?;
    let (ca_pem, ca_key) = ensure_ca(&dir)?;
    let issuer = Issuer::new(ca_params()?, &ca_key);

    let out = Generated {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        dir: dir.clone(),
        ca_pem,
    };
    let names_file = dir.join("apiserver.names");
    let wanted = sans.join("\n");
    let current = read(&out.serving_key).is_some() && fresh(&out.serving_cert);
    if !current || read(&names_file).as_deref() != Some(wanted.as_str()) {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut p = leaf_params("kube-apiserver", &[], sans)?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        write_private(&out.serving_key, &key.serialize_pem())?;
        write_public(&out.serving_cert, &cert.pem())?;
        write_public(&names_file, &wanted)?;
        tracing::info!(names = ?sans, "generated the serving certificate");
    }
    let (admin_crt, admin_key) = (dir.join("admin.crt"), dir.join("admin.key"));
    if !fresh(&admin_crt) || read(&admin_key).is_none() {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut p = leaf_params(ADMIN_USER, &[apimachinery::auth::SYSTEM_MASTERS], &[])?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        write_private(&admin_key, &key.serialize_pem())?;
        write_public(&admin_crt, &cert.pem())?;
    }
    Ok(out)
}

/// Writes `data_dir/admin.kubeconfig`: the admin client certificate, the
/// CA, and `server`.
pub fn write_admin_kubeconfig(
    data_dir: &Path,
    ca_pem: &str,
    server: &str,
) -> Result<PathBuf, String> {
    let dir = data_dir.join("pki");
    let crt = read(&dir.join("admin.crt")).ok_or("admin.crt is missing")?;
    let key = read(&dir.join("admin.key")).ok_or("admin.key is missing")?;
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: apiserver\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\ncontexts:\n- name: {ADMIN_USER}@apiserver\n  context:\n    cluster: apiserver\n    user: {ADMIN_USER}\ncurrent-context: {ADMIN_USER}@apiserver\nusers:\n- name: {ADMIN_USER}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\npreferences: {{}}\n",
        b64(ca_pem),
        b64(&crt),
        b64(&key),
    );
    let path = data_dir.join("admin.kubeconfig");
    write_private(&path, &text)?;
    Ok(path)
}

/// Loads or makes the service-account signing key (`data_dir/pki/sa.key`).
pub fn ensure_sa_key(data_dir: &Path) -> Result<PathBuf, String> {
    let dir = data_dir.join("pki");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("sa.key");
    let _lock = PkiLock::acquire(data_dir)?;
    if read(&path).is_none() {
        write_private(&path, &super::jwt::SigningKey::generate_pem()?)?;
        tracing::info!(path = %path.display(), "generated the service-account signing key");
    }
    Ok(path)
}

/// The CN of the front-proxy client certificate the server makes for
/// itself (kube's conventional `--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// The front-proxy PKI the aggregator proxies with, PEM.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// The CA extension servers verify the client certificate against
    /// (`requestheader-client-ca-file`); `None` when the certificate was
    /// given by flags without it.
    pub ca_pem: Option<String>,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Loads or makes a separate front-proxy CA (`pki/front-proxy-ca.*`) and
/// its client certificate for `front-proxy-client`
/// (`pki/front-proxy-client.*`), as kubeadm lays them out.
pub fn ensure_front_proxy(data_dir: &Path) -> Result<FrontProxy, String> {
    let dir = data_dir.join("pki");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _lock = PkiLock::acquire(data_dir)?;
    let (ca_pem, ca_key) = ensure_named_ca(&dir, "front-proxy-ca", "front-proxy-ca")?;
    let issuer = Issuer::new(ca_params_named("front-proxy-ca")?, &ca_key);
    let (crt, key) = (
        dir.join("front-proxy-client.crt"),
        dir.join("front-proxy-client.key"),
    );
    if !fresh(&crt) || read(&key).is_none() {
        let k = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut p = leaf_params(FRONT_PROXY_CLIENT, &[], &[])?;
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&k, &issuer).map_err(|e| e.to_string())?;
        write_private(&key, &k.serialize_pem())?;
        write_public(&crt, &cert.pem())?;
    }
    Ok(FrontProxy {
        ca_pem: Some(ca_pem),
        cert_pem: read(&crt).ok_or("front-proxy-client.crt is missing")?,
        key_pem: read(&key).ok_or("front-proxy-client.key is missing")?,
    })
}

/// SHA-256 of a PEM certificate's DER, hex (for logs and tests).
pub fn fingerprint(pem: &str) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).ok()?;
    let d = ring::digest::digest(&ring::digest::SHA256, der.as_ref());
    Some(d.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(g: &Generated) -> (String, String) {
        (
            std::fs::read_to_string(&g.ca_cert).unwrap(),
            std::fs::read_to_string(&g.serving_cert).unwrap(),
        )
    }

    #[test]
    fn reuses_renews_and_follows_names() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let g = ensure(dir.path(), &names).unwrap();
        let (ca, serving) = read_all(&g);
        // Reused as they are.
        assert_eq!(
            read_all(&ensure(dir.path(), &names).unwrap()),
            (ca.clone(), serving.clone())
        );
        // New names: a new serving certificate from the same CA.
        let more = vec!["localhost".to_string(), "api.example".to_string()];
        let (ca2, serving2) = read_all(&ensure(dir.path(), &more).unwrap());
        assert_eq!(ca2, ca);
        assert_ne!(serving2, serving);
        // A serving certificate about to expire is remade.
        let key = KeyPair::generate().unwrap();
        let mut p = leaf_params("kube-apiserver", &[], &more).unwrap();
        p.not_after = time_now() + time::Duration::days(2);
        std::fs::write(&g.serving_cert, p.self_signed(&key).unwrap().pem()).unwrap();
        let (_, renewed) = read_all(&ensure(dir.path(), &more).unwrap());
        assert!(fresh(&g.serving_cert));
        assert_ne!(renewed, serving2);
        assert!(
            !dir.path().join("pki.lock").exists(),
            "the lock is released"
        );
    }

    #[test]
    fn replicas_sharing_a_directory_make_one_ca() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_string()];
        let start = std::sync::Barrier::new(8);
        let cas: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let g = ensure(dir.path(), &names).unwrap();
                        ensure_sa_key(dir.path()).unwrap();
                        g.ca_pem
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(cas.iter().all(|c| *c == cas[0]), "different CAs were made");
    }
}
