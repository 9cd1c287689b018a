//! HTTPS: the certificate, key and optional client CA from PEM files, as a rustls server
//! configuration (TLS 1.2 and 1.3, aws-lc-rs, ALPN h2 and http/1.1) that is rebuilt when the
//! files change or on SIGHUP. New connections use the newest configuration; open connections
//! keep theirs, so a certificate rotation drops nobody. A file that does not load keeps the
//! previous configuration in force.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use super::file::{Stamp, stamp};

/// Why the TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file is missing, unreadable or holds nothing usable.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination (a key that does not match the certificate, ...).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Which name in a client certificate is the principal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[derive(clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum PrincipalFrom {
    /// The subject's common name.
    #[default]
    Cn,
    /// The first DNS name, email or URI of the subject alternative names.
    San,
}

/// The files and the configuration built from them.
pub struct TlsSource {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    require_client_cert: bool,
    current: RwLock<(TlsAcceptor, Vec<Stamp>)>,
}

impl std::fmt::Debug for TlsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSource")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("client_ca", &self.client_ca)
            .finish_non_exhaustive()
    }
}

impl TlsSource {
    /// Loads the files; with `client_ca`, client certificates signed by it are verified, and
    /// required when `require_client_cert`.
    ///
    /// # Errors
    /// Unreadable or unusable files.
    pub fn open(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        require_client_cert: bool,
    ) -> Result<Self, TlsError> {
        let source = Self {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            client_ca: client_ca.map(Path::to_path_buf),
            require_client_cert,
            current: RwLock::new((TlsAcceptor::from(Arc::new(placeholder()?)), Vec::new())),
        };
        source.reload()?;
        Ok(source)
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current.read().0.clone()
    }

    /// Rebuilds the configuration if a file changed; `true` when it did.
    ///
    /// # Errors
    /// The changed files do not load: the previous configuration stays.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        if self.stamps() == self.current.read().1 {
            return Ok(false);
        }
        self.reload()?;
        Ok(true)
    }

    fn stamps(&self) -> Vec<Stamp> {
        let mut stamps = vec![stamp(&self.cert), stamp(&self.key)];
        stamps.extend(self.client_ca.iter().map(|ca| stamp(ca)));
        stamps
    }

    fn reload(&self) -> Result<(), TlsError> {
        let stamps = self.stamps();
        let config = self.build()?;
        *self.current.write() = (TlsAcceptor::from(Arc::new(config)), stamps);
        Ok(())
    }

    fn build(&self) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let certs = read_certs(&self.cert)?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| pem(&self.key, e))?;
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certs(ca)? {
                    roots
                        .add(cert)
                        .map_err(|e| TlsError::Config(e.to_string()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if self.require_client_cert {
                    verifier
                } else {
                    verifier.allow_unauthenticated()
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| TlsError::Config(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: path.to_path_buf(),
            message: "no certificate in the file".into(),
        });
    }
    Ok(certs)
}

fn pem(path: &Path, error: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

/// A configuration that is replaced before any connection is accepted (`open` loads the real
/// one or fails).
fn placeholder() -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let resolver = Arc::new(rustls::server::ResolvesServerCertUsingSni::new());
    Ok(rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(resolver))
}

/// The principal named by a verified client certificate (DER).
pub fn principal_of(certificate: &[u8], from: PrincipalFrom) -> Option<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, parsed) = X509Certificate::from_der(certificate).ok()?;
    match from {
        PrincipalFrom::Cn => parsed
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string),
        PrincipalFrom::San => parsed
            .subject_alternative_name()
            .ok()
            .flatten()
            .and_then(|san| {
                san.value.general_names.iter().find_map(|name| match name {
                    GeneralName::DNSName(n) | GeneralName::RFC822Name(n) | GeneralName::URI(n) => {
                        Some((*n).to_string())
                    }
                    _ => None,
                })
            }),
    }
}
