//! One module per subcommand.

pub mod diagnose;
pub mod version;
