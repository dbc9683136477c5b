//! A batch of writes that commit together, in one transaction: all or none.

use std::path::Path;

use crate::error::{ErrorKind, JournalError};
use crate::limits::{NAME_BYTES_MAX, VALUE_BYTES_MAX};

/// One write of a [`Batch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Stores `value` under `key` in `table` (replacing what was there).
    Put {
        /// The table.
        table: String,
        /// The key.
        key: u64,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes `key` from `table` (nothing if absent).
    Delete {
        /// The table.
        table: String,
        /// The key.
        key: u64,
    },
    /// Removes every key below `below` from `table`: retention, when the caller's keys grow
    /// with time (the caller decides the cutoff).
    DeleteBelow {
        /// The table.
        table: String,
        /// The first key kept.
        below: u64,
    },
    /// Stores a named value in the meta table.
    PutMeta {
        /// The name.
        name: String,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes a named value.
    DeleteMeta {
        /// The name.
        name: String,
    },
}

/// Writes that commit together (see the module documentation). Built with the chaining
/// methods:
///
/// ```
/// let mut batch = shardsched_journal::Batch::new();
/// batch.put("jobs", 7, b"job seven").delete("jobs", 3).put_meta("last_id", 7u64.to_le_bytes());
/// assert_eq!(batch.len(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    writes: Vec<Write>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds a put.
    pub fn put(&mut self, table: &str, key: u64, value: impl Into<Vec<u8>>) -> &mut Batch {
        self.writes.push(Write::Put {
            table: table.to_owned(),
            key,
            value: value.into(),
        });
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, table: &str, key: u64) -> &mut Batch {
        self.writes.push(Write::Delete {
            table: table.to_owned(),
            key,
        });
        self
    }

    /// Adds a delete of every key below `below`.
    pub fn delete_below(&mut self, table: &str, below: u64) -> &mut Batch {
        self.writes.push(Write::DeleteBelow {
            table: table.to_owned(),
            below,
        });
        self
    }

    /// Adds a named value.
    pub fn put_meta(&mut self, name: &str, value: impl Into<Vec<u8>>) -> &mut Batch {
        self.writes.push(Write::PutMeta {
            name: name.to_owned(),
            value: value.into(),
        });
        self
    }

    /// Adds the removal of a named value.
    pub fn delete_meta(&mut self, name: &str) -> &mut Batch {
        self.writes.push(Write::DeleteMeta {
            name: name.to_owned(),
        });
        self
    }

    /// Moves every write of `other` to the end of this batch.
    pub fn append(&mut self, other: &mut Batch) {
        self.writes.append(&mut other.writes);
    }

    /// Writes in the batch.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether the batch has no write.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The writes, in order.
    pub fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// Checks every name and value size, so that a group commit fails only for storage
    /// reasons, never because one submitter's batch was malformed.
    pub fn validate(&self, path: &Path) -> Result<(), JournalError> {
        for w in &self.writes {
            match w {
                Write::Put { table, key, value } => {
                    check_name(path, table)?;
                    if value.len() > VALUE_BYTES_MAX {
                        return Err(JournalError::new(
                            path,
                            ErrorKind::TooLarge {
                                table: table.clone(),
                                key: key.to_string(),
                                bytes: value.len(),
                            },
                        ));
                    }
                }
                Write::Delete { table, .. } | Write::DeleteBelow { table, .. } => {
                    check_name(path, table)?;
                }
                Write::PutMeta { name, value } => {
                    check_name(path, name)?;
                    if value.len() > VALUE_BYTES_MAX {
                        return Err(JournalError::new(
                            path,
                            ErrorKind::TooLarge {
                                table: "meta".into(),
                                key: name.clone(),
                                bytes: value.len(),
                            },
                        ));
                    }
                }
                Write::DeleteMeta { name } => check_name(path, name)?,
            }
        }
        Ok(())
    }
}

/// Table and meta names: 1 to [`NAME_BYTES_MAX`] bytes, not starting with `__` (the
/// journal's own tables).
pub(crate) fn check_name(path: &Path, name: &str) -> Result<(), JournalError> {
    let why = if name.is_empty() {
        Some("empty")
    } else if name.len() > NAME_BYTES_MAX {
        Some("longer than NAME_BYTES_MAX")
    } else if name.starts_with("__") {
        Some("names starting with __ are the journal's own")
    } else {
        None
    };
    match why {
        Some(why) => Err(JournalError::new(
            path,
            ErrorKind::BadName {
                name: name.to_owned(),
                why,
            },
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes_are_checked() {
        let p = Path::new("j.redb");
        let mut b = Batch::new();
        b.put("jobs", 1, vec![0; 8]).delete_meta("x");
        assert!(b.validate(p).is_ok());
        for bad in ["", "__journal", &"x".repeat(NAME_BYTES_MAX + 1)] {
            let mut b = Batch::new();
            b.delete(bad, 1);
            let e = b.validate(p).expect_err("bad name accepted");
            assert!(matches!(e.kind, ErrorKind::BadName { .. }), "{e}");
            assert!(e.to_string().contains("j.redb"), "{e}");
        }
        let mut b = Batch::new();
        b.put_meta("m", vec![0; VALUE_BYTES_MAX + 1]);
        assert!(matches!(
            b.validate(p).map_err(|e| e.kind),
            Err(ErrorKind::TooLarge { .. })
        ));
    }
}
