//! Placeholder, filled in with the host handlers.
fn main() {}
