//! `[http]`: where `/metrics` and `/healthz` listen.

use super::key::{Default, Key, Kind};
use super::reader::Reader;

/// `[http]`.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where `/metrics` and `/healthz` listen; `None` when turned off (`listen = ""`).
    pub listen: Option<std::net::SocketAddr>,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9712";

pub const LISTEN: Key = Key {
    table: "http",
    name: "listen",
    default: Default::Is(DEFAULT_LISTEN),
    doc: "where /metrics and /healthz listen; \"\" turns it off",
    kind: Kind::Text,
};

pub const KEYS: &[&Key] = &[&LISTEN];

impl Reader<'_> {
    /// `[http]`.
    pub(super) fn http(&mut self) -> HttpSettings {
        let listen_text = self.text(&LISTEN);
        let listen = if listen_text.trim().is_empty() {
            None
        } else {
            match listen_text.trim().parse() {
                Ok(addr) => Some(addr),
                Err(_) => {
                    self.problem(
                        &LISTEN.full(),
                        format!(
                            "{listen_text:?} is not an address:port, e.g. {DEFAULT_LISTEN:?}; \
                             use \"\" to turn the endpoint off"
                        ),
                    );
                    None
                }
            }
        };
        HttpSettings { listen }
    }
}
