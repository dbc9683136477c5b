//! `shardsched cert issue --role shard|admin|user|node --name N [--state-dir COORD_DIR] --out DIR`:
//! a key and certificate signed by the cluster CA.
//!
//! Writes `DIR/cert.pem`, `DIR/key.pem` (mode 0600) and a copy of the CA certificate,
//! `DIR/ca.pem`: everything a shard or a client needs. The CA lives in the coordinator's
//! state directory, which must already hold it (the coordinator creates it on first start):
//! a mistyped directory must not silently become a new CA that nobody trusts.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use shardsched_client::StateDir;
use shardsched_proto::ca::write_private;
use shardsched_proto::state_dir::{CA_CERT_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE};
use shardsched_proto::{Ca, Role};

/// Flags of `shardsched cert`.
#[derive(Args, Debug, Clone)]
pub struct CertArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: CertCommand,
}

/// `shardsched cert` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum CertCommand {
    /// Issues a key and certificate signed by the cluster CA.
    Issue(IssueArgs),
}

/// Flags of `shardsched cert issue`.
#[derive(Args, Debug, Clone)]
pub struct IssueArgs {
    /// The certificate's role.
    #[arg(long, value_enum)]
    pub role: RoleArg,
    /// The certificate's name: a queue's name for a shard, a person's for users and admins,
    /// a node's for a node agent.
    #[arg(long)]
    pub name: String,
    /// The coordinator's state directory, which holds the CA [default: the `coordinator`
    /// directory under $SHARDSCHED_DIR, or under the directory `shardsched up` uses].
    #[arg(long, value_name = "COORD_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Where to write cert.pem, key.pem and ca.pem (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The roles a certificate can be issued for here (the coordinator issues its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    /// A queue's shard.
    Shard,
    /// An administrator.
    Admin,
    /// A user.
    User,
    /// A node agent (named after its node).
    Node,
}

/// `shardsched cert`.
pub fn main(args: &CertArgs) -> Result<()> {
    match &args.command {
        CertCommand::Issue(issue) => issue_main(issue),
    }
}

fn issue_main(args: &IssueArgs) -> Result<()> {
    let ca_dir = match &args.state_dir {
        Some(dir) => dir.clone(),
        None => StateDir::from_env()?.coordinator_dir(),
    };
    let role = match args.role {
        RoleArg::Shard => Role::Shard,
        RoleArg::Admin => Role::Admin,
        RoleArg::User => Role::User,
        RoleArg::Node => Role::Node,
    };
    issue(&ca_dir, role, &args.name, &args.out)?;
    eprintln!(
        "issued certificate {role}/{} into {}",
        args.name,
        args.out.display()
    );
    Ok(())
}

/// Issues a certificate for `role`/`name` from the CA in `ca_dir` into `out`.
pub fn issue(ca_dir: &Path, role: Role, name: &str, out: &Path) -> Result<()> {
    if !ca_dir.join(CA_KEY_FILE).exists() {
        bail!(
            "no cluster CA in {} (no {CA_KEY_FILE}): start the coordinator once with \
             --state-dir {0}, or pass the coordinator's --state-dir",
            ca_dir.display()
        );
    }
    let ca =
        Ca::load(ca_dir).with_context(|| format!("loading the CA from {}", ca_dir.display()))?;
    let issued = ca.issue(role, name)?;
    create_private_dir(out)?;
    write_public(&out.join(CERT_FILE), &issued.cert_pem)?;
    write_private(&out.join(KEY_FILE), &issued.key_pem)?;
    write_public(&out.join(CA_CERT_FILE), ca.cert_pem())?;
    Ok(())
}

fn write_public(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Creates `dir` (and parents) with mode 0700 when missing: it holds private keys.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}
