//! What a program may declare: register arrays and exact-match tables at load time (stateful
//! ALUs, SRAM, logical tables, ids, stages, widths, comparisons), and tables in a pass.

use pisadb_switch::alu::{Branch, CmpOp, Combine, Comparison, Expr, RegisterAction};
use pisadb_switch::registers::{AccessError, PassContext, RegisterFile};
use pisadb_switch::{LoadError, ProgramSpec, RegisterArraySpec, SwitchProfile, TableFile, TableSpec};

fn array(id: u8, stage: u8, entries: u32) -> RegisterArraySpec {
    RegisterArraySpec {
        id,
        name: format!("a{id}"),
        stage,
        entries,
        width_bits: 32,
        pair: false,
        actions: vec![RegisterAction::always("read", Branch::keep(Expr::LO))],
    }
}

fn table(id: u8, name: &str, stage: u8, key_bits: u32, value_bits: u32, entries: u32) -> TableSpec {
    TableSpec { id, name: name.into(), stage, key_bits, value_bits, entries }
}

fn spec(arrays: Vec<RegisterArraySpec>, tables: Vec<TableSpec>) -> ProgramSpec {
    ProgramSpec { name: "t".into(), arrays, reserve_fast_recirc_port: false, tables }
}

#[test]
fn a_table_costs_sram_words_packed_by_entry_width_in_128_kbit_blocks() {
    let p = SwitchProfile::tofino1();
    // 16 + 8 + 4 = 28 bits: 4 entries per 128-bit word, 1024 words per block.
    assert_eq!(table(1, "t", 0, 16, 8, 4096).blocks(&p), 1);
    assert_eq!(table(1, "t", 0, 16, 8, 4097).blocks(&p), 2);
    // 32 + 32 + 4 = 68 bits: one entry per word.
    assert_eq!(table(1, "t", 0, 32, 32, 40_960).blocks(&p), 40);
    // 64 + 64 + 4 = 132 bits: two words per entry.
    assert_eq!(table(1, "t", 0, 64, 64, 2048).blocks(&p), 4);
    assert_eq!(table(1, "t", 0, 64, 0, 1).blocks(&p), 1, "a table takes at least one block");
}

#[test]
fn a_table_that_does_not_fit_beside_the_arrays_of_its_stage_is_refused_naming_it() {
    let p = SwitchProfile::tofino1();
    // Two arrays of 131072 x 32 bit take 64 of stage 2's 80 blocks; the table needs 40 more.
    let arrays = vec![array(1, 2, 131_072), array(2, 2, 131_072)];
    let big = table(1, "session_index", 2, 32, 32, 40_960);
    let err = spec(arrays.clone(), vec![big.clone()]).check(&p).unwrap_err();
    let expected =
        LoadError::TableSramExceeded { table: "session_index".into(), stage: 2, needed: 40, used: 64, max: 80 };
    assert_eq!(err, expected);
    let message = err.to_string();
    assert!(message.contains("session_index") && message.contains("stage 2") && message.contains("80"), "{message}");
    assert!(spec(arrays.clone(), vec![table(1, "small", 2, 32, 32, 16_384)]).check(&p).is_ok(), "16 blocks fit");
    assert!(spec(arrays, vec![TableSpec { stage: 3, ..big }]).check(&p).is_ok(), "another stage has room");
}

#[test]
fn tables_of_one_stage_add_up() {
    let p = SwitchProfile::tofino1();
    let half = |id, name: &str| table(id, name, 4, 32, 32, 40_960);
    let err = spec(vec![], vec![half(1, "first"), half(2, "second"), half(3, "third")]).check(&p).unwrap_err();
    assert!(matches!(&err, LoadError::TableSramExceeded { table, used: 80, .. } if table == "third"), "{err:?}");
}

#[test]
fn a_stage_holds_at_most_its_logical_tables_counting_one_per_register_array() {
    let p = SwitchProfile::tofino1();
    let tables = |n: u8| (1..=n).map(|id| table(id, &format!("t{id}"), 5, 8, 8, 16)).collect::<Vec<_>>();
    let arrays = vec![array(1, 5, 16), array(2, 5, 16)];
    assert!(spec(arrays.clone(), tables(14)).check(&p).is_ok());
    let err = spec(arrays, tables(15)).check(&p).unwrap_err();
    assert_eq!(err, LoadError::TooManyTables { stage: 5, count: 17, arrays: 2, max: 16 });
}

#[test]
fn table_ids_stages_widths_and_sizes_must_be_valid() {
    let p = SwitchProfile::tofino1();
    let check = |t: Vec<TableSpec>| spec(vec![], t).check(&p).unwrap_err();
    assert!(matches!(check(vec![table(0, "z", 1, 8, 8, 1)]), LoadError::BadTableId { id: 0, .. }));
    assert!(matches!(check(vec![table(64, "z", 1, 8, 8, 1)]), LoadError::BadTableId { id: 64, .. }));
    assert!(matches!(
        check(vec![table(3, "a", 1, 8, 8, 1), table(3, "b", 2, 8, 8, 1)]),
        LoadError::BadTableId { id: 3, ref table } if table == "b"
    ));
    assert!(matches!(check(vec![table(1, "z", 12, 8, 8, 1)]), LoadError::TableNoSuchStage { stage: 12, last: 11, .. }));
    let err = check(vec![table(1, "wide", 1, 80, 8, 1)]);
    assert_eq!(err, LoadError::BadTableField { table: "wide".into(), field: "key_bits", value: 80, min: 1, max: 64 });
    assert!(err.to_string().contains("accepted values are 1..=64"), "{err}");
    assert!(matches!(check(vec![table(1, "z", 1, 0, 8, 1)]), LoadError::BadTableField { field: "key_bits", .. }));
    assert!(matches!(check(vec![table(1, "z", 1, 8, 65, 1)]), LoadError::BadTableField { field: "value_bits", .. }));
    assert!(matches!(check(vec![table(1, "z", 1, 8, 8, 0)]), LoadError::BadTableField { field: "entries", .. }));
    assert!(spec(vec![], vec![table(1, "set", 1, 64, 0, 1)]).check(&p).is_ok(), "a hit/miss table has no value");
}

#[test]
fn a_pass_reads_each_table_once_and_never_behind_the_stage_it_reached() {
    let s = spec(vec![array(1, 2, 4)], vec![table(1, "early", 1, 8, 8, 4), table(2, "late", 2, 8, 8, 4)]);
    let mut registers = RegisterFile::new(&s);
    let mut tables = TableFile::new(&s);
    tables.insert(2, 9, 99).unwrap();
    let mut gid = 0;
    let mut pass = PassContext::with_tables(&mut registers, &tables, &mut gid);
    assert_eq!(pass.lookup(1, 9), Ok(None), "a miss");
    assert_eq!(pass.lookup(1, 9), Err(AccessError::TableTwice(1)));
    assert_eq!(pass.execute(1, 0, 0, 0, 0), Ok(0), "the array of stage 2 after a table of stage 1");
    assert_eq!(pass.lookup(2, 9), Ok(Some(99)), "a table in the stage reached is fine");
    assert_eq!(pass.lookup(7, 0), Err(AccessError::UnknownTable(7)));

    let mut pass = PassContext::with_tables(&mut registers, &tables, &mut gid);
    assert_eq!(pass.lookup(2, 1), Ok(None));
    assert_eq!(pass.lookup(1, 1), Err(AccessError::TableStageOrder { table: 1, stage: 1, reached: 2 }));
}

fn check(arrays: Vec<RegisterArraySpec>) -> Result<(), LoadError> {
    ProgramSpec { name: "t".into(), arrays, reserve_fast_recirc_port: false, tables: Vec::new() }
        .check(&SwitchProfile::tofino1())
}

#[test]
fn a_stage_holds_at_most_its_stateful_alus() {
    let err = check((1..=5).map(|id| array(id, 3, 16)).collect()).unwrap_err();
    assert_eq!(err, LoadError::TooManyArrays { stage: 3, count: 5, max: 4 });
    assert!(err.to_string().contains("only 4 stateful ALUs"), "{err}");
    assert!(check((1..=4).map(|id| array(id, 3, 16)).collect()).is_ok());
}

#[test]
fn a_stage_holds_at_most_its_sram() {
    // 3 x 131072 x 32 bit = 12 Mbit > 10 Mbit per stage.
    let err = check((1..=3).map(|id| array(id, 2, 131_072)).collect()).unwrap_err();
    assert!(matches!(err, LoadError::SramExceeded { stage: 2, needed: 96, max: 80, .. }), "{err:?}");
    assert!(check((1..=2).map(|id| array(id, 2, 131_072)).collect()).is_ok(), "8 Mbit fits");
}

#[test]
fn stages_ids_and_widths_must_exist() {
    assert!(matches!(check(vec![array(1, 12, 16)]).unwrap_err(), LoadError::NoSuchStage { stage: 12, last: 11, .. }));
    assert!(matches!(
        check(vec![array(1, 1, 16), array(1, 2, 16)]).unwrap_err(),
        LoadError::BadRegisterId { id: 1, .. }
    ));
    assert!(matches!(check(vec![array(0, 1, 16)]).unwrap_err(), LoadError::BadRegisterId { id: 0, .. }));
    let mut wide = array(1, 1, 16);
    wide.width_bits = 64;
    wide.pair = true;
    assert!(
        matches!(check(vec![wide]).unwrap_err(), LoadError::BadWidth { .. }),
        "a 128-bit pair exceeds Tofino 1's 64-bit ALU"
    );
}

#[test]
fn actions_beyond_the_stateful_alu_are_refused() {
    let c = Comparison::new(Expr::LO, CmpOp::Gt);
    let mut a = array(1, 1, 16);
    a.actions = vec![RegisterAction::when(
        "three_way",
        vec![c, c, c],
        Combine::All,
        Branch::keep(Expr::LO),
        Branch::keep(Expr::LO),
    )];
    let err = check(vec![a.clone()]).unwrap_err();
    assert!(err.to_string().contains("at most 2"), "{err}");
    let tofino2 =
        ProgramSpec { name: "t".into(), arrays: vec![a], reserve_fast_recirc_port: false, tables: Vec::new() };
    assert!(tofino2.check(&SwitchProfile::tofino2()).is_ok(), "Tofino 2 evaluates 4 comparisons");
}
