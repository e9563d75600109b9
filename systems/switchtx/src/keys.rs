//! How a key names its shard, and the servers' bit sets.
//!
//! A key is 64 bits: the shard (server) it belongs to in bits 40.., the record and column of
//! that server's table below (YCSB-T: `record × columns + column`; TPC-C: `table << 32 | row`).
//! Sets of servers travel as one byte, one bit per server (hence at most eight servers).

/// The key of (server, record, column).
pub fn key_of(server: u8, record: u64, column: u64, columns: u64) -> u64 {
    (u64::from(server) << 40) | (record * columns + column)
}

/// The shard (server) of a key.
pub fn shard_of(key: u64) -> u8 {
    (key >> 40) as u8
}

/// The servers of a one-byte set, in increasing order.
pub fn bits(set: u8) -> impl Iterator<Item = u8> {
    (0..8u8).filter(move |s| set & (1 << s) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_shard_and_a_set_lists_its_servers() {
        assert_eq!(shard_of(key_of(5, 99_999, 23, 24)), 5);
        assert_eq!(bits(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
    }
}
