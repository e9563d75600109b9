//! SwitchTx (seed 001) on PisaDB: commit coordination by gather-and-scatter on a tree of
//! switches. Work in progress (issue 18): not yet registered with the CLI.
