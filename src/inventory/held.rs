//! A cluster's node list as a cycle holds it from the moment its listing ends until the
//! cluster is assembled: folded at once into one packed buffer per node (UUIDs as their 16
//! bytes, the cloud provider's prefixes as a tag), and unfolded into `Node`s, exactly as
//! listed, only when its cluster's turn comes. The node lists of thousands of clusters wait for
//! the slowest listing; this keeps what each node costs meanwhile to about a third.

use crate::inventory::record::{uuid_bytes, write_uuid};
use crate::remote::{Node, Readiness};
use crate::snapshot::NodeView;

/// The `spec.providerID` prefixes of the cloud providers that name the VM by its UUID, held as
/// a tag in front of the UUID's bytes.
const PROVIDER_PREFIXES: [&str; 2] = ["external-cloudstack://", "cloudstack:///"];

/// An identity's form, in two bits of the first byte: absent, a UUID in CloudStack's form
/// (16 bytes follow), or text (its length in 4 bytes and the text follow).
const ABSENT: u8 = 0;
const UUID: u8 = 1;
const TEXT: u8 = 2;

/// A node as held: one buffer holding, in order, a byte of forms (system UUID in bits 0-1,
/// provider id in bits 2-3 with its prefix's tag in bit 4, readiness in bits 5-6), the system
/// UUID, the provider id, and the name. Read only by unfolding it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldNode(Box<[u8]>);

/// A cluster's node view as held until its cluster is assembled.
#[derive(Debug, Clone, PartialEq)]
pub enum HeldView {
    Listed(Box<[HeldNode]>),
    Unknown { reason: String },
}

impl HeldView {
    /// Folds a node view as its listing ends.
    pub fn fold(view: NodeView) -> HeldView {
        match view {
            // Collected anew (not in place): each node's own buffer is a fraction of a `Node`.
            NodeView::Listed(nodes) => HeldView::Listed(nodes.iter().map(HeldNode::fold).collect()),
            NodeView::Unknown { reason } => HeldView::Unknown { reason },
        }
    }

    /// The node view as it was listed.
    pub fn unfold(self) -> NodeView {
        match self {
            HeldView::Listed(nodes) => {
                NodeView::Listed(nodes.iter().map(HeldNode::unfold).collect())
            }
            HeldView::Unknown { reason } => NodeView::Unknown { reason },
        }
    }
}

impl HeldNode {
    fn fold(n: &Node) -> HeldNode {
        let mut buf = vec![0u8];
        let uuid_form = n
            .system_uuid
            .as_deref()
            .map_or(ABSENT, |s| put_id(&mut buf, s));
        let mut provider_form = ABSENT;
        let mut tag = 0;
        if let Some(p) = n.provider_id.as_deref() {
            let prefixed = PROVIDER_PREFIXES
                .iter()
                .enumerate()
                .find_map(|(i, prefix)| {
                    let id = p.strip_prefix(prefix)?;
                    Some((i, uuid_bytes(id)?))
                });
            provider_form = match prefixed {
                Some((i, bytes)) => {
                    tag = i as u8;
                    buf.extend_from_slice(&bytes);
                    UUID
                }
                None => put_text(&mut buf, p),
            };
        }
        let ready = match n.ready {
            None => 0,
            Some(Readiness::Ready) => 1,
            Some(Readiness::NotReady) => 2,
            Some(Readiness::Unknown) => 3,
        };
        buf[0] = uuid_form | (provider_form << 2) | (tag << 4) | (ready << 5);
        buf.extend_from_slice(n.name.as_bytes());
        HeldNode(buf.into_boxed_slice())
    }

    fn unfold(&self) -> Node {
        let forms = self.0[0];
        let mut rest = &self.0[1..];
        let system_uuid = take_id(&mut rest, forms & 0b11);
        let provider_id = take_id(&mut rest, (forms >> 2) & 0b11).map(|id| {
            if (forms >> 2) & 0b11 == UUID {
                format!("{}{id}", PROVIDER_PREFIXES[usize::from((forms >> 4) & 1)])
            } else {
                id
            }
        });
        let ready = match (forms >> 5) & 0b11 {
            1 => Some(Readiness::Ready),
            2 => Some(Readiness::NotReady),
            3 => Some(Readiness::Unknown),
            _ => None,
        };
        Node {
            name: String::from_utf8_lossy(rest).into_owned(),
            system_uuid,
            provider_id,
            ready,
        }
    }
}

/// Appends an identity: its 16 bytes when it is a UUID in CloudStack's form, else its text.
fn put_id(buf: &mut Vec<u8>, s: &str) -> u8 {
    match uuid_bytes(s) {
        Some(bytes) => {
            buf.extend_from_slice(&bytes);
            UUID
        }
        None => put_text(buf, s),
    }
}

fn put_text(buf: &mut Vec<u8>, s: &str) -> u8 {
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&s.as_bytes()[..len as usize]);
    TEXT
}

/// Takes an identity of form `form` from the front of `rest`.
fn take_id(rest: &mut &[u8], form: u8) -> Option<String> {
    match form {
        UUID => {
            let (bytes, tail) = rest.split_first_chunk::<16>()?;
            *rest = tail;
            let mut s = String::with_capacity(36);
            write_uuid(&mut s, bytes).ok()?;
            Some(s)
        }
        TEXT => {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = u32::from_le_bytes(*len) as usize;
            let (text, tail) = tail.split_at_checked(len)?;
            *rest = tail;
            Some(String::from_utf8_lossy(text).into_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        name: &str,
        uuid: Option<&str>,
        provider: Option<&str>,
        ready: Option<Readiness>,
    ) -> Node {
        Node {
            name: name.into(),
            system_uuid: uuid.map(Into::into),
            provider_id: provider.map(Into::into),
            ready,
        }
    }

    #[test]
    fn every_form_of_identity_comes_back_as_listed() {
        let u = "6a3bd1f1-57d0-4bd6-a2a0-9e2c1b7c0f3e";
        let nodes = vec![
            node(
                "web-control-1",
                Some(u),
                Some(&format!("external-cloudstack://{u}")),
                Some(Readiness::Ready),
            ),
            node(
                "web-node-1",
                Some(u),
                Some(&format!("cloudstack:///{u}")),
                Some(Readiness::NotReady),
            ),
            // The bare string of the cloud provider's releases that set no id, and forms
            // that are not UUIDs in CloudStack's form, are kept as written.
            node(
                "web-node-2",
                Some("4231a5f2-0000"),
                Some("external-cloudstack"),
                Some(Readiness::Unknown),
            ),
            node(
                "web-node-3",
                Some("6A3BD1F1-57D0-4BD6-A2A0-9E2C1B7C0F3E"),
                Some("external-cloudstack://"),
                None,
            ),
            node("web-node-4", None, Some("aws:///eu-west-1a/i-0abc"), None),
            node("", Some(""), Some(""), None),
            node("ünïcode-node", None, None, None),
        ];
        let view = NodeView::Listed(nodes);
        assert_eq!(HeldView::fold(view.clone()).unfold(), view);
        let unknown = NodeView::Unknown {
            reason: "refused".into(),
        };
        assert_eq!(HeldView::fold(unknown.clone()).unfold(), unknown);
    }
}
