//! Jobspecs: what a job asks the scheduler for (Flux RFC 14, RFC 25 and RFC 31).
//!
//! A jobspec lists the resources a job needs as a tree of requests (`node[2] -> slot[1] ->
//! core[4]`), the tasks it runs in its slots, and attributes such as its duration, queue and
//! placement constraints. This crate reads jobspecs from YAML or JSON into the [`Jobspec`]
//! model that the matcher consumes, checks them, and writes them back as canonical JSON.
//!
//! Two forms are accepted:
//!
//! - **version 1** (RFC 25), what flux-core's submit tools produce: one top-level `node` or
//!   `slot`, only node/slot/core/gpu, integer counts, one task with `{per_slot: 1}` and a
//!   duration. Its restrictions are checked ([`Jobspec::check_version1`]); [`Shorthand`] builds
//!   one from `flux submit -N -n -c -g -t` style options.
//! - **the general form** (RFC 14 canonical jobspec; `version: 9999` as Fluxion's tests
//!   write it): any resource types at any depth, counts that are ranges
//!   (`{min, max, operator, operand}`, see [`Count`]), several top-level resources.
//!
//! [`parse_fluxion`] reads a jobspec as Fluxion's own reader does instead (any version from 1
//! to 9999, no RFC 25 shape rules): `shardsched query` uses it to answer as resource-query.
//!
//! Every error is a [`JobspecError`] naming the field path it is about, or the line and column
//! of a syntax error. No input makes the parser panic; texts longer than
//! [`JOBSPEC_BYTES_MAX`] or nesting deeper than [`JOBSPEC_DEPTH_MAX`] are refused.
//!
//! ```
//! use shardsched_jobspec::{parse, Count, CountOp, TaskCount};
//!
//! let js = parse(
//!     "version: 9999
//! resources:
//!   - type: node
//!     count: {min: 1, max: 8, operator: '*', operand: 2}
//!     with:
//!       - {type: slot, label: task, count: 2, with: [{type: core, count: 4}]}
//! tasks:
//!   - {command: [./sim], slot: task, count: {per_slot: 1}}
//! attributes:
//!   system: {duration: 90.5, constraints: {properties: [ssd]}}
//! ",
//! )
//! .unwrap();
//! let nodes = &js.resources[0];
//! assert_eq!(nodes.count.operator, CountOp::Mul);
//! assert_eq!(nodes.count.values().collect::<Vec<_>>(), vec![1, 2, 4, 8]);
//! assert_eq!(nodes.count.largest_fitting(5), Some(4));
//! assert_eq!(nodes.with[0].with[0].count, Count::exact(4));
//! assert_eq!(js.tasks[0].count, TaskCount::PerSlot(1));
//! assert_eq!(js.attributes.duration, 91); // fractional seconds round up
//!
//! // Canonical JSON parses back to the same jobspec.
//! let again = shardsched_jobspec::parse_json(&js.to_json().to_string()).unwrap();
//! assert_eq!(again, js);
//!
//! // Errors name the field.
//! let err = parse("version: 9999\nresources: [{type: node, count: x}]\ntasks: []\n").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "resources[0].count: expected an integer or a map with min/max/operator/operand, found string \"x\""
//! );
//! ```

pub mod constraint;
pub mod dependency;
pub mod duration;
pub mod error;
pub mod execution;
pub mod fluxion;
pub mod model;
pub mod options;
pub mod parse;
pub mod read;
pub mod shorthand;
mod validate;

pub use constraint::Constraint;
pub use dependency::{DependencyPolicy, JobDependency, Scheme, parse_dependency_arg};
pub use error::{Format, JobspecError};
pub use execution::{CarriedFile, Execution, TMPDIR_TEMPLATE, TemplateValues, job_name};
pub use fluxion::{parse_fluxion, parse_fluxion_noting};
pub use model::{
    Attributes, Count, CountOp, Jobspec, Resource, Task, TaskCount, VERSION_1, VERSION_GENERAL,
};
pub use options::Stream;
pub use parse::from_value;
pub use read::{JOBSPEC_BYTES_MAX, JOBSPEC_DEPTH_MAX, parse, parse_json, parse_yaml};
pub use shorthand::{SHORTHAND_SLOT_LABEL, Shorthand};
