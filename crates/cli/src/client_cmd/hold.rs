//! `shardsched job hold|release ID…` and `job urgency ID N`: a pending job's urgency (Flux's
//! 0..=31), 0 being held. Each id goes to the shard that issued it; each shard checks the
//! owner (an admin may change anyone's job) and, on the wire, that an urgency above 16 comes
//! from an admin.

use anyhow::{Result, bail};
use clap::Args;
use shardsched_client::run;
use shardsched_proto::array::JobRef;
use shardsched_proto::limits::{URGENCY_DEFAULT, URGENCY_HOLD, URGENCY_MAX};
use shardsched_proto::msg::JobId;
use shardsched_proto::msg::client_shard::{Request, Response, UrgencyChange, UrgencyResult};

use super::jobs::{ask_by_shard, job_ids};

/// Jobs named by id.
#[derive(Args, Debug, Clone)]
pub struct JobIdsArgs {
    /// The jobs: F58 ids like ƒ2KEkBMqV (or f2KEkBMqV, with an ASCII f), or decimal; an
    /// array's id names all its elements, ID[N] one.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<JobRef>,
}

/// Flags of `shardsched job urgency`.
#[derive(Args, Debug, Clone)]
pub struct UrgencyArgs {
    /// The job (an array's id: all its elements; ID[N]: one).
    pub id: JobRef,
    /// Its new urgency: 0-31, `default` (16), `hold` (0) or `expedite` (31).
    #[arg(value_parser = urgency_arg)]
    pub urgency: u8,
}

/// An urgency as typed: 0..=31, or Flux's words `default`, `hold`, `expedite`.
pub fn urgency_arg(text: &str) -> Result<u8, String> {
    match text {
        "default" => Ok(URGENCY_DEFAULT),
        "hold" => Ok(URGENCY_HOLD),
        "expedite" => Ok(URGENCY_MAX),
        number => match number.parse::<u8>() {
            Ok(u) if u <= URGENCY_MAX => Ok(u),
            _ => Err(format!(
                "{number:?} is not an urgency (0-{URGENCY_MAX}, default, hold or expedite)"
            )),
        },
    }
}

/// `shardsched job hold`.
pub fn hold_main(args: &JobIdsArgs) -> Result<()> {
    change(&job_ids(&args.ids)?, UrgencyChange::Hold, "held")
}

/// `shardsched job release`.
pub fn release_main(args: &JobIdsArgs) -> Result<()> {
    change(&job_ids(&args.ids)?, UrgencyChange::Release, "released")
}

/// `shardsched job urgency`.
pub fn urgency_main(args: &UrgencyArgs) -> Result<()> {
    let ids = job_ids(&[args.id])?;
    change(&ids, UrgencyChange::Set(args.urgency), "changed")
}

/// Applies `change` to `ids`: quiet on success, one line per job left as it was, and a
/// failure exit status if any was not.
fn change(ids: &[JobId], change: UrgencyChange, done: &str) -> Result<()> {
    run(|client| async move {
        let routes = client.routes().await?;
        let failures = ask_by_shard(
            &client,
            &routes,
            ids,
            |ids| Request::Urgency { ids, change },
            |queue, response| {
                let Response::Urgency(outcomes) = response else {
                    bail!("queue {queue}'s shard answered an urgency change with {response:?}");
                };
                let mut failures = 0;
                for outcome in outcomes {
                    let why = match outcome.result {
                        UrgencyResult::Set(_) => continue,
                        UrgencyResult::NotPending => "not pending (running or ended)".to_owned(),
                        UrgencyResult::NotFound => format!("no such job in queue {queue}"),
                        UrgencyResult::Forbidden => {
                            "not your job (only its owner or an admin may change it)".to_owned()
                        }
                    };
                    eprintln!("shardsched: {}: {why}", outcome.id);
                    failures += 1;
                }
                Ok(failures)
            },
        )
        .await?;
        if failures > 0 {
            bail!("{failures} of {} jobs not {done}", ids.len());
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgencies_are_numbers_to_31_or_fluxs_words() {
        assert_eq!(urgency_arg("0"), Ok(0));
        assert_eq!(urgency_arg("31"), Ok(31));
        assert_eq!(urgency_arg("default"), Ok(16));
        assert_eq!(urgency_arg("hold"), Ok(0));
        assert_eq!(urgency_arg("expedite"), Ok(31));
        assert!(urgency_arg("32").is_err());
        assert!(urgency_arg("-1").is_err());
        assert!(urgency_arg("high").is_err());
    }
}
