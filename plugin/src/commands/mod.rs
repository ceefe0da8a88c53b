//! One module per subcommand.

pub mod completion;
pub mod config;
pub mod create;
pub mod delete;
pub mod describe;
pub mod diagnose;
pub mod export;
pub mod get;
pub mod hrq;
pub mod set;
pub mod tree;
pub mod version;
