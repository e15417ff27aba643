//! Node listing over SSH against a real sshd on 127.0.0.1, running the real kubectl against a
//! fake Kubernetes API. Runs as root (sshd, login as root, sudo).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cks_drift::config::{HostKeyPolicy, SshSettings};
use cks_drift::remote::kubectl::LIST_ARGUMENTS;
use cks_drift::remote::{
    KeyError, NodeFormat, NodeListError, NodeLister, ParseError, Readiness, RemoteExit,
    SshNodeLister, SshTarget, Stage,
};
use cks_drift::snapshot::Node;

use crate::support::cloud::{TestCloud, clusters, mismatches, world_now};
use crate::support::kube_api::{FakeKubeApi, FakeNode};
use crate::support::sshd::{KeyKind, Sshd, free_port, keygen, keygen_encrypted};

const SHORT: Duration = Duration::from_secs(3);

fn settings(key: &Path, known_hosts: &Path, policy: HostKeyPolicy, command: &str) -> SshSettings {
    SshSettings {
        private_key: key.to_path_buf(),
        user: "root".to_string(),
        known_hosts: known_hosts.to_path_buf(),
        host_key_policy: policy,
        connect_timeout: SHORT,
        command_timeout: SHORT,
        command: command.to_string(),
    }
}

/// The cluster every lister test logs in to, unless it says otherwise.
const CLUSTER: &str = "5a1e7c52-0b8f-4f0e-9d3e-0c7f0f2a9b11";

fn target(port: u16) -> SshTarget {
    SshTarget {
        cluster_id: CLUSTER.to_string(),
        host: "127.0.0.1".to_string(),
        port,
        user: "root".to_string(),
        max_nodes: cks_drift::remote::MAX_NODES,
    }
}

/// known_hosts holding every host key of `sshd`.
fn trusted_known_hosts(sshd: &Sshd) -> PathBuf {
    let path = sshd.dir().join("known_hosts");
    std::fs::write(&path, sshd.known_hosts_lines()).unwrap();
    path
}

/// The default command (names, system UUIDs, provider IDs), pointed at the fake API.
fn kubectl_command(api: &FakeKubeApi, dir: &Path) -> String {
    kubectl_command_with(api, dir, LIST_ARGUMENTS)
}

/// `kubectl get nodes <arguments>` as a CKS control node runs it, pointed at the fake API.
fn kubectl_command_with(api: &FakeKubeApi, dir: &Path, arguments: &str) -> String {
    let kubeconfig = api.write_kubeconfig(dir);
    format!(
        "sudo -n /usr/bin/kubectl --kubeconfig {} --cache-dir {} get nodes {arguments}",
        kubeconfig.display(),
        dir.join("kube-cache").display()
    )
}

async fn list(settings: &SshSettings, port: u16) -> Result<Vec<Node>, NodeListError> {
    SshNodeLister::new(settings)
        .expect("load key")
        .list_nodes(&target(port))
        .await
}

fn names(names: &[&str]) -> Vec<Node> {
    names.iter().map(|n| Node::named(*n)).collect()
}

/// Nodes known by name that are Ready, as the default command lists [`FakeNode::named`].
fn ready(names: &[&str]) -> Vec<Node> {
    names
        .iter()
        .map(|n| Node {
            ready: Some(Readiness::Ready),
            ..Node::named(*n)
        })
        .collect()
}

#[tokio::test]
async fn lists_nodes_through_sshd_sudo_and_kubectl_with_a_pkcs1_rsa_key() {
    let sshd = Sshd::start();
    assert!(
        std::fs::read_to_string(sshd.client_key())
            .unwrap()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----\n")
    );
    let api = FakeKubeApi::start(&["cks-1-control-18f0c2a4b1e", "cks-1-node-18f0c2a5d37"]).await;
    let known_hosts = trusted_known_hosts(&sshd);
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        &kubectl_command(&api, sshd.dir()),
    );
    let lister = SshNodeLister::new(&settings).unwrap();

    let nodes = lister.list_nodes(&target(sshd.port())).await.unwrap();
    assert_eq!(
        nodes,
        ready(&["cks-1-control-18f0c2a4b1e", "cks-1-node-18f0c2a5d37"])
    );

    // The same lister sees the cluster change: one node gone, one added.
    api.set_nodes(&["cks-1-control-18f0c2a4b1e", "cks-1-node-18f0c2b90aa"]);
    let nodes = lister.list_nodes(&target(sshd.port())).await.unwrap();
    assert_eq!(
        nodes,
        ready(&["cks-1-control-18f0c2a4b1e", "cks-1-node-18f0c2b90aa"])
    );

    // No nodes: kubectl says "No resources found" on stderr and exits 0.
    api.set_nodes(&[]);
    let nodes = lister.list_nodes(&target(sshd.port())).await.unwrap();
    assert_eq!(nodes, Vec::<Node>::new());

    let log = sshd.log();
    assert!(
        log.contains("userauth_pubkey: publickey test pkalg rsa-sha2-512"),
        "sshd log:\n{log}"
    );
    assert!(!log.contains("pkalg ssh-rsa "), "sshd log:\n{log}");
    assert!(
        log.contains("Accepted publickey for root"),
        "sshd log:\n{log}"
    );
}

/// What the real kubectl prints for the default command's columns, read back: a node's
/// readiness, system UUID (lowercased; an empty one is none) and provider ID, `<none>` where a
/// field is not set. The previous default (no readiness column) and the command of earlier
/// releases (`-o name`) still list the same nodes, with less about each.
#[tokio::test]
async fn the_real_kubectl_lists_readiness_system_uuids_and_provider_ids() {
    let sshd = Sshd::start();
    let uuid = "0f9e8d7c-6b5a-4c3d-8e1f-0a9b8c7d6e5f";
    let provider = format!("cloudstack:///{uuid}");
    let api = FakeKubeApi::start_with(vec![
        FakeNode {
            name: "web-control-18f0c2a4b1e".into(),
            system_uuid: Some(uuid.to_uppercase()),
            provider_id: Some(provider.clone()),
            ready: Some("True".into()),
        },
        FakeNode {
            ready: Some("False".into()),
            ..FakeNode::with_uuid("web-node-18f0c2a5d37", "")
        },
        FakeNode {
            ready: None,
            ..FakeNode::named("web-node-18f0c2a5e42.k8s.example.com")
        },
        FakeNode {
            name: "gpu-1".into(),
            system_uuid: None,
            provider_id: Some("external-cloudstack:///5d1c00c8-7a2b-4c3d-8e9f-0a1b2c3d4e5f".into()),
            ready: Some("Unknown".into()),
        },
    ])
    .await;
    let known_hosts = trusted_known_hosts(&sshd);
    let columns = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        &kubectl_command(&api, sshd.dir()),
    );
    assert_eq!(
        list(&columns, sshd.port()).await.unwrap(),
        [
            Node {
                name: "web-control-18f0c2a4b1e".into(),
                system_uuid: Some(uuid.into()),
                provider_id: Some(provider.clone()),
                ready: Some(Readiness::Ready),
            },
            Node {
                ready: Some(Readiness::NotReady),
                ..Node::named("web-node-18f0c2a5d37")
            },
            Node::named("web-node-18f0c2a5e42.k8s.example.com"),
            Node {
                name: "gpu-1".into(),
                system_uuid: None,
                provider_id: Some(
                    "external-cloudstack:///5d1c00c8-7a2b-4c3d-8e9f-0a1b2c3d4e5f".into()
                ),
                ready: Some(Readiness::Unknown),
            },
        ]
    );

    let previous_default = SshSettings {
        command: kubectl_command_with(
            &api,
            sshd.dir(),
            "--no-headers -o custom-columns=NAME:.metadata.name,\
             UUID:.status.nodeInfo.systemUUID,PROVIDER:.spec.providerID",
        ),
        ..columns.clone()
    };
    let listed = list(&previous_default, sshd.port()).await.unwrap();
    assert_eq!(
        listed[0],
        Node {
            name: "web-control-18f0c2a4b1e".into(),
            system_uuid: Some(uuid.into()),
            provider_id: Some(provider),
            ready: None,
        }
    );
    assert!(listed.iter().all(|n| n.ready.is_none()), "{listed:?}");
    assert_eq!(listed.len(), 4);

    let names_only = SshSettings {
        command: kubectl_command_with(&api, sshd.dir(), "-o name"),
        ..columns.clone()
    };
    assert_eq!(
        list(&names_only, sshd.port()).await.unwrap(),
        names(&[
            "web-control-18f0c2a4b1e",
            "web-node-18f0c2a5d37",
            "web-node-18f0c2a5e42.k8s.example.com",
            "gpu-1"
        ])
    );

    // kubectl does not escape what a field holds: a tenant's provider ID with a space spoils
    // the list rather than shift its columns.
    api.set_node_objects(vec![
        FakeNode::with_uuid("web-control-18f0c2a4b1e", uuid),
        FakeNode {
            provider_id: Some("cloudstack:///a b".into()),
            ..FakeNode::named("web-node-18f0c2a5d37")
        },
    ]);
    match list(&columns, sshd.port()).await.unwrap_err() {
        NodeListError::Output { source, .. } => {
            assert_eq!((source.line, source.format), (2, NodeFormat::Columns));
            // Cut at 80 characters, padding included.
            assert_eq!(
                source.excerpt.split_whitespace().collect::<Vec<_>>(),
                ["web-node-18f0c2a5d37", "True", "<none>", "cloudsta"],
                "{source:?}"
            );
        }
        other => panic!("expected Output, got {other:?}"),
    }
}

#[tokio::test]
async fn an_openssh_ed25519_key_works() {
    let sshd = Sshd::start();
    let key = keygen(&sshd.dir().join("id_ed25519"), KeyKind::Ed25519);
    sshd.authorize(&key);
    let settings = settings(
        &key,
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "printf 'node/worker-1.example.com\\nnode/worker-2.example.com\\n'",
    );

    let nodes = list(&settings, sshd.port()).await.unwrap();

    assert_eq!(
        nodes,
        names(&["worker-1.example.com", "worker-2.example.com"])
    );
    let log = sshd.log();
    assert!(
        log.contains("publickey test pkalg ssh-ed25519"),
        "sshd log:\n{log}"
    );
}

#[tokio::test]
async fn an_openssh_rsa_key_works() {
    let sshd = Sshd::start();
    let key_path = sshd.dir().join("id_rsa");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f"])
        .arg(&key_path)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        std::fs::read_to_string(&key_path)
            .unwrap()
            .starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    );
    sshd.authorize(&key_path);
    let settings = settings(
        &key_path,
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "echo node/a",
    );

    assert_eq!(list(&settings, sshd.port()).await.unwrap(), names(&["a"]));
    assert!(sshd.log().contains("publickey test pkalg rsa-sha2-512"));
}

#[tokio::test]
async fn accept_new_learns_a_new_host_then_trusts_it() {
    let sshd = Sshd::start();
    let known_hosts = sshd.dir().join("state/ssh/known_hosts");
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    );
    let lister = SshNodeLister::new(&settings).unwrap();

    assert_eq!(
        lister.list_nodes(&target(sshd.port())).await.unwrap(),
        names(&["a"])
    );
    let learned = format!(
        "[127.0.0.1]:{} {} cks-drift-cluster={CLUSTER}\n",
        sshd.port(),
        sshd.host_keys()[0]
    );
    assert!(learned.contains(" ssh-ed25519 "));
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), learned);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&known_hosts)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Second connection: known now, nothing appended.
    assert_eq!(
        lister.list_nodes(&target(sshd.port())).await.unwrap(),
        names(&["a"])
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), learned);
}

#[tokio::test]
async fn concurrent_first_connections_learn_a_host_once() {
    let sshd = Sshd::start();
    let known_hosts = sshd.dir().join("known_hosts");
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    );
    let lister = SshNodeLister::new(&settings).unwrap();
    let target = target(sshd.port());

    let (first, second, third) = tokio::join!(
        lister.list_nodes(&target),
        lister.list_nodes(&target),
        lister.list_nodes(&target)
    );

    for result in [first, second, third] {
        assert_eq!(result.unwrap(), names(&["a"]));
    }
    assert_eq!(
        std::fs::read_to_string(&known_hosts).unwrap(),
        format!(
            "[127.0.0.1]:{} {} cks-drift-cluster={CLUSTER}\n",
            sshd.port(),
            sshd.host_keys()[0]
        )
    );
}

#[tokio::test]
async fn accept_new_refuses_a_rebuilt_node() {
    let sshd = Sshd::start();
    let port = sshd.port();
    let state = tempfile::tempdir().unwrap();
    let known_hosts = state.path().join("known_hosts");
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    );
    let lister = SshNodeLister::new(&settings).unwrap();
    assert_eq!(
        lister.list_nodes(&target(port)).await.unwrap(),
        names(&["a"])
    );
    let learned = std::fs::read_to_string(&known_hosts).unwrap();

    // The node is rebuilt: same address, new host keys.
    sshd.stop();
    let rebuilt = Sshd::start_on(port);

    let err = lister.list_nodes(&target(port)).await.unwrap_err();

    match &err {
        NodeListError::HostKeyChanged {
            host,
            port: p,
            presented,
            known_hosts: path,
            line,
            cluster,
        } => {
            assert_eq!(host, "127.0.0.1");
            assert_eq!(*p, port);
            assert_eq!(presented, "ssh-ed25519");
            assert_eq!(path, &known_hosts);
            assert_eq!(*line, 1);
            assert_eq!(cluster.as_deref(), Some(CLUSTER));
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    assert_eq!(err.reason(), "host_key");
    assert_eq!(
        err.to_string(),
        format!(
            "host key of 127.0.0.1:{port} (ssh-ed25519) does not match the one recorded for \
             cluster {CLUSTER} at {kh}:1; if the node was rebuilt, remove the stale entry \
             (ssh-keygen -R '[127.0.0.1]:{port}' -f {kh})",
            kh = known_hosts.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), learned);
    // Refused before authentication: the rebuilt node never saw our key.
    assert!(!rebuilt.log().contains("userauth_pubkey"));
}

/// The ids CloudStack listed in a cycle.
fn listed(ids: &[&str]) -> HashSet<String> {
    ids.iter().map(|id| id.to_string()).collect()
}

/// `target(port)` of another cluster.
fn target_of(cluster: &str, port: u16) -> SshTarget {
    SshTarget {
        cluster_id: cluster.to_string(),
        ..target(port)
    }
}

/// CloudStack hands a deleted cluster's public IP to the next network that asks, maybe
/// another tenant's: the key learned for the old cluster says nothing of the new one.
#[tokio::test]
async fn a_new_cluster_at_a_known_address_is_learned_and_the_one_gone_forgotten() {
    let sshd = Sshd::start();
    let port = sshd.port();
    let state = tempfile::tempdir().unwrap();
    let key = state.path().join("client_key");
    std::fs::copy(sshd.client_key(), &key).unwrap();
    let known_hosts = state.path().join("known_hosts");
    let lister = SshNodeLister::new(&settings(
        &key,
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    ))
    .unwrap();
    assert_eq!(
        lister.list_nodes(&target_of("c-old", port)).await.unwrap(),
        names(&["a"])
    );
    let old = format!(
        "[127.0.0.1]:{port} {} cks-drift-cluster=c-old\n",
        sshd.host_keys()[0]
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), old);

    // Another machine at the address, with host keys of its own.
    let client_public = std::fs::read_to_string(sshd.client_key().with_extension("pub")).unwrap();
    sshd.stop();
    let new_node = Sshd::start_on(port);
    std::fs::write(key.with_extension("pub"), client_public).unwrap();
    new_node.authorize(&key);
    assert_eq!(
        lister.list_nodes(&target_of("c-new", port)).await.unwrap(),
        names(&["a"])
    );
    let new = format!(
        "[127.0.0.1]:{port} {} cks-drift-cluster=c-new\n",
        new_node.host_keys()[0]
    );
    assert_eq!(
        std::fs::read_to_string(&known_hosts).unwrap(),
        format!("{old}{new}")
    );

    // An empty set is never "every cluster is gone".
    assert_eq!(lister.forget(&listed(&[])).await.unwrap(), 0);
    assert_eq!(lister.forget(&listed(&["c-new"])).await.unwrap(), 1);
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), new);
}

/// A file of an earlier release records addresses only: its keys stay trusted, and go to the
/// cluster that presents them first, which keeps them while CloudStack lists it.
#[tokio::test]
async fn an_entry_without_a_cluster_is_kept_for_the_first_cluster_that_presents_its_key() {
    let sshd = Sshd::start();
    let port = sshd.port();
    let state = tempfile::tempdir().unwrap();
    let known_hosts = state.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!("# control nodes\n{}", sshd.known_hosts_lines()),
    )
    .unwrap();
    let lister = SshNodeLister::new(&settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    ))
    .unwrap();

    assert_eq!(
        lister.list_nodes(&target(port)).await.unwrap(),
        names(&["a"])
    );
    let claimed = format!(
        "# control nodes\n[127.0.0.1]:{port} {} cks-drift-cluster={CLUSTER}\n\
         [127.0.0.1]:{port} {} cks-drift-cluster={CLUSTER}\n",
        sshd.host_keys()[0],
        sshd.host_keys()[1]
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), claimed);
    assert_eq!(lister.forget(&listed(&[CLUSTER])).await.unwrap(), 0);
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), claimed);

    // The node comes back with other keys: still refused for that cluster.
    sshd.stop();
    let _rebuilt = Sshd::start_on(port);
    let err = lister.list_nodes(&target(port)).await.unwrap_err();
    assert!(
        matches!(&err, NodeListError::HostKeyChanged { line: 2, cluster: Some(c), .. } if c == CLUSTER),
        "{err:?}"
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), claimed);
}

/// With `strict` the file is the operator's: an entry without a cluster stands for the
/// address whichever cluster is there, one with a cluster for that cluster alone, and
/// nothing is written or dropped.
#[tokio::test]
async fn strict_trusts_the_operators_entries_as_written_and_never_writes() {
    let sshd = Sshd::start();
    let port = sshd.port();
    let known_hosts = trusted_known_hosts(&sshd);
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        "echo node/a",
    );
    let lister = SshNodeLister::new(&settings).unwrap();
    for cluster in ["c-1", "c-2"] {
        assert_eq!(
            lister.list_nodes(&target_of(cluster, port)).await.unwrap(),
            names(&["a"])
        );
    }
    assert_eq!(lister.forget(&listed(&["c-3"])).await.unwrap(), 0);
    assert_eq!(
        std::fs::read_to_string(&known_hosts).unwrap(),
        sshd.known_hosts_lines()
    );

    let pinned = format!(
        "[127.0.0.1]:{port} {} cks-drift-cluster=c-1\n",
        sshd.host_keys()[0]
    );
    std::fs::write(&known_hosts, &pinned).unwrap();
    assert_eq!(
        lister.list_nodes(&target_of("c-1", port)).await.unwrap(),
        names(&["a"])
    );
    let err = lister
        .list_nodes(&target_of("c-2", port))
        .await
        .unwrap_err();
    assert!(
        matches!(err, NodeListError::HostKeyUnknown { .. }),
        "{err:?}"
    );
    assert_eq!(lister.forget(&listed(&["c-2"])).await.unwrap(), 0);
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), pinned);
}

/// Cluster A of one owner is deleted and its address given to cluster B of another, with
/// other host keys: B is compared in full and its findings reported, and A's key is dropped
/// once a listing that shows clusters no longer shows A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_at_the_address_of_another_owners_deleted_cluster_is_compared_in_full() {
    let mut world = world_now();
    let domain = world.root_domain_id().to_string();
    let one = world.add_account("one", &domain);
    let two = world.add_account("two", &domain);
    let a = world.add_cluster("alpha", one, 1, 1, 0);
    let mut cloud = TestCloud::start(world).await;
    cloud.control_node(&a).await;
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(
        clusters(&report),
        vec![("alpha".into(), "checked".into(), None)],
        "{}",
        run.stderr
    );
    let known_hosts = cloud.dir.path().join("known_hosts");
    let ip = cloud.node(&a).ip;
    let a_key = cloud.node(&a).sshd.as_ref().unwrap().host_keys()[0].clone();
    let a_entry = format!("[{ip}]:2222 {a_key} cks-drift-cluster={a}\n");
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), a_entry);

    // A is deleted. A listing of no cluster is not "every cluster is gone".
    cloud.sim().with_world(|w| {
        for vm in w.cluster(&a).unwrap().map.clone() {
            w.expunge_vm(&vm);
        }
        w.destroy_cluster(&a);
    });
    let (_, node) = cloud.nodes.remove(0);
    node.sshd.unwrap().stop();
    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(clusters(&report), vec![]);
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), a_entry);

    // B, of owner two, at A's address with host keys of its own; one node is not a VM.
    let b = cloud
        .sim()
        .with_world(|w| w.add_cluster("beta", two, 1, 1, 0));
    cloud.control_node_at(&b, ip, 2222).await;
    let mut nodes = cloud.node_names(&b);
    nodes.push("stray".into());
    let refs: Vec<&str> = nodes.iter().map(String::as_str).collect();
    cloud.node(&b).kube.set_nodes(&refs);
    let b_key = cloud.node(&b).sshd.as_ref().unwrap().host_keys()[0].clone();
    assert_ne!(a_key, b_key);

    let (run, report) = cloud.check_json(&[]).await;
    assert_eq!(
        clusters(&report),
        vec![("beta".into(), "checked".into(), None)],
        "{}",
        run.stderr
    );
    assert_eq!(
        mismatches(&report),
        vec![(
            "node_without_vm".into(),
            "node_without_vm:stray".into(),
            Some(true)
        )]
    );
    assert_eq!(
        std::fs::read_to_string(&known_hosts).unwrap(),
        format!("[{ip}]:2222 {b_key} cks-drift-cluster={b}\n")
    );
}

#[tokio::test]
async fn strict_refuses_a_changed_key_naming_its_line() {
    let sshd = Sshd::start();
    let other = keygen(&sshd.dir().join("other"), KeyKind::Ed25519);
    let other_public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let other_public: Vec<&str> = other_public.split_whitespace().take(2).collect();
    let known_hosts = sshd.dir().join("known_hosts");
    let content = format!(
        "# control nodes\n10.1.1.1 {}\n[127.0.0.1]:{} {}\n",
        sshd.host_keys()[0],
        sshd.port(),
        other_public.join(" ")
    );
    std::fs::write(&known_hosts, &content).unwrap();
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        "echo node/a",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    assert!(
        matches!(err, NodeListError::HostKeyChanged { line: 3, .. }),
        "{err:?}"
    );
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), content);
}

#[tokio::test]
async fn a_host_recorded_with_only_another_algorithm_is_refused_as_changed() {
    let sshd = Sshd::start();
    let rsa_host_key = &sshd.host_keys()[1];
    assert!(rsa_host_key.starts_with("ssh-rsa "));
    let known_hosts = sshd.dir().join("known_hosts");
    let content = format!("[127.0.0.1]:{} {rsa_host_key}\n", sshd.port());
    std::fs::write(&known_hosts, &content).unwrap();
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::AcceptNew,
        "echo node/a",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    match &err {
        NodeListError::HostKeyChanged {
            presented, line, ..
        } => {
            assert_eq!(presented, "ssh-ed25519");
            assert_eq!(*line, 1);
        }
        other => panic!("expected HostKeyChanged, got {other:?}"),
    }
    // Not learned as a second key.
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), content);
}

#[tokio::test]
async fn strict_refuses_an_unknown_host() {
    let sshd = Sshd::start();
    let known_hosts = sshd.dir().join("known_hosts");
    std::fs::write(&known_hosts, "").unwrap();
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        "echo node/a",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    assert_eq!(
        err.to_string(),
        format!(
            "host key of 127.0.0.1:{} is not in {} and ssh.host_key_policy is strict",
            sshd.port(),
            known_hosts.display()
        )
    );
    assert!(matches!(err, NodeListError::HostKeyUnknown { .. }));
    assert_eq!(err.reason(), "host_key");
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), "");

    // A missing file is the same as an empty one, and is not created.
    let missing = sshd.dir().join("absent/known_hosts");
    let settings = SshSettings {
        known_hosts: missing.clone(),
        ..settings
    };
    let err = list(&settings, sshd.port()).await.unwrap_err();
    assert!(
        matches!(err, NodeListError::HostKeyUnknown { .. }),
        "{err:?}"
    );
    assert!(!missing.exists());
}

#[tokio::test]
async fn policy_off_accepts_any_host_key() {
    let sshd = Sshd::start();
    let other = keygen(&sshd.dir().join("other"), KeyKind::Ed25519);
    let other_public = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let known_hosts = sshd.dir().join("known_hosts");
    let content = format!("[127.0.0.1]:{} {other_public}", sshd.port());
    std::fs::write(&known_hosts, &content).unwrap();
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Off,
        "echo node/a",
    );

    assert_eq!(list(&settings, sshd.port()).await.unwrap(), names(&["a"]));
    assert_eq!(std::fs::read_to_string(&known_hosts).unwrap(), content);
}

#[tokio::test]
async fn a_key_that_is_not_authorized_is_refused_naming_user_and_key() {
    let sshd = Sshd::start();
    let known_hosts = trusted_known_hosts(&sshd);

    let rsa = keygen(&sshd.dir().join("stranger_rsa"), KeyKind::RsaPkcs1);
    let settings_rsa = settings(&rsa, &known_hosts, HostKeyPolicy::Strict, "echo node/a");
    let err = list(&settings_rsa, sshd.port()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "127.0.0.1:{} rejected user root with key {} \
             (ssh.private_key, offered as rsa-sha2-512, rsa-sha2-256)",
            sshd.port(),
            rsa.display()
        )
    );
    assert_eq!(err.reason(), "auth");

    let ed = keygen(&sshd.dir().join("stranger_ed25519"), KeyKind::Ed25519);
    let settings_ed = settings(&ed, &known_hosts, HostKeyPolicy::Strict, "echo node/a");
    match list(&settings_ed, sshd.port()).await.unwrap_err() {
        NodeListError::Auth {
            user,
            key_file,
            offered,
            ..
        } => {
            assert_eq!(user, "root");
            assert_eq!(key_file, ed);
            assert_eq!(offered, "ssh-ed25519");
        }
        other => panic!("expected Auth, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_user_is_refused_naming_the_user() {
    let sshd = Sshd::start();
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "echo node/a",
    );
    let target = SshTarget {
        user: "cks-no-such-user".to_string(),
        ..target(sshd.port())
    };

    let err = SshNodeLister::new(&settings)
        .unwrap()
        .list_nodes(&target)
        .await
        .unwrap_err();

    match &err {
        NodeListError::Auth { user, host, .. } => {
            assert_eq!(user, "cks-no-such-user");
            assert_eq!(host, "127.0.0.1");
        }
        other => panic!("expected Auth, got {other:?}"),
    }
    assert!(err.to_string().contains("rejected user cks-no-such-user"));
}

#[tokio::test]
async fn kubectl_failing_is_a_command_error_with_its_stderr_line() {
    let sshd = Sshd::start();
    let mut api = FakeKubeApi::start(&["a"]).await;
    let command = kubectl_command(&api, sshd.dir());
    let api_addr = api.addr();
    api.stop().await;
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        &command,
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    match &err {
        NodeListError::Command { exit, stderr, .. } => {
            assert_eq!(*exit, RemoteExit::Status(1));
            assert_eq!(
                stderr,
                &format!(
                    "The connection to the server {api_addr} was refused - \
                     did you specify the right host or port?"
                )
            );
        }
        other => panic!("expected Command, got {other:?}"),
    }
    assert_eq!(err.reason(), "command");
}

#[tokio::test]
async fn sudo_without_a_rule_is_a_command_error() {
    let sshd = Sshd::start();
    // Root becomes `nobody`, who has no sudo rule: the situation of a login user without
    // NOPASSWD on a control node.
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "sudo -n -u nobody sudo -n /usr/bin/kubectl get nodes -o name",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    assert_eq!(
        err.to_string(),
        format!(
            "command on 127.0.0.1:{} exited with status 1: sudo: a password is required",
            sshd.port()
        )
    );
}

#[tokio::test]
async fn a_failing_command_carries_status_and_last_stderr_line() {
    let sshd = Sshd::start();
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "sh -c 'echo node/a; echo first >&2; echo \"error: summary\" >&2; echo >&2; exit 3'",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    assert_eq!(
        err.to_string(),
        format!(
            "command on 127.0.0.1:{} exited with status 3: error: summary",
            sshd.port()
        )
    );
}

#[tokio::test]
async fn a_killed_command_is_a_command_error() {
    let sshd = Sshd::start();
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "sh -c 'echo node/a; kill -KILL $$'",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    match &err {
        NodeListError::Command { exit, .. } => assert_eq!(
            *exit,
            RemoteExit::Signal {
                name: "KILL".to_string(),
                core_dumped: false
            }
        ),
        other => panic!("expected Command, got {other:?}"),
    }
    assert_eq!(err.reason(), "command");
}

#[tokio::test]
async fn output_that_is_not_a_node_list_is_refused() {
    let sshd = Sshd::start();
    let known_hosts = trusted_known_hosts(&sshd);
    let settings = settings(
        sshd.client_key(),
        &known_hosts,
        HostKeyPolicy::Strict,
        "printf 'node/a\\r\\nLast login: Mon Nov 30\\r\\n'",
    );

    let err = list(&settings, sshd.port()).await.unwrap_err();

    match &err {
        NodeListError::Output { source, .. } => assert_eq!(
            *source,
            ParseError {
                line: 2,
                excerpt: "Last login: Mon Nov 30".to_string(),
                format: NodeFormat::Names,
            }
        ),
        other => panic!("expected Output, got {other:?}"),
    }
    assert_eq!(err.reason(), "output");

    // 5 MB without a line break: stopped at the first 4 KiB, longer than any node line.
    let flood = SshSettings {
        command: "head -c 5000000 /dev/zero".to_string(),
        ..settings.clone()
    };
    let err = list(&flood, sshd.port()).await.unwrap_err();
    assert!(
        matches!(err, NodeListError::LineTooLong { limit: 4096, .. }),
        "{err:?}"
    );
    assert_eq!(err.reason(), "output");
    // Node lines without end: stopped past the cluster's bound (26 nodes for a cluster of
    // 3 VMs), not read to the 4 MiB limit.
    let flood = SshSettings {
        command: "yes node/fake".to_string(),
        ..settings.clone()
    };
    let lister = SshNodeLister::new(&flood).expect("load key");
    let bounded = SshTarget {
        max_nodes: cks_drift::remote::node_bound(3),
        ..target(sshd.port())
    };
    let err = lister.list_nodes(&bounded).await.unwrap_err();
    assert!(
        matches!(err, NodeListError::TooManyNodes { max_nodes: 26, .. }),
        "{err:?}"
    );
    let port = sshd.port();
    assert_eq!(
        err.to_string(),
        format!(
            "the command on 127.0.0.1:{port} printed more than 26 node lines, more than the cluster can have (twice its VMs and 20 more); the list is not compared"
        )
    );
    // Long lines under the line limit, many of them: the byte limit still holds.
    let flood = SshSettings {
        command: "sh -c 'yes $(printf %04000d 0)'".to_string(),
        ..settings
    };
    let err = list(&flood, sshd.port()).await.unwrap_err();
    assert!(
        matches!(err, NodeListError::OutputTooLarge { limit: 4194304, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_command_slower_than_command_timeout_times_out_and_is_stopped_remotely() {
    let sshd = Sshd::start();
    let pid_file = sshd.dir().join("sleep.pid");
    let command = format!("sh -c 'echo $$ > {}; exec sleep 30'", pid_file.display());
    // Long enough for the remote shell to start and write its pid on a busy machine: the
    // remote `timeout` counts from when sshd starts the command.
    let timeout = Duration::from_secs(3);
    let settings = SshSettings {
        command_timeout: timeout,
        ..settings(
            sshd.client_key(),
            &trusted_known_hosts(&sshd),
            HostKeyPolicy::Strict,
            &command,
        )
    };

    let err = list(&settings, sshd.port()).await.unwrap_err();

    match &err {
        NodeListError::Timeout { stage, after, .. } => {
            assert_eq!(*stage, Stage::Command);
            assert_eq!(*after, timeout);
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert_eq!(err.reason(), "timeout");

    // The remote `timeout 3s` stops the sleep although nobody is connected any more. The pid
    // file is written as the shell starts; it is waited for, not assumed.
    let mut waited = Duration::ZERO;
    while !pid_file.exists() && waited < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    let mut waited = Duration::ZERO;
    while proc_dir.exists() && waited < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }
    assert!(
        !proc_dir.exists(),
        "remote sleep {} still running",
        pid.trim()
    );
}

#[tokio::test]
async fn a_port_with_nothing_listening_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let port = free_port();
    let settings = settings(
        &key,
        &dir.path().join("known_hosts"),
        HostKeyPolicy::Strict,
        "echo node/a",
    );

    let err = list(&settings, port).await.unwrap_err();

    match &err {
        NodeListError::Connect { host, source, .. } => {
            assert_eq!(host, "127.0.0.1");
            assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
        }
        other => panic!("expected Connect, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("cannot connect to 127.0.0.1:{port}")
    );
    assert_eq!(err.reason(), "connect");
}

#[tokio::test]
async fn a_server_that_never_sends_a_banner_times_out_in_key_exchange() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let settings = SshSettings {
        connect_timeout: Duration::from_secs(1),
        ..settings(
            &key,
            &dir.path().join("known_hosts"),
            HostKeyPolicy::Strict,
            "echo node/a",
        )
    };

    let err = list(&settings, port).await.unwrap_err();
    silent.abort();

    match &err {
        NodeListError::Timeout { stage, after, .. } => {
            assert_eq!(*stage, Stage::KeyExchange);
            assert_eq!(*after, Duration::from_secs(1));
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("127.0.0.1:{port} did not complete key exchange within 1s (ssh.connect_timeout)")
    );
}

#[test]
fn supported_key_formats_load_and_stay_out_of_debug_output() {
    let dir = tempfile::tempdir().unwrap();
    let pkcs1 = keygen(&dir.path().join("pkcs1"), KeyKind::RsaPkcs1);
    let ed25519 = keygen(&dir.path().join("ed25519"), KeyKind::Ed25519);
    for key in [pkcs1, ed25519] {
        let settings = settings(
            &key,
            &dir.path().join("known_hosts"),
            HostKeyPolicy::Strict,
            "true",
        );
        let lister = SshNodeLister::new(&settings).unwrap();
        let debug = format!("{lister:?}");
        let secret = std::fs::read_to_string(&key).unwrap();
        let body_line = secret.lines().nth(1).unwrap();
        assert!(!debug.contains(body_line), "{debug}");
        assert!(debug.contains(&key.display().to_string()), "{debug}");
    }
}

fn key_error(path: &Path) -> KeyError {
    let settings = settings(
        path,
        Path::new("/nonexistent/known_hosts"),
        HostKeyPolicy::Strict,
        "true",
    );
    SshNodeLister::new(&settings).unwrap_err()
}

#[test]
fn a_missing_key_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("id_rsa");
    let err = key_error(&path);
    assert!(matches!(err, KeyError::Missing { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "ssh.private_key: {} does not exist; point ssh.private_key at the management \
             server's key or at the private half of the clusters' key pair",
            path.display()
        )
    );
}

#[test]
fn an_unreadable_key_file_is_named() {
    // A directory: unreadable even for root, unlike a mode-000 file.
    let dir = tempfile::tempdir().unwrap();
    let err = key_error(dir.path());
    assert!(matches!(err, KeyError::Unreadable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("ssh.private_key: cannot read {}", dir.path().display())
    );
}

#[test]
fn a_file_that_is_not_a_private_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "<html>not a key</html>\n").unwrap();
    let private = keygen(&dir.path().join("id"), KeyKind::Ed25519);
    let err = key_error(&text);
    assert!(matches!(err, KeyError::NotAKey { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "ssh.private_key: {} is not a private key \
             (expected PEM RSA, OpenSSH RSA or OpenSSH ed25519)",
            text.display()
        )
    );
    // A public key is named as one, with where its private half usually is.
    let public = private.with_extension("pub");
    let err = key_error(&public);
    assert!(matches!(err, KeyError::PublicKey { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "ssh.private_key: {} is a public key; give its private half, usually {}",
            public.display(),
            private.display()
        )
    );
}

#[test]
fn an_encrypted_key_is_refused_saying_passphrases_are_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let pem = keygen_encrypted(&dir.path().join("pem"), KeyKind::RsaPkcs1, "s3cret-pass");
    let openssh = keygen_encrypted(&dir.path().join("openssh"), KeyKind::Ed25519, "s3cret-pass");
    for path in [pem, openssh] {
        let err = key_error(&path);
        assert!(matches!(err, KeyError::Encrypted { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "ssh.private_key: {} is encrypted and passphrases are not supported; \
                 give an unencrypted key (ssh-keygen -p -N '' -f <copy of the key>)",
                path.display()
            )
        );
    }
}

/// Sockets of this process connected to `port` on the loopback: what a listing left open.
fn sockets_to(port: u16) -> usize {
    let mut inodes = std::collections::HashSet::new();
    let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let remote_port = cols[2].rsplit(':').next().unwrap();
        if u16::from_str_radix(remote_port, 16) == Ok(port) {
            inodes.insert(format!("socket:[{}]", cols[9]));
        }
    }
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| inodes.contains(target.to_string_lossy().as_ref()))
        .count()
}

/// [`sockets_to`], once the session tasks had up to 2 s to see their connections end.
async fn settled_sockets_to(port: u16) -> usize {
    let mut open = sockets_to(port);
    for _ in 0..20 {
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        open = sockets_to(port);
    }
    open
}

/// A hostile control node: it sends its banner, never goes on with the key exchange, and
/// sends `SSH_MSG_IGNORE` every 200 ms to keep an inactivity timer alive. It closes a
/// connection only when the client does.
async fn stalling_peer() -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut rx, mut tx) = stream.into_split();
                // packet_length 12, padding 6, SSH_MSG_IGNORE with an empty string.
                let ignore = [0, 0, 0, 12, 6, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                let writer = tokio::spawn(async move {
                    if tx.write_all(b"SSH-2.0-stall\r\n").await.is_err() {
                        return;
                    }
                    loop {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        if tx.write_all(&ignore).await.is_err() {
                            return;
                        }
                    }
                });
                let mut buf = [0u8; 4096];
                while matches!(rx.read(&mut buf).await, Ok(n) if n > 0) {}
                writer.abort();
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn stalled_key_exchanges_leave_no_socket_behind() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let (port, peer) = stalling_peer().await;
    let settings = SshSettings {
        connect_timeout: Duration::from_secs(1),
        // A session task left behind would only stop after both, a minute from now.
        command_timeout: Duration::from_secs(60),
        ..settings(
            &key,
            &dir.path().join("known_hosts"),
            HostKeyPolicy::AcceptNew,
            "echo node/a",
        )
    };
    let lister = std::sync::Arc::new(SshNodeLister::new(&settings).unwrap());
    let mut listings = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let lister = lister.clone();
        listings.spawn(async move { lister.list_nodes(&target(port)).await });
    }
    while let Some(result) = listings.join_next().await {
        match result.unwrap() {
            Err(NodeListError::Timeout { stage, .. }) => assert_eq!(stage, Stage::KeyExchange),
            other => panic!("expected a key exchange timeout, got {other:?}"),
        }
    }
    // The connections end with the listings.
    let open = settled_sockets_to(port).await;
    peer.abort();
    assert_eq!(open, 0, "sockets still open to the stalling peer");
}

#[tokio::test]
async fn listings_against_a_real_sshd_leave_no_socket_behind() {
    let sshd = Sshd::start();
    let settings = settings(
        sshd.client_key(),
        &trusted_known_hosts(&sshd),
        HostKeyPolicy::Strict,
        "echo node/a",
    );
    for _ in 0..20 {
        assert_eq!(list(&settings, sshd.port()).await.unwrap(), names(&["a"]));
    }
    assert_eq!(
        settled_sockets_to(sshd.port()).await,
        0,
        "sockets still open to sshd"
    );
}

/// A control node that, asked to run the listing, first tries to open channels towards the
/// client (a forwarded port, X11), records whether the client took them, then answers.
struct ChannelOpener {
    results: std::sync::Arc<std::sync::Mutex<Vec<(&'static str, bool)>>>,
}

impl russh::server::Handler for ChannelOpener {
    type Error = russh::Error;

    async fn auth_publickey(
        &mut self,
        _: &str,
        _: russh::server::VerifiedPublicKey<'_>,
    ) -> Result<russh::server::Auth, Self::Error> {
        Ok(russh::server::Auth::Accept)
    }

    async fn channel_open_session(
        &mut self,
        _: russh::Channel<russh::server::Msg>,
        reply: russh::server::ChannelOpenHandle,
        _: &mut russh::server::Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: russh::ChannelId,
        _: &[u8],
        session: &mut russh::server::Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)?;
        let handle = session.handle();
        let results = self.results.clone();
        tokio::spawn(async move {
            let forwarded = handle
                .channel_open_forwarded_tcpip("127.0.0.1", 8080, "203.0.113.9", 40000)
                .await
                .is_ok();
            let x11 = handle.channel_open_x11("203.0.113.9", 6000).await.is_ok();
            results
                .lock()
                .unwrap()
                .extend([("forwarded-tcpip", forwarded), ("x11", x11)]);
            let _ = handle.data(channel, b"node/a\n".to_vec()).await;
            let _ = handle.exit_status_request(channel, 0).await;
            let _ = handle.eof(channel).await;
            let _ = handle.close(channel).await;
        });
        Ok(())
    }
}

#[tokio::test]
async fn channels_a_control_node_opens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let client_key = keygen(&dir.path().join("id_ed25519"), KeyKind::Ed25519);
    let host_key = keygen(&dir.path().join("host_ed25519"), KeyKind::Ed25519);
    let config = std::sync::Arc::new(russh::server::Config {
        keys: vec![russh::keys::load_secret_key(&host_key, None).unwrap()],
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let results = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = ChannelOpener {
        results: results.clone(),
    };
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let session = russh::server::run_stream(config, stream, handler).await;
        if let Ok(session) = session {
            let _ = session.await;
        }
    });
    let settings = settings(
        &client_key,
        &dir.path().join("known_hosts"),
        HostKeyPolicy::AcceptNew,
        "kubectl get nodes -o name",
    );
    assert_eq!(list(&settings, port).await.unwrap(), names(&["a"]));
    server.abort();
    assert_eq!(
        *results.lock().unwrap(),
        [("forwarded-tcpip", false), ("x11", false)]
    );
}
