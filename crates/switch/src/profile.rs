//! Switch profiles: every hardware figure the model uses, as a named parameter.
//!
//! Figures come from the open-sourced Tofino compiler sources and the seed papers, as collected
//! in `shared/GUIDE.md` §3. Where the hardware publishes no number (port-to-port latency, the
//! recirculation queue depth) the value is an assumption, marked as such: treat it as a knob,
//! not a measurement.

use serde::{Deserialize, Serialize};

/// The shape and timing of one switch ASIC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchProfile {
    /// Short name used on the command line (`tofino1`, `tofino2`).
    pub name: String,
    /// Independent pipelines; register state is not shared between them.
    pub pipes: u8,
    /// Match-action (MAU) stages per pipeline.
    pub stages_per_pipe: u8,
    /// Stateful ALUs, hence register arrays, per stage.
    pub salus_per_stage: u8,
    /// SRAM blocks per stage.
    pub sram_blocks_per_stage: u32,
    /// Bits per SRAM block (the allocation unit of register arrays).
    pub sram_block_bits: u64,
    /// Widest register cell a stateful ALU updates in one go (a pair counts both halves).
    pub salu_width_bits_max: u32,
    /// Comparisons a stateful ALU may evaluate for its condition.
    pub salu_comparisons_max: u8,
    /// Pipeline clock in Hz; one packet enters a pipe per clock.
    pub clock_hz: u64,
    /// Cycles a match-dependent stage adds to a pass.
    pub stage_cycles: u32,
    /// Extra cycles a stage with a stateful ALU adds.
    pub salu_stage_cycles: u32,
    /// Traffic manager, egress pipeline and MAC after the ingress pass, in ns (assumption).
    pub egress_ns: u64,
    /// Recirculation ports per pipe (loopback ports that feed packets back into ingress).
    pub recirc_ports_per_pipe: u8,
    /// Line rate of one recirculation port in bits per second.
    pub recirc_port_bits_per_s: u64,
    /// Packets a recirculation port queues before it drops (assumption).
    pub recirc_queue_packets: u32,
    /// Logical tables per stage: match tables, plus one for each register array (a stateful
    /// action is invoked from a table). Older configs without it load with Tofino's 16.
    #[serde(default = "default_tables_per_stage")]
    pub tables_per_stage: u8,
    /// Time the control plane takes to carry out one register or table operation and answer,
    /// in ns (assumption): the switch CPU's driver and a PCIe round trip to the ASIC. Operations
    /// are served one at a time. Older configs without it load with the default.
    #[serde(default = "default_control_plane_ns")]
    pub control_plane_ns: u64,
}

/// Logical table ids per MAU stage on Tofino 1 and 2 (`StageUse::MAX_LOGICAL_IDS` in the
/// open-sourced compiler, `bf-p4c/specs/mau_spec.h`).
pub const TOFINO_TABLES_PER_STAGE: u8 = 16;

/// Assumption: one control-plane register or table operation, driver and PCIe included, takes
/// tens of microseconds end to end; we take 20 µs. A knob, not a measurement.
pub const DEFAULT_CONTROL_PLANE_NS: u64 = 20_000;

fn default_tables_per_stage() -> u8 {
    TOFINO_TABLES_PER_STAGE
}

fn default_control_plane_ns() -> u64 {
    DEFAULT_CONTROL_PLANE_NS
}

impl SwitchProfile {
    /// Intel Tofino 1 (GUIDE §3).
    pub fn tofino1() -> Self {
        SwitchProfile {
            name: "tofino1".into(),
            pipes: 4,
            stages_per_pipe: 12,
            salus_per_stage: 4,
            // 80 blocks of 128 Kbit: about 10 Mbit of SRAM per stage.
            sram_blocks_per_stage: 80,
            sram_block_bits: 128 * 1024,
            // 32-bit cells, or a 64-bit pair of two 32-bit halves.
            salu_width_bits_max: 64,
            salu_comparisons_max: 2,
            clock_hz: 1_220_000_000,
            stage_cycles: 20,
            salu_stage_cycles: 4,
            // Assumption: puts port-to-port latency at ~0.45 µs with the 12-stage ingress
            // pass (~236 ns), within the "hundreds of ns" the vendor quotes.
            egress_ns: 200,
            // P4DB uses one fast port for lock holders and several for waiting packets.
            recirc_ports_per_pipe: 4,
            recirc_port_bits_per_s: 100_000_000_000,
            // Assumption: a shallow per-port queue; drops are counted, never silent.
            recirc_queue_packets: 64,
            tables_per_stage: TOFINO_TABLES_PER_STAGE,
            control_plane_ns: DEFAULT_CONTROL_PLANE_NS,
        }
    }

    /// Intel Tofino 2 (GUIDE §3): more stages, wider stateful ALUs, faster clock.
    pub fn tofino2() -> Self {
        SwitchProfile {
            name: "tofino2".into(),
            stages_per_pipe: 20,
            salu_width_bits_max: 128,
            salu_comparisons_max: 4,
            clock_hz: 1_350_000_000,
            stage_cycles: 23,
            ..Self::tofino1()
        }
    }

    /// The profile called `name`, or an error listing the accepted names.
    pub fn by_name(name: &str) -> Result<Self, String> {
        match name.to_ascii_lowercase().as_str() {
            "tofino1" => Ok(Self::tofino1()),
            "tofino2" => Ok(Self::tofino2()),
            other => Err(format!("unknown switch profile `{other}` (accepted: tofino1, tofino2)")),
        }
    }

    /// SRAM bits per stage.
    pub fn sram_bits_per_stage(&self) -> u64 {
        u64::from(self.sram_blocks_per_stage) * self.sram_block_bits
    }

    /// Cycles of one full pass through a pipe's stages, each with a stateful ALU.
    pub fn pass_cycles(&self) -> u64 {
        u64::from(self.stages_per_pipe) * u64::from(self.stage_cycles + self.salu_stage_cycles)
    }

    /// Nanoseconds of one full pass through a pipe (rounded up).
    pub fn pass_ns(&self) -> u64 {
        self.cycles_to_ns(self.pass_cycles())
    }

    /// Converts clock cycles to nanoseconds, rounding up.
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        // Every pass converts twice: 64-bit division while the product fits (a 128-bit one
        // is a library call), with the same result.
        match cycles.checked_mul(1_000_000_000) {
            Some(product) => product.div_ceil(self.clock_hz),
            None => (u128::from(cycles) * 1_000_000_000).div_ceil(u128::from(self.clock_hz)) as u64,
        }
    }

    /// Converts nanoseconds to whole clock cycles, rounding down.
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        match ns.checked_mul(self.clock_hz) {
            Some(product) => product / 1_000_000_000,
            None => (u128::from(ns) * u128::from(self.clock_hz) / 1_000_000_000) as u64,
        }
    }

    /// Nanoseconds a recirculation port takes to serialize `bytes` (rounded up).
    pub fn recirc_serialization_ns(&self, bytes: usize) -> u64 {
        match (bytes as u64).checked_mul(8_000_000_000) {
            Some(product) => product.div_ceil(self.recirc_port_bits_per_s),
            None => (bytes as u128 * 8 * 1_000_000_000).div_ceil(u128::from(self.recirc_port_bits_per_s)) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_64_bit_conversions_agree_with_the_128_bit_ones_up_to_and_past_overflow() {
        let p = SwitchProfile::tofino1();
        let wide_cycles = |c: u64| (u128::from(c) * 1_000_000_000).div_ceil(u128::from(p.clock_hz)) as u64;
        let wide_ns = |n: u64| (u128::from(n) * u128::from(p.clock_hz) / 1_000_000_000) as u64;
        let wide_ser = |b: usize| (b as u128 * 8 * 1_000_000_000).div_ceil(u128::from(p.recirc_port_bits_per_s)) as u64;
        let edge_ns = u64::MAX / p.clock_hz;
        let edge_cycles = u64::MAX / 1_000_000_000;
        for x in [0, 1, 7, 999, 1_000_000_007, edge_ns - 1, edge_ns, edge_ns + 1, u64::MAX / 2, u64::MAX] {
            assert_eq!(p.ns_to_cycles(x), wide_ns(x), "ns_to_cycles({x})");
        }
        for x in [0, 1, 7, 999, 1_000_000_007, edge_cycles - 1, edge_cycles, edge_cycles + 1, u64::MAX / 4] {
            assert_eq!(p.cycles_to_ns(x), wide_cycles(x), "cycles_to_ns({x})");
        }
        for b in [0, 1, 64, 1500, usize::MAX / 8_000_000_000, usize::MAX / 8_000_000_000 + 1, 1 << 40] {
            assert_eq!(p.recirc_serialization_ns(b), wide_ser(b), "recirc_serialization_ns({b})");
        }
    }

    #[test]
    fn tofino1_figures_match_the_guide() {
        let p = SwitchProfile::tofino1();
        assert_eq!(p.sram_bits_per_stage(), 10 * 1024 * 1024);
        assert_eq!(p.pass_cycles(), 288, "12 stages x (20 + 4) cycles, 'roughly 300'");
        assert_eq!(p.pass_ns(), 237);
        assert_eq!(p.recirc_serialization_ns(125), 10, "1000 bits at 100 Gbit/s");
    }

    #[test]
    fn profiles_are_found_by_name_and_unknown_names_list_the_choices() {
        assert_eq!(SwitchProfile::by_name("TOFINO2").unwrap().stages_per_pipe, 20);
        let err = SwitchProfile::by_name("tomahawk").unwrap_err();
        assert!(err.contains("tofino1, tofino2"), "{err}");
    }
}
