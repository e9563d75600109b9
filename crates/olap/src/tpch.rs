//! TPC-H data for Q20, from `tpchgen` (dbgen's generator, row for row).
//!
//! Q20 reads five tables; we keep only the columns it reads and, as NetAccel's experiments do
//! (seed 002 §4.1), store `part` and `lineitem` already filtered and projected:
//!
//! - `part_FP`: `p_partkey` of the parts whose name starts with the color parameter;
//! - `lineitem_FP`: (`l_partkey`, `l_suppkey`, `l_quantity`) of the lines shipped within one
//!   year of the date parameter;
//! - `partsupp`: (`ps_partkey`, `ps_suppkey`, `ps_availqty`), every row;
//! - `supplier`: (`s_suppkey`, `s_nationkey`), with each supplier's name and address kept
//!   aside for the answer;
//! - `nation`: only the key of the nation parameter.
//!
//! [`distribute`] hash-distributes them over the segments: `lineitem_FP` and `partsupp` over
//! (`partkey`, `suppkey`), the column pair Q20 groups and joins them on (the paper's footnote 3:
//! then pattern 1's aggregation needs no global step), `part_FP` over `partkey`, `supplier`
//! over `suppkey`.
//!
//! ## Cost
//!
//! tpchgen's generators draw comments from a text pool that, by default, is 300 MiB of
//! generated text, built once per process: most of a NetAccel point's setup. Q20 reads no
//! comment, and every column has its own random stream in dbgen's design (a comment's offset
//! and length come from the comment's stream alone), so the generators here get a 1 MiB pool
//! ([`TEXT_POOL_BYTES`]): every column Q20 reads is the same, row for row (the bundled SF 1
//! answer test checks it). And the tables are generated once per scale factor and parameters
//! in a process ([`generate`] keeps them), since a sweep or a reproduction runs many points
//! on the same data.

use crate::batch::Batch;
use crate::keytable::pack2;
use crate::ops::segment_of;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use tpchgen::distribution::Distributions;
use tpchgen::generators::{LineItemGenerator, NationGenerator, PartGenerator, PartSuppGenerator, SupplierGenerator};
use tpchgen::text::TextPool;

/// Bytes of the text pool comments are drawn from: above the longest comment (`ps_comment`, at
/// most 199 characters), far below tpchgen's default 300 MiB. Q20 reads no comment.
pub const TEXT_POOL_BYTES: i32 = 1 << 20;

/// The small text pool, built once.
fn text_pool() -> &'static TextPool {
    static POOL: OnceLock<TextPool> = OnceLock::new();
    POOL.get_or_init(|| TextPool::new(TEXT_POOL_BYTES, Distributions::static_default()))
}

/// Generated tables by (scale factor's bits, parameters), for the life of the process.
type Generated = Mutex<BTreeMap<(u64, String), Arc<Q20Data>>>;

/// Q20's substitution parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Q20Params {
    /// `p_name like ':1%'`.
    pub color: String,
    /// `l_shipdate >= date ':2'` as (year, month, day); the interval is one year.
    pub date: (i32, u32, u32),
    /// `n_name = ':3'`.
    pub nation: String,
}

impl Q20Params {
    /// The validation parameters of the TPC-H specification (those of the bundled answer).
    pub fn validation() -> Self {
        Q20Params { color: "forest".into(), date: (1994, 1, 1), nation: "CANADA".into() }
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian; Howard Hinnant's algorithm).
pub fn days_from_civil(year: i32, month: u32, day: u32) -> i32 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i32;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Q20's tables at one scale factor, whole (not yet distributed).
#[derive(Clone, Debug)]
pub struct Q20Data {
    /// The scale factor.
    pub scale_factor: f64,
    /// `part_FP`: `p_partkey`.
    pub part_fp: Batch,
    /// `lineitem_FP`: `l_partkey`, `l_suppkey`, `l_quantity`.
    pub lineitem_fp: Batch,
    /// `partsupp`: `ps_partkey`, `ps_suppkey`, `ps_availqty`.
    pub partsupp: Batch,
    /// `supplier`: `s_suppkey`, `s_nationkey`.
    pub supplier: Batch,
    /// `s_name` and `s_address` by `s_suppkey - 1`.
    pub supplier_text: Vec<(String, String)>,
    /// `n_nationkey` of the nation parameter.
    pub nation_key: i64,
}

/// Why data could not be generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpchError(pub String);

impl std::fmt::Display for TpchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TpchError {}

/// Smallest and largest scale factors accepted (dbgen's tables stay within 32-bit keys).
pub const SCALE_FACTOR_RANGE: (f64, f64) = (0.001, 100.0);

/// Q20's tables at `scale_factor` with `params`: generated the first time the process asks
/// for them, a copy of those afterwards.
pub fn generate(scale_factor: f64, params: &Q20Params) -> Result<Q20Data, TpchError> {
    static GENERATED: OnceLock<Generated> = OnceLock::new();
    let (lo, hi) = SCALE_FACTOR_RANGE;
    if !(scale_factor.is_finite() && (lo..=hi).contains(&scale_factor)) {
        return Err(TpchError(format!("sf {scale_factor}: accepted {lo}..={hi}")));
    }
    let key = (scale_factor.to_bits(), format!("{params:?}"));
    let generated = GENERATED.get_or_init(Generated::default);
    if let Some(data) = generated.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(Q20Data::clone(data));
    }
    // Generated outside the lock: two threads asking at once both generate, and agree.
    let data = Arc::new(generate_tables(scale_factor, params)?);
    generated.lock().unwrap_or_else(|p| p.into_inner()).insert(key, Arc::clone(&data));
    Ok(Q20Data::clone(&data))
}

/// Generates Q20's tables at `scale_factor` (checked) with `params`.
fn generate_tables(scale_factor: f64, params: &Q20Params) -> Result<Q20Data, TpchError> {
    let (dists, pool) = (Distributions::static_default(), text_pool());
    let part_fp: Vec<i64> = PartGenerator::new_with_distributions_and_text_pool(scale_factor, 1, 1, dists, pool)
        .iter()
        .filter(|p| p.p_name.to_string().starts_with(params.color.as_str()))
        .map(|p| p.p_partkey)
        .collect();
    let (y, m, d) = params.date;
    let (from, to) = (days_from_civil(y, m, d), days_from_civil(y + 1, m, d));
    let (mut l_partkey, mut l_suppkey, mut l_quantity) = (Vec::new(), Vec::new(), Vec::new());
    for l in LineItemGenerator::new_with_distributions_and_text_pool(scale_factor, 1, 1, dists, pool).iter() {
        let day = l.l_shipdate.to_unix_epoch();
        if (from..to).contains(&day) {
            l_partkey.push(l.l_partkey);
            l_suppkey.push(l.l_suppkey);
            l_quantity.push(l.l_quantity);
        }
    }
    let (mut ps_partkey, mut ps_suppkey, mut ps_availqty) = (Vec::new(), Vec::new(), Vec::new());
    for ps in PartSuppGenerator::new_with_text_pool(scale_factor, 1, 1, pool).iter() {
        ps_partkey.push(ps.ps_partkey);
        ps_suppkey.push(ps.ps_suppkey);
        ps_availqty.push(i64::from(ps.ps_availqty));
    }
    let (mut s_suppkey, mut s_nationkey, mut supplier_text) = (Vec::new(), Vec::new(), Vec::new());
    for s in SupplierGenerator::new_with_distributions_and_text_pool(scale_factor, 1, 1, dists, pool).iter() {
        s_suppkey.push(s.s_suppkey);
        s_nationkey.push(s.s_nationkey);
        supplier_text.push((s.s_name.to_string(), s.s_address.to_string()));
    }
    let nation_key = NationGenerator::new_with_distributions_and_text_pool(dists, pool)
        .iter()
        .find(|n| n.n_name == params.nation)
        .map(|n| n.n_nationkey)
        .ok_or_else(|| TpchError(format!("nation `{}` is not one of TPC-H's 25 nations", params.nation)))?;
    Ok(Q20Data {
        scale_factor,
        part_fp: Batch::new(vec![("p_partkey", part_fp)]),
        lineitem_fp: Batch::new(vec![("l_partkey", l_partkey), ("l_suppkey", l_suppkey), ("l_quantity", l_quantity)]),
        partsupp: Batch::new(vec![
            ("ps_partkey", ps_partkey),
            ("ps_suppkey", ps_suppkey),
            ("ps_availqty", ps_availqty),
        ]),
        supplier: Batch::new(vec![("s_suppkey", s_suppkey), ("s_nationkey", s_nationkey)]),
        supplier_text,
        nation_key,
    })
}

/// One segment's share of the tables.
#[derive(Clone, Debug, Default)]
pub struct SegmentData {
    /// `part_FP` rows whose `partkey` hashes here.
    pub part_fp: Batch,
    /// `lineitem_FP` rows whose (`partkey`, `suppkey`) hashes here.
    pub lineitem_fp: Batch,
    /// `partsupp` rows whose (`partkey`, `suppkey`) hashes here.
    pub partsupp: Batch,
    /// `supplier` rows whose `suppkey` hashes here.
    pub supplier: Batch,
}

/// Hash-distributes `data` over `segments` segments.
pub fn distribute(data: &Q20Data, segments: usize) -> Vec<SegmentData> {
    let split = |b: &Batch, key: &dyn Fn(usize) -> u64| {
        let mut positions = vec![Vec::new(); segments];
        for row in 0..b.rows() {
            positions[segment_of(key(row), segments)].push(row as u32);
        }
        positions.iter().map(|p| b.take(p)).collect::<Vec<_>>()
    };
    let pk = data.part_fp.col("p_partkey");
    let parts = split(&data.part_fp, &|r| pk[r] as u64);
    let (lp, ls) = (data.lineitem_fp.col("l_partkey"), data.lineitem_fp.col("l_suppkey"));
    let lines = split(&data.lineitem_fp, &|r| pack2(lp[r], ls[r]));
    let (pp, psk) = (data.partsupp.col("ps_partkey"), data.partsupp.col("ps_suppkey"));
    let partsupps = split(&data.partsupp, &|r| pack2(pp[r], psk[r]));
    let sk = data.supplier.col("s_suppkey");
    let suppliers = split(&data.supplier, &|r| sk[r] as u64);
    (0..segments)
        .map(|s| SegmentData {
            part_fp: parts[s].clone(),
            lineitem_fp: lines[s].clone(),
            partsupp: partsupps[s].clone(),
            supplier: suppliers[s].clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1994, 1, 1), 8766);
        assert_eq!(days_from_civil(1995, 1, 1), 9131);
        assert_eq!(days_from_civil(1992, 1, 1), 8035, "tpchgen's epoch offset");
    }

    #[test]
    fn generation_filters_as_q20_does_and_distribution_keeps_every_row() {
        let data = generate(0.01, &Q20Params::validation()).expect("generates");
        assert_eq!(data.nation_key, 3, "CANADA");
        assert_eq!(data.supplier.rows(), 100);
        assert_eq!(data.partsupp.rows(), 8000);
        assert!(data.part_fp.rows() > 0 && data.part_fp.rows() < 100, "about 1% of 2000 parts");
        let lines = data.lineitem_fp.rows();
        assert!((7000..10_000).contains(&lines), "about a seventh of ~60k lines: {lines}");
        let segs = distribute(&data, 3);
        assert_eq!(segs.iter().map(|s| s.lineitem_fp.rows()).sum::<usize>(), lines);
        assert_eq!(segs.iter().map(|s| s.part_fp.rows()).sum::<usize>(), data.part_fp.rows());
        assert!(generate(0.0, &Q20Params::validation()).unwrap_err().0.contains("accepted"));
    }
}
