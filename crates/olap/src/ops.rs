//! The operators of the executor, each a function from batches to batches.
//!
//! A plan is a sequence of calls; a segment of an MPP database runs its share of them over its
//! own rows, and the motions move rows between segments:
//!
//! - [`filter`], [`project`]: scan-side work (the scan itself is the batch a segment holds).
//! - [`hash_join`]: an inner equi-join whose build side has unique keys (a primary key, or the
//!   output of a group-by: every join of Q20's plan), building a [`KeyTable`] and probing it
//!   row by row; [`semi_join`] keeps the probe rows that match.
//! - [`hash_aggregate`]: group by one or two key columns, summing others. The same function is
//!   the local aggregation (over a segment's rows) and the global one (over partial sums
//!   redistributed by group): sums of sums are sums.
//! - Motions: [`redistribute`] splits a batch by the segment its key hashes to
//!   ([`segment_of`], the one distribution function of the whole system, which the switch's
//!   distribution table reproduces), [`broadcast`] copies it to every segment, [`gather`]
//!   concatenates segments' batches in segment order.
//! - [`sort`]: a stable sort by key columns.
//!
//! Keys are one column or two packed into a `u64` ([`crate::keytable::pack2`]): Q20 joins and
//! groups on `partkey` or on (`partkey`, `suppkey`).

use crate::batch::Batch;
use crate::keytable::{pack2, KeyTable};

/// Buckets of the distribution function: a segment owns the buckets `b` with
/// `b % segments == segment`.
pub const DISTRIBUTION_BUCKETS: u32 = 256;

/// The bucket of a (packed) key: the low byte of its CRC32 over its 8 little-endian bytes.
#[inline]
pub fn bucket_of(key: u64) -> u32 {
    crc32fast::hash(&key.to_le_bytes()) % DISTRIBUTION_BUCKETS
}

/// The segment, of `segments`, that owns a (packed) key.
#[inline]
pub fn segment_of(key: u64, segments: usize) -> usize {
    bucket_of(key) as usize % segments
}

/// The packed key of every row over one or two key columns.
pub fn keys(b: &Batch, key_cols: &[&str]) -> Vec<u64> {
    match key_cols {
        [k] => b.col(k).iter().map(|&v| v as u64).collect(),
        [k1, k2] => b.col(k1).iter().zip(b.col(k2)).map(|(&a, &c)| pack2(a, c)).collect(),
        _ => panic!("keys are one or two columns, not {}", key_cols.len()),
    }
}

/// The rows for which `keep(row)` holds.
pub fn filter(b: &Batch, keep: impl Fn(usize) -> bool) -> Batch {
    let positions: Vec<u32> = (0..b.rows()).filter(|&i| keep(i)).map(|i| i as u32).collect();
    b.take(&positions)
}

/// The columns `cols` as (source name, output name), in that order.
pub fn project(b: &Batch, cols: &[(&str, &str)]) -> Batch {
    Batch::new(cols.iter().map(|(from, to)| (*to, b.col(from).to_vec())).collect())
}

/// `probe ⋈ build` on `probe_keys = build_keys`; the build keys must be unique. The output is
/// every probe column followed by the build columns `build_out`, in probe order.
pub fn hash_join(build: &Batch, build_keys: &[&str], probe: &Batch, probe_keys: &[&str], build_out: &[&str]) -> Batch {
    let bkeys = keys(build, build_keys);
    let mut table = KeyTable::with_capacity(bkeys.len());
    for (row, &k) in bkeys.iter().enumerate() {
        assert!(table.get_or_insert(k, row as u32).is_err(), "hash_join: build keys must be unique");
    }
    let (mut probe_rows, mut build_rows) = (Vec::new(), Vec::new());
    for (row, k) in keys(probe, probe_keys).into_iter().enumerate() {
        if let Some(b) = table.get(k) {
            probe_rows.push(row as u32);
            build_rows.push(b);
        }
    }
    let left = probe.take(&probe_rows);
    let right = build.take(&build_rows);
    let mut columns: Vec<(&str, Vec<i64>)> =
        left.names().iter().map(|n| n.as_str()).zip(left.columns().iter().cloned()).collect();
    for name in build_out {
        columns.push((name, right.col(name).to_vec()));
    }
    Batch::new(columns)
}

/// The probe rows whose key is among the build keys (duplicates in the build side allowed).
pub fn semi_join(build: &Batch, build_keys: &[&str], probe: &Batch, probe_keys: &[&str]) -> Batch {
    let bkeys = keys(build, build_keys);
    let mut table = KeyTable::with_capacity(bkeys.len());
    for (row, &k) in bkeys.iter().enumerate() {
        let _ = table.get_or_insert(k, row as u32);
    }
    let pkeys = keys(probe, probe_keys);
    filter(probe, |i| table.get(pkeys[i]).is_some())
}

/// Groups by `group` (one or two columns) and sums `sums`; the output has the group columns
/// then the sums, under the same names, groups in order of first appearance.
pub fn hash_aggregate(b: &Batch, group: &[&str], sums: &[&str]) -> Batch {
    let gkeys = keys(b, group);
    let mut table = KeyTable::with_capacity(gkeys.len() / 2);
    let mut first_rows: Vec<u32> = Vec::new();
    let mut totals: Vec<Vec<i64>> = vec![Vec::new(); sums.len()];
    let inputs: Vec<&[i64]> = sums.iter().map(|s| b.col(s)).collect();
    for (row, &k) in gkeys.iter().enumerate() {
        match table.get_or_insert(k, first_rows.len() as u32) {
            Ok(g) => {
                for (t, input) in totals.iter_mut().zip(&inputs) {
                    t[g as usize] += input[row];
                }
            }
            Err(_) => {
                first_rows.push(row as u32);
                for (t, input) in totals.iter_mut().zip(&inputs) {
                    t.push(input[row]);
                }
            }
        }
    }
    let firsts = b.take(&first_rows);
    let mut columns: Vec<(&str, Vec<i64>)> = group.iter().map(|g| (*g, firsts.col(g).to_vec())).collect();
    columns.extend(sums.iter().copied().zip(totals));
    Batch::new(columns)
}

/// Splits `b` into one batch per segment, each row to the segment its key hashes to.
pub fn redistribute(b: &Batch, key_cols: &[&str], segments: usize) -> Vec<Batch> {
    let mut positions: Vec<Vec<u32>> = vec![Vec::new(); segments];
    for (row, k) in keys(b, key_cols).into_iter().enumerate() {
        positions[segment_of(k, segments)].push(row as u32);
    }
    positions.iter().map(|p| b.take(p)).collect()
}

/// A copy of `b` for every one of `segments`.
pub fn broadcast(b: &Batch, segments: usize) -> Vec<Batch> {
    vec![b.clone(); segments]
}

/// The segments' batches concatenated in segment order.
pub fn gather(parts: &[Batch]) -> Batch {
    let mut out = Batch::default();
    for p in parts {
        out.append(p);
    }
    out
}

/// The rows sorted by `by` (ascending, stable).
pub fn sort(b: &Batch, by: &[&str]) -> Batch {
    let cols: Vec<&[i64]> = by.iter().map(|c| b.col(c)).collect();
    let mut positions: Vec<u32> = (0..b.rows() as u32).collect();
    positions.sort_by(|&x, &y| {
        cols.iter().map(|c| c[x as usize].cmp(&c[y as usize])).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
    b.take(&positions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn li() -> Batch {
        Batch::new(vec![("pk", vec![1, 2, 1, 3, 1]), ("sk", vec![7, 7, 7, 8, 9]), ("q", vec![10, 20, 30, 40, 50])])
    }

    #[test]
    fn join_aggregate_and_sort_compute_what_sql_would() {
        let part = Batch::new(vec![("pk", vec![1, 3]), ("w", vec![100, 300])]);
        let joined = hash_join(&part, &["pk"], &li(), &["pk"], &["w"]);
        assert_eq!(joined.col("q"), &[10, 30, 40, 50]);
        assert_eq!(joined.col("w"), &[100, 100, 300, 100]);
        let agg = hash_aggregate(&joined, &["pk", "sk"], &["q"]);
        assert_eq!(agg.col("pk"), &[1, 3, 1]);
        assert_eq!(agg.col("sk"), &[7, 8, 9]);
        assert_eq!(agg.col("q"), &[40, 40, 50]);
        let sorted = sort(&agg, &["sk"]);
        assert_eq!(sorted.col("sk"), &[7, 8, 9]);
        let semi = semi_join(&part, &["pk"], &li(), &["pk"]);
        assert_eq!(semi.rows(), 4);
    }

    #[test]
    fn redistribute_then_gather_keeps_every_row_and_local_plus_global_aggregation_is_aggregation() {
        let b = li();
        let parts = redistribute(&b, &["pk", "sk"], 3);
        assert_eq!(parts.iter().map(Batch::rows).sum::<usize>(), b.rows());
        for (s, p) in parts.iter().enumerate() {
            assert!(keys(p, &["pk", "sk"]).iter().all(|&k| segment_of(k, 3) == s));
        }
        let by_rows = redistribute(&b, &["q"], 2);
        let local: Vec<Batch> = by_rows.iter().map(|p| hash_aggregate(p, &["pk", "sk"], &["q"])).collect();
        let global = hash_aggregate(&gather(&local), &["pk", "sk"], &["q"]);
        let direct = hash_aggregate(&b, &["pk", "sk"], &["q"]);
        assert_eq!(sort(&global, &["pk", "sk"]), sort(&direct, &["pk", "sk"]));
        assert_eq!(broadcast(&b, 2).len(), 2);
    }
}
