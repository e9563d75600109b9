//! A column batch: named `i64` columns of equal length.
//!
//! Columns are addressed by name so that plans read like the SQL they implement
//! (`batch.col("l_partkey")`); a missing name is a plan bug and panics with the names there
//! are. Rows are positions; operators build new batches by gathering positions
//! ([`Batch::take`]), which is the one copying loop of the executor.

/// Named columns of equal length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Column names, in order.
    names: Vec<String>,
    /// The columns, parallel to `names`.
    columns: Vec<Vec<i64>>,
}

impl Batch {
    /// A batch of `columns`, each named; all must have the same length.
    pub fn new(columns: Vec<(&str, Vec<i64>)>) -> Self {
        let rows = columns.first().map_or(0, |c| c.1.len());
        assert!(columns.iter().all(|c| c.1.len() == rows), "columns of a batch must have equal lengths");
        let (names, columns) = columns.into_iter().map(|(n, c)| (n.to_string(), c)).unzip();
        Batch { names, columns }
    }

    /// An empty batch with these column names.
    pub fn empty(names: &[&str]) -> Self {
        Batch::new(names.iter().map(|n| (*n, Vec::new())).collect())
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    /// Column names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The column called `name`.
    pub fn col(&self, name: &str) -> &[i64] {
        match self.names.iter().position(|n| n == name) {
            Some(i) => &self.columns[i],
            None => panic!("no column `{name}`; columns: {}", self.names.join(", ")),
        }
    }

    /// Every column, in order.
    pub fn columns(&self) -> &[Vec<i64>] {
        &self.columns
    }

    /// The rows at `positions`, in that order, every column kept.
    pub fn take(&self, positions: &[u32]) -> Batch {
        let columns = self.columns.iter().map(|c| positions.iter().map(|&p| c[p as usize]).collect()).collect();
        Batch { names: self.names.clone(), columns }
    }

    /// Appends the rows of `other`, which must have the same columns.
    pub fn append(&mut self, other: &Batch) {
        if self.names.is_empty() {
            *self = other.clone();
            return;
        }
        assert_eq!(self.names, other.names, "appending a batch with other columns");
        for (mine, theirs) in self.columns.iter_mut().zip(&other.columns) {
            mine.extend_from_slice(theirs);
        }
    }

    /// Appends one row given as values in column order.
    pub fn push_row(&mut self, row: &[i64]) {
        assert_eq!(row.len(), self.columns.len(), "a row needs one value per column");
        for (c, &v) in self.columns.iter_mut().zip(row) {
            c.push(v);
        }
    }

    /// Row `i` as values in column order.
    pub fn row(&self, i: usize) -> Vec<i64> {
        self.columns.iter().map(|c| c[i]).collect()
    }

    /// Renames column `from` to `to`.
    pub fn rename(mut self, from: &str, to: &str) -> Self {
        let i = self.names.iter().position(|n| n == from).unwrap_or_else(|| panic!("no column `{from}` to rename"));
        self.names[i] = to.to_string();
        self
    }
}
