//! The user's commands: `submit`, `jobs`, `job info|hold|release|urgency`, `cancel`,
//! `queue …`, `resource …` and
//! `reload`. Each parses its flags, asks the running system through a
//! [`shardsched_client::Client`] (found through `SHARDSCHED_DIR`), and prints the answer
//! for people ([`job_view`], [`cluster_view`], [`move_view`]) or as JSON for programs.

pub mod admin;
pub mod batch;
pub mod cluster_view;
pub mod history;
pub mod hold;
pub mod job_format;
pub mod job_options;
pub mod job_view;
pub mod jobs;
pub mod limits;
pub mod move_view;
pub mod output;
pub mod queue_config;
pub mod status;
pub mod submit;
