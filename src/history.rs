//! PLACEHOLDER for the run history (replaced by the real module at merge).
use std::path::PathBuf;
#[derive(Debug, thiserror::Error)]
#[error("history: {0}")]
pub struct HistoryError(String);
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub execution_id: String,
    pub timestamp: String,
    pub language: String,
    pub code_length: u64,
    pub success: bool,
    pub status: String,
    pub execution_time: f64,
    pub cpu_time: Option<f64>,
    pub memory_used: Option<u64>,
}
impl Record {
    pub fn new_id() -> String {
        String::new()
    }
}
pub struct History {
    pub path: PathBuf,
    pub max_bytes: u64,
}
impl History {
    pub fn default_path() -> PathBuf {
        PathBuf::from("/nonexistent")
    }
    pub fn append(&self, _r: &Record) -> Result<(), HistoryError> {
        Ok(())
    }
    pub fn last(&self, _n: usize) -> Result<Vec<Record>, HistoryError> {
        Ok(vec![])
    }
}
pub fn now_rfc3339() -> String {
    String::new()
}
impl History {
    pub fn open_default() -> Result<History, HistoryError> {
        Ok(History {
            path: History::default_path(),
            max_bytes: 0,
        })
    }
}
