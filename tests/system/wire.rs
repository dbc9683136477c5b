//! Whole-system tests on the wire: real processes on loopback (`shardsched up`, as in
//! tests/system/whole_system.rs), spoken to directly with `shardsched-proto` where a test must misbehave:
//! a retried submit, certificates from elsewhere and roles without the authority, a 4 GiB
//! frame header, garbage bytes on a stream.
//!
//! Every process is stopped by [`System`]'s `Drop`, even when a test fails.

#![allow(clippy::unwrap_used)]

use crate::harness;

use harness::{System, alive, creds_in, mem_kib};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::msg::client_coord::{self, QueueAction};
use shardsched_proto::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_proto::msg::{JobsQuery, RefusalCode, RouteTable, UserFilter};
use shardsched_proto::{Ca, Credentials, Error, HandshakeFailure, Role, Session, StreamCode};

/// A client endpoint with `creds`.
fn endpoint(creds: &Credentials) -> quinn::Endpoint {
    shardsched_proto::tls::client_endpoint(creds, "127.0.0.1:0".parse().unwrap()).unwrap()
}

async fn coordinator(endpoint: &quinn::Endpoint, addr: SocketAddr) -> Session {
    shardsched_proto::connect(endpoint, addr, Role::Coordinator, COORDINATOR_NAME)
        .await
        .unwrap()
}

async fn routes(session: &Session) -> RouteTable {
    match session
        .request(&client_coord::Request::Routes)
        .await
        .unwrap()
    {
        client_coord::Response::Routes(table) => table,
        other => panic!("routes: {other:?}"),
    }
}

async fn shard(endpoint: &quinn::Endpoint, table: &RouteTable, queue: &str) -> Session {
    let route = table.queue(queue).unwrap();
    shardsched_proto::connect(endpoint, route.address, Role::Shard, queue)
        .await
        .unwrap()
}

/// A one-core job for `queue` as canonical jobspec JSON.
fn jobspec(queue: &str, seconds: u64) -> String {
    let mut js = shardsched_jobspec_for_tests(seconds);
    js["attributes"]["system"]["queue"] = Value::String(queue.to_owned());
    js.to_string()
}

/// The jobspec `submit -n 1 -t SECONDS -- sleep` builds (RFC 25 version 1).
fn shardsched_jobspec_for_tests(seconds: u64) -> Value {
    serde_json::json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task",
                       "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": ["sleep"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": seconds}}
    })
}

/// Writes `bytes` on a fresh stream, finishes it, and reads what comes back.
async fn raw(session: &Session, bytes: &[u8]) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let (mut send, mut recv) = session.connection().open_bi().await.unwrap();
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    tokio::time::timeout(Duration::from_secs(15), recv.read_to_end(1 << 20))
        .await
        .expect("an answer (or a reset) in time")
}

fn reset_code(result: Result<Vec<u8>, quinn::ReadToEndError>) -> Option<StreamCode> {
    match result {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
            StreamCode::from_u64(code.into_inner())
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// The independent checker.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_submit_with_the_same_key_makes_one_job() {
    let system = System::start_fast("idempotent");
    let creds = system.admin();
    let endpoint = endpoint(&creds);
    let coord = coordinator(&endpoint, system.address()).await;
    let table = routes(&coord).await;
    let submit = Submit {
        idempotency_key: IdempotencyKey([7; 16]),
        jobspec_json: jobspec("alpha", 60),
        urgency: None,
        array: None,
        signature: None,
    };
    let request = client_shard::Request::Submit(submit.clone());

    let first = shard(&endpoint, &table, "alpha").await;
    let (id, duplicate) = match first.request(&request).await.unwrap() {
        client_shard::Response::Submitted { id, duplicate } => (id, duplicate),
        other => panic!("{other:?}"),
    };
    assert!(!duplicate);
    // The retry comes on a new connection, as after a broken one; and several at once.
    first.close();
    let mut retries = Vec::new();
    for _ in 0..4 {
        let endpoint = endpoint.clone();
        let table = table.clone();
        let request = request.clone();
        retries.push(tokio::spawn(async move {
            let session = shard(&endpoint, &table, "alpha").await;
            session.request(&request).await.unwrap()
        }));
    }
    for retry in retries {
        assert_eq!(
            retry.await.unwrap(),
            client_shard::Response::Submitted {
                id,
                duplicate: true
            }
        );
    }
    // One job.
    let session = shard(&endpoint, &table, "alpha").await;
    let list = match session
        .request(&client_shard::Request::Jobs(JobsQuery {
            queue: None,
            user: UserFilter::All,
            include_inactive: true,
            limit: 100,
            states: Vec::new(),
            name: None,
        }))
        .await
        .unwrap()
    {
        client_shard::Response::Jobs(list) => list,
        other => panic!("{other:?}"),
    };
    assert_eq!(list.jobs.len(), 1, "{:?}", list.jobs);
    assert_eq!(list.jobs[0].id, id);
    // Another key is another job.
    let other = client_shard::Request::Submit(Submit {
        idempotency_key: IdempotencyKey([8; 16]),
        ..submit
    });
    match session.request(&other).await.unwrap() {
        client_shard::Response::Submitted {
            id: other_id,
            duplicate: false,
        } => assert_ne!(other_id, id),
        answer => panic!("{answer:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Acceptance: security and robustness.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_the_right_certificate_or_authority_are_refused() {
    let system = System::start_fast("security");
    let addr = system.address();
    let admin = system.admin();

    // 1. No client certificate at all.
    let ca_pem = std::fs::read_to_string(system.state().join("client/ca.pem")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![shardsched_proto::ALPN.to_vec()];
    let mut anonymous = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    anonymous.set_default_client_config(shardsched_proto::tls::quic_client_config(tls).unwrap());
    let err = shardsched_proto::connect(&anonymous, addr, Role::Coordinator, COORDINATOR_NAME)
        .await
        .expect_err("no certificate, no connection");
    assert!(
        matches!(err, Error::Handshake(HandshakeFailure::CertificateRequired)),
        "{err}"
    );
    assert!(err.to_string().contains("client certificate"), "{err}");

    // ... and the CLI says so before trying, when the certificate file is missing.
    let no_cert = system.dir.join("no-cert");
    std::fs::create_dir_all(no_cert.join("coordinator")).unwrap();
    std::fs::copy(
        system.state().join("coordinator/address"),
        no_cert.join("coordinator/address"),
    )
    .unwrap();
    let out = system.cli_in(&no_cert, &["jobs"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no client certificate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // 2. A certificate from another CA: refused by the coordinator and by a shard.
    let other_ca = Ca::create(&system.dir.join("other-ca")).unwrap();
    let stranger = other_ca.credentials(Role::Admin, "mallory").unwrap();
    let stranger_endpoint = endpoint(&stranger);
    let err = shardsched_proto::connect(
        &stranger_endpoint,
        addr,
        Role::Coordinator,
        COORDINATOR_NAME,
    )
    .await
    .expect_err("a stranger's certificate is refused");
    assert!(err.to_string().contains("CA"), "{err}");
    // Through the CLI, with the stranger's certificate in a client directory.
    let stranger_dir = system.dir.join("stranger");
    std::fs::create_dir_all(stranger_dir.join("coordinator")).unwrap();
    std::fs::copy(
        system.state().join("coordinator/address"),
        stranger_dir.join("coordinator/address"),
    )
    .unwrap();
    let issued = other_ca.issue(Role::Admin, "mallory").unwrap();
    std::fs::create_dir_all(stranger_dir.join("client")).unwrap();
    std::fs::write(stranger_dir.join("client/cert.pem"), &issued.cert_pem).unwrap();
    shardsched_proto::ca::write_private(&stranger_dir.join("client/key.pem"), &issued.key_pem)
        .unwrap();
    std::fs::write(stranger_dir.join("client/ca.pem"), other_ca.cert_pem()).unwrap();
    let out = system.cli_in(&stranger_dir, &["queue", "list"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CA"), "{stderr}");

    let admin_endpoint = endpoint(&admin);
    let coord = coordinator(&admin_endpoint, addr).await;
    let table = routes(&coord).await;
    let route = table.queue("alpha").unwrap();
    let err = shardsched_proto::connect(&stranger_endpoint, route.address, Role::Shard, "alpha")
        .await
        .expect_err("shards refuse strangers too");
    assert!(err.to_string().contains("CA"), "{err}");

    // 3. A user asking for an admin operation.
    let alice_dir = system.user_dir("alice");
    let alice = creds_in(&alice_dir.join("client"));
    let alice_endpoint = endpoint(&alice);
    let alice_coord = coordinator(&alice_endpoint, addr).await;
    let stop = client_coord::Request::QueueControl {
        queue: "alpha".into(),
        action: QueueAction::Stop,
    };
    match alice_coord.request(&stop).await {
        Err(Error::Refused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Forbidden);
            assert!(refusal.message.contains("alice"), "{}", refusal.message);
            assert!(refusal.message.contains("may not"), "{}", refusal.message);
        }
        other => panic!("a user stopped a queue: {other:?}"),
    }
    // Users may read status and submit.
    routes(&alice_coord).await;
    // ... but not cancel someone else's job (the admin's here), through the CLI.
    let admins_job = system.submit(&["-q", "alpha", "-t", "1h", "--", "sleep", "3600"]);
    let out = system.cli_in(&alice_dir, &["cancel", &admins_job]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not your job"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(system.job(&admins_job)["state"], "cancelled");
    // The admin may stop a queue.
    assert!(coord.request(&stop).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_gib_frame_header_is_refused_without_the_coordinator_growing() {
    let system = System::start_fast("bigframe");
    let coordinator_pid = system.child_pid("coordinator");
    let endpoint = endpoint(&system.admin());
    let session = coordinator(&endpoint, system.address()).await;
    routes(&session).await;
    let rss_before = mem_kib(coordinator_pid, "VmRSS");
    let size_before = mem_kib(coordinator_pid, "VmSize");
    // Sixteen streams each announcing 4 GiB − 1 (the most a u32 header can say), each
    // followed by 1 MiB of payload that a reader believing the header would buffer (16 MiB
    // in all), and whose reservation of the announced size would show in the address space.
    let mut frame = vec![0xFF, 0xFF, 0xFF, 0xFF];
    frame.extend(std::iter::repeat_n(0xAB, 1024 * 1024));
    for _ in 0..16 {
        assert_eq!(
            reset_code(raw(&session, &frame).await),
            Some(StreamCode::FrameTooLarge)
        );
    }
    let rss_after = mem_kib(coordinator_pid, "VmRSS");
    let size_after = mem_kib(coordinator_pid, "VmSize");
    assert!(
        rss_after < rss_before + 8 * 1024,
        "the coordinator's resident memory grew from {rss_before} KiB to {rss_after} KiB"
    );
    assert!(
        size_after < size_before + 1024 * 1024,
        "the coordinator's address space grew from {size_before} KiB to {size_after} KiB"
    );
    // Still serving, on the same connection and for others.
    routes(&session).await;
    system.ok(&["queue", "list"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_a_stream_resets_that_stream_and_the_processes_keep_serving() {
    let system = System::start_fast("garbage");
    let coordinator_pid = system.child_pid("coordinator");
    let shard_pid = system.child_pid("alpha");
    let endpoint = endpoint(&system.admin());
    let coord = coordinator(&endpoint, system.address()).await;
    let table = routes(&coord).await;
    let alpha = shard(&endpoint, &table, "alpha").await;

    for session in [&coord, &alpha] {
        // A well-framed payload that is no request.
        let garbage = [0, 0, 0, 8, 0xEE, 0xFF, 0x13, 0x37, 0xDE, 0xAD, 0xBE, 0xEF];
        assert_eq!(
            reset_code(raw(session, &garbage).await),
            Some(StreamCode::Malformed)
        );
        // A frame cut short.
        assert_eq!(
            reset_code(raw(session, &[0, 0, 0, 100, 1, 2, 3]).await),
            Some(StreamCode::Malformed)
        );
        // HTTP, whose first four bytes read as a 1.2 GB header.
        assert_eq!(
            reset_code(raw(session, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await),
            Some(StreamCode::FrameTooLarge)
        );
    }
    // The same connections still answer, and the processes are the same ones.
    routes(&coord).await;
    let answer = alpha
        .request(&client_shard::Request::Submit(Submit {
            idempotency_key: IdempotencyKey([1; 16]),
            jobspec_json: jobspec("alpha", 1),
            urgency: None,
            array: None,
            signature: None,
        }))
        .await
        .unwrap();
    assert!(matches!(answer, client_shard::Response::Submitted { .. }));
    assert!(alive(coordinator_pid) && alive(shard_pid));
    assert_eq!(system.child_pid("coordinator"), coordinator_pid);
    assert_eq!(system.child_pid("alpha"), shard_pid);
    system.ok(&["jobs", "-A"]);
}

// ---------------------------------------------------------------------------------------
// Supervision and the client's errors.
