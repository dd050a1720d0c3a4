//! The byte form the core's messages share (the Kineto profile codec, the
//! Flight Recorder dump codec, the sharded import's messages, trace parts):
//! little-endian fixed-width numbers, length-prefixed strings and lists. Reading is total: every length is
//! bounded by the bytes that remain before anything is allocated.

use crate::error::{Error, Result};

/// Appends little-endian numbers and length-prefixed strings.
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn f64(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub(crate) fn strs(&mut self, list: &[String]) {
        self.u64(list.len() as u64);
        for s in list {
            self.str(s);
        }
    }
}

/// Reads what [`Writer`] wrote, bounded by the bytes that remain.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// The one error of a decoder: the bytes are not what an encoder wrote.
pub(crate) fn corrupt() -> Error {
    Error::invalid("encoded bytes are corrupted")
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }
    /// Whether every byte was read.
    pub(crate) fn done(&self) -> bool {
        self.at == self.bytes.len()
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(corrupt)?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    /// Length-prefixed bytes.
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.count(1)?;
        Ok(self.take(n)?.to_vec())
    }
    /// Every byte not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| corrupt())?))
    }
    pub(crate) fn i64(&mut self) -> Result<i64> {
        Ok(self.u64()? as i64)
    }
    pub(crate) fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    /// A count of items each at least `min_bytes` long, bounded by what remains.
    pub(crate) fn count(&mut self, min_bytes: usize) -> Result<usize> {
        let n = self.u64()?;
        let left = (self.bytes.len() - self.at) as u64;
        if n.saturating_mul(min_bytes.max(1) as u64) > left {
            return Err(corrupt());
        }
        Ok(n as usize)
    }
    pub(crate) fn str(&mut self) -> Result<String> {
        let n = self.count(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| corrupt())
    }
    pub(crate) fn strs(&mut self) -> Result<Vec<String>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.str()).collect()
    }
}
