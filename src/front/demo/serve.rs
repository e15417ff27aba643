//! `cks-drift demo --serve`: the demo's simulated cloud, served on loopback so that the other
//! commands (`validate-config --connect`, `check`, `explain`, `run`) can be tried against it.
//! Its CloudStack API is served over HTTP on 127.0.0.1, and each checked cluster's control
//! node is an SSH server on a loopback address of its own that answers the node listing as
//! kubectl would there. A config, its key files and an SSH key are written into a temporary
//! folder; everything is served until Ctrl-C, and the folder goes with it.
//!
//! The cloud is the demo's first cycle: `db` drifts four ways, `web` and `analytics` match.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cks_drift_sim::{FakeCloudStack, NetworkLayout};
use russh::keys::ssh_key::LineEnding;
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{PrivateKey, PublicKey};
use russh::server::{Auth, ChannelOpenHandle, Msg, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use super::invocation::Invocation;
use super::{DEMO_API_KEY, Scenario, endpoint_of};
use crate::base::time::Timestamp;
use crate::remote::Readiness;
use crate::snapshot::Node;

/// The secret key the served API checks signatures with (the demo's own, written into the
/// folder beside the config).
const DEMO_SECRET_KEY: &str = "demo-secret-key";
/// The control nodes' addresses: one each from 127.42.N.10 up, in the first block N (of
/// [`BLOCKS`]) where every one can listen, so that several served demos can run at once.
const FIRST_CONTROL_NODE: Ipv4Addr = Ipv4Addr::new(127, 42, 0, 10);
const BLOCKS: u8 = 64;
/// The port CKS reaches a control node on through its network's public IP.
const SSH_PORT: u16 = 2222;

/// Why the served demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot create a temporary folder for the served demo's config, keys and state")]
    TempDir(#[source] std::io::Error),
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on {addr} for a control node's SSH")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the demo's SSH key")]
    Key(#[source] russh::keys::ssh_key::Error),
    #[error("cannot listen for SIGINT and SIGTERM")]
    Signal(#[source] std::io::Error),
}

/// A control node of the served cloud: its cluster, its address and what kubectl lists there.
struct ControlNode {
    cluster: String,
    addr: SocketAddr,
    nodes: Arc<Vec<Node>>,
}

/// Serves the demo's cloud until Ctrl-C (or SIGTERM), printing to `out` what to run against it.
pub async fn serve(out: &mut dyn Write) -> Result<(), ServeError> {
    // Taken before anything is printed: whoever stops it after reading the config must not
    // find the signal ignored (a shell's background job inherits SIGINT ignored) or unheard.
    let mut interrupt = signal(SignalKind::interrupt()).map_err(ServeError::Signal)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
    let dir = tempfile::Builder::new()
        .prefix("cks-drift-demo-")
        .tempdir()
        .map_err(ServeError::TempDir)?;
    let scenario = Scenario::build_with(Timestamp::now(), NetworkLayout::Isolated);
    let (control_nodes, listeners) = listen_on_loopback(&scenario).await?;
    let client_key = ed25519_key();
    let ssh = Arc::new(russh::server::Config {
        keys: vec![ed25519_key()],
        auth_rejection_time: Duration::from_millis(100),
        auth_rejection_time_initial: Some(Duration::ZERO),
        inactivity_timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    });
    for (node, listener) in control_nodes.iter().zip(listeners) {
        let handler = KubectlAnswer {
            nodes: node.nodes.clone(),
            client: client_key.public_key().clone(),
        };
        tokio::spawn(accept(listener, ssh.clone(), handler));
    }
    let api = FakeCloudStack::start(scenario.sim.clone(), DEMO_API_KEY, DEMO_SECRET_KEY).await;
    let config = write_config(dir.path(), &api.url(), &client_key)?;
    let run = Invocation::of_current();
    let text = instructions(&api.url(), &control_nodes, &config, &run);
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    let _ = writeln!(out, "Stopped; {} is removed.", dir.path().display());
    Ok(())
}

/// Gives each cluster that has a node list a control node on a loopback address of its own,
/// listening, and records it as the cluster's endpoint, as CloudStack records the public IP.
async fn listen_on_loopback(
    scenario: &Scenario,
) -> Result<(Vec<ControlNode>, Vec<TcpListener>), ServeError> {
    let clusters = listed_clusters(scenario);
    let first = u32::from(FIRST_CONTROL_NODE);
    let mut block = 0;
    let listeners = loop {
        let base = first + (u32::from(block) << 8);
        match listen_all(base, clusters.len()).await {
            Ok(listeners) => break listeners,
            Err(ServeError::Listen { source, .. })
                if source.kind() == std::io::ErrorKind::AddrInUse && block + 1 < BLOCKS =>
            {
                block += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let mut control_nodes = Vec::new();
    scenario.sim.with_world(|w| {
        for ((id, name, nodes), listener) in clusters.into_iter().zip(&listeners) {
            let addr = listener
                .local_addr()
                .expect("a bound listener has an address");
            w.cluster_mut(&id).endpoint = format!("https://{}:6443/", addr.ip());
            control_nodes.push(ControlNode {
                cluster: name,
                addr,
                nodes: Arc::new(nodes),
            });
        }
    });
    Ok((control_nodes, listeners))
}

/// `(id, name, node list)` of each cluster that has a node list, in creation order.
fn listed_clusters(scenario: &Scenario) -> Vec<(String, String, Vec<Node>)> {
    scenario.sim.with_world(|w| {
        scenario
            .clusters
            .iter()
            .filter_map(|(name, _)| {
                let id = w.cluster_by_name(name)?.id.clone();
                let nodes = scenario.nodes.get(&endpoint_of(w, &id))?;
                Some((id, name.clone(), nodes))
            })
            .collect()
    })
}

/// Listens on port [`SSH_PORT`] of `count` addresses from `base` up.
async fn listen_all(base: u32, count: usize) -> Result<Vec<TcpListener>, ServeError> {
    let mut listeners = Vec::new();
    for n in 0..count {
        let ip = Ipv4Addr::from(base + n as u32);
        let addr = SocketAddr::new(IpAddr::V4(ip), SSH_PORT);
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Listen { addr, source })?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// A new Ed25519 key from the operating system's random source.
fn ed25519_key() -> PrivateKey {
    let seed: [u8; 32] = rand::random();
    PrivateKey::from(Ed25519Keypair::from_seed(&seed))
}

/// Writes the config and the files it names into `dir`, owner-only; returns the config's path.
fn write_config(dir: &Path, url: &str, client_key: &PrivateKey) -> Result<PathBuf, ServeError> {
    let path = |name: &str| dir.join(name);
    let quoted = |p: PathBuf| toml::Value::String(p.display().to_string()).to_string();
    let key = client_key
        .to_openssh(LineEnding::LF)
        .map_err(ServeError::Key)?;
    write_private(&path("api_key"), DEMO_API_KEY)?;
    write_private(&path("secret_key"), DEMO_SECRET_KEY)?;
    write_private(&path("id_ed25519"), &key)?;
    let config = format!(
        "# Written by `cks-drift demo --serve` for the simulated cloud it serves; removed when it\n\
         # stops. The API is plain HTTP on loopback: validate-config warns about it.\n\
         [cloudstack]\n\
         url = {url}\n\
         api_key_file = {api_key}\n\
         secret_key_file = {secret_key}\n\n\
         [ssh]\n\
         private_key = {ssh_key}\n\
         known_hosts = {known_hosts}\n\n\
         [state]\n\
         path = {state}\n\n\
         [notify]\n\
         event_log = {events}\n\n\
         [http]\n\
         listen = \"127.0.0.1:9713\"\n",
        url = toml::Value::String(url.to_string()),
        api_key = quoted(path("api_key")),
        secret_key = quoted(path("secret_key")),
        ssh_key = quoted(path("id_ed25519")),
        known_hosts = quoted(path("known_hosts")),
        state = quoted(path("state.json")),
        events = quoted(path("events.jsonl")),
    );
    let config_path = path("cks-drift.toml");
    write_private(&config_path, &config)?;
    Ok(config_path)
}

fn write_private(path: &Path, text: &str) -> Result<(), ServeError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| ServeError::Write {
            path: path.to_path_buf(),
            source,
        })
}

fn instructions(
    url: &str,
    control_nodes: &[ControlNode],
    config: &Path,
    run: &Invocation,
) -> String {
    let c = config.display();
    let mut text = format!(
        "cks-drift demo --serve: the demo's simulated CloudStack, served until Ctrl-C.\n\n\
         CloudStack API   {url}\n"
    );
    for node in control_nodes {
        text.push_str(&format!(
            "control node     {} (SSH, {} Kubernetes nodes): cluster {}\n",
            node.addr,
            node.nodes.len(),
            node.cluster
        ));
    }
    let place = match &run.dir {
        Some(tree) => format!(", in {}", tree.display()),
        None => String::new(),
    };
    text.push_str(&format!(
        "config           {c}\n\n\
         db drifts four ways; web and analytics match; ci and edge are skipped. In another\n\
         terminal, as this user{place}:\n\n"
    ));
    let p = &run.program;
    text.push_str(&format!(
        "  {p} validate-config -c {c} --connect\n\
         \x20 {p} check -c {c} --no-notify\n\
         \x20 {p} explain -c {c} db\n\
         \x20 {p} check -c {c}   # raises alerts and annotations in the simulated cloud\n\
         \x20 {p} run -c {c}     # the service: a check every 5 minutes\n\n\
         check exits 1 when it finds mismatches (here, db's four), 0 when every checked\n\
         cluster matches, 2 when it cannot run.\n\n"
    ));
    text
}

async fn accept(listener: TcpListener, config: Arc<russh::server::Config>, node: KubectlAnswer) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, say: try again shortly rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (config, handler) = (config.clone(), node.clone());
        tokio::spawn(async move {
            if let Ok(session) = russh::server::run_stream(config, stream, handler).await {
                let _ = session.await;
            }
        });
    }
}

/// One control node's SSH server: the demo's key logs in, and any command gets the node list
/// as the configured kubectl command prints it.
#[derive(Clone)]
struct KubectlAnswer {
    nodes: Arc<Vec<Node>>,
    client: PublicKey,
}

impl russh::server::Handler for KubectlAnswer {
    type Error = russh::Error;

    async fn auth_publickey(
        &mut self,
        _user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        if key.public_key.key_data() == self.client.key_data() {
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    async fn channel_open_session(
        &mut self,
        _channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        command: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let listing = kubectl_output(&self.nodes, &String::from_utf8_lossy(command));
        session.channel_success(channel)?;
        session.data(channel, listing.into_bytes())?;
        session.exit_status_request(channel, 0)?;
        session.eof(channel)?;
        session.close(channel)
    }
}

/// The nodes as `kubectl get nodes` prints them for `command`: `node/<name>` lines for
/// `-o name`, else the default command's four custom columns without headers.
fn kubectl_output(nodes: &[Node], command: &str) -> String {
    let names_only = ["-o name", "-oname", "--output=name", "-o=name"]
        .iter()
        .any(|form| command.contains(form));
    let none = "<none>";
    nodes
        .iter()
        .map(|n| {
            if names_only {
                return format!("node/{}\n", n.name);
            }
            let ready = match n.ready {
                Some(Readiness::Ready) => "True",
                Some(Readiness::NotReady) => "False",
                Some(Readiness::Unknown) => "Unknown",
                None => none,
            };
            format!(
                "{}   {ready}   {}   {}\n",
                n.name,
                n.system_uuid.as_deref().unwrap_or(none),
                n.provider_id.as_deref().unwrap_or(none)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, uuid: Option<&str>, ready: Option<Readiness>) -> Node {
        Node {
            name: name.into(),
            system_uuid: uuid.map(str::to_string),
            provider_id: None,
            ready,
        }
    }

    #[test]
    fn the_listing_reads_back_as_the_nodes_it_was_made_of() {
        let nodes = vec![
            node("db-control-1", Some("5f9b"), Some(Readiness::Ready)),
            node("db-node-2", None, Some(Readiness::Unknown)),
        ];
        let columns = kubectl_output(
            &nodes,
            "sudo -n kubectl get nodes --no-headers -o 'custom-columns=...'",
        );
        assert_eq!(
            crate::remote::parse_nodes(&columns).unwrap(),
            nodes,
            "{columns}"
        );
        let names = kubectl_output(&nodes, "kubectl get nodes -o name");
        assert_eq!(names, "node/db-control-1\nnode/db-node-2\n");
    }
}
