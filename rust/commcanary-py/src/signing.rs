//! Artifact signatures: key pairs, signing a file and verifying one against
//! a trusted key file. Each error names the file it is about: a key file, a
//! signature document or the artifact.

use std::path::{Path, PathBuf};

use commcanary_core::input::read_stored;
use commcanary_core::signing::{
    self, MAX_KEY_FILE_BYTES, SignatureDocument, TrustedKeys, keypair_pem, read_private_key,
};
use commcanary_core::{Error, input::MAX_INPUT_BYTES};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::detached;

/// A new key pair from a 32-byte seed: `(private PKCS#8 PEM, public PEM)`.
#[pyfunction]
pub fn signing_keypair(seed: [u8; 32]) -> PyResult<(String, String)> {
    keypair_pem(&seed).map_err(|e| crate::errors::to_py_err(&e, None))
}

fn read_small(path: &Path) -> Result<Vec<u8>, Error> {
    read_stored(path, MAX_KEY_FILE_BYTES).map(|b| b.into_vec())
}

/// The identifier of the public half of the private key file `key`
/// (checks the file is one).
#[pyfunction]
pub fn private_key_id(py: Python<'_>, key: PathBuf) -> PyResult<String> {
    let display = key.display().to_string();
    detached(py, Some(&display), move || {
        let k = read_private_key(&read_small(&key)?)?;
        Ok(signing::key_id(&k.verifying_key()))
    })
}

/// The signature document of the file `artifact`, signed with the private
/// key file `key`.
#[pyfunction]
pub fn sign_file<'py>(
    py: Python<'py>,
    artifact: PathBuf,
    key: PathBuf,
) -> PyResult<Bound<'py, PyBytes>> {
    let key_display = key.display().to_string();
    let private = detached(py, Some(&key_display), move || {
        read_private_key(&read_small(&key)?)
    })?;
    let display = artifact.display().to_string();
    let doc = detached(py, Some(&display), move || {
        let bytes = read_stored(&artifact, MAX_INPUT_BYTES)?;
        Ok(signing::sign(&private, &bytes))
    })?;
    Ok(PyBytes::new(py, &doc))
}

/// The identifiers of the public keys in the trusted key file `path`.
#[pyfunction]
pub fn trusted_key_ids(py: Python<'_>, path: PathBuf) -> PyResult<Vec<String>> {
    let display = path.display().to_string();
    detached(py, Some(&display), move || {
        TrustedKeys::from_pem(&read_small(&path)?).map(|t| t.ids())
    })
}

/// Verifies `artifact` against its signature document `signature` and the
/// trusted key file `trusted`; returns the signing key's identifier.
#[pyfunction]
pub fn verify_file(
    py: Python<'_>,
    artifact: PathBuf,
    signature: PathBuf,
    trusted: PathBuf,
) -> PyResult<String> {
    let trusted_display = trusted.display().to_string();
    let keys = detached(py, Some(&trusted_display), move || {
        TrustedKeys::from_pem(&read_small(&trusted)?)
    })?;
    let signature_display = signature.display().to_string();
    let claim = detached(py, Some(&signature_display), move || {
        SignatureDocument::parse(&read_small(&signature)?)
    })?;
    let display = artifact.display().to_string();
    detached(py, Some(&display), move || {
        claim.check(&read_stored(&artifact, MAX_INPUT_BYTES)?, &keys)
    })
}
