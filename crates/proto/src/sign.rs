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

use std::sync::Arc;

use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, UnparsedPublicKey,
};
use rustls::server::WebPkiClientVerifier;
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
/// an admin), whose name is the POSIX user the job may run as.
pub fn verify_jobspec(creds: &Credentials, signed: &SignedJobspec) -> Result<Peer, SignError> {
    let cert = CertificateDer::from_pem_slice(signed.cert_pem.as_bytes())
        .map_err(|e| SignError::BadCertificate(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(creds.parts().0.clone())
        .map_err(|e| SignError::Untrusted(e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| SignError::Untrusted(e.to_string()))?;
    verifier
        .verify_client_cert(&cert, &[], UnixTime::now())
        .map_err(|e| SignError::Untrusted(e.to_string()))?;
    let peer = peer_of_certificate(&cert).map_err(|e| SignError::BadCertificate(e.to_string()))?;
    if !matches!(peer.role, Role::User | Role::Admin) {
        return Err(SignError::NotAUser(peer));
    }
    let (_, parsed) = x509_parser::parse_x509_certificate(&cert)
        .map_err(|e| SignError::BadCertificate(e.to_string()))?;
    let public = &parsed.public_key().subject_public_key.data;
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, public)
        .verify(&signed_bytes(&signed.jobspec_json), &signed.signature)
        .map_err(|_| SignError::BadSignature)?;
    Ok(peer)
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
}
