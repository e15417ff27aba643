//! Building a CloudStack request and putting it in signed form: the command and its
//! parameters, a list page's `page` and `pagesize`, GET or POST, and the parameters every
//! call carries, signed into a query string or a form body. The signature itself is `sign`;
//! sending is the transport's, and nothing here reads an answer.

use std::time::Duration;

use super::sign;
use crate::base::time::Timestamp;

/// How far ahead a request's `expires` lies: long enough for a slow network, well inside the
/// 15 minutes `enforce.post.requests.and.timestamps` allows.
const EXPIRES_AFTER: Duration = Duration::from_secs(5 * 60);

/// HTTP method CloudStack expects for a command: `list*`, `query*`, `get*` and `find*` read
/// with GET; everything else changes state and is POSTed (required where
/// `enforce.post.requests.and.timestamps` is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    pub fn for_command(command: &str) -> Method {
        let reads = ["list", "query", "get", "find"];
        if reads.iter().any(|p| command.starts_with(p)) {
            Method::Get
        } else {
            Method::Post
        }
    }
}

/// One API call before signing: the command and its parameters (without `apikey`,
/// `response`, `signatureversion`, `expires`, `signature`, which [`ApiRequest::signed`]
/// adds).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiRequest {
    pub command: String,
    pub params: Vec<(String, String)>,
}

impl ApiRequest {
    /// `command` with `params`, in the order given.
    pub fn new(command: &str, params: &[(&str, &str)]) -> ApiRequest {
        ApiRequest {
            command: command.to_string(),
            params: params
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
        }
    }

    /// Page `page` of list `command`: `params`, then `page` and `pagesize`.
    pub(super) fn list_page(
        command: &str,
        params: &[(&str, &str)],
        page: u32,
        page_size: u32,
    ) -> ApiRequest {
        let page_text = page.to_string();
        let page_size_text = page_size.to_string();
        let mut page_params = params.to_vec();
        page_params.push(("page", &page_text));
        page_params.push(("pagesize", &page_size_text));
        ApiRequest::new(command, &page_params)
    }

    /// The `pagesize` the request asks for, if it names a valid one.
    pub(super) fn page_size(&self) -> Option<u32> {
        self.params
            .iter()
            .find(|(name, _)| name == "pagesize")
            .and_then(|(_, value)| value.parse().ok())
    }

    pub fn method(&self) -> Method {
        Method::for_command(&self.command)
    }

    /// The request signed for the management server at `endpoint` with the key pair
    /// `api_key`/`secret_key` (signature version 3, expiring `EXPIRES_AFTER` after `now`):
    /// a URL for a read, a form body for a change.
    pub fn signed(
        &self,
        endpoint: &str,
        api_key: &str,
        secret_key: &str,
        now: Timestamp,
    ) -> Signed {
        let signed = sign::signed_query(secret_key, &self.params_to_sign(api_key, now));
        match self.method() {
            Method::Get => {
                let separator = if endpoint.contains('?') { '&' } else { '?' };
                Signed::Get {
                    url: format!("{endpoint}{separator}{signed}"),
                }
            }
            Method::Post => Signed::Post { body: signed },
        }
    }

    /// The request's parameters plus those every call carries, in the order they are sent.
    fn params_to_sign(&self, api_key: &str, now: Timestamp) -> Vec<(String, String)> {
        let mut params = Vec::with_capacity(self.params.len() + 5);
        params.push(("command".to_string(), self.command.clone()));
        params.extend(self.params.iter().cloned());
        params.push(("apikey".to_string(), api_key.to_string()));
        params.push(("response".to_string(), "json".to_string()));
        params.push(("signatureversion".to_string(), "3".to_string()));
        params.push((
            "expires".to_string(),
            now.plus(EXPIRES_AFTER).to_cloudstack(),
        ));
        params
    }
}

/// A signed request as it travels. No `Debug`: a GET URL carries the API key and signature.
pub enum Signed {
    /// A read: the endpoint with the signed query string appended.
    Get { url: String },
    /// A change: the signed parameters as a form body, POSTed to the endpoint.
    Post { body: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_got_and_changes_posted() {
        for command in [
            "listZones",
            "queryAsyncJobResult",
            "getUser",
            "findHostsForMigration",
        ] {
            assert_eq!(Method::for_command(command), Method::Get, "{command}");
        }
        for command in ["generateAlert", "addAnnotation", "removeAnnotation"] {
            assert_eq!(Method::for_command(command), Method::Post, "{command}");
        }
    }

    #[test]
    fn a_list_page_adds_page_and_pagesize_last() {
        let request = ApiRequest::list_page("listZones", &[("listall", "true")], 3, 500);
        assert_eq!(request.command, "listZones");
        assert_eq!(
            request.params,
            [
                ("listall".to_string(), "true".to_string()),
                ("page".to_string(), "3".to_string()),
                ("pagesize".to_string(), "500".to_string()),
            ]
        );
        assert_eq!(request.page_size(), Some(500));
        assert_eq!(ApiRequest::new("listZones", &[]).page_size(), None);
        // A page size the caller passed comes first and is the one asked for.
        let request = ApiRequest::list_page("listZones", &[("pagesize", "20")], 1, 500);
        assert_eq!(request.page_size(), Some(20));
    }

    fn names(pairs: &str) -> Vec<&str> {
        pairs
            .split('&')
            .map(|pair| pair.split_once('=').unwrap().0)
            .collect()
    }

    #[test]
    fn a_read_is_a_signed_url_and_a_change_a_signed_body() {
        let now = Timestamp::now();
        let read = ApiRequest::new("listZones", &[("name", "a b")]);
        let Signed::Get { url } = read.signed("https://cs/client/api", "AK", "SK", now) else {
            panic!("a read is a GET");
        };
        let (endpoint, query) = url.split_once('?').unwrap();
        assert_eq!(endpoint, "https://cs/client/api");
        assert_eq!(
            names(query),
            [
                "command",
                "name",
                "apikey",
                "response",
                "signatureversion",
                "expires",
                "signature"
            ]
        );
        assert!(query.starts_with("command=listZones&name=a%20b&apikey=AK&"));
        let Signed::Get { url } = read.signed("https://cs/api?x=1", "AK", "SK", now) else {
            panic!("a read is a GET");
        };
        assert!(
            url.starts_with("https://cs/api?x=1&command=listZones&"),
            "{url}"
        );

        let change = ApiRequest::new("generateAlert", &[("type", "1000")]);
        let Signed::Post { body } = change.signed("https://cs/client/api", "AK", "SK", now) else {
            panic!("a change is a POST");
        };
        assert!(
            body.starts_with("command=generateAlert&type=1000&apikey=AK&"),
            "{body}"
        );
        assert_eq!(names(&body).last(), Some(&"signature"));
    }
}
