//! One module per subcommand.

pub mod version;
