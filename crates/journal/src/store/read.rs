//! Reading the journal: every read checks each record's checksum on its way out, so a
//! damaged record is an error naming the file, table and key, never data.

use std::collections::BTreeMap;

use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableHandle};

use super::{
    CRC_BYTES, Journal, JournalState, META_NAME, META_TABLE, STATE_KEY, STATE_TABLE, checksum,
    guarded, read_state,
};
use crate::batch::check_name;
use crate::error::{ErrorKind, JournalError};

impl Journal {
    /// Every record of `table` in key order (none if the table was never written).
    pub fn scan(&self, table: &str) -> Result<Vec<(u64, Vec<u8>)>, JournalError> {
        check_name(&self.path, table)?;
        guarded(&self.path, || {
            let txn = self.read_txn()?;
            let def: TableDefinition<u64, &[u8]> = TableDefinition::new(table);
            let Some(t) = self.read_table(&txn, def, "open table")? else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for entry in t.iter().map_err(|e| self.err("scan", e))? {
                let (k, v) = entry.map_err(|e| self.err("scan", e))?;
                let key = k.value();
                let payload =
                    self.checked(table, &key.to_le_bytes(), &key.to_string(), v.value())?;
                out.push((key, payload.to_vec()));
            }
            Ok(out)
        })
    }

    /// The record `key` of `table`.
    pub fn get(&self, table: &str, key: u64) -> Result<Option<Vec<u8>>, JournalError> {
        check_name(&self.path, table)?;
        guarded(&self.path, || {
            let txn = self.read_txn()?;
            let def: TableDefinition<u64, &[u8]> = TableDefinition::new(table);
            let Some(t) = self.read_table(&txn, def, "open table")? else {
                return Ok(None);
            };
            let Some(v) = t.get(key).map_err(|e| self.err("get", e))? else {
                return Ok(None);
            };
            let payload = self.checked(table, &key.to_le_bytes(), &key.to_string(), v.value())?;
            Ok(Some(payload.to_vec()))
        })
    }

    /// The named value `name`.
    pub fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, JournalError> {
        check_name(&self.path, name)?;
        Ok(self.metas()?.remove(name))
    }

    /// Every named value.
    pub fn metas(&self) -> Result<BTreeMap<String, Vec<u8>>, JournalError> {
        guarded(&self.path, || {
            let txn = self.read_txn()?;
            let Some(t) = self.read_table(&txn, META_TABLE, "open meta")? else {
                return Ok(BTreeMap::new());
            };
            let mut out = BTreeMap::new();
            for entry in t.iter().map_err(|e| self.err("meta", e))? {
                let (k, v) = entry.map_err(|e| self.err("meta", e))?;
                let name = k.value();
                let payload = self.checked(META_NAME, name.as_bytes(), name, v.value())?;
                out.insert(name.to_owned(), payload.to_vec());
            }
            Ok(out)
        })
    }

    /// The caller's tables that exist.
    pub fn tables(&self) -> Result<Vec<String>, JournalError> {
        guarded(&self.path, || {
            let txn = self.read_txn()?;
            let tables = txn.list_tables().map_err(|e| self.err("list tables", e))?;
            Ok(tables
                .map(|t| t.name().to_owned())
                .filter(|n| !n.starts_with("__"))
                .collect())
        })
    }

    /// The state record as last committed.
    pub fn state(&self) -> Result<JournalState, JournalError> {
        Ok(self.state_record()?.unwrap_or_default())
    }

    pub(super) fn state_record(&self) -> Result<Option<JournalState>, JournalError> {
        guarded(&self.path, || {
            let txn = self.read_txn()?;
            match txn.open_table(STATE_TABLE) {
                Ok(t) => {
                    let stored = t.get(STATE_KEY).map_err(|e| self.err("state", e))?;
                    match stored {
                        Some(g) => read_state(&self.path, Some(g.value().to_vec())).map(Some),
                        None => Ok(None),
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(JournalError::storage(&self.path, "open state", e)),
            }
        })
    }

    pub(super) fn read_txn(&self) -> Result<redb::ReadTransaction, JournalError> {
        self.db.begin_read().map_err(|e| self.err("begin read", e))
    }

    /// Table `def` as `txn` reads it; `None` when it was never written. `what` names the
    /// step in an error.
    pub(super) fn read_table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        txn: &redb::ReadTransaction,
        def: TableDefinition<K, V>,
        what: &'static str,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>, JournalError> {
        match txn.open_table(def) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(JournalError::storage(&self.path, what, e)),
        }
    }

    /// The payload of a stored value, if its checksum holds.
    pub(super) fn checked<'v>(
        &self,
        table: &str,
        key: &[u8],
        key_text: &str,
        stored: &'v [u8],
    ) -> Result<&'v [u8], JournalError> {
        if stored.len() < CRC_BYTES {
            return Err(JournalError::new(
                &self.path,
                ErrorKind::Truncated {
                    table: table.to_owned(),
                    key: key_text.to_owned(),
                    bytes: stored.len(),
                },
            ));
        }
        let (crc, payload) = stored.split_at(CRC_BYTES);
        if crc != checksum(table, key, payload).to_le_bytes() {
            return Err(JournalError::new(
                &self.path,
                ErrorKind::Checksum {
                    table: table.to_owned(),
                    key: key_text.to_owned(),
                },
            ));
        }
        Ok(payload)
    }
}
