//! Who a node agent runs a job as, and what an agent's certificate may do: a job runs as
//! the user whose certificate signed it (the test makes the users in a private mount
//! namespace of the agents, never on the host; root only, skipped with a printed reason
//! otherwise), and a node's certificate cannot act as a client, a shard or another node.

mod harness;

use std::net::SocketAddr;

use harness::{
    AgentSetup, NetCluster, System, agents_config, alpha_agents_config, creds_in, privileged,
    wait_for,
};
use shardsched_proto::identity::COORDINATOR_NAME;
use shardsched_proto::msg::agent::AgentReport;
use shardsched_proto::msg::{
    JobsQuery, RefusalCode, UserFilter, client_coord, client_shard, node_coord, shard_coord,
    shard_node,
};
use shardsched_proto::{Error, Role, Session, connect, tls};

/// Submits `command` with the user certificate `user` (retried until the shard takes
/// it: the system may still be starting); the job's id.
fn submit_as(sys: &System, user: &str, command: &str) -> String {
    let dir = sys.user_dir(user);
    let args = ["submit", "-N", "1", "-t", "1m", "--", "sh", "-c", command];
    let mut id = String::new();
    let taken = wait_for(|| {
        let out = sys.cli_in(&dir, &args);
        id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        out.status.success()
    });
    assert!(taken, "submit as {user}: {:?}", sys.cli_in(&dir, &args));
    id
}

#[test]
fn a_job_runs_as_its_signer_cannot_make_root_read_for_it_and_unknown_root_and_system_users_are_refused()
 {
    if !privileged("agents_users") {
        return;
    }
    let host_passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let host_group = std::fs::read_to_string("/etc/group").expect("/etc/group");
    let users = tempfile::tempdir().expect("tempdir");
    // Alice's home, where her job starts.
    let home = users.path().join("alice");
    std::fs::create_dir(&home).expect("home");
    std::os::unix::fs::chown(&home, Some(4242), Some(4242)).expect("chown home");
    std::fs::set_permissions(
        users.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .expect("users dir mode");
    let passwd = users.path().join("passwd");
    let group = users.path().join("group");
    std::fs::write(
        &passwd,
        format!(
            "{host_passwd}alice:x:4242:4242:Alice:{}:/bin/sh\n\
             toor:x:0:0:another root:/root:/bin/sh\n\
             sysuser:x:500:500:a system user:/nonexistent:/bin/sh\n",
            home.display()
        ),
    )
    .expect("passwd");
    std::fs::write(
        &group,
        format!("{host_group}alice:x:4242:\nresearch:x:4343:alice\nsysuser:x:500:\n"),
    )
    .expect("group");
    let cluster = NetCluster::start_with(
        "agents-users",
        &alpha_agents_config("node0"),
        &["node0"],
        &AgentSetup::with_users(&passwd, &group),
    );
    let sys = &cluster.sys;

    let id = submit_as(sys, "alice", "id -un; id -u; id -G; pwd");
    let row = sys.wait_state(&id, "completed");
    assert_eq!(row["owner"], "alice", "{row:#}");
    let out = sys.ok(&["job", "output", &id]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"alice"), "{out}");
    assert_eq!(lines.get(1), Some(&"4242"), "{out}");
    assert!(
        lines
            .get(2)
            .is_some_and(|groups| groups.split_whitespace().any(|g| g == "4343")),
        "alice's supplementary group: {out}"
    );
    // Submit sends the directory it ran from as the job's cwd (flux submit's default,
    // issue 17), which the agent honours over the user's home.
    assert_eq!(
        lines.get(3),
        Some(&sys.dir.to_string_lossy().as_ref()),
        "the job runs where it was submitted from: {out}"
    );

    // Its plan, read as root, is where only root can write, not in its directory (alice's).
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let state = sys.layout().node_dir("node0");
    let plans = std::fs::metadata(state.join("plans")).expect("plans/");
    assert_eq!(
        (plans.uid(), plans.permissions().mode() & 0o777),
        (0, 0o700)
    );
    assert!(state.join("plans").join(format!("{id}.json")).is_file());
    let job_dir = state.join("jobs").join(&id);
    assert_eq!(std::fs::metadata(&job_dir).expect("job dir").uid(), 4242);
    assert!(!job_dir.join("plan.json").exists());

    // Issue 15: a job cannot make the root agent read a file for it. It forges a plan in its
    // directory (naming a root-owned file as its output, root as its user: what the agent
    // read its plan from before) and replaces its output by a link to that file.
    let secret = users.path().join("secret");
    std::fs::write(&secret, "root's secret\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("secret mode");
    let forge = format!(
        "cd \"$SHARDSCHED_JOB_DIR\" || exit 1; exec >/dev/null; rm -f plan.json; \
         printf '{{\"run_as\": {{\"uid\": 0}}, \"stdout\": \"{secret}\"}}' > plan.json; \
         rm -f task-0.out; ln -s {secret} task-0.out",
        secret = secret.display()
    );
    let id = submit_as(sys, "alice", &forge);
    sys.wait_state(&id, "completed");
    let out = sys.cli(&["job", "output", &id]);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{printed}");
    assert!(printed.contains("symbolic link"), "{printed}");
    assert!(
        !printed.contains("root's secret"),
        "root's file was returned: {printed}"
    );

    for (user, why) in [
        ("bob", "no user bob on this node"),
        ("toor", "user toor is uid 0: jobs do not run as root"),
        (
            "sysuser",
            "user sysuser is uid 500, below this node's minimum of 1000",
        ),
    ] {
        let id = submit_as(sys, user, "echo ran");
        let row = sys.wait_state(&id, "failed");
        assert!(
            row["reason"].as_str().is_some_and(|r| r.contains(why)),
            "{user}: {row:#}"
        );
    }
    // The host's databases never changed.
    assert_eq!(
        std::fs::read_to_string("/etc/passwd").ok(),
        Some(host_passwd)
    );
    assert_eq!(std::fs::read_to_string("/etc/group").ok(), Some(host_group));
}

/// A session to `addr`, a server of `role` named `name`, with node0's certificate.
async fn as_node0(sys: &System, addr: SocketAddr, role: Role, name: &str) -> Session {
    let creds = creds_in(&sys.layout().node_dir("node0"));
    let endpoint =
        tls::client_endpoint(&creds, "127.0.0.1:0".parse().expect("addr")).expect("endpoint");
    connect(&endpoint, addr, role, name)
        .await
        .expect("node0's certificate is the cluster's")
}

/// Whether `reply` was refused, with `code` when the server read the request as asked.
fn refused<T: std::fmt::Debug>(reply: &Result<T, Error>, code: RefusalCode) -> bool {
    match reply {
        Err(Error::Refused(r)) => r.code == code,
        // Not even read as what it claims to be: a node speaks only its own messages.
        Err(_) => true,
        Ok(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_certificate_cannot_act_as_a_client_a_shard_or_another_node() {
    let sys = System::start_with(
        "agents-certs",
        &agents_config("heartbeat_timeout = \"4s\""),
        &["--agents"],
    );
    let coordinator = sys.address();

    // As a client of the coordinator.
    let session = as_node0(&sys, coordinator, Role::Coordinator, COORDINATOR_NAME).await;
    let reply = session.request(&client_coord::Request::Routes).await;
    assert!(refused(&reply, RefusalCode::Forbidden), "{reply:?}");
    // As a shard of the coordinator.
    let session = as_node0(&sys, coordinator, Role::Coordinator, COORDINATOR_NAME).await;
    let reply = session
        .request(&shard_coord::Request::Agents {
            nodes: vec!["node1".into()],
        })
        .await;
    assert!(refused(&reply, RefusalCode::Forbidden), "{reply:?}");
    // As node1's agent.
    let session = as_node0(&sys, coordinator, Role::Coordinator, COORDINATOR_NAME).await;
    let reply = session
        .request(&node_coord::Request::Register {
            listen: "127.0.1.2:4000".parse().expect("addr"),
            report: AgentReport {
                node: "node1".into(),
                owner: None,
                lease_ms: 2_000,
                unhealthy: None,
                jobs: Vec::new(),
            },
        })
        .await;
    match &reply {
        Err(Error::Refused(r)) => {
            assert_eq!(r.code, RefusalCode::Forbidden);
            assert!(
                r.message.contains("may not register for node node1"),
                "{}",
                r.message
            );
        }
        other => panic!("node0 registered as node1: {other:?}"),
    }

    // As a client of a shard.
    let (_endpoint, admin) = sys.admin_session().await;
    let client_coord::Response::Routes(table) = admin
        .request(&client_coord::Request::Routes)
        .await
        .expect("routes")
    else {
        panic!("not routes");
    };
    let shard = table.queue("alpha").expect("alpha's route").address;
    let session = as_node0(&sys, shard, Role::Shard, "alpha").await;
    let reply = session
        .request(&client_shard::Request::Jobs(JobsQuery {
            queue: None,
            user: UserFilter::All,
            include_inactive: true,
            limit: 10,
            states: Vec::new(),
            name: None,
        }))
        .await;
    assert!(refused(&reply, RefusalCode::Forbidden), "{reply:?}");

    // As a shard of another node's agent.
    let node1 = std::fs::read_to_string(sys.layout().node_dir("node1").join("address"))
        .expect("node1's address");
    let node1: SocketAddr = node1.trim().parse().expect("an address");
    let session = as_node0(&sys, node1, Role::Node, "node1").await;
    let reply = session
        .request(&shard_node::Request::Renew {
            seen: Vec::new(),
            since: None,
            hold_ms: 0,
        })
        .await;
    assert!(refused(&reply, RefusalCode::Forbidden), "{reply:?}");
}
