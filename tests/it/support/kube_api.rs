//! A tiny fake Kubernetes API (plain HTTP on 127.0.0.1) that the real kubectl can list nodes
//! from, and a kubeconfig pointing at it.
//!
//! What `kubectl get nodes -o name` and `-o custom-columns=…` ask for (seen with the client on
//! this machine): `/version`, `/api`, `/apis`, `/api/v1` (discovery) and
//! `/api/v1/nodes?limit=500` with `Accept: application/json`, so full Node objects are served:
//! `metadata.name`, `status.conditions` (the kubelet's three pressure conditions and `Ready`),
//! and `status.nodeInfo.systemUUID` and `spec.providerID` where a node has them.
//! `/usr/bin/kubectl` is Google Cloud SDK's dispatcher (`v1.32.4-dispatcher`): it reads
//! `/version` first to pick one of the versioned clients beside it
//! (`/usr/lib/google-cloud-sdk/bin/kubectl.1.NN`), so `/version` answers `v1.32.4`. It needs
//! no gcloud setup and no environment (it works under `env -i` and through sudo); pass
//! `--kubeconfig` and a private `--cache-dir` so that nothing is read from or written to the
//! user's `~/.kube`. With this server stopped it prints "The connection to the server
//! 127.0.0.1:<port> was refused - did you specify the right host or port?" and exits 1.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A node as the API serves it. `system_uuid: Some("")` is served as an empty string (what a
/// kubelet that could not read one reports); `None` leaves the field out. `ready` is the
/// status of its `Ready` condition (`True`, `False`, `Unknown`); `None` serves no conditions
/// at all, as for a node whose kubelet never posted its status.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeNode {
    pub name: String,
    pub system_uuid: Option<String>,
    pub provider_id: Option<String>,
    pub ready: Option<String>,
}

impl FakeNode {
    /// A node that is Ready, known by its name only.
    pub fn named(name: &str) -> FakeNode {
        FakeNode {
            name: name.to_string(),
            system_uuid: None,
            provider_id: None,
            ready: Some("True".to_string()),
        }
    }

    pub fn with_uuid(name: &str, system_uuid: &str) -> FakeNode {
        FakeNode {
            system_uuid: Some(system_uuid.to_string()),
            ..FakeNode::named(name)
        }
    }
}

type Nodes = Arc<Mutex<Vec<FakeNode>>>;

pub struct FakeKubeApi {
    addr: SocketAddr,
    nodes: Nodes,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl FakeKubeApi {
    /// Serves a cluster with these nodes, known by their names only.
    pub async fn start(nodes: &[&str]) -> FakeKubeApi {
        FakeKubeApi::start_with(nodes.iter().map(|n| FakeNode::named(n)).collect()).await
    }

    /// Serves a cluster with these nodes.
    pub async fn start_with(nodes: Vec<FakeNode>) -> FakeKubeApi {
        let nodes: Nodes = Arc::new(Mutex::new(nodes));
        let app = Router::new()
            .route("/version", get(version))
            .route("/api", get(api_versions))
            .route("/apis", get(api_groups))
            .route("/api/v1", get(api_v1_resources))
            .route("/api/v1/nodes", get(node_list))
            .with_state(Arc::clone(&nodes));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .expect("fake kube api");
        });
        FakeKubeApi {
            addr,
            nodes,
            shutdown: Some(shutdown),
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the node list served from now on with nodes known by their names only.
    pub fn set_nodes(&self, nodes: &[&str]) {
        self.set_node_objects(nodes.iter().map(|n| FakeNode::named(n)).collect());
    }

    /// Replaces the node list served from now on.
    pub fn set_node_objects(&self, nodes: Vec<FakeNode>) {
        *self.nodes.lock().unwrap() = nodes;
    }

    /// The nodes served now.
    pub fn nodes(&self) -> Vec<FakeNode> {
        self.nodes.lock().unwrap().clone()
    }

    /// Stops listening; kubectl then gets "connection refused".
    pub async fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("fake kube api stops within 5 s")
                .expect("fake kube api task");
        }
    }

    /// Writes a kubeconfig for this server into `dir` and returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let config = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {}\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n\
             users:\n\
             - name: fake\n  user: {{}}\n",
            self.url()
        );
        std::fs::write(&path, config).expect("write kubeconfig");
        path
    }
}

impl Drop for FakeKubeApi {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.4",
        "platform": "linux/amd64"
    }))
}

async fn api_versions() -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}
        ]
    }))
}

async fn api_groups() -> Json<Value> {
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
}

async fn api_v1_resources() -> Json<Value> {
    Json(json!({
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [{
            "name": "nodes",
            "singularName": "node",
            "namespaced": false,
            "kind": "Node",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            "shortNames": ["no"]
        }]
    }))
}

async fn node_list(State(nodes): State<Nodes>) -> Json<Value> {
    let items: Vec<Value> = nodes
        .lock()
        .unwrap()
        .iter()
        .map(|node| {
            let mut object = json!({
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"name": node.name},
                "spec": {},
                "status": {}
            });
            if let Some(uuid) = &node.system_uuid {
                object["status"]["nodeInfo"] = json!({"systemUUID": uuid});
            }
            if let Some(id) = &node.provider_id {
                object["spec"]["providerID"] = json!(id);
            }
            if let Some(ready) = &node.ready {
                // In the kubelet's order: the pressure conditions first, Ready last.
                object["status"]["conditions"] = json!([
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                    {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                    {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                    {"type": "Ready", "status": ready, "reason": "KubeletReady"},
                ]);
            }
            object
        })
        .collect();
    Json(json!({
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "1"},
        "items": items
    }))
}
