//! Why is a namespace stuck in `Terminating`, and what is the safe way out.
//!
//! ```text
//!  scan     (I/O, reads)   namespaces, APIServices, discovery, leftovers, webhooks, CRDs
//!    │ Evidence
//!  causes   (pure)         the causes in the order to fix them, each with its evidence, its
//!    │ Diagnosis           risk and its remedy (remedy: the exact, guarded API calls)
//!  fix      (I/O, writes)  one remedy at a time, as plan (pure) decides, its calls made by
//!                          apply; a re-scan after each; "fixed" only on a 404
//!  report   (pure)         text and JSON; past one stuck namespace, led by summary (pure):
//!                          each root cause once, with the namespaces it blocks
//! ```
//!
//! The namespace controller already records what went wrong in five conditions on the
//! namespace; the diagnosis reads them first and backs every cause with evidence gathered from
//! the API (never from timing alone). Everything here works on any cluster from 1.20 on, with or
//! without hns, and needs only read rights until a fix is applied.
//!
//! A library of its own, so that a team without hns can use it and it can ship as a kubectl
//! plugin of its own: it depends on no part of hns but `hns-api`, for the keys HNC and hns
//! write on hierarchies (hnc.x-k8s.io) and kubectl's way of printing a duration. The caller
//! brings the terminal: [`report::Style`] colours the report, [`Progress`] shows the scan, and
//! [`FixUi`] asks before each remedy. `kubectl hns diagnose` is one such caller.

pub mod access;
pub mod apply;
pub mod causes;
pub mod conditions;
pub mod controllers;
pub mod discovery;
pub mod error;
pub mod evidence;
pub mod finalizers;
pub mod fix;
pub mod nodes;
pub mod plan;
pub mod remedy;
pub mod report;
pub mod scan;
pub mod summary;
pub mod webhooks;

pub use causes::{diagnose, Cause, CauseKind, Diagnosis, NamespaceDiagnosis, NamespaceStatus};
pub use error::{Error, Result};
pub use evidence::Evidence;
pub use fix::{fix, FixEvent, FixOptions, FixReport, FixUi};
pub use plan::Outcome;
pub use remedy::{Action, Remedy};
pub use scan::{scan, Progress, Target};
