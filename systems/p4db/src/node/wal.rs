//! The write-ahead log: what a node must remember across a crash, and its on-disk format.
//!
//! ## What is logged, and when (P4DB §6.1, Appendix A.3)
//!
//! A node's handlers put [`LogRecord`]s in their [`crate::node::Outbox`]. The driver makes them
//! durable *before* it sends the handler's datagrams or reports its commits, so every effect
//! another party can see is backed by the log. Several handlers' records are made durable with
//! one `fsync` (group commit). Because the log is sequential, a transaction that read a value
//! another committed just before it (locks are released at once) is logged after it: a durable
//! reader implies a durable writer.
//!
//! - [`LogRecord::SwitchIntent`] before a switch transaction (hot, or a warm one's hot part) is
//!   sent: from then on it counts as committed, because it can no longer abort. It carries the
//!   packet, the coordinator's own cold writes and what is needed to finish it (the rows to
//!   insert once the switch's results are known).
//! - [`LogRecord::SwitchResult`] when the answer arrives: the switch's GID and results, and the
//!   rows inserted. The GIDs order the switch transactions when the switch is rebuilt.
//! - [`LogRecord::Committed`] when a transaction on the nodes commits at its coordinator, before
//!   its remote writers are told: the decision and the coordinator's writes (redo records).
//! - [`LogRecord::Prepared`] before a participant votes yes, with its writes;
//!   [`LogRecord::Resolved`] when it learns the outcome.
//! - [`LogRecord::Started`] when a node (re)starts: its incarnation, part of every transaction
//!   id it hands out, so ids never repeat across a crash.
//!
//! ## Format
//!
//! A record's bytes are a type byte and the record's fields, integers little-endian;
//! collections are a `u32` count and their items. Counts are checked against the bytes
//! present, so a corrupt count cannot make the reader allocate more than the record's size. In
//! a log file each record is one frame of the runtime's one framing (length, CRC32C; torn tails
//! and corruption: `pisadb_runtime::framed_log`), through [`pisadb_host::LogCodec`].

use pisadb_core::{Insert, InsertRow, TupleKey};

/// One entry of a node's write-ahead log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogRecord {
    /// The node started; transaction ids of this run carry `incarnation`.
    Started {
        /// Counts the node's starts from 0.
        incarnation: u16,
    },
    /// A switch transaction is about to be sent; it counts as committed.
    SwitchIntent {
        /// Its transaction id.
        txn: u64,
        /// The P4DB packet as sent (instructions, multicast group).
        packet: Vec<u8>,
        /// The coordinator's own cold writes (a warm transaction's), applied at once.
        local_writes: Vec<(TupleKey, i64)>,
        /// Remote nodes holding prepared writes of this transaction.
        writers: Vec<u16>,
        /// Outputs of the operations run on the nodes (indexed by operation; switch ones 0).
        outputs: Vec<i64>,
        /// The operation behind each instruction of the packet.
        instr_order: Vec<u16>,
        /// Rows to insert once the switch's results are known.
        inserts: Vec<Insert>,
    },
    /// The switch answered a logged switch transaction, and it committed.
    SwitchResult {
        /// Its transaction id.
        txn: u64,
        /// The switch's global transaction id.
        gid: u64,
        /// Each instruction's result, in packet order.
        results: Vec<i32>,
        /// The accumulator at the end.
        acc: i32,
        /// Rows inserted at commit.
        inserted: Vec<(TupleKey, i64)>,
        /// The node's insert sequence after them.
        insert_seq: u64,
    },
    /// A transaction on the nodes committed at its coordinator (this node).
    Committed {
        /// Its transaction id.
        txn: u64,
        /// Writes on this node's tuples.
        writes: Vec<(TupleKey, i64)>,
        /// Rows inserted at commit.
        inserted: Vec<(TupleKey, i64)>,
        /// The node's insert sequence after them.
        insert_seq: u64,
    },
    /// This node prepared a transaction of `coordinator`'s and votes yes.
    Prepared {
        /// The transaction id.
        txn: u64,
        /// Who decides.
        coordinator: u16,
        /// Its writes on this node's tuples.
        writes: Vec<(TupleKey, i64)>,
    },
    /// The outcome of a prepared transaction.
    Resolved {
        /// The transaction id.
        txn: u64,
        /// Committed (else aborted).
        commit: bool,
    },
}

impl LogRecord {
    /// The transaction the record is about (`None` for [`LogRecord::Started`]).
    pub fn txn(&self) -> Option<u64> {
        match *self {
            LogRecord::Started { .. } => None,
            LogRecord::SwitchIntent { txn, .. }
            | LogRecord::SwitchResult { txn, .. }
            | LogRecord::Committed { txn, .. }
            | LogRecord::Prepared { txn, .. }
            | LogRecord::Resolved { txn, .. } => Some(txn),
        }
    }
}

/// P4DB's records in a log file: the encoding of the module documentation.
impl pisadb_host::LogCodec for LogRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_payload(self, out)
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        decode_payload(payload).map_err(String::from)
    }
}

const STARTED: u8 = 1;
const SWITCH_INTENT: u8 = 2;
const SWITCH_RESULT: u8 = 3;
const COMMITTED: u8 = 4;
const PREPARED: u8 = 5;
const RESOLVED: u8 = 6;

fn encode_payload(record: &LogRecord, out: &mut Vec<u8>) {
    let mut w = Writer(out);
    match record {
        LogRecord::Started { incarnation } => {
            w.u8(STARTED);
            w.u16(*incarnation);
        }
        LogRecord::SwitchIntent { txn, packet, local_writes, writers, outputs, instr_order, inserts } => {
            w.u8(SWITCH_INTENT);
            w.u64(*txn);
            w.list(packet, |w, &b| w.u8(b));
            w.list(local_writes, Writer::kv);
            w.list(writers, |w, &n| w.u16(n));
            w.list(outputs, |w, &o| w.u64(o as u64));
            w.list(instr_order, |w, &i| w.u16(i));
            w.list(inserts, Writer::insert);
        }
        LogRecord::SwitchResult { txn, gid, results, acc, inserted, insert_seq } => {
            w.u8(SWITCH_RESULT);
            w.u64(*txn);
            w.u64(*gid);
            w.list(results, |w, &r| w.u32(r as u32));
            w.u32(*acc as u32);
            w.list(inserted, Writer::kv);
            w.u64(*insert_seq);
        }
        LogRecord::Committed { txn, writes, inserted, insert_seq } => {
            w.u8(COMMITTED);
            w.u64(*txn);
            w.list(writes, Writer::kv);
            w.list(inserted, Writer::kv);
            w.u64(*insert_seq);
        }
        LogRecord::Prepared { txn, coordinator, writes } => {
            w.u8(PREPARED);
            w.u64(*txn);
            w.u16(*coordinator);
            w.list(writes, Writer::kv);
        }
        LogRecord::Resolved { txn, commit } => {
            w.u8(RESOLVED);
            w.u64(*txn);
            w.u8(u8::from(*commit));
        }
    }
}

fn decode_payload(payload: &[u8]) -> Result<LogRecord, &'static str> {
    let mut r = Reader(payload);
    let record = match r.u8()? {
        STARTED => LogRecord::Started { incarnation: r.u16()? },
        SWITCH_INTENT => LogRecord::SwitchIntent {
            txn: r.u64()?,
            packet: r.list(1, Reader::u8)?,
            local_writes: r.list(18, Reader::kv)?,
            writers: r.list(2, Reader::u16)?,
            outputs: r.list(8, |r| r.u64().map(|v| v as i64))?,
            instr_order: r.list(2, Reader::u16)?,
            inserts: r.list(35, Reader::insert)?,
        },
        SWITCH_RESULT => LogRecord::SwitchResult {
            txn: r.u64()?,
            gid: r.u64()?,
            results: r.list(4, |r| r.u32().map(|v| v as i32))?,
            acc: r.u32()? as i32,
            inserted: r.list(18, Reader::kv)?,
            insert_seq: r.u64()?,
        },
        COMMITTED => LogRecord::Committed {
            txn: r.u64()?,
            writes: r.list(18, Reader::kv)?,
            inserted: r.list(18, Reader::kv)?,
            insert_seq: r.u64()?,
        },
        PREPARED => LogRecord::Prepared { txn: r.u64()?, coordinator: r.u16()?, writes: r.list(18, Reader::kv)? },
        RESOLVED => LogRecord::Resolved {
            txn: r.u64()?,
            commit: match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err("bad commit flag"),
            },
        },
        _ => return Err("unknown record type"),
    };
    if !r.0.is_empty() {
        return Err("trailing bytes in record");
    }
    Ok(record)
}

struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut Self, &T)) {
        self.u32(items.len() as u32);
        for i in items {
            item(self, i);
        }
    }
    fn kv(&mut self, &(key, value): &(TupleKey, i64)) {
        self.u16(key.table);
        self.u64(key.row);
        self.u64(value as u64);
    }
    fn insert(&mut self, insert: &Insert) {
        self.u16(insert.table);
        let (tag, op, base, stride) = match insert.row {
            InsertRow::FromOutput { op, base, stride } => (0, op as u64, base, stride),
            InsertRow::Sequence { base, stride } => (1, 0, base, stride),
        };
        self.u8(tag);
        self.u64(op);
        self.u64(base);
        self.u64(stride);
        self.u64(insert.value as u64);
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or("record cut short")?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    /// A counted list whose items take at least `min_item_bytes` each: a count the remaining
    /// bytes cannot hold is refused before anything is allocated.
    fn list<T>(
        &mut self,
        min_item_bytes: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, &'static str>,
    ) -> Result<Vec<T>, &'static str> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes) > self.0.len() {
            return Err("count larger than the record");
        }
        (0..n).map(|_| item(self)).collect()
    }
    fn kv(&mut self) -> Result<(TupleKey, i64), &'static str> {
        Ok((TupleKey::new(self.u16()?, self.u64()?), self.u64()? as i64))
    }
    fn insert(&mut self) -> Result<Insert, &'static str> {
        let table = self.u16()?;
        let tag = self.u8()?;
        let (op, base, stride, value) = (self.u64()?, self.u64()?, self.u64()?, self.u64()? as i64);
        let row = match tag {
            0 => InsertRow::FromOutput {
                op: usize::try_from(op).map_err(|_| "operation index out of range")?,
                base,
                stride,
            },
            1 if op == 0 => InsertRow::Sequence { base, stride },
            1 => return Err("a sequence insert names an operation"),
            _ => return Err("unknown insert kind"),
        };
        Ok(Insert { table, row, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisadb_runtime::framed_log;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = TupleKey> {
        (any::<u16>(), any::<u64>()).prop_map(|(t, r)| TupleKey::new(t, r))
    }

    fn kvs() -> impl Strategy<Value = Vec<(TupleKey, i64)>> {
        proptest::collection::vec((key(), any::<i64>()), 0..5)
    }

    fn insert() -> impl Strategy<Value = Insert> {
        let row = prop_oneof![
            (0usize..40, any::<u64>(), any::<u64>()).prop_map(|(op, base, stride)| InsertRow::FromOutput {
                op,
                base,
                stride
            }),
            (any::<u64>(), any::<u64>()).prop_map(|(base, stride)| InsertRow::Sequence { base, stride }),
        ];
        (any::<u16>(), row, any::<i64>()).prop_map(|(table, row, value)| Insert { table, row, value })
    }

    fn record() -> impl Strategy<Value = LogRecord> {
        prop_oneof![
            any::<u16>().prop_map(|incarnation| LogRecord::Started { incarnation }),
            (
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..40),
                kvs(),
                proptest::collection::vec(any::<u16>(), 0..4),
                proptest::collection::vec(any::<i64>(), 0..8),
                proptest::collection::vec(any::<u16>(), 0..8),
                proptest::collection::vec(insert(), 0..3),
            )
                .prop_map(|(txn, packet, local_writes, writers, outputs, instr_order, inserts)| {
                    LogRecord::SwitchIntent { txn, packet, local_writes, writers, outputs, instr_order, inserts }
                }),
            (
                any::<u64>(),
                any::<u64>(),
                proptest::collection::vec(any::<i32>(), 0..8),
                any::<i32>(),
                kvs(),
                any::<u64>()
            )
                .prop_map(|(txn, gid, results, acc, inserted, insert_seq)| LogRecord::SwitchResult {
                    txn,
                    gid,
                    results,
                    acc,
                    inserted,
                    insert_seq
                }),
            (any::<u64>(), kvs(), kvs(), any::<u64>()).prop_map(|(txn, writes, inserted, insert_seq)| {
                LogRecord::Committed { txn, writes, inserted, insert_seq }
            }),
            (any::<u64>(), any::<u16>(), kvs()).prop_map(|(txn, coordinator, writes)| LogRecord::Prepared {
                txn,
                coordinator,
                writes
            }),
            (any::<u64>(), any::<bool>()).prop_map(|(txn, commit)| LogRecord::Resolved { txn, commit }),
        ]
    }

    fn encode_all(records: &[LogRecord]) -> Vec<u8> {
        let mut bytes = Vec::new();
        records.iter().for_each(|r| framed_log::append(r, &mut bytes));
        bytes
    }

    proptest! {
        #[test]
        fn records_read_back_as_written(records in proptest::collection::vec(record(), 0..20)) {
            let bytes = encode_all(&records);
            let read = framed_log::read::<LogRecord>(&bytes).unwrap();
            prop_assert_eq!(read.records, records);
            prop_assert_eq!(read.valid_bytes, bytes.len());
            prop_assert_eq!(read.torn_tail, None);
        }

        /// A crash cuts the last write short anywhere: every whole record before it survives,
        /// the torn part is reported, and nothing of it is replayed.
        #[test]
        fn a_torn_tail_is_dropped_and_reported(records in proptest::collection::vec(record(), 1..10), cut in any::<prop::sample::Index>()) {
            let whole = encode_all(&records[..records.len() - 1]);
            let bytes = encode_all(&records);
            let len = whole.len() + cut.index(bytes.len() - whole.len());
            let read = framed_log::read::<LogRecord>(&bytes[..len]).unwrap();
            prop_assert_eq!(&read.records[..], &records[..records.len() - 1]);
            prop_assert_eq!(read.valid_bytes, whole.len());
            prop_assert_eq!(read.torn_tail.is_some(), len > whole.len());
        }

        /// Flipping a bit of a record that is followed by another is corruption, whatever
        /// field it hits (a length that now swallows the rest included): refused with the
        /// offset, never replayed, nothing after it dropped.
        #[test]
        fn damage_before_the_tail_is_refused(records in proptest::collection::vec(record(), 2..10), which in any::<prop::sample::Index>(), bit in 0u8..8) {
            let bytes = encode_all(&records);
            let first_len = encode_all(&records[..1]).len();
            let mut damaged = bytes.clone();
            damaged[which.index(first_len)] ^= 1 << bit;
            let err = framed_log::read::<LogRecord>(&damaged).unwrap_err();
            prop_assert_eq!((err.offset, err.next_record_at), (0, first_len));
        }

        /// Arbitrary bytes never panic and never allocate beyond what is there.
        #[test]
        fn arbitrary_bytes_are_read_or_refused(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = framed_log::read::<LogRecord>(&bytes);
        }
    }
}
