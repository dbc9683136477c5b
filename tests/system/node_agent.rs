//! The node agent as a real process (`shardsched node`), with the test playing the
//! coordinator (it names the node's owner) and the shards (they launch, kill, renew and
//! read output over QUIC): a task runs under the agent's supervisor with its environment,
//! its output comes back, and the agent refuses what fencing, the signature and its role
//! table forbid.
//!
//! Jobs run as the user who signed them, so as root the test signs as `root` and starts the
//! agent with `--allow-root --min-uid 0`; not as root, the agent runs jobs as itself.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use shardsched_proto::msg::agent::{
    EndCause, JobNode, JobOnNode, NodeLaunch, NodeOwner, SignedJobspec,
};
use shardsched_proto::msg::shard_node::{OutputRequest, Request, Response};
use shardsched_proto::msg::{Generation, RefusalCode, node_coord};
use shardsched_proto::sign::sign_jobspec;
use shardsched_proto::{Ca, Credentials, Error, Fluid, Role, accept, connect, serve, tls};

/// Generous: nothing here depends on the machine's speed.
const WAIT: Duration = Duration::from_secs(60);

fn jobspec(command: &[&str]) -> String {
    serde_json::json!({
        "version": 1,
        "resources": [{"type": "slot", "count": 1, "label": "task",
                       "with": [{"type": "core", "count": 1}]}],
        "tasks": [{"command": command, "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 60, "environment": {"GREETING": "hello"}}}
    })
    .to_string()
}

struct Agent {
    child: Child,
    state: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The killed agent's spares exit when their pipe ends; their cgroups go after them.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            sweep_cgroups(|pid| pid == std::process::id());
            let unified = shardsched_node::cgroup::unified_mount();
            let left = unified.is_some_and(|u| u.join(cgroup_root()).exists());
            if !left || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The agent's cgroup root of this test process.
fn cgroup_root() -> String {
    format!("{CGROUP_PREFIX}{}", std::process::id())
}

const CGROUP_PREFIX: &str = "shardsched-test-";

/// Removes the cgroup roots of test processes for which `remove(pid)` holds, and the
/// empty cgroups under them (a killed agent's spares'), in every hierarchy: this test's at
/// the end, those of dead test processes at the start.
fn sweep_cgroups(remove: impl Fn(u32) -> bool) {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for hierarchy in hierarchies.flatten() {
        let Ok(entries) = std::fs::read_dir(hierarchy.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_prefix(CGROUP_PREFIX)
                .and_then(|p| p.parse::<u32>().ok())
                && remove(pid)
            {
                crate::harness::remove_cgroups(&entry.path());
            }
        }
    }
}

impl Agent {
    fn address(&self) -> SocketAddr {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(text) = std::fs::read_to_string(self.state.join("address"))
                && let Ok(addr) = text.trim().parse()
            {
                return addr;
            }
            assert!(
                Instant::now() < deadline,
                "the agent never wrote its address"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A coordinator that answers every registration with `owner`.
async fn fake_coordinator(ca: &Ca, owner: NodeOwner) -> SocketAddr {
    let creds = ca
        .credentials(Role::Coordinator, "coordinator")
        .expect("coordinator creds");
    let endpoint =
        tls::server_endpoint(&creds, "127.0.0.1:0".parse().expect("addr")).expect("endpoint");
    let addr = endpoint.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Some(incoming) = endpoint.accept().await {
            let owner = owner.clone();
            tokio::spawn(async move {
                let Ok(session) = accept(incoming).await else {
                    return;
                };
                assert_eq!(session.peer().role, Role::Node);
                let _ = serve(session, move |_peer, req: node_coord::Request| {
                    let owner = owner.clone();
                    async move {
                        Ok(match req {
                            node_coord::Request::Register { .. } => {
                                node_coord::Response::Registered {
                                    owner: Some(owner),
                                    heartbeat_interval_ms: 1_000,
                                    heartbeat_timeout_ms: 60_000,
                                }
                            }
                            node_coord::Request::Heartbeat(_) => node_coord::Response::Ack,
                        })
                    }
                })
                .await;
            });
        }
    });
    addr
}

fn start_agent(dir: &Path, ca_dir: &Path, coordinator: SocketAddr) -> Agent {
    let state = dir.join("node0");
    let bin = env!("CARGO_BIN_EXE_shardsched");
    let issued = Command::new(bin)
        .args(["cert", "issue", "--role", "node", "--name", "node0"])
        .arg("--state-dir")
        .arg(ca_dir)
        .arg("--out")
        .arg(&state)
        .output()
        .expect("cert issue");
    assert!(issued.status.success(), "{issued:?}");
    let log = std::fs::File::create(dir.join("agent.log")).expect("log");
    let child = Command::new(bin)
        .args(["node", "--name", "node0", "--allow-root", "--min-uid", "0"])
        .arg("--coordinator")
        .arg(coordinator.to_string())
        .arg("--state-dir")
        .arg(&state)
        .arg("--cgroup-root")
        .arg(format!("/sys/fs/cgroup/unified/{}", cgroup_root()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("agent");
    Agent { child, state }
}

fn launch(job: Fluid, generation: u64, signed: SignedJobspec, agent: SocketAddr) -> Request {
    Request::Launch(Box::new(NodeLaunch {
        job,
        generation: Generation(generation),
        signed,
        nodes: vec![JobNode {
            node: "node0".into(),
            agent,
            first_rank: 0,
            ntasks: 1,
            cores: vec![0],
            gpus: vec![],
        }],
        node_rank: 0,
        time_limit_ms: 0,
        kill_grace_ms: 1_000,
        env: vec![("SHARDSCHED_JOB_ID".into(), job.to_string())],
        r_json: "{}".into(),
    }))
}

/// Renews until `job` has ended on the node; its end. Each renewal names the last report
/// and asks the agent to hold it (protocol 14): an answer comes when the report changed, or
/// once the hold has passed with the same report, never sooner.
async fn wait_end(shard: &shardsched_proto::Session, job: Fluid) -> JobOnNode {
    let deadline = Instant::now() + WAIT;
    let mut since = None;
    loop {
        let asked = Instant::now();
        let Response::Report(report) = shard
            .request(&Request::Renew {
                seen: vec![],
                since,
                hold_ms: HOLD_MS,
            })
            .await
            .expect("renew")
        else {
            panic!("not a report");
        };
        if since == Some(report.digest()) {
            assert!(
                asked.elapsed() >= Duration::from_millis(u64::from(HOLD_MS) - 1),
                "an unchanged report came back before the hold ran out"
            );
        }
        since = Some(report.digest());
        if let Some(row) = report.jobs.iter().find(|j| j.job == job)
            && !row.state.is_live()
        {
            return row.state.clone();
        }
        assert!(
            Instant::now() < deadline,
            "job {job} never ended: {report:?}"
        );
    }
}

/// How long `wait_end` lets the agent hold a renewal, ms.
const HOLD_MS: u32 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_its_owners_signed_jobs_and_refuses_the_rest() {
    sweep_cgroups(|pid| !Path::new(&format!("/proc/{pid}")).exists());
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_dir = dir.path().join("ca");
    let ca = Ca::create(&ca_dir).expect("ca");
    let coordinator = fake_coordinator(
        &ca,
        NodeOwner {
            queue: "alpha".into(),
            generation: Generation(3),
        },
    )
    .await;
    let agent = start_agent(dir.path(), &ca_dir, coordinator);
    let address = agent.address();
    let submitter: Credentials = if nix_is_root() {
        ca.credentials(Role::Admin, "root").expect("root creds")
    } else {
        ca.credentials(Role::User, "someone").expect("user creds")
    };
    let client = |creds: Credentials| {
        tls::client_endpoint(&creds, "127.0.0.1:0".parse().expect("addr")).expect("endpoint")
    };
    let alpha_endpoint = client(ca.credentials(Role::Shard, "alpha").expect("alpha"));
    let alpha = connect(&alpha_endpoint, address, Role::Node, "node0")
        .await
        .expect("alpha reaches the agent");

    // The owner's launch is refused until the agent has heard the coordinator; then runs.
    let signed = sign_jobspec(
        &submitter,
        &jobspec(&[
            "sh",
            "-c",
            "echo $SHARDSCHED_NODE $GREETING $SHARDSCHED_TASK_RANK/$SHARDSCHED_NTASKS $PMI_RANK",
        ]),
    )
    .expect("sign");
    let job = Fluid(1 << 30);
    let deadline = Instant::now() + WAIT;
    loop {
        match alpha
            .request(&launch(job, 3, signed.clone(), address))
            .await
        {
            Ok(Response::Launched) => break,
            Err(Error::Refused(r)) if r.message.contains("no owner") => {}
            other => panic!("{other:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "the agent never learned its owner"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = wait_end(&alpha, job).await;
    assert!(
        matches!(&end, JobOnNode::Ended(e) if e.succeeded()),
        "{end:?}; supervisor log: {:?}",
        std::fs::read_to_string(
            agent
                .state
                .join("jobs")
                .join(job.to_string())
                .join("supervisor.log")
        )
    );
    let Response::Output(out) = alpha
        .request(&Request::Output(OutputRequest {
            job,
            rank: 0,
            stderr: false,
            offset: 0,
            max_bytes: 4096,
        }))
        .await
        .expect("output")
    else {
        panic!("not output");
    };
    assert_eq!(String::from_utf8_lossy(&out.bytes), "node0 hello 0/1 0\n");
    assert!(out.complete);

    // Fencing: another queue cannot launch, nor kill alpha's job, nor read its output; an
    // old generation is refused.
    let beta_endpoint = client(ca.credentials(Role::Shard, "beta").expect("beta"));
    let beta = connect(&beta_endpoint, address, Role::Node, "node0")
        .await
        .expect("beta reaches the agent");
    let refused = beta
        .request(&launch(Fluid(2 << 30), 3, signed.clone(), address))
        .await;
    assert!(
        matches!(&refused, Err(Error::Refused(r)) if r.message.contains("owned by alpha")),
        "{refused:?}"
    );
    let stale = alpha
        .request(&launch(Fluid(3 << 30), 2, signed.clone(), address))
        .await;
    assert!(
        matches!(&stale, Err(Error::Refused(r)) if r.message.contains("generation 3")),
        "{stale:?}"
    );

    // A jobspec altered after signing is refused by the agent, with the reason.
    let mut altered = signed.clone();
    altered.jobspec_json = jobspec(&["sh", "-c", "echo pwned"]);
    let bad = Fluid(4 << 30);
    alpha
        .request(&launch(bad, 3, altered, address))
        .await
        .expect("accepted by the core; refused by the executor");
    let end = wait_end(&alpha, bad).await;
    assert!(
        matches!(&end, JobOnNode::Ended(e) if e.cause == EndCause::Error && e.note.contains("signature")),
        "{end:?}"
    );

    // A long job killed by its launcher only.
    let long = Fluid(5 << 30);
    let sleeper = sign_jobspec(&submitter, &jobspec(&["sleep", "300"])).expect("sign");
    alpha
        .request(&launch(long, 3, sleeper, address))
        .await
        .expect("launch");
    let refused = beta
        .request(&Request::Kill {
            job: long,
            why: "not mine".into(),
        })
        .await;
    assert!(matches!(&refused, Err(Error::Refused(_))), "{refused:?}");
    alpha
        .request(&Request::Kill {
            job: long,
            why: "cancelled by the test".into(),
        })
        .await
        .expect("kill");
    let end = wait_end(&alpha, long).await;
    assert!(
        matches!(&end, JobOnNode::Ended(e) if e.cause == EndCause::Cancelled),
        "{end:?}"
    );

    // A user certificate cannot act as a shard; another node's neither.
    let user_endpoint = client(submitter.clone());
    let as_user = connect(&user_endpoint, address, Role::Node, "node0").await;
    if let Ok(session) = as_user {
        let refused = session
            .request(&Request::Renew {
                seen: vec![],
                since: None,
                hold_ms: 0,
            })
            .await;
        assert!(
            matches!(&refused, Err(Error::Refused(r)) if r.code == RefusalCode::Forbidden),
            "{refused:?}"
        );
    }
    // Another node's agent speaks the agent-to-agent protocol only: a shard's request from
    // it does not even decode there.
    let other_node = client(ca.credentials(Role::Node, "node1").expect("node1"));
    if let Ok(session) = connect(&other_node, address, Role::Node, "node0").await {
        let refused = session
            .request(&Request::Renew {
                seen: vec![],
                since: None,
                hold_ms: 0,
            })
            .await;
        assert!(refused.is_err(), "{refused:?}");
    }
    drop(agent);
}

fn nix_is_root() -> bool {
    rustix::process::geteuid().is_root()
}
