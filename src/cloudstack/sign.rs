//! Request signing exactly as the management server verifies it (`ApiServer.verifyRequest`):
//! parameters sorted by name (byte order, case-sensitive), each value encoded like Java's
//! `URLEncoder` with `+` as `%20`, joined with `&`, the whole string lower-cased, then
//! HMAC-SHA1 with the secret key and standard Base64.

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha1::Sha1;

/// Java's `URLEncoder` keeps `A-Z a-z 0-9 . - * _` literal and encodes every other byte.
const JAVA_URLENCODER: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'*')
    .remove(b'_');

/// Encodes a value the way the server re-encodes it before checking the signature
/// (space as `%20`, `~` as `%7E`, `*` literal). Also safe for the query string or form body.
pub fn encode(value: &str) -> String {
    utf8_percent_encode(value, JAVA_URLENCODER).to_string()
}

/// The string the server signs: every parameter but `signature`, sorted by name.
pub fn string_to_sign(params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("signature"))
        .collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    sorted
        .iter()
        .map(|(name, value)| format!("{name}={}", encode(value)))
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase()
}

/// The Base64 HMAC-SHA1 signature of `params` under `secret`.
pub fn signature(secret: &str, params: &[(String, String)]) -> String {
    let mut mac =
        Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    mac.update(string_to_sign(params).as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// The signed query string (or form body): the parameters in the order given, encoded, then
/// `signature` (percent-encoded, since Base64's `+` would decode to a space).
pub fn signed_query(secret: &str, params: &[(String, String)]) -> String {
    let sig = signature(secret, params);
    let mut out = params
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&");
    out.push_str("&signature=");
    out.push_str(&encode(&sig));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors() -> serde_json::Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/signing-vectors.json"
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn params_of(v: &serde_json::Value) -> Vec<(String, String)> {
        v["params"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    }

    #[test]
    fn signing_vectors_match_the_server() {
        let all = vectors();
        let secret = all["secret_key"].as_str().unwrap();
        let vectors = all["vectors"].as_array().unwrap();
        assert_eq!(vectors.len(), 4);
        for v in vectors {
            let name = v["name"].as_str().unwrap();
            let params = params_of(v);
            assert_eq!(
                string_to_sign(&params),
                v["string_to_sign"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(
                signature(secret, &params),
                v["signature"].as_str().unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn signature_parameter_is_not_signed() {
        let mut params = vec![("command".to_string(), "listZones".to_string())];
        let without = signature("s", &params);
        params.push(("Signature".to_string(), "junk".to_string()));
        assert_eq!(signature("s", &params), without);
    }

    #[test]
    fn signed_query_encodes_plus_and_slash_in_signature() {
        let all = vectors();
        let secret = all["secret_key"].as_str().unwrap();
        let v1 = &all["vectors"][0];
        let q = signed_query(secret, &params_of(v1));
        // V1's signature is wmwiYaEKZJ44QJLu5cFfDgl/hEM=
        assert!(
            q.ends_with("&signature=wmwiYaEKZJ44QJLu5cFfDgl%2FhEM%3D"),
            "{q}"
        );
        assert!(q.contains("keyword=web%20server%2001"), "{q}");
    }

    #[test]
    fn encode_matches_java_urlencoder() {
        assert_eq!(encode("a b~c*d.e-f_g+h/"), "a%20b%7Ec*d.e-f_g%2Bh%2F");
        assert_eq!(encode("Ü"), "%C3%9C");
    }
}
