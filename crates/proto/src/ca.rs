//! The cluster's private certificate authority (rcgen), and certificates it issues.
//!
//! The coordinator creates the CA on first start in its state directory:
//!
//! ```text
//! <state-dir>/ca.pem   the CA certificate (public; every process needs it)
//! <state-dir>/ca.key   the CA private key (mode 0600; only `cert issue` and `up` read it)
//! ```
//!
//! [`Ca::issue`] makes a key and a certificate for one role and name. The certificate carries
//! the identity as the SAN URI `shardsched://<role>/<name>` (the only thing [`peer_of`]
//! reads), the subject `CN=<name>, OU=<role>` for people, and for serving roles (coordinator,
//! shard) the DNS name `<name>.<role>.shardsched.internal` and server-auth usage. User and
//! admin certificates are client-auth only, so they cannot serve. Keys are ECDSA P-256.
//!
//! [`peer_of`]: crate::identity::peer_of

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::{IdentityError, TlsError};
use crate::identity::{Peer, Role, server_name};
use crate::limits::{CA_VALIDITY_DAYS, CERT_BACKDATE_DAYS, CERT_VALIDITY_DAYS};
use crate::tls::Credentials;

/// File name of the CA certificate in a state directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// File name of the CA private key in a state directory.
pub const CA_KEY_FILE: &str = "ca.key";
/// Permission bits of every private key file written here.
pub const KEY_FILE_MODE: u32 = 0o600;

/// A loaded CA: its certificate and the means to sign with its key.
pub struct Ca {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A freshly issued certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct IssuedCert {
    /// The identity it carries.
    pub peer: Peer,
    /// The certificate.
    pub cert_pem: String,
    /// Its private key (PKCS#8). Write it with [`write_private`].
    pub key_pem: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A secret derived from the CA key (never the key itself), stable for the CA's life:
    /// the coordinator's QUIC stateless-reset secret
    /// ([`server_endpoint_with_reset_secret`](crate::tls::server_endpoint_with_reset_secret)).
    pub fn derived_secret(&self, label: &str) -> Vec<u8> {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        context.update(b"shardsched ca-derived secret v1\0");
        context.update(label.as_bytes());
        context.update(b"\0");
        context.update(&self.issuer.key().serialize_der());
        context.finish().as_ref().to_vec()
    }

    /// Creates a CA in `dir` (made, mode 0700, if missing). Refuses if `dir` already holds a
    /// CA key: a CA is never silently replaced.
    pub fn create(dir: &Path) -> Result<Ca, TlsError> {
        let key_path = dir.join(CA_KEY_FILE);
        if key_path.exists() {
            return Err(TlsError::CaExists(dir.to_owned()));
        }
        create_private_dir(dir)?;
        let key = KeyPair::generate().map_err(generate_error)?;
        // The public key's first bytes tell two clusters' CAs apart by name as well as by key.
        let id: String = key
            .public_key_raw()
            .iter()
            .skip(1)
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("shardsched cluster CA {id}"));
        params
            .distinguished_name
            .push(DnType::OrganizationName, "shardsched");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, CA_VALIDITY_DAYS);
        let cert = params.self_signed(&key).map_err(generate_error)?;
        write_private(&key_path, &key.serialize_pem())?;
        write_public(&dir.join(CA_CERT_FILE), &cert.pem())?;
        Ok(Ca {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads the CA from `dir`. Refuses a key file readable by group or others, and a key
    /// that does not belong to the certificate.
    pub fn load(dir: &Path) -> Result<Ca, TlsError> {
        let key_path = dir.join(CA_KEY_FILE);
        check_private(&key_path)?;
        let cert_pem = read(&dir.join(CA_CERT_FILE))?;
        let key = KeyPair::from_pem(&read(&key_path)?).map_err(|e| TlsError::Pem {
            what: "CA private key",
            detail: e.to_string(),
        })?;
        let public = ca_public_key(&cert_pem)?;
        if public != key.public_key_raw() {
            return Err(TlsError::Pem {
                what: "CA private key",
                detail: format!("{} does not belong to {CA_CERT_FILE}", key_path.display()),
            });
        }
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, key).map_err(|e| TlsError::Pem {
            what: "CA certificate",
            detail: e.to_string(),
        })?;
        Ok(Ca { cert_pem, issuer })
    }

    /// Loads the CA from `dir`, creating it first if `dir` has none. Returns whether it was
    /// created.
    pub fn load_or_create(dir: &Path) -> Result<(Ca, bool), TlsError> {
        if dir.join(CA_KEY_FILE).exists() {
            Ok((Ca::load(dir)?, false))
        } else {
            Ok((Ca::create(dir)?, true))
        }
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues a key and certificate for `role` and `name`, valid for
    /// [`CERT_VALIDITY_DAYS`].
    pub fn issue(&self, role: Role, name: &str) -> Result<IssuedCert, TlsError> {
        let peer = Peer::new(role, name)?;
        let key = KeyPair::generate().map_err(generate_error)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, role.as_str());
        let uri = peer
            .uri()
            .try_into()
            .map_err(|_| IdentityError::BadUri(peer.uri()))?;
        params.subject_alt_names = vec![SanType::URI(uri)];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if role.serves() {
            let dns = server_name(role, name);
            let dns = dns
                .clone()
                .try_into()
                .map_err(|_| IdentityError::BadName(dns))?;
            params.subject_alt_names.push(SanType::DnsName(dns));
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, CERT_VALIDITY_DAYS);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(generate_error)?;
        Ok(IssuedCert {
            peer,
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a certificate and returns it as ready-to-use [`Credentials`].
    pub fn credentials(&self, role: Role, name: &str) -> Result<Credentials, TlsError> {
        let issued = self.issue(role, name)?;
        Credentials::from_pem(&self.cert_pem, &issued.cert_pem, &issued.key_pem)
    }
}

impl IssuedCert {
    /// Writes `<dir>/<stem>.pem` and `<dir>/<stem>.key` (mode 0600); returns both paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), TlsError> {
        let cert_path = dir.join(format!("{stem}.pem"));
        let key_path = dir.join(format!("{stem}.key"));
        write_public(&cert_path, &self.cert_pem)?;
        write_private(&key_path, &self.key_pem)?;
        Ok((cert_path, key_path))
    }
}

/// Writes a private key file with mode 0600, replacing any previous file (the new file is
/// created with the right mode, never chmod-ed after the key is in it).
pub fn write_private(path: &Path, pem: &str) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        path: path.to_owned(),
        source,
    };
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, KEY_FILE_MODE);
    let mut file = options.open(path).map_err(io)?;
    file.write_all(pem.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)
}

fn write_public(path: &Path, pem: &str) -> Result<(), TlsError> {
    fs::write(path, pem).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

fn read(path: &Path) -> Result<String, TlsError> {
    fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })
}

fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })
}

fn check_private(path: &Path) -> Result<(), TlsError> {
    let meta = fs::metadata(path).map_err(|source| TlsError::Io {
        path: path.to_owned(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TlsError::KeyPermissions {
                path: path.to_owned(),
                mode,
            });
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    Ok(())
}

fn ca_public_key(cert_pem: &str) -> Result<Vec<u8>, TlsError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    let bad = |detail: String| TlsError::Pem {
        what: "CA certificate",
        detail,
    };
    let der =
        CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| bad(e.to_string()))?;
    Ok(cert.public_key().subject_public_key.data.to_vec())
}

fn generate_error(e: rcgen::Error) -> TlsError {
    TlsError::Generate(e.to_string())
}

/// Sets `not_before` to today minus [`CERT_BACKDATE_DAYS`] and `not_after` `days` later.
fn set_validity(params: &mut CertificateParams, days: i64) {
    let today = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| (d.as_secs() / 86_400) as i64)
        .unwrap_or(0);
    let start = today - CERT_BACKDATE_DAYS;
    let date = |days: i64| {
        let (y, m, d) = civil_from_days(days);
        rcgen::date_time_ymd(y, m, d)
    };
    params.not_before = date(start);
    params.not_after = date(start + days);
}

/// The proleptic Gregorian date of a day number (days since 1970-01-01), after Howard
/// Hinnant's `civil_from_days`.
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year as i32, month as u8, day as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_089), (2025, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
