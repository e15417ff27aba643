//! How the simulated server authenticates a request: `ApiServer.verifyRequest`
//! (server/src/main/java/com/cloud/api/ApiServer.java) for an API key and its signature, with
//! the `signatureversion=3` expiry and the `enforce.post.requests.and.timestamps` limits.
//!
//! Written from the server's behaviour and checked against the signing vectors in
//! `tests/fixtures/signing-vectors.json`, independently of the checker's signing code: a
//! signing bug in the checker makes this server refuse its requests. The HTTP side (which
//! answer a refusal gets) belongs to `http`.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha1::Sha1;

use super::time::SimTime;

/// How far ahead `expires` may be when POST and timestamps are enforced (`verifyRequest`'s
/// `thresholdTime`).
pub const MAX_EXPIRES_AHEAD: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The key pair the server knows, and whether `enforce.post.requests.and.timestamps` is on.
#[derive(Debug, Clone)]
pub struct Keys<'a> {
    pub api_key: &'a str,
    pub secret_key: &'a str,
    pub enforce: bool,
}

/// Why `verifyRequest` returned false. Every reason gets the same 401 answer; the reason is
/// for tests and messages only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `signature` or no `apikey` parameter.
    Unsigned,
    /// `signatureversion=3` without `expires`.
    NoExpiry,
    /// `expires` is no date `DateUtil.parseTZDateString` reads.
    BadExpiry,
    /// `expires` has passed.
    Expired,
    /// `expires` is more than [`MAX_EXPIRES_AHEAD`] away while enforcement is on.
    ExpiresTooLate,
    /// Enforcement is on and the request is not signature version 3.
    NotVersion3,
    /// The key is not the server's.
    UnknownKey,
    /// The signature is not the one the server computes.
    BadSignature,
}

/// Checks a request's authentication as `verifyRequest` does, given every parameter as
/// decoded from the query string and form body, in the order sent.
///
/// Like the servlet's parameter map, a name sent twice keeps its first value. The names are
/// visited in sorted order and matched case-insensitively, so with both `apiKey` and `apikey`
/// the later in that order counts, as in the server's loop.
pub fn verify(params: &[(String, String)], keys: &Keys<'_>, now: SimTime) -> Result<(), Refusal> {
    let unique = first_values(params);
    let mut signature = None;
    let mut api_key = None;
    let mut version = None;
    let mut expires = None;
    for (name, value) in &unique {
        let slot = if name.eq_ignore_ascii_case("signature") {
            &mut signature
        } else if name.eq_ignore_ascii_case("apikey") {
            &mut api_key
        } else if name.eq_ignore_ascii_case("signatureversion") {
            &mut version
        } else if name.eq_ignore_ascii_case("expires") {
            &mut expires
        } else {
            continue;
        };
        *slot = Some(*value);
    }
    let (Some(signature), Some(api_key)) = (signature, api_key) else {
        return Err(Refusal::Unsigned);
    };
    if version == Some("3") {
        let expires = expires.ok_or(Refusal::NoExpiry)?;
        let expires = SimTime::parse(expires).ok_or(Refusal::BadExpiry)?;
        if expires < now {
            return Err(Refusal::Expired);
        }
        if keys.enforce && expires > now.plus(MAX_EXPIRES_AHEAD) {
            return Err(Refusal::ExpiresTooLate);
        }
    } else if keys.enforce {
        return Err(Refusal::NotVersion3);
    }
    if api_key != keys.api_key {
        return Err(Refusal::UnknownKey);
    }
    let expected = signature_of(keys.secret_key, &string_to_sign(params));
    if same_text(signature, &expected) {
        Ok(())
    } else {
        Err(Refusal::BadSignature)
    }
}

/// One `(name, value)` per name, the first value sent, sorted by name as `Collections.sort`
/// sorts Java strings (UTF-16 code units; for the ASCII names of API parameters, byte order,
/// so `Zzz` comes before `aaa`).
fn first_values(params: &[(String, String)]) -> Vec<(&str, &str)> {
    let mut unique: Vec<(&str, &str)> = Vec::with_capacity(params.len());
    for (name, value) in params {
        if !unique.iter().any(|(seen, _)| *seen == name.as_str()) {
            unique.push((name, value));
        }
    }
    unique.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    unique
}

/// The text the server signs: `name=value` for every parameter but `signature` (any case),
/// the first value of each name, sorted by name, each value encoded by [`java_url_encode`],
/// joined with `&`, then lower-cased as a whole (names and `%XX` escapes included).
pub fn string_to_sign(params: &[(String, String)]) -> String {
    first_values(params)
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("signature"))
        .map(|(name, value)| format!("{name}={}", java_url_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase()
}

/// `Base64(HmacSHA1(secret, text))`, standard alphabet with padding, over UTF-8 bytes.
pub fn signature_of(secret: &str, text: &str) -> String {
    let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// `URLEncoder.encode(value, "UTF-8").replaceAll("\\+", "%20")`: Java leaves
/// `A-Z a-z 0-9 . - * _` as they are, turns a space into `+` (which the server then makes
/// `%20`) and writes every other UTF-8 byte as `%XX` with upper-case hex. A literal `+` is
/// `%2B` by then, so only spaces become `%20`.
pub fn java_url_encode(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(byte));
            }
            b' ' => out.push_str("%20"),
            _ => {
                out.push('%');
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            }
        }
    }
    out
}

/// `ConstantTimeComparator.compareStrings`: equal text, compared without stopping at the
/// first difference.
fn same_text(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::Value;

    /// The shared vectors, from the repository this crate lives in.
    fn vectors() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/signing-vectors.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap()
    }

    /// A vector's parameters in the file's order (serde_json keeps object keys sorted, so the
    /// order is not the one sent; the server sorts anyway).
    fn params_of(vector: &Value) -> Vec<(String, String)> {
        vector["params"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    }

    fn with(params: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
        let mut all = params.to_vec();
        all.push((name.to_string(), value.to_string()));
        all
    }

    /// Before every vector's `expires` (2030-01-01T00:00:00+0000).
    fn before_2030() -> SimTime {
        SimTime::parse("2029-12-31T23:59:00+0000").unwrap()
    }

    #[test]
    fn every_signing_vector_verifies() {
        let all = vectors();
        let keys = Keys {
            api_key: all["api_key"].as_str().unwrap(),
            secret_key: all["secret_key"].as_str().unwrap(),
            enforce: false,
        };
        let vectors = all["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), 4);
        for v in vectors {
            let name = v["name"].as_str().unwrap();
            let params = params_of(v);
            let text = string_to_sign(&params);
            assert_eq!(text, v["string_to_sign"].as_str().unwrap(), "{name}");
            let sig = v["signature"].as_str().unwrap();
            assert_eq!(signature_of(keys.secret_key, &text), sig, "{name}");
            let signed = with(&params, "signature", sig);
            assert_eq!(verify(&signed, &keys, before_2030()), Ok(()), "{name}");

            // The same request with any byte of the signature changed, or any value changed.
            let mut wrong = sig.to_string().into_bytes();
            wrong[0] = if wrong[0] == b'A' { b'B' } else { b'A' };
            let wrong = String::from_utf8(wrong).unwrap();
            assert_eq!(
                verify(&with(&params, "signature", &wrong), &keys, before_2030()),
                Err(Refusal::BadSignature),
                "{name}"
            );
            for i in 0..params.len() {
                let mut changed = signed.clone();
                changed[i].1.push('x');
                let expected = if changed[i].0 == "expires" {
                    Err(Refusal::BadExpiry)
                } else if changed[i].0 == "apiKey" {
                    Err(Refusal::UnknownKey)
                } else {
                    Err(Refusal::BadSignature)
                };
                assert_eq!(
                    verify(&changed, &keys, before_2030()),
                    expected,
                    "{name}: {}",
                    changed[i].0
                );
            }
            let other_secret = Keys {
                secret_key: "another-secret",
                ..keys.clone()
            };
            assert_eq!(
                verify(&signed, &other_secret, before_2030()),
                Err(Refusal::BadSignature),
                "{name}"
            );
        }
    }

    #[test]
    fn names_sort_case_sensitively_and_keep_their_case_until_lowered() {
        // V4: `Zzz` sorts before `aaa`; a client sorting case-insensitively signs another text.
        let params = [
            ("aaa".to_string(), "1".to_string()),
            ("Zzz".to_string(), "2".to_string()),
            ("command".to_string(), "listZones".to_string()),
        ];
        assert_eq!(
            first_values(&params),
            [("Zzz", "2"), ("aaa", "1"), ("command", "listZones")]
        );
        assert_eq!(string_to_sign(&params), "zzz=2&aaa=1&command=listzones");
    }

    #[test]
    fn a_repeated_name_keeps_its_first_value_and_signature_is_not_signed() {
        let params = [
            ("command".to_string(), "listZones".to_string()),
            ("name".to_string(), "first".to_string()),
            ("name".to_string(), "second".to_string()),
            ("Signature".to_string(), "whatever".to_string()),
        ];
        assert_eq!(string_to_sign(&params), "command=listzones&name=first");
    }

    #[test]
    fn values_are_encoded_like_java_url_encoder() {
        assert_eq!(java_url_encode("AZaz09.-*_"), "AZaz09.-*_");
        assert_eq!(java_url_encode("a b+c"), "a%20b%2Bc");
        assert_eq!(
            java_url_encode("~!'()/:&=,%"),
            "%7E%21%27%28%29%2F%3A%26%3D%2C%25"
        );
        assert_eq!(java_url_encode("Ü東✓"), "%C3%9C%E6%9D%B1%E2%9C%93");
        assert_eq!(java_url_encode("\n\t"), "%0A%09");
        assert_eq!(java_url_encode(""), "");
    }

    #[test]
    fn hmac_sha1_matches_rfc_2202() {
        // RFC 2202 test case 2, in Base64.
        assert_eq!(
            signature_of("Jefe", "what do ya want for nothing?"),
            "7/zfauXrL6LSdBbV8YTfnCWafHk="
        );
    }

    /// A request signed with `secret` by this module, for the expiry and key rules.
    fn request(version: Option<&str>, expires: Option<SimTime>) -> Vec<(String, String)> {
        let mut params = vec![
            ("command".to_string(), "listZones".to_string()),
            ("apikey".to_string(), "key".to_string()),
            ("response".to_string(), "json".to_string()),
        ];
        if let Some(v) = version {
            params.push(("signatureversion".into(), v.into()));
        }
        if let Some(t) = expires {
            params.push(("expires".into(), t.to_cloudstack()));
        }
        let sig = signature_of("secret", &string_to_sign(&params));
        with(&params, "signature", &sig)
    }

    #[test]
    fn expiry_and_enforcement_follow_verify_request() {
        let now = SimTime::from_unix(1_750_000_000);
        let lax = Keys {
            api_key: "key",
            secret_key: "secret",
            enforce: false,
        };
        let strict = Keys {
            enforce: true,
            ..lax.clone()
        };
        let minutes = |m: u64| std::time::Duration::from_secs(60 * m);

        assert_eq!(verify(&request(None, None), &lax, now), Ok(()));
        assert_eq!(
            verify(&request(Some("2"), Some(now.minus(minutes(60)))), &lax, now),
            Ok(()),
            "only version 3 reads expires"
        );
        assert_eq!(
            verify(&request(Some("3"), None), &lax, now),
            Err(Refusal::NoExpiry)
        );
        assert_eq!(
            verify(&request(Some("3"), Some(now.minus(minutes(1)))), &lax, now),
            Err(Refusal::Expired)
        );
        assert_eq!(
            verify(&request(Some("3"), Some(now)), &lax, now),
            Ok(()),
            "expires is inclusive"
        );
        assert_eq!(
            verify(&request(Some("3"), Some(now.plus(minutes(60)))), &lax, now),
            Ok(())
        );
        assert_eq!(
            verify(
                &request(Some("3"), Some(now.plus(minutes(60)))),
                &strict,
                now
            ),
            Err(Refusal::ExpiresTooLate)
        );
        assert_eq!(
            verify(
                &request(Some("3"), Some(now.plus(minutes(15)))),
                &strict,
                now
            ),
            Ok(())
        );
        assert_eq!(
            verify(&request(None, None), &strict, now),
            Err(Refusal::NotVersion3)
        );

        let mut bad_date = request(Some("3"), Some(now));
        bad_date.retain(|(k, _)| k != "expires");
        bad_date.push(("expires".into(), "tomorrow".into()));
        assert_eq!(verify(&bad_date, &lax, now), Err(Refusal::BadExpiry));

        let other_key = Keys {
            api_key: "other",
            ..lax.clone()
        };
        assert_eq!(
            verify(&request(None, None), &other_key, now),
            Err(Refusal::UnknownKey)
        );
        let mut unsigned = request(None, None);
        unsigned.retain(|(k, _)| k != "signature");
        assert_eq!(verify(&unsigned, &lax, now), Err(Refusal::Unsigned));
        let mut keyless = request(None, None);
        keyless.retain(|(k, _)| k != "apikey");
        assert_eq!(verify(&keyless, &lax, now), Err(Refusal::Unsigned));
    }

    #[test]
    fn authentication_names_match_in_any_case() {
        let now = SimTime::from_unix(1_750_000_000);
        let keys = Keys {
            api_key: "key",
            secret_key: "secret",
            enforce: true,
        };
        let mut params = vec![
            ("command".to_string(), "listZones".to_string()),
            ("apiKey".to_string(), "key".to_string()),
            ("response".to_string(), "json".to_string()),
            ("signatureVersion".to_string(), "3".to_string()),
            (
                "Expires".to_string(),
                now.plus(std::time::Duration::from_secs(60)).to_cloudstack(),
            ),
        ];
        let sig = signature_of("secret", &string_to_sign(&params));
        params.push(("SIGNATURE".to_string(), sig));
        assert_eq!(verify(&params, &keys, now), Ok(()));
    }
}
