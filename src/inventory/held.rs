//! A cluster's node list as a cycle holds it from the moment its listing ends until the
//! cluster is assembled: folded at once into a compact form (UUIDs as their 16 bytes, the
//! cloud provider's prefixes as a tag), and unfolded into `Node`s, exactly as listed, only when
//! its cluster's turn comes. The node lists of thousands of clusters wait for the slowest
//! listing; this keeps what each costs meanwhile to about half.

use crate::inventory::record::VmId;
use crate::remote::{Node, Readiness};
use crate::snapshot::NodeView;

/// The `spec.providerID` prefixes of the cloud providers that name the VM by its UUID, held as
/// a tag in front of the UUID's bytes.
const PROVIDER_PREFIXES: [&str; 2] = ["external-cloudstack://", "cloudstack:///"];

/// A node as held: its identities with each UUID in 16 bytes when it is one. Read only by
/// unfolding it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldNode {
    name: Box<str>,
    system_uuid: Option<VmId>,
    provider_id: Option<HeldProviderId>,
    ready: Option<Readiness>,
}

/// `spec.providerID`: a known prefix and an id, or the string as listed.
#[derive(Debug, Clone, PartialEq)]
pub enum HeldProviderId {
    Prefixed { prefix: u8, id: VmId },
    Verbatim(Box<str>),
}

impl HeldProviderId {
    fn fold(s: String) -> HeldProviderId {
        for (tag, prefix) in PROVIDER_PREFIXES.iter().enumerate() {
            if let Some(id) = s.strip_prefix(prefix)
                && !id.is_empty()
            {
                return HeldProviderId::Prefixed {
                    prefix: tag as u8,
                    id: VmId::new(id),
                };
            }
        }
        HeldProviderId::Verbatim(s.into_boxed_str())
    }

    fn unfold(self) -> String {
        match self {
            HeldProviderId::Prefixed { prefix, id } => {
                format!("{}{id}", PROVIDER_PREFIXES[usize::from(prefix)])
            }
            HeldProviderId::Verbatim(s) => s.into_string(),
        }
    }
}

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
            NodeView::Listed(nodes) => HeldView::Listed(
                nodes
                    .into_iter()
                    .map(|n| HeldNode {
                        name: n.name.into_boxed_str(),
                        system_uuid: n.system_uuid.as_deref().map(VmId::new),
                        provider_id: n.provider_id.map(HeldProviderId::fold),
                        ready: n.ready,
                    })
                    .collect(),
            ),
            NodeView::Unknown { reason } => HeldView::Unknown { reason },
        }
    }

    /// The node view as it was listed.
    pub fn unfold(self) -> NodeView {
        match self {
            HeldView::Listed(nodes) => NodeView::Listed(
                nodes
                    .into_vec()
                    .into_iter()
                    .map(|n| Node {
                        name: n.name.into_string(),
                        system_uuid: n.system_uuid.map(|id| id.to_string()),
                        provider_id: n.provider_id.map(HeldProviderId::unfold),
                        ready: n.ready,
                    })
                    .collect(),
            ),
            HeldView::Unknown { reason } => NodeView::Unknown { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, uuid: Option<&str>, provider: Option<&str>) -> Node {
        Node {
            name: name.into(),
            system_uuid: uuid.map(Into::into),
            provider_id: provider.map(Into::into),
            ready: Some(Readiness::Ready),
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
            ),
            node("web-node-1", Some(u), Some(&format!("cloudstack:///{u}"))),
            // The bare string of the cloud provider's releases that set no id, and forms
            // that are not UUIDs, are kept as written.
            node(
                "web-node-2",
                Some("4231A5F2-0000"),
                Some("external-cloudstack"),
            ),
            node(
                "web-node-3",
                Some("VMware-42 31"),
                Some("external-cloudstack://"),
            ),
            node("web-node-4", None, Some("aws:///eu-west-1a/i-0abc")),
            node("web-node-5", None, None),
        ];
        let view = NodeView::Listed(nodes.clone());
        assert_eq!(HeldView::fold(view.clone()).unfold(), view);
        let unknown = NodeView::Unknown {
            reason: "refused".into(),
        };
        assert_eq!(HeldView::fold(unknown.clone()).unfold(), unknown);
    }
}
