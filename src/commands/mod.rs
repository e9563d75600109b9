//! The subcommands. Each returns `Err(message)` for the user; `main` prints it and exits 2.

pub(crate) mod bench;
pub(crate) mod fuzz;
pub(crate) mod layout;
pub(crate) mod merge;
pub(crate) mod perf;
pub(crate) mod real;
pub(crate) mod reproduce;
pub(crate) mod sweep;
pub(crate) mod systems;
