//! The subcommands. Each returns `Err(message)` for the user; `main` prints it and exits 2.

pub mod bench;
pub mod experiments;
pub mod fuzz;
pub mod layout;
pub mod real;
pub mod reproduce;
pub mod sweep;
pub mod systems;
