//! `pisadb systems`: what the registry holds — each system's paper, what it puts in the
//! switch, its variants, (with `--settings NAME`) every setting `--set` can edit, and (with
//! `--presets NAME`) its presets, every value with its provenance.

use crate::systems::registry;
use clap::Args as ClapArgs;
use serde_json::{json, Value};

/// Flags of `pisadb systems`.
#[derive(ClapArgs, Debug)]
pub(crate) struct Args {
    /// Print this system's default settings (the keys `--set` takes) as JSON.
    #[arg(long, value_name = "SYSTEM")]
    settings: Option<String>,
    /// Print this system's presets (`--preset NAME` of bench, compare, sweep, reproduce),
    /// every value with where it comes from: measured, stated or assumed.
    #[arg(long, value_name = "SYSTEM")]
    presets: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `pisadb systems`.
pub(crate) fn run(args: &Args) -> Result<(), String> {
    let registry = registry();
    if let Some(name) = &args.settings {
        let system = registry.get(name).map_err(|e| e.to_string())?;
        println!("{}", serde_json::to_string_pretty(&system.default_settings()).map_err(|e| e.to_string())?);
        return Ok(());
    }
    if let Some(name) = &args.presets {
        let system = registry.get(name).map_err(|e| e.to_string())?;
        let presets = system.presets();
        if args.json {
            println!("{}", serde_json::to_string_pretty(&presets).map_err(|e| e.to_string())?);
            return Ok(());
        }
        for preset in &presets {
            let aliases = if preset.aliases.is_empty() {
                String::new()
            } else {
                format!(" (also: {})", preset.aliases.join(", "))
            };
            println!("{}{aliases}", pisadb_harness::preset::describe(system, preset));
        }
        return Ok(());
    }
    if args.json {
        let systems: Vec<Value> = registry
            .systems()
            .iter()
            .map(|s| json!({ "name": s.name(), "paper": s.paper(), "summary": s.summary(), "variants": s.variants() }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&systems).map_err(|e| e.to_string())?);
        return Ok(());
    }
    // One column for every system's variant names, so the summaries line up.
    let width = registry.systems().iter().flat_map(|s| s.variants()).map(|v| v.name.len()).max().unwrap_or(0);
    for s in registry.systems() {
        println!("{}  {}", s.name(), s.paper());
        println!("    {}", s.summary());
        for v in s.variants() {
            println!("    --variant {:<width$} {}", v.name, v.summary);
        }
        println!();
    }
    println!("Run one with `pisadb bench --system NAME --variant VARIANT`; list a system's settings with");
    println!("`pisadb systems --settings NAME` and change one with `--set key=value`; list its presets,");
    println!("every value with where it comes from, with `pisadb systems --presets NAME`.");
    Ok(())
}
