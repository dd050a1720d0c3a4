//! Ed25519 signatures for artifacts: key pairs, detached signature documents
//! and trusted key sets.
//!
//! A canary or report is signed by a *detached* `commcanary.signature.v1`
//! document (written beside it as `ARTIFACT.sig`), so the artifact's own
//! canonical bytes, its hashes and its byte ratio stay what they were. The
//! signature covers the domain string [`DOMAIN`] followed by the BLAKE3 digest
//! of the artifact's bytes exactly as stored; the document repeats the digest
//! and the byte count so a mismatch is told apart from a forged signature.
//!
//! Keys use the formats other tools read: the private key is PKCS#8 PEM
//! (`-----BEGIN PRIVATE KEY-----`), the public key SubjectPublicKeyInfo PEM
//! (`-----BEGIN PUBLIC KEY-----`), as `openssl pkey` writes them. A trusted
//! key file is one or more public key blocks; text between blocks is ignored.
//!
//! Invariants: the private key never enters a signature document or an error
//! message; verification accepts a signature only when its key is in the
//! trusted set, its digest and size match the artifact and the Ed25519
//! signature verifies strictly (no malleable or small-order encodings).
//! Messages are path-free; callers add the artifact's path.

use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, KeypairBytes,
};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::error::{Error, Result};
use crate::json::canon::ObjectWriter;
use crate::json::{JsonLimits, parse};

/// The format identifier of a signature document.
pub const SIGNATURE: &str = crate::document::SIGNATURE;
/// What every signature signs first, so a commcanary signature cannot be
/// replayed as a signature of anything else.
pub const DOMAIN: &[u8] = b"commcanary.signature.v1\0";
/// The most public keys a trusted key file may list.
pub const MAX_TRUSTED_KEYS: usize = 4096;
/// The largest signature document or key file read (bytes).
pub const MAX_KEY_FILE_BYTES: u64 = 1 << 20;

const PUBLIC_BEGIN: &str = "-----BEGIN PUBLIC KEY-----";
const PUBLIC_END: &str = "-----END PUBLIC KEY-----";

/// A new key pair as PEM text: `(private PKCS#8, public SPKI)`.
///
/// `seed` is the 32-byte Ed25519 secret; callers draw it from the operating
/// system's random source.
///
/// # Errors
/// Only if PEM encoding fails, which it does not for valid keys.
pub fn keypair_pem(seed: &[u8; 32]) -> Result<(String, String)> {
    let key = SigningKey::from_bytes(seed);
    // PKCS#8 v1 (the seed alone), the form OpenSSL reads and writes.
    let v1 = KeypairBytes {
        secret_key: *seed,
        public_key: None,
    };
    let private = v1
        .to_pkcs8_pem(Default::default())
        .map_err(|e| Error::internal(format!("cannot encode the private key: {e}")))?;
    let public = public_pem(&key.verifying_key())?;
    Ok((private.to_string(), public))
}

fn public_pem(key: &VerifyingKey) -> Result<String> {
    key.to_public_key_pem(Default::default())
        .map_err(|e| Error::internal(format!("cannot encode the public key: {e}")))
}

/// Reads a PKCS#8 PEM Ed25519 private key.
///
/// # Errors
/// [`crate::ErrorKind::Invalid`] when the text is not one.
pub fn read_private_key(pem: &[u8]) -> Result<SigningKey> {
    let text = std::str::from_utf8(pem)
        .map_err(|_| Error::invalid("not a PEM private key (not UTF-8 text)"))?;
    SigningKey::from_pkcs8_pem(text.trim()).map_err(|_| {
        Error::invalid("not an Ed25519 private key (PKCS#8 PEM, as `commcanary keygen` writes)")
    })
}

/// The short identifier of a public key: `ed25519:` and the first 16 hex
/// digits of the BLAKE3 digest of its 32 bytes.
#[must_use]
pub fn key_id(key: &VerifyingKey) -> String {
    let digest = blake3::hash(key.as_bytes());
    format!("ed25519:{}", &digest.to_hex()[..16])
}

/// The public keys a verifier trusts.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<VerifyingKey>,
}

impl TrustedKeys {
    /// Reads every `PUBLIC KEY` PEM block of `text`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Invalid`] when a block is not an Ed25519 public
    /// key, when there is none, or more than [`MAX_TRUSTED_KEYS`].
    pub fn from_pem(text: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(text)
            .map_err(|_| Error::invalid("not a list of PEM public keys (not UTF-8 text)"))?;
        if text.contains("PRIVATE KEY-----") {
            return Err(Error::invalid(
                "holds a private key; trust its public half (KEY.pub) instead",
            ));
        }
        let mut keys = Vec::new();
        let mut rest = text;
        while let Some(start) = rest.find(PUBLIC_BEGIN) {
            let Some(len) = rest[start..].find(PUBLIC_END) else {
                return Err(Error::invalid(format!(
                    "public key {} has no END line",
                    keys.len() + 1
                )));
            };
            let end = start + len + PUBLIC_END.len();
            if keys.len() == MAX_TRUSTED_KEYS {
                return Err(Error::invalid(format!(
                    "more than {MAX_TRUSTED_KEYS} public keys"
                )));
            }
            let key = VerifyingKey::from_public_key_pem(&rest[start..end]).map_err(|_| {
                Error::invalid(format!(
                    "public key {} is not an Ed25519 public key",
                    keys.len() + 1
                ))
            })?;
            keys.push(key);
            rest = &rest[end..];
        }
        if keys.is_empty() {
            return Err(Error::invalid(format!(
                "no public key (no {PUBLIC_BEGIN} block)"
            )));
        }
        Ok(Self { keys })
    }

    /// The trusted keys' identifiers, in file order.
    #[must_use]
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(key_id).collect()
    }

    fn find(&self, key: &VerifyingKey) -> Option<&VerifyingKey> {
        self.keys.iter().find(|k| k.as_bytes() == key.as_bytes())
    }
}

fn message(digest: &blake3::Hash) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + 32);
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(digest.as_bytes());
    m
}

/// The canonical signature document for `artifact` signed with `key`.
#[must_use]
pub fn sign(key: &SigningKey, artifact: &[u8]) -> Vec<u8> {
    let digest = blake3::hash(artifact);
    let signature = key.sign(&message(&digest));
    let public = key.verifying_key();
    let mut out = Vec::with_capacity(320);
    let mut artifact_member = Vec::new();
    let mut inner = ObjectWriter::new(&mut artifact_member);
    inner.str("blake3", digest.to_hex().as_str());
    inner.i64("bytes", i64::try_from(artifact.len()).unwrap_or(i64::MAX));
    inner.end();
    let mut doc = ObjectWriter::new(&mut out);
    doc.str("algorithm", "ed25519");
    doc.raw("artifact", &artifact_member);
    doc.str("format", SIGNATURE);
    doc.str("key_id", &key_id(&public));
    doc.str("public_key", &hex(public.as_bytes()));
    doc.str("signature", &hex(&signature.to_bytes()));
    doc.end();
    out
}

/// Checks that `signature_doc` is a valid signature of `artifact` by one of
/// `trusted` and returns that key's identifier: [`SignatureDocument::parse`]
/// then [`SignatureDocument::check`].
///
/// # Errors
/// As those two.
pub fn verify(signature_doc: &[u8], artifact: &[u8], trusted: &TrustedKeys) -> Result<String> {
    SignatureDocument::parse(signature_doc)?.check(artifact, trusted)
}

/// What a signature document claims: a key, a signature and the artifact's
/// digest and size.
#[derive(Debug, Clone)]
pub struct SignatureDocument {
    public: VerifyingKey,
    signature: Signature,
    digest: [u8; 32],
    bytes: u64,
}

impl SignatureDocument {
    /// The identifier of the key that made the signature.
    #[must_use]
    pub fn key_id(&self) -> String {
        key_id(&self.public)
    }

    /// Checks the claim against `artifact`'s bytes and the `trusted` keys
    /// and returns the signing key's identifier.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Invalid`] naming what failed: a key outside the
    /// trusted set, a digest or size that does not match the artifact (it
    /// changed since it was signed), or a signature that does not verify.
    pub fn check(&self, artifact: &[u8], trusted: &TrustedKeys) -> Result<String> {
        let id = self.key_id();
        let Some(key) = trusted.find(&self.public) else {
            return Err(Error::invalid(format!(
                "signed by {id}, which is not among the trusted keys"
            )));
        };
        let digest = blake3::hash(artifact);
        if self.bytes != artifact.len() as u64 || self.digest != *digest.as_bytes() {
            return Err(Error::invalid(
                "changed after it was signed (its size or BLAKE3 digest differs from the signature's)",
            ));
        }
        key.verify_strict(&message(&digest), &self.signature)
            .map_err(|_| Error::invalid(format!("the signature by {id} does not verify")))?;
        Ok(id)
    }
    /// Reads a signature document.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Invalid`] naming the member that is missing or
    /// malformed.
    pub fn parse(data: &[u8]) -> Result<Self> {
        let bad = |what: &str| Error::invalid(format!("malformed signature: {what}"));
        let doc = parse(data, JsonLimits::default())
            .map_err(|e| bad(&format!("not JSON ({})", e.message())))?;
        let root = doc
            .root()
            .filter(|r| r.is_object())
            .ok_or_else(|| bad("not an object"))?;
        let text = |name: &str| {
            root.get(name)
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad(&format!("`{name}` is missing or not a string")))
        };
        if text("format")? != SIGNATURE {
            return Err(bad(&format!("`format` is not {SIGNATURE}")));
        }
        if text("algorithm")? != "ed25519" {
            return Err(bad("`algorithm` is not ed25519"));
        }
        let public: [u8; 32] = unhex(text("public_key")?).ok_or_else(|| bad("`public_key`"))?;
        let public = VerifyingKey::from_bytes(&public)
            .map_err(|_| bad("`public_key` is not an Ed25519 point"))?;
        let signature: [u8; 64] = unhex(text("signature")?).ok_or_else(|| bad("`signature`"))?;
        if text("key_id")? != key_id(&public) {
            return Err(bad("`key_id` is not the identifier of `public_key`"));
        }
        let artifact = root
            .get("artifact")
            .filter(|a| a.is_object())
            .ok_or_else(|| bad("`artifact` is missing"))?;
        let digest = artifact
            .get("blake3")
            .and_then(|v| v.as_str())
            .and_then(unhex::<32>)
            .ok_or_else(|| bad("`artifact.blake3`"))?;
        let bytes = artifact
            .get("bytes")
            .and_then(|v| v.as_i64())
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| bad("`artifact.bytes`"))?;
        Ok(Self {
            public,
            signature: Signature::from_bytes(&signature),
            digest,
            bytes,
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(seed: u8) -> (SigningKey, TrustedKeys) {
        let (private, public) = keypair_pem(&[seed; 32]).unwrap();
        let key = read_private_key(private.as_bytes()).unwrap();
        let trusted = TrustedKeys::from_pem(public.as_bytes()).unwrap();
        (key, trusted)
    }

    #[test]
    fn a_signed_artifact_verifies_and_names_its_key() {
        let (key, trusted) = pair(1);
        let sig = sign(&key, b"{\"format\":\"x\"}");
        let id = verify(&sig, b"{\"format\":\"x\"}", &trusted).unwrap();
        assert_eq!(id, key_id(&key.verifying_key()));
        assert_eq!(trusted.ids(), vec![id]);
    }

    #[test]
    fn the_document_is_canonical_and_carries_no_private_key() {
        let (key, _) = pair(2);
        let sig = sign(&key, b"abc");
        let doc = parse(&sig, JsonLimits::default()).unwrap();
        assert_eq!(crate::json::canon::to_vec(doc.root().unwrap()), sig);
        let secret = hex(key.as_bytes());
        assert!(!String::from_utf8(sig).unwrap().contains(&secret));
    }

    #[test]
    fn every_changed_byte_of_the_artifact_is_refused() {
        let (key, trusted) = pair(3);
        let artifact = b"{\"a\":1,\"b\":[2,3]}".to_vec();
        let sig = sign(&key, &artifact);
        for i in 0..artifact.len() {
            let mut changed = artifact.clone();
            changed[i] ^= 1;
            let e = verify(&sig, &changed, &trusted).unwrap_err();
            assert!(e.message().contains("changed after it was signed"), "{e}");
        }
    }

    #[test]
    fn every_changed_byte_of_the_signature_is_refused() {
        let (key, trusted) = pair(4);
        let sig = sign(&key, b"artifact");
        for i in 0..sig.len() {
            let mut changed = sig.clone();
            changed[i] ^= 1;
            assert!(verify(&changed, b"artifact", &trusted).is_err(), "byte {i}");
        }
    }

    #[test]
    fn a_key_outside_the_trusted_set_is_refused() {
        let (key, _) = pair(5);
        let (_, other) = pair(6);
        let e = verify(&sign(&key, b"x"), b"x", &other).unwrap_err();
        assert!(e.message().contains("not among the trusted keys"), "{e}");
    }

    #[test]
    fn a_trusted_key_file_lists_several_keys_and_ignores_comments() {
        let (_, a) = keypair_pem(&[7; 32]).unwrap();
        let (_, b) = keypair_pem(&[8; 32]).unwrap();
        let text = format!("# team A\n{a}\n# team B\n{b}");
        assert_eq!(
            TrustedKeys::from_pem(text.as_bytes()).unwrap().ids().len(),
            2
        );
        assert!(TrustedKeys::from_pem(b"no keys here").is_err());
        let cut = &a[..a.len() - 10];
        assert!(TrustedKeys::from_pem(cut.as_bytes()).is_err());
    }

    #[test]
    fn a_private_key_is_not_a_public_key_and_vice_versa() {
        let (private, public) = keypair_pem(&[9; 32]).unwrap();
        assert!(read_private_key(public.as_bytes()).is_err());
        assert!(TrustedKeys::from_pem(private.as_bytes()).is_err());
        let mixed = format!("{public}{private}");
        assert!(TrustedKeys::from_pem(mixed.as_bytes()).is_err());
        assert!(read_private_key(b"\xff\xfe").is_err());
    }
}
