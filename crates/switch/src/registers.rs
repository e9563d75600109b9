//! Register memory of one pipe, and the per-pass door to it and to the tables.
//!
//! [`RegisterFile`] holds the cells of every array a program declared. During a pass, a
//! program reaches them, and the exact-match tables ([`crate::tables::TableFile`]), only
//! through a [`PassContext`], which enforces the access rules of the hardware on every call,
//! whatever the program believes:
//! - a packet touches each register array, and looks up each table, at most once per pass, and
//! - it touches arrays and tables in stage order (a stage is behind the packet once it moved
//!   on); arrays and tables share one notion of "the stage the pass has reached".
//!
//! Tables are read-only here: the data plane matches, the control plane writes.
//!
//! A program's `admit` step is meant to have ruled violations out already; the context's check
//! is the second line of defence, and a violation it finds is a bug in the program, which the
//! switch counts and reports. The checks cost a bit test and a compare per access.

use crate::alu::CompiledAction;
use crate::program::{ProgramSpec, RegisterArraySpec};
use crate::tables::TableFile;
use pisadb_core::Nanos;
use thiserror::Error;

/// The cells of one register array.
#[derive(Clone, Debug)]
struct ArrayState {
    stage: u8,
    width_bits: u32,
    lo: Vec<i64>,
    /// Empty unless the array is a pair.
    hi: Vec<i64>,
    actions: Vec<CompiledAction>,
}

/// All register arrays of one program in one pipe.
#[derive(Clone, Debug)]
pub struct RegisterFile {
    /// Position in `arrays` by register id; `u8::MAX` where no array has that id.
    slot_of: [u8; 64],
    arrays: Vec<ArrayState>,
}

/// A register access that breaks the hardware's rules or names nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum AccessError {
    /// No array has this id.
    #[error("no register array with id {0}")]
    UnknownRegister(u8),
    /// The array has no action with this number.
    #[error("register {register} has no action {action}")]
    UnknownAction {
        /// The array.
        register: u8,
        /// The action number.
        action: u8,
    },
    /// The index is past the array's end.
    #[error("register {register} has no entry {index}")]
    IndexOutOfRange {
        /// The array.
        register: u8,
        /// The index asked for.
        index: u32,
    },
    /// The array was already touched in this pass.
    #[error("register {0} touched twice in one pass")]
    TouchedTwice(u8),
    /// The array's stage is behind the packet.
    #[error("register {register} is in stage {stage}, but the pass already reached stage {reached}")]
    StageOrder {
        /// The array.
        register: u8,
        /// Its stage.
        stage: u8,
        /// The stage the pass had reached.
        reached: u8,
    },
    /// No table has this id.
    #[error("no table with id {0}")]
    UnknownTable(u8),
    /// The table was already looked up in this pass.
    #[error("table {0} looked up twice in one pass")]
    TableTwice(u8),
    /// The table's stage is behind the packet.
    #[error("table {table} is in stage {stage}, but the pass already reached stage {reached}")]
    TableStageOrder {
        /// The table.
        table: u8,
        /// Its stage.
        stage: u8,
        /// The stage the pass had reached.
        reached: u8,
    },
}

impl RegisterFile {
    /// Zeroed memory for the arrays of `spec` (which the switch has checked).
    pub fn new(spec: &ProgramSpec) -> Self {
        let mut slot_of = [u8::MAX; 64];
        let arrays = spec
            .arrays
            .iter()
            .enumerate()
            .map(|(slot, a): (usize, &RegisterArraySpec)| {
                slot_of[usize::from(a.id)] = slot as u8;
                let entries = a.entries as usize;
                ArrayState {
                    stage: a.stage,
                    width_bits: a.width_bits,
                    lo: vec![0; entries],
                    hi: if a.pair { vec![0; entries] } else { Vec::new() },
                    actions: a.actions.iter().map(|act| act.compile()).collect(),
                }
            })
            .collect();
        RegisterFile { slot_of, arrays }
    }

    fn slot(&self, register: u8) -> Result<usize, AccessError> {
        match self.slot_of.get(usize::from(register)) {
            Some(&s) if s != u8::MAX => Ok(usize::from(s)),
            _ => Err(AccessError::UnknownRegister(register)),
        }
    }

    /// Control-plane read of a cell: `(lo, hi)`, with `hi = 0` for non-pair arrays.
    pub fn read(&self, register: u8, index: u32) -> Result<(i64, i64), AccessError> {
        let a = &self.arrays[self.slot(register)?];
        let i = index as usize;
        let lo = *a.lo.get(i).ok_or(AccessError::IndexOutOfRange { register, index })?;
        Ok((lo, a.hi.get(i).copied().unwrap_or(0)))
    }

    /// Control-plane write of a cell (loading hot tuples, recovery). Values are wrapped to the
    /// array's width.
    pub fn write(&mut self, register: u8, index: u32, lo: i64, hi: i64) -> Result<(), AccessError> {
        let slot = self.slot(register)?;
        let a = &mut self.arrays[slot];
        let i = index as usize;
        let width = a.width_bits;
        *a.lo.get_mut(i).ok_or(AccessError::IndexOutOfRange { register, index })? = crate::alu::wrap(lo, width);
        if let Some(h) = a.hi.get_mut(i) {
            *h = crate::alu::wrap(hi, width);
        }
        Ok(())
    }
}

/// The tables of a pass over a program that declares none.
static NO_TABLES: TableFile = TableFile::EMPTY;

/// The registers and tables as one pass sees them, with the per-pass rules enforced.
pub struct PassContext<'a> {
    registers: &'a mut RegisterFile,
    /// The exact-match tables, read-only.
    tables: &'a TableFile,
    /// Bit `id` set once register `id` was touched in this pass.
    touched: u64,
    /// Bit `id` set once table `id` was looked up in this pass.
    tables_touched: u64,
    /// The highest stage the pass has reached.
    reached: u8,
    /// The switch's global transaction id counter.
    gid: &'a mut u64,
    /// When the packet entered this pass (Tofino's global ingress timestamp, intrinsic
    /// metadata): the driver's time, never a clock the program reads itself.
    ingress_ns: Nanos,
}

impl<'a> PassContext<'a> {
    /// A fresh pass over `registers` (and no tables), stamping ids from `gid`.
    pub fn new(registers: &'a mut RegisterFile, gid: &'a mut u64) -> Self {
        Self::with_tables(registers, &NO_TABLES, gid)
    }

    /// A fresh pass over `registers` and `tables`, stamping ids from `gid`.
    pub fn with_tables(registers: &'a mut RegisterFile, tables: &'a TableFile, gid: &'a mut u64) -> Self {
        PassContext { registers, tables, touched: 0, tables_touched: 0, reached: 0, gid, ingress_ns: 0 }
    }

    /// The same pass, entering the pipeline at `ingress_ns` (what [`PassContext::ingress_ns`]
    /// reports; 0 unless set).
    pub fn at(mut self, ingress_ns: Nanos) -> Self {
        self.ingress_ns = ingress_ns;
        self
    }

    /// When the packet entered this pass: the ingress timestamp a Tofino stamps in every
    /// packet's intrinsic metadata (48-bit nanoseconds), given by the switch's driver.
    pub fn ingress_ns(&self) -> Nanos {
        self.ingress_ns
    }

    /// Looks `key` up in exact-match table `table`: its value on a hit, `None` on a miss (a key
    /// wider than the table's key can never match). Like a register access, a lookup must not
    /// go back a stage and may happen once per table per pass; a refused lookup changes
    /// nothing.
    #[inline]
    pub fn lookup(&mut self, table: u8, key: u64) -> Result<Option<u64>, AccessError> {
        let (stage, value) = self.tables.lookup(table, key).ok_or(AccessError::UnknownTable(table))?;
        let bit = 1u64 << table;
        if self.tables_touched & bit != 0 {
            return Err(AccessError::TableTwice(table));
        }
        if stage < self.reached {
            return Err(AccessError::TableStageOrder { table, stage, reached: self.reached });
        }
        self.tables_touched |= bit;
        self.reached = stage;
        Ok(value)
    }

    /// The stage of `table`, if it exists.
    pub fn table_stage_of(&self, table: u8) -> Option<u8> {
        self.tables.stage_of(table)
    }

    /// Runs `action` of `register` on cell `index` with packet inputs `in1`, `in2`, and returns
    /// the action's output.
    #[inline]
    pub fn execute(&mut self, register: u8, action: u8, index: u32, in1: i64, in2: i64) -> Result<i64, AccessError> {
        let slot = self.registers.slot(register)?;
        let a = &mut self.registers.arrays[slot];
        let bit = 1u64 << register;
        if self.touched & bit != 0 {
            return Err(AccessError::TouchedTwice(register));
        }
        if a.stage < self.reached {
            return Err(AccessError::StageOrder { register, stage: a.stage, reached: self.reached });
        }
        let act = a.actions.get(usize::from(action)).ok_or(AccessError::UnknownAction { register, action })?;
        let i = index as usize;
        let lo = a.lo.get_mut(i).ok_or(AccessError::IndexOutOfRange { register, index })?;
        let mut no_hi = 0;
        let hi = a.hi.get_mut(i).unwrap_or(&mut no_hi);
        let out = act.apply(lo, hi, a.width_bits, in1, in2);
        self.touched |= bit;
        self.reached = a.stage;
        Ok(out)
    }

    /// Takes the next global transaction id (the serial order of switch transactions).
    pub fn stamp_gid(&mut self) -> u64 {
        *self.gid += 1;
        *self.gid
    }

    /// The stage of `register`, if it exists.
    pub fn stage_of(&self, register: u8) -> Option<u8> {
        self.registers.slot(register).ok().map(|s| self.registers.arrays[s].stage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alu::{Branch, Expr, RegisterAction};

    fn spec() -> ProgramSpec {
        let read = RegisterAction::always("read", Branch::keep(Expr::LO));
        let add = RegisterAction::always("add", Branch::set(Expr::LO.plus(Expr::IN1), Expr::LO));
        let array = |id, stage| RegisterArraySpec {
            id,
            name: format!("a{id}"),
            stage,
            entries: 4,
            width_bits: 32,
            pair: false,
            actions: vec![read.clone(), add.clone()],
        };
        ProgramSpec {
            name: "t".into(),
            arrays: vec![array(1, 1), array(2, 1), array(3, 2)],
            reserve_fast_recirc_port: false,
            tables: Vec::new(),
        }
    }

    #[test]
    fn a_pass_may_touch_each_array_once_in_stage_order() {
        let mut regs = RegisterFile::new(&spec());
        let mut gid = 0;
        let mut pass = PassContext::new(&mut regs, &mut gid);
        assert_eq!(pass.execute(1, 1, 0, 5, 0), Ok(0));
        assert_eq!(pass.execute(2, 1, 0, 7, 0), Ok(0), "another array of the same stage is fine");
        assert_eq!(pass.execute(1, 0, 0, 0, 0), Err(AccessError::TouchedTwice(1)));
        assert_eq!(pass.execute(3, 0, 9, 0, 0), Err(AccessError::IndexOutOfRange { register: 3, index: 9 }));
        assert_eq!(pass.execute(3, 0, 0, 0, 0), Ok(0));
        assert_eq!(pass.execute(2, 0, 0, 0, 0), Err(AccessError::TouchedTwice(2)));
        assert_eq!(regs.read(1, 0), Ok((5, 0)));
    }

    #[test]
    fn going_back_a_stage_is_refused() {
        let mut regs = RegisterFile::new(&spec());
        let mut gid = 0;
        let mut pass = PassContext::new(&mut regs, &mut gid);
        pass.execute(3, 0, 0, 0, 0).unwrap();
        assert_eq!(pass.execute(1, 0, 0, 0, 0), Err(AccessError::StageOrder { register: 1, stage: 1, reached: 2 }));
        assert_eq!(pass.execute(7, 0, 0, 0, 0), Err(AccessError::UnknownRegister(7)));
    }
}
