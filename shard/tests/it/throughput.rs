//! Submit throughput and submit→allocated latency through one shard over QUIC on loopback,
//! 1-core jobs on a 1,024-node cluster. Ignored by default (it wants `--release`):
//!
//! ```text
//! cargo test --release -p shardsched-shard --test it throughput:: -- --ignored --nocapture
//! ```
//!
//! The submit answer comes after the batch's scheduling pass, so its latency bounds the
//! submit→allocated latency from above when the cluster has room.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardsched_proto::msg::client_shard::{self, IdempotencyKey, Submit};
use shardsched_proto::msg::shard_coord::{self, Assignment};
use shardsched_proto::msg::{
    ClusterDescription, ClusterFormat, Generation, JobState, NodeGen, QueueConfig,
};
use shardsched_proto::{Ca, Role, accept, connect, serve, tls};
use shardsched_shard::ShardOptions;

const NODES: usize = 1024;
const JOBS: usize = 20_000;
const IN_FLIGHT: usize = 512;

fn assignment() -> Assignment {
    let spec = shardsched_resource::generated_cluster(NODES);
    Assignment {
        limits: Default::default(),
        allowances: Vec::new(),
        fairshare: None,
        generator_id: 1,
        cluster: ClusterDescription {
            format: ClusterFormat::Spec,
            text: spec.to_toml(),
            load_allowlist: Vec::new(),
        },
        queue: QueueConfig {
            name: "batch".into(),
            queue_policy: shardsched_proto::msg::QueuePolicy::Easy,
            match_policy: shardsched_proto::msg::MatchPolicy::First,
            queue_depth: 32,
            reservation_depth: 1,
            default_duration_ms: 3_600_000,
            max_duration_ms: 0,
            definition: Vec::new(),
            enabled: true,
            started: true,
            array_elements_max: shardsched_proto::limits::ARRAY_ELEMENTS_DEFAULT,
        },
        owned: (0..NODES)
            .map(|i| NodeGen {
                node: format!("node{i}"),
                generation: Generation(1),
            })
            .collect(),
        incoming: Vec::new(),
        flags: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run with --release -- --ignored"]
async fn one_shard_sustains_thousands_of_submits_per_second() {
    let dir = std::env::temp_dir().join(format!("shardsched-shard-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ca = Ca::create(&dir.join("coordinator")).expect("CA");
    let state = dir.join("shard");
    std::fs::create_dir_all(&state).expect("dir");
    let issued = ca.issue(Role::Shard, "batch").expect("issue");
    std::fs::write(state.join("cert.pem"), &issued.cert_pem).expect("cert");
    shardsched_proto::ca::write_private(&state.join("key.pem"), &issued.key_pem).expect("key");
    std::fs::write(state.join("ca.pem"), ca.cert_pem()).expect("ca");

    let local: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    let coord = tls::server_endpoint(
        &ca.credentials(Role::Coordinator, "coordinator")
            .expect("creds"),
        local,
    )
    .expect("endpoint");
    let (listen_tx, mut listen_rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = coord.clone();
    tokio::spawn(async move {
        while let Some(incoming) = listener.accept().await {
            let Ok(session) = accept(incoming).await else {
                continue;
            };
            let listen_tx = listen_tx.clone();
            tokio::spawn(serve(session, move |_, req: shard_coord::Request| {
                let listen_tx = listen_tx.clone();
                async move {
                    match req {
                        shard_coord::Request::Register(r) => {
                            let _ = listen_tx.send(r.listen);
                            Ok(shard_coord::Response::Registered(Box::new(assignment())))
                        }
                        _ => Ok(shard_coord::Response::Ack),
                    }
                }
            }));
        }
    });
    let options = ShardOptions {
        queue: "batch".into(),
        coordinator: coord.local_addr().expect("addr"),
        state_dir: state,
        listen: local,
        time_scale: 1.0,
        executor: Default::default(),
        retention: std::time::Duration::from_secs(3600),
        metrics: Default::default(),
    };
    tokio::spawn(shardsched_shard::run(options, std::future::pending()));
    let listen = listen_rx.recv().await.expect("registered");

    let client = tls::client_endpoint(&ca.credentials(Role::User, "bench").expect("c"), local)
        .expect("client");
    let session = Arc::new(
        connect(&client, listen, Role::Shard, "batch")
            .await
            .expect("connect"),
    );
    let jobspec = shardsched_jobspec::Shorthand {
        command: vec!["app".into()],
        ..Default::default()
    }
    .to_jobspec()
    .expect("jobspec")
    .to_json()
    .to_string();

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let per_task = JOBS / IN_FLIGHT;
    for t in 0..IN_FLIGHT {
        let session = Arc::clone(&session);
        let jobspec = jobspec.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(per_task);
            let mut last = None;
            for i in 0..per_task {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&(t as u64).to_le_bytes());
                key[8..].copy_from_slice(&(i as u64).to_le_bytes());
                let request = client_shard::Request::Submit(Submit {
                    idempotency_key: IdempotencyKey(key),
                    jobspec_json: jobspec.clone(),
                    urgency: None,
                    array: None,
                    signature: None,
                });
                let sent = Instant::now();
                match session.request(&request).await {
                    Ok(client_shard::Response::Submitted { id, .. }) => last = Some(id),
                    other => panic!("{other:?}"),
                }
                latencies.push(sent.elapsed());
            }
            (latencies, last)
        });
    }
    let mut latencies = Vec::new();
    let mut lasts = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (l, last) = done.expect("task");
        latencies.extend(l);
        lasts.extend(last);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{} submits in {:.2} s: {:.0} jobs/s; submit→answer (allocated) median {:?}, p99 {:?}",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99)
    );
    for id in lasts.into_iter().take(10) {
        match session
            .request(&client_shard::Request::JobInfo { id })
            .await
        {
            Ok(client_shard::Response::JobInfo(info)) => {
                assert_eq!(info.summary.state, JobState::Running);
            }
            other => panic!("{other:?}"),
        }
    }
    // One submit on an idle shard: the latency a lone user sees.
    let mut idle = Vec::new();
    for i in 0..200u64 {
        let mut key = [0xff; 16];
        key[..8].copy_from_slice(&i.to_le_bytes());
        let request = client_shard::Request::Submit(Submit {
            idempotency_key: IdempotencyKey(key),
            jobspec_json: jobspec.clone(),
            urgency: None,
            array: None,
            signature: None,
        });
        let sent = Instant::now();
        session.request(&request).await.expect("submit");
        idle.push(sent.elapsed());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    idle.sort();
    println!(
        "idle shard: submit→answer (allocated) median {:?}, p99 {:?}",
        idle[100], idle[198]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
