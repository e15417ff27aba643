//! Finding the cluster asked for.
use super::*;
use crate::cloudstack::model::KubernetesCluster;

fn cluster(id: &str, name: &str) -> KubernetesCluster {
    serde_json::from_value(serde_json::json!({"id": id, "name": name, "state": "Running"})).unwrap()
}

#[test]
fn a_cluster_is_found_by_id_then_by_name() {
    let all = [
        cluster("c1", "web"),
        cluster("c2", "db"),
        cluster("c3", "db"),
    ];
    assert_eq!(pick(&all, "c2").unwrap().id, "c2");
    assert_eq!(pick(&all, "web").unwrap().id, "c1");
    assert_eq!(
        pick(&all, "db").unwrap_err().to_string(),
        "2 Kubernetes clusters are named \"db\" (c2, c3); give the id instead"
    );
    assert_eq!(
        pick(&all, "x\x1b[2J").unwrap_err().to_string(),
        "no Kubernetes cluster is named or has the id \"x\\u{1b}[2J\"; `cks-drift check` lists them"
    );
}
