//! TPC-H Q20 ("potential part promotion"): its normal plan, a reference, the bundled answer.
//!
//! ## The normal plan (seed 002, Fig. 2b)
//!
//! Q20 decorrelated is two instances of one pattern — a join, a group-by — and a tail:
//!
//! 1. **Pattern 1**: `part_FP` is broadcast to every segment; each joins it with its
//!    `lineitem_FP` on `partkey` and groups by (`partkey`, `suppkey`) summing `quantity`
//!    ([`pattern1`]). `lineitem_FP` is distributed over that pair, so the local aggregation is
//!    already global (the paper's footnote 3).
//! 2. **Pattern 2**: each segment joins its groups with its `partsupp` on (`partkey`,
//!    `suppkey`), keeps `2·availqty > sum` (`availqty > 0.5·sum` in integers), and takes the
//!    distinct `suppkey`s ([`pattern2_local`]); those are redistributed by `suppkey`.
//! 3. **Tail**: each segment takes the global distinct `suppkey`s it received, keeps those of
//!    its suppliers in the nation parameter ([`tail_local`]); the master gathers them and sorts
//!    the names ([`answer_rows`]).
//!
//! The same step functions run in process ([`run_normal`]) and inside the simulated segments
//! (`systems/netaccel`), and the accelerated plan replaces step 1 by the switch and feeds its
//! groups to steps 2 and 3 ([`run_from_pattern1`]).
//!
//! ## The checks
//!
//! [`reference()`] computes Q20 from the undistributed tables with ordered maps and no executor
//! code; [`bundled_sf1_answer`] is tpchgen's copy of the TPC-H answer at SF 1 (186 rows).

use crate::batch::Batch;
use crate::ops::{filter, gather, hash_aggregate, hash_join, project, redistribute, semi_join, sort};
use crate::tpch::{Q20Data, SegmentData};
use std::collections::{BTreeMap, BTreeSet};

/// One answer row: (`s_name`, `s_address`).
pub type AnswerRow = (String, String);

/// Pattern 1 on one segment: `part_FP` (all of it) ⋈ the segment's `lineitem_FP`, grouped by
/// (`l_partkey`, `l_suppkey`) with `sum_qty`.
pub fn pattern1(part_fp_all: &Batch, lineitem_local: &Batch) -> Batch {
    pattern1_counted(part_fp_all, lineitem_local).0
}

/// [`pattern1`], and how many rows the join produced (what the aggregation read).
pub fn pattern1_counted(part_fp_all: &Batch, lineitem_local: &Batch) -> (Batch, usize) {
    let joined = hash_join(part_fp_all, &["p_partkey"], lineitem_local, &["l_partkey"], &[]);
    let groups = hash_aggregate(&joined, &["l_partkey", "l_suppkey"], &["l_quantity"]).rename("l_quantity", "sum_qty");
    (groups, joined.rows())
}

/// Pattern 2 on one segment: its groups ⋈ its `partsupp`, `2·ps_availqty > sum_qty`, distinct
/// `ps_suppkey`.
pub fn pattern2_local(groups: &Batch, partsupp_local: &Batch) -> Batch {
    let joined =
        hash_join(groups, &["l_partkey", "l_suppkey"], partsupp_local, &["ps_partkey", "ps_suppkey"], &["sum_qty"]);
    let (avail, sum) = (joined.col("ps_availqty"), joined.col("sum_qty"));
    let kept = filter(&joined, |i| 2 * avail[i] > sum[i]);
    hash_aggregate(&project(&kept, &[("ps_suppkey", "ps_suppkey")]), &["ps_suppkey"], &[])
}

/// The first steps of Greenplum's own plan for Q20 ("orig" in the paper's Fig. 8) on one
/// segment: it joins `part_FP` with `partsupp` first and aggregates *all* of its
/// `lineitem_FP` by (partkey, suppkey) before joining (it does not push the join with
/// `part_FP` below the group-by), then keeps `2·ps_availqty > sum` and takes the distinct
/// `ps_suppkey`s. Returns them, and the rows it aggregated and joined (for the cost model).
pub fn orig_local(part_fp_all: &Batch, lineitem_local: &Batch, partsupp_local: &Batch) -> (Batch, usize) {
    let ps_fp = semi_join(part_fp_all, &["p_partkey"], partsupp_local, &["ps_partkey"]);
    let sums =
        hash_aggregate(lineitem_local, &["l_partkey", "l_suppkey"], &["l_quantity"]).rename("l_quantity", "sum_qty");
    let joined = hash_join(&sums, &["l_partkey", "l_suppkey"], &ps_fp, &["ps_partkey", "ps_suppkey"], &["sum_qty"]);
    let (avail, sum) = (joined.col("ps_availqty"), joined.col("sum_qty"));
    let kept = filter(&joined, |i| 2 * avail[i] > sum[i]);
    let distinct = hash_aggregate(&project(&kept, &[("ps_suppkey", "ps_suppkey")]), &["ps_suppkey"], &[]);
    (distinct, lineitem_local.rows() + sums.rows() + partsupp_local.rows())
}

/// Greenplum's own plan ([`orig_local`] then the same redistribution and tail), in process.
pub fn run_orig(segments: &[SegmentData], data: &Q20Data) -> Vec<AnswerRow> {
    let part_all = gather(&segments.iter().map(|s| s.part_fp.clone()).collect::<Vec<_>>());
    let n = segments.len();
    let mut inbox = vec![Batch::empty(&["ps_suppkey"]); n];
    for seg in segments {
        let (distinct, _) = orig_local(&part_all, &seg.lineitem_fp, &seg.partsupp);
        for (to, part) in redistribute(&distinct, &["ps_suppkey"], n).iter().enumerate() {
            inbox[to].append(part);
        }
    }
    let found: Vec<Batch> =
        inbox.iter().zip(segments).map(|(b, seg)| tail_local(b, &seg.supplier, data.nation_key)).collect();
    answer_rows(&gather(&found), &data.supplier_text)
}

/// The tail on one segment: the distinct `suppkey`s it received that are its suppliers of the
/// nation `nation_key`.
pub fn tail_local(suppkeys_received: &Batch, supplier_local: &Batch, nation_key: i64) -> Batch {
    let distinct = hash_aggregate(suppkeys_received, &["ps_suppkey"], &[]);
    let nations = supplier_local.col("s_nationkey");
    let in_nation = filter(supplier_local, |i| nations[i] == nation_key);
    project(&semi_join(&distinct, &["ps_suppkey"], &in_nation, &["s_suppkey"]), &[("s_suppkey", "s_suppkey")])
}

/// At the master: the gathered `s_suppkey`s as answer rows, sorted by name.
pub fn answer_rows(suppkeys: &Batch, supplier_text: &[(String, String)]) -> Vec<AnswerRow> {
    let sorted = sort(suppkeys, &["s_suppkey"]);
    let mut rows: Vec<AnswerRow> =
        sorted.col("s_suppkey").iter().map(|&k| supplier_text[k as usize - 1].clone()).collect();
    rows.sort();
    rows
}

/// The normal plan over `segments`, in process.
pub fn run_normal(segments: &[SegmentData], data: &Q20Data) -> Vec<AnswerRow> {
    let part_all = gather(&segments.iter().map(|s| s.part_fp.clone()).collect::<Vec<_>>());
    let groups: Vec<Batch> = segments.iter().map(|s| pattern1(&part_all, &s.lineitem_fp)).collect();
    run_from_pattern1(&groups, segments, data)
}

/// Steps 2 and 3 of the plan from pattern 1's groups, `groups[s]` on segment `s` (each group
/// on the segment its (`partkey`, `suppkey`) hashes to).
pub fn run_from_pattern1(groups: &[Batch], segments: &[SegmentData], data: &Q20Data) -> Vec<AnswerRow> {
    let n = segments.len();
    let mut inbox = vec![Batch::empty(&["ps_suppkey"]); n];
    for (g, seg) in groups.iter().zip(segments) {
        for (to, part) in redistribute(&pattern2_local(g, &seg.partsupp), &["ps_suppkey"], n).iter().enumerate() {
            inbox[to].append(part);
        }
    }
    let found: Vec<Batch> =
        inbox.iter().zip(segments).map(|(b, seg)| tail_local(b, &seg.supplier, data.nation_key)).collect();
    answer_rows(&gather(&found), &data.supplier_text)
}

/// Pattern 1 computed plainly: (`partkey`, `suppkey`) → sum of `quantity` over the lines of
/// `part_FP`'s parts.
pub fn reference_pattern1(data: &Q20Data) -> BTreeMap<(i64, i64), i64> {
    let parts: BTreeSet<i64> = data.part_fp.col("p_partkey").iter().copied().collect();
    let l = &data.lineitem_fp;
    let mut sums = BTreeMap::new();
    for ((pk, sk), q) in l.col("l_partkey").iter().zip(l.col("l_suppkey")).zip(l.col("l_quantity")) {
        if parts.contains(pk) {
            *sums.entry((*pk, *sk)).or_insert(0) += q;
        }
    }
    sums
}

/// Q20 computed plainly from the undistributed tables, sorted by name.
pub fn reference(data: &Q20Data) -> Vec<AnswerRow> {
    let sums = reference_pattern1(data);
    let ps = &data.partsupp;
    let mut suppliers = BTreeSet::new();
    for ((pk, sk), avail) in ps.col("ps_partkey").iter().zip(ps.col("ps_suppkey")).zip(ps.col("ps_availqty")) {
        if let Some(&sum) = sums.get(&(*pk, *sk)) {
            if 2 * avail > sum {
                suppliers.insert(*sk);
            }
        }
    }
    let s = &data.supplier;
    let mut rows: Vec<AnswerRow> = s
        .col("s_suppkey")
        .iter()
        .zip(s.col("s_nationkey"))
        .filter(|(k, n)| suppliers.contains(k) && **n == data.nation_key)
        .map(|(&k, _)| data.supplier_text[k as usize - 1].clone())
        .collect();
    rows.sort();
    rows
}

/// tpchgen's bundled answer of Q20 at SF 1 with the validation parameters, as rows.
pub fn bundled_sf1_answer() -> Vec<AnswerRow> {
    let text = tpchgen::q_and_a::answers_sf1::answer(20).unwrap_or_default();
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let _header = lines.next();
    lines
        .filter_map(|l| l.split_once('|'))
        .map(|(name, address)| (name.trim().to_string(), address.trim().to_string()))
        .collect()
}

/// Answer rows with surrounding blanks trimmed (the bundled answer is a padded table).
pub fn trimmed(rows: &[AnswerRow]) -> Vec<AnswerRow> {
    rows.iter().map(|(n, a)| (n.trim().to_string(), a.trim().to_string())).collect()
}
