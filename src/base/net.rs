//! Hosts and URLs as the checks and the messages see them: whether a host is this machine,
//! and a URL with its password hidden.

/// `localhost` or a loopback address: a connection that never leaves the host.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `url` with the password of its user information replaced by `<redacted>`, for messages:
/// `mysql://cksdrift:<redacted>@db.example.com/cloud`. Textual, so that a URL that does not
/// parse (where a password is most likely to be misquoted) is redacted too: everything up to
/// the last `@` after the scheme is user information, and a user name without a password
/// stays.
pub fn redacted_url(url: &str) -> std::borrow::Cow<'_, str> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let Some(at) = url[start..].rfind('@').map(|i| start + i) else {
        return url.into();
    };
    match url[start..at].split_once(':') {
        Some((user, _)) => format!("{}{user}:<redacted>{}", &url[..start], &url[at..]).into(),
        None => url.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_urls_keep_everything_but_the_password() {
        assert_eq!(
            redacted_url("mysql://cksdrift:pw@db.example.com:3306/cloud"),
            "mysql://cksdrift:<redacted>@db.example.com:3306/cloud"
        );
        assert_eq!(
            redacted_url("mysql://cksdrift@db.example.com/cloud"),
            "mysql://cksdrift@db.example.com/cloud"
        );
        assert_eq!(
            redacted_url("https://u:p@ss:w/rd@am.example.com/x"),
            "https://u:<redacted>@am.example.com/x"
        );
        assert_eq!(redacted_url("u:pw@db/cloud"), "u:<redacted>@db/cloud");
        assert_eq!(
            redacted_url("http://127.0.0.1:9093"),
            "http://127.0.0.1:9093"
        );
    }
}
