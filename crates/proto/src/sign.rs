//! Jobspec signatures: what lets a node agent run a job as the user who submitted it, and
//! nothing else (Flux's IMP model).
//!
//! At submit, the client signs the exact jobspec text with the private key of its own
//! certificate ([`sign_jobspec`]); the shard keeps the signature with the job and relays it
//! in every launch. A node agent, which runs as root, checks it ([`verify_jobspec`]): the
//! certificate must chain to the cluster CA and be a user's or an admin's, and the signature
//! must verify under its key. The task then runs as the POSIX user the certificate names. A
//! compromised shard can relay only what users signed: it cannot run code as anyone.
//!
//! The signature is ECDSA P-256 with SHA-256 (ring), over
//! [`signed_bytes`](shardsched_wire::msg::agent::signed_bytes), which labels the text so
//! that the signature is good for nothing else. The chain is checked by rustls's webpki
//! client-certificate verifier, as the TLS handshake checks a client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey,
};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use shardsched_wire::msg::agent::{JobSignature, SignedJobspec, signed_bytes};

use crate::identity::{Peer, Role, peer_of_certificate};
use crate::tls::Credentials;

/// A jobspec could not be signed, or its signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The key is not an ECDSA P-256 PKCS#8 key, or signing failed.
    #[error("cannot sign the jobspec: {0}")]
    Sign(String),
    /// The certificate is not PEM, or does not parse.
    #[error("the jobspec's certificate is unreadable: {0}")]
    BadCertificate(String),
    /// The certificate does not chain to the cluster CA (or has expired, or is not for
    /// clients).
    #[error("the jobspec's certificate is not valid for this cluster: {0}")]
    Untrusted(String),
    /// The certificate is not a user's or an admin's.
    #[error("the jobspec is signed by {0}, not by a user")]
    NotAUser(Peer),
    /// The signature does not verify under the certificate's key.
    #[error("the jobspec's signature does not verify (signed by someone else, or altered)")]
    BadSignature,
}

/// The signing half of a user's or an admin's credentials: its key pair, parsed once, and
/// its certificate. A client makes one and signs every jobspec it submits.
#[derive(Debug)]
pub struct JobSigner {
    pair: EcdsaKeyPair,
    cert_pem: String,
    rng: SystemRandom,
}

impl JobSigner {
    /// The signer of `creds` (its key must be an ECDSA P-256 PKCS#8 key, as the cluster
    /// CA issues them).
    pub fn new(creds: &Credentials) -> Result<JobSigner, SignError> {
        let (_, _, key) = creds.parts();
        let PrivateKeyDer::Pkcs8(pkcs8) = key else {
            return Err(SignError::Sign("the key is not PKCS#8".to_owned()));
        };
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            pkcs8.secret_pkcs8_der(),
            &rng,
        )
        .map_err(|e| SignError::Sign(e.to_string()))?;
        Ok(JobSigner {
            pair,
            cert_pem: creds.cert_pem().to_owned(),
            rng,
        })
    }

    /// The signature of `jobspec_json`.
    pub fn sign(&self, jobspec_json: &str) -> Result<JobSignature, SignError> {
        let signature = self
            .pair
            .sign(&self.rng, &signed_bytes(jobspec_json))
            .map_err(|e| SignError::Sign(e.to_string()))?;
        Ok(JobSignature {
            cert_pem: self.cert_pem.clone(),
            signature: signature.as_ref().to_vec(),
        })
    }
}

/// Signs `jobspec_json` with the private key of `creds` (a user's or an admin's).
pub fn sign_jobspec(creds: &Credentials, jobspec_json: &str) -> Result<SignedJobspec, SignError> {
    let signature = JobSigner::new(creds)?.sign(jobspec_json)?;
    Ok(SignedJobspec::new(jobspec_json, &signature))
}

/// Checks a signed jobspec against the cluster CA of `creds`; returns the signer (a user or
/// an admin), whose name is the POSIX user the job may run as. (A process that checks many
/// keeps a [`JobspecVerifier`].)
pub fn verify_jobspec(creds: &Credentials, signed: &SignedJobspec) -> Result<Peer, SignError> {
    JobspecVerifier::new(creds)?.verify(signed)
}

/// Most user certificates a [`JobspecVerifier`] remembers as checked; past it, it forgets
/// them all and checks each again at its next use.
pub const CHECKED_CERTS_MAX: usize = 1024;

/// Checks signed jobspecs against the cluster CA, as [`verify_jobspec`] does, for a process
/// that checks one per launch (a node agent): the CA's verifier is built once, and a
/// certificate that chained to the CA and is a user's or an admin's is remembered, until
/// it expires, so that a launch then costs only its signature's check. (Only what passed is
/// remembered; the chain's check depends on nothing but the certificate, the CA and the
/// time, which is checked again at each use.)
pub struct JobspecVerifier {
    verifier: Arc<dyn ClientCertVerifier>,
    /// By the certificate's PEM text, as the launch carries it.
    checked: Mutex<HashMap<String, Arc<CheckedCert>>>,
}

/// A certificate that chained to the CA: its signer, its public key, when it is valid.
struct CheckedCert {
    peer: Peer,
    public_key: Vec<u8>,
    /// Seconds since the Unix epoch, both included.
    valid: (i64, i64),
}

impl std::fmt::Debug for JobspecVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobspecVerifier").finish_non_exhaustive()
    }
}

impl JobspecVerifier {
    /// A verifier against the cluster CA of `creds`.
    pub fn new(creds: &Credentials) -> Result<JobspecVerifier, SignError> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(creds.parts().0.clone())
            .map_err(|e| SignError::Untrusted(e.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| SignError::Untrusted(e.to_string()))?;
        Ok(JobspecVerifier {
            verifier,
            checked: Mutex::default(),
        })
    }

    /// The signer of `signed` (a user or an admin), or why it does not hold.
    pub fn verify(&self, signed: &SignedJobspec) -> Result<Peer, SignError> {
        let now = UnixTime::now();
        let cert = match self.remembered(&signed.cert_pem, now) {
            Some(cert) => cert,
            None => self.check(&signed.cert_pem, now)?,
        };
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &cert.public_key)
            .verify(&signed_bytes(&signed.jobspec_json), &signed.signature)
            .map_err(|_| SignError::BadSignature)?;
        Ok(cert.peer.clone())
    }

    /// A certificate checked before and still valid at `now`.
    fn remembered(&self, cert_pem: &str, now: UnixTime) -> Option<Arc<CheckedCert>> {
        let cert = self.lock().get(cert_pem).cloned()?;
        let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        (cert.valid.0 <= secs && secs <= cert.valid.1).then_some(cert)
    }

    /// Checks a certificate: it chains to the CA (valid at `now`, for clients) and is a
    /// user's or an admin's. Remembered if so.
    fn check(&self, cert_pem: &str, now: UnixTime) -> Result<Arc<CheckedCert>, SignError> {
        let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| SignError::BadCertificate(e.to_string()))?;
        self.verifier
            .verify_client_cert(&cert, &[], now)
            .map_err(|e| SignError::Untrusted(e.to_string()))?;
        let peer =
            peer_of_certificate(&cert).map_err(|e| SignError::BadCertificate(e.to_string()))?;
        if !matches!(peer.role, Role::User | Role::Admin) {
            return Err(SignError::NotAUser(peer));
        }
        let (_, parsed) = x509_parser::parse_x509_certificate(&cert)
            .map_err(|e| SignError::BadCertificate(e.to_string()))?;
        let validity = parsed.validity();
        let checked = Arc::new(CheckedCert {
            peer,
            public_key: parsed.public_key().subject_public_key.data.to_vec(),
            valid: (
                validity.not_before.timestamp(),
                validity.not_after.timestamp(),
            ),
        });
        let mut remembered = self.lock();
        if remembered.len() >= CHECKED_CERTS_MAX {
            remembered.clear();
        }
        remembered.insert(cert_pem.to_owned(), Arc::clone(&checked));
        Ok(checked)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CheckedCert>>> {
        self.checked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Ca;

    #[test]
    fn a_users_signature_verifies_and_nothing_else_does() {
        let dir = std::env::temp_dir().join(format!("shardsched-sign-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ca = Ca::create(&dir).expect("ca");
        let alice = ca.credentials(Role::User, "alice").expect("alice");
        let node = ca.credentials(Role::Node, "node0").expect("node");
        let signed = sign_jobspec(&alice, "{\"version\":1}").expect("sign");
        assert_eq!(
            verify_jobspec(&node, &signed).expect("verifies"),
            Peer::new(Role::User, "alice").expect("peer")
        );

        let mut altered = signed.clone();
        altered.jobspec_json = "{\"version\":2}".into();
        assert_eq!(
            verify_jobspec(&node, &altered),
            Err(SignError::BadSignature)
        );

        let bob = ca.credentials(Role::User, "bob").expect("bob");
        let mut borrowed = signed.clone();
        borrowed.cert_pem = bob.cert_pem().to_owned();
        assert_eq!(
            verify_jobspec(&node, &borrowed),
            Err(SignError::BadSignature)
        );

        let by_node = sign_jobspec(&node, "{}").expect("sign");
        assert!(matches!(
            verify_jobspec(&node, &by_node),
            Err(SignError::NotAUser(_))
        ));

        let other_dir = dir.join("other");
        let other_ca = Ca::create(&other_dir).expect("other ca");
        let mallory = other_ca.credentials(Role::User, "alice").expect("mallory");
        let forged = sign_jobspec(&mallory, "{}").expect("sign");
        assert!(matches!(
            verify_jobspec(&node, &forged),
            Err(SignError::Untrusted(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_remembered_certificate_still_needs_a_good_signature_and_its_validity() {
        let dir = std::env::temp_dir().join(format!("shardsched-sign-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ca = Ca::create(&dir).expect("ca");
        let alice = ca.credentials(Role::User, "alice").expect("alice");
        let node = ca.credentials(Role::Node, "node0").expect("node");
        let verifier = JobspecVerifier::new(&node).expect("verifier");
        let alice_peer = Peer::new(Role::User, "alice").expect("peer");
        let signed = sign_jobspec(&alice, "{\"version\":1}").expect("sign");
        assert_eq!(verifier.verify(&signed), Ok(alice_peer.clone()));
        assert_eq!(
            verifier.lock().len(),
            1,
            "alice's certificate is remembered"
        );
        assert_eq!(verifier.verify(&signed), Ok(alice_peer.clone()));

        // Remembered, her certificate verifies nothing she did not sign.
        let mut altered = signed.clone();
        altered.jobspec_json = "{\"version\":2}".into();
        assert_eq!(verifier.verify(&altered), Err(SignError::BadSignature));
        let mut truncated = signed.clone();
        truncated.signature.pop();
        assert_eq!(verifier.verify(&truncated), Err(SignError::BadSignature));

        // What fails is never remembered: it fails again.
        let by_node = sign_jobspec(&node, "{}").expect("sign");
        let other_ca = Ca::create(&dir.join("other")).expect("other ca");
        let forged = sign_jobspec(&other_ca.credentials(Role::User, "alice").expect("m"), "{}")
            .expect("sign");
        for _ in 0..2 {
            assert!(matches!(
                verifier.verify(&by_node),
                Err(SignError::NotAUser(_))
            ));
            assert!(matches!(
                verifier.verify(&forged),
                Err(SignError::Untrusted(_))
            ));
        }
        assert_eq!(verifier.lock().len(), 1);

        // A remembered certificate out of its validity is checked again (here, whole: the
        // real one is valid, and its real key replaces the wrong one remembered).
        verifier.lock().insert(
            signed.cert_pem.clone(),
            Arc::new(CheckedCert {
                peer: alice_peer.clone(),
                public_key: vec![0; 65],
                valid: (0, 1),
            }),
        );
        assert_eq!(verifier.verify(&signed), Ok(alice_peer));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
