//! Real QUIC on 127.0.0.1: mutual TLS, identities, refusals, and hostile bytes.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TempDir, ack_commands, coordinator, localhost, new_ca, shard};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use shardsched_proto::msg::client_shard::{IdempotencyKey, Submit};
use shardsched_proto::msg::coord_shard::{Acquire, Response as CommandResponse};
use shardsched_proto::msg::{
    Generation, MoveId, NodeGen, RefusalCode, RouteTable, client_coord, client_shard, coord_shard,
    shard_coord,
};
use shardsched_proto::rpc::connect_speaking;
use shardsched_proto::{
    ALPN, Credentials, Error, HandshakeFailure, PROTOCOL_VERSION, Peer, Role, StreamCode, connect,
    serve, tls,
};

fn submit(jobspec: &str) -> client_shard::Request {
    client_shard::Request::Submit(Submit {
        idempotency_key: IdempotencyKey([7; 16]),
        jobspec_json: jobspec.to_owned(),
        urgency: None,
        array: None,
        signature: None,
    })
}

/// Sends raw bytes on a new stream of `session` and returns what came back (or the reset).
async fn raw(
    session: &shardsched_proto::Session,
    bytes: &[u8],
) -> Result<Vec<u8>, quinn::ReadToEndError> {
    let (mut send, mut recv) = session.connection().open_bi().await.expect("open stream");
    // The server may stop reading before we are done writing; that is the point.
    let _ = send.write_all(bytes).await;
    let _ = send.finish();
    tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20))
        .await
        .expect("answer in time")
}

fn reset_code(result: Result<Vec<u8>, quinn::ReadToEndError>) -> Option<StreamCode> {
    match result {
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
            StreamCode::from_u64(code.into_inner())
        }
        _ => None,
    }
}

#[tokio::test]
async fn request_response_round_trip_with_mutual_tls() {
    let (_dir, ca) = new_ca("round-trip");
    let server = shard(
        &ca.credentials(Role::Shard, "batch").expect("shard creds"),
        9,
    );
    let client = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("client endpoint");
    let session = connect(&client, server.addr, Role::Shard, "batch")
        .await
        .expect("connect");
    assert_eq!(
        session.peer(),
        &Peer::new(Role::Shard, "batch").expect("peer")
    );
    assert_eq!(
        session.seen_as(),
        Some(&Peer::new(Role::User, "alice").expect("peer"))
    );

    // Many requests at once, one stream each, on one connection.
    let session = Arc::new(session);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let session = Arc::clone(&session);
        tasks.spawn(async move { session.request(&submit("{}")).await });
    }
    let mut ids = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done.expect("task") {
            Ok(client_shard::Response::Submitted {
                id,
                duplicate: false,
            }) => ids.push(id),
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert!(ids.iter().all(|id| id.generator_id() == 9));
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 64, "job ids are unique");
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let (_dir, ca) = new_ca("no-cert");
    let mut server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).expect("CA der"))
        .expect("root");
    let mut tls_config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .expect("tls 1.3")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls_config.alpn_protocols = vec![ALPN.to_vec()];
    let mut client = quinn::Endpoint::client(localhost()).expect("endpoint");
    client.set_default_client_config(tls::quic_client_config(tls_config).expect("quic config"));

    let err = connect(&client, server.addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("must be refused");
    assert!(
        matches!(err, Error::Handshake(HandshakeFailure::CertificateRequired)),
        "client sees: {err}"
    );
    let seen = server.next_error().await;
    assert_eq!(seen.to_string(), "peer presented no client certificate");
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_both_ways() {
    let (_dir, ca) = new_ca("ours");
    let (_other_dir, other) = new_ca("theirs");
    let mut server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );

    // A client certificate from another CA (the client trusts our CA for the server).
    let intruder = other.issue(Role::Admin, "mallory").expect("issue");
    let creds =
        Credentials::from_pem(ca.cert_pem(), &intruder.cert_pem, &intruder.key_pem).expect("creds");
    let client = tls::client_endpoint(&creds, localhost()).expect("endpoint");
    let err = connect(&client, server.addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("must be refused");
    assert!(
        matches!(err, Error::Handshake(HandshakeFailure::RefusedUnknownCa)),
        "client sees: {err}"
    );
    let seen = server.next_error().await;
    assert!(
        matches!(seen, Error::Handshake(HandshakeFailure::PeerUnknownCa)),
        "{seen}"
    );
    assert!(
        seen.to_string().contains("not signed by this cluster's CA"),
        "{seen}"
    );

    // A server certificate from another CA: the client refuses it.
    let impostor = coordinator(
        &other
            .credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let honest = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let err = connect(&honest, impostor.addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("must be refused");
    assert!(
        matches!(err, Error::Handshake(HandshakeFailure::PeerUnknownCa)),
        "client sees: {err}"
    );
}

#[tokio::test]
async fn the_server_must_be_who_the_client_asked_for() {
    let (_dir, ca) = new_ca("server-name");
    let server = shard(&ca.credentials(Role::Shard, "batch").expect("creds"), 1);
    let client = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let err = connect(&client, server.addr, Role::Shard, "debug")
        .await
        .expect_err("batch is not debug");
    assert!(
        matches!(
            err,
            Error::Handshake(HandshakeFailure::PeerCertificateInvalid(_))
        ),
        "{err}"
    );

    // Names with '_' and '-' are valid server names too.
    let odd = shard(
        &ca.credentials(Role::Shard, "long_queue-1").expect("creds"),
        2,
    );
    let session = connect(&client, odd.addr, Role::Shard, "long_queue-1")
        .await
        .expect("connect");
    assert_eq!(session.peer().name, "long_queue-1");

    // A user certificate cannot serve: it has no server name and no server-auth usage.
    let rogue = shard(&ca.credentials(Role::User, "batch").expect("creds"), 1);
    let err = connect(&client, rogue.addr, Role::Shard, "batch")
        .await
        .expect_err("a user cannot pose as a shard");
    assert!(matches!(err, Error::Handshake(_)), "{err}");
}

#[tokio::test]
async fn a_user_is_identified_as_user_and_refused_admin_operations() {
    let (_dir, ca) = new_ca("roles");
    let server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let stop = client_coord::Request::QueueControl {
        queue: "batch".into(),
        action: client_coord::QueueAction::Stop,
    };

    let user = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let session = connect(&user, server.addr, Role::Coordinator, "coordinator")
        .await
        .expect("connect");
    assert_eq!(session.seen_as().map(|p| p.role), Some(Role::User));
    let answer = session
        .request(&client_coord::Request::Routes)
        .await
        .expect("routes");
    assert_eq!(
        answer,
        client_coord::Response::Routes(RouteTable::default())
    );
    match session.request(&stop).await {
        Err(Error::Refused(refusal)) => {
            assert_eq!(refusal.code, RefusalCode::Forbidden);
            assert_eq!(
                refusal.message,
                "user alice may not change queues (role user lacks the authority)"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }

    let admin = tls::client_endpoint(
        &ca.credentials(Role::Admin, "root").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let session = connect(&admin, server.addr, Role::Coordinator, "coordinator")
        .await
        .expect("connect");
    let answer = session.request(&stop).await.expect("admin may");
    assert_eq!(answer, client_coord::Response::Done { move_id: None });
}

#[tokio::test]
async fn a_four_gib_frame_is_refused_at_the_header_and_the_connection_keeps_serving() {
    let (_dir, ca) = new_ca("huge");
    let server = shard(&ca.credentials(Role::Shard, "batch").expect("creds"), 2);
    let client = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let session = connect(&client, server.addr, Role::Shard, "batch")
        .await
        .expect("connect");

    // Header announcing 4 GiB - 1 (the most a u32 can say), then a few bytes, then FIN.
    let answer = raw(&session, &[0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3]).await;
    assert_eq!(reset_code(answer), Some(StreamCode::FrameTooLarge));

    // The same connection still answers.
    let ok = session.request(&submit("{}")).await.expect("still serving");
    assert!(matches!(ok, client_shard::Response::Submitted { .. }));
}

#[tokio::test]
async fn garbage_closes_the_stream_not_the_server() {
    let (_dir, ca) = new_ca("garbage");
    let server = shard(&ca.credentials(Role::Shard, "batch").expect("creds"), 3);
    let client = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let session = connect(&client, server.addr, Role::Shard, "batch")
        .await
        .expect("connect");

    // A well-framed payload that is not a request.
    let garbage = [0, 0, 0, 8, 0xEE, 0xFF, 0x13, 0x37, 0xDE, 0xAD, 0xBE, 0xEF];
    assert_eq!(
        reset_code(raw(&session, &garbage).await),
        Some(StreamCode::Malformed)
    );
    // A frame cut short by FIN.
    assert_eq!(
        reset_code(raw(&session, &[0, 0, 0, 100, 1, 2]).await),
        Some(StreamCode::Malformed)
    );
    // Text that reads as a 1.2 GB header.
    assert_eq!(
        reset_code(raw(&session, b"GET / HTTP/1.1\r\n\r\n").await),
        Some(StreamCode::FrameTooLarge)
    );
    // A handler that panics resets its stream only.
    match session.request(&submit("panic")).await {
        Err(Error::StreamReset { code }) => {
            assert_eq!(StreamCode::from_u64(code), Some(StreamCode::Internal))
        }
        other => panic!("expected a reset stream, got {other:?}"),
    }

    let ok = session.request(&submit("{}")).await.expect("still serving");
    assert!(matches!(ok, client_shard::Response::Submitted { .. }));
}

#[tokio::test]
async fn a_protocol_version_mismatch_gives_a_clear_error_on_both_sides() {
    let (_dir, ca) = new_ca("version");
    let mut server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let client = tls::client_endpoint(
        &ca.credentials(Role::User, "alice").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let newer = PROTOCOL_VERSION + 1;
    let err = connect_speaking(
        &client,
        server.addr,
        Role::Coordinator,
        "coordinator",
        newer,
    )
    .await
    .expect_err("a newer version is not spoken");
    assert_eq!(
        err.to_string(),
        format!("peer does not support protocol version {newer} (it speaks {PROTOCOL_VERSION})")
    );
    let seen = server.next_error().await;
    assert_eq!(
        seen.to_string(),
        format!("protocol version {newer} not supported (this build speaks {PROTOCOL_VERSION})")
    );
}

#[tokio::test]
async fn the_coordinator_commands_a_shard_over_the_shards_own_connection() {
    let (_dir, ca) = new_ca("commands");
    let mut server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let shard_endpoint = tls::client_endpoint(
        &ca.credentials(Role::Shard, "batch").expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let to_coordinator = connect(
        &shard_endpoint,
        server.addr,
        Role::Coordinator,
        "coordinator",
    )
    .await
    .expect("connect");
    tokio::spawn(serve(to_coordinator.clone(), ack_commands));

    // Shard → coordinator.
    let status = shard_coord::Request::Released(shard_coord::Released {
        move_id: MoveId(1),
        nodes: vec![NodeGen {
            node: "node3".into(),
            generation: Generation(4),
        }],
    });
    assert_eq!(
        to_coordinator.request(&status).await.expect("ack"),
        shard_coord::Response::Ack
    );

    // Coordinator → shard, on the connection the shard opened.
    let from_coordinator = tokio::time::timeout(Duration::from_secs(5), server.shards.recv())
        .await
        .expect("in time")
        .expect("shard session");
    assert_eq!(
        from_coordinator.peer(),
        &Peer::new(Role::Shard, "batch").expect("peer")
    );
    let acquire = coord_shard::Request::Acquire(Acquire {
        move_id: MoveId(1),
        nodes: vec![NodeGen {
            node: "node3".into(),
            generation: Generation(4),
        }],
        flags: Default::default(),
    });
    let answer = from_coordinator.request(&acquire).await.expect("acquired");
    assert_eq!(answer, CommandResponse::Ack { stale: Vec::new() });

    // The coordinator's certificate is not a licence to submit jobs, nor a shard's.
    let shard_server = shard(&ca.credentials(Role::Shard, "debug").expect("creds"), 4);
    let as_coordinator = tls::client_endpoint(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
        localhost(),
    )
    .expect("endpoint");
    let session = connect(&as_coordinator, shard_server.addr, Role::Shard, "debug")
        .await
        .expect("connect");
    match session.request(&submit("{}")).await {
        Err(Error::Refused(r)) => assert_eq!(r.code, RefusalCode::Forbidden),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let session = connect(&shard_endpoint, shard_server.addr, Role::Shard, "debug")
        .await
        .expect("connect");
    match session.request(&submit("{}")).await {
        Err(Error::Refused(r)) => assert_eq!(r.code, RefusalCode::Forbidden),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_ca_survives_a_reload_and_protects_its_key() {
    let dir = TempDir::new("reload");
    let ca = shardsched_proto::Ca::create(dir.path()).expect("create");
    assert!(
        shardsched_proto::Ca::create(dir.path()).is_err(),
        "never overwrite a CA"
    );
    let again = shardsched_proto::Ca::load(dir.path()).expect("load");
    assert_eq!(ca.cert_pem(), again.cert_pem());
    let issued = again.issue(Role::Shard, "batch").expect("issue");
    let creds =
        Credentials::from_pem(ca.cert_pem(), &issued.cert_pem, &issued.key_pem).expect("creds");
    assert_eq!(
        creds.identity().expect("identity"),
        Peer::new(Role::Shard, "batch").expect("peer")
    );
    assert!(again.issue(Role::User, "no spaces").is_err());

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = dir.path().join(shardsched_proto::ca::CA_KEY_FILE);
        let mode = std::fs::metadata(&key).expect("key").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = shardsched_proto::Ca::load(dir.path()).expect_err("readable key refused");
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }
}

#[tokio::test]
async fn another_wire_generation_fails_at_alpn() {
    let (_dir, ca) = new_ca("alpn");
    let server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let creds = ca.credentials(Role::User, "alice").expect("creds");
    let mut tls_config = tls::rustls_client_config(&creds).expect("tls config");
    tls_config.alpn_protocols = vec![b"shardsched/2".to_vec()];
    let mut client = quinn::Endpoint::client(localhost()).expect("endpoint");
    client.set_default_client_config(tls::quic_client_config(tls_config).expect("quic config"));
    let err = connect(&client, server.addr, Role::Coordinator, "coordinator")
        .await
        .expect_err("shardsched/2 is not spoken");
    assert!(
        matches!(
            err,
            Error::Handshake(HandshakeFailure::NoApplicationProtocol)
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_connection_that_does_not_start_with_a_hello_is_closed() {
    let (_dir, ca) = new_ca("no-hello");
    let mut server = coordinator(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
    );
    let creds = ca.credentials(Role::User, "alice").expect("creds");
    let client = tls::client_endpoint(&creds, localhost()).expect("endpoint");
    let conn = client
        .connect(
            server.addr,
            &shardsched_proto::identity::server_name(Role::Coordinator, "coordinator"),
        )
        .expect("connecting")
        .await
        .expect("handshake");
    // A request where the hello should be.
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let bytes = shardsched_proto::codec::encode(&client_coord::Request::Routes).expect("encode");
    let mut frame = (bytes.len() as u32).to_be_bytes().to_vec();
    frame.extend(bytes);
    send.write_all(&frame).await.expect("write");
    let _ = send.finish();
    let _ = recv.read_to_end(1024).await;
    let seen = server.next_error().await;
    assert!(matches!(seen, Error::HelloMissing(_)), "{seen}");
    let closed = Error::from(conn.closed().await);
    assert!(
        matches!(
            closed,
            Error::Closed(shardsched_proto::CloseCode::HelloMissing)
        ),
        "{closed}"
    );
}
