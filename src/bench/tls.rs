//! The certificates of the bench's webhook receiver: a private CA and a leaf
//! for 127.0.0.1 and localhost signed by it, kept as PEM files in one
//! folder. The server under test trusts the CA through TERN_WEBHOOK_CA_FILE,
//! as it would a merchant's private CA, so the bench measures the same TLS
//! path as production. The files are kept across runs so a server started
//! once keeps trusting the receiver of every later run.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// The names the leaf is valid for: the receiver listens on loopback.
const LEAF_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// The three PEM files of a folder.
#[derive(Clone, Debug)]
pub struct Files {
    /// The CA the server must trust.
    pub ca: PathBuf,
    /// The receiver's certificate.
    pub cert: PathBuf,
    /// The receiver's private key.
    pub key: PathBuf,
}

impl Files {
    pub fn in_dir(dir: &Path) -> Files {
        Files {
            ca: dir.join("ca.pem"),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        }
    }

    fn all_exist(&self) -> bool {
        [&self.ca, &self.cert, &self.key]
            .iter()
            .all(|path| path.is_file())
    }

    /// The server's environment that makes it deliver to the receiver.
    pub fn server_env(&self) -> String {
        // Absolute, so the line works from whichever folder the server runs.
        let ca = std::path::absolute(&self.ca).unwrap_or_else(|_| self.ca.clone());
        format!(
            "TERN_WEBHOOK_CA_FILE={} TERN_WEBHOOK_ALLOW_PRIVATE=true",
            ca.display()
        )
    }
}

/// The folder's files, made first unless all three are there; answers
/// whether they were made. A partial set is made anew: the CA's key is not
/// kept, so a missing leaf could not be signed by the existing CA.
pub fn ensure(dir: &Path) -> anyhow::Result<(Files, bool)> {
    let files = Files::in_dir(dir);
    if files.all_exist() {
        return Ok((files, false));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let (ca, cert, key) = generate()?;
    write(&files.ca, &ca, false)?;
    write(&files.cert, &cert, false)?;
    write(&files.key, &key, true)?;
    Ok((files, true))
}

/// A CA, and a leaf for [`LEAF_NAMES`] signed by it with its key: PEMs.
fn generate() -> anyhow::Result<(String, String, String)> {
    let ca_key = KeyPair::generate().context("making the CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Tern bench webhook CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).context("signing the CA")?;

    let leaf_key = KeyPair::generate().context("making the receiver's key")?;
    let names: Vec<String> = LEAF_NAMES.iter().map(|name| (*name).to_owned()).collect();
    // rcgen makes an IP address SAN of a name that parses as one.
    let mut leaf_params = CertificateParams::new(names)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "Tern bench webhook receiver");
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf = leaf_params
        .signed_by(&leaf_key, &ca)
        .context("signing the receiver's certificate")?;
    Ok((ca.pem(), leaf.pem(), leaf_key.serialize_pem()))
}

fn write(path: &Path, pem: &str, secret: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut file, pem.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_the_files_once_and_keeps_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (files, made) = ensure(dir.path()).expect("made");
        assert!(made);
        let ca = std::fs::read_to_string(&files.ca).expect("ca.pem");
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let key = std::fs::read_to_string(&files.key).expect("key.pem");
        assert!(key.contains("PRIVATE KEY"), "{key}");

        let (again, made) = ensure(dir.path()).expect("kept");
        assert!(!made);
        assert_eq!(std::fs::read_to_string(&again.ca).expect("ca.pem"), ca);
        assert!(again
            .server_env()
            .contains("ca.pem TERN_WEBHOOK_ALLOW_PRIVATE=true"));
    }
}
