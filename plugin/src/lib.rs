//! The library behind `kubectl-hns`: the CLI layer parses and prints; the commands decide.

pub mod cli;
pub mod client;
pub mod commands;
pub mod complete;
pub mod fanout;
pub mod forest;
pub mod hns;
pub mod kinds;
pub mod kube_flags;
pub mod kubeconfig;
pub mod output;
pub mod paint;
pub mod prompt;
pub mod stdout;
pub mod table;
pub mod tree;
