//! Every scheme under the same checks: scripted cases of what each one must allow and refuse,
//! and random interleavings whose committed histories must be conflict-serializable.
//!
//! The interleaving harness runs a set of transactions (each reads its tuples in order, with
//! `Intent::Write` for those it writes, then writes, prepares and commits) by picking, at each
//! step, one transaction that can move, from a list of choices the property test draws. A
//! transaction that must abort aborts and is retried with its first timestamp, a few times. A
//! waiting transaction moves again when a grant names it. At the end nobody may still wait (no
//! deadlock), and the committed transactions, with the versions they read and overwrote, go
//! to `pisadb_check::History`.

use super::*;
use crate::id::Slot;
use pisadb_check::{CommittedTxn, History};
use pisadb_wire::node::OnConflict;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A test storage: a map of tuples, all present from the start.
#[derive(Debug, Default)]
struct MapStorage(BTreeMap<TupleKey, Tuple>);

impl MapStorage {
    fn with_keys(n: u64) -> Self {
        MapStorage((0..n).map(|r| (key(r), Tuple::default())).collect())
    }
}

impl Storage for MapStorage {
    fn get(&self, key: TupleKey) -> Option<Tuple> {
        self.0.get(&key).copied()
    }
    fn put(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        let slot = self.0.get_mut(&key).ok_or(StorageError::NotHeld { key })?;
        *slot = tuple;
        Ok(())
    }
    fn create(&mut self, key: TupleKey, tuple: Tuple) -> Result<(), StorageError> {
        match self.0.insert(key, tuple) {
            None => Ok(()),
            Some(_) => Err(StorageError::NotCreatable { key }),
        }
    }
    fn created_rows(&self) -> usize {
        0
    }
    fn scan(&self, visit: &mut dyn FnMut(TupleKey, Tuple)) {
        self.0.iter().for_each(|(&k, &t)| visit(k, t));
    }
}

fn key(r: u64) -> TupleKey {
    TupleKey::new(0, r)
}

/// Attempt `attempt` of test transaction `index`.
fn id(index: usize, attempt: u32) -> TxnId {
    Slot::new(0, 0, (index % 64) as u16, (index / 64) as u16).unwrap().attempt(attempt)
}

/// A transaction of the harness: its tuples in access order, each read and maybe written.
#[derive(Clone, Debug)]
struct Spec {
    accesses: Vec<(u64, bool)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Begin,
    Read(usize),
    Waiting(usize),
    Write,
    Prepare,
    Commit,
    Done,
}

struct Running {
    spec: Spec,
    index: usize,
    attempt: u32,
    step: Step,
    reads: Vec<(TupleKey, u64)>,
}

/// What a run of the harness produced.
#[derive(Debug)]
struct Outcome {
    history: History,
    committed: usize,
    aborts: usize,
    waits: usize,
    stuck: Vec<TxnId>,
}

const RETRIES: u32 = 4;

fn run<C: Concurrency>(cc: &mut C, specs: &[Spec], choices: &[u8]) -> Outcome {
    let mut storage = MapStorage::with_keys(8);
    let mut txns: Vec<Running> = specs
        .iter()
        .enumerate()
        .map(|(index, spec)| Running { spec: spec.clone(), index, attempt: 1, step: Step::Begin, reads: Vec::new() })
        .collect();
    let mut out = Outcome { history: History::new(), committed: 0, aborts: 0, waits: 0, stuck: Vec::new() };
    let mut work = Work::default();
    for step in 0.. {
        let movable: Vec<usize> =
            (0..txns.len()).filter(|&i| !matches!(txns[i].step, Step::Waiting(_) | Step::Done)).collect();
        if movable.is_empty() {
            break;
        }
        let pick = movable[usize::from(choices.get(step % choices.len().max(1)).copied().unwrap_or(0)) % movable.len()];
        let grants = advance(cc, &mut storage, &mut txns[pick], &mut out, &mut work);
        for g in grants {
            let t = txns.iter_mut().find(|t| id(t.index, t.attempt) == g.txn).expect("a grant names a transaction");
            let Step::Waiting(i) = t.step else { panic!("grant to {} which does not wait", g.txn) };
            assert_eq!(t.spec.accesses[i].0, g.key.row);
            t.reads.push((g.key, g.tuple.version));
            t.step = if i + 1 == t.spec.accesses.len() { Step::Write } else { Step::Read(i + 1) };
        }
    }
    out.stuck = txns.iter().filter(|t| t.step != Step::Done).map(|t| id(t.index, t.attempt)).collect();
    out
}

/// Moves `t` one step; returns the grants that step handed out.
fn advance<C: Concurrency>(
    cc: &mut C,
    storage: &mut MapStorage,
    t: &mut Running,
    out: &mut Outcome,
    work: &mut Work,
) -> Vec<Grant> {
    let txn = id(t.index, t.attempt);
    let result = match t.step {
        Step::Begin => cc.begin(txn, t.index as u64 + 1).map(|()| {
            t.step = if t.spec.accesses.is_empty() { Step::Write } else { Step::Read(0) };
            Vec::new()
        }),
        Step::Read(i) => {
            let (row, write) = t.spec.accesses[i];
            let intent = if write { Intent::Write } else { Intent::Read };
            cc.read(storage, txn, key(row), intent, work).map(|read| {
                match read {
                    Read::Done(tuple) => {
                        t.reads.push((key(row), tuple.version));
                        t.step = if i + 1 == t.spec.accesses.len() { Step::Write } else { Step::Read(i + 1) };
                    }
                    Read::Waiting => {
                        out.waits += 1;
                        t.step = Step::Waiting(i);
                    }
                }
                Vec::new()
            })
        }
        Step::Write => {
            let writes: Vec<u64> = t.spec.accesses.iter().filter(|a| a.1).map(|a| a.0).collect();
            writes.iter().try_for_each(|&row| cc.write(txn, key(row), row as i64 + 1, work)).map(|()| {
                t.step = Step::Prepare;
                Vec::new()
            })
        }
        Step::Prepare => cc.prepare(storage, txn, work).map(|()| {
            t.step = Step::Commit;
            Vec::new()
        }),
        Step::Commit => {
            let writes: Vec<(TupleKey, u64)> = t
                .spec
                .accesses
                .iter()
                .filter(|a| a.1)
                .map(|a| (key(a.0), storage.get(key(a.0)).unwrap().version))
                .collect();
            let grants = cc.commit(storage, txn, work);
            if grants.is_ok() {
                out.history.record(CommittedTxn { id: txn.bits(), reads: t.reads.clone(), writes });
                out.committed += 1;
                t.step = Step::Done;
            }
            grants
        }
        Step::Waiting(_) | Step::Done => unreachable!("only movable transactions are advanced"),
    };
    match result {
        Ok(grants) => grants,
        Err(TxnError::Fatal(e)) => panic!("{txn}: {e}"),
        Err(TxnError::Abort(_)) => {
            out.aborts += 1;
            let grants = cc.abort(storage, txn, work);
            assert!(!cc.is_active(txn));
            t.reads.clear();
            t.step = if t.attempt > RETRIES { Step::Done } else { Step::Begin };
            t.attempt += 1;
            grants
        }
    }
}

fn specs() -> impl Strategy<Value = Vec<Spec>> {
    let access = (0u64..6, prop::bool::weighted(0.5));
    let spec = prop::collection::vec(access, 1..5).prop_map(|mut accesses| {
        let mut seen = Vec::new();
        accesses.retain(|a| {
            let fresh = !seen.contains(&a.0);
            seen.push(a.0);
            fresh
        });
        Spec { accesses }
    });
    prop::collection::vec(spec, 2..8)
}

fn assert_serializable(out: &Outcome) -> Result<(), TestCaseError> {
    prop_assert!(out.stuck.is_empty(), "stuck waiting: {:?}", out.stuck);
    if let Err(v) = out.history.check() {
        return Err(TestCaseError::fail(format!("not serializable: {v}")));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_wait_interleavings_are_serializable(specs in specs(), choices in prop::collection::vec(any::<u8>(), 1..64)) {
        let out = run(&mut TwoPhaseLocking::new(OnConflict::Deny), &specs, &choices);
        assert_serializable(&out)?;
    }

    #[test]
    fn wait_die_interleavings_are_serializable_and_never_deadlock(specs in specs(), choices in prop::collection::vec(any::<u8>(), 1..64)) {
        let out = run(&mut TwoPhaseLocking::new(OnConflict::WaitDie), &specs, &choices);
        assert_serializable(&out)?;
    }

    #[test]
    fn occ_interleavings_are_serializable(specs in specs(), choices in prop::collection::vec(any::<u8>(), 1..64)) {
        let out = run(&mut Occ::new(), &specs, &choices);
        assert_serializable(&out)?;
    }

    #[test]
    fn timestamp_ordering_interleavings_are_serializable(specs in specs(), choices in prop::collection::vec(any::<u8>(), 1..64)) {
        let out = run(&mut TimestampOrdering::new(), &specs, &choices);
        assert_serializable(&out)?;
    }
}

/// The random runs exercise what they should: over a few hundred of them every scheme commits
/// and aborts, and WAIT_DIE also waits.
#[test]
fn random_runs_commit_abort_and_wait() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    let mut totals = [(0, 0, 0); 4];
    for _ in 0..300 {
        let specs = specs().new_tree(&mut runner).unwrap().current();
        let choices = prop::collection::vec(any::<u8>(), 1..64).new_tree(&mut runner).unwrap().current();
        let outs = [
            run(&mut TwoPhaseLocking::new(OnConflict::Deny), &specs, &choices),
            run(&mut TwoPhaseLocking::new(OnConflict::WaitDie), &specs, &choices),
            run(&mut Occ::new(), &specs, &choices),
            run(&mut TimestampOrdering::new(), &specs, &choices),
        ];
        for (total, out) in totals.iter_mut().zip(&outs) {
            *total = (total.0 + out.committed, total.1 + out.aborts, total.2 + out.waits);
        }
    }
    for (scheme, &(committed, aborts, waits)) in ["no-wait", "wait-die", "occ", "tso"].iter().zip(&totals) {
        assert!(committed > 500 && aborts > 50, "{scheme}: {committed} commits, {aborts} aborts");
        assert_eq!(waits > 0, *scheme == "wait-die", "{scheme}: {waits} waits");
    }
}

/// A scheme that checks nothing: reads see whatever is committed, writes go in at commit.
#[derive(Default)]
struct NoControl {
    writes: BTreeMap<TxnId, Vec<(TupleKey, i64)>>,
}

impl Concurrency for NoControl {
    fn begin(&mut self, txn: TxnId, _ts: Timestamp) -> Result<(), TxnError> {
        self.writes.insert(txn, Vec::new());
        Ok(())
    }
    fn read<S: Storage + ?Sized>(
        &mut self,
        storage: &S,
        _txn: TxnId,
        key: TupleKey,
        _intent: Intent,
        _work: &mut Work,
    ) -> Result<Read, TxnError> {
        Ok(Read::Done(stored(storage, key)))
    }
    fn write(&mut self, txn: TxnId, key: TupleKey, value: i64, _work: &mut Work) -> Result<(), TxnError> {
        self.writes.get_mut(&txn).unwrap().push((key, value));
        Ok(())
    }
    fn prepare<S: Storage + ?Sized>(&mut self, _storage: &S, _txn: TxnId, _work: &mut Work) -> Result<(), TxnError> {
        Ok(())
    }
    fn commit<S: Storage + ?Sized>(
        &mut self,
        storage: &mut S,
        txn: TxnId,
        _work: &mut Work,
    ) -> Result<Vec<Grant>, TxnError> {
        for (key, value) in self.writes.remove(&txn).unwrap() {
            storage.put(key, Tuple { value, version: txn.bits() }).unwrap();
        }
        Ok(Vec::new())
    }
    fn abort<S: Storage + ?Sized>(&mut self, _storage: &S, txn: TxnId, _work: &mut Work) -> Vec<Grant> {
        self.writes.remove(&txn);
        Vec::new()
    }
    fn is_active(&self, txn: TxnId) -> bool {
        self.writes.contains_key(&txn)
    }
    fn active(&self) -> usize {
        self.writes.len()
    }
}

/// The harness has teeth: with no concurrency control, interleaved read-modify-writes lose
/// updates, and the checker says so.
#[test]
fn the_harness_catches_a_scheme_that_checks_nothing() {
    let rmw = Spec { accesses: vec![(1, true)] };
    // T0 reads, T1 reads, T0 writes/prepares/commits, T1 writes/prepares/commits: a lost update.
    let choices = [0, 1, 0, 1, 0, 0, 0];
    let out = run(&mut NoControl::default(), &[rmw.clone(), rmw], &choices);
    assert_eq!(out.committed, 2);
    assert!(out.history.check().is_err(), "a lost update went unnoticed");
}

fn t(n: usize) -> TxnId {
    id(n, 1)
}

#[test]
fn two_phase_locking_denies_or_queues_by_policy_and_grants_on_release() {
    let mut storage = MapStorage::with_keys(4);
    let mut work = Work::default();
    let mut cc = TwoPhaseLocking::new(OnConflict::WaitDie);
    cc.begin(t(0), 10).unwrap();
    cc.begin(t(1), 5).unwrap();
    cc.begin(t(2), 20).unwrap();
    assert!(matches!(cc.read(&storage, t(0), key(1), Intent::Write, &mut work), Ok(Read::Done(_))));
    assert_eq!(cc.read(&storage, t(1), key(1), Intent::Read, &mut work), Ok(Read::Waiting), "older waits");
    assert_eq!(
        cc.read(&storage, t(2), key(1), Intent::Read, &mut work),
        Err(Conflict::LockDenied { key: key(1) }.into()),
        "younger dies"
    );
    assert_eq!(cc.abort(&storage, t(2), &mut work), Vec::new());
    assert_eq!(
        cc.read(&storage, t(1), key(2), Intent::Read, &mut work),
        Err(Misuse::Waiting { txn: t(1), key: key(1) }.into())
    );
    cc.write(t(0), key(1), 7, &mut work).unwrap();
    assert_eq!(cc.prepare(&storage, t(0), &mut work), Ok(()));
    let grants = cc.commit(&mut storage, t(0), &mut work).unwrap();
    let tuple = Tuple { value: 7, version: t(0).bits() };
    assert_eq!(grants, vec![Grant { txn: t(1), key: key(1), tuple }]);
    assert_eq!(cc.held_by(t(1)), 1);
    assert_eq!(cc.abort(&storage, t(1), &mut work), Vec::new());
    assert!(cc.lock_table().is_empty());
    assert_eq!(cc.active(), 0);
}

#[test]
fn two_phase_locking_counts_what_the_cost_model_prices() {
    let mut storage = MapStorage::with_keys(4);
    let mut cc = TwoPhaseLocking::new(OnConflict::Deny);
    let mut work = Work::default();
    cc.begin(t(0), 1).unwrap();
    cc.read(&storage, t(0), key(0), Intent::Read, &mut work).unwrap();
    cc.read(&storage, t(0), key(1), Intent::Write, &mut work).unwrap();
    cc.read(&storage, t(0), key(2), Intent::Unguarded, &mut work).unwrap();
    assert_eq!(work, Work { cc_ops: 2, tuple_ops: 3 }, "a lock per guarded read, a tuple per read");
    cc.write(t(0), key(1), 1, &mut work).unwrap();
    cc.write(t(0), key(2), 2, &mut work).unwrap();
    assert_eq!(
        cc.write(t(0), key(0), 3, &mut work),
        Err(Misuse::WriteWithoutLock { txn: t(0), key: key(0) }.into()),
        "a shared lock does not allow a write"
    );
    let mut work = Work::default();
    cc.commit(&mut storage, t(0), &mut work).unwrap();
    assert_eq!(work, Work { cc_ops: 2, tuple_ops: 2 }, "a tuple per write, a release per lock");

    // A denied request is withdrawn too on abort: one more lock-table operation.
    cc.begin(t(1), 1).unwrap();
    cc.begin(t(2), 2).unwrap();
    cc.read(&storage, t(1), key(3), Intent::Write, &mut work).unwrap();
    cc.read(&storage, t(2), key(0), Intent::Write, &mut work).unwrap();
    assert!(cc.read(&storage, t(2), key(3), Intent::Read, &mut work).is_err());
    let mut work = Work::default();
    cc.abort(&storage, t(2), &mut work);
    assert_eq!(work, Work { cc_ops: 2, tuple_ops: 0 });
}

#[test]
fn occ_aborts_a_reader_whose_tuple_changed_and_a_writer_that_finds_it_locked() {
    let mut storage = MapStorage::with_keys(4);
    let mut work = Work::default();
    let mut cc = Occ::new();
    for i in 0..3 {
        cc.begin(t(i), 0).unwrap();
    }
    cc.read(&storage, t(0), key(1), Intent::Write, &mut work).unwrap();
    cc.read(&storage, t(1), key(1), Intent::Read, &mut work).unwrap();
    cc.write(t(0), key(1), 5, &mut work).unwrap();
    cc.write(t(2), key(1), 6, &mut work).unwrap();
    cc.prepare(&storage, t(0), &mut work).unwrap();
    assert_eq!(cc.prepare(&storage, t(2), &mut work), Err(Conflict::Locked { key: key(1) }.into()));
    cc.abort(&storage, t(2), &mut work);
    assert_eq!(cc.prepare(&storage, t(1), &mut work), Err(Conflict::Locked { key: key(1) }.into()));
    cc.commit(&mut storage, t(0), &mut work).unwrap();
    assert_eq!(
        cc.prepare(&storage, t(1), &mut work),
        Err(Conflict::Changed { key: key(1), read_version: 0, current_version: t(0).bits() }.into())
    );
    cc.abort(&storage, t(1), &mut work);
    assert_eq!((cc.active(), cc.locked_tuples()), (0, 0));
    cc.begin(t(3), 0).unwrap();
    assert_eq!(cc.commit(&mut storage, t(3), &mut work), Err(Misuse::NotPrepared { txn: t(3) }.into()));
}

#[test]
fn timestamp_ordering_refuses_late_reads_and_writes() {
    let mut storage = MapStorage::with_keys(4);
    let mut work = Work::default();
    let mut cc = TimestampOrdering::new();
    cc.begin(t(0), 10).unwrap();
    cc.begin(t(1), 20).unwrap();
    cc.begin(t(2), 5).unwrap();
    cc.read(&storage, t(1), key(1), Intent::Read, &mut work).unwrap();
    assert_eq!(
        cc.write(t(0), key(1), 1, &mut work),
        Err(Conflict::TooLate { key: key(1), ts: 10, seen: 20 }.into()),
        "a younger transaction read it"
    );
    cc.abort(&storage, t(0), &mut work);
    cc.write(t(1), key(2), 2, &mut work).unwrap();
    assert_eq!(cc.read(&storage, t(2), key(2), Intent::Read, &mut work).map(|_| ()), Ok(()), "older reads the old");
    cc.begin(t(3), 30).unwrap();
    assert_eq!(
        cc.read(&storage, t(3), key(2), Intent::Read, &mut work),
        Err(Conflict::Pending { key: key(2) }.into()),
        "younger would miss a pending older write"
    );
    cc.commit(&mut storage, t(1), &mut work).unwrap();
    assert_eq!(
        cc.read(&storage, t(2), key(2), Intent::Write, &mut work),
        Err(Conflict::TooLate { key: key(2), ts: 5, seen: 20 }.into())
    );
}

#[test]
fn errors_say_whether_to_retry() {
    assert!(TxnError::from(Conflict::Locked { key: key(1) }).is_retryable());
    assert!(!TxnError::from(Misuse::UnknownTxn { txn: t(1) }).is_retryable());
    assert_eq!(
        TxnError::from(Conflict::TooLate { key: key(1), ts: 3, seen: 4 }).to_string(),
        "abort: timestamp 3 is too late for TupleKey { table: 0, row: 1 }, which a transaction with timestamp 4 already used"
    );
}
